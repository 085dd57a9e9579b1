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
/// users and credentials do not.
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

pub(crate) fn handle(ctx: &Ctx, method: &Method, rest: &[&str], body: &[u8]) -> Resp {
    let mut events = Vec::new();
    let host = ctx
        .notifier
        .as_ref()
        .map_or("sim", |n| n.host.as_str())
        .to_owned();
    let answer = route(ctx, method, rest, body, &host, &mut events).unwrap_or_else(|e| *e);
    // Only mutations that succeeded notify, after the change is visible.
    if answer.status().is_success() {
        if let Some(n) = &ctx.notifier {
            for e in &events {
                n.send(e);
            }
        }
    }
    answer
}

fn route(
    ctx: &Ctx,
    method: &Method,
    rest: &[&str],
    body: &[u8],
    host: &str,
    events: &mut Vec<Event>,
) -> Result<Resp, Box<Resp>> {
    let mut s = ctx.lock();
    let mut note = |s: &Store, kind: &str, action: &str, id: &str, before: Option<Value>| {
        events.extend(mutation_event(s, host, kind, action, id, before));
    };
    Ok(match (method.as_str(), rest) {
        ("GET", ["stats"]) => ok(&serde_json::to_value(s.stats()).unwrap_or(Value::Null)),
        ("DELETE", ["stats"]) => {
            s.requests_reset();
            reply(StatusCode::NO_CONTENT, &Value::Null)
        }
        ("GET", ["topology"]) => ok(&serde_json::to_value(s.to_topology()).unwrap_or(Value::Null)),
        ("GET", ["settings"]) => ok(&settings(&s)),
        ("PUT", ["settings"]) => match s.apply_settings(parse::<SettingsPatch>(body)?) {
            Ok(()) => ok(&settings(&s)),
            Err(e) => bad(e),
        },
        ("PUT" | "POST", ["faults"]) => {
            s.add_fault(parse::<Fault>(body)?);
            reply(StatusCode::NO_CONTENT, &Value::Null)
        }
        ("DELETE", ["faults"]) => {
            s.clear_faults();
            reply(StatusCode::NO_CONTENT, &Value::Null)
        }
        ("POST", ["tokens", "revoke"]) => {
            s.revoke_tokens();
            reply(StatusCode::NO_CONTENT, &Value::Null)
        }
        ("POST", ["routers", id, "routes"]) => {
            let r = s.add_route(id, parse::<Route>(body)?);
            note(&s, "routers", "update", id, None);
            done(r)
        }
        ("DELETE", ["routers", id, "routes"]) => {
            let r = s.remove_route(id, &parse::<Route>(body)?);
            note(&s, "routers", "update", id, None);
            done(r)
        }
        ("POST", ["routers", id, "interfaces"]) => {
            let r = s.add_interface(id, &parse::<InterfaceRequest>(body)?);
            if let Ok(port) = &r {
                let port_id = port["id"].as_str().unwrap_or_default();
                let wire = wire_of(&s, Resource::Ports, port_id).unwrap_or_default();
                events.push(notify::router_interface(host, true, id, &wire));
            }
            value(r)
        }
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
            note(&s, "routers", "update", id, None);
            done(r)
        }
        ("POST", [kind]) => {
            let r = s.create(kind, parse(body)?);
            if let Ok(v) = &r {
                note(
                    &s,
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
            note(&s, kind, "update", id, None);
            value(r)
        }
        ("PATCH", [kind, id]) => {
            let r = s.update(kind, id, parse(body)?);
            note(&s, kind, "update", id, None);
            value(r)
        }
        ("DELETE", [kind, id]) => {
            let before = Resource::from_collection(kind).and_then(|r| wire_of(&s, r, id));
            let r = s.delete(kind, id);
            note(&s, kind, "delete", id, before);
            done(r)
        }
        _ => reply(
            StatusCode::NOT_FOUND,
            &json!({"error": format!("no simulator route {method} /sim/{}", rest.join("/"))}),
        ),
    })
}
