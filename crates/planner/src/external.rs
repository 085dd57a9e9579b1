//! External-network attribution (DESIGN §6.4): the router-MAC map and the
//! per-VM fallback label carried on each binding.

use std::collections::BTreeMap;

use crate::index::{is_router_interface, Index, ROUTER_MAC_OWNERS};
use crate::plan::{Anomaly, AnomalyClass, RouterMac};
use crate::snapshot::{Port, Router};
use lachesis_abi::Prefix;

/// The label of a router's external gateway; several gateways → the
/// smallest label and an anomaly (stable across passes, never flapping).
pub(crate) fn router_label(
    idx: &Index<'_>,
    router: &Router,
    anomalies: &mut Vec<Anomaly>,
) -> Option<String> {
    let mut labels: Vec<&str> = router
        .gateway_networks
        .iter()
        .map(|n| idx.network_label(n))
        .collect();
    labels.sort_unstable();
    labels.dedup();
    if labels.len() > 1 {
        anomalies.push(Anomaly {
            class: AnomalyClass::MultiExternalPath,
            detail: format!(
                "router {} has gateways on {}: labelled {}",
                router.id,
                labels.join(", "),
                labels[0]
            ),
        });
    }
    labels.first().map(|l| (*l).to_owned())
}

/// Router interface MAC → router and its external network, one per MAC.
pub(crate) fn router_macs(idx: &Index<'_>, anomalies: &mut Vec<Anomaly>) -> Vec<RouterMac> {
    let mut labels: BTreeMap<&str, Option<String>> = BTreeMap::new();
    let mut routers: Vec<&Router> = idx.snap.routers.iter().collect();
    routers.sort_by(|a, b| a.id.cmp(&b.id));
    for r in routers {
        labels.insert(r.id.as_str(), router_label(idx, r, anomalies));
    }
    let mut by_mac: BTreeMap<lachesis_abi::Mac, Vec<&str>> = BTreeMap::new();
    for port in &idx.snap.ports {
        if !ROUTER_MAC_OWNERS.contains(&port.device_owner.as_str()) || port.device_id.is_empty() {
            continue;
        }
        if let Some(mac) = port.mac {
            by_mac.entry(mac).or_default().push(port.device_id.as_str());
        }
    }
    let mut out = Vec::with_capacity(by_mac.len());
    for (mac, mut owners) in by_mac {
        owners.sort_unstable();
        owners.dedup();
        if owners.len() > 1 {
            anomalies.push(Anomaly {
                class: AnomalyClass::DuplicateRouterMac,
                detail: format!(
                    "MAC {mac} is on ports of routers {}: attributed to {}",
                    owners.join(", "),
                    owners[0]
                ),
            });
        }
        let router = owners[0];
        out.push(RouterMac {
            mac,
            router: router.to_owned(),
            external_network: labels.get(router).cloned().flatten(),
        });
    }
    out
}

/// The per-VM fallback label of DESIGN §6.4 rule 2 for an admitted port.
pub(crate) fn vm_fallback(
    idx: &Index<'_>,
    port: &Port,
    anomalies: &mut Vec<Anomaly>,
) -> Option<String> {
    // (a) Floating IPs on the port, or on a VIP the port carries as an
    // allowed address pair (keepalived, amphora) in the same network.
    let mut fip_labels: Vec<&str> = idx
        .fips_by_port
        .get(port.id.as_str())
        .into_iter()
        .flatten()
        .map(|f| idx.network_label(&f.network_id))
        .collect();
    // Only single-address pairs are VIPs: a pair such as 0.0.0.0/0 (common
    // on Kubernetes nodes) would otherwise claim every neighbour's FIP.
    for pair in &port.allowed_address_pairs {
        if pair.prefix != Prefix::host(pair.prefix.addr()) {
            continue;
        }
        for fip in idx
            .fips_by_fixed
            .get(&pair.prefix.addr())
            .into_iter()
            .flatten()
        {
            let Some(fport) = fip.port_id.as_deref() else {
                continue;
            };
            if fport != port.id
                && idx
                    .ports
                    .get(fport)
                    .is_some_and(|p| p.network_id == port.network_id)
            {
                fip_labels.push(idx.network_label(&fip.network_id));
            }
        }
    }
    if !fip_labels.is_empty() {
        return pick(port, "floating IPs", fip_labels, anomalies);
    }
    // (b) The external gateway of the router that owns each subnet's
    // gateway_ip: the VM's default route.
    let mut gw_labels = Vec::new();
    for f in &port.fixed_ips {
        let Some(subnet) = idx.subnets.get(f.subnet_id.as_str()) else {
            continue;
        };
        let Some(gw) = subnet.gateway else { continue };
        let Some(holder) = idx.port_at.get(&(subnet.id.as_str(), gw)) else {
            continue;
        };
        if !is_router_interface(&holder.device_owner) {
            continue;
        }
        if let Some(r) = idx.routers.get(holder.device_id.as_str()) {
            gw_labels.extend(r.gateway_networks.iter().map(|n| idx.network_label(n)));
        }
    }
    if gw_labels.is_empty() {
        return None;
    }
    pick(port, "gateway routers", gw_labels, anomalies)
}

fn pick(
    port: &Port,
    via: &str,
    mut labels: Vec<&str>,
    anomalies: &mut Vec<Anomaly>,
) -> Option<String> {
    labels.sort_unstable();
    labels.dedup();
    if labels.len() > 1 {
        anomalies.push(Anomaly {
            class: AnomalyClass::MultiExternalPath,
            detail: format!(
                "port {} (server {}): {via} lead to {}: labelled {}",
                port.id,
                port.device_id,
                labels.join(", "),
                labels[0]
            ),
        });
    }
    labels.first().map(|l| (*l).to_owned())
}
