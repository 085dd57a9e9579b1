//! The Octavia join of DESIGN §6.5: amphora data ports bill to their load
//! balancer's owner and their addresses become `amphora_ips`.

use std::net::IpAddr;

use rustc_hash::{FxHashMap, FxHashSet};

use crate::index::Index;
use crate::plan::{AmphoraIp, Anomaly, AnomalyClass, Plan};

/// Octavia provider names whose load balancers run on amphorae, the one
/// list both the join and the `non_amphora_lb` check read: `amphora` (the
/// default driver), `amphorav2` (the jobboard driver, same amphora VMs and
/// the same amphora API) and `octavia` (the historical alias of `amphora`).
/// Any other provider (e.g. `ovn`) has no amphora VMs to re-attribute.
const AMPHORA_PROVIDERS: &[&str] = &["amphora", "amphorav2", "octavia"];

pub(crate) struct OctaviaJoin<'a> {
    /// Data port id → the load balancer's project.
    pub data_ports: FxHashMap<&'a str, &'a str>,
    /// Sorted, deduplicated.
    pub amphora_ips: Vec<AmphoraIp>,
    pub anomalies: Vec<Anomaly>,
}

pub(crate) fn join<'a>(idx: &Index<'a>, previous: Option<&'a Plan>) -> OctaviaJoin<'a> {
    let mut out = OctaviaJoin {
        data_ports: FxHashMap::default(),
        amphora_ips: Vec::new(),
        anomalies: Vec::new(),
    };
    if idx.snap.sources.octavia_failed() {
        // Unknown is not empty: re-planning without the lists would move
        // every amphora data port back to the service project until the
        // next successful fetch, and back again (reconcile contract).
        if let Some(lbs) = &idx.snap.load_balancers {
            non_amphora(lbs.iter(), &mut out.anomalies);
        }
        if let Some(prev) = previous {
            keep_previous(idx, prev, &mut out);
        }
        return out;
    }
    let (Some(lbs), Some(amphorae)) = (&idx.snap.load_balancers, &idx.snap.amphorae) else {
        if let Some(lbs) = &idx.snap.load_balancers {
            non_amphora(lbs.iter(), &mut out.anomalies);
        }
        return out;
    };
    non_amphora(lbs.iter(), &mut out.anomalies);
    let owners: FxHashMap<&str, &str> = lbs
        .iter()
        .filter(|lb| {
            AMPHORA_PROVIDERS.contains(&lb.provider.as_str()) && lb.provisioning_status != "DELETED"
        })
        .map(|lb| (lb.id.as_str(), lb.project.as_str()))
        .collect();
    // compute_id → (LB owner, management address). Amphorae are visited in
    // id order so a (corrupt) shared compute_id resolves the same way always.
    let mut live: Vec<_> = amphorae.iter().filter(|a| a.status != "DELETED").collect();
    live.sort_by(|a, b| a.id.cmp(&b.id));
    let mut by_compute: FxHashMap<&str, (&str, IpAddr)> = FxHashMap::default();
    for amp in live {
        let (Some(lb), Some(compute)) = (&amp.loadbalancer_id, &amp.compute_id) else {
            continue;
        };
        let Some(owner) = owners.get(lb.as_str()) else {
            continue;
        };
        // Without lb_network_ip the management port cannot be told from the
        // data ports: moving them all would bill the Octavia control
        // traffic to the LB owner and put the management address into the
        // insert-only amphora map, so none moves until Octavia reports it.
        let Some(mgmt) = amp.lb_network_ip else {
            out.anomalies.push(Anomaly {
                class: AnomalyClass::AmphoraWithoutLbNetworkIp,
                detail: format!(
                    "amphora {} (load balancer {lb}, server {compute}, status {:?}) has no lb_network_ip: its ports stay with their own project",
                    amp.id, amp.status
                ),
            });
            continue;
        };
        by_compute.entry(compute.as_str()).or_insert((owner, mgmt));
    }
    if by_compute.is_empty() {
        return out;
    }
    for port in &idx.snap.ports {
        let Some((owner, mgmt)) = by_compute.get(port.device_id.as_str()) else {
            continue;
        };
        // The management port (holding lb_network_ip) talks to the Octavia
        // controllers, not to tenants: it stays an ordinary service-project port.
        if port.fixed_ips.iter().any(|f| f.address == *mgmt) {
            continue;
        }
        out.data_ports.insert(port.id.as_str(), owner);
        for f in &port.fixed_ips {
            out.amphora_ips.push(AmphoraIp {
                tenant: (*owner).to_owned(),
                address: f.address,
            });
        }
    }
    out.amphora_ips.sort();
    out.amphora_ips.dedup();
    out
}

fn non_amphora<'a>(
    lbs: impl Iterator<Item = &'a crate::snapshot::LoadBalancer>,
    anomalies: &mut Vec<Anomaly>,
) {
    for lb in lbs {
        if lb.provisioning_status == "DELETED" || AMPHORA_PROVIDERS.contains(&lb.provider.as_str())
        {
            continue;
        }
        anomalies.push(Anomaly {
            class: AnomalyClass::NonAmphoraLb,
            detail: format!(
                "load balancer {} (project {}) uses provider {:?}: not modelled, its ports bill as ordinary ports",
                lb.id, lb.project, lb.provider
            ),
        });
    }
}

/// The reconcile contract when Octavia failed: the previous plan's amphora
/// bindings whose port is still present and still carries the bound MAC
/// (its own or an address-pair MAC) keep their load-balancer owner, and the
/// previous `amphora_ips` of those ports' addresses stay.
fn keep_previous<'a>(idx: &Index<'a>, prev: &'a Plan, out: &mut OctaviaJoin<'a>) {
    let mut kept: FxHashSet<(&str, IpAddr)> = FxHashSet::default();
    for b in prev.bindings.iter().filter(|b| b.amphora) {
        let Some(port) = idx.ports.get(b.port.as_str()) else {
            continue;
        };
        let carries = port.mac == Some(b.mac)
            || port
                .allowed_address_pairs
                .iter()
                .any(|p| p.mac == Some(b.mac));
        if !carries {
            continue;
        }
        out.data_ports.insert(port.id.as_str(), b.tenant.as_str());
        for f in &port.fixed_ips {
            kept.insert((b.tenant.as_str(), f.address));
        }
    }
    out.amphora_ips = prev
        .amphora_ips
        .iter()
        .filter(|a| kept.contains(&(a.tenant.as_str(), a.address)))
        .cloned()
        .collect();
    out.amphora_ips.sort();
    out.amphora_ips.dedup();
}
