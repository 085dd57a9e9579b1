//! Following list pagination to the end (DESIGN §5), pure parts.

use serde_json::Value;
use url::Url;

/// What a page says about the next one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Next {
    /// The `href` of the `rel=next` link, as the service wrote it.
    Url(String),
    /// No next link: this page is the last.
    End,
}

/// A page that cannot be trusted as part of a complete list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PageError {
    /// The page is not `{"<collection>": [...]}`: the URL served something
    /// other than the list (a proxy page, an API version mismatch).
    #[error("body has no `{collection}` array")]
    MissingCollection {
        /// The top-level key the list was expected under, e.g. `ports`.
        collection: String,
    },
    /// Keystone before 2025.1 does not page: it cuts a list at its
    /// `list_limit` and says `"truncated": true`. The rest is unreachable,
    /// so the list is refused rather than taken as complete.
    #[error("Keystone answered \"truncated\": true: the list is incomplete (raise [DEFAULT] list_limit or upgrade Keystone to 2025.1+)")]
    Truncated,
    /// The pagination links are not the documented shape (or a `next`
    /// link cannot be resolved against the first URL), so whether more pages
    /// exist is unknown.
    #[error("`{field}` is not a list of links / a link: {found}")]
    BadLinks {
        /// Where the links were read: `<collection>_links`, `links.next`,
        /// or `next` for an unresolvable `href`.
        field: String,
        /// The offending JSON (or `href`) as received.
        found: String,
    },
}

/// The page's items, taken out of the page (the rest of it, links and
/// all, is read by [`next`] before).
pub(crate) fn take_items(body: &mut Value, collection: &str) -> Result<Vec<Value>, PageError> {
    match body.get_mut(collection).map(Value::take) {
        Some(Value::Array(items)) => Ok(items),
        _ => Err(PageError::MissingCollection {
            collection: collection.to_owned(),
        }),
    }
}

/// The next link: `<collection>_links[rel=next]` (Neutron, Nova, Octavia) or
/// `links.next` (Keystone). Keystone's `truncated` flag is an error.
pub(crate) fn next(body: &Value, collection: &str) -> Result<Next, PageError> {
    if body.get("truncated").and_then(Value::as_bool) == Some(true) {
        return Err(PageError::Truncated);
    }
    let field = format!("{collection}_links");
    if let Some(links) = body.get(&field) {
        let arr = links.as_array().ok_or_else(|| PageError::BadLinks {
            field: field.clone(),
            found: links.to_string(),
        })?;
        for link in arr {
            if link.get("rel").and_then(Value::as_str) == Some("next") {
                let href = link.get("href").and_then(Value::as_str).ok_or_else(|| {
                    PageError::BadLinks {
                        field: field.clone(),
                        found: link.to_string(),
                    }
                })?;
                return Ok(Next::Url(href.to_owned()));
            }
        }
        return Ok(Next::End);
    }
    match body.get("links").and_then(|l| l.get("next")) {
        None | Some(Value::Null) => Ok(Next::End),
        Some(Value::String(s)) => Ok(Next::Url(s.clone())),
        Some(other) => Err(PageError::BadLinks {
            field: "links.next".into(),
            found: other.to_string(),
        }),
    }
}

/// One list call's page as [`Session`](super::Session) reads it: the
/// items of `body` (`{"<collection>": [...]}`), then what it says of the
/// next page (the `href` of its next link, `None` on the last page).
///
/// Public (hidden) for the fuzz targets (`crates/fuzzing`), which feed it
/// arbitrary bodies; it is not part of this crate's API.
#[doc(hidden)]
pub fn read_page(
    mut body: Value,
    collection: &str,
) -> Result<(Vec<Value>, Option<String>), PageError> {
    let next = next(&body, collection);
    let items = take_items(&mut body, collection)?;
    match next? {
        Next::Url(href) => Ok((items, Some(href))),
        Next::End => Ok((items, None)),
    }
}

/// Where to fetch the next page from.
///
/// Only the path and query of `href` are kept; scheme, host and port come
/// from the catalog endpoint. Services behind a TLS-terminating proxy often
/// write their own `http://internal-name` into links, and a token must never
/// be sent to a host the catalog did not name. Query parameters of the first
/// request that the link dropped (Octavia drops filters) are re-applied,
/// every value of a repeated one (`fields=id&fields=name`) included; a
/// parameter the link kept keeps the link's values (`marker`, `limit`).
///
/// Public (hidden) for the fuzz targets (`crates/fuzzing`), which check
/// that no `href` moves the origin; it is not part of this crate's API.
#[doc(hidden)]
#[must_use]
pub fn next_url(first: &Url, href: &str) -> Option<Url> {
    let parsed = first.join(href).ok()?;
    let mut out = first.clone();
    out.set_path(parsed.path());
    let mut pairs: Vec<(String, String)> = parsed.query_pairs().into_owned().collect();
    let kept: Vec<String> = pairs.iter().map(|(k, _)| k.clone()).collect();
    for (k, v) in first.query_pairs() {
        if !kept.iter().any(|key| *key == k) {
            pairs.push((k.into_owned(), v.into_owned()));
        }
    }
    if pairs.is_empty() {
        out.set_query(None);
    } else {
        out.query_pairs_mut().clear().extend_pairs(pairs);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn neutron_style_links() {
        let body = json!({"ports": [], "ports_links": [
            {"rel": "previous", "href": "http://x/v2.0/ports?marker=a&page_reverse=True"},
            {"rel": "next", "href": "http://x/v2.0/ports?limit=2&marker=b"}]});
        assert_eq!(
            next(&body, "ports").unwrap(),
            Next::Url("http://x/v2.0/ports?limit=2&marker=b".into())
        );
        let last = json!({"ports": [], "ports_links": [{"rel": "previous", "href": "http://x"}]});
        assert_eq!(next(&last, "ports").unwrap(), Next::End);
        assert_eq!(next(&json!({"ports": []}), "ports").unwrap(), Next::End);
    }

    #[test]
    fn keystone_links_and_truncation() {
        let body = json!({"projects": [], "links": {"self": "s", "previous": null, "next": "http://k/v3/projects?marker=p"}});
        assert_eq!(
            next(&body, "projects").unwrap(),
            Next::Url("http://k/v3/projects?marker=p".into())
        );
        let end = json!({"projects": [], "links": {"self": "s", "previous": null, "next": null}});
        assert_eq!(next(&end, "projects").unwrap(), Next::End);
        let truncated = json!({"projects": [], "links": {"next": null}, "truncated": true});
        assert_eq!(
            next(&truncated, "projects").unwrap_err(),
            PageError::Truncated
        );
    }

    #[test]
    fn next_url_keeps_catalog_origin_and_reapplies_dropped_filters() {
        let first =
            Url::parse("https://lb.example:9876/v2/octavia/amphorae?limit=2&status=READY").unwrap();
        let next = next_url(
            &first,
            "http://10.0.0.5:9876/v2/octavia/amphorae?limit=2&marker=m1",
        )
        .unwrap();
        assert_eq!(
            next.as_str(),
            "https://lb.example:9876/v2/octavia/amphorae?limit=2&marker=m1&status=READY"
        );
    }

    #[test]
    fn next_url_reapplies_every_value_of_a_dropped_repeated_parameter() {
        let first = Url::parse("http://n/v2.0/ports?fields=id&fields=mac_address&limit=2").unwrap();
        let dropped = next_url(&first, "http://n/v2.0/ports?limit=2&marker=p2").unwrap();
        assert_eq!(
            dropped.as_str(),
            "http://n/v2.0/ports?limit=2&marker=p2&fields=id&fields=mac_address"
        );
        let kept = next_url(
            &first,
            "http://n/v2.0/ports?fields=id&fields=mac_address&limit=2&marker=p2",
        )
        .unwrap();
        assert_eq!(
            kept.as_str(),
            "http://n/v2.0/ports?fields=id&fields=mac_address&limit=2&marker=p2"
        );
    }
}
