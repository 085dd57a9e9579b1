//! The accept loop shared by both listeners: HTTP/1.1 on tokio, one task
//! per connection, graceful on cancellation.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::reply::{text, Reply};

/// A listener's pages: a pure function of the request (its body already
/// read), so it is unit-tested without a socket. It must not panic on any
/// input; a bad request is a 4xx answer.
pub trait Routes: Send + Sync + 'static {
    /// The answer to `req`.
    fn handle(&self, req: &Request<Bytes>) -> Reply;
}

/// One page of a [`Routes`] value.
pub(crate) type Page<R> = fn(&R, &Request<Bytes>) -> Reply;

/// Largest request body read (the only body is a log-level word).
pub const MAX_BODY_BYTES: usize = 64 * 1024;
/// A client must send its request head within this time (slow-loris guard).
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// After cancellation, requests in flight get this long to finish.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// Pause after a failed accept (e.g. out of file descriptors) so the loop
/// does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Serves `routes` on `listener` until `cancel` fires; then stops
/// accepting, lets requests in flight finish (closing idle keep-alive
/// connections at once), and returns within a bounded grace period.
pub async fn serve<R: Routes>(listener: TcpListener, routes: Arc<R>, cancel: CancellationToken) {
    let graceful = GracefulShutdown::new();
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            () = cancel.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let routes = routes.clone();
                    let svc = service_fn(move |req| {
                        let routes = routes.clone();
                        async move { Ok::<_, Infallible>(respond(routes.as_ref(), req).await) }
                    });
                    let conn = http1::Builder::new()
                        .timer(TokioTimer::new())
                        .header_read_timeout(HEADER_TIMEOUT)
                        .serve_connection(TokioIo::new(stream), svc);
                    let conn = graceful.watch(conn);
                    connections.spawn(async move {
                        if let Err(e) = conn.await {
                            tracing::debug!(%peer, error = %e, "http: connection ended with an error");
                        }
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "http: accept failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            },
            // Reap finished connections so the set does not grow.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    if tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            grace = ?SHUTDOWN_GRACE,
            "http: connections still open after the grace period; closing them"
        );
    }
    connections.shutdown().await;
}

/// Reads the body (bounded), then asks `routes`.
async fn respond<R: Routes + ?Sized>(routes: &R, req: Request<Incoming>) -> Reply {
    let (parts, body) = req.into_parts();
    let body = match Limited::new(body, MAX_BODY_BYTES).collect().await {
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
