//! The unresolved buffer (DESIGN §9): rows whose VM MAC has no binding yet
//! wait here, bounded by a capacity (LRU) and a TTL, instead of being billed
//! to a tenant they may not belong to.

use lachesis_abi::FlowKey;
use rustc_hash::FxHashMap;

use crate::counts::Counts;
use crate::delta::Baseline;
use crate::subs::Subs;

/// One waiting row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    /// Bytes accumulated since the row was first seen.
    pub acc: Counts,
    /// Raw baselines of its kernel sub-entries' last readings: written back
    /// into the ledger row on resolution so those bytes are never counted
    /// twice.
    pub subs: Subs,
    /// When the row entered the buffer (caller's monotonic clock, ns).
    pub first_seen_ns: u64,
    /// When the row last gained bytes (the LRU order).
    pub last_active_ns: u64,
}

/// Baseline of a kernel entry released for deletion (an evicted row's, an
/// evicted unresolved row's, a relieved flow's). Kept until a full drain
/// shows the entry gone, so that a delete that failed, raced or was retried
/// never lets the same bytes be counted again as a "first sight", and a
/// retried older drain that still shows the entry reads as stale.
///
/// Once the entry's final reading is applied, `base.gone` is set: when a
/// full drain then shows the entry gone, nothing was lost. Gone without it,
/// the bytes it counted since `base` are lost (an agent crash between the
/// delete and the flush, DESIGN §11) and counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tombstone {
    /// The entry's last reading.
    pub base: Baseline,
    /// Its row was folded because its peer's binding was evicted, its own
    /// VM still bound: a final reading's last bytes are that VM's (its
    /// port-settled buckets), not `unknown`'s.
    pub peer: bool,
}

/// Why an unresolved row was given up on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EvictReason {
    /// Waited longer than the TTL.
    Ttl,
    /// The buffer was over capacity and this row was the least recently active.
    Capacity,
}

impl EvictReason {
    /// Metric label.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            EvictReason::Ttl => "ttl",
            EvictReason::Capacity => "capacity",
        }
    }
}

/// Capacity and TTL of the buffer (live-tunable, §13).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnresolvedLimits {
    /// Maximum rows kept (default 10 000).
    pub capacity: usize,
    /// Maximum wait in ns (default 60 s).
    pub ttl_ns: u64,
}

impl Default for UnresolvedLimits {
    fn default() -> Self {
        UnresolvedLimits {
            capacity: 10_000,
            ttl_ns: 60_000_000_000,
        }
    }
}

/// Picks the rows to evict: TTL-expired first, then the least recently
/// active until the buffer fits its capacity. Pure: the caller folds them.
#[must_use]
pub fn select_evictions(
    entries: &FxHashMap<FlowKey, Pending>,
    limits: UnresolvedLimits,
    now_ns: u64,
) -> Vec<(FlowKey, EvictReason)> {
    let mut out: Vec<(FlowKey, EvictReason)> = entries
        .iter()
        .filter(|(_, p)| now_ns.saturating_sub(p.first_seen_ns) >= limits.ttl_ns)
        .map(|(k, _)| (*k, EvictReason::Ttl))
        .collect();
    let remaining = entries.len() - out.len();
    if remaining > limits.capacity {
        let excess = remaining - limits.capacity;
        let mut live: Vec<(u64, FlowKey)> = entries
            .iter()
            .filter(|(_, p)| now_ns.saturating_sub(p.first_seen_ns) < limits.ttl_ns)
            .map(|(k, p)| (p.last_active_ns, *k))
            .collect();
        // Ties broken by key so the choice is deterministic.
        live.select_nth_unstable(excess - 1);
        out.extend(
            live[..excess]
                .iter()
                .map(|(_, k)| (*k, EvictReason::Capacity)),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> FlowKey {
        FlowKey {
            src_mac: [2, 0, 0, 0, 0, n],
            ..FlowKey::default()
        }
    }

    fn pending(first: u64, active: u64) -> Pending {
        Pending {
            acc: Counts::new(1, 1),
            subs: Subs::default(),
            first_seen_ns: first,
            last_active_ns: active,
        }
    }

    #[test]
    fn ttl_then_lru() {
        let mut m = FxHashMap::default();
        m.insert(key(1), pending(0, 5)); // expired at now=100, ttl=100
        m.insert(key(2), pending(50, 60)); // least recently active of the rest
        m.insert(key(3), pending(50, 90));
        m.insert(key(4), pending(60, 70));
        let limits = UnresolvedLimits {
            capacity: 2,
            ttl_ns: 100,
        };
        let mut got = select_evictions(&m, limits, 100);
        got.sort_by_key(|(k, _)| *k);
        assert_eq!(
            got,
            vec![(key(1), EvictReason::Ttl), (key(2), EvictReason::Capacity)]
        );
    }

    #[test]
    fn nothing_to_do_within_limits() {
        let mut m = FxHashMap::default();
        m.insert(key(1), pending(0, 0));
        assert!(select_evictions(&m, UnresolvedLimits::default(), 10).is_empty());
    }
}
