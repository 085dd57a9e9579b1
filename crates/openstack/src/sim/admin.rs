//! The simulator's own control API under `/sim/`: mutations, faults,
//! settings, token revocation and counters (docs/openstack.md).

use hyper::{Method, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use super::server::{json as reply, Ctx, Resp};
use super::store::{Fault, InterfaceRequest, MutationError, SettingsPatch};
use super::topology::{Gateway, Route};

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
    route(ctx, method, rest, body).unwrap_or_else(|e| *e)
}

fn route(ctx: &Ctx, method: &Method, rest: &[&str], body: &[u8]) -> Result<Resp, Box<Resp>> {
    let mut s = ctx.lock();
    Ok(match (method.as_str(), rest) {
        ("GET", ["stats"]) => ok(&serde_json::to_value(s.stats()).unwrap_or(Value::Null)),
        ("DELETE", ["stats"]) => {
            s.requests_reset();
            reply(StatusCode::NO_CONTENT, &Value::Null)
        }
        ("GET", ["topology"]) => ok(&serde_json::to_value(s.to_topology()).unwrap_or(Value::Null)),
        ("PUT", ["settings"]) => {
            s.apply_settings(parse::<SettingsPatch>(body)?);
            ok(&serde_json::to_value(&s.settings).unwrap_or(Value::Null))
        }
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
        ("POST", ["routers", id, "routes"]) => done(s.add_route(id, parse::<Route>(body)?)),
        ("DELETE", ["routers", id, "routes"]) => done(s.remove_route(id, &parse::<Route>(body)?)),
        ("POST", ["routers", id, "interfaces"]) => {
            value(s.add_interface(id, &parse::<InterfaceRequest>(body)?))
        }
        ("DELETE", ["routers", id, "interfaces", subnet]) => done(s.remove_interface(id, subnet)),
        ("PUT", ["routers", id, "gateway"]) => {
            done(s.set_gateway(id, parse::<Option<Gateway>>(body)?))
        }
        ("POST", [kind]) => value(s.create(kind, parse(body)?)),
        ("PUT", [kind, id]) => value(s.replace(kind, id, parse(body)?)),
        ("PATCH", [kind, id]) => value(s.update(kind, id, parse(body)?)),
        ("DELETE", [kind, id]) => done(s.delete(kind, id)),
        _ => reply(
            StatusCode::NOT_FOUND,
            &json!({"error": format!("no simulator route {method} /sim/{}", rest.join("/"))}),
        ),
    })
}
