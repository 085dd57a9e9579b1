//! The store as the services answer it: a page of a list, or one resource
//! (`GET …/<collection>/<id>`, a notification's payload), each with its
//! history ([`crate::revision`]) and, for Neutron, the `fields=` selection.

use std::collections::{BTreeMap, HashMap};

use lachesis_planner::Resource;
use serde_json::{Map, Value};

use crate::paging::{self, PageRequest};
use crate::store::Store;
use crate::wire;

/// The key one resource is wrapped in (`{"port": {...}}`), as each service
/// names it.
#[must_use]
pub(crate) fn singular(r: Resource) -> &'static str {
    match r {
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

/// Whether Neutron serves it (and so honours `fields=`).
fn neutron(r: Resource) -> bool {
    r.service() == "network"
}

/// The `fields=` of a request (repeated, as Neutron takes them); empty
/// means every field.
#[must_use]
pub(crate) fn fields(query: &[(String, String)]) -> Vec<String> {
    query
        .iter()
        .filter(|(k, _)| k == "fields")
        .map(|(_, v)| v.clone())
        .collect()
}

/// Keeps only `fields` of a rendered resource (all when empty). Neutron
/// answers exactly the fields asked for, `id` included only when asked; a
/// name it does not know is left out, not refused.
#[must_use]
pub(crate) fn select(v: Value, fields: &[String]) -> Value {
    if fields.is_empty() {
        return v;
    }
    let Value::Object(all) = v else { return v };
    let kept: Map<String, Value> = all
        .into_iter()
        .filter(|(k, _)| fields.iter().any(|f| f == k))
        .collect();
    Value::Object(kept)
}

/// One resource as its service shows it (unwrapped), or `None` when there
/// is none with that id. `base` is the service root links are built on
/// (`…/r/<region>/<interface>`); a deleted server is not shown (Nova
/// answers 404 for it).
#[must_use]
pub(crate) fn one(store: &Store, kind: Resource, id: &str, base: &str) -> Option<Value> {
    let m = store.meta(kind, id);
    Some(match kind {
        Resource::Networks => {
            let n = store.networks.get(id)?;
            let subnets: Vec<String> = store
                .subnets
                .values()
                .filter(|x| x.network_id == id)
                .map(|x| x.id.clone())
                .collect();
            wire::network(n, &subnets, m)
        }
        Resource::Subnets => wire::subnet(store.subnets.get(id)?, m),
        Resource::Ports => wire::port(store.ports.get(id)?, m),
        Resource::Routers => wire::router(store.routers.get(id)?, m),
        Resource::FloatingIps => wire::floatingip(store.floatingips.get(id)?, m),
        Resource::Projects => {
            wire::project(store.projects.get(id)?, &format!("{base}/identity/v3"))
        }
        Resource::Servers => wire::server(
            store.servers.get(id)?,
            &format!("{base}/compute/v2.1"),
            m,
            false,
        ),
        Resource::LoadBalancers => wire::loadbalancer(store.loadbalancers.get(id)?, m),
        Resource::Amphorae => wire::amphora(store.amphorae.get(id)?, m),
    })
}

/// `GET …/<collection>/<id>`'s body: `{"<singular>": {...}}`, with
/// Neutron's `fields=` applied.
#[must_use]
pub(crate) fn shown(
    store: &Store,
    kind: Resource,
    id: &str,
    base: &str,
    query: &[(String, String)],
) -> Option<Value> {
    let mut v = one(store, kind, id, base)?;
    if neutron(kind) {
        v = select(v, &fields(query));
    }
    let mut body = Map::new();
    body.insert(singular(kind).to_owned(), v);
    Some(Value::Object(body))
}

fn rows<T>(m: &BTreeMap<String, T>) -> Vec<(String, &T)> {
    m.iter().map(|(id, x)| (id.clone(), x)).collect()
}

/// One page of a Neutron list: `fields=` applied after rendering, so the
/// paging links still know each item's id.
fn neutron_page<T>(
    kind: Resource,
    items: Vec<(String, &T)>,
    req: &PageRequest,
    render: impl Fn(&T) -> Value,
) -> Value {
    let fields = fields(&req.query);
    paging::links_style(kind.collection(), items, req, false, |x| {
        select(render(x), &fields)
    })
}

/// One page of `resource`'s list as the service answers `req`. `base` is
/// `…/r/<region>/<interface>`; `token_project` limits Nova's list without
/// `all_tenants`.
#[must_use]
pub(crate) fn list(
    store: &Store,
    resource: Resource,
    req: &PageRequest,
    base: &str,
    token_project: &str,
) -> Value {
    let meta = |id: &str| store.meta(resource, id);
    match resource {
        Resource::Networks => {
            // One pass over the subnets, not one per network.
            let mut by_network: HashMap<&str, Vec<String>> = HashMap::new();
            for s in store.subnets.values() {
                by_network
                    .entry(s.network_id.as_str())
                    .or_default()
                    .push(s.id.clone());
            }
            neutron_page(resource, rows(&store.networks), req, |n| {
                let subnets: &[String] = by_network.get(n.id.as_str()).map_or(&[], Vec::as_slice);
                wire::network(n, subnets, meta(&n.id))
            })
        }
        Resource::Subnets => neutron_page(resource, rows(&store.subnets), req, |x| {
            wire::subnet(x, meta(&x.id))
        }),
        Resource::Ports => neutron_page(resource, rows(&store.ports), req, |x| {
            wire::port(x, meta(&x.id))
        }),
        Resource::Routers => neutron_page(resource, rows(&store.routers), req, |x| {
            wire::router(x, meta(&x.id))
        }),
        Resource::FloatingIps => neutron_page(resource, rows(&store.floatingips), req, |x| {
            wire::floatingip(x, meta(&x.id))
        }),
        Resource::Projects => {
            let self_base = format!("{base}/identity/v3");
            paging::keystone(
                resource.collection(),
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
            paging::links_style(resource.collection(), items, req, false, |s| {
                wire::server(s, &self_base, meta(&s.id), false)
            })
        }
        Resource::LoadBalancers => paging::links_style(
            resource.collection(),
            rows(&store.loadbalancers),
            req,
            true,
            |x| wire::loadbalancer(x, meta(&x.id)),
        ),
        Resource::Amphorae => paging::links_style(
            resource.collection(),
            rows(&store.amphorae),
            req,
            true,
            |x| wire::amphora(x, meta(&x.id)),
        ),
    }
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn select_keeps_exactly_the_fields_asked_for() {
        let v = json!({"id": "p", "name": "n", "mac_address": "m"});
        let f = |names: &[&str]| names.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            select(v.clone(), &f(&["name", "nope"])),
            json!({"name": "n"})
        );
        assert_eq!(select(v.clone(), &[]), v);
    }
}
