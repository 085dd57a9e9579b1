//! What list-then-watch needs beyond a full sync (DESIGN §17): one
//! resource by id, and the digest listing of one collection. Same session,
//! token, paging and error counter as a sync.

use lachesis_planner::Resource;
use serde_json::Value;
use url::Url;

use super::session::{ApiError, ListCall};
use super::sync::{join, list_url, Client, SyncError};

/// One collection as a digest lists it ([`Client::list_revisions`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Revisions {
    /// A Neutron list: each object's id and `revision_number` (`None` when
    /// the object has none, which the relay then GETs), nothing else.
    Numbers(Vec<(String, Option<u64>)>),
    /// A list without `revision_number` (Keystone, Nova, Octavia): the
    /// objects as a sync lists them, since a digest can only compare their
    /// content.
    Bodies(Vec<Value>),
}

/// The resource's path below its service's root: the list's path and the
/// id (Nova lists at `servers/detail` and shows at `servers/<id>`).
fn item_path(resource: Resource, id: &str) -> String {
    let list = match resource {
        Resource::Servers => "servers",
        other => other.path(),
    };
    format!("{list}/{id}")
}

/// The metric's and the counters' endpoint label of a GET by id, e.g.
/// `ports/{id}`: bounded, whatever the id.
fn item_endpoint(resource: Resource) -> String {
    format!("{}/{{id}}", resource.collection())
}

impl Client {
    /// GETs one `resource` by `id`, with the same field selection as its
    /// list (so the body is what a sync would have listed): `None` when the
    /// service answers 404 (it is gone).
    pub async fn get_one(&self, resource: Resource, id: &str) -> Result<Option<Value>, SyncError> {
        let base = self.base(resource).await?;
        // A list URL's query (`fields=`, Nova's `all_tenants`) applies to
        // the item too; only its path changes.
        let mut url: Url = list_url(&base, resource)?;
        let item = join(&base, &item_path(resource, id))?;
        url.set_path(item.path());
        if resource == Resource::Servers {
            url.set_query(None);
        }
        let endpoint = item_endpoint(resource);
        let body = self
            .session()
            .show(resource.service(), &endpoint, &url)
            .await?;
        let Some(mut body) = body else {
            return Ok(None);
        };
        match body.get_mut(resource.singular()).map(Value::take) {
            Some(obj @ Value::Object(_)) => Ok(Some(obj)),
            _ => Err(SyncError::Api(ApiError::Body {
                service: resource.service().into(),
                endpoint,
                url: url.to_string(),
                message: format!("no `{}` object", resource.singular()),
            })),
        }
    }

    /// Lists `resource` for a digest: for a Neutron list only `id` and
    /// `revision_number` (`fields=id&fields=revision_number`, a few dozen
    /// bytes an object), every page; for the others the whole list, as a
    /// sync has it.
    pub async fn list_revisions(&self, resource: Resource) -> Result<Revisions, SyncError> {
        let base = self.base(resource).await?;
        let mut url = list_url(&base, resource)?;
        // Neutron's objects carry `revision_number`; the others do not.
        let numbered = resource.service() == "network";
        if numbered {
            url.query_pairs_mut()
                .clear()
                .append_pair("fields", "id")
                .append_pair("fields", "revision_number");
        }
        let call = ListCall {
            service: resource.service(),
            collection: resource.collection(),
            url,
        };
        let mut items = Vec::new();
        self.session()
            .list(&call, |page| items.extend(page))
            .await?;
        if !numbered {
            return Ok(Revisions::Bodies(items));
        }
        Ok(Revisions::Numbers(
            items
                .iter()
                .filter_map(|item| {
                    let id = item.get("id")?.as_str()?.to_owned();
                    Some((id, item.get("revision_number").and_then(Value::as_u64)))
                })
                .collect(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item_paths_follow_each_service() {
        assert_eq!(item_path(Resource::Ports, "p1"), "ports/p1");
        assert_eq!(item_path(Resource::Servers, "s1"), "servers/s1");
        assert_eq!(
            item_path(Resource::LoadBalancers, "l1"),
            "lbaas/loadbalancers/l1"
        );
        assert_eq!(item_path(Resource::Amphorae, "a1"), "octavia/amphorae/a1");
        assert_eq!(item_endpoint(Resource::Ports), "ports/{id}");
    }
}
