//! Typed writers for the metadata maps (`endpoints`, `zones_v4`, `zones_v6`,
//! `amphora_ips`). Tenant id 0 is the global scope ("every tenant").

use std::net::IpAddr;

use lachesis_abi::{AmphoraKey, EndpointValue, Mac, Prefix, TapPort, Zone, ZoneKeyV4, ZoneKeyV6};
use libbpf_rs::{MapCore, MapFlags, MapHandle};

use crate::error::{Error, Result};
use crate::verdict::VerdictGen;

/// IPv4 as `::ffff:a.b.c.d`, the `amphora_ips` convention.
fn addr16(addr: IpAddr) -> [u8; 16] {
    match addr {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    }
}

/// Key bytes of a trie row; the map depends on the family.
pub(crate) fn zone_key(tenant_id: u32, prefix: Prefix) -> (bool, Vec<u8>) {
    let prefixlen = 32 + u32::from(prefix.prefix_len());
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
    pub tap_ports: MapHandle,
    /// The verdict cache's generations (`None`: a build without the cache).
    pub verdict: Option<VerdictGen>,
}

fn delete_existing(map: &MapHandle, key: &[u8], what: &str) -> Result<bool> {
    match map.delete(key) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == libbpf_rs::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::bpf(format!("delete {what}"))(e)),
    }
}

/// One metadata map's fill: its current entries and its `max_entries`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapFill {
    /// The map's name in the object (`endpoints`, `zones_v4`, …).
    pub name: &'static str,
    /// Entries now in the map, counted by walking its keys.
    pub entries: u64,
    /// The map's `max_entries`.
    pub capacity: u32,
}

impl MetadataMaps {
    /// After every write to a map a zone verdict reads (whatever its
    /// outcome): no CPU may answer from a verdict cached before it. The
    /// only caller of [`VerdictGen::bump`]. `tap_ports` is not such a map
    /// (group frames bypass the cache).
    fn written<T>(&self, outcome: Result<T>) -> Result<T> {
        if let Some(v) = &self.verdict {
            v.bump();
        }
        outcome
    }

    /// Every metadata map's entries and capacity. The kernel keeps no
    /// count for these map types, so each is walked key by key: call it
    /// after writes (only the agent writes these maps), not per packet.
    pub fn fill(&self) -> [MapFill; 5] {
        let one = |name, map: &MapHandle| MapFill {
            name,
            entries: map.keys().count() as u64,
            capacity: map.max_entries(),
        };
        [
            one("endpoints", &self.endpoints),
            one("zones_v4", &self.zones_v4),
            one("zones_v6", &self.zones_v6),
            one("amphora_ips", &self.amphora_ips),
            one("tap_ports", &self.tap_ports),
        ]
    }

    pub fn set_tap_port(&self, ifindex: u32, mac: Mac) -> Result<()> {
        self.tap_ports
            .update(
                &ifindex.to_ne_bytes(),
                bytemuck::bytes_of(&TapPort::new(mac)),
                MapFlags::ANY,
            )
            .map_err(Error::bpf(format!("write tap port {ifindex} → {mac}")))
    }

    pub fn tap_port(&self, ifindex: u32) -> Result<Option<Mac>> {
        let value = self
            .tap_ports
            .lookup(&ifindex.to_ne_bytes(), MapFlags::ANY)
            .map_err(Error::bpf(format!("read tap port {ifindex}")))?;
        value
            .map(|bytes| {
                bytemuck::try_pod_read_unaligned::<TapPort>(&bytes)
                    .map(|p| Mac(p.mac))
                    .map_err(|e| Error::Invalid {
                        what: "tap port value",
                        detail: format!("ifindex {ifindex}: {e}"),
                    })
            })
            .transpose()
    }

    pub fn delete_tap_port(&self, ifindex: u32) -> Result<bool> {
        delete_existing(
            &self.tap_ports,
            &ifindex.to_ne_bytes(),
            &format!("tap port {ifindex}"),
        )
    }

    pub fn upsert_endpoint(&self, mac: Mac, value: EndpointValue) -> Result<()> {
        if value.tenant_id == 0 {
            return Err(Error::Invalid {
                what: "endpoint tenant id",
                detail: format!("{mac}: tenant id 0 is the global scope, a binding needs a tenant"),
            });
        }
        self.written(
            self.endpoints
                .update(
                    &mac.to_u64().to_ne_bytes(),
                    bytemuck::bytes_of(&value),
                    MapFlags::ANY,
                )
                .map_err(Error::bpf(format!("write endpoint {mac}"))),
        )
    }

    pub fn endpoint(&self, mac: Mac) -> Result<Option<EndpointValue>> {
        let value = self
            .endpoints
            .lookup(&mac.to_u64().to_ne_bytes(), MapFlags::ANY)
            .map_err(Error::bpf(format!("read endpoint {mac}")))?;
        value
            .map(|bytes| {
                bytemuck::try_pod_read_unaligned(&bytes).map_err(|e| Error::Invalid {
                    what: "endpoint value",
                    detail: format!("{mac}: {e}"),
                })
            })
            .transpose()
    }

    pub fn delete_endpoint(&self, mac: Mac) -> Result<bool> {
        self.written(delete_existing(
            &self.endpoints,
            &mac.to_u64().to_ne_bytes(),
            &format!("endpoint {mac}"),
        ))
    }

    pub fn upsert_zone(&self, tenant_id: u32, prefix: Prefix, zone: Zone) -> Result<()> {
        let (v6, key) = zone_key(tenant_id, prefix);
        let map = if v6 { &self.zones_v6 } else { &self.zones_v4 };
        self.written(
            map.update(&key, &[zone.code()], MapFlags::ANY)
                .map_err(Error::bpf(format!(
                    "write trie row ({tenant_id}, {prefix})"
                ))),
        )
    }

    pub fn delete_zone(&self, tenant_id: u32, prefix: Prefix) -> Result<bool> {
        let (v6, key) = zone_key(tenant_id, prefix);
        let map = if v6 { &self.zones_v6 } else { &self.zones_v4 };
        self.written(delete_existing(
            map,
            &key,
            &format!("trie row ({tenant_id}, {prefix})"),
        ))
    }

    pub fn upsert_amphora(&self, tenant_id: u32, addr: IpAddr) -> Result<()> {
        let key = AmphoraKey {
            tenant_id,
            addr: addr16(addr),
        };
        self.written(
            self.amphora_ips
                .update(bytemuck::bytes_of(&key), &[1], MapFlags::ANY)
                .map_err(Error::bpf(format!(
                    "write amphora address ({tenant_id}, {addr})"
                ))),
        )
    }

    pub fn delete_amphora(&self, tenant_id: u32, addr: IpAddr) -> Result<bool> {
        let key = AmphoraKey {
            tenant_id,
            addr: addr16(addr),
        };
        self.written(delete_existing(
            &self.amphora_ips,
            bytemuck::bytes_of(&key),
            &format!("amphora address ({tenant_id}, {addr})"),
        ))
    }
}

#[cfg(feature = "testing")]
pub(crate) fn delete_flow(flows: &MapHandle, key: &[u8]) -> Result<bool> {
    delete_existing(flows, key, "flow entry")
}

#[cfg(test)]
mod tests {
    use super::*;

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
