//! The simulator's own control API under `/sim/`: mutations, faults,
//! settings, token revocation and counters (docs/openstack.md).

use hyper::{Method, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use super::notify::{self, Event};
use super::store::{Fault, InterfaceRequest, MutationError, SettingsPatch, Store};
use super::topology::{Gateway, Route};
use super::wire;
use crate::http::{json as reply, Ctx, Resp};
use lachesis_planner::Resource;

/// A resource as its API shows it (what notifications carry).
fn wire_of(s: &Store, kind: Resource, id: &str) -> Option<Value> {
    crate::render::one(s, kind, id, "")
}

/// The notification of one mutation. Only the lists of DESIGN §5 notify;
/// users and credentials do not, nor ports Neutron makes itself.
fn mutation_event(
    s: &Store,
    host: &str,
    kind: &str,
    action: &str,
    id: &str,
    before: Option<Value>,
) -> Option<Event> {
    let kind = Resource::from_collection(kind)?;
    let wire = before
        .or_else(|| wire_of(s, kind, id))
        .unwrap_or(Value::Null);
    if kind == Resource::Ports && notify::neutron_owned(&wire) {
        return None;
    }
    notify::for_mutation(host, kind, action, id, &wire)
}

/// The settings in their topology form, plus the clock's `now`.
fn settings(s: &Store) -> Value {
    let mut v = serde_json::to_value(&s.settings).unwrap_or(Value::Null);
    v["now"] = Value::String(s.now().rfc3339());
    v
}

fn bad(message: impl std::fmt::Display) -> Resp {
    reply(
        StatusCode::BAD_REQUEST,
        &json!({"error": message.to_string()}),
    )
}

fn from_mutation(e: &MutationError) -> Resp {
    let status = match e {
        MutationError::NotFound { .. } | MutationError::UnknownKind(_) => StatusCode::NOT_FOUND,
        MutationError::Conflict { .. } => StatusCode::CONFLICT,
        MutationError::Invalid { .. } => StatusCode::BAD_REQUEST,
    };
    reply(status, &json!({"error": e.to_string()}))
}

fn ok(v: &Value) -> Resp {
    reply(StatusCode::OK, v)
}

fn done(r: Result<(), MutationError>) -> Resp {
    match r {
        Ok(()) => reply(StatusCode::NO_CONTENT, &Value::Null),
        Err(e) => from_mutation(&e),
    }
}

fn value(r: Result<Value, MutationError>) -> Resp {
    match r {
        Ok(v) => ok(&v),
        Err(e) => from_mutation(&e),
    }
}

fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, Box<Resp>> {
    serde_json::from_slice(body).map_err(|e| Box::new(bad(format!("body: {e}"))))
}

/// Whether the call asks to change without telling anyone:
/// `?notify=false` (or `0`), a change the service makes and announces to
/// no one.
fn silenced(query: &[(String, String)]) -> bool {
    query
        .iter()
        .any(|(k, v)| k == "notify" && matches!(v.as_str(), "false" | "0"))
}

pub(crate) fn handle(
    ctx: &Ctx,
    method: &Method,
    rest: &[&str],
    query: &[(String, String)],
    body: &[u8],
) -> Resp {
    let mut events = Vec::new();
    let host = ctx
        .notifier
        .as_ref()
        .map_or("sim", |n| n.host.as_str())
        .to_owned();
    let mut s = ctx.lock();
    let answer = control(&mut s, method, rest, body)
        .unwrap_or_else(|| mutate(&mut s, method, rest, body, &host, &mut events))
        .unwrap_or_else(|e| *e);
    // Only mutations that succeeded notify, after the change is visible,
    // and still under the lock: events leave in the order the changes were
    // made, whatever other calls run meanwhile.
    if answer.status().is_success() && !silenced(query) {
        if let Some(n) = &ctx.notifier {
            for d in s.deliveries(events) {
                n.send_after(d.event, d.delay);
            }
        }
    }
    answer
}

/// The simulator's own settings and counters (nothing here notifies);
/// `None` for a path that is not one of them.
fn control(
    s: &mut Store,
    method: &Method,
    rest: &[&str],
    body: &[u8],
) -> Option<Result<Resp, Box<Resp>>> {
    let answer = match (method.as_str(), rest) {
        ("GET", ["stats"]) => ok(&serde_json::to_value(s.stats()).unwrap_or(Value::Null)),
        ("DELETE", ["stats"]) => {
            s.requests_reset();
            reply(StatusCode::NO_CONTENT, &Value::Null)
        }
        ("GET", ["topology"]) => ok(&serde_json::to_value(s.to_topology()).unwrap_or(Value::Null)),
        ("GET", ["settings"]) => ok(&settings(s)),
        ("PUT", ["settings"]) => match parse::<SettingsPatch>(body).map(|p| s.apply_settings(p)) {
            Ok(Ok(())) => ok(&settings(s)),
            Ok(Err(e)) => bad(e),
            Err(refused) => return Some(Err(refused)),
        },
        ("PUT" | "POST", ["faults"]) => match parse::<Fault>(body) {
            Ok(f) => {
                s.add_fault(f);
                reply(StatusCode::NO_CONTENT, &Value::Null)
            }
            Err(refused) => return Some(Err(refused)),
        },
        ("DELETE", ["faults"]) => {
            s.clear_faults();
            reply(StatusCode::NO_CONTENT, &Value::Null)
        }
        ("POST", ["tokens", "revoke"]) => {
            s.revoke_tokens();
            reply(StatusCode::NO_CONTENT, &Value::Null)
        }
        _ => return None,
    };
    Some(Ok(answer))
}

/// The resource mutations; each successful one leaves its notifications
/// in `events`.
fn mutate(
    s: &mut Store,
    method: &Method,
    rest: &[&str],
    body: &[u8],
    host: &str,
    events: &mut Vec<Event>,
) -> Result<Resp, Box<Resp>> {
    let mut note = |s: &Store, kind: &str, action: &str, id: &str, before: Option<Value>| {
        events.extend(mutation_event(s, host, kind, action, id, before));
    };
    Ok(match (method.as_str(), rest) {
        ("POST", ["routers", id, "routes"]) => {
            let r = s.add_route(id, parse::<Route>(body)?);
            note(s, "routers", "update", id, None);
            done(r)
        }
        ("DELETE", ["routers", id, "routes"]) => {
            let r = s.remove_route(id, &parse::<Route>(body)?);
            note(s, "routers", "update", id, None);
            done(r)
        }
        ("POST", ["routers", id, "interfaces"]) => {
            let r = s.add_interface(id, &parse::<InterfaceRequest>(body)?);
            if let Ok(port) = &r {
                let port_id = port["id"].as_str().unwrap_or_default();
                let wire = wire_of(s, Resource::Ports, port_id).unwrap_or_default();
                events.push(notify::router_interface(host, true, id, &wire));
            }
            value(r)
        }
        ("PUT", ["networks", id, "share"]) => match s.share(id) {
            Ok(policy) => {
                events.push(notify::rbac_policy(host, "create", &policy));
                reply(StatusCode::NO_CONTENT, &Value::Null)
            }
            Err(e) => from_mutation(&e),
        },
        ("DELETE", ["networks", id, "share"]) => match s.unshare(id) {
            Ok(policy) => {
                events.push(notify::rbac_policy(host, "delete", &policy));
                reply(StatusCode::NO_CONTENT, &Value::Null)
            }
            Err(e) => from_mutation(&e),
        },
        ("DELETE", ["routers", id, "interfaces", subnet]) => match s.remove_interface(id, subnet) {
            Ok(port) => {
                let meta = s.meta(Resource::Ports, &port.id);
                events.push(notify::router_interface(
                    host,
                    false,
                    id,
                    &wire::port(&port, meta),
                ));
                reply(StatusCode::NO_CONTENT, &Value::Null)
            }
            Err(e) => from_mutation(&e),
        },
        ("PUT", ["routers", id, "gateway"]) => {
            let r = s.set_gateway(id, parse::<Option<Gateway>>(body)?);
            note(s, "routers", "update", id, None);
            done(r)
        }
        ("POST", [kind]) => {
            let r = s.create(kind, parse(body)?);
            if let Ok(v) = &r {
                note(
                    s,
                    kind,
                    "create",
                    v["id"].as_str().unwrap_or_default(),
                    None,
                );
            }
            value(r)
        }
        ("PUT", [kind, id]) => {
            let r = s.replace(kind, id, parse(body)?);
            note(s, kind, "update", id, None);
            value(r)
        }
        ("PATCH", [kind, id]) => {
            let r = s.update(kind, id, parse(body)?);
            note(s, kind, "update", id, None);
            value(r)
        }
        ("DELETE", [kind, id]) => {
            let before = Resource::from_collection(kind).and_then(|r| wire_of(s, r, id));
            let r = s.delete(kind, id);
            note(s, kind, "delete", id, before);
            done(r)
        }
        _ => reply(
            StatusCode::NOT_FOUND,
            &json!({"error": format!("no simulator route {method} /sim/{}", rest.join("/"))}),
        ),
    })
}
