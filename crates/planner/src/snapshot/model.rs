//! The snapshot: the fields of DESIGN §5 the planner uses, validated.

use std::net::IpAddr;

use lachesis_abi::Mac;

use crate::sources::Sources;
use lachesis_abi::Prefix;

/// Everything the planner reads, parsed and validated.
///
/// The planner does not depend on the order of any list (DESIGN §6: same
/// snapshot, same plan); the parser nevertheless sorts each list by id so
/// that duplicates are resolved the same way whatever order the API used.
///
/// Every entry type is ordered field by field (`Ord`): of entries that
/// share an id, the parser keeps the one that sorts first, a choice made
/// from what was parsed alone (the pages it came in are gone by then).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// Neutron networks.
    pub networks: Vec<Network>,
    /// Neutron subnets.
    pub subnets: Vec<Subnet>,
    /// Neutron ports.
    pub ports: Vec<Port>,
    /// Neutron routers.
    pub routers: Vec<Router>,
    /// Neutron floating IPs.
    pub floating_ips: Vec<FloatingIp>,
    /// Keystone projects.
    pub projects: Vec<Project>,
    /// Nova servers; `None` unless fetched (`sources` says why).
    pub servers: Option<Vec<Server>>,
    /// Octavia load balancers; `None` unless fetched.
    pub load_balancers: Option<Vec<LoadBalancer>>,
    /// Octavia amphorae; `None` unless fetched.
    pub amphorae: Option<Vec<Amphora>>,
    /// Whether each best-effort list was fetched, failed or is not deployed.
    pub sources: Sources,
}

/// A Neutron network.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Network {
    /// Network UUID.
    pub id: String,
    /// Name; `None` when empty or absent (labels then use the id).
    pub name: Option<String>,
    /// Owning project (`""` when Neutron reports none).
    pub project: String,
    /// `shared`.
    pub shared: bool,
    /// `router:external`.
    pub external: bool,
}

impl Network {
    /// The `external_network` label of DESIGN §6.4: the name, else the id.
    #[must_use]
    pub fn label(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.id)
    }
}

/// A Neutron subnet.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Subnet {
    /// Subnet UUID.
    pub id: String,
    /// Network it belongs to.
    pub network_id: String,
    /// Owning project (`""` when none).
    pub project: String,
    /// The subnet's CIDR, canonical.
    pub cidr: Prefix,
    /// `gateway_ip`; `None` when null, absent or malformed.
    pub gateway: Option<IpAddr>,
}

/// One entry of a port's `fixed_ips`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct FixedIp {
    /// Subnet holding the address.
    pub subnet_id: String,
    /// The address.
    pub address: IpAddr,
}

/// One entry of a port's `allowed_address_pairs`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct AddressPair {
    /// `ip_address` (Neutron accepts a single address or a CIDR).
    pub prefix: Prefix,
    /// `mac_address`; `None` means the port's own MAC.
    pub mac: Option<Mac>,
}

/// A Neutron port.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Port {
    /// Port UUID.
    pub id: String,
    /// Network it is plugged into.
    pub network_id: String,
    /// Owning project (`""` when none).
    pub project: String,
    /// `mac_address`; `None` when absent or malformed (then the port still
    /// contributes its addresses but cannot be bound).
    pub mac: Option<Mac>,
    /// `device_id` (server, router, DHCP agent, trunk, …); `""` when none.
    pub device_id: String,
    /// `device_owner`; `""` when none.
    pub device_owner: String,
    /// `fixed_ips`, malformed entries removed.
    pub fixed_ips: Vec<FixedIp>,
    /// `allowed_address_pairs`, malformed entries removed.
    pub allowed_address_pairs: Vec<AddressPair>,
    /// Port ids of `trunk_details.sub_ports` when this is a trunk's parent.
    pub trunk_subports: Vec<String>,
}

/// A static route of a router (the extraroute extension).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Route {
    /// `destination`.
    pub destination: Prefix,
    /// `nexthop`.
    pub nexthop: IpAddr,
}

/// A Neutron router.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Router {
    /// Router UUID.
    pub id: String,
    /// Name; `None` when empty or absent (for display only).
    pub name: Option<String>,
    /// Owning project (`""` when none).
    pub project: String,
    /// External gateway networks: `external_gateway_info.network_id` and any
    /// `external_gateways[].network_id`, sorted and deduplicated.
    pub gateway_networks: Vec<String>,
    /// `external_fixed_ips` of every gateway.
    pub gateway_ips: Vec<FixedIp>,
    /// `routes`, malformed entries removed, sorted.
    pub routes: Vec<Route>,
}

/// A Neutron floating IP.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct FloatingIp {
    /// Floating IP UUID.
    pub id: String,
    /// `floating_network_id`.
    pub network_id: String,
    /// `floating_ip_address`; `None` when absent or malformed (display only:
    /// the plan never reads it).
    pub address: Option<IpAddr>,
    /// Owning project (`""` when none; display only).
    pub project: String,
    /// `port_id`; `None` when unassociated.
    pub port_id: Option<String>,
    /// `fixed_ip_address`; `None` when unassociated.
    pub fixed_ip: Option<IpAddr>,
}

/// A Keystone project.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Project {
    /// Project id.
    pub id: String,
    /// Project name (`""` when absent).
    pub name: String,
}

/// A Nova server.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Server {
    /// Server UUID.
    pub id: String,
    /// Server name (`""` when absent).
    pub name: String,
    /// `tenant_id` (`""` when absent).
    pub project: String,
}

/// An Octavia load balancer.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct LoadBalancer {
    /// Load balancer UUID.
    pub id: String,
    /// Owning project.
    pub project: String,
    /// `provider` (`amphora`, `amphorav2`, the alias `octavia`, `ovn`, …).
    pub provider: String,
    /// `provisioning_status` (`ACTIVE`, `DELETED`, …; `""` when absent).
    pub provisioning_status: String,
}

/// An Octavia amphora.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Amphora {
    /// Amphora UUID.
    pub id: String,
    /// `loadbalancer_id`; `None` for a spare amphora.
    pub loadbalancer_id: Option<String>,
    /// `compute_id`: the Nova server, i.e. its ports' `device_id`.
    pub compute_id: Option<String>,
    /// `lb_network_ip`: the management port's address.
    pub lb_network_ip: Option<IpAddr>,
    /// `status` (`ALLOCATED`, `DELETED`, …).
    pub status: String,
}
