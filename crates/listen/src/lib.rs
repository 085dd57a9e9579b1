//! The HTTP/1.1 accept loop of every Lachesis listener (the agent's
//! metrics and debug listeners, the relay's metrics listener), bounded so
//! that no client — slow, idle, oversized or many — can keep a scrape from
//! being answered or make the process's memory grow without limit
//! (docs/operations.md, "Listeners under abuse"):
//!
//! - at most [`Limits::max_connections`] connections at once; at the limit
//!   a new one takes the place of the oldest that has not yet sent a whole
//!   request head (a slow-loris client), else of the oldest not being
//!   answered this instant, else it is closed;
//! - a request head must arrive within [`Limits::header_timeout`] (also
//!   how long an idle keep-alive connection is kept) and be at most
//!   [`Limits::max_header_bytes`] long (431 beyond);
//! - a response not fully written within [`Limits::response_timeout`] of
//!   its first byte ends the connection (a client that does not read its
//!   answer);
//! - a request body is the handler's to bound: it reads it, or not.
//!
//! One task per connection, owned by the loop; on cancellation the loop
//! stops accepting and gives requests in flight a bounded grace period.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::{Body, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::task::{AbortHandle, JoinSet};
use tokio::time::{Instant, Sleep};
use tokio_util::sync::CancellationToken;

/// How much a listener lets its clients hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once.
    pub max_connections: usize,
    /// Time to send a whole request head; also the longest an idle
    /// keep-alive connection waits for its next request.
    pub header_timeout: Duration,
    /// A response must be written within this from its first byte.
    pub response_timeout: Duration,
    /// Largest request head (request line and headers), in bytes.
    pub max_header_bytes: usize,
    /// After cancellation, requests in flight get this long to finish.
    pub shutdown_grace: Duration,
}

impl Limits {
    /// What every Lachesis listener uses: a Prometheus server keeps one
    /// connection per target (an HA pair: two), an operator's browser a
    /// few; 512 leaves room for those beside hundreds of hostile ones.
    pub const DEFAULT: Limits = Limits {
        max_connections: 512,
        header_timeout: Duration::from_secs(10),
        response_timeout: Duration::from_secs(30),
        max_header_bytes: 16 * 1024,
        shutdown_grace: Duration::from_secs(5),
    };
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

/// Pause after a failed accept (out of file descriptors) so the loop does
/// not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// One open connection, as the loop tracks it.
struct Slot {
    abort: AbortHandle,
    /// A whole request head has arrived on it at least once.
    started: Arc<AtomicBool>,
    /// A request on it is being handled this instant.
    busy: Arc<AtomicBool>,
}

/// What [`Slots::admit`] decided for a new connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Admit {
    /// Below the limit.
    Yes,
    /// At the limit: an older connection was closed to make room.
    Evicted { started: bool },
    /// At the limit with every connection busy: the new one is closed.
    Refused,
}

/// The open connections, oldest first.
#[derive(Default)]
struct Slots {
    open: Vec<Slot>,
}

impl Slots {
    /// Room for one more connection under `max`: finished connections are
    /// forgotten; at the limit the oldest that never sent a whole request
    /// head is closed, else the oldest not being answered.
    fn admit(&mut self, max: usize) -> Admit {
        self.open.retain(|s| !s.abort.is_finished());
        if self.open.len() < max {
            return Admit::Yes;
        }
        let victim = self
            .open
            .iter()
            .position(|s| !s.started.load(Ordering::Acquire))
            .or_else(|| {
                self.open
                    .iter()
                    .position(|s| !s.busy.load(Ordering::Acquire))
            });
        match victim {
            Some(i) => {
                let slot = self.open.remove(i);
                slot.abort.abort();
                Admit::Evicted {
                    started: slot.started.load(Ordering::Acquire),
                }
            }
            None => Admit::Refused,
        }
    }
}

/// Serves `handle` on `listener` under `limits` until `cancel` fires; then
/// stops accepting, lets requests in flight finish (idle keep-alive
/// connections close at once) and returns within the grace period.
/// `name` names the listener in logs.
pub async fn serve<F, Fut, B>(
    listener: TcpListener,
    limits: Limits,
    name: &'static str,
    handle: F,
    cancel: CancellationToken,
) where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<B>> + Send + 'static,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let graceful = GracefulShutdown::new();
    let mut connections = JoinSet::new();
    let mut slots = Slots::default();
    loop {
        let (stream, peer) = tokio::select! {
            () = cancel.cancelled() => break,
            // Reap finished connections so the set does not grow.
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(listener = name, error = %e, "http: accept failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        match slots.admit(limits.max_connections) {
            Admit::Yes => {}
            Admit::Evicted { started } => tracing::debug!(
                listener = name,
                %peer,
                max = limits.max_connections,
                evicted_idle_client = started,
                "http: at the connection limit; closed the oldest connection that was not being answered"
            ),
            Admit::Refused => {
                tracing::debug!(listener = name, %peer, "http: every connection busy; closing a new one");
                continue;
            }
        }
        let started = Arc::new(AtomicBool::new(false));
        let busy = Arc::new(AtomicBool::new(false));
        let service = {
            let (started, busy, handle) = (started.clone(), busy.clone(), handle.clone());
            service_fn(move |req| {
                started.store(true, Ordering::Release);
                busy.store(true, Ordering::Release);
                let (busy, handle) = (busy.clone(), handle.clone());
                async move {
                    let _idle = Idle(busy);
                    Ok::<_, Infallible>(handle(req).await)
                }
            })
        };
        let io = Deadlined::new(stream, limits.response_timeout);
        let conn = http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_timeout)
            .max_buf_size(limits.max_header_bytes.max(8192))
            .max_header_size(limits.max_header_bytes)
            .serve_connection(TokioIo::new(io), service);
        let conn = graceful.watch(conn);
        let abort = connections.spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(listener = name, %peer, error = %e, "http: connection ended with an error");
            }
        });
        slots.open.push(Slot {
            abort,
            started,
            busy,
        });
    }
    drop(listener);
    if tokio::time::timeout(limits.shutdown_grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            listener = name,
            grace = ?limits.shutdown_grace,
            "http: connections still open after the grace period; closing them"
        );
    }
    connections.shutdown().await;
}

/// Clears a connection's busy flag when its handler ends (or is dropped).
struct Idle(Arc<AtomicBool>);

impl Drop for Idle {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// A stream whose responses must be written within a deadline.
struct Deadlined<S> {
    inner: S,
    response_timeout: Duration,
    write_timer: Pin<Box<Sleep>>,
    /// When the response being written must be out (set by its first
    /// write, cleared by the next request's first bytes).
    write_deadline: Option<Instant>,
    write_armed_for: Option<Instant>,
}

impl<S> Deadlined<S> {
    fn new(inner: S, response_timeout: Duration) -> Self {
        Deadlined {
            inner,
            response_timeout,
            write_timer: Box::pin(tokio::time::sleep_until(Instant::now())),
            write_deadline: None,
            write_armed_for: None,
        }
    }

    /// Ready(error) once the response's deadline has passed, else Pending
    /// with the timer armed for it.
    fn poll_write_deadline(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        let deadline = *self
            .write_deadline
            .get_or_insert_with(|| Instant::now() + self.response_timeout);
        if self.write_armed_for != Some(deadline) {
            self.write_timer.as_mut().reset(deadline);
            self.write_armed_for = Some(deadline);
        }
        match self.write_timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "the client did not read its response within {:?}",
                    self.response_timeout
                ),
            )),
            Poll::Pending => Poll::Pending,
        }
    }

    fn check_write_deadline(&mut self) -> Option<io::Error> {
        let deadline = *self
            .write_deadline
            .get_or_insert_with(|| Instant::now() + self.response_timeout);
        (Instant::now() >= deadline).then(|| {
            io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "the client did not read its response within {:?}",
                    self.response_timeout
                ),
            )
        })
    }
}

impl<S: AsyncWrite + Unpin> Deadlined<S> {
    /// `write` on the inner stream, failing once the response's deadline
    /// has passed and waking when it does.
    fn guarded_write(
        &mut self,
        cx: &mut Context<'_>,
        write: impl FnOnce(Pin<&mut S>, &mut Context<'_>) -> Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        if let Some(e) = self.check_write_deadline() {
            return Poll::Ready(Err(e));
        }
        match write(Pin::new(&mut self.inner), cx) {
            Poll::Ready(result) => Poll::Ready(result),
            Poll::Pending => self.poll_write_deadline(cx).map(Err),
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Deadlined<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            // A new request: its response gets a deadline of its own.
            this.write_deadline = None;
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Deadlined<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.guarded_write(cx, |inner, cx| inner.poll_write(cx, buf))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.guarded_write(cx, |inner, cx| inner.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
