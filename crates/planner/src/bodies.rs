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

    /// The key one resource is wrapped in when a service shows it by id
    /// (`{"port": {…}}`), and the singular its notifications use.
    #[must_use]
    pub const fn singular(self) -> &'static str {
        match self {
            Resource::Networks => "network",
            Resource::Subnets => "subnet",
            Resource::Ports => "port",
            Resource::Routers => "router",
            Resource::FloatingIps => "floatingip",
            Resource::Projects => "project",
            Resource::Servers => "server",
            Resource::LoadBalancers => "loadbalancer",
            Resource::Amphorae => "amphora",
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

    /// The fields a sync asks Neutron for (`?fields=id&fields=name…`):
    /// every field the parser reads from this list (`snapshot/parse.rs`),
    /// `tenant_id` for its fallback and display-only ones included, plus
    /// `revision_number` (the relay's guard, DESIGN §17). Neutron then
    /// answers those fields and nothing else: about half the bytes of a
    /// whole object. `None` where the list is taken whole: Keystone and
    /// Nova have no field selection, and Octavia's lists are small.
    ///
    /// A field the parser starts to read must be added here, or a live
    /// sync never sees it: the planner's property tests parse bodies with
    /// and without the other fields and require the same snapshot.
    #[must_use]
    pub const fn fields(self) -> Option<&'static [&'static str]> {
        match self {
            Resource::Networks => Some(&[
                "id",
                "name",
                "project_id",
                "tenant_id",
                "shared",
                "router:external",
                "revision_number",
            ]),
            Resource::Subnets => Some(&[
                "id",
                "network_id",
                "project_id",
                "tenant_id",
                "cidr",
                "gateway_ip",
                "ip_version",
                "revision_number",
            ]),
            Resource::Ports => Some(&[
                "id",
                "network_id",
                "project_id",
                "tenant_id",
                "mac_address",
                "device_id",
                "device_owner",
                "fixed_ips",
                "allowed_address_pairs",
                "trunk_details",
                "revision_number",
            ]),
            Resource::Routers => Some(&[
                "id",
                "name",
                "project_id",
                "tenant_id",
                "external_gateway_info",
                "external_gateways",
                "routes",
                "revision_number",
            ]),
            Resource::FloatingIps => Some(&[
                "id",
                "floating_network_id",
                "floating_ip_address",
                "project_id",
                "tenant_id",
                "port_id",
                "fixed_ip_address",
                "revision_number",
            ]),
            Resource::Projects
            | Resource::Servers
            | Resource::LoadBalancers
            | Resource::Amphorae => None,
        }
    }

    /// Every field the parser reads from this list (`snapshot/parse.rs`),
    /// for every list: [`Resource::fields`] for Neutron's, and for the
    /// lists a sync takes whole (Keystone, Nova, Octavia) the few fields
    /// the parser reads of their objects. What a relay keeps of a resource
    /// and writes on its state stream (DESIGN §17): a Nova server is
    /// about 2 KB whole and under 200 B cut.
    ///
    /// A field the parser starts to read must be added here: the
    /// planner's property tests parse bodies cut to these fields and whole
    /// and require the same snapshot.
    #[must_use]
    pub const fn kept_fields(self) -> &'static [&'static str] {
        match (self.fields(), self) {
            (Some(fields), _) => fields,
            (None, Resource::Projects) => &["id", "name"],
            (None, Resource::Servers) => &["id", "name", "project_id", "tenant_id"],
            (None, Resource::LoadBalancers) => &[
                "id",
                "project_id",
                "tenant_id",
                "provider",
                "provisioning_status",
            ],
            (None, _) => &[
                "id",
                "loadbalancer_id",
                "compute_id",
                "lb_network_ip",
                "status",
            ],
        }
    }

    /// `body` (this list's `{"<collection>": [...]}`) with each object cut
    /// to [`Resource::kept_fields`].
    pub fn keep_fields(self, body: &mut Value) {
        self.retain_fields(body, self.kept_fields());
    }

    /// Each object of `body` (this list's `{"<collection>": [...]}`) cut to
    /// `fields` (top-level keys; nested values whole).
    fn retain_fields(self, body: &mut Value, fields: &[&str]) {
        let items = body
            .get_mut(self.collection())
            .and_then(Value::as_array_mut);
        for item in items.into_iter().flatten() {
            if let Some(obj) = item.as_object_mut() {
                obj.retain(|key, _| fields.contains(&key.as_str()));
            }
        }
    }

    /// `body` (this list's `{"<collection>": [...]}`) as a sync that asks
    /// for [`Resource::fields`] receives it: each object keeps only those
    /// fields (top-level keys; nested values whole, as Neutron answers). A
    /// list without field selection is left as it is. For comparing a
    /// field-selected sync with a full one (tests, `bench_sync`); a sync
    /// itself asks the API.
    pub fn select_fields(self, body: &mut Value) {
        if let Some(fields) = self.fields() {
            self.retain_fields(body, fields);
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
    /// These bodies as a sync that asks for [`Resource::fields`] receives
    /// them ([`Resource::select_fields`] on each list).
    #[must_use]
    pub fn field_selected(&self) -> ApiBodies {
        self.each_list(Resource::select_fields)
    }

    /// These bodies with every object cut to its list's
    /// [`Resource::kept_fields`]: what a relay's records hold.
    #[must_use]
    pub fn kept(&self) -> ApiBodies {
        self.each_list(Resource::keep_fields)
    }

    /// A copy with `cut` applied to each list that was fetched.
    fn each_list(&self, cut: fn(Resource, &mut Value)) -> ApiBodies {
        let mut out = self.clone();
        for resource in Resource::ALL {
            if let Some(body) = out.body_mut(resource) {
                cut(resource, body);
            }
        }
        out
    }

    fn body_mut(&mut self, resource: Resource) -> Option<&mut Value> {
        fn optional(body: &mut OptionalBody) -> Option<&mut Value> {
            match body {
                OptionalBody::Fetched(v) => Some(v),
                OptionalBody::Failed | OptionalBody::NotDeployed => None,
            }
        }
        match resource {
            Resource::Networks => Some(&mut self.networks),
            Resource::Subnets => Some(&mut self.subnets),
            Resource::Ports => Some(&mut self.ports),
            Resource::Routers => Some(&mut self.routers),
            Resource::FloatingIps => Some(&mut self.floatingips),
            Resource::Projects => Some(&mut self.projects),
            Resource::Servers => optional(&mut self.servers),
            Resource::LoadBalancers => optional(&mut self.loadbalancers),
            Resource::Amphorae => optional(&mut self.amphorae),
        }
    }

    /// The elements of `resource`'s list: `None` when a best-effort list
    /// was not fetched or the body is not `{"<list>": [...]}`.
    #[must_use]
    pub fn items(&self, resource: Resource) -> Option<&[Value]> {
        self.body(resource)?
            .get(resource.collection())?
            .as_array()
            .map(Vec::as_slice)
    }

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

    #[test]
    fn every_list_keeps_its_id_once_and_neutron_s_keep_what_a_sync_selects() {
        for r in Resource::ALL {
            let kept = r.kept_fields();
            assert!(kept.contains(&"id"), "{r}");
            let mut unique = kept.to_vec();
            unique.sort_unstable();
            unique.dedup();
            assert_eq!(unique.len(), kept.len(), "{r}: a field twice");
            if let Some(fields) = r.fields() {
                assert_eq!(fields, kept, "{r}");
            }
        }
    }

    #[test]
    fn neutron_lists_and_only_they_select_fields_id_and_revision_included() {
        for r in Resource::ALL {
            match r.fields() {
                Some(fields) => {
                    assert_eq!(r.service(), "network", "{r}");
                    // Neutron answers exactly what is asked: without `id`
                    // no entry could be parsed (nor paged past).
                    assert!(fields.contains(&"id"), "{r}");
                    assert!(fields.contains(&"revision_number"), "{r}");
                    let mut unique = fields.to_vec();
                    unique.sort_unstable();
                    unique.dedup();
                    assert_eq!(unique.len(), fields.len(), "{r}: a field twice");
                }
                None => assert_ne!(r.service(), "network", "{r}"),
            }
        }
    }
}
