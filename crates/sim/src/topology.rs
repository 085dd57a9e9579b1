//! The simulator's topology file (YAML, documented in docs/openstack.md).
//!
//! Resources are written in the input form of the real APIs (the fields a
//! create call takes); [`super::wire`] renders them as the services list them.
//! The same structs are the bodies of the mutation API.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::cidr::{check_subnet, AddressingError};

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
#[serde(try_from = "SubnetInput")]
pub struct Subnet {
    pub id: String,
    pub name: String,
    pub network_id: String,
    pub project_id: String,
    pub cidr: String,
    pub gateway_ip: Option<String>,
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
    #[error("not the documented topology format (docs/openstack.md): {0}")]
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
