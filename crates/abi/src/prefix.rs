//! IP prefixes in canonical form (network address, lower-case IPv6): the
//! one prefix type of the plan's trie rows and of the kernel's LPM keys, so
//! nothing converts between them.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// An IPv4 or IPv6 prefix whose host bits are always zero.
///
/// Ordering is IPv4 before IPv6, then by address (numerically), then by
/// length: the sort order of every prefix list in the plan output.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Prefix {
    addr: IpAddr,
    len: u8,
}

/// A string that is not a prefix: an address, optionally `/` and a length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrefixParseError {
    /// The rejected text.
    pub input: String,
}

impl fmt::Display for PrefixParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid prefix {:?}: expected an IPv4 or IPv6 address, '/', and a length of at most 32 or 128",
            self.input
        )
    }
}

impl std::error::Error for PrefixParseError {}

impl Prefix {
    /// Builds a prefix, clearing host bits; `None` when `len` exceeds the
    /// family's width.
    #[must_use]
    pub fn new(addr: IpAddr, len: u8) -> Option<Prefix> {
        let max = max_len(addr);
        if len > max {
            return None;
        }
        Some(Prefix {
            addr: mask(addr, len),
            len,
        })
    }

    /// The single-address prefix (/32 or /128) of `addr`.
    #[must_use]
    pub fn host(addr: IpAddr) -> Prefix {
        Prefix {
            addr,
            len: max_len(addr),
        }
    }

    /// The network address.
    #[must_use]
    pub fn addr(self) -> IpAddr {
        self.addr
    }

    /// The prefix length in bits.
    #[must_use]
    pub fn prefix_len(self) -> u8 {
        self.len
    }

    /// True for IPv4.
    #[must_use]
    pub fn is_ipv4(self) -> bool {
        self.addr.is_ipv4()
    }

    /// Whether `addr` lies inside this prefix (same family only).
    #[must_use]
    pub fn contains(self, addr: IpAddr) -> bool {
        addr.is_ipv4() == self.addr.is_ipv4() && mask(addr, self.len) == self.addr
    }

    /// Whether `other` lies entirely inside this prefix.
    #[must_use]
    pub fn covers(self, other: Prefix) -> bool {
        other.len >= self.len && self.contains(other.addr)
    }

    /// Whether the two prefixes share at least one address.
    #[must_use]
    pub fn overlaps(self, other: Prefix) -> bool {
        self.covers(other) || other.covers(self)
    }

    /// The highest address inside the prefix.
    #[must_use]
    pub fn last(self) -> IpAddr {
        let last = self.last_as_u128();
        match self.addr {
            // An IPv4 prefix's last address fits in the low 32 bits.
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from(u32::try_from(last).unwrap_or(u32::MAX))),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from(last)),
        }
    }

    /// The highest address inside the prefix, as a 128-bit number (IPv4 in
    /// the low 32 bits); used for sweep-line overlap checks.
    #[must_use]
    pub fn last_as_u128(self) -> u128 {
        let width = u32::from(max_len(self.addr));
        let host_bits = width - u32::from(self.len);
        let hosts = if host_bits == 0 {
            0
        } else if host_bits >= 128 {
            u128::MAX
        } else {
            (1u128 << host_bits) - 1
        };
        addr_to_u128(self.addr) | hosts
    }
}

/// The address as a number (IPv4 in the low 32 bits).
fn addr_to_u128(addr: IpAddr) -> u128 {
    match addr {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

fn max_len(addr: IpAddr) -> u8 {
    if addr.is_ipv4() {
        32
    } else {
        128
    }
}

fn mask(addr: IpAddr, len: u8) -> IpAddr {
    match addr {
        IpAddr::V4(a) => {
            let bits = u32::from(a);
            let m = if len == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(len))
            };
            IpAddr::V4(Ipv4Addr::from(bits & m))
        }
        IpAddr::V6(a) => {
            let bits = u128::from(a);
            let m = if len == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(len))
            };
            IpAddr::V6(Ipv6Addr::from(bits & m))
        }
    }
}

/// `address/length`, or a bare address as its single-address prefix (a
/// Neutron allowed-address pair may be either). Host bits are cleared.
impl FromStr for Prefix {
    type Err = PrefixParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || PrefixParseError {
            input: s.to_owned(),
        };
        let (addr, len) = if let Some((a, l)) = s.split_once('/') {
            let addr: IpAddr = a.parse().map_err(|_| err())?;
            // Leading '+' or whitespace are not lengths.
            if l.is_empty() || !l.bytes().all(|b| b.is_ascii_digit()) || l.len() > 3 {
                return Err(err());
            }
            (addr, l.parse::<u8>().map_err(|_| err())?)
        } else {
            let addr: IpAddr = s.parse().map_err(|_| err())?;
            (addr, max_len(addr))
        };
        Prefix::new(addr, len).ok_or_else(err)
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl fmt::Debug for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The text form, as in plan output (`"10.1.0.0/24"`).
#[cfg(feature = "serde")]
impl serde::Serialize for Prefix {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for Prefix {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <String as serde::Deserialize>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Prefix {
        s.parse().unwrap()
    }

    #[test]
    fn canonicalises_host_bits_and_ipv6_case() {
        assert_eq!(p("10.0.1.77/24").to_string(), "10.0.1.0/24");
        assert_eq!(p("2001:DB8:0:0:1::/64").to_string(), "2001:db8::/64");
        assert_eq!(p("10.0.0.5").to_string(), "10.0.0.5/32");
        assert_eq!(p("0.0.0.0/0").to_string(), "0.0.0.0/0");
        assert_eq!(p("::/0").to_string(), "::/0");
    }

    /// The kernel writer's former checks: `"0.0.0.0/0"` is length 0, IPv6
    /// prints lower case, and a bare address is its /32 (the planner's
    /// allowed-address pairs need that; the kernel writer never parses).
    #[test]
    fn kernel_rows_parse_as_the_plan_prints_them() {
        let v6 = p("2001:DB8::1/64");
        assert_eq!(v6.to_string(), "2001:db8::/64");
        assert_eq!(v6.prefix_len(), 64);
        assert_eq!(p("10.1.2.3/24").addr().to_string(), "10.1.2.0");
        assert_eq!(p("0.0.0.0/0").prefix_len(), 0);
        assert_eq!(p("10.0.0.0"), Prefix::host("10.0.0.0".parse().unwrap()));
        assert_eq!(p("::1").prefix_len(), 128);
        assert_eq!(Prefix::new("10.0.0.1".parse().unwrap(), 33), None);
        assert_eq!(Prefix::new("::1".parse().unwrap(), 129), None);
    }

    #[test]
    fn rejects_malformed() {
        for bad in [
            "",
            "10.0.0.0/33",
            "::/129",
            "10.0.0/24",
            "10.0.0.0/",
            "10.0.0.0/+8",
            "x/8",
            "10.0.0.0/ 8",
        ] {
            assert!(bad.parse::<Prefix>().is_err(), "{bad}");
        }
    }

    #[test]
    fn containment_respects_family_and_length() {
        let net = p("10.0.0.0/8");
        assert!(net.contains("10.255.0.1".parse().unwrap()));
        assert!(!net.contains("11.0.0.1".parse().unwrap()));
        assert!(!p("::/0").contains("10.0.0.1".parse().unwrap()));
        assert!(net.covers(p("10.1.0.0/16")));
        assert!(!p("10.1.0.0/16").covers(net));
        assert!(p("10.1.0.0/16").overlaps(net));
        assert!(!p("10.1.0.0/16").overlaps(p("10.2.0.0/16")));
        assert_eq!(
            p("10.0.0.0/24").last_as_u128(),
            u128::from(u32::from(Ipv4Addr::new(10, 0, 0, 255)))
        );
        assert_eq!(p("::/0").last_as_u128(), u128::MAX);
    }

    #[test]
    fn orders_v4_before_v6_then_address_then_length() {
        let mut v = [p("::/0"), p("10.0.0.0/24"), p("10.0.0.0/8"), p("9.0.0.0/8")];
        v.sort();
        let s: Vec<String> = v.iter().map(ToString::to_string).collect();
        assert_eq!(s, ["9.0.0.0/8", "10.0.0.0/8", "10.0.0.0/24", "::/0"]);
    }
}
