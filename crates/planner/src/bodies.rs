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
