//! Bindings (DESIGN §6.3): the single definition of what the `endpoints`
//! map holds. Cold start and every reconcile pass call this same code.

use std::collections::BTreeMap;

use lachesis_abi::Mac;
use rustc_hash::{FxHashMap, FxHashSet};

use crate::external::vm_fallback;
use crate::index::{is_compute, Index};
use crate::octavia::OctaviaJoin;
use crate::plan::{Anomaly, AnomalyClass, Binding};
use crate::snapshot::Port;

const TRUNK_SUBPORT: &str = "trunk:subport";

/// Device owners that are understood and deliberately not bound.
const KNOWN_UNBOUND_OWNERS: &[&str] = &["", "Octavia", "neutron:LOADBALANCERV2"];

pub(crate) struct BoundPorts<'a> {
    /// Sorted by MAC, one per MAC.
    pub bindings: Vec<Binding>,
    /// Subnet id → tenants with an admitted port on it (DESIGN §6.1 step 5).
    pub tenants_by_subnet: FxHashMap<&'a str, FxHashSet<&'a str>>,
}

/// How strongly a port claims a MAC: its own MAC beats a trunk subport
/// sharing it, which beats an allowed-address-pair MAC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum ClaimKind {
    Own,
    Subport,
    AddressPair,
}

struct Admitted<'a> {
    mac: Mac,
    kind: ClaimKind,
    tenant: &'a str,
    server: &'a str,
    amphora: bool,
}

/// Whether `port` is bound, and to whom (DESIGN §6.3, §6.5).
fn admit<'a>(
    idx: &Index<'a>,
    octavia: &OctaviaJoin<'a>,
    parent_of: &FxHashMap<&str, &'a Port>,
    port: &'a Port,
    anomalies: &mut Vec<Anomaly>,
) -> Option<Admitted<'a>> {
    let owner = port.device_owner.as_str();
    let amphora_owner = octavia.data_ports.get(port.id.as_str()).copied();
    let subport = owner == TRUNK_SUBPORT;
    if amphora_owner.is_none() && !is_compute(owner) && !subport {
        if !owner.starts_with("network:")
            && !owner.starts_with("baremetal:")
            && !KNOWN_UNBOUND_OWNERS.contains(&owner)
        {
            anomalies.push(Anomaly {
                class: AnomalyClass::UnknownDeviceOwner,
                detail: format!(
                    "port {} has device_owner {owner:?}: not bound, not a platform address",
                    port.id
                ),
            });
        }
        return None;
    }
    let mac = port.mac?;
    let tenant: &'a str = match amphora_owner {
        Some(lb_owner) => lb_owner,
        None if port.project.is_empty() => return None,
        None if !idx.projects.contains(port.project.as_str()) => {
            anomalies.push(Anomaly {
                class: AnomalyClass::UnknownProject,
                detail: format!(
                    "port {} (MAC {mac}) belongs to project {} absent from Keystone: not bound",
                    port.id, port.project
                ),
            });
            return None;
        }
        None => port.project.as_str(),
    };
    let server: &'a str = if !subport {
        port.device_id.as_str()
    } else if let Some(parent) = parent_of.get(port.id.as_str()) {
        parent.device_id.as_str()
    } else {
        anomalies.push(Anomaly {
            class: AnomalyClass::TrunkSubports,
            detail: format!(
                "trunk subport {} has no parent port listing it: server set to its device_id {:?}",
                port.id, port.device_id
            ),
        });
        port.device_id.as_str()
    };
    let kind = if subport {
        ClaimKind::Subport
    } else {
        ClaimKind::Own
    };
    Some(Admitted {
        mac,
        kind,
        tenant,
        server,
        amphora: amphora_owner.is_some(),
    })
}

struct Claim<'a> {
    kind: ClaimKind,
    port: &'a Port,
    tenant: &'a str,
    server: &'a str,
    amphora: bool,
}

/// True for ports the platform owns (router interfaces and gateways, DHCP,
/// floating IPs, distributed/metadata ports, …): Neutron writes every one of
/// them as `network:<kind>`.
fn is_platform_owner(owner: &str) -> bool {
    owner.starts_with("network:")
}

/// MAC → the platform port carrying it (the smallest port id when several).
fn platform_macs<'a>(idx: &Index<'a>) -> FxHashMap<Mac, &'a Port> {
    let mut out: FxHashMap<Mac, &Port> = FxHashMap::default();
    for port in &idx.snap.ports {
        let Some(mac) = port.mac else { continue };
        if !is_platform_owner(&port.device_owner) {
            continue;
        }
        out.entry(mac)
            .and_modify(|p| {
                if port.id < p.id {
                    *p = port;
                }
            })
            .or_insert(port);
    }
    out
}

pub(crate) fn bind<'a>(
    idx: &Index<'a>,
    octavia: &OctaviaJoin<'a>,
    anomalies: &mut Vec<Anomaly>,
) -> BoundPorts<'a> {
    // DESIGN §4.2: a platform MAC in `endpoints` would let the kernel's
    // direct-L2 shortcut treat routed traffic (to the router, hence possibly
    // the internet) as VM-to-VM. Neutron only enforces MAC uniqueness per
    // network and lets an address pair name any MAC, so a VM port can claim
    // one; such claims are refused whatever their kind.
    let platform = platform_macs(idx);
    // Trunk parents: subport id → parent port.
    let mut parent_of: FxHashMap<&str, &Port> = FxHashMap::default();
    for port in &idx.snap.ports {
        for sub in &port.trunk_subports {
            parent_of
                .entry(sub.as_str())
                .and_modify(|p| {
                    if port.id < p.id {
                        *p = port;
                    }
                })
                .or_insert(port);
        }
    }

    let mut claims: BTreeMap<Mac, Vec<Claim<'a>>> = BTreeMap::new();
    let mut tenants_by_subnet: FxHashMap<&'a str, FxHashSet<&'a str>> = FxHashMap::default();
    for port in &idx.snap.ports {
        let Some(adm) = admit(idx, octavia, &parent_of, port, anomalies) else {
            continue;
        };
        for f in &port.fixed_ips {
            if let Some(s) = idx.subnets.get(f.subnet_id.as_str()) {
                tenants_by_subnet
                    .entry(s.id.as_str())
                    .or_default()
                    .insert(adm.tenant);
            }
        }
        let claim = |kind| Claim {
            kind,
            port,
            tenant: adm.tenant,
            server: adm.server,
            amphora: adm.amphora,
        };
        let mut push = |mac: Mac, kind: ClaimKind| {
            if let Some(owner) = platform.get(&mac) {
                anomalies.push(Anomaly {
                    class: AnomalyClass::MacConflict,
                    detail: format!(
                        "port {} (project {}) claims MAC {mac} of platform port {} ({}): not bound",
                        port.id, adm.tenant, owner.id, owner.device_owner
                    ),
                });
            } else {
                claims.entry(mac).or_default().push(claim(kind));
            }
        };
        push(adm.mac, adm.kind);
        for pair in &port.allowed_address_pairs {
            if let Some(vmac) = pair.mac.filter(|m| *m != adm.mac) {
                push(vmac, ClaimKind::AddressPair);
            }
        }
    }

    let mut bindings = Vec::with_capacity(claims.len());
    for (mac, mut list) in claims {
        list.sort_by(|a, b| (a.kind, &a.port.id).cmp(&(b.kind, &b.port.id)));
        list.dedup_by(|a, b| a.port.id == b.port.id);
        let winner = &list[0];
        for loser in &list[1..] {
            if loser.kind == ClaimKind::Subport {
                anomalies.push(Anomaly {
                    class: AnomalyClass::TrunkSubports,
                    detail: format!(
                        "trunk subport {} shares MAC {mac} with port {}: its traffic bills to that port",
                        loser.port.id, winner.port.id
                    ),
                });
            } else if loser.tenant != winner.tenant {
                anomalies.push(Anomaly {
                    class: AnomalyClass::MacConflict,
                    detail: format!(
                        "MAC {mac} claimed by port {} (project {}) and port {} (project {}): bound to {}",
                        winner.port.id, winner.tenant, loser.port.id, loser.tenant, winner.port.id
                    ),
                });
            }
        }
        bindings.push(Binding {
            mac,
            tenant: winner.tenant.to_owned(),
            server: winner.server.to_owned(),
            port: winner.port.id.clone(),
            external_network: vm_fallback(idx, winner.port, anomalies),
            amphora: winner.amphora,
        });
    }
    BoundPorts {
        bindings,
        tenants_by_subnet,
    }
}
