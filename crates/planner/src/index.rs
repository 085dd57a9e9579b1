//! Lookup tables over a snapshot, built once per plan.
//!
//! Every list here is sorted so that "the first match" never depends on the
//! order of the input lists (DESIGN §6: same snapshot, same plan).

use std::net::IpAddr;

// FxHash instead of SipHash: keys come from the cloud's admin APIs, and a
// collision flood could only slow a plan down, never change it (every output
// is sorted, every tie broken explicitly).
use rustc_hash::{FxBuildHasher, FxHashMap, FxHashSet};

use crate::snapshot::{FloatingIp, Network, Port, Router, Snapshot, Subnet};

/// Router ports that make a subnet "attached" to a router (DESIGN §6.1 step 5)
/// and that a static route's nexthop can walk through (§6.2 B).
pub(crate) const ROUTER_INTERFACE_OWNERS: &[&str] = &[
    "network:router_interface",
    "network:router_interface_distributed",
    "network:ha_router_replicated_interface",
];

/// Router-owned ports whose MAC a VM sees as its peer when routed (§6.4 rule 1).
pub(crate) const ROUTER_MAC_OWNERS: &[&str] = &[
    "network:router_interface",
    "network:router_interface_distributed",
    "network:ha_router_replicated_interface",
    "network:router_centralized_snat",
];

/// Ports whose fixed IPs are platform addresses (§6.1 step 3).
pub(crate) const PLATFORM_OWNERS: &[&str] = &[
    "network:dhcp",
    "network:distributed",
    "network:router_interface",
    "network:router_interface_distributed",
    "network:ha_router_replicated_interface",
    "network:router_gateway",
    "network:router_centralized_snat",
];

/// The metadata service addresses (§6.1 step 3).
pub(crate) const METADATA_ADDRESSES: [IpAddr; 2] = [
    IpAddr::V4(std::net::Ipv4Addr::new(169, 254, 169, 254)),
    IpAddr::V6(std::net::Ipv6Addr::new(
        0xfe80, 0, 0, 0, 0, 0, 0xa9fe, 0xa9fe,
    )),
];

/// True for VM ports (Nova writes `compute:<az>`).
pub(crate) fn is_compute(owner: &str) -> bool {
    owner.starts_with("compute:")
}

pub(crate) fn is_router_interface(owner: &str) -> bool {
    ROUTER_INTERFACE_OWNERS.contains(&owner)
}

pub(crate) struct Index<'a> {
    pub snap: &'a Snapshot,
    pub networks: FxHashMap<&'a str, &'a Network>,
    pub subnets: FxHashMap<&'a str, &'a Subnet>,
    pub routers: FxHashMap<&'a str, &'a Router>,
    pub ports: FxHashMap<&'a str, &'a Port>,
    pub projects: FxHashSet<&'a str>,
    /// Router id → subnets attached by router-interface ports, sorted by id.
    pub router_interfaces: FxHashMap<&'a str, Vec<&'a Subnet>>,
    /// Router id → interface subnets plus external gateway subnets, sorted by id.
    pub router_reach: FxHashMap<&'a str, Vec<&'a Subnet>>,
    /// (subnet id, address) → the port holding it; when stale data has
    /// several, a router interface, then a VM, then the smallest port id.
    pub port_at: FxHashMap<(&'a str, IpAddr), &'a Port>,
    /// Subnet id → platform addresses inside its CIDR (step 3 ports and
    /// `gateway_ip`), sorted: what step 7 lends the subnet's rows.
    pub platform_by_subnet: FxHashMap<&'a str, Vec<IpAddr>>,
    /// Every platform address of step 3, including a `gateway_ip` outside
    /// its subnet's CIDR and the metadata addresses; sorted, deduplicated.
    pub platform_addresses: Vec<IpAddr>,
    /// Port id → floating IPs bound to it, sorted by id.
    pub fips_by_port: FxHashMap<&'a str, Vec<&'a FloatingIp>>,
    /// Fixed address → floating IPs mapped to it, sorted by id.
    pub fips_by_fixed: FxHashMap<IpAddr, Vec<&'a FloatingIp>>,
}

impl<'a> Index<'a> {
    pub fn new(snap: &'a Snapshot) -> Index<'a> {
        let networks = snap.networks.iter().map(|n| (n.id.as_str(), n)).collect();
        let subnets: FxHashMap<&str, &Subnet> =
            snap.subnets.iter().map(|s| (s.id.as_str(), s)).collect();
        let routers = snap.routers.iter().map(|r| (r.id.as_str(), r)).collect();
        let ports = snap.ports.iter().map(|p| (p.id.as_str(), p)).collect();
        let projects = snap.projects.iter().map(|p| p.id.as_str()).collect();

        let mut router_interfaces: FxHashMap<&str, Vec<&Subnet>> =
            FxHashMap::with_capacity_and_hasher(snap.routers.len(), FxBuildHasher);
        let mut port_at: FxHashMap<(&str, IpAddr), &Port> =
            FxHashMap::with_capacity_and_hasher(snap.ports.len(), FxBuildHasher);
        let mut platform_by_subnet: FxHashMap<&str, Vec<IpAddr>> =
            FxHashMap::with_capacity_and_hasher(snap.subnets.len(), FxBuildHasher);
        for port in &snap.ports {
            let interface = is_router_interface(&port.device_owner) && !port.device_id.is_empty();
            let platform = PLATFORM_OWNERS.contains(&port.device_owner.as_str());
            for fip in &port.fixed_ips {
                let Some(subnet) = subnets.get(fip.subnet_id.as_str()) else {
                    continue;
                };
                // An address outside its subnet's CIDR is stale data; it
                // would place rows in the wrong subnet.
                if !subnet.cidr.contains(fip.address) {
                    continue;
                }
                port_at
                    .entry((subnet.id.as_str(), fip.address))
                    .and_modify(|held| {
                        if holder_rank(port) < holder_rank(held) {
                            *held = port;
                        }
                    })
                    .or_insert(port);
                if interface {
                    router_interfaces
                        .entry(port.device_id.as_str())
                        .or_default()
                        .push(subnet);
                }
                if platform {
                    platform_by_subnet
                        .entry(subnet.id.as_str())
                        .or_default()
                        .push(fip.address);
                }
            }
        }
        let platform_addresses = add_gateways(snap, &mut platform_by_subnet);
        for v in router_interfaces.values_mut() {
            v.sort_by(|a, b| a.id.cmp(&b.id));
            v.dedup_by(|a, b| a.id == b.id);
        }
        let mut router_reach = router_interfaces.clone();
        for router in &snap.routers {
            for gw in &router.gateway_ips {
                if let Some(subnet) = subnets.get(gw.subnet_id.as_str()) {
                    router_reach
                        .entry(router.id.as_str())
                        .or_default()
                        .push(subnet);
                }
            }
        }
        for v in router_reach.values_mut() {
            v.sort_by(|a, b| a.id.cmp(&b.id));
            v.dedup_by(|a, b| a.id == b.id);
        }
        let (fips_by_port, fips_by_fixed) = index_fips(snap);
        Index {
            snap,
            networks,
            subnets,
            routers,
            ports,
            projects,
            router_interfaces,
            router_reach,
            port_at,
            platform_by_subnet,
            platform_addresses,
            fips_by_port,
            fips_by_fixed,
        }
    }

    pub fn network_of(&self, subnet: &Subnet) -> Option<&'a Network> {
        self.networks.get(subnet.network_id.as_str()).copied()
    }

    /// The external-network label of a network id: its name, else the id.
    pub fn network_label<'s>(&self, network_id: &'s str) -> &'s str
    where
        'a: 's,
    {
        self.networks
            .get(network_id)
            .map_or(network_id, |n| n.label())
    }

    /// The owner of a subnet for zone purposes: its network's project, else
    /// the subnet's own.
    pub fn owner_of(&self, subnet: &'a Subnet) -> &'a str {
        match self.network_of(subnet) {
            Some(n) if !n.project.is_empty() => &n.project,
            _ => &subnet.project,
        }
    }
}

/// Adds each subnet's `gateway_ip` to the per-subnet platform lists, sorts
/// them, and returns every platform address of step 3, sorted.
fn add_gateways<'a>(
    snap: &'a Snapshot,
    platform_by_subnet: &mut FxHashMap<&'a str, Vec<IpAddr>>,
) -> Vec<IpAddr> {
    // Neutron accepts a gateway outside the CIDR (an IPv6 link-local
    // router address is common): it is a platform address all the same
    // (step 3), but lends no /32 to the subnet's rows (step 7), which
    // cannot contain it.
    let mut outside_gateways = Vec::new();
    for subnet in &snap.subnets {
        if let Some(g) = subnet.gateway {
            if subnet.cidr.contains(g) {
                platform_by_subnet
                    .entry(subnet.id.as_str())
                    .or_default()
                    .push(g);
            } else {
                outside_gateways.push(g);
            }
        }
    }
    for v in platform_by_subnet.values_mut() {
        v.sort_unstable();
        v.dedup();
    }
    let mut platform_addresses: Vec<IpAddr> = platform_by_subnet
        .values()
        .flatten()
        .copied()
        .chain(outside_gateways)
        .chain(METADATA_ADDRESSES)
        .collect();
    platform_addresses.sort_unstable();
    platform_addresses.dedup();
    platform_addresses
}

type FipIndex<'a> = (
    FxHashMap<&'a str, Vec<&'a FloatingIp>>,
    FxHashMap<IpAddr, Vec<&'a FloatingIp>>,
);

/// Floating IPs by port and by fixed address, each list sorted by id.
fn index_fips(snap: &Snapshot) -> FipIndex<'_> {
    let mut fips_by_port: FxHashMap<&str, Vec<&FloatingIp>> = FxHashMap::default();
    let mut fips_by_fixed: FxHashMap<IpAddr, Vec<&FloatingIp>> = FxHashMap::default();
    for fip in &snap.floating_ips {
        if let Some(p) = &fip.port_id {
            fips_by_port.entry(p.as_str()).or_default().push(fip);
            if let Some(a) = fip.fixed_ip {
                fips_by_fixed.entry(a).or_default().push(fip);
            }
        }
    }
    for v in fips_by_port.values_mut().chain(fips_by_fixed.values_mut()) {
        v.sort_by(|a, b| a.id.cmp(&b.id));
    }
    (fips_by_port, fips_by_fixed)
}

/// Preference among ports holding one address (stale data): a router
/// interface, then a VM, then anything; ties by port id, so the choice does
/// not depend on list order.
fn holder_rank(port: &Port) -> (u8, &str) {
    let class = if is_router_interface(&port.device_owner) {
        0
    } else if is_compute(&port.device_owner) {
        1
    } else {
        2
    };
    (class, port.id.as_str())
}
