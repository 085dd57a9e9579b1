//! The store as the services answer it: a page of a list, or one resource
//! (`GET …/<collection>/<id>`, a notification's payload), each with its
//! history ([`crate::revision`]) and, for Neutron, the `fields=` selection.

use std::collections::{BTreeMap, HashMap};
use std::time::SystemTime;

use lachesis_planner::Resource;
use serde_json::{Map, Value};

use crate::paging::{self, PageRequest};
use crate::revision::Deleted;
use crate::store::Store;
use crate::topology::Server;
use crate::wire;

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
    body.insert(kind.singular().to_owned(), v);
    Some(Value::Object(body))
}

fn rows<T>(m: &BTreeMap<String, T>) -> Vec<(String, &T)> {
    m.iter().map(|(id, x)| (id.clone(), x)).collect()
}

/// What a list is asked for beyond paging.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Filter<'a> {
    /// Only what changed at or after this instant (Neutron's
    /// `changed_since` when its validation is off, Nova's `changes-since`).
    pub since: Option<SystemTime>,
    /// Nova without `all_tenants` lists only this project's servers.
    pub token_project: &'a str,
}

/// One page of a Neutron list: `changed_since` before paging, `fields=`
/// after rendering, so the paging links still know each item's id.
fn neutron_page<T>(
    store: &Store,
    kind: Resource,
    map: &BTreeMap<String, T>,
    req: &PageRequest,
    filter: Filter<'_>,
    render: impl Fn(&T) -> Value,
) -> Value {
    let fields = fields(&req.query);
    let items = map
        .iter()
        .filter(|(id, _)| {
            filter
                .since
                .is_none_or(|t| store.meta(kind, id).updated_at.at_or_after(t))
        })
        .map(|(id, x)| (id.clone(), x))
        .collect();
    paging::links_style(kind.collection(), items, req, false, |x| {
        select(render(x), &fields)
    })
}

/// A row of Nova's list: a live server, or (under `changes-since`) one
/// deleted since.
enum ServerRow<'a> {
    Live(&'a Server),
    Deleted(&'a Deleted),
}

/// Nova's `servers/detail`: the token's project's servers unless
/// `all_tenants`; with `changes-since`, only those changed since, deleted
/// ones included (as Nova lists them).
fn servers(store: &Store, req: &PageRequest, base: &str, filter: Filter<'_>) -> Value {
    let all = req
        .query
        .iter()
        .any(|(k, v)| k == "all_tenants" && v != "0" && v.to_lowercase() != "false");
    let visible = |s: &Server| all || s.tenant_id == filter.token_project;
    let changed = |at: crate::clock::Stamp| filter.since.is_none_or(|t| at.at_or_after(t));
    let mut items: Vec<(String, ServerRow<'_>)> = store
        .servers
        .iter()
        .filter(|(id, s)| visible(s) && changed(store.meta(Resource::Servers, id).updated_at))
        .map(|(id, s)| (id.clone(), ServerRow::Live(s)))
        .collect();
    if filter.since.is_some() {
        items.extend(
            store
                .revisions
                .deleted_servers()
                .iter()
                .filter(|(_, d)| visible(&d.server) && changed(d.meta.updated_at))
                .map(|(id, d)| (id.clone(), ServerRow::Deleted(d))),
        );
        // Paging needs one order: by id, as every list here.
        items.sort_by(|a, b| a.0.cmp(&b.0));
    }
    let self_base = format!("{base}/compute/v2.1");
    paging::links_style(
        Resource::Servers.collection(),
        items,
        req,
        false,
        |row| match row {
            ServerRow::Live(s) => {
                wire::server(s, &self_base, store.meta(Resource::Servers, &s.id), false)
            }
            ServerRow::Deleted(d) => wire::server(&d.server, &self_base, d.meta, true),
        },
    )
}

/// One page of `resource`'s list as the service answers `req` with
/// `filter`. `base` is `…/r/<region>/<interface>`.
#[must_use]
pub(crate) fn list(
    store: &Store,
    resource: Resource,
    req: &PageRequest,
    base: &str,
    filter: Filter<'_>,
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
            neutron_page(store, resource, &store.networks, req, filter, |n| {
                let subnets: &[String] = by_network.get(n.id.as_str()).map_or(&[], Vec::as_slice);
                wire::network(n, subnets, meta(&n.id))
            })
        }
        Resource::Subnets => neutron_page(store, resource, &store.subnets, req, filter, |x| {
            wire::subnet(x, meta(&x.id))
        }),
        Resource::Ports => neutron_page(store, resource, &store.ports, req, filter, |x| {
            wire::port(x, meta(&x.id))
        }),
        Resource::Routers => neutron_page(store, resource, &store.routers, req, filter, |x| {
            wire::router(x, meta(&x.id))
        }),
        Resource::FloatingIps => {
            neutron_page(store, resource, &store.floatingips, req, filter, |x| {
                wire::floatingip(x, meta(&x.id))
            })
        }
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
        Resource::Servers => servers(store, req, base, filter),
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
    list(store, resource, &req, base, Filter::default())
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
