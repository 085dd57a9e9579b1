//! Limit/marker paging as each service does it, links included.

use serde_json::{json, Map, Value};

use super::topology::KeystonePaging;

/// The request's paging parameters and the URL to build links from.
#[derive(Debug, Clone)]
pub struct PageRequest {
    /// Absolute URL of the collection, without query.
    pub self_url: String,
    /// Every query parameter of the request, in order.
    pub query: Vec<(String, String)>,
    /// The server's `pagination_max_limit`.
    pub max: Option<usize>,
}

impl PageRequest {
    fn param(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn limit(&self) -> Option<usize> {
        let asked = self
            .param("limit")
            .and_then(|l| l.parse::<usize>().ok())
            .filter(|l| *l > 0);
        match (asked, self.max) {
            (Some(a), Some(m)) => Some(a.min(m)),
            (a, m) => a.or(m),
        }
    }

    fn link(&self, keep_filters: bool, limit: usize, marker: &str, reverse: bool) -> String {
        let mut q = url::form_urlencoded::Serializer::new(String::new());
        if keep_filters {
            for (k, v) in &self.query {
                if !matches!(k.as_str(), "limit" | "marker" | "page_reverse") {
                    q.append_pair(k, v);
                }
            }
        }
        q.append_pair("limit", &limit.to_string());
        q.append_pair("marker", marker);
        if reverse {
            q.append_pair("page_reverse", "True");
        }
        format!("{}?{}", self.self_url, q.finish())
    }
}

struct Page {
    items: Vec<Value>,
    /// The ids of the page's first and last items, kept apart from the
    /// rendered items because `fields=` may have left `id` out of them.
    first: Option<String>,
    last: Option<String>,
    limit: Option<usize>,
    full: bool,
    more: bool,
}

/// `items` must be sorted by id (the services' default sort key for paging).
/// Only the page is rendered: rendering whole lists per page made paging
/// quadratic in the list size.
fn cut<T>(items: Vec<(String, T)>, req: &PageRequest, render: impl Fn(T) -> Value) -> Page {
    let after: Vec<_> = match req.param("marker") {
        Some(m) => items
            .into_iter()
            .filter(|(id, _)| id.as_str() > m)
            .collect(),
        None => items,
    };
    let limit = req.limit();
    let total = after.len();
    let take = limit.unwrap_or(total).min(total);
    let mut first = None;
    let mut last = None;
    let items: Vec<Value> = after
        .into_iter()
        .take(take)
        .map(|(id, v)| {
            if first.is_none() {
                first = Some(id.clone());
            }
            last = Some(id);
            render(v)
        })
        .collect();
    Page {
        full: limit.is_some_and(|l| items.len() == l),
        more: take < total,
        items,
        first,
        last,
        limit,
    }
}

/// Neutron, Nova and Octavia: `{"<c>": [...], "<c>_links": [...]}`. A next
/// link is emitted whenever the page is full (so the last page may be
/// empty); Octavia's next link drops the request's filters.
#[must_use]
pub fn links_style<T>(
    collection: &str,
    items: Vec<(String, T)>,
    req: &PageRequest,
    drops_filters: bool,
    render: impl Fn(T) -> Value,
) -> Value {
    let page = cut(items, req, render);
    let mut links = Vec::new();
    if let Some(limit) = page.limit {
        if let (true, Some(last)) = (page.full, &page.last) {
            links
                .push(json!({"rel": "next", "href": req.link(!drops_filters, limit, last, false)}));
        }
        if let (Some(_), Some(first)) = (req.param("marker"), &page.first) {
            links.push(
                json!({"rel": "previous", "href": req.link(!drops_filters, limit, first, true)}),
            );
        }
    }
    let mut body = Map::new();
    body.insert(collection.to_owned(), Value::Array(page.items));
    if !links.is_empty() {
        body.insert(format!("{collection}_links"), Value::Array(links));
    }
    Value::Object(body)
}

/// Keystone: `{"projects": [...], "links": {"self", "previous", "next"}}`,
/// or the pre-2025.1 `"truncated": true` answer.
#[must_use]
pub fn keystone<T>(
    collection: &str,
    items: Vec<(String, T)>,
    req: &PageRequest,
    mode: KeystonePaging,
    render: impl Fn(T) -> Value,
) -> Value {
    let self_link = json!(req.self_url);
    match mode {
        KeystonePaging::None => {
            let all: Vec<Value> = items.into_iter().map(|(_, v)| render(v)).collect();
            json!({collection: all, "links": {"self": self_link, "previous": null, "next": null}})
        }
        KeystonePaging::Truncated => {
            // list_limit caps the answer and there is no way to ask for more.
            let limit = req.max.unwrap_or(usize::MAX);
            let truncated = items.len() > limit;
            let page: Vec<Value> = items
                .into_iter()
                .take(limit)
                .map(|(_, v)| render(v))
                .collect();
            let mut body = json!({collection: page, "links": {"self": self_link, "previous": null, "next": null}});
            if truncated {
                body["truncated"] = json!(true);
            }
            body
        }
        KeystonePaging::Links => {
            let page = cut(items, req, render);
            let next = match (page.limit, &page.last) {
                (Some(limit), Some(last)) if page.more => json!(req.link(true, limit, last, false)),
                _ => Value::Null,
            };
            json!({collection: page.items, "links": {"self": self_link, "previous": null, "next": next}})
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(n: usize) -> Vec<(String, Value)> {
        (0..n)
            .map(|i| (format!("id{i:02}"), json!({"id": format!("id{i:02}")})))
            .collect()
    }

    fn req(query: &[(&str, &str)], max: Option<usize>) -> PageRequest {
        PageRequest {
            self_url: "http://s/v2.0/ports".into(),
            query: query
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
            max,
        }
    }

    #[test]
    fn full_last_page_still_links_next_and_the_next_is_empty() {
        let body = links_style(
            "ports",
            items(4),
            &req(&[("limit", "2"), ("marker", "id01")], None),
            false,
            |v| v,
        );
        assert_eq!(body["ports"].as_array().unwrap().len(), 2);
        assert_eq!(
            body["ports_links"][0]["href"],
            "http://s/v2.0/ports?limit=2&marker=id03"
        );
        let after = links_style(
            "ports",
            items(4),
            &req(&[("limit", "2"), ("marker", "id03")], None),
            false,
            |v| v,
        );
        assert_eq!(after["ports"], json!([]));
        assert_eq!(after.get("ports_links"), None);
    }

    #[test]
    fn octavia_style_next_drops_filters() {
        let body = links_style(
            "amphorae",
            items(3),
            &req(&[("status", "READY")], Some(2)),
            true,
            |v| v,
        );
        assert_eq!(
            body["amphorae_links"][0]["href"],
            "http://s/v2.0/ports?limit=2&marker=id01"
        );
        let kept = links_style(
            "ports",
            items(3),
            &req(&[("status", "READY")], Some(2)),
            false,
            |v| v,
        );
        assert_eq!(
            kept["ports_links"][0]["href"],
            "http://s/v2.0/ports?status=READY&limit=2&marker=id01"
        );
    }

    #[test]
    fn keystone_modes() {
        let t = keystone(
            "projects",
            items(3),
            &req(&[], Some(2)),
            KeystonePaging::Truncated,
            |v| v,
        );
        assert_eq!(t["truncated"], json!(true));
        let l = keystone(
            "projects",
            items(3),
            &req(&[], Some(2)),
            KeystonePaging::Links,
            |v| v,
        );
        assert_eq!(
            l["links"]["next"],
            "http://s/v2.0/ports?limit=2&marker=id01"
        );
        let last = keystone(
            "projects",
            items(3),
            &req(&[("marker", "id01")], Some(2)),
            KeystonePaging::Links,
            |v| v,
        );
        assert_eq!(last["links"]["next"], Value::Null);
    }
}
