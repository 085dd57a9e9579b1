//! Typed writers for the metadata maps (`endpoints`, `zones_v4`, `zones_v6`,
//! `amphora_ips`). Tenant id 0 is the global scope ("every tenant").

use std::net::IpAddr;

use lachesis_abi::{AmphoraKey, EndpointValue, FlowKey, Mac, Zone, ZoneKeyV4, ZoneKeyV6};
use libbpf_rs::{MapCore, MapFlags, MapHandle};

use crate::error::{Error, Result};

/// An IP prefix with its host bits cleared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Prefix {
    addr: IpAddr,
    len: u8,
}

impl Prefix {
    /// Builds a prefix, clearing host bits; `len` must fit the family.
    pub fn new(addr: IpAddr, len: u8) -> Result<Self> {
        let max = if addr.is_ipv4() { 32 } else { 128 };
        if len > max {
            return Err(Error::Invalid {
                what: "prefix length",
                detail: format!("/{len} on {addr}: expected at most /{max}"),
            });
        }
        let addr = match addr {
            IpAddr::V4(a) => {
                let mask = if len == 0 {
                    0
                } else {
                    u32::MAX << (32 - u32::from(len))
                };
                IpAddr::V4((u32::from(a) & mask).into())
            }
            IpAddr::V6(a) => {
                let mask = if len == 0 {
                    0
                } else {
                    u128::MAX << (128 - u32::from(len))
                };
                IpAddr::V6((u128::from(a) & mask).into())
            }
        };
        Ok(Prefix { addr, len })
    }

    /// The network address.
    #[must_use]
    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    /// The prefix length.
    #[must_use]
    pub fn len(&self) -> u8 {
        self.len
    }

    /// Whether this is a /0.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl std::fmt::Display for Prefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl std::str::FromStr for Prefix {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let bad = || Error::Invalid {
            what: "prefix",
            detail: format!("{s:?}: expected ADDRESS/LENGTH, e.g. 10.0.0.0/24 or 2001:db8::/64"),
        };
        let (a, l) = s.split_once('/').ok_or_else(bad)?;
        Prefix::new(a.parse().map_err(|_| bad())?, l.parse().map_err(|_| bad())?)
    }
}

/// IPv4 as `::ffff:a.b.c.d`, the `amphora_ips` convention.
fn addr16(addr: IpAddr) -> [u8; 16] {
    match addr {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    }
}

/// Key bytes of a trie row; the map depends on the family.
pub(crate) fn zone_key(tenant_id: u32, prefix: Prefix) -> (bool, Vec<u8>) {
    let prefixlen = 32 + u32::from(prefix.len());
    match prefix.addr() {
        IpAddr::V4(a) => {
            let key = ZoneKeyV4 {
                prefixlen,
                tenant_id,
                addr: a.octets(),
            };
            (false, bytemuck::bytes_of(&key).to_vec())
        }
        IpAddr::V6(a) => {
            let key = ZoneKeyV6 {
                prefixlen,
                tenant_id,
                addr: a.octets(),
            };
            (true, bytemuck::bytes_of(&key).to_vec())
        }
    }
}

/// Handles on the metadata maps.
#[derive(Debug)]
pub(crate) struct MetadataMaps {
    pub endpoints: MapHandle,
    pub zones_v4: MapHandle,
    pub zones_v6: MapHandle,
    pub amphora_ips: MapHandle,
}

fn delete_existing(map: &MapHandle, key: &[u8], what: &str) -> Result<bool> {
    match map.delete(key) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == libbpf_rs::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::bpf(format!("delete {what}"))(e)),
    }
}

impl MetadataMaps {
    pub fn upsert_endpoint(&self, mac: Mac, value: EndpointValue) -> Result<()> {
        if value.tenant_id == 0 {
            return Err(Error::Invalid {
                what: "endpoint tenant id",
                detail: format!("{mac}: tenant id 0 is the global scope, a binding needs a tenant"),
            });
        }
        self.endpoints
            .update(
                &mac.to_u64().to_ne_bytes(),
                bytemuck::bytes_of(&value),
                MapFlags::ANY,
            )
            .map_err(Error::bpf(format!("write endpoint {mac}")))
    }

    pub fn delete_endpoint(&self, mac: Mac) -> Result<bool> {
        delete_existing(
            &self.endpoints,
            &mac.to_u64().to_ne_bytes(),
            &format!("endpoint {mac}"),
        )
    }

    pub fn upsert_zone(&self, tenant_id: u32, prefix: Prefix, zone: Zone) -> Result<()> {
        let (v6, key) = zone_key(tenant_id, prefix);
        let map = if v6 { &self.zones_v6 } else { &self.zones_v4 };
        map.update(&key, &[zone.code()], MapFlags::ANY)
            .map_err(Error::bpf(format!(
                "write trie row ({tenant_id}, {prefix})"
            )))
    }

    pub fn delete_zone(&self, tenant_id: u32, prefix: Prefix) -> Result<bool> {
        let (v6, key) = zone_key(tenant_id, prefix);
        let map = if v6 { &self.zones_v6 } else { &self.zones_v4 };
        delete_existing(map, &key, &format!("trie row ({tenant_id}, {prefix})"))
    }

    pub fn upsert_amphora(&self, tenant_id: u32, addr: IpAddr) -> Result<()> {
        let key = AmphoraKey {
            tenant_id,
            addr: addr16(addr),
        };
        self.amphora_ips
            .update(bytemuck::bytes_of(&key), &[1], MapFlags::ANY)
            .map_err(Error::bpf(format!(
                "write amphora address ({tenant_id}, {addr})"
            )))
    }

    pub fn delete_amphora(&self, tenant_id: u32, addr: IpAddr) -> Result<bool> {
        let key = AmphoraKey {
            tenant_id,
            addr: addr16(addr),
        };
        delete_existing(
            &self.amphora_ips,
            bytemuck::bytes_of(&key),
            &format!("amphora address ({tenant_id}, {addr})"),
        )
    }
}

pub(crate) fn delete_flow(flows: &MapHandle, key: &FlowKey) -> Result<bool> {
    delete_existing(flows, bytemuck::bytes_of(key), "flow entry")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_canonicalises_and_validates() {
        let p: Prefix = "10.1.2.3/24".parse().unwrap();
        assert_eq!(p.to_string(), "10.1.2.0/24");
        let p: Prefix = "2001:DB8::1/64".parse().unwrap();
        assert_eq!(p.to_string(), "2001:db8::/64");
        assert_eq!("0.0.0.0/0".parse::<Prefix>().unwrap().len(), 0);
        assert!("10.0.0.0/33".parse::<Prefix>().is_err());
        assert!("10.0.0.0".parse::<Prefix>().is_err());
        assert!("::/129".parse::<Prefix>().is_err());
    }

    #[test]
    fn zone_key_counts_tenant_bits() {
        let (v6, key) = zone_key(7, "192.168.0.0/16".parse().unwrap());
        assert!(!v6);
        let k: ZoneKeyV4 = bytemuck::pod_read_unaligned(&key);
        assert_eq!(
            k,
            ZoneKeyV4 {
                prefixlen: 48,
                tenant_id: 7,
                addr: [192, 168, 0, 0]
            }
        );
        let (v6, key) = zone_key(0, "::/0".parse().unwrap());
        assert!(v6);
        let k: ZoneKeyV6 = bytemuck::pod_read_unaligned(&key);
        assert_eq!(k.prefixlen, 32);
        assert_eq!(
            addr16("10.0.0.5".parse().unwrap())[10..],
            [0xff, 0xff, 10, 0, 0, 5]
        );
    }
}
