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
use crate::bodies::ApiBodies;
use crate::sources::Sources;
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
pub fn parse_snapshot(bodies: &ApiBodies) -> Result<(Snapshot, ParseReport), ParseError> {
    let mut report = ParseReport::default();
    let r = &mut report;
    let snapshot = Snapshot {
        networks: parse_list(&bodies.networks, "networks", r, network)?,
        subnets: parse_list(&bodies.subnets, "subnets", r, subnet)?,
        ports: parse_list(&bodies.ports, "ports", r, port)?,
        routers: parse_list(&bodies.routers, "routers", r, router)?,
        floating_ips: parse_list(&bodies.floatingips, "floatingips", r, floating_ip)?,
        projects: parse_list(&bodies.projects, "projects", r, project)?,
        servers: optional(bodies.servers.fetched(), "servers", r, server)?,
        load_balancers: optional(
            bodies.loadbalancers.fetched(),
            "loadbalancers",
            r,
            load_balancer,
        )?,
        amphorae: optional(bodies.amphorae.fetched(), "amphorae", r, amphora)?,
        sources: Sources::of(bodies),
    };
    report.skipped.sort();
    Ok((snapshot, report))
}

/// Collects the parts of one entry that were dropped while keeping the rest.
struct Entry {
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

fn optional<T>(
    body: Option<&Value>,
    key: &'static str,
    report: &mut ParseReport,
    build: fn(&Obj, &mut Entry) -> Result<T, SkipReason>,
) -> Result<Option<Vec<T>>, ParseError> {
    body.map(|b| parse_list(b, key, report, build)).transpose()
}

fn parse_list<T>(
    body: &Value,
    key: &'static str,
    report: &mut ParseReport,
    build: fn(&Obj, &mut Entry) -> Result<T, SkipReason>,
) -> Result<Vec<T>, ParseError> {
    let items = body
        .get(key)
        .and_then(Value::as_array)
        .ok_or_else(|| ParseError {
            body: key,
            key,
            found: describe(body),
        })?;
    let mut parsed: Vec<(&str, &Value, T)> = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let Some(obj) = item.as_object() else {
            report.skipped.push(Skipped {
                list: key,
                id: None,
                index: Some(index),
                reason: SkipReason::NotAnObject,
                whole_entry: true,
            });
            continue;
        };
        let Some(id) = obj
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        else {
            report.skipped.push(Skipped {
                list: key,
                id: None,
                index: Some(index),
                reason: SkipReason::MissingId,
                whole_entry: true,
            });
            continue;
        };
        let mut entry = Entry { parts: Vec::new() };
        let outcome = build(obj, &mut entry);
        let list = key;
        for reason in entry.parts {
            report.skipped.push(Skipped {
                list,
                id: Some(id.to_owned()),
                index: None,
                reason,
                whole_entry: false,
            });
        }
        match outcome {
            Ok(v) => parsed.push((id, item, v)),
            Err(reason) => {
                report.skipped.push(Skipped {
                    list,
                    id: Some(id.to_owned()),
                    index: None,
                    reason,
                    whole_entry: true,
                });
            }
        }
    }
    Ok(dedup_by_id(parsed, key, report))
}

/// Sorts by id and keeps one entry per id: the one whose JSON text sorts
/// first, so the choice is a function of the set of entries, not their order.
fn dedup_by_id<T>(
    mut parsed: Vec<(&str, &Value, T)>,
    key: &'static str,
    report: &mut ParseReport,
) -> Vec<T> {
    parsed.sort_by(|a, b| a.0.cmp(b.0));
    let mut out = Vec::with_capacity(parsed.len());
    let mut i = 0;
    while i < parsed.len() {
        let mut j = i + 1;
        while j < parsed.len() && parsed[j].0 == parsed[i].0 {
            j += 1;
        }
        if j - i > 1 {
            let group = &mut parsed[i..j];
            group.sort_by_cached_key(|e| e.1.to_string());
            for e in &group[1..] {
                report.skipped.push(Skipped {
                    list: key,
                    id: Some(e.0.to_owned()),
                    index: None,
                    reason: SkipReason::DuplicateId,
                    whole_entry: true,
                });
            }
        }
        i = j;
    }
    // Second pass moves the kept values out in id order.
    let mut last: Option<&str> = None;
    for (id, _, v) in parsed {
        if last != Some(id) {
            out.push(v);
            last = Some(id);
        }
    }
    out
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

fn network(obj: &Obj, entry: &mut Entry) -> Result<Network, SkipReason> {
    Ok(Network {
        id: required(obj, "id")?,
        name: entry.opt_string(obj, "name"),
        project: entry.project(obj),
        shared: entry.flag(obj, "shared"),
        external: entry.flag(obj, "router:external"),
    })
}

fn subnet(obj: &Obj, entry: &mut Entry) -> Result<Subnet, SkipReason> {
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

fn port(obj: &Obj, entry: &mut Entry) -> Result<Port, SkipReason> {
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

fn router(obj: &Obj, entry: &mut Entry) -> Result<Router, SkipReason> {
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

fn floating_ip(obj: &Obj, entry: &mut Entry) -> Result<FloatingIp, SkipReason> {
    Ok(FloatingIp {
        id: required(obj, "id")?,
        network_id: required(obj, "floating_network_id")?,
        address: opt_addr(obj, "floating_ip_address", entry),
        project: entry.project(obj),
        port_id: entry.opt_string(obj, "port_id"),
        fixed_ip: opt_addr(obj, "fixed_ip_address", entry),
    })
}

fn project(obj: &Obj, entry: &mut Entry) -> Result<Project, SkipReason> {
    Ok(Project {
        id: required(obj, "id")?,
        name: entry.string(obj, "name"),
    })
}

fn server(obj: &Obj, entry: &mut Entry) -> Result<Server, SkipReason> {
    Ok(Server {
        id: required(obj, "id")?,
        name: entry.string(obj, "name"),
        project: entry.project(obj),
    })
}

fn load_balancer(obj: &Obj, entry: &mut Entry) -> Result<LoadBalancer, SkipReason> {
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

fn amphora(obj: &Obj, entry: &mut Entry) -> Result<Amphora, SkipReason> {
    Ok(Amphora {
        id: required(obj, "id")?,
        loadbalancer_id: entry.opt_string(obj, "loadbalancer_id"),
        compute_id: entry.opt_string(obj, "compute_id"),
        lb_network_ip: opt_addr(obj, "lb_network_ip", entry),
        status: entry.string(obj, "status"),
    })
}
