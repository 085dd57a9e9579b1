//! A (bytes, packets) pair, the unit every row and bucket accumulates.

/// Cumulative bytes and packets. Additions saturate: a billing counter that
/// wrapped to a small number would read as a decrease, which is worse than a
/// counter pinned at `u64::MAX` (18 EB, never reached in practice).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// L2 bytes (`skb->len`).
    pub bytes: u64,
    /// skb count.
    pub packets: u64,
}

impl Counts {
    /// A pair from its two parts.
    #[must_use]
    pub const fn new(bytes: u64, packets: u64) -> Self {
        Counts { bytes, packets }
    }

    /// Adds `other` into `self`, saturating.
    pub fn add(&mut self, other: Counts) {
        self.bytes = self.bytes.saturating_add(other.bytes);
        self.packets = self.packets.saturating_add(other.packets);
    }

    /// `self + other`, saturating.
    #[must_use]
    pub fn plus(self, other: Counts) -> Counts {
        let mut out = self;
        out.add(other);
        out
    }

    /// Both parts are zero.
    #[must_use]
    pub fn is_zero(self) -> bool {
        self.bytes == 0 && self.packets == 0
    }
}
