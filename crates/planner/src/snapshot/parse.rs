//! API response bodies → [`Snapshot`], tolerant the way real clouds need.
//!
//! A body whose top level is not `{"<list>": [...]}` is an error (the sync
//! is all-or-nothing, DESIGN §5); inside a list, a malformed entry or a
//! malformed part of one is skipped and recorded, never fatal. "Recorded"
//! covers every field read: a value of the wrong JSON type (a `fixed_ips`
//! that is a string, a numeric `device_owner`) is reported with the entry
//! and the field, never read silently as absent.

use std::net::IpAddr;

use lachesis_abi::Mac;
use serde_json::{Map, Value};

use super::model::{
    AddressPair, Amphora, FixedIp, FloatingIp, LoadBalancer, Network, Port, Project, Route, Router,
    Server, Snapshot, Subnet,
};
use super::report::{ParseReport, SkipReason, Skipped};
use crate::bodies::{ApiBodies, Resource};
use crate::sources::{SourceStatus, Sources};
use lachesis_abi::Prefix;

/// A body that is not the list response it should be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{body} body: expected a JSON object with an array under {key:?}, found {found}")]
pub struct ParseError {
    /// Which body (`ports`, `projects`, …).
    pub body: &'static str,
    /// The key the list should be under.
    pub key: &'static str,
    /// What was there instead.
    pub found: String,
}

type Obj = Map<String, Value>;

/// Parses the merged list bodies into a snapshot and a report of what was
/// skipped. Every list comes out sorted by id, duplicates removed.
///
/// The same parse as feeding a [`SnapshotParser`] each body as one page:
/// `lachesis plan --from-dir` and a live sync plan alike.
pub fn parse_snapshot(bodies: &ApiBodies) -> Result<(Snapshot, ParseReport), ParseError> {
    let mut parser = SnapshotParser::new();
    for resource in Resource::ALL {
        if let Some(body) = bodies.body(resource) {
            parser.page(resource, items(body, resource)?);
        }
    }
    Ok(parser.finish(Sources::of(bodies)))
}

/// The array of a list body, or the error naming the body.
fn items(body: &Value, resource: Resource) -> Result<&[Value], ParseError> {
    let key = resource.collection();
    body.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .ok_or_else(|| ParseError {
            body: key,
            key,
            found: describe(body),
        })
}

/// Parses a sync page by page: each page's items become the snapshot's
/// typed entries (and the report's lines) as the page arrives, so a page
/// can be dropped as soon as it is fed and no whole list is ever held as
/// JSON. The result is the one [`parse_snapshot`] gives for the merged
/// bodies, whatever the page boundaries.
///
/// Pages of one list must come in the list's order (an entry without an id
/// is reported by its index in the whole list); lists may interleave.
#[derive(Debug)]
pub struct SnapshotParser {
    networks: ListParser<Network>,
    subnets: ListParser<Subnet>,
    ports: ListParser<Port>,
    routers: ListParser<Router>,
    floating_ips: ListParser<FloatingIp>,
    projects: ListParser<Project>,
    servers: ListParser<Server>,
    load_balancers: ListParser<LoadBalancer>,
    amphorae: ListParser<Amphora>,
}

impl Default for SnapshotParser {
    fn default() -> Self {
        Self::new()
    }
}

impl SnapshotParser {
    /// A parser that has seen no page yet.
    #[must_use]
    pub fn new() -> Self {
        SnapshotParser {
            networks: ListParser::new(Resource::Networks, network),
            subnets: ListParser::new(Resource::Subnets, subnet),
            ports: ListParser::new(Resource::Ports, port),
            routers: ListParser::new(Resource::Routers, router),
            floating_ips: ListParser::new(Resource::FloatingIps, floating_ip),
            projects: ListParser::new(Resource::Projects, project),
            servers: ListParser::new(Resource::Servers, server),
            load_balancers: ListParser::new(Resource::LoadBalancers, load_balancer),
            amphorae: ListParser::new(Resource::Amphorae, amphora),
        }
    }

    /// Parses the next page of `resource`'s list: its items, in order.
    pub fn page(&mut self, resource: Resource, items: &[Value]) {
        match resource {
            Resource::Networks => self.networks.page(items),
            Resource::Subnets => self.subnets.page(items),
            Resource::Ports => self.ports.page(items),
            Resource::Routers => self.routers.page(items),
            Resource::FloatingIps => self.floating_ips.page(items),
            Resource::Projects => self.projects.page(items),
            Resource::Servers => self.servers.page(items),
            Resource::LoadBalancers => self.load_balancers.page(items),
            Resource::Amphorae => self.amphorae.page(items),
        }
    }

    /// Parses the next item of `resource`'s list: [`SnapshotParser::page`]
    /// of one item, for a caller that holds the items apart (a relay-mode
    /// agent's state) and would otherwise copy them into a page.
    pub fn item(&mut self, resource: Resource, item: &Value) {
        self.page(resource, std::slice::from_ref(item));
    }

    /// The snapshot and the report. `sources` says which best-effort lists
    /// were fetched: a list that is not `ok` is `None` in the snapshot and
    /// leaves nothing in the report, even if pages of it were fed before
    /// its service failed (DESIGN §5: failed is unknown, never partial).
    #[must_use]
    pub fn finish(self, sources: Sources) -> (Snapshot, ParseReport) {
        let mut report = ParseReport::default();
        let r = &mut report;
        let fetched = |status: SourceStatus| status == SourceStatus::Ok;
        let snapshot = Snapshot {
            networks: self.networks.finish(r),
            subnets: self.subnets.finish(r),
            ports: self.ports.finish(r),
            routers: self.routers.finish(r),
            floating_ips: self.floating_ips.finish(r),
            projects: self.projects.finish(r),
            servers: fetched(sources.servers).then(|| self.servers.finish(r)),
            load_balancers: fetched(sources.loadbalancers).then(|| self.load_balancers.finish(r)),
            amphorae: fetched(sources.amphorae).then(|| self.amphorae.finish(r)),
            sources,
        };
        report.skipped.sort();
        (snapshot, report)
    }
}

/// An entry's id, by which a list is sorted and deduplicated.
pub(super) trait Identified {
    fn id(&self) -> &str;
}

macro_rules! identified {
    ($($t:ty),*) => {
        $(impl Identified for $t {
            fn id(&self) -> &str {
                &self.id
            }
        })*
    };
}

identified!(
    Network,
    Subnet,
    Port,
    Router,
    FloatingIp,
    Project,
    Server,
    LoadBalancer,
    Amphora
);

/// One list, parsed page by page.
struct ListParser<T> {
    key: &'static str,
    build: Build<T>,
    entries: Vec<T>,
    skipped: Vec<Skipped>,
    /// Items fed so far, so that an entry without an id is reported by its
    /// index in the whole list, not in its page.
    seen: usize,
}

impl<T> std::fmt::Debug for ListParser<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListParser")
            .field("list", &self.key)
            .field("entries", &self.entries.len())
            .field("skipped", &self.skipped.len())
            .field("seen", &self.seen)
            .finish_non_exhaustive()
    }
}

impl<T: Identified + Ord> ListParser<T> {
    fn new(resource: Resource, build: Build<T>) -> Self {
        ListParser {
            key: resource.collection(),
            build,
            entries: Vec::new(),
            skipped: Vec::new(),
            seen: 0,
        }
    }

    fn page(&mut self, items: &[Value]) {
        for (offset, item) in items.iter().enumerate() {
            match parse_item(self.key, self.build, item, Some(self.seen + offset)) {
                Item::Unkeyed(skipped) => self.skipped.push(skipped),
                Item::Keyed { entry, skipped, .. } => {
                    self.skipped.extend(skipped);
                    self.entries.extend(entry);
                }
            }
        }
        self.seen += items.len();
    }

    /// Sorts by id and keeps one entry per id: the one that sorts first, so
    /// the choice is a function of the set of entries, not of their order
    /// or of the pages they came in. Each other one is reported.
    fn finish(self, report: &mut ParseReport) -> Vec<T> {
        let mut entries = self.entries;
        entries.sort_by(|a, b| a.id().cmp(b.id()).then_with(|| a.cmp(b)));
        let mut out: Vec<T> = Vec::with_capacity(entries.len());
        for e in entries {
            if out.last().is_some_and(|kept| kept.id() == e.id()) {
                report.skipped.push(Skipped {
                    list: self.key,
                    id: Some(e.id().to_owned()),
                    index: None,
                    reason: SkipReason::DuplicateId,
                    whole_entry: true,
                });
            } else {
                out.push(e);
            }
        }
        report.skipped.extend(self.skipped);
        out
    }
}

/// How one list's entries are built from their objects.
pub(super) type Build<T> = fn(&Obj, &mut Entry) -> Result<T, SkipReason>;

/// One list element, parsed.
pub(super) enum Item<T> {
    /// Not an object, or no usable id: the whole element is skipped and
    /// can be named only by its `index` in its list.
    Unkeyed(Skipped),
    /// An element with an id.
    Keyed {
        /// Its id.
        id: String,
        /// The entry, unless the whole of it was dropped.
        entry: Option<T>,
        /// What was dropped of it: its parts, then the whole entry.
        skipped: Vec<Skipped>,
    },
}

/// Parses one element of list `key` with `build`; `index` is its position
/// in the whole list, reported only when it has no id.
pub(super) fn parse_item<T>(
    key: &'static str,
    build: Build<T>,
    item: &Value,
    index: Option<usize>,
) -> Item<T> {
    let whole = |reason| Skipped {
        list: key,
        id: None,
        index,
        reason,
        whole_entry: true,
    };
    let Some(obj) = item.as_object() else {
        return Item::Unkeyed(whole(SkipReason::NotAnObject));
    };
    let Some(id) = obj
        .get("id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    else {
        return Item::Unkeyed(whole(SkipReason::MissingId));
    };
    let mut parts = Entry { parts: Vec::new() };
    let outcome = build(obj, &mut parts);
    let of_entry = |reason, whole_entry| Skipped {
        list: key,
        id: Some(id.to_owned()),
        index: None,
        reason,
        whole_entry,
    };
    let mut skipped: Vec<Skipped> = parts
        .parts
        .into_iter()
        .map(|reason| of_entry(reason, false))
        .collect();
    let entry = match outcome {
        Ok(v) => Some(v),
        Err(reason) => {
            skipped.push(of_entry(reason, true));
            None
        }
    };
    Item::Keyed {
        id: id.to_owned(),
        entry,
        skipped,
    }
}

/// Collects the parts of one entry that were dropped while keeping the rest.
pub(super) struct Entry {
    parts: Vec<SkipReason>,
}

impl Entry {
    fn drop_part(&mut self, field: &'static str, value: &Value, expected: &'static str) {
        self.parts.push(bad(field, value, expected));
    }

    /// Reads `obj[key]` with `read`: absent or null is `None`; a value
    /// `read` refuses is reported as `field` (`key` unless nested) and read
    /// as absent.
    fn typed<'a, T>(
        &mut self,
        obj: &'a Obj,
        key: &str,
        field: &'static str,
        expected: &'static str,
        read: impl FnOnce(&'a Value) -> Option<T>,
    ) -> Option<T> {
        match obj.get(key) {
            None | Some(Value::Null) => None,
            Some(v) => {
                let got = read(v);
                if got.is_none() {
                    self.drop_part(field, v, expected);
                }
                got
            }
        }
    }

    /// An optional string field.
    fn opt_str<'a>(&mut self, obj: &'a Obj, key: &'static str) -> Option<&'a str> {
        self.typed(obj, key, key, "a string or null", Value::as_str)
    }

    /// [`Entry::opt_str`], empty strings read as absent, owned.
    fn opt_string(&mut self, obj: &Obj, key: &'static str) -> Option<String> {
        self.opt_str(obj, key)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    }

    /// [`Entry::opt_str`], `""` when absent.
    fn string(&mut self, obj: &Obj, key: &'static str) -> String {
        self.opt_str(obj, key).unwrap_or_default().to_owned()
    }

    /// A boolean field, `false` when absent.
    fn flag(&mut self, obj: &Obj, key: &'static str) -> bool {
        self.typed(obj, key, key, "true or false", Value::as_bool)
            .unwrap_or(false)
    }

    /// A list field, empty when absent; `field` names it in reports.
    fn list_as<'a>(&mut self, obj: &'a Obj, key: &str, field: &'static str) -> &'a [Value] {
        self.typed(obj, key, field, "a list", |v| {
            v.as_array().map(Vec::as_slice)
        })
        .unwrap_or(&[])
    }

    /// A list field, empty when absent.
    fn list<'a>(&mut self, obj: &'a Obj, key: &'static str) -> &'a [Value] {
        self.list_as(obj, key, key)
    }

    /// An optional object field.
    fn object<'a>(&mut self, obj: &'a Obj, key: &'static str) -> Option<&'a Obj> {
        self.typed(obj, key, key, "an object or null", Value::as_object)
    }

    /// `project_id`, falling back to the older `tenant_id`; `""` when neither.
    fn project(&mut self, obj: &Obj) -> String {
        match self.opt_str(obj, "project_id") {
            Some(p) if !p.is_empty() => p.to_owned(),
            _ => self.string(obj, "tenant_id"),
        }
    }
}

fn bad(field: &'static str, value: &Value, expected: &'static str) -> SkipReason {
    let mut text = match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if text.len() > 64 {
        let mut cut = 64;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push('…');
    }
    SkipReason::BadValue {
        field,
        value: text,
        expected,
    }
}

fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".to_owned(),
        Value::Bool(_) => "a boolean".to_owned(),
        Value::Number(_) => "a number".to_owned(),
        Value::String(_) => "a string".to_owned(),
        Value::Array(_) => "an array".to_owned(),
        Value::Object(m) => {
            let keys: Vec<&str> = m.keys().map(String::as_str).take(5).collect();
            format!("an object with keys {keys:?}")
        }
    }
}

fn required(obj: &Obj, field: &'static str) -> Result<String, SkipReason> {
    match obj.get(field) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        None | Some(Value::Null | Value::String(_)) => Err(SkipReason::MissingField { field }),
        Some(v) => Err(bad(field, v, "a non-empty string")),
    }
}

fn opt_addr(obj: &Obj, key: &'static str, entry: &mut Entry) -> Option<IpAddr> {
    match obj.get(key) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(v) => {
            let parsed = v.as_str().and_then(|s| s.parse().ok());
            if parsed.is_none() {
                entry.drop_part(key, v, "an IPv4 or IPv6 address or null");
            }
            parsed
        }
    }
}

pub(super) fn network(obj: &Obj, entry: &mut Entry) -> Result<Network, SkipReason> {
    Ok(Network {
        id: required(obj, "id")?,
        name: entry.opt_string(obj, "name"),
        project: entry.project(obj),
        shared: entry.flag(obj, "shared"),
        external: entry.flag(obj, "router:external"),
    })
}

pub(super) fn subnet(obj: &Obj, entry: &mut Entry) -> Result<Subnet, SkipReason> {
    let network_id = required(obj, "network_id")?;
    let raw = obj
        .get("cidr")
        .ok_or(SkipReason::MissingField { field: "cidr" })?;
    let cidr: Prefix = raw
        .as_str()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("cidr", raw, "a prefix such as 10.0.0.0/24 or 2001:db8::/64"))?;
    match obj.get("ip_version") {
        None | Some(Value::Null) => {}
        Some(v) => {
            let family = if cidr.is_ipv4() { 4 } else { 6 };
            if v.as_u64() != Some(family) {
                return Err(bad("ip_version", v, "the family of cidr (4 or 6)"));
            }
        }
    }
    let mut gateway = opt_addr(obj, "gateway_ip", entry);
    if let Some(g) = gateway {
        if g.is_ipv4() != cidr.is_ipv4() {
            entry.drop_part(
                "gateway_ip",
                &obj["gateway_ip"],
                "an address of the subnet's family",
            );
            gateway = None;
        }
    }
    Ok(Subnet {
        id: required(obj, "id")?,
        network_id,
        project: entry.project(obj),
        cidr,
        gateway,
    })
}

fn fixed_ips(obj: &Obj, field: &'static str, entry: &mut Entry) -> Vec<FixedIp> {
    let mut out = Vec::new();
    for fip in entry.list(obj, field) {
        let subnet_id = fip
            .get("subnet_id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let address = fip
            .get("ip_address")
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<IpAddr>().ok());
        match (subnet_id, address) {
            (Some(subnet_id), Some(address)) => out.push(FixedIp {
                subnet_id: subnet_id.to_owned(),
                address,
            }),
            _ => entry.drop_part(
                if field == "fixed_ips" {
                    "fixed_ips[]"
                } else {
                    "external_fixed_ips[]"
                },
                fip,
                "{\"subnet_id\": \"<id>\", \"ip_address\": \"<address>\"}",
            ),
        }
    }
    out.sort_by(|a, b| (a.address, &a.subnet_id).cmp(&(b.address, &b.subnet_id)));
    out.dedup();
    out
}

pub(super) fn port(obj: &Obj, entry: &mut Entry) -> Result<Port, SkipReason> {
    let network_id = required(obj, "network_id")?;
    let mac = match obj.get("mac_address") {
        Some(Value::String(s)) => {
            let parsed = s.parse::<Mac>().ok();
            if parsed.is_none() {
                entry.drop_part(
                    "mac_address",
                    &obj["mac_address"],
                    "six hex octets separated by ':'",
                );
            }
            parsed
        }
        Some(other) => {
            entry.drop_part("mac_address", other, "six hex octets separated by ':'");
            None
        }
        None => None,
    };
    let fixed = fixed_ips(obj, "fixed_ips", entry);
    let mut pairs = Vec::new();
    for pair in entry.list(obj, "allowed_address_pairs") {
        let prefix = pair
            .get("ip_address")
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<Prefix>().ok());
        let mac = match pair.get("mac_address") {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_str()
                .and_then(|s| s.parse::<Mac>().ok())
                .map(Some)
                .ok_or(()),
        };
        match (prefix, mac) {
            (Some(prefix), Ok(mac)) => pairs.push(AddressPair { prefix, mac }),
            _ => entry.drop_part(
                "allowed_address_pairs[]",
                pair,
                "{\"ip_address\": \"<address or prefix>\", \"mac_address\": \"<mac>\" (optional)}",
            ),
        }
    }
    pairs.sort_by_key(|a| (a.prefix, a.mac));
    pairs.dedup();
    let mut subports: Vec<String> = Vec::new();
    if let Some(trunk) = entry.object(obj, "trunk_details") {
        for sub in entry.list_as(trunk, "sub_ports", "trunk_details.sub_ports") {
            match sub.get("port_id").and_then(Value::as_str) {
                Some(id) if !id.is_empty() => subports.push(id.to_owned()),
                _ => entry.drop_part(
                    "trunk_details.sub_ports[]",
                    sub,
                    "{\"port_id\": \"<id>\", ...}",
                ),
            }
        }
    }
    subports.sort();
    subports.dedup();
    Ok(Port {
        id: required(obj, "id")?,
        network_id,
        project: entry.project(obj),
        mac,
        device_id: entry.string(obj, "device_id"),
        device_owner: entry.string(obj, "device_owner"),
        fixed_ips: fixed,
        allowed_address_pairs: pairs,
        trunk_subports: subports,
    })
}

pub(super) fn router(obj: &Obj, entry: &mut Entry) -> Result<Router, SkipReason> {
    let mut gateway_networks = Vec::new();
    let mut gateway_ips = Vec::new();
    let mut gateways: Vec<&Obj> = Vec::new();
    if let Some(info) = entry.object(obj, "external_gateway_info") {
        gateways.push(info);
    }
    // The multi-gateway extension lists every gateway here, the first one
    // repeated from external_gateway_info.
    for gw in entry.list(obj, "external_gateways") {
        match gw.as_object() {
            Some(info) => gateways.push(info),
            None => entry.drop_part("external_gateways[]", gw, "{\"network_id\": \"<id>\", ...}"),
        }
    }
    for gw in gateways {
        let net = entry.typed(
            gw,
            "network_id",
            "external_gateway_info.network_id",
            "a network id",
            Value::as_str,
        );
        if let Some(net) = net.filter(|n| !n.is_empty()) {
            gateway_networks.push(net.to_owned());
        }
        gateway_ips.extend(fixed_ips(gw, "external_fixed_ips", entry));
    }
    gateway_networks.sort();
    gateway_networks.dedup();
    gateway_ips.sort_by(|a, b| (a.address, &a.subnet_id).cmp(&(b.address, &b.subnet_id)));
    gateway_ips.dedup();
    let mut routes = Vec::new();
    for route in entry.list(obj, "routes") {
        let destination = route
            .get("destination")
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<Prefix>().ok());
        let nexthop = route
            .get("nexthop")
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<IpAddr>().ok());
        match (destination, nexthop) {
            (Some(destination), Some(nexthop)) if destination.is_ipv4() == nexthop.is_ipv4() => {
                routes.push(Route {
                    destination,
                    nexthop,
                });
            }
            _ => entry.drop_part(
                "routes[]",
                route,
                "{\"destination\": \"<prefix>\", \"nexthop\": \"<address of the same family>\"}",
            ),
        }
    }
    routes.sort();
    routes.dedup();
    Ok(Router {
        id: required(obj, "id")?,
        name: entry.opt_string(obj, "name"),
        project: entry.project(obj),
        gateway_networks,
        gateway_ips,
        routes,
    })
}

pub(super) fn floating_ip(obj: &Obj, entry: &mut Entry) -> Result<FloatingIp, SkipReason> {
    Ok(FloatingIp {
        id: required(obj, "id")?,
        network_id: required(obj, "floating_network_id")?,
        address: opt_addr(obj, "floating_ip_address", entry),
        project: entry.project(obj),
        port_id: entry.opt_string(obj, "port_id"),
        fixed_ip: opt_addr(obj, "fixed_ip_address", entry),
    })
}

pub(super) fn project(obj: &Obj, entry: &mut Entry) -> Result<Project, SkipReason> {
    Ok(Project {
        id: required(obj, "id")?,
        name: entry.string(obj, "name"),
    })
}

pub(super) fn server(obj: &Obj, entry: &mut Entry) -> Result<Server, SkipReason> {
    Ok(Server {
        id: required(obj, "id")?,
        name: entry.string(obj, "name"),
        project: entry.project(obj),
    })
}

pub(super) fn load_balancer(obj: &Obj, entry: &mut Entry) -> Result<LoadBalancer, SkipReason> {
    Ok(LoadBalancer {
        id: required(obj, "id")?,
        project: required_project(obj, entry)?,
        provider: entry.string(obj, "provider"),
        provisioning_status: entry.string(obj, "provisioning_status"),
    })
}

fn required_project(obj: &Obj, entry: &mut Entry) -> Result<String, SkipReason> {
    let p = entry.project(obj);
    if p.is_empty() {
        Err(SkipReason::MissingField {
            field: "project_id",
        })
    } else {
        Ok(p)
    }
}

pub(super) fn amphora(obj: &Obj, entry: &mut Entry) -> Result<Amphora, SkipReason> {
    Ok(Amphora {
        id: required(obj, "id")?,
        loadbalancer_id: entry.opt_string(obj, "loadbalancer_id"),
        compute_id: entry.opt_string(obj, "compute_id"),
        lb_network_ip: opt_addr(obj, "lb_network_ip", entry),
        status: entry.string(obj, "status"),
    })
}
