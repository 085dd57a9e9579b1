//! The simulator's topology file (YAML, documented in docs/openstack.md).
//!
//! Resources are written in the input form of the real APIs (the fields a
//! create call takes); [`super::wire`] renders them as the services list them.
//! The same structs are the bodies of the mutation API.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

fn default_domain() -> String {
    "default".into()
}
fn yes() -> bool {
    true
}

/// The whole file.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    #[serde(default)]
    pub settings: Settings,
    #[serde(default)]
    pub projects: Vec<Project>,
    #[serde(default)]
    pub users: Vec<User>,
    #[serde(default)]
    pub application_credentials: Vec<AppCredential>,
    #[serde(default)]
    pub networks: Vec<Network>,
    #[serde(default)]
    pub subnets: Vec<Subnet>,
    #[serde(default)]
    pub ports: Vec<Port>,
    #[serde(default)]
    pub routers: Vec<Router>,
    #[serde(default)]
    pub floatingips: Vec<FloatingIp>,
    #[serde(default)]
    pub servers: Vec<Server>,
    #[serde(default)]
    pub loadbalancers: Vec<LoadBalancer>,
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
    /// Token lifetime in seconds.
    pub token_ttl_secs: u64,
    /// Catalog regions; every service has endpoints in each.
    pub regions: Vec<String>,
    /// Catalog service types (`identity`, `network`, `compute`, `load-balancer`).
    pub services: Vec<String>,
    pub keystone_paging: KeystonePaging,
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
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Project {
    pub id: String,
    pub name: String,
    #[serde(default = "default_domain")]
    pub domain_id: String,
    #[serde(default)]
    pub description: String,
}

/// A Keystone user accepted by the password method.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct User {
    pub id: String,
    pub name: String,
    #[serde(default = "default_domain")]
    pub domain_id: String,
    pub password: String,
}

/// An application credential (pre-scoped to `project_id`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppCredential {
    pub id: String,
    pub name: String,
    pub user_id: String,
    pub project_id: String,
    pub secret: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Network {
    pub id: String,
    #[serde(default)]
    pub name: String,
    pub project_id: String,
    #[serde(default)]
    pub shared: bool,
    #[serde(rename = "router:external", alias = "external", default)]
    pub external: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Subnet {
    pub id: String,
    #[serde(default)]
    pub name: String,
    pub network_id: String,
    pub project_id: String,
    pub cidr: String,
    #[serde(default)]
    pub gateway_ip: Option<String>,
    #[serde(default = "yes")]
    pub enable_dhcp: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixedIp {
    pub subnet_id: String,
    pub ip_address: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddressPair {
    pub ip_address: String,
    /// Neutron fills in the port's own MAC when absent.
    #[serde(default)]
    pub mac_address: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Port {
    pub id: String,
    #[serde(default)]
    pub name: String,
    pub network_id: String,
    /// `""` is what Neutron shows on admin-created router gateway ports.
    pub project_id: String,
    pub mac_address: String,
    #[serde(default)]
    pub device_id: String,
    #[serde(default)]
    pub device_owner: String,
    #[serde(default)]
    pub fixed_ips: Vec<FixedIp>,
    #[serde(default)]
    pub allowed_address_pairs: Vec<AddressPair>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Route {
    pub destination: String,
    pub nexthop: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gateway {
    pub network_id: String,
    #[serde(default = "yes")]
    pub enable_snat: bool,
    #[serde(default)]
    pub external_fixed_ips: Vec<FixedIp>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Router {
    pub id: String,
    #[serde(default)]
    pub name: String,
    pub project_id: String,
    #[serde(default)]
    pub external_gateway_info: Option<Gateway>,
    #[serde(default)]
    pub routes: Vec<Route>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FloatingIp {
    pub id: String,
    pub project_id: String,
    pub floating_network_id: String,
    pub floating_ip_address: String,
    #[serde(default)]
    pub port_id: Option<String>,
    #[serde(default)]
    pub fixed_ip_address: Option<String>,
    #[serde(default)]
    pub router_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Server {
    pub id: String,
    #[serde(default)]
    pub name: String,
    /// Nova still calls the owning project `tenant_id`.
    #[serde(alias = "project_id")]
    pub tenant_id: String,
    #[serde(default = "active")]
    pub status: String,
    #[serde(default = "nova_az")]
    pub availability_zone: String,
}

fn active() -> String {
    "ACTIVE".into()
}
fn nova_az() -> String {
    "nova".into()
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadBalancer {
    pub id: String,
    #[serde(default)]
    pub name: String,
    pub project_id: String,
    #[serde(default = "amphora")]
    pub provider: String,
    #[serde(default)]
    pub vip_address: Option<String>,
    #[serde(default)]
    pub vip_port_id: Option<String>,
    #[serde(default)]
    pub vip_subnet_id: Option<String>,
    #[serde(default)]
    pub vip_network_id: Option<String>,
}

fn amphora() -> String {
    "amphora".into()
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Amphora {
    pub id: String,
    /// The real field name (one API-reference example misspells it).
    pub loadbalancer_id: Option<String>,
    pub compute_id: Option<String>,
    pub lb_network_ip: Option<String>,
    #[serde(default = "allocated")]
    pub status: String,
    #[serde(default)]
    pub role: Option<String>,
    #[serde(default)]
    pub vrrp_ip: Option<String>,
    #[serde(default)]
    pub ha_ip: Option<String>,
}

fn allocated() -> String {
    "ALLOCATED".into()
}

/// A topology the simulator refuses, naming the resource and the problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    #[error("topology is not valid YAML for the documented format: {0}")]
    Parse(String),
    #[error("{kind} {id:?}: {problem}")]
    Invalid {
        kind: &'static str,
        id: String,
        problem: String,
    },
}

impl Topology {
    /// Parses the YAML form (unknown keys are errors: typos must not pass).
    pub fn from_yaml(text: &str) -> Result<Self, TopologyError> {
        serde_saphyr::from_str(text).map_err(|e| TopologyError::Parse(e.to_string()))
    }
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
