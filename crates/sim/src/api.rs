//! The `OpenStack` endpoints: Keystone tokens and projects, Neutron v2.0 lists,
//! Nova v2.1 `servers/detail`, Octavia v2 load balancers and amphorae.

use std::time::Duration;

use hyper::{Method, StatusCode};
use serde_json::{json, Value};

use super::paging::{self, PageRequest};
use super::store::{Fault, Store};
use super::topology::{AppCredential, User};
use super::wire;
use crate::http::{json as reply, Ctx, Outcome};
use lachesis_planner::Resource;

/// Where each service lives under `/r/<region>/<interface>/`.
const SERVICE_PATHS: [(&str, &str); 4] = [
    ("identity", "identity/v3"),
    ("network", "network"),
    ("compute", "compute/v2.1"),
    ("load-balancer", "load-balancer"),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Service {
    Identity,
    Network,
    Compute,
    LoadBalancer,
}

impl Service {
    fn catalog_type(self) -> &'static str {
        match self {
            Self::Identity => "identity",
            Self::Network => "network",
            Self::Compute => "compute",
            Self::LoadBalancer => "load-balancer",
        }
    }
}

fn reason(status: StatusCode) -> &'static str {
    status.canonical_reason().unwrap_or("Error")
}

/// Each service's own error body shape.
fn error(service: Service, status: StatusCode, message: &str) -> Outcome {
    let code = status.as_u16();
    let body = match service {
        // keystonemiddleware answers 401s for every service the same way.
        _ if code == 401 => json!({"error": {"code": 401, "title": "Unauthorized",
            "message": "The request you have made requires authentication."}}),
        Service::Identity => {
            json!({"error": {"code": code, "title": reason(status), "message": message}})
        }
        Service::Network => {
            let kind = format!("HTTP{}", reason(status).replace(' ', ""));
            json!({"NeutronError": {"type": kind, "message": message, "detail": ""}})
        }
        Service::Compute => {
            let key = match code {
                400 => "badRequest",
                403 => "forbidden",
                404 => "itemNotFound",
                _ => "computeFault",
            };
            json!({key: {"code": code, "message": message}})
        }
        Service::LoadBalancer => json!({"faultcode": if code < 500 { "Client" } else { "Server" },
            "faultstring": message, "debuginfo": null}),
    };
    Outcome::Reply(reply(status, &body))
}

/// Applies an injected fault, if one is armed for `endpoint`.
async fn fault(ctx: &Ctx, service: Service, endpoint: &str) -> Option<Outcome> {
    let f: Fault = ctx.lock().take_fault(endpoint)?;
    if f.delay_ms > 0 {
        tokio::time::sleep(Duration::from_millis(f.delay_ms)).await;
    }
    if f.drop {
        return Some(Outcome::Drop);
    }
    let status = StatusCode::from_u16(f.status?).ok()?;
    Some(error(
        service,
        status,
        &format!("injected fault on {endpoint}"),
    ))
}

fn catalog(store: &Store, base: &str) -> Value {
    let services: Vec<Value> = SERVICE_PATHS
        .iter()
        .filter(|(t, _)| store.settings.services.iter().any(|s| s == t))
        .map(|(t, path)| {
            let mut endpoints = Vec::new();
            for region in &store.settings.regions {
                for iface in ["public", "internal", "admin"] {
                    endpoints.push(json!({
                        "id": format!("{t}-{region}-{iface}"),
                        "interface": iface, "region": region, "region_id": region,
                        "url": format!("{base}/r/{region}/{iface}/{path}"),
                    }));
                }
            }
            json!({"type": t, "name": t, "id": t, "endpoints": endpoints})
        })
        .collect();
    Value::Array(services)
}

fn domain_matches(domain_id: &str, d: &Value) -> bool {
    // The simulator has no domain objects: a domain's name is its id, and
    // Keystone's default domain is `default` / `Default`.
    let name_of = |id: &str| {
        if id == "default" {
            "Default".to_owned()
        } else {
            id.to_owned()
        }
    };
    d.get("id").and_then(Value::as_str).map_or_else(
        || d.get("name").and_then(Value::as_str) == Some(name_of(domain_id).as_str()),
        |id| id == domain_id,
    )
}

fn find_user<'a>(store: &'a Store, u: &Value) -> Option<&'a User> {
    if let Some(id) = u.get("id").and_then(Value::as_str) {
        return store.users.get(id);
    }
    let name = u.get("name").and_then(Value::as_str)?;
    let domain = u.get("domain")?;
    store
        .users
        .values()
        .find(|x| x.name == name && domain_matches(&x.domain_id, domain))
}

fn find_project(store: &Store, scope: &Value) -> Option<String> {
    let p = scope.get("project")?;
    if let Some(id) = p.get("id").and_then(Value::as_str) {
        return store.projects.contains_key(id).then(|| id.to_owned());
    }
    let name = p.get("name").and_then(Value::as_str)?;
    let domain = p.get("domain")?;
    store
        .projects
        .values()
        .find(|x| x.name == name && domain_matches(&x.domain_id, domain))
        .map(|x| x.id.clone())
}

fn find_app_cred<'a>(store: &'a Store, ac: &Value) -> Option<&'a AppCredential> {
    let secret = ac.get("secret").and_then(Value::as_str)?;
    let cred = if let Some(id) = ac.get("id").and_then(Value::as_str) {
        store.application_credentials.get(id)?
    } else {
        let name = ac.get("name").and_then(Value::as_str)?;
        let user = find_user(store, ac.get("user")?)?;
        store
            .application_credentials
            .values()
            .find(|c| c.name == name && c.user_id == user.id)?
    };
    (cred.secret == secret).then_some(cred)
}

/// `POST /identity/v3/auth/tokens`.
pub(crate) async fn issue_token(ctx: &Ctx, body: &[u8]) -> Outcome {
    ctx.lock().count("auth".into());
    if let Some(out) = fault(ctx, Service::Identity, "auth").await {
        return out;
    }
    let unauthorized = || error(Service::Identity, StatusCode::UNAUTHORIZED, "");
    let Ok(req) = serde_json::from_slice::<Value>(body) else {
        return error(
            Service::Identity,
            StatusCode::BAD_REQUEST,
            "Expecting to find auth in request body.",
        );
    };
    let auth = &req["auth"];
    let identity = &auth["identity"];
    let methods: Vec<&str> = identity["methods"]
        .as_array()
        .map(|m| m.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut store = ctx.lock();
    let (user, project_id, method) = if methods == ["password"] {
        let u = &identity["password"]["user"];
        let Some(user) =
            find_user(&store, u).filter(|x| u["password"].as_str() == Some(x.password.as_str()))
        else {
            return unauthorized();
        };
        let Some(project) = auth.get("scope").and_then(|s| find_project(&store, s)) else {
            return unauthorized();
        };
        (user.clone(), project, "password")
    } else if methods == ["application_credential"] {
        if auth.get("scope").is_some() {
            return unauthorized();
        }
        let Some(cred) = find_app_cred(&store, &identity["application_credential"]) else {
            return unauthorized();
        };
        let Some(user) = store.users.get(&cred.user_id) else {
            return unauthorized();
        };
        (
            user.clone(),
            cred.project_id.clone(),
            "application_credential",
        )
    } else {
        return error(
            Service::Identity,
            StatusCode::BAD_REQUEST,
            "Unsupported or missing auth methods.",
        );
    };
    let (value, expires_at) = store.issue_token(project_id.clone());
    let project = store.projects.get(&project_id).cloned();
    let body = json!({"token": {
        "methods": [method],
        "user": {"id": user.id, "name": user.name, "domain": {"id": user.domain_id, "name": user.domain_id}, "password_expires_at": null},
        "project": project.map(|p| json!({"id": p.id, "name": p.name, "domain": {"id": p.domain_id, "name": p.domain_id}})),
        "roles": [{"id": "r-admin", "name": "admin"}, {"id": "r-reader", "name": "reader"}],
        "is_domain": false,
        "expires_at": humantime::format_rfc3339_micros(expires_at).to_string(),
        "issued_at": humantime::format_rfc3339_micros(std::time::SystemTime::now()).to_string(),
        "audit_ids": [format!("audit-{value}")],
        "catalog": catalog(&store, &ctx.base_url),
    }});
    let mut resp = reply(StatusCode::CREATED, &body);
    if let Ok(h) = hyper::header::HeaderValue::from_str(&value) {
        resp.headers_mut().insert("X-Subject-Token", h);
    }
    Outcome::Reply(resp)
}

/// A request under `/r/<region>/<interface>/`.
pub(crate) struct ApiCall<'a> {
    pub region: &'a str,
    pub iface: &'a str,
    pub rest: &'a [&'a str],
    pub path: &'a str,
    pub query: Vec<(String, String)>,
    pub token: Option<&'a str>,
}

fn route(rest: &[&str]) -> Option<(Service, Resource)> {
    let resource = match rest {
        ["identity", "v3", "projects"] => Resource::Projects,
        ["network", "v2.0", c] => Resource::from_collection(c)
            .filter(|r| r.service() == Service::Network.catalog_type())?,
        ["compute", "v2.1", "servers", "detail"] => Resource::Servers,
        ["load-balancer", "v2", "lbaas", "loadbalancers"] => Resource::LoadBalancers,
        ["load-balancer", "v2", "octavia", "amphorae"] => Resource::Amphorae,
        _ => return None,
    };
    let service = match resource.service() {
        "identity" => Service::Identity,
        "network" => Service::Network,
        "compute" => Service::Compute,
        _ => Service::LoadBalancer,
    };
    Some((service, resource))
}

pub(crate) async fn handle(ctx: &Ctx, method: &Method, call: ApiCall<'_>) -> Outcome {
    let Some((service, resource)) = route(call.rest) else {
        return error(
            Service::Identity,
            StatusCode::NOT_FOUND,
            &format!("no such resource {}", call.path),
        );
    };
    {
        let store = ctx.lock();
        let known = store.settings.regions.iter().any(|r| r == call.region)
            && ["public", "internal", "admin"].contains(&call.iface)
            && store
                .settings
                .services
                .iter()
                .any(|s| s == service.catalog_type());
        if !known {
            return error(
                service,
                StatusCode::NOT_FOUND,
                "The resource could not be found.",
            );
        }
    }
    let endpoint = resource.collection();
    ctx.lock()
        .count(format!("{}/{}/{endpoint}", call.region, call.iface));
    if let Some(out) = fault(ctx, service, endpoint).await {
        return out;
    }
    if method != Method::GET {
        return error(
            service,
            StatusCode::METHOD_NOT_ALLOWED,
            "The simulator serves list calls only.",
        );
    }
    let store = ctx.lock();
    let Some(token_project) = store.check_token(call.token) else {
        return error(service, StatusCode::UNAUTHORIZED, "");
    };
    let req = PageRequest {
        self_url: format!("{}{}", ctx.base_url, call.path),
        query: call.query,
        max: store.settings.page_size,
    };
    let base = format!("{}/r/{}/{}", ctx.base_url, call.region, call.iface);
    let body = list(&store, resource, &req, &base, &token_project);
    Outcome::Reply(reply(StatusCode::OK, &body))
}

/// `resource`'s whole list as an admin token with `all_tenants` would get
/// it unpaged, on a base URL of `http://sim.invalid` (links only).
#[cfg(feature = "generate")]
pub(crate) fn unpaged(store: &Store, resource: Resource) -> Value {
    let base = "http://sim.invalid";
    let req = PageRequest {
        self_url: format!("{base}/{}", resource.collection()),
        query: vec![("all_tenants".to_owned(), "1".to_owned())],
        max: None,
    };
    list(store, resource, &req, base, "")
}

fn list(
    store: &Store,
    resource: Resource,
    req: &PageRequest,
    base: &str,
    token_project: &str,
) -> Value {
    fn rows<T>(m: &std::collections::BTreeMap<String, T>) -> Vec<(String, &T)> {
        m.iter().map(|(id, x)| (id.clone(), x)).collect()
    }
    let name = resource.collection();
    match resource {
        Resource::Networks => {
            // One pass over the subnets, not one per network.
            let mut by_network: std::collections::HashMap<&str, Vec<String>> =
                std::collections::HashMap::new();
            for s in store.subnets.values() {
                by_network
                    .entry(s.network_id.as_str())
                    .or_default()
                    .push(s.id.clone());
            }
            paging::links_style(name, rows(&store.networks), req, false, |n| {
                let subnets: &[String] = by_network.get(n.id.as_str()).map_or(&[], Vec::as_slice);
                wire::network(n, subnets, store.meta(resource, &n.id))
            })
        }
        Resource::Subnets => paging::links_style(name, rows(&store.subnets), req, false, |x| {
            wire::subnet(x, store.meta(resource, &x.id))
        }),
        Resource::Ports => paging::links_style(name, rows(&store.ports), req, false, |x| {
            wire::port(x, store.meta(resource, &x.id))
        }),
        Resource::Routers => paging::links_style(name, rows(&store.routers), req, false, |x| {
            wire::router(x, store.meta(resource, &x.id))
        }),
        Resource::FloatingIps => {
            paging::links_style(name, rows(&store.floatingips), req, false, |x| {
                wire::floatingip(x, store.meta(resource, &x.id))
            })
        }
        Resource::Projects => {
            let self_base = format!("{base}/identity/v3");
            paging::keystone(
                name,
                rows(&store.projects),
                req,
                store.settings.keystone_paging,
                |p| wire::project(p, &self_base),
            )
        }
        Resource::Servers => {
            // Without all_tenants Nova lists only the token's own project.
            let all = req
                .query
                .iter()
                .any(|(k, v)| k == "all_tenants" && v != "0" && v.to_lowercase() != "false");
            let items = store
                .servers
                .iter()
                .filter(|(_, s)| all || s.tenant_id == token_project)
                .map(|(id, s)| (id.clone(), s))
                .collect();
            let self_base = format!("{base}/compute/v2.1");
            paging::links_style(name, items, req, false, |s| {
                wire::server(s, &self_base, store.meta(resource, &s.id), false)
            })
        }
        Resource::LoadBalancers => {
            paging::links_style(name, rows(&store.loadbalancers), req, true, |x| {
                wire::loadbalancer(x, store.meta(resource, &x.id))
            })
        }
        Resource::Amphorae => paging::links_style(name, rows(&store.amphorae), req, true, |x| {
            wire::amphora(x, store.meta(resource, &x.id))
        }),
    }
}
