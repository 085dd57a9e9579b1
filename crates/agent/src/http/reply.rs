//! Response builders shared by both listeners: every answer has a content
//! type, errors are one line of text saying what to do differently.

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use hyper::{Method, Response, StatusCode};
use serde::Serialize;

/// What a route answers.
pub type Reply = Response<Full<Bytes>>;

/// `Content-Type` of plain-text answers.
pub(crate) const TEXT: &str = "text/plain; charset=utf-8";
/// `Content-Type` of JSON answers.
pub(crate) const JSON: &str = "application/json";
/// `Content-Type` of the browser pages.
pub(crate) const HTML: &str = "text/html; charset=utf-8";

/// A response with `status`, `content_type` and `body`.
pub(crate) fn reply(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Reply {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// One line (or a few) of text; a newline is added when missing.
pub(crate) fn text(status: StatusCode, body: impl Into<String>) -> Reply {
    let mut body = body.into();
    if !body.ends_with('\n') {
        body.push('\n');
    }
    reply(status, TEXT, body)
}

/// `value` as pretty JSON with a trailing newline (200).
pub(crate) fn json(value: &impl Serialize) -> Reply {
    match serde_json::to_string_pretty(value) {
        Ok(mut body) => {
            body.push('\n');
            reply(StatusCode::OK, JSON, body)
        }
        Err(e) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("could not render JSON: {e}"),
        ),
    }
}

/// 404 listing the paths this listener serves.
pub(crate) fn not_found(path: &str, paths: &[&str]) -> Reply {
    text(
        StatusCode::NOT_FOUND,
        format!(
            "no page at {path}; this listener serves {}",
            paths.join(", ")
        ),
    )
}

/// Which methods a path accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verb {
    /// `GET` (and `HEAD`, answered with the headers only).
    Read,
    /// [`Verb::Read`] and `PUT`: a setting read and written at one path.
    ReadPut,
}

impl Verb {
    /// A 405 with an `Allow` header when `method` is not accepted.
    pub(crate) fn refuse(self, method: &Method) -> Option<Reply> {
        let (ok, allow) = match self {
            Verb::Read => (method == Method::GET || method == Method::HEAD, "GET, HEAD"),
            Verb::ReadPut => (
                method == Method::GET || method == Method::HEAD || method == Method::PUT,
                "GET, HEAD, PUT",
            ),
        };
        if ok {
            return None;
        }
        let mut r = text(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("method {method} not allowed here; use {allow}"),
        );
        r.headers_mut()
            .insert(ALLOW, HeaderValue::from_static(allow));
        Some(r)
    }
}

/// The body of a reply as text (tests only; `Full` is ready at once).
#[cfg(test)]
pub(crate) fn body_text(r: Reply) -> String {
    use http_body_util::BodyExt as _;
    let collected = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a current-thread runtime")
        .block_on(r.into_body().collect())
        .expect("a Full body cannot fail");
    String::from_utf8(collected.to_bytes().to_vec()).expect("UTF-8 body")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_routes_accept_get_and_head_only() {
        assert!(Verb::Read.refuse(&Method::GET).is_none());
        assert!(Verb::Read.refuse(&Method::HEAD).is_none());
        for m in [Method::POST, Method::PUT, Method::DELETE, Method::OPTIONS] {
            let r = Verb::Read.refuse(&m).unwrap();
            assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED, "{m}");
            assert_eq!(r.headers()[ALLOW], "GET, HEAD");
        }
        for m in [Method::GET, Method::HEAD, Method::PUT] {
            assert!(Verb::ReadPut.refuse(&m).is_none(), "{m}");
        }
        let r = Verb::ReadPut.refuse(&Method::POST).unwrap();
        assert_eq!(r.headers()[ALLOW], "GET, HEAD, PUT");
    }

    #[test]
    fn text_ends_with_a_newline_once() {
        assert_eq!(body_text(text(StatusCode::OK, "ok")), "ok\n");
        assert_eq!(body_text(text(StatusCode::OK, "ok\n")), "ok\n");
    }
}
