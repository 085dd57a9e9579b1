//! The `OpenStack` endpoints: Keystone tokens and projects, Neutron v2.0,
//! Nova v2.1 `servers/detail`, Octavia v2 load balancers and amphorae — each
//! list, and each resource by id.

use std::time::{Duration, SystemTime};

use hyper::body::Body as _;
use hyper::{Method, StatusCode};
use serde_json::{json, Value};

use super::paging::PageRequest;
use super::store::{Fault, Store};
use super::topology::{AppCredential, User};
use crate::clock::parse_time;
use crate::http::{json as reply, Ctx, Outcome};
use crate::{render, stats};
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

/// The application credential a request names (by id, or by name and
/// user), whatever secret it gives.
fn named_app_cred<'a>(store: &'a Store, ac: &Value) -> Option<&'a AppCredential> {
    if let Some(id) = ac.get("id").and_then(Value::as_str) {
        return store.application_credentials.get(id);
    }
    let name = ac.get("name").and_then(Value::as_str)?;
    let user = find_user(store, ac.get("user")?)?;
    store
        .application_credentials
        .values()
        .find(|c| c.name == name && c.user_id == user.id)
}

fn find_app_cred<'a>(store: &'a Store, ac: &Value) -> Option<&'a AppCredential> {
    let secret = ac.get("secret").and_then(Value::as_str)?;
    named_app_cred(store, ac).filter(|c| c.secret == secret)
}

/// The client a token request speaks for (`/sim/stats`), right secret or
/// not: the user or application credential it names.
fn claimed_client(store: &Store, req: &Value) -> String {
    let identity = &req["auth"]["identity"];
    let named = if let Some(u) = identity.get("password").and_then(|p| p.get("user")) {
        find_user(store, u).map(|u| stats::user(&u.id))
    } else if let Some(ac) = identity.get("application_credential") {
        named_app_cred(store, ac).map(|c| stats::application_credential(&c.id))
    } else {
        None
    };
    named.unwrap_or_else(|| stats::ANONYMOUS.to_owned())
}

/// The response body's length: what the client receives, byte for byte
/// (the simulator does not compress).
fn body_len(out: &Outcome) -> u64 {
    match out {
        Outcome::Reply(r) => r.body().size_hint().exact().unwrap_or(0),
        Outcome::Drop => 0,
    }
}

/// `POST /identity/v3/auth/tokens`, counted for `/sim/stats`.
pub(crate) async fn issue_token(ctx: &Ctx, body: &[u8]) -> Outcome {
    let req = serde_json::from_slice::<Value>(body).ok();
    let client = req.as_ref().map_or_else(
        || stats::ANONYMOUS.to_owned(),
        |r| claimed_client(&ctx.lock(), r),
    );
    ctx.lock().stats.count("auth", &client);
    let out = authenticate(ctx, req, &client).await;
    ctx.lock().stats.sent("auth", &client, body_len(&out));
    out
}

async fn authenticate(ctx: &Ctx, req: Option<Value>, client: &str) -> Outcome {
    if let Some(out) = fault(ctx, Service::Identity, "auth").await {
        return out;
    }
    let unauthorized = || error(Service::Identity, StatusCode::UNAUTHORIZED, "");
    let Some(req) = req else {
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
    let (value, expires_at) = store.issue_token(project_id.clone(), client.to_owned());
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

/// What a request under `/r/<region>/<interface>/` asks for: a list, or
/// one resource by id.
struct Target<'a> {
    service: Service,
    resource: Resource,
    id: Option<&'a str>,
}

impl Target<'_> {
    /// The name requests are counted and faults matched by: the list's
    /// collection, or `<collection>/{id}` for a GET by id.
    fn endpoint(&self) -> String {
        match self.id {
            None => self.resource.collection().to_owned(),
            Some(_) => format!("{}/{{id}}", self.resource.collection()),
        }
    }
}

fn route<'a>(rest: &[&'a str]) -> Option<Target<'a>> {
    let neutron = |c: &str| {
        Resource::from_collection(c).filter(|r| r.service() == Service::Network.catalog_type())
    };
    let (resource, id) = match *rest {
        ["identity", "v3", "projects"] => (Resource::Projects, None),
        ["identity", "v3", "projects", id] => (Resource::Projects, Some(id)),
        ["network", "v2.0", c] => (neutron(c)?, None),
        ["network", "v2.0", c, id] => (neutron(c)?, Some(id)),
        ["compute", "v2.1", "servers", "detail"] => (Resource::Servers, None),
        ["compute", "v2.1", "servers", id] => (Resource::Servers, Some(id)),
        ["load-balancer", "v2", "lbaas", "loadbalancers"] => (Resource::LoadBalancers, None),
        ["load-balancer", "v2", "lbaas", "loadbalancers", id] => {
            (Resource::LoadBalancers, Some(id))
        }
        ["load-balancer", "v2", "octavia", "amphorae"] => (Resource::Amphorae, None),
        ["load-balancer", "v2", "octavia", "amphorae", id] => (Resource::Amphorae, Some(id)),
        _ => return None,
    };
    let service = match resource.service() {
        "identity" => Service::Identity,
        "network" => Service::Network,
        "compute" => Service::Compute,
        _ => Service::LoadBalancer,
    };
    Some(Target {
        service,
        resource,
        id,
    })
}

/// Each service's answer to a GET of an id it does not have, as Neutron 21
/// and Keystone 22 word it (checked on the real-cloud tier) and Nova and
/// Octavia document it.
fn not_found(resource: Resource, id: &str) -> Outcome {
    let body = match resource {
        Resource::Networks => neutron_error(
            "NetworkNotFound",
            &format!("Network {id} could not be found."),
        ),
        Resource::Subnets => neutron_error(
            "SubnetNotFound",
            &format!("Subnet {id} could not be found."),
        ),
        Resource::Ports => neutron_error("PortNotFound", &format!("Port {id} could not be found.")),
        // Neutron's router and floating-IP messages have no final stop.
        Resource::Routers => {
            neutron_error("RouterNotFound", &format!("Router {id} could not be found"))
        }
        Resource::FloatingIps => neutron_error(
            "FloatingIPNotFound",
            &format!("Floating IP {id} could not be found"),
        ),
        Resource::Projects => json!({"error": {"code": 404, "title": "Not Found",
            "message": format!("Could not find project: {id}.")}}),
        Resource::Servers => json!({"itemNotFound": {"code": 404,
            "message": format!("Instance {id} could not be found.")}}),
        Resource::LoadBalancers => octavia_not_found("Load Balancer", id),
        Resource::Amphorae => octavia_not_found("Amphora", id),
    };
    Outcome::Reply(reply(StatusCode::NOT_FOUND, &body))
}

fn neutron_error(kind: &str, message: &str) -> Value {
    json!({"NeutronError": {"type": kind, "message": message, "detail": ""}})
}

fn octavia_not_found(what: &str, id: &str) -> Value {
    json!({"faultcode": "Client", "faultstring": format!("{what} {id} not found."), "debuginfo": null})
}

pub(crate) async fn handle(ctx: &Ctx, method: &Method, call: ApiCall<'_>) -> Outcome {
    let Some(target) = route(call.rest) else {
        return error(
            Service::Identity,
            StatusCode::NOT_FOUND,
            &format!("no such resource {}", call.path),
        );
    };
    let service = target.service;
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
    let key = format!("{}/{}/{}", call.region, call.iface, target.endpoint());
    let client = ctx.lock().client_of(call.token);
    ctx.lock().stats.count(&key, &client);
    let out = serve(ctx, method, call, &target).await;
    ctx.lock().stats.sent(&key, &client, body_len(&out));
    out
}

/// A call the catalog knows, after it was counted.
async fn serve(ctx: &Ctx, method: &Method, call: ApiCall<'_>, target: &Target<'_>) -> Outcome {
    let service = target.service;
    if let Some(out) = fault(ctx, service, &target.endpoint()).await {
        return out;
    }
    if method != Method::GET {
        return error(
            service,
            StatusCode::METHOD_NOT_ALLOWED,
            "The simulator serves GET calls only.",
        );
    }
    let store = ctx.lock();
    let Some(token_project) = store.check_token(call.token) else {
        return error(service, StatusCode::UNAUTHORIZED, "");
    };
    let base = format!("{}/r/{}/{}", ctx.base_url, call.region, call.iface);
    if let Some(id) = target.id {
        return match render::shown(&store, target.resource, id, &base, &call.query) {
            Some(body) => Outcome::Reply(reply(StatusCode::OK, &body)),
            None => not_found(target.resource, id),
        };
    }
    let since = match since(&store, target.resource, &call.query) {
        Ok(since) => since,
        Err(message) => return error(service, StatusCode::BAD_REQUEST, &message),
    };
    let req = PageRequest {
        self_url: format!("{}{}", ctx.base_url, call.path),
        query: call.query,
        max: store.settings.page_size,
    };
    let filter = render::Filter {
        since,
        token_project: &token_project,
    };
    let body = render::list(&store, target.resource, &req, &base, filter);
    Outcome::Reply(reply(StatusCode::OK, &body))
}

/// The instant a list asks to start from — Neutron's `changed_since`,
/// Nova's `changes-since` — or the message of the service's 400.
fn since(
    store: &Store,
    resource: Resource,
    query: &[(String, String)],
) -> Result<Option<SystemTime>, String> {
    let (key, service) = match resource.service() {
        "network" => ("changed_since", Service::Network),
        "compute" => ("changes-since", Service::Compute),
        _ => return Ok(None),
    };
    let Some((_, text)) = query.iter().find(|(k, _)| k == key) else {
        return Ok(None);
    };
    if service == Service::Network && store.settings.neutron_filter_validation {
        // Neutron 21's answer under its default filter_validation = True.
        return Err("['changed_since'] is invalid attribute for filtering".into());
    }
    parse_time(text).map(Some).map_err(|e| match service {
        Service::Compute => format!(
            "Invalid input for query parameters changes-since. Value: {text}. '{text}' is not a 'date-time'"
        ),
        _ => format!("Invalid input for {key}: {e}"),
    })
}
