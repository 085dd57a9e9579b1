//! The planner's input: list response bodies exactly as the APIs return them.

use serde_json::Value;

/// One list response body per call of DESIGN §5, pages already merged into a
/// single body of the same shape (e.g. `{"ports": [...]}`).
///
/// This is the seam between the OpenStack client (which fetches and merges
/// pages), `lachesis plan --from-dir` (which reads saved bodies) and the
/// planner (which parses them). Nova and Octavia are best-effort: `None`
/// means the list is absent or its fetch failed; the client reports which.
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
    pub servers: Option<Value>,
    /// `GET /v2/lbaas/loadbalancers` → `{"loadbalancers": [...]}`.
    pub loadbalancers: Option<Value>,
    /// `GET /v2/octavia/amphorae` → `{"amphorae": [...]}`.
    pub amphorae: Option<Value>,
}
