//! A subnet's addressing checked the way Neutron checks `POST /v2.0/subnets`,
//! so a topology the simulator serves is one a real cloud could hold.
//!
//! What Neutron does, and so what this does:
//! - `cidr` must be `ADDRESS/LENGTH` with a length the family allows; an
//!   IPv4 `cidr` must also be written the one way (no leading zeros, no
//!   short or mask forms), as neutron-lib's `validate_subnet` compares it
//!   with its own rendering.
//! - address bits past the prefix are accepted and cleared: Neutron stores
//!   and lists `10.0.0.5/24` as `10.0.0.0/24`.
//! - `ip_version` is 4 or 6 and must match the `cidr`'s family, and so must
//!   `gateway_ip`; an IPv4 gateway inside the subnet may be neither its
//!   network nor its broadcast address.
//!
//! The parsed `cidr` is the workspace's one [`Prefix`] type, so the masking
//! and rendering are the planner's own.

use std::net::IpAddr;

use lachesis_planner::Prefix;

/// What a refused `cidr` should look like instead, appended to every message.
const CIDR_FORM: &str = "expected ADDRESS/LENGTH such as 10.0.0.0/24 (LENGTH 0-32) \
                         or 2001:db8::/64 (LENGTH 0-128)";

/// Why a subnet's addressing is refused. Each message names the field, the
/// value given and the form expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum AddressingError {
    #[error("cidr {0:?} is not a valid IP subnet: {CIDR_FORM}")]
    Cidr(String),
    #[error(
        "cidr {cidr:?} has prefix length {len}, beyond IPv{version}'s {max} bits: {CIDR_FORM}"
    )]
    PrefixLength {
        cidr: String,
        len: String,
        version: u8,
        max: u8,
    },
    #[error("ip_version {0} is not a valid IP version: expected 4 or 6 (or omitted: it follows the cidr)")]
    IpVersion(u8),
    #[error("{field} {value:?} does not match the ip_version {version}: expected an IPv{version} {what}")]
    VersionMismatch {
        field: &'static str,
        value: String,
        version: u8,
        what: &'static str,
    },
    #[error("gateway_ip {0:?} is not a valid IP address: expected an address such as 10.0.0.1 or 2001:db8::1, or null")]
    Gateway(String),
    #[error("gateway_ip {gateway:?} is the network or broadcast address of {cidr}: expected another address of the subnet, one outside it, or null")]
    GatewayReserved { gateway: String, cidr: Prefix },
}

/// Parses `ADDRESS/LENGTH` as Neutron accepts it, host bits cleared. Stricter
/// than [`Prefix`]'s own parser, which also takes a bare address.
pub(crate) fn parse_cidr(text: &str) -> Result<Prefix, AddressingError> {
    let bad = || AddressingError::Cidr(text.to_owned());
    let (addr, len_text) = text.split_once('/').ok_or_else(bad)?;
    let addr: IpAddr = addr.parse().map_err(|_| bad())?;
    if len_text.is_empty() || !len_text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    // neutron-lib compares an IPv4 cidr with netaddr's rendering of it,
    // which writes the length without leading zeros.
    if addr.is_ipv4() && len_text.len() > 1 && len_text.starts_with('0') {
        return Err(bad());
    }
    let too_long = || AddressingError::PrefixLength {
        cidr: text.to_owned(),
        len: len_text.to_owned(),
        version: version_of(addr),
        max: if addr.is_ipv4() { 32 } else { 128 },
    };
    // A length too large even for a byte is the same mistake as a /33.
    let len: u8 = len_text.parse().map_err(|_| too_long())?;
    Prefix::new(addr, len).ok_or_else(too_long)
}

fn version_of(ip: IpAddr) -> u8 {
    if ip.is_ipv4() {
        4
    } else {
        6
    }
}

/// Checks a subnet's `cidr`, `ip_version` and `gateway_ip` together and
/// returns the `cidr` in the form Neutron stores and lists.
pub(crate) fn check_subnet(
    cidr: &str,
    ip_version: Option<u8>,
    gateway_ip: Option<&str>,
) -> Result<Prefix, AddressingError> {
    let net = parse_cidr(cidr)?;
    let family = version_of(net.addr());
    let version = match ip_version {
        None => family,
        Some(v @ (4 | 6)) => v,
        Some(v) => return Err(AddressingError::IpVersion(v)),
    };
    if family != version {
        return Err(AddressingError::VersionMismatch {
            field: "cidr",
            value: cidr.to_owned(),
            version,
            what: "subnet",
        });
    }
    if let Some(gw) = gateway_ip {
        let ip: IpAddr = gw
            .parse()
            .map_err(|_| AddressingError::Gateway(gw.to_owned()))?;
        if version_of(ip) != version {
            return Err(AddressingError::VersionMismatch {
                field: "gateway_ip",
                value: gw.to_owned(),
                version,
                what: "address",
            });
        }
        // Only IPv4 has a broadcast address; IPv6 allows the subnet-router
        // anycast address (the network address) as a gateway.
        if ip.is_ipv4() && net.contains(ip) && (ip == net.addr() || ip == net.last()) {
            return Err(AddressingError::GatewayReserved {
                gateway: gw.to_owned(),
                cidr: net,
            });
        }
    }
    Ok(net)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(cidr: &str) -> Result<String, AddressingError> {
        parse_cidr(cidr).map(|c| c.to_string())
    }

    #[test]
    fn prefix_longer_than_the_family_is_refused_naming_the_length() {
        let e = stored("10.0.0.0/33").unwrap_err();
        assert!(matches!(
            &e,
            AddressingError::PrefixLength { version: 4, max: 32, len, .. } if len == "33"
        ));
        let msg = e.to_string();
        assert!(msg.contains("cidr \"10.0.0.0/33\""), "{msg}");
        assert!(msg.contains("ADDRESS/LENGTH"), "{msg}");
        assert!(matches!(
            stored("fd00::/129"),
            Err(AddressingError::PrefixLength {
                version: 6,
                max: 128,
                ..
            })
        ));
        // A length too large for a byte is the same mistake, not a parse error.
        assert!(matches!(
            stored("10.0.0.0/4294967296"),
            Err(AddressingError::PrefixLength { .. })
        ));
    }

    #[test]
    fn the_longest_and_shortest_prefixes_are_accepted() {
        assert_eq!(stored("10.0.0.7/32").unwrap(), "10.0.0.7/32");
        assert_eq!(stored("10.9.8.7/0").unwrap(), "0.0.0.0/0");
        assert_eq!(stored("fd00::1/128").unwrap(), "fd00::1/128");
        assert_eq!(stored("fd00::1/0").unwrap(), "::/0");
    }

    #[test]
    fn host_bits_are_cleared_as_neutron_stores_them() {
        assert_eq!(stored("10.0.0.5/24").unwrap(), "10.0.0.0/24");
        assert_eq!(stored("192.168.77.130/25").unwrap(), "192.168.77.128/25");
        assert_eq!(stored("2001:db8:a:b::1/64").unwrap(), "2001:db8:a:b::/64");
        // IPv6 is rendered in its compressed form, as netaddr renders it.
        assert_eq!(stored("2001:0db8:0000::/48").unwrap(), "2001:db8::/48");
    }

    #[test]
    fn malformed_cidrs_are_refused() {
        for bad in [
            "10.0.0.0",     // no length
            "10.0.0.0/",    // empty length
            "10.0.0/24",    // short form
            "010.0.0.0/24", // leading zero, octal to some parsers
            "10.0.0.0/024", // not how Neutron writes it
            "10.0.0.0/255.255.255.0",
            "10.0.0.0/+24",
            " 10.0.0.0/24",
            "10.0.0.256/24",
            "fd00::/x",
            "10.0.0.0/24/1",
            "",
        ] {
            assert_eq!(
                stored(bad),
                Err(AddressingError::Cidr(bad.to_owned())),
                "{bad:?} must be refused as malformed"
            );
        }
    }

    #[test]
    fn ip_version_must_be_4_or_6_and_match_the_cidr() {
        assert_eq!(
            check_subnet("10.0.0.0/24", Some(4), None).unwrap(),
            "10.0.0.0/24".parse::<Prefix>().unwrap()
        );
        assert!(check_subnet("fd00::/64", Some(6), None).is_ok());
        assert!(check_subnet("fd00::/64", None, None).is_ok());
        let e = check_subnet("10.0.0.0/24", Some(6), None).unwrap_err();
        assert_eq!(
            e,
            AddressingError::VersionMismatch {
                field: "cidr",
                value: "10.0.0.0/24".into(),
                version: 6,
                what: "subnet",
            }
        );
        assert!(e.to_string().contains("does not match the ip_version 6"));
        assert!(matches!(
            check_subnet("fd00::/64", Some(4), None),
            Err(AddressingError::VersionMismatch { version: 4, .. })
        ));
        assert_eq!(
            check_subnet("10.0.0.0/24", Some(5), None),
            Err(AddressingError::IpVersion(5))
        );
    }

    #[test]
    fn gateway_must_be_an_address_of_the_family_and_not_reserved() {
        assert!(check_subnet("10.0.0.0/24", None, Some("10.0.0.1")).is_ok());
        // Outside the subnet is allowed: Neutron cannot tell where it lives.
        assert!(check_subnet("10.0.0.0/24", None, Some("10.0.1.0")).is_ok());
        // IPv6 has no broadcast; the subnet-router anycast address is fine.
        assert!(check_subnet("fd00::/64", None, Some("fd00::")).is_ok());
        assert_eq!(
            check_subnet("10.0.0.0/24", None, Some("10.0.0.1/24")),
            Err(AddressingError::Gateway("10.0.0.1/24".into()))
        );
        assert!(matches!(
            check_subnet("10.0.0.0/24", None, Some("fd00::1")),
            Err(AddressingError::VersionMismatch {
                field: "gateway_ip",
                ..
            })
        ));
        for reserved in ["10.0.0.0", "10.0.0.255"] {
            assert!(
                matches!(
                    check_subnet("10.0.0.5/24", None, Some(reserved)),
                    Err(AddressingError::GatewayReserved { .. })
                ),
                "{reserved}"
            );
        }
    }
}
