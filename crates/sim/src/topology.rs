//! The simulator's topology file (YAML, documented in docs/openstack.md).
//!
//! Resources are written in the input form of the real APIs (the fields a
//! create call takes); [`super::wire`] renders them as the services list them.
//! The same structs are the bodies of the mutation API.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::cidr::{check_subnet, AddressingError};
use crate::clock::Clock;
use crate::event_faults::NotificationFaults;

fn default_domain() -> String {
    "default".into()
}
fn yes() -> bool {
    true
}

/// The whole file: the cloud the simulator serves, one list per collection
/// (named as the API names it, so `floatingips`, `amphorae`). Every list may
/// be left out; [`crate::Store::from_topology`] checks ids and references.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    /// Server behaviour (paging, token lifetime, catalog); defaults when absent.
    #[serde(default)]
    pub settings: Settings,
    /// Listed by `GET /v3/projects`: the owners every `project_id` names.
    #[serde(default)]
    pub projects: Vec<Project>,
    /// Keystone users the password method accepts; never listed.
    #[serde(default)]
    pub users: Vec<User>,
    /// Credentials the `application_credential` method accepts; never listed.
    #[serde(default)]
    pub application_credentials: Vec<AppCredential>,
    /// Listed by `GET /v2.0/networks`.
    #[serde(default)]
    pub networks: Vec<Network>,
    /// Listed by `GET /v2.0/subnets`; addressing checked as Neutron checks it.
    #[serde(default)]
    pub subnets: Vec<Subnet>,
    /// Listed by `GET /v2.0/ports`: VM interfaces, router interfaces and
    /// gateways, VIPs.
    #[serde(default)]
    pub ports: Vec<Port>,
    /// Listed by `GET /v2.0/routers`.
    #[serde(default)]
    pub routers: Vec<Router>,
    /// Listed by `GET /v2.0/floatingips`.
    #[serde(default)]
    pub floatingips: Vec<FloatingIp>,
    /// Listed by `GET /v2.1/servers/detail`: every project's with
    /// `all_tenants`, else only the token's project's.
    #[serde(default)]
    pub servers: Vec<Server>,
    /// Listed by `GET /v2/lbaas/loadbalancers`.
    #[serde(default)]
    pub loadbalancers: Vec<LoadBalancer>,
    /// Listed by the admin-only `GET /v2/octavia/amphorae`.
    #[serde(default)]
    pub amphorae: Vec<Amphora>,
}

/// How Keystone answers `GET /v3/projects` (DESIGN §5).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeystonePaging {
    /// 2025.1+: `limit`/`marker` with `links.next`.
    #[default]
    Links,
    /// Older releases with `list_limit`: one page and `"truncated": true`.
    Truncated,
    /// No paging at all: every project in one answer.
    None,
}

/// Server-side behaviour; all of it can also be changed at run time.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// Largest page any list returns (Neutron's `pagination_max_limit`);
    /// `None` returns whole lists unless the client sends `limit`.
    pub page_size: Option<usize>,
    /// Token lifetime in seconds; an API call with an older token gets a 401.
    pub token_ttl_secs: u64,
    /// Catalog regions; every service has endpoints in each.
    pub regions: Vec<String>,
    /// Catalog service types (`identity`, `network`, `compute`, `load-balancer`).
    pub services: Vec<String>,
    /// Which Keystone release's project paging to imitate.
    pub keystone_paging: KeystonePaging,
    /// The simulator's time: an instant (`2026-01-01T00:00:00Z`, the
    /// default) that moves only when stepped, or `wall` for the system
    /// clock. It stamps `created_at` / `updated_at`.
    pub clock: Clock,
    /// Neutron's `filter_validation` (default on, as in Neutron): a list
    /// filtered by `changed_since` is a 400 "invalid attribute for
    /// filtering"; off, it answers what changed at or after that instant.
    pub neutron_filter_validation: bool,
    /// Notifications dropped, duplicated, reordered or delayed, by event
    /// type and probability, from a seed (none by default).
    pub notification_faults: NotificationFaults,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            page_size: None,
            token_ttl_secs: 3600,
            regions: vec!["RegionOne".into()],
            services: ["identity", "network", "compute", "load-balancer"]
                .map(String::from)
                .to_vec(),
            keystone_paging: KeystonePaging::Links,
            clock: Clock::default(),
            neutron_filter_validation: true,
            notification_faults: NotificationFaults::default(),
        }
    }
}

/// A Keystone project: a tenant, the owner that traffic is billed to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Project {
    /// Keystone's id (32 hex digits on a real cloud; any string here).
    pub id: String,
    /// Unique within its domain; a password token can be scoped by it.
    pub name: String,
    /// The simulator has no domain objects: a domain's name is its id, and
    /// `default` (named `Default`) is Keystone's default domain.
    #[serde(default = "default_domain")]
    pub domain_id: String,
    /// Free text, listed as is.
    #[serde(default)]
    pub description: String,
}

/// A Keystone user accepted by the password method.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct User {
    /// Keystone's id; a token request may name the user by it.
    pub id: String,
    /// Found together with `domain_id` when a request names the user.
    pub name: String,
    /// See [`Project::domain_id`].
    #[serde(default = "default_domain")]
    pub domain_id: String,
    /// Compared verbatim with the request's password.
    pub password: String,
}

/// An application credential (pre-scoped to `project_id`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppCredential {
    /// Keystone's id; a token request may name the credential by it.
    pub id: String,
    /// Found together with its user when a request names the credential.
    pub name: String,
    /// The owning user; must exist.
    pub user_id: String,
    /// The project every token from this credential is scoped to; a request
    /// that also asks for a scope is refused, as Keystone refuses it.
    pub project_id: String,
    /// Compared verbatim with the request's secret.
    pub secret: String,
}

/// A Neutron network.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Network {
    /// Neutron's id.
    pub id: String,
    /// Listed as is.
    #[serde(default)]
    pub name: String,
    /// The owning project.
    pub project_id: String,
    /// Usable by every project (Neutron's `shared`); traffic to its subnets
    /// is billed as `shared` (DESIGN §6.1).
    #[serde(default)]
    pub shared: bool,
    /// `router:external` on the wire (`external` is accepted in the file):
    /// router gateways and floating IPs may only sit on such a network.
    #[serde(rename = "router:external", alias = "external", default)]
    pub external: bool,
}

/// A Neutron subnet. Parsing checks its addressing as `POST /v2.0/subnets`
/// does (an optional `ip_version` key is checked against `cidr`, then
/// dropped: the listed `ip_version` always follows `cidr`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "SubnetInput")]
pub struct Subnet {
    /// Neutron's id.
    pub id: String,
    /// Listed as is; empty when absent.
    pub name: String,
    /// The network it belongs to; must exist.
    pub network_id: String,
    /// The owning project.
    pub project_id: String,
    /// `ADDRESS/LENGTH` in the form Neutron stores: address bits past the
    /// prefix are cleared when parsed (`10.0.0.5/24` becomes `10.0.0.0/24`).
    pub cidr: String,
    /// `None` (JSON `null`) for a subnet without a gateway. It is the address
    /// a router interface takes when plugged without `ip_address`.
    pub gateway_ip: Option<String>,
    /// Listed only (the simulator runs no DHCP); `true` when absent.
    pub enable_dhcp: bool,
}

/// A subnet as written in a topology file or a control-API body, before its
/// addressing is checked. `ip_version` is only checked: the listed one
/// always follows the `cidr`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SubnetInput {
    id: String,
    #[serde(default)]
    name: String,
    network_id: String,
    project_id: String,
    cidr: String,
    #[serde(default)]
    ip_version: Option<u8>,
    #[serde(default)]
    gateway_ip: Option<String>,
    #[serde(default = "yes")]
    enable_dhcp: bool,
}

/// A subnet whose addressing Neutron would refuse, named by its id.
#[derive(Debug, thiserror::Error)]
#[error("subnet {id:?}: {error}")]
struct SubnetRefused {
    id: String,
    error: AddressingError,
}

impl TryFrom<SubnetInput> for Subnet {
    type Error = SubnetRefused;

    fn try_from(s: SubnetInput) -> Result<Self, SubnetRefused> {
        match check_subnet(&s.cidr, s.ip_version, s.gateway_ip.as_deref()) {
            Ok(cidr) => Ok(Self {
                id: s.id,
                name: s.name,
                network_id: s.network_id,
                project_id: s.project_id,
                cidr: cidr.to_string(),
                gateway_ip: s.gateway_ip,
                enable_dhcp: s.enable_dhcp,
            }),
            Err(error) => Err(SubnetRefused { id: s.id, error }),
        }
    }
}

/// One address of a port (or of a router gateway) on one subnet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixedIp {
    /// The subnet; for a port it must be on the port's network.
    pub subnet_id: String,
    /// The address, as text (not checked against the subnet's `cidr`).
    pub ip_address: String,
}

/// An extra address (and MAC) a port may send from, such as a keepalived
/// VRRP address; the agent binds the pair's MAC like the port's own
/// (DESIGN §6.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddressPair {
    /// An address or a CIDR.
    pub ip_address: String,
    /// Neutron fills in the port's own MAC when absent.
    #[serde(default)]
    pub mac_address: Option<String>,
}

/// A Neutron port: what a VM, a router or a load balancer plugs into a network.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Port {
    /// Neutron's id.
    pub id: String,
    /// Listed as is.
    #[serde(default)]
    pub name: String,
    /// The network it is on; must exist.
    pub network_id: String,
    /// `""` is what Neutron shows on admin-created router gateway ports.
    pub project_id: String,
    /// The MAC the agent matches the tap's traffic by (`fa:16:3e:…` on a
    /// real cloud); written as given.
    pub mac_address: String,
    /// What it is plugged into: a server id for `compute:*`, a router id for
    /// `network:router_*`; empty when unbound.
    #[serde(default)]
    pub device_id: String,
    /// `compute:<zone>`, `network:router_interface`, `network:router_gateway`,
    /// `network:dhcp`, …; empty when unbound, which lists the port `DOWN`.
    #[serde(default)]
    pub device_owner: String,
    /// Its addresses; each subnet must be on `network_id`.
    #[serde(default)]
    pub fixed_ips: Vec<FixedIp>,
    /// Extra addresses it may send from.
    #[serde(default)]
    pub allowed_address_pairs: Vec<AddressPair>,
}

/// An extra route of a router (the `extraroute` extension).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Route {
    /// The CIDR routed.
    pub destination: String,
    /// The address it is routed through (another router, a VM, …).
    pub nexthop: String,
}

/// A router's external gateway (`external_gateway_info`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gateway {
    /// Must be an existing `router:external` network.
    pub network_id: String,
    /// Source NAT for the router's subnets; `true` when absent, as in Neutron.
    #[serde(default = "yes")]
    pub enable_snat: bool,
    /// The router's addresses on the external network. Neutron allocates
    /// them; here they are written out.
    #[serde(default)]
    pub external_fixed_ips: Vec<FixedIp>,
}

/// A Neutron router. Its interfaces are ports (`device_owner`
/// `network:router_interface`, `device_id` the router's id), not fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Router {
    /// Neutron's id.
    pub id: String,
    /// Listed as is.
    #[serde(default)]
    pub name: String,
    /// The owning project (the owner of its interface ports too, when
    /// plugged through the control API).
    pub project_id: String,
    /// `None` for a router with no way out.
    #[serde(default)]
    pub external_gateway_info: Option<Gateway>,
    /// Extra routes, in the order given.
    #[serde(default)]
    pub routes: Vec<Route>,
}

/// A Neutron floating IP.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FloatingIp {
    /// Neutron's id.
    pub id: String,
    /// The owning project.
    pub project_id: String,
    /// The network it is allocated from; must be `router:external`.
    pub floating_network_id: String,
    /// The public address.
    pub floating_ip_address: String,
    /// The port it is bound to; `None` leaves it unbound (listed `DOWN`).
    /// Must exist when set.
    #[serde(default)]
    pub port_id: Option<String>,
    /// Which of the port's addresses it translates to.
    #[serde(default)]
    pub fixed_ip_address: Option<String>,
    /// The router doing the translation.
    #[serde(default)]
    pub router_id: Option<String>,
}

/// A Nova server, as `servers/detail` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Server {
    /// Nova's id; its ports carry it as `device_id`.
    pub id: String,
    /// Listed as is.
    #[serde(default)]
    pub name: String,
    /// Nova still calls the owning project `tenant_id`.
    #[serde(alias = "project_id")]
    pub tenant_id: String,
    /// Nova's `status` (`ACTIVE` when absent); its lower-case form is also
    /// listed as `OS-EXT-STS:vm_state`.
    #[serde(default = "active")]
    pub status: String,
    /// Listed as `OS-EXT-AZ:availability_zone`; `nova` when absent.
    #[serde(default = "nova_az")]
    pub availability_zone: String,
}

fn active() -> String {
    "ACTIVE".into()
}
fn nova_az() -> String {
    "nova".into()
}

/// An Octavia load balancer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadBalancer {
    /// Octavia's id; its amphorae name it as `loadbalancer_id`.
    pub id: String,
    /// Listed as is.
    #[serde(default)]
    pub name: String,
    /// The owning project, which the amphorae's data ports are billed to
    /// (DESIGN §6.5).
    pub project_id: String,
    /// `amphora` when absent; other providers (`ovn`) run no amphorae.
    #[serde(default = "amphora")]
    pub provider: String,
    /// The address clients connect to.
    #[serde(default)]
    pub vip_address: Option<String>,
    /// The Neutron port holding the VIP.
    #[serde(default)]
    pub vip_port_id: Option<String>,
    /// The subnet of the VIP.
    #[serde(default)]
    pub vip_subnet_id: Option<String>,
    /// The network of the VIP.
    #[serde(default)]
    pub vip_network_id: Option<String>,
}

fn amphora() -> String {
    "amphora".into()
}

/// An Octavia amphora: a VM in the service project running a load
/// balancer's `HAProxy`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Amphora {
    /// Octavia's id.
    pub id: String,
    /// The real field name (one API-reference example misspells it); `None`
    /// for a spare amphora serving no load balancer.
    pub loadbalancer_id: Option<String>,
    /// The Nova server it runs as; its ports carry this as `device_id`.
    pub compute_id: Option<String>,
    /// Its address on the management network, which tells its management
    /// port from its data ports.
    pub lb_network_ip: Option<String>,
    /// `ALLOCATED` when absent; `READY` for a spare, `DELETED` once gone.
    #[serde(default = "allocated")]
    pub status: String,
    /// `MASTER`, `BACKUP` or `STANDALONE`; `None` for a spare.
    #[serde(default)]
    pub role: Option<String>,
    /// Its own address on the VIP network.
    #[serde(default)]
    pub vrrp_ip: Option<String>,
    /// The VIP it holds (the load balancer's `vip_address`).
    #[serde(default)]
    pub ha_ip: Option<String>,
}

fn allocated() -> String {
    "ALLOCATED".into()
}

/// A topology the simulator refuses, naming the resource and the problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    /// Not YAML, or not this format: an unknown key, a missing field, a
    /// subnet whose addressing Neutron would refuse. The parser's message,
    /// with line and column.
    #[error("not the documented topology format (docs/openstack.md): {0}")]
    Parse(String),
    /// Well-formed, but breaking a rule the services enforce between
    /// resources: a duplicate id, a reference to something missing, a
    /// gateway on a network that is not `router:external`.
    #[error("{kind} {id:?}: {problem}")]
    Invalid {
        /// The resource kind, singular (`subnet`, `port`, …).
        kind: &'static str,
        /// The offending resource's id.
        id: String,
        /// What is wrong, naming the field.
        problem: String,
    },
}

impl Topology {
    /// Parses the YAML form (unknown keys are errors: typos must not pass),
    /// of any size: the benchmarks' cloud is 12 MB and ~1.3 million nodes.
    pub fn from_yaml(text: &str) -> Result<Self, TopologyError> {
        serde_saphyr::from_str_with_options(text, yaml_options(text.len()))
            .map_err(|e| TopologyError::Parse(e.to_string()))
    }
}

/// The parser's limits for a file of `len` bytes. Its defaults (250 000
/// nodes, a million events) refuse the benchmarks' cloud, so the limits
/// that count what the file holds grow with the file: a node or an event
/// takes at least a byte of it (a scalar a character, a collection its
/// brackets or indicator), a few more for the stream's own events. What a
/// file can make of itself without growing — aliases, anchors, nesting —
/// keeps the defaults, and every expanded node still counts against the
/// node limit, so a small file cannot expand into a huge one.
fn yaml_options(len: usize) -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_nodes = budget.max_nodes.max(len);
    budget.max_events = budget.max_events.max(len.saturating_mul(2));
    budget.max_total_scalar_bytes = budget.max_total_scalar_bytes.max(len);
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options
}

/// Duplicate ids within one kind are refused: the APIs never return them.
pub(crate) fn index<T: Clone>(
    kind: &'static str,
    items: &[T],
    id: impl Fn(&T) -> &str,
) -> Result<BTreeMap<String, T>, TopologyError> {
    let mut out = BTreeMap::new();
    for item in items {
        let key = id(item).to_owned();
        if out.insert(key.clone(), item.clone()).is_some() {
            return Err(TopologyError::Invalid {
                kind,
                id: key,
                problem: "duplicate id".into(),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml_with_subnet(subnet: &str) -> String {
        format!(
            "networks: [{{id: n1, project_id: p}}]\nsubnets:\n  - {{id: s1, network_id: n1, project_id: p, {subnet}}}\n"
        )
    }

    fn refusal(subnet: &str) -> String {
        match Topology::from_yaml(&yaml_with_subnet(subnet)) {
            Err(TopologyError::Parse(msg)) => msg,
            other => panic!("{subnet}: expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn a_prefix_beyond_the_family_is_refused_naming_subnet_field_line_and_form() {
        let msg = refusal("cidr: 10.0.0.0/33");
        for part in [
            "line 3",
            "subnet \"s1\"",
            "cidr \"10.0.0.0/33\"",
            "ADDRESS/LENGTH",
        ] {
            assert!(msg.contains(part), "{part:?} missing from {msg}");
        }
        let msg = refusal("cidr: \"fd00::/129\"");
        assert!(msg.contains("IPv6's 128 bits"), "{msg}");
    }

    #[test]
    fn an_ip_version_of_the_other_family_is_refused() {
        let msg = refusal("cidr: 10.0.0.0/24, ip_version: 6");
        assert!(
            msg.contains("subnet \"s1\": cidr \"10.0.0.0/24\" does not match the ip_version 6"),
            "{msg}"
        );
        let msg = refusal("cidr: 10.0.0.0/24, ip_version: 5");
        assert!(msg.contains("expected 4 or 6"), "{msg}");
        let msg = refusal("cidr: 10.0.0.0/24, gateway_ip: \"fd00::1\"");
        assert!(msg.contains("gateway_ip \"fd00::1\""), "{msg}");
    }

    #[test]
    fn a_small_file_cannot_expand_through_aliases_past_the_budget() {
        // Each level holds ten of the one before: 10^8 strings from 1 KB.
        let mut lines = vec!["a0: &a0 [x, x, x, x, x, x, x, x, x, x]".to_owned()];
        for i in 1..=8 {
            let prev = format!("*a{}", i - 1);
            let items = [prev.as_str(); 10].join(", ");
            lines.push(format!("a{i}: &a{i} [{items}]"));
        }
        let yaml = lines.join("\n");
        let err = serde_saphyr::from_str_with_options::<serde_json::Value>(
            &yaml,
            yaml_options(yaml.len()),
        )
        .unwrap_err();
        assert!(err.to_string().contains("budget breached"), "{err}");
    }

    #[test]
    fn host_bits_are_cleared_and_a_matching_ip_version_is_accepted() {
        let t = Topology::from_yaml(&yaml_with_subnet(
            "cidr: \"2001:db8::7/64\", ip_version: 6, gateway_ip: \"2001:db8::1\"",
        ))
        .unwrap();
        assert_eq!(t.subnets[0].cidr, "2001:db8::/64");
        let t = Topology::from_yaml(&yaml_with_subnet("cidr: 10.1.2.3/16")).unwrap();
        assert_eq!(t.subnets[0].cidr, "10.1.0.0/16");
    }
}
