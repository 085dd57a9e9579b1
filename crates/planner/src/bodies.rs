//! The planner's input: list response bodies exactly as the APIs return them.

use serde_json::Value;

/// One list response body per call of DESIGN §5, pages already merged into a
/// single body of the same shape (e.g. `{"ports": [...]}`).
///
/// This is the seam between the OpenStack client (which fetches and merges
/// pages), `lachesis plan --from-dir` (which reads saved bodies) and the
/// planner (which parses them). Nova and Octavia are best-effort, and their
/// three bodies say *why* one is missing ([`OptionalBody`]).
///
/// Change for the client (review finding 3): `servers`, `loadbalancers`
/// and `amphorae` were `Option<Value>`, where `None` meant both "not
/// deployed" and "fetch failed". A client now writes
/// `OptionalBody::Fetched(body)` where it wrote `Some(body)`,
/// `OptionalBody::NotDeployed` when the service is not in the catalog (or
/// answers 404 for the list), and `OptionalBody::Failed` for any other error
/// (timeout, 5xx, 401/403, a body that is not JSON). The required bodies are
/// unchanged. The difference matters: a failed Octavia fetch keeps the
/// previous plan's amphora attribution (docs/planner.md, "reconcile
/// contract"), a service that is not deployed does not.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ApiBodies {
    /// `GET /v2.0/networks` → `{"networks": [...]}`.
    pub networks: Value,
    /// `GET /v2.0/subnets` → `{"subnets": [...]}`.
    pub subnets: Value,
    /// `GET /v2.0/ports` → `{"ports": [...]}`.
    pub ports: Value,
    /// `GET /v2.0/routers` → `{"routers": [...]}`.
    pub routers: Value,
    /// `GET /v2.0/floatingips` → `{"floatingips": [...]}`.
    pub floatingips: Value,
    /// `GET /v3/projects` → `{"projects": [...]}`.
    pub projects: Value,
    /// `GET /v2.1/servers/detail?all_tenants=1` → `{"servers": [...]}`.
    pub servers: OptionalBody,
    /// `GET /v2/lbaas/loadbalancers` → `{"loadbalancers": [...]}`.
    pub loadbalancers: OptionalBody,
    /// `GET /v2/octavia/amphorae` → `{"amphorae": [...]}`.
    pub amphorae: OptionalBody,
}

/// A best-effort body and, when there is none, why.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum OptionalBody {
    /// The merged list body.
    Fetched(Value),
    /// The service is deployed but the fetch failed: the list is unknown,
    /// not empty.
    Failed,
    /// The service is not part of this cloud: the list is empty by nature.
    #[default]
    NotDeployed,
}

impl OptionalBody {
    /// The body when fetched.
    #[must_use]
    pub fn fetched(&self) -> Option<&Value> {
        match self {
            OptionalBody::Fetched(v) => Some(v),
            OptionalBody::Failed | OptionalBody::NotDeployed => None,
        }
    }
}

/// The lists of DESIGN §5, one per API call. One name for each, shared by
/// the client (what to fetch, metric labels), the saved-bodies folder
/// (`<collection>.json`) and the simulator (what to serve).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Resource {
    /// Neutron networks.
    Networks,
    /// Neutron subnets.
    Subnets,
    /// Neutron ports.
    Ports,
    /// Neutron routers.
    Routers,
    /// Neutron floating IPs.
    FloatingIps,
    /// Keystone projects.
    Projects,
    /// Nova servers (best-effort).
    Servers,
    /// Octavia load balancers (best-effort).
    LoadBalancers,
    /// Octavia amphorae (best-effort).
    Amphorae,
}

impl Resource {
    /// Every list, in the order the client fetches and a saved folder lists them.
    pub const ALL: [Resource; 9] = [
        Resource::Networks,
        Resource::Subnets,
        Resource::Ports,
        Resource::Routers,
        Resource::FloatingIps,
        Resource::Projects,
        Resource::Servers,
        Resource::LoadBalancers,
        Resource::Amphorae,
    ];

    /// The JSON array's key in the list body, and the saved file's stem.
    #[must_use]
    pub const fn collection(self) -> &'static str {
        match self {
            Resource::Networks => "networks",
            Resource::Subnets => "subnets",
            Resource::Ports => "ports",
            Resource::Routers => "routers",
            Resource::FloatingIps => "floatingips",
            Resource::Projects => "projects",
            Resource::Servers => "servers",
            Resource::LoadBalancers => "loadbalancers",
            Resource::Amphorae => "amphorae",
        }
    }

    /// The catalog service type that serves the list.
    #[must_use]
    pub const fn service(self) -> &'static str {
        match self {
            Resource::Networks
            | Resource::Subnets
            | Resource::Ports
            | Resource::Routers
            | Resource::FloatingIps => "network",
            Resource::Projects => "identity",
            Resource::Servers => "compute",
            Resource::LoadBalancers | Resource::Amphorae => "load-balancer",
        }
    }

    /// The list call's path below the service's versioned base URL.
    #[must_use]
    pub const fn path(self) -> &'static str {
        match self {
            Resource::Servers => "servers/detail?all_tenants=1",
            Resource::LoadBalancers => "lbaas/loadbalancers",
            Resource::Amphorae => "octavia/amphorae",
            other => other.collection(),
        }
    }

    /// Neutron and Keystone lists are required (a sync is all-or-nothing
    /// for them); Nova and Octavia are best-effort.
    #[must_use]
    pub const fn is_required(self) -> bool {
        matches!(self.service().as_bytes(), b"network" | b"identity")
    }

    /// The resource whose collection name is `name`.
    #[must_use]
    pub fn from_collection(name: &str) -> Option<Resource> {
        Resource::ALL.into_iter().find(|r| r.collection() == name)
    }
}

impl std::fmt::Display for Resource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.collection())
    }
}

impl ApiBodies {
    /// The body of `resource`: always present for a required list, present
    /// for a best-effort one only when it was fetched.
    #[must_use]
    pub fn body(&self, resource: Resource) -> Option<&Value> {
        match resource {
            Resource::Networks => Some(&self.networks),
            Resource::Subnets => Some(&self.subnets),
            Resource::Ports => Some(&self.ports),
            Resource::Routers => Some(&self.routers),
            Resource::FloatingIps => Some(&self.floatingips),
            Resource::Projects => Some(&self.projects),
            Resource::Servers => self.servers.fetched(),
            Resource::LoadBalancers => self.loadbalancers.fetched(),
            Resource::Amphorae => self.amphorae.fetched(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Resource;

    #[test]
    fn collections_round_trip_and_are_distinct() {
        for r in Resource::ALL {
            assert_eq!(Resource::from_collection(r.collection()), Some(r));
        }
        assert_eq!(Resource::from_collection("network"), None);
        let required: Vec<_> = Resource::ALL
            .into_iter()
            .filter(|r| r.is_required())
            .collect();
        assert_eq!(required.len(), 6);
        assert!(!Resource::Servers.is_required() && !Resource::Amphorae.is_required());
    }
}
