//! What every request handler shares: the context, the response type and
//! the JSON reply helper. Kept apart from the listener so the handlers
//! (`api`, `admin`) and the server depend on it, not on each other.

use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Response, StatusCode};
use serde_json::Value;

use crate::store::Store;

pub(crate) type Resp = Response<Full<Bytes>>;

/// What every request handler sees.
#[derive(Debug)]
pub(crate) struct Ctx {
    pub store: Arc<Mutex<Store>>,
    /// Scheme, host and port written into the catalog and links.
    pub base_url: String,
    /// Publishes an oslo notification per control-API mutation.
    pub notifier: Option<crate::notify::Notifier>,
}

impl Ctx {
    pub fn lock(&self) -> MutexGuard<'_, Store> {
        // A handler never panics while holding the lock; recover anyway so
        // one bug cannot wedge every later request.
        self.store
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Outcome of a handler: an answer, or "close the connection unanswered".
pub(crate) enum Outcome {
    Reply(Resp),
    Drop,
}

pub(crate) fn json(status: StatusCode, body: &Value) -> Resp {
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        "Content-Type",
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}
