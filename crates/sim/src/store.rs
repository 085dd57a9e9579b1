//! The simulator's mutable cloud: resources, settings, tokens, faults and
//! request counters. Every mutation is validated like the real API would.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, SystemTime};

use lachesis_planner::Resource;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::topology::{
    index, Amphora, AppCredential, FloatingIp, LoadBalancer, Network, Port, Project, Router,
    Server, Settings, Subnet, Topology, TopologyError, User,
};
use crate::cidr::check_subnet;
use crate::clock::{Clock, ClockError, Stamp};
use crate::event_faults::{Delivery, FaultState, NotificationFaults};
use crate::notify::Event;
use crate::revision::{Meta, Revisions};
use crate::stats::{self, Stats};

/// A mutation the simulator refuses (HTTP 404 / 409 / 400). A refused
/// mutation changes nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MutationError {
    /// The kind is not one of the topology's list names (HTTP 404).
    #[error("unknown resource kind {0:?}")]
    UnknownKind(String),
    /// The resource to change does not exist (HTTP 404).
    #[error("{kind} {id:?} not found")]
    NotFound {
        /// The list it was looked for in, or `route` / `router interface`.
        kind: String,
        /// The id (for a route, `<destination> via <nexthop>`).
        id: String,
    },
    /// A create with an id already taken in that list (HTTP 409).
    #[error("{kind} {id:?} already exists")]
    Conflict {
        /// The list name.
        kind: String,
        /// The taken id.
        id: String,
    },
    /// The body is not a valid resource of the kind, or the change would
    /// break a rule the services enforce, such as a port on a missing
    /// network (HTTP 400).
    #[error("invalid {kind}: {message}")]
    Invalid {
        /// The list name (or `router interface`).
        kind: String,
        /// What is wrong, naming the resource and the field.
        message: String,
    },
}

/// One injected fault, matched by endpoint name (`auth`, `projects`,
/// `networks`, `subnets`, `ports`, `routers`, `floatingips`, `servers`,
/// `loadbalancers`, `amphorae`, a GET by id `<list>/{id}`, or `*`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fault {
    /// Which requests it hits: a list name, `<list>/{id}` (literally) for
    /// its GETs by id, `auth` for token requests, or `*` for all of them.
    /// Control-API calls are never hit.
    pub endpoint: String,
    /// Answer with this status and the service's error body. With neither
    /// this nor `drop` the request goes through (after `delay_ms`), which
    /// lets `times` count past the pages a test wants served.
    #[serde(default)]
    pub status: Option<u16>,
    /// Milliseconds to wait first (to trip client timeouts).
    #[serde(default)]
    pub delay_ms: u64,
    /// Close the connection without answering.
    #[serde(default)]
    pub drop: bool,
    /// Hit this many matching requests, then disappear; absent = until
    /// cleared.
    #[serde(default)]
    pub times: Option<u32>,
}

#[derive(Debug, Clone)]
pub(crate) struct IssuedToken {
    pub project_id: String,
    pub expires_at: SystemTime,
    /// Who it was issued to, as `/sim/stats` names clients.
    pub client: String,
    /// Refused from now on (`POST /sim/tokens/revoke`).
    pub revoked: bool,
}

/// Runtime-adjustable settings (`PUT /sim/settings`); absent keys keep their value.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SettingsPatch {
    /// `0` removes the limit (whole lists unless the client sends `limit`).
    pub page_size: Option<usize>,
    /// Lifetime in seconds of tokens issued from now on; tokens already
    /// issued keep their expiry.
    pub token_ttl_secs: Option<u64>,
    /// Which Keystone release's project paging to imitate.
    pub keystone_paging: Option<super::topology::KeystonePaging>,
    /// Catalog service types. A removed service leaves the next token's
    /// catalog, and calls to it get a 404 at once.
    pub services: Option<Vec<String>>,
    /// Catalog regions, with the same effect as `services`.
    pub regions: Option<Vec<String>>,
    /// Sets the clock: an instant (`2026-01-01T00:00:00Z`) it then stands
    /// at, or `wall`.
    pub clock: Option<Clock>,
    /// Steps a standing clock this many seconds forward (after `clock`,
    /// when both are given); refused on a `wall` clock.
    pub clock_step_secs: Option<u64>,
    /// Neutron's `filter_validation`: `false` lets `changed_since` filter.
    pub neutron_filter_validation: Option<bool>,
    /// Replaces the notification faults and starts their draws over from
    /// the new seed (`{"rules": []}` turns them off).
    pub notification_faults: Option<NotificationFaults>,
}

/// A settings change the simulator refuses (HTTP 400); a refused change
/// changes nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    /// The clock cannot move as asked.
    #[error("clock: {0}")]
    Clock(#[from] ClockError),
}

/// Everything the simulator serves. The resource maps are keyed by id;
/// ordered maps, because the services list (and page) sorted by id.
/// Changing them directly (through [`crate::SimHandle::with_store`]) skips
/// the checks the mutation methods make; neither notifies (only the
/// control API over HTTP does).
#[derive(Debug, Default)]
pub struct Store {
    /// Server behaviour, changeable with [`Store::apply_settings`].
    pub settings: Settings,
    /// Keystone projects.
    pub projects: BTreeMap<String, Project>,
    /// Keystone users.
    pub users: BTreeMap<String, User>,
    /// Keystone application credentials.
    pub application_credentials: BTreeMap<String, AppCredential>,
    /// Neutron networks.
    pub networks: BTreeMap<String, Network>,
    /// Neutron subnets.
    pub subnets: BTreeMap<String, Subnet>,
    /// Neutron ports.
    pub ports: BTreeMap<String, Port>,
    /// Neutron routers.
    pub routers: BTreeMap<String, Router>,
    /// Neutron floating IPs.
    pub floatingips: BTreeMap<String, FloatingIp>,
    /// Nova servers.
    pub servers: BTreeMap<String, Server>,
    /// Octavia load balancers.
    pub loadbalancers: BTreeMap<String, LoadBalancer>,
    /// Octavia amphorae.
    pub amphorae: BTreeMap<String, Amphora>,
    pub(crate) tokens: HashMap<String, IssuedToken>,
    pub(crate) faults: Vec<Fault>,
    /// What was served, and to whom.
    pub(crate) stats: Stats,
    pub(crate) token_seq: u64,
    /// Revisions and timestamps of what changed, and deleted servers.
    pub(crate) revisions: Revisions,
    /// The notification faults' draws and held event.
    pub(crate) event_faults: FaultState,
}

/// Dispatches a kind name to its collection.
macro_rules! with_kind {
    ($store:expr, $kind:expr, |$map:ident| $body:expr) => {
        match $kind {
            "projects" => {
                let $map = &mut $store.projects;
                $body
            }
            "users" => {
                let $map = &mut $store.users;
                $body
            }
            "application_credentials" => {
                let $map = &mut $store.application_credentials;
                $body
            }
            "networks" => {
                let $map = &mut $store.networks;
                $body
            }
            "subnets" => {
                let $map = &mut $store.subnets;
                $body
            }
            "ports" => {
                let $map = &mut $store.ports;
                $body
            }
            "routers" => {
                let $map = &mut $store.routers;
                $body
            }
            "floatingips" => {
                let $map = &mut $store.floatingips;
                $body
            }
            "servers" => {
                let $map = &mut $store.servers;
                $body
            }
            "loadbalancers" => {
                let $map = &mut $store.loadbalancers;
                $body
            }
            "amphorae" => {
                let $map = &mut $store.amphorae;
                $body
            }
            other => Err(MutationError::UnknownKind(other.to_owned())),
        }
    };
}

fn parse<T: DeserializeOwned>(kind: &str, body: Value) -> Result<T, MutationError> {
    serde_json::from_value(body).map_err(|e| MutationError::Invalid {
        kind: kind.into(),
        message: e.to_string(),
    })
}

fn id_of(body: &Value) -> Option<String> {
    body.get("id").and_then(Value::as_str).map(str::to_owned)
}

fn insert<T: DeserializeOwned + Serialize>(
    map: &mut BTreeMap<String, T>,
    kind: &str,
    body: Value,
    replace: bool,
) -> Result<Value, MutationError> {
    let id = id_of(&body).ok_or_else(|| MutationError::Invalid {
        kind: kind.into(),
        message: "missing string `id`".into(),
    })?;
    let item: T = parse(kind, body)?;
    if !replace && map.contains_key(&id) {
        return Err(MutationError::Conflict {
            kind: kind.into(),
            id,
        });
    }
    if replace && !map.contains_key(&id) {
        return Err(MutationError::NotFound {
            kind: kind.into(),
            id,
        });
    }
    let out = serde_json::to_value(&item).unwrap_or(Value::Null);
    map.insert(id, item);
    Ok(out)
}

fn patch<T: DeserializeOwned + Serialize>(
    map: &mut BTreeMap<String, T>,
    kind: &str,
    id: &str,
    changes: Value,
) -> Result<Value, MutationError> {
    let current = map.get(id).ok_or_else(|| MutationError::NotFound {
        kind: kind.into(),
        id: id.into(),
    })?;
    let mut merged = serde_json::to_value(current).unwrap_or(Value::Null);
    let Value::Object(changes) = changes else {
        return Err(MutationError::Invalid {
            kind: kind.into(),
            message: "a patch is a JSON object".into(),
        });
    };
    if changes.get("id").is_some_and(|v| v.as_str() != Some(id)) {
        return Err(MutationError::Invalid {
            kind: kind.into(),
            message: "`id` cannot change".into(),
        });
    }
    for (k, v) in changes {
        merged[k] = v;
    }
    let item: T = parse(kind, merged)?;
    let out = serde_json::to_value(&item).unwrap_or(Value::Null);
    map.insert(id.to_owned(), item);
    Ok(out)
}

impl Store {
    /// Builds the store from a topology, refusing what the services would:
    /// duplicate ids, references to missing resources, subnet addressing
    /// Neutron refuses. Tokens, faults and counters start empty.
    pub fn from_topology(t: &Topology) -> Result<Self, TopologyError> {
        let store = Self {
            settings: t.settings.clone(),
            projects: index("project", &t.projects, |x| &x.id)?,
            users: index("user", &t.users, |x| &x.id)?,
            application_credentials: index(
                "application_credential",
                &t.application_credentials,
                |x| &x.id,
            )?,
            networks: index("network", &t.networks, |x| &x.id)?,
            subnets: index("subnet", &t.subnets, |x| &x.id)?,
            ports: index("port", &t.ports, |x| &x.id)?,
            routers: index("router", &t.routers, |x| &x.id)?,
            floatingips: index("floatingip", &t.floatingips, |x| &x.id)?,
            servers: index("server", &t.servers, |x| &x.id)?,
            loadbalancers: index("loadbalancer", &t.loadbalancers, |x| &x.id)?,
            amphorae: index("amphora", &t.amphorae, |x| &x.id)?,
            revisions: Revisions::loaded(t.settings.clock.now()),
            event_faults: FaultState::new(t.settings.notification_faults.seed),
            ..Self::default()
        };
        store
            .validate()
            .map_err(|(kind, id, problem)| TopologyError::Invalid { kind, id, problem })?;
        Ok(store)
    }

    /// The current state in the topology file's form (`GET /sim/topology`);
    /// loading it back gives the same resources.
    #[must_use]
    pub fn to_topology(&self) -> Topology {
        Topology {
            settings: self.settings.clone(),
            projects: self.projects.values().cloned().collect(),
            users: self.users.values().cloned().collect(),
            application_credentials: self.application_credentials.values().cloned().collect(),
            networks: self.networks.values().cloned().collect(),
            subnets: self.subnets.values().cloned().collect(),
            ports: self.ports.values().cloned().collect(),
            routers: self.routers.values().cloned().collect(),
            floatingips: self.floatingips.values().cloned().collect(),
            servers: self.servers.values().cloned().collect(),
            loadbalancers: self.loadbalancers.values().cloned().collect(),
            amphorae: self.amphorae.values().cloned().collect(),
        }
    }

    /// Referential checks Neutron itself enforces on create.
    fn validate(&self) -> Result<(), (&'static str, String, String)> {
        for s in self.subnets.values() {
            // Parsed subnets were checked on the way in; this catches those
            // built in code (`Topology` literals, `with_store`).
            if let Err(e) = check_subnet(&s.cidr, None, s.gateway_ip.as_deref()) {
                return Err(("subnet", s.id.clone(), e.to_string()));
            }
            if !self.networks.contains_key(&s.network_id) {
                return Err((
                    "subnet",
                    s.id.clone(),
                    format!("network_id {:?} does not exist", s.network_id),
                ));
            }
        }
        for p in self.ports.values() {
            if !self.networks.contains_key(&p.network_id) {
                return Err((
                    "port",
                    p.id.clone(),
                    format!("network_id {:?} does not exist", p.network_id),
                ));
            }
            for f in &p.fixed_ips {
                match self.subnets.get(&f.subnet_id) {
                    None => {
                        return Err((
                            "port",
                            p.id.clone(),
                            format!("fixed_ips subnet_id {:?} does not exist", f.subnet_id),
                        ))
                    }
                    Some(s) if s.network_id != p.network_id => {
                        return Err((
                            "port",
                            p.id.clone(),
                            format!(
                                "subnet {:?} is not on network {:?}",
                                f.subnet_id, p.network_id
                            ),
                        ));
                    }
                    Some(_) => {}
                }
            }
        }
        for r in self.routers.values() {
            if let Some(g) = &r.external_gateway_info {
                match self.networks.get(&g.network_id) {
                    Some(n) if n.external => {}
                    _ => {
                        return Err((
                            "router",
                            r.id.clone(),
                            format!(
                                "gateway network {:?} is not an existing router:external network",
                                g.network_id
                            ),
                        ))
                    }
                }
            }
        }
        for f in self.floatingips.values() {
            if !self
                .networks
                .get(&f.floating_network_id)
                .is_some_and(|n| n.external)
            {
                return Err((
                    "floatingip",
                    f.id.clone(),
                    format!(
                        "floating_network_id {:?} is not an external network",
                        f.floating_network_id
                    ),
                ));
            }
            if let Some(port) = &f.port_id {
                if !self.ports.contains_key(port) {
                    return Err((
                        "floatingip",
                        f.id.clone(),
                        format!("port_id {port:?} does not exist"),
                    ));
                }
            }
        }
        for a in self.application_credentials.values() {
            if !self.users.contains_key(&a.user_id) {
                return Err((
                    "application_credential",
                    a.id.clone(),
                    format!("user_id {:?} does not exist", a.user_id),
                ));
            }
        }
        Ok(())
    }

    /// Applies `f` and keeps the result only if the whole store still validates.
    fn transaction<R>(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<R, MutationError>,
    ) -> Result<R, MutationError> {
        // A copy of the resources themselves, not a topology re-parsed on
        // the way back: that re-parse fails (and emptied the whole store)
        // when data put in through `with_store` does not validate.
        let snapshot = self.resources();
        let out = match f(self) {
            Ok(out) => out,
            Err(e) => {
                self.restore_resources(snapshot);
                return Err(e);
            }
        };
        if let Err((kind, id, problem)) = self.validate() {
            self.restore_resources(snapshot);
            return Err(MutationError::Invalid {
                kind: kind.into(),
                message: format!("{id:?}: {problem}"),
            });
        }
        Ok(out)
    }

    /// The resource collections alone (settings, faults and counters stay).
    fn resources(&self) -> Self {
        Self {
            projects: self.projects.clone(),
            users: self.users.clone(),
            application_credentials: self.application_credentials.clone(),
            networks: self.networks.clone(),
            subnets: self.subnets.clone(),
            ports: self.ports.clone(),
            routers: self.routers.clone(),
            floatingips: self.floatingips.clone(),
            servers: self.servers.clone(),
            loadbalancers: self.loadbalancers.clone(),
            amphorae: self.amphorae.clone(),
            ..Self::default()
        }
    }

    fn restore_resources(&mut self, r: Self) {
        self.projects = r.projects;
        self.users = r.users;
        self.application_credentials = r.application_credentials;
        self.networks = r.networks;
        self.subnets = r.subnets;
        self.ports = r.ports;
        self.routers = r.routers;
        self.floatingips = r.floatingips;
        self.servers = r.servers;
        self.loadbalancers = r.loadbalancers;
        self.amphorae = r.amphorae;
    }

    /// The simulator's now (`settings.clock`).
    #[must_use]
    pub fn now(&self) -> Stamp {
        self.settings.clock.now()
    }

    /// `kind` `id`'s revision and timestamps as the API shows them (also
    /// for an id that does not exist: the creation revision).
    #[must_use]
    pub fn meta(&self, kind: Resource, id: &str) -> Meta {
        self.revisions.meta(kind, id)
    }

    /// The resources whose revision a change of `kind` `id` also raises,
    /// as Neutron's revision plugin does: a subnet's network (checked on
    /// Neutron 21: creating, updating or deleting a subnet raises its
    /// network's revision; a port does not raise its network's).
    fn related(&self, kind: Option<Resource>, id: &str) -> Vec<(Resource, String)> {
        match kind {
            Some(Resource::Subnets) => self
                .subnets
                .get(id)
                .map(|s| (Resource::Networks, s.network_id.clone()))
                .into_iter()
                .collect(),
            _ => Vec::new(),
        }
    }

    fn bump_all(&mut self, related: Vec<(Resource, String)>) {
        let now = self.now();
        let mut done = Vec::new();
        for r in related {
            if !done.contains(&r) {
                self.revisions.bumped(r.0, &r.1, now);
                done.push(r);
            }
        }
    }

    /// Adds a resource (`POST /sim/<kind>`, `kind` a topology list name)
    /// from its topology form, and answers it as stored (a subnet's `cidr`
    /// with host bits cleared). It starts at its kind's creation revision;
    /// a subnet raises its network's.
    pub fn create(&mut self, kind: &str, body: Value) -> Result<Value, MutationError> {
        let out =
            self.transaction(|s| with_kind!(s, kind, |map| insert(map, kind, body, false)))?;
        let id = id_of(&out).unwrap_or_default();
        let resource = Resource::from_collection(kind);
        if let Some(r) = resource {
            let now = self.now();
            self.revisions.created(r, &id, now);
        }
        let related = self.related(resource, &id);
        self.bump_all(related);
        Ok(out)
    }

    /// Replaces a resource (`PUT /sim/<kind>/<id>`); the body's `id`, when
    /// present, must be `id`. Raises its revision (and a subnet's network's,
    /// the old one's too when it moved).
    pub fn replace(
        &mut self,
        kind: &str,
        id: &str,
        mut body: Value,
    ) -> Result<Value, MutationError> {
        if body.get("id").is_none() {
            body["id"] = Value::String(id.to_owned());
        }
        if id_of(&body).as_deref() != Some(id) {
            return Err(MutationError::Invalid {
                kind: kind.into(),
                message: "`id` cannot change".into(),
            });
        }
        let resource = Resource::from_collection(kind);
        let mut related = self.related(resource, id);
        let out = self.transaction(|s| with_kind!(s, kind, |map| insert(map, kind, body, true)))?;
        self.changed(resource, id, &mut related);
        Ok(out)
    }

    /// Changes some fields (`PATCH /sim/<kind>/<id>`): moves a port to
    /// another network/device/project, renames, re-owns. Raises revisions
    /// as [`Store::replace`] does.
    pub fn update(&mut self, kind: &str, id: &str, changes: Value) -> Result<Value, MutationError> {
        let resource = Resource::from_collection(kind);
        let mut related = self.related(resource, id);
        let out = self.transaction(|s| with_kind!(s, kind, |map| patch(map, kind, id, changes)))?;
        self.changed(resource, id, &mut related);
        Ok(out)
    }

    /// `kind` `id` changed: it and what it relates to before (`related`)
    /// and after get a revision more.
    fn changed(&mut self, kind: Option<Resource>, id: &str, related: &mut Vec<(Resource, String)>) {
        related.extend(self.related(kind, id));
        if let Some(r) = kind {
            related.insert(0, (r, id.to_owned()));
        }
        self.bump_all(std::mem::take(related));
    }

    /// Removes a resource (`DELETE /sim/<kind>/<id>`); refused while another
    /// resource still refers to it (a network with subnets, a port with a
    /// floating IP). A subnet raises its network's revision; a server stays
    /// listed, deleted, for `changes-since`.
    pub fn delete(&mut self, kind: &str, id: &str) -> Result<(), MutationError> {
        let resource = Resource::from_collection(kind);
        let related = self.related(resource, id);
        let server = self.servers.get(id).cloned();
        self.transaction(|s| {
            with_kind!(s, kind, |map| map.remove(id).map(|_| ()).ok_or_else(|| {
                MutationError::NotFound {
                    kind: kind.into(),
                    id: id.into(),
                }
            }))
        })?;
        if let Some(r) = resource {
            let now = self.now();
            let server = server.filter(|_| r == Resource::Servers);
            self.revisions.deleted(r, id, now, server);
        }
        self.bump_all(related);
        Ok(())
    }

    fn router_mut(&mut self, id: &str) -> Result<&mut Router, MutationError> {
        self.routers
            .get_mut(id)
            .ok_or_else(|| MutationError::NotFound {
                kind: "routers".into(),
                id: id.into(),
            })
    }

    fn bump_router(&mut self, id: &str) {
        self.bump_all(vec![(Resource::Routers, id.to_owned())]);
    }

    /// Adds an extra route (the `extraroute` extension) and raises the
    /// router's revision; adding one the router already has changes nothing.
    pub fn add_route(
        &mut self,
        router: &str,
        route: super::topology::Route,
    ) -> Result<(), MutationError> {
        let r = self.router_mut(router)?;
        if !r.routes.contains(&route) {
            r.routes.push(route);
            self.bump_router(router);
        }
        Ok(())
    }

    /// Removes an extra route, raising the router's revision; a missing
    /// route is a 404.
    pub fn remove_route(
        &mut self,
        router: &str,
        route: &super::topology::Route,
    ) -> Result<(), MutationError> {
        let r = self.router_mut(router)?;
        let before = r.routes.len();
        r.routes.retain(|x| x != route);
        if r.routes.len() == before {
            return Err(MutationError::NotFound {
                kind: "route".into(),
                id: format!("{} via {}", route.destination, route.nexthop),
            });
        }
        self.bump_router(router);
        Ok(())
    }

    /// Sets (`Some`) or clears (`None`) a router's external gateway; the
    /// network must be `router:external`. Raises the router's revision
    /// (Neutron raises it by more than one here; only "it rises" holds).
    pub fn set_gateway(
        &mut self,
        router: &str,
        gw: Option<super::topology::Gateway>,
    ) -> Result<(), MutationError> {
        self.transaction(|s| {
            s.router_mut(router)?.external_gateway_info = gw;
            Ok(())
        })?;
        self.bump_router(router);
        Ok(())
    }

    /// Plugs a subnet into a router the way Neutron does: a new port owned by
    /// `network:router_interface` holding the subnet's gateway address. The
    /// router's revision rises; the port shows revision 2, as Neutron's
    /// interface ports do (created, then bound to the router).
    pub fn add_interface(
        &mut self,
        router: &str,
        req: &InterfaceRequest,
    ) -> Result<Value, MutationError> {
        let project = self.router_mut(router)?.project_id.clone();
        let subnet =
            self.subnets
                .get(&req.subnet_id)
                .cloned()
                .ok_or_else(|| MutationError::NotFound {
                    kind: "subnets".into(),
                    id: req.subnet_id.clone(),
                })?;
        let ip = req
            .ip_address
            .clone()
            .or(subnet.gateway_ip.clone())
            .ok_or_else(|| MutationError::Invalid {
                kind: "router interface".into(),
                message: format!("subnet {:?} has no gateway_ip; pass ip_address", subnet.id),
            })?;
        let port = Port {
            id: req
                .port_id
                .clone()
                .unwrap_or_else(|| format!("rif-{router}-{}", subnet.id)),
            name: String::new(),
            network_id: subnet.network_id.clone(),
            project_id: project,
            mac_address: req.mac_address.clone(),
            device_id: router.to_owned(),
            device_owner: "network:router_interface".into(),
            fixed_ips: vec![super::topology::FixedIp {
                subnet_id: subnet.id.clone(),
                ip_address: ip,
            }],
            allowed_address_pairs: vec![],
        };
        let body = serde_json::to_value(&port).unwrap_or(Value::Null);
        let out = self.create("ports", body)?;
        self.bump_all(vec![
            (Resource::Ports, port.id.clone()),
            (Resource::Routers, router.to_owned()),
        ]);
        Ok(out)
    }

    /// Unplugs a subnet: removes (and returns) the router's interface port
    /// on it, raising the router's revision.
    pub fn remove_interface(
        &mut self,
        router: &str,
        subnet_id: &str,
    ) -> Result<Port, MutationError> {
        self.router_mut(router)?;
        let port = self
            .ports
            .values()
            .find(|p| {
                p.device_id == router
                    && p.device_owner == "network:router_interface"
                    && p.fixed_ips.iter().any(|f| f.subnet_id == subnet_id)
            })
            .cloned()
            .ok_or_else(|| MutationError::NotFound {
                kind: "router interface".into(),
                id: format!("{router}/{subnet_id}"),
            })?;
        self.delete("ports", &port.id)?;
        self.bump_router(router);
        Ok(port)
    }

    /// Shares a network with every project the way Neutron's RBAC API
    /// does (`access_as_shared` to `*`): `shared` turns true and the
    /// network's revision rises, but Neutron sends no `network.*` event for
    /// it — only `rbac_policy.create.end` (checked on Neutron 21). 409 when
    /// it is shared already.
    pub fn share(&mut self, network: &str) -> Result<SharePolicy, MutationError> {
        self.set_shared(network, true)
    }

    /// Undoes [`Store::share`] (also for a network shared in the topology);
    /// 404 when it is not shared.
    pub fn unshare(&mut self, network: &str) -> Result<SharePolicy, MutationError> {
        self.set_shared(network, false)
    }

    fn set_shared(&mut self, network: &str, shared: bool) -> Result<SharePolicy, MutationError> {
        let policy = self.share_policy(network)?;
        let n = self.networks.get_mut(network);
        match n {
            Some(n) if n.shared != shared => n.shared = shared,
            // A second policy for the same target is Neutron's 409; none to
            // delete, its 404.
            _ if shared => {
                return Err(MutationError::Conflict {
                    kind: "rbac_policy".into(),
                    id: policy.id,
                })
            }
            _ => {
                return Err(MutationError::NotFound {
                    kind: "rbac_policy".into(),
                    id: policy.id,
                })
            }
        }
        self.bump_all(vec![(Resource::Networks, network.to_owned())]);
        Ok(policy)
    }

    fn share_policy(&self, network: &str) -> Result<SharePolicy, MutationError> {
        let n = self
            .networks
            .get(network)
            .ok_or_else(|| MutationError::NotFound {
                kind: "networks".into(),
                id: network.into(),
            })?;
        Ok(SharePolicy {
            id: format!("rbac-{network}"),
            network_id: network.to_owned(),
            project_id: n.project_id.clone(),
        })
    }

    /// Applies the keys present in `p`; the others keep their value. A
    /// refused change (a step of a `wall` clock) changes nothing.
    pub fn apply_settings(&mut self, p: SettingsPatch) -> Result<(), SettingsError> {
        let mut clock = p.clock.unwrap_or(self.settings.clock);
        if let Some(secs) = p.clock_step_secs {
            clock.step(secs)?;
        }
        self.settings.clock = clock;
        if let Some(ps) = p.page_size {
            self.settings.page_size = (ps > 0).then_some(ps);
        }
        if let Some(ttl) = p.token_ttl_secs {
            self.settings.token_ttl_secs = ttl;
        }
        if let Some(k) = p.keystone_paging {
            self.settings.keystone_paging = k;
        }
        if let Some(s) = p.services {
            self.settings.services = s;
        }
        if let Some(r) = p.regions {
            self.settings.regions = r;
        }
        if let Some(v) = p.neutron_filter_validation {
            self.settings.neutron_filter_validation = v;
        }
        if let Some(f) = p.notification_faults {
            self.event_faults.reseed(f.seed);
            self.settings.notification_faults = f;
        }
        Ok(())
    }

    /// Arms a fault. Faults are tried in the order added; the first one
    /// matching a request's endpoint hits it.
    pub fn add_fault(&mut self, f: Fault) {
        self.faults.push(f);
    }

    /// Disarms every fault, used up or not.
    pub fn clear_faults(&mut self) {
        self.faults.clear();
    }

    /// Invalidates every issued token (the next API call gets a 401).
    pub fn revoke_tokens(&mut self) {
        // Kept, marked, so `/sim/stats` still knows whose calls they are.
        for t in self.tokens.values_mut() {
            t.revoked = true;
        }
    }

    /// The first live fault for `endpoint`, consuming one use of it.
    pub(crate) fn take_fault(&mut self, endpoint: &str) -> Option<Fault> {
        let i = self
            .faults
            .iter()
            .position(|f| f.endpoint == endpoint || f.endpoint == "*")?;
        let fault = self.faults[i].clone();
        if let Some(n) = &mut self.faults[i].times {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.faults.remove(i);
            }
        }
        Some(fault)
    }

    pub(crate) fn issue_token(
        &mut self,
        project_id: String,
        client: String,
    ) -> (String, SystemTime) {
        self.token_seq += 1;
        self.stats.tokens_issued += 1;
        let value = format!("gAAAAsim{:016x}", self.token_seq);
        let expires_at = SystemTime::now() + Duration::from_secs(self.settings.token_ttl_secs);
        self.tokens.insert(
            value.clone(),
            IssuedToken {
                project_id,
                expires_at,
                client,
                revoked: false,
            },
        );
        (value, expires_at)
    }

    /// The project a valid token is scoped to.
    pub(crate) fn check_token(&self, token: Option<&str>) -> Option<String> {
        let t = self.tokens.get(token?)?;
        (!t.revoked && SystemTime::now() < t.expires_at).then(|| t.project_id.clone())
    }

    /// The client a token was issued to, or [`stats::ANONYMOUS`] for no
    /// token or one the simulator never issued (an expired or revoked one
    /// still names its client).
    pub(crate) fn client_of(&self, token: Option<&str>) -> String {
        token
            .and_then(|t| self.tokens.get(t))
            .map_or_else(|| stats::ANONYMOUS.to_owned(), |t| t.client.clone())
    }

    /// What leaves, and when, for one change's `events` under the
    /// notification faults; tallied in the stats.
    pub(crate) fn deliveries(&mut self, events: Vec<Event>) -> Vec<Delivery> {
        self.event_faults.schedule(
            &self.settings.notification_faults.rules,
            events,
            &mut self.stats.notifications,
        )
    }

    /// Zeroes the counters (`DELETE /sim/stats`).
    pub fn requests_reset(&mut self) {
        self.stats = Stats::default();
    }

    /// Counters for tests and operators (`GET /sim/stats`).
    #[must_use]
    pub fn stats(&self) -> Stats {
        self.stats.clone()
    }
}

/// The RBAC policy that shares a network with every project: one per
/// shared network, named `rbac-<network id>` (Neutron generates the id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharePolicy {
    /// `rbac-<network id>`.
    pub id: String,
    /// The shared network (the policy's `object_id`).
    pub network_id: String,
    /// The network's owner, who holds the policy.
    pub project_id: String,
}

/// `POST /sim/routers/<id>/interfaces` body: what [`Store::add_interface`]
/// needs to make the interface port.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InterfaceRequest {
    /// The subnet to plug; must exist.
    pub subnet_id: String,
    /// The port's MAC (Neutron generates one; here it is given, so tests
    /// know it).
    pub mac_address: String,
    /// The port's id; `rif-<router>-<subnet>` when absent.
    #[serde(default)]
    pub port_id: Option<String>,
    /// The port's address; the subnet's `gateway_ip` when absent (then the
    /// subnet must have one).
    #[serde(default)]
    pub ip_address: Option<String>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn store() -> Store {
        let t = Topology::from_yaml(
            "networks: [{id: n1, project_id: p}]\n\
             subnets: [{id: s1, network_id: n1, project_id: p, cidr: 10.0.0.0/24}]\n",
        )
        .unwrap();
        Store::from_topology(&t).unwrap()
    }

    fn subnet(id: &str, cidr: &str) -> Value {
        json!({"id": id, "network_id": "n1", "project_id": "p", "cidr": cidr})
    }

    #[test]
    fn a_refused_mutation_keeps_data_put_in_through_with_store() {
        let mut s = store();
        // A subnet on a network that does not exist: the store itself would
        // refuse it, but direct access (tests, the demo) can put it there.
        let mut orphan: crate::topology::Subnet =
            serde_json::from_value(subnet("s-orphan", "10.9.0.0/24")).unwrap();
        orphan.network_id = "no-such-net".into();
        s.subnets.insert("s-orphan".into(), orphan);
        let err = s
            .create("subnets", subnet("s2", "10.1.0.0/33"))
            .unwrap_err();
        assert!(matches!(err, MutationError::Invalid { .. }), "{err:?}");
        assert!(s.networks.contains_key("n1"), "the store was emptied");
        assert!(s.subnets.contains_key("s1") && s.subnets.contains_key("s-orphan"));
        assert!(!s.subnets.contains_key("s2"));
    }

    #[test]
    fn the_control_api_refuses_a_prefix_beyond_the_family_and_keeps_the_store() {
        let mut s = store();
        let err = s.create("subnets", subnet("s6", "fd00::/129")).unwrap_err();
        let MutationError::Invalid { kind, message } = &err else {
            panic!("expected Invalid (HTTP 400), got {err:?}");
        };
        assert_eq!(kind, "subnets");
        assert!(
            message.contains("subnet \"s6\": cidr \"fd00::/129\" has prefix length 129"),
            "{message}"
        );
        assert!(message.contains("ADDRESS/LENGTH"), "{message}");
        assert_eq!(s.subnets.keys().collect::<Vec<_>>(), ["s1"]);
    }

    #[test]
    fn a_patch_to_the_other_ip_version_is_refused() {
        let mut s = store();
        let err = s
            .update("subnets", "s1", json!({"ip_version": 6}))
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("cidr \"10.0.0.0/24\" does not match the ip_version 6"),
            "{err}"
        );
        let err = s
            .replace("subnets", "s1", subnet("s1", "10.0.0.0/33"))
            .unwrap_err();
        assert!(err.to_string().contains("subnet \"s1\": cidr"), "{err}");
        assert_eq!(s.subnets["s1"].cidr, "10.0.0.0/24");
    }

    #[test]
    fn a_created_subnet_is_answered_and_listed_with_host_bits_cleared() {
        let mut s = store();
        let answer = s.create("subnets", subnet("s2", "10.9.0.77/16")).unwrap();
        assert_eq!(answer["cidr"], "10.9.0.0/16");
        let listed = crate::wire::subnet(&s.subnets["s2"], s.meta(Resource::Subnets, "s2"));
        assert_eq!(
            (&listed["cidr"], &listed["ip_version"]),
            (&json!("10.9.0.0/16"), &json!(4))
        );
    }

    #[test]
    fn a_subnet_built_in_code_is_checked_on_load() {
        let mut t = store().to_topology();
        t.subnets[0].cidr = "10.0.0.0/33".into();
        let err = Store::from_topology(&t).unwrap_err();
        assert!(
            matches!(&err, TopologyError::Invalid { kind: "subnet", id, problem }
                if id == "s1" && problem.starts_with("cidr \"10.0.0.0/33\"")),
            "{err:?}"
        );
    }
}
