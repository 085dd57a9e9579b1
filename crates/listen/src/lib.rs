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
//!
//! [`web`] adds what `listen.web_config_file` asks for: TLS (the handshake
//! on the connection's own task, within the head timeout), basic
//! authentication, response headers and a rate limit; [`ListenerStats`]
//! counts what was refused.

mod metrics;
pub mod web;

pub use metrics::ListenMetrics;
pub use web::{Web, WebConfigError};

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{Either, Full};
use hyper::body::{Body, Incoming};
use hyper::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE, WWW_AUTHENTICATE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
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

/// Rejections by reason, as [`ListenerStats::rejections`] reads them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rejections {
    /// Requests without the credentials of a `basic_auth_users` user.
    pub unauthorized: u64,
    /// Requests over the `rate_limit`.
    pub rate_limited: u64,
    /// Connections whose TLS handshake failed or did not finish within
    /// the head timeout, or whose client certificate names none of
    /// `client_allowed_sans`.
    pub tls_handshake: u64,
    /// Connections closed to make room at the connection limit.
    pub evicted: u64,
    /// Connections closed at once: at the limit with every connection
    /// being answered.
    pub over_capacity: u64,
}

impl Rejections {
    /// Each reason with its label value (`lachesis_http_rejected_total`).
    #[must_use]
    pub fn by_reason(&self) -> [(&'static str, u64); 5] {
        [
            ("unauthorized", self.unauthorized),
            ("rate_limited", self.rate_limited),
            ("tls_handshake", self.tls_handshake),
            ("evicted", self.evicted),
            ("over_capacity", self.over_capacity),
        ]
    }
}

/// What a listener refused, counted as it happens.
#[derive(Debug, Default)]
pub struct ListenerStats {
    unauthorized: AtomicU64,
    rate_limited: AtomicU64,
    tls_handshake: AtomicU64,
    evicted: AtomicU64,
    over_capacity: AtomicU64,
}

impl ListenerStats {
    /// The counts so far.
    #[must_use]
    pub fn rejections(&self) -> Rejections {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Rejections {
            unauthorized: r(&self.unauthorized),
            rate_limited: r(&self.rate_limited),
            tls_handshake: r(&self.tls_handshake),
            evicted: r(&self.evicted),
            over_capacity: r(&self.over_capacity),
        }
    }

    fn count(a: &AtomicU64) {
        a.fetch_add(1, Ordering::Relaxed);
    }
}

/// One listener: its name in logs and metrics, its limits, its web
/// configuration (TLS, users, headers, rate limit) and its counters.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// Names the listener in logs and in `lachesis_http_rejected_total`.
    pub name: &'static str,
    /// How much its clients may hold.
    pub limits: Limits,
    /// Plain HTTP, or what `listen.web_config_file` says.
    pub web: Arc<Web>,
    /// What it refused.
    pub stats: Arc<ListenerStats>,
}

impl Endpoint {
    /// Plain HTTP under [`Limits::DEFAULT`].
    #[must_use]
    pub fn plain(name: &'static str) -> Endpoint {
        Endpoint {
            name,
            limits: Limits::DEFAULT,
            web: Web::plain(),
            stats: Arc::default(),
        }
    }
}

/// The body of every answer: the handler's, or the listener's own refusal.
pub type AnswerBody<B> = Either<B, Full<Bytes>>;

/// Serves `handle` on `listener` as `endpoint` says until `cancel` fires;
/// then stops accepting, lets requests in flight finish (idle keep-alive
/// connections close at once) and returns within the grace period.
pub async fn serve<F, Fut, B>(
    listener: TcpListener,
    endpoint: Endpoint,
    handle: F,
    cancel: CancellationToken,
) where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<B>> + Send + 'static,
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let Endpoint {
        name,
        limits,
        web,
        stats,
    } = endpoint;
    let mut connections = JoinSet::new();
    let mut slots = Slots::default();
    let stopping = cancel.child_token();
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
        if !admitted(&mut slots, limits, &stats, name, peer) {
            continue;
        }
        let started = Arc::new(AtomicBool::new(false));
        let busy = Arc::new(AtomicBool::new(false));
        let service = {
            let (started, busy, handle) = (started.clone(), busy.clone(), handle.clone());
            let (web, stats) = (web.clone(), stats.clone());
            service_fn(move |req| {
                started.store(true, Ordering::Release);
                busy.store(true, Ordering::Release);
                let (busy, handle) = (busy.clone(), handle.clone());
                let (web, stats) = (web.clone(), stats.clone());
                async move {
                    let _idle = Idle(busy);
                    Ok::<_, Infallible>(answer(&web, &stats, req, handle).await)
                }
            })
        };
        let io = Deadlined::new(stream, limits.response_timeout);
        let tls = web.acceptor();
        let (stats, stopping) = (stats.clone(), stopping.clone());
        let abort = connections.spawn(async move {
            let io = match tls {
                None => Conn::Plain(io),
                Some((acceptor, sans)) => {
                    match handshake(acceptor, io, sans.as_deref(), limits.header_timeout).await {
                        Ok(tls) => Conn::Tls(Box::new(tls)),
                        Err(e) => {
                            ListenerStats::count(&stats.tls_handshake);
                            tracing::debug!(listener = name, %peer, error = %e, "http: TLS handshake refused");
                            return;
                        }
                    }
                }
            };
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .max_buf_size(limits.max_header_bytes.max(8192))
                .max_header_size(limits.max_header_bytes)
                .serve_connection(TokioIo::new(io), service);
            tokio::pin!(conn);
            let ended = tokio::select! {
                ended = conn.as_mut() => ended,
                () = stopping.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    conn.await
                }
            };
            if let Err(e) = ended {
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
    let drained = async { while connections.join_next().await.is_some() {} };
    if tokio::time::timeout(limits.shutdown_grace, drained)
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

/// Room for a new connection from `peer` (see [`Slots::admit`]), counted
/// and logged when it took another's place or found none.
fn admitted(
    slots: &mut Slots,
    limits: Limits,
    stats: &ListenerStats,
    name: &'static str,
    peer: std::net::SocketAddr,
) -> bool {
    match slots.admit(limits.max_connections) {
        Admit::Yes => true,
        Admit::Evicted { started } => {
            ListenerStats::count(&stats.evicted);
            tracing::debug!(
                listener = name,
                %peer,
                max = limits.max_connections,
                evicted_idle_client = started,
                "http: at the connection limit; closed the oldest connection that was not being answered"
            );
            true
        }
        Admit::Refused => {
            ListenerStats::count(&stats.over_capacity);
            tracing::debug!(listener = name, %peer, "http: every connection busy; closing a new one");
            false
        }
    }
}

/// The TLS handshake within `timeout`, then the client certificate's SANs
/// against `allowed` (when set).
async fn handshake(
    acceptor: tokio_rustls::TlsAcceptor,
    io: Deadlined<TcpStream>,
    allowed: Option<&[String]>,
    timeout: Duration,
) -> io::Result<tokio_rustls::server::TlsStream<Deadlined<TcpStream>>> {
    let tls = tokio::time::timeout(timeout, acceptor.accept(io))
        .await
        .map_err(|_| {
            io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no TLS handshake within {timeout:?}"),
            )
        })??;
    if let Some(allowed) = allowed {
        let leaf = tls.get_ref().1.peer_certificates().and_then(<[_]>::first);
        if !leaf.is_some_and(|c| web::sans_allowed(c, allowed)) {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "the client certificate names none of client_allowed_sans",
            ));
        }
    }
    Ok(tls)
}

/// The rate limit, then the users, then the handler; the configured
/// headers on every answer.
async fn answer<F, Fut, B>(
    web: &Web,
    stats: &ListenerStats,
    req: Request<Incoming>,
    handle: F,
) -> Response<AnswerBody<B>>
where
    F: Fn(Request<Incoming>) -> Fut,
    Fut: Future<Output = Response<B>>,
{
    let active = web.current();
    let mut resp = if active.bucket.as_ref().is_some_and(|b| !b.allow()) {
        ListenerStats::count(&stats.rate_limited);
        refusal(StatusCode::TOO_MANY_REQUESTS, "too many requests\n")
    } else if let Some(users) = &active.users {
        if users
            .allows(req.headers().get(AUTHORIZATION), &web.gate)
            .await
        {
            handle(req).await.map(Either::Left)
        } else {
            ListenerStats::count(&stats.unauthorized);
            let mut r = refusal(StatusCode::UNAUTHORIZED, "unauthorized\n");
            r.headers_mut().insert(
                WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"lachesis\", charset=\"UTF-8\""),
            );
            r
        }
    } else {
        handle(req).await.map(Either::Left)
    };
    for (name, value) in &active.headers {
        resp.headers_mut().insert(name.clone(), value.clone());
    }
    resp
}

fn refusal<B>(status: StatusCode, text: &'static str) -> Response<AnswerBody<B>> {
    let mut r = Response::new(Either::Right(Full::new(Bytes::from_static(
        text.as_bytes(),
    ))));
    *r.status_mut() = status;
    r.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// A connection as served: plain, or TLS over it.
enum Conn {
    Plain(Deadlined<TcpStream>),
    Tls(Box<tokio_rustls::server::TlsStream<Deadlined<TcpStream>>>),
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Conn::Plain(s) => s.is_write_vectored(),
            Conn::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_flush(cx),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
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
