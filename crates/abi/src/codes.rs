//! Stable codes (DESIGN §3). Persisted in the state file and used as label
//! values; never renumber.

use std::fmt;

/// A code read from the kernel or a file that this build does not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnknownCode {
    /// Which enumeration was being decoded.
    pub kind: &'static str,
    /// The offending value.
    pub value: u8,
}

impl fmt::Display for UnknownCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown {} code {}", self.kind, self.value)
    }
}

impl std::error::Error for UnknownCode {}

macro_rules! stable_codes {
    (
        $(#[$meta:meta])*
        $name:ident, $kind:literal {
            $( $(#[$vmeta:meta])* $variant:ident = $code:literal => $label:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[repr(u8)]
        pub enum $name {
            $( $(#[$vmeta])* $variant = $code, )+
        }

        impl $name {
            /// Every value, in code order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The numeric code used in kernel keys and the state file.
            #[must_use]
            pub const fn code(self) -> u8 {
                self as u8
            }

            /// The label used in metrics and plan output.
            #[must_use]
            pub const fn label(self) -> &'static str {
                match self {
                    $( $name::$variant => $label, )+
                }
            }

            /// Decodes a numeric code.
            pub const fn from_code(value: u8) -> Result<Self, UnknownCode> {
                match value {
                    $( $code => Ok($name::$variant), )+
                    _ => Err(UnknownCode { kind: $kind, value }),
                }
            }

            /// Decodes a label as printed by [`Self::label`].
            #[must_use]
            pub fn from_label(label: &str) -> Option<Self> {
                match label {
                    $( $label => Some($name::$variant), )+
                    _ => None,
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.label())
            }
        }
    };
}

stable_codes! {
    /// Where the remote end of a packet is, relative to the VM's tenant.
    Zone, "zone" {
        /// Outside the cloud, or reached through an external network.
        External = 0 => "external",
        /// The VM's own tenant.
        SameTenant = 1 => "same_tenant",
        /// Another tenant.
        OtherTenant = 2 => "other_tenant",
        /// Platform plumbing: gateways, DHCP, metadata, router ports, LB segment 2.
        Infra = 3 => "infra",
        /// Unclassifiable: unknown VM MAC or no trie row.
        Miss = 4 => "miss",
        /// A shared (non-external) network, only the L3 path known.
        Shared = 5 => "shared",
        /// Destination MAC has the group bit.
        Multicast = 6 => "multicast",
    }
}

stable_codes! {
    /// Which way a byte crossed the tap, seen from the VM.
    Direction, "direction" {
        /// The VM sends (the tap's TC ingress hook).
        Tx = 0 => "tx",
        /// The VM receives (the tap's TC egress hook).
        Rx = 1 => "rx",
    }
}

stable_codes! {
    /// Transport class of a flow.
    L4Class, "l4" {
        /// Rows restored from a format that did not record the class.
        Reserved = 0 => "reserved",
        /// TCP.
        Tcp = 1 => "tcp",
        /// UDP.
        Udp = 2 => "udp",
        /// ICMP and ICMPv6.
        Icmp = 3 => "icmp",
        /// Anything else, including IPv6 extension headers.
        Other = 4 => "other",
    }
}

stable_codes! {
    /// Slots of the kernel `stats` array (DESIGN §4.1).
    StatReason, "stats reason" {
        /// An insert into `flows` was rejected (map full): those bytes are lost.
        UpdateFailure = 0 => "update_failure",
        /// A non-IP frame passed uncounted.
        SkippedEthertype = 1 => "skipped_ethertype",
        /// A single 802.1Q/802.1ad tag was parsed.
        Vlan = 2 => "vlan",
        /// The IP header was not readable; counted as zone miss, l4 other.
        Truncated = 3 => "truncated",
        /// A frame's zone came from this CPU's verdict cache.
        VerdictHit = 4 => "verdict_hit",
        /// The verdict cache was asked and the zone was computed (and cached).
        VerdictMiss = 5 => "verdict_miss",
    }
}

impl StatReason {
    /// Number of slots in the kernel `stats` array.
    pub const COUNT: u32 = 6;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zone_codes_are_the_released_ones() {
        let got: Vec<(u8, &str)> = Zone::ALL.iter().map(|z| (z.code(), z.label())).collect();
        assert_eq!(
            got,
            vec![
                (0, "external"),
                (1, "same_tenant"),
                (2, "other_tenant"),
                (3, "infra"),
                (4, "miss"),
                (5, "shared"),
                (6, "multicast"),
            ]
        );
    }

    #[test]
    fn codes_round_trip_and_reject_unknown() {
        for z in Zone::ALL {
            assert_eq!(Zone::from_code(z.code()), Ok(*z));
            assert_eq!(Zone::from_label(z.label()), Some(*z));
        }
        for l in L4Class::ALL {
            assert_eq!(L4Class::from_code(l.code()), Ok(*l));
        }
        assert_eq!(
            Zone::from_code(7),
            Err(UnknownCode {
                kind: "zone",
                value: 7
            })
        );
        assert_eq!(Direction::from_code(1), Ok(Direction::Rx));
        assert!(Direction::from_code(2).is_err());
        assert_eq!(StatReason::ALL.len(), StatReason::COUNT as usize);
        assert_eq!(L4Class::from_label("udp"), Some(L4Class::Udp));
        assert_eq!(L4Class::from_label("UDP"), None);
    }
}
