//! Both listeners' pages behind the bounded accept loop of
//! `lachesis-listen` (connections, head size and time, response time, and
//! `listen.web_config_file`'s TLS and users; its crate docs), plus what only this side knows: a request body is read
//! within [`MAX_BODY_BYTES`] and [`BODY_TIMEOUT`].

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::{Request, StatusCode};
use lachesis_listen::Endpoint;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::reply::{text, Reply};

/// A listener's pages: a pure function of the request (its body already
/// read), so it is unit-tested without a socket. It must not panic on any
/// input; a bad request is a 4xx answer.
pub trait Routes: Send + Sync + 'static {
    /// The listener's name in logs.
    const LISTENER: &'static str = "http";

    /// The answer to `req`.
    fn handle(&self, req: &Request<Bytes>) -> Reply;
}

/// One page of a [`Routes`] value.
pub(crate) type Page<R> = fn(&R, &Request<Bytes>) -> Reply;

/// Largest request body read (the only body is a log-level word).
pub const MAX_BODY_BYTES: usize = 64 * 1024;
/// A request body must arrive whole within this (408 otherwise).
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `routes` on `listener` as `endpoint` says (its limits, TLS,
/// users) until `cancel` fires; then stops accepting, lets requests in
/// flight finish (closing idle keep-alive connections at once), and
/// returns within a bounded grace period.
pub async fn serve<R: Routes>(
    listener: TcpListener,
    endpoint: Endpoint,
    routes: Arc<R>,
    cancel: CancellationToken,
) {
    let handle = move |req| {
        let routes = routes.clone();
        async move { respond(routes.as_ref(), req).await }
    };
    lachesis_listen::serve(listener, endpoint, handle, cancel).await;
}

/// Reads the body (bounded), then asks `routes`.
async fn respond<R: Routes + ?Sized>(routes: &R, req: Request<Incoming>) -> Reply {
    let (parts, body) = req.into_parts();
    let read = tokio::time::timeout(BODY_TIMEOUT, Limited::new(body, MAX_BODY_BYTES).collect());
    let Ok(read) = read.await else {
        return text(
            StatusCode::REQUEST_TIMEOUT,
            format!("request body not received within {BODY_TIMEOUT:?}"),
        );
    };
    let body = match read {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.is::<LengthLimitError>() => {
            return text(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("request body larger than {MAX_BODY_BYTES} bytes"),
            )
        }
        Err(e) => {
            return text(
                StatusCode::BAD_REQUEST,
                format!("unreadable request body: {e}"),
            )
        }
    };
    let req = Request::from_parts(parts, body);
    let reply = routes.handle(&req);
    tracing::debug!(
        method = %req.method(),
        path = req.uri().path(),
        status = reply.status().as_u16(),
        "http: request"
    );
    reply
}
