//! What the cloud looks like, for people: networks, routers, floating IPs
//! and VM ports, summarised from a snapshot (the debug pages' topology
//! view and name lookups). The plan says what the kernel is given; this
//! says where it came from. Nothing here is programmed or persisted.

use std::collections::BTreeMap;
use std::net::IpAddr;

use lachesis_abi::{Mac, Prefix};

use crate::index::{is_compute, is_router_interface};
use crate::snapshot::{Route, Snapshot};

/// The cloud as a picture: every list sorted by id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Topology {
    /// Keystone projects (id → name, `""` when nameless).
    pub projects: BTreeMap<String, String>,
    /// Nova servers (id → name); empty when Nova was not fetched.
    pub servers: BTreeMap<String, String>,
    /// Neutron networks with their subnets' CIDRs.
    pub networks: Vec<NetworkSummary>,
    /// Neutron routers with the networks they join.
    pub routers: Vec<RouterSummary>,
    /// Floating IPs.
    pub floating_ips: Vec<FloatingIpSummary>,
    /// VM ports (`compute:*` device owners), amphorae included.
    pub vm_ports: Vec<VmPort>,
}

/// One network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkSummary {
    /// Network id.
    pub id: String,
    /// Name, `None` when nameless.
    pub name: Option<String>,
    /// Owning project (`""` when none).
    pub project: String,
    /// `shared`.
    pub shared: bool,
    /// `router:external`.
    pub external: bool,
    /// Its subnets' CIDRs, sorted.
    pub cidrs: Vec<Prefix>,
}

impl NetworkSummary {
    /// The name, else the id (the `external_network` label rule, DESIGN §6.4).
    #[must_use]
    pub fn label(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.id)
    }
}

/// One router.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouterSummary {
    /// Router id.
    pub id: String,
    /// Name, `None` when nameless.
    pub name: Option<String>,
    /// Owning project (`""` when none).
    pub project: String,
    /// External gateway networks, sorted.
    pub gateways: Vec<String>,
    /// Networks it has an interface port on (router-interface device
    /// owners, DESIGN §6.1 step 5), sorted and deduplicated.
    pub interfaces: Vec<String>,
    /// Static routes, sorted.
    pub routes: Vec<Route>,
}

impl RouterSummary {
    /// The name, else the id.
    #[must_use]
    pub fn label(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.id)
    }
}

/// One floating IP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FloatingIpSummary {
    /// Floating IP id.
    pub id: String,
    /// `floating_ip_address`, when known.
    pub address: Option<IpAddr>,
    /// The external network it is taken from.
    pub network: String,
    /// Owning project (`""` when none).
    pub project: String,
    /// The port it is bound to, `None` when free.
    pub port: Option<String>,
    /// The fixed address it maps to, `None` when free.
    pub fixed_ip: Option<IpAddr>,
}

/// One VM port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmPort {
    /// Port id.
    pub id: String,
    /// The network it is plugged into.
    pub network: String,
    /// Owning project (`""` when none).
    pub project: String,
    /// The server (`device_id`).
    pub server: String,
    /// Its MAC, when parseable.
    pub mac: Option<Mac>,
    /// Its fixed addresses.
    pub addresses: Vec<IpAddr>,
}

impl Topology {
    /// A project's name, else its id.
    #[must_use]
    pub fn project_label<'a>(&'a self, id: &'a str) -> &'a str {
        match self.projects.get(id) {
            Some(name) if !name.is_empty() => name,
            _ => id,
        }
    }

    /// A server's name, else its id.
    #[must_use]
    pub fn server_label<'a>(&'a self, id: &'a str) -> &'a str {
        match self.servers.get(id) {
            Some(name) if !name.is_empty() => name,
            _ => id,
        }
    }

    /// The network with `id`.
    #[must_use]
    pub fn network(&self, id: &str) -> Option<&NetworkSummary> {
        self.networks
            .binary_search_by(|n| n.id.as_str().cmp(id))
            .ok()
            .map(|i| &self.networks[i])
    }

    /// The router with `id`.
    #[must_use]
    pub fn router(&self, id: &str) -> Option<&RouterSummary> {
        self.routers
            .binary_search_by(|r| r.id.as_str().cmp(id))
            .ok()
            .map(|i| &self.routers[i])
    }
}

/// Summarises `snapshot` (whose lists the parser sorted by id).
#[must_use]
pub fn summarize(snapshot: &Snapshot) -> Topology {
    let mut cidrs: BTreeMap<&str, Vec<Prefix>> = BTreeMap::new();
    for s in &snapshot.subnets {
        cidrs.entry(&s.network_id).or_default().push(s.cidr);
    }
    let mut interfaces: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut vm_ports = Vec::new();
    for p in &snapshot.ports {
        if is_router_interface(&p.device_owner) && !p.device_id.is_empty() {
            interfaces
                .entry(&p.device_id)
                .or_default()
                .push(p.network_id.clone());
        } else if is_compute(&p.device_owner) {
            vm_ports.push(VmPort {
                id: p.id.clone(),
                network: p.network_id.clone(),
                project: p.project.clone(),
                server: p.device_id.clone(),
                mac: p.mac,
                addresses: p.fixed_ips.iter().map(|f| f.address).collect(),
            });
        }
    }
    vm_ports.sort_by(|a, b| a.id.cmp(&b.id));
    let mut networks: Vec<NetworkSummary> = snapshot
        .networks
        .iter()
        .map(|n| {
            let mut cidrs = cidrs.remove(n.id.as_str()).unwrap_or_default();
            cidrs.sort();
            NetworkSummary {
                id: n.id.clone(),
                name: n.name.clone(),
                project: n.project.clone(),
                shared: n.shared,
                external: n.external,
                cidrs,
            }
        })
        .collect();
    // The parser sorts by id; a snapshot built by hand may not be.
    networks.sort_by(|a, b| a.id.cmp(&b.id));
    let mut routers: Vec<RouterSummary> = snapshot
        .routers
        .iter()
        .map(|r| {
            let mut nets = interfaces.remove(r.id.as_str()).unwrap_or_default();
            nets.sort();
            nets.dedup();
            RouterSummary {
                id: r.id.clone(),
                name: r.name.clone(),
                project: r.project.clone(),
                gateways: r.gateway_networks.clone(),
                interfaces: nets,
                routes: r.routes.clone(),
            }
        })
        .collect();
    routers.sort_by(|a, b| a.id.cmp(&b.id));
    let mut floating_ips: Vec<FloatingIpSummary> = snapshot
        .floating_ips
        .iter()
        .map(|f| FloatingIpSummary {
            id: f.id.clone(),
            address: f.address,
            network: f.network_id.clone(),
            project: f.project.clone(),
            port: f.port_id.clone(),
            fixed_ip: f.fixed_ip,
        })
        .collect();
    floating_ips.sort_by(|a, b| a.id.cmp(&b.id));
    Topology {
        projects: snapshot
            .projects
            .iter()
            .map(|p| (p.id.clone(), p.name.clone()))
            .collect(),
        servers: snapshot
            .servers
            .iter()
            .flatten()
            .map(|s| (s.id.clone(), s.name.clone()))
            .collect(),
        networks,
        routers,
        floating_ips,
        vm_ports,
    }
}

#[cfg(test)]
mod tests;
