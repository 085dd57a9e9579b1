//! The listener: one HTTP/1 server for every simulated service, with
//! per-connection drop support for fault injection.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, Notify};

use crate::http::{json, Ctx, Outcome};
use crate::store::Store;
use crate::{admin, api};

/// A running simulator; dropping it stops the listener.
#[derive(Debug)]
pub struct SimHandle {
    addr: SocketAddr,
    ctx: Arc<Ctx>,
    stop: Option<oneshot::Sender<()>>,
}

impl SimHandle {
    /// The address bound, with the port the system chose when asked for 0.
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The URL written into the catalog and links: `http://<addr>`, or the
    /// advertised one without a trailing `/`.
    #[must_use]
    pub fn base_url(&self) -> &str {
        &self.ctx.base_url
    }

    /// Keystone's public auth URL (`.../identity/v3`).
    #[must_use]
    pub fn auth_url(&self) -> String {
        format!("{}/identity/v3", self.ctx.base_url)
    }

    /// Runs `f` on the live store (mutations, faults, settings, stats) under
    /// its lock, so requests see all of `f`'s changes or none. Nothing done
    /// here notifies.
    pub fn with_store<R>(&self, f: impl FnOnce(&mut Store) -> R) -> R {
        f(&mut self.ctx.lock())
    }

    /// A token for application credential `id`, issued in-process as
    /// `POST /identity/v3/auth/tokens` would issue it (counted as issued,
    /// not as a request): for tests that call the API with a plain HTTP
    /// client. `None` for an unknown credential.
    #[must_use]
    pub fn application_credential_token(&self, id: &str) -> Option<String> {
        self.with_store(|s| {
            let cred = s.application_credentials.get(id)?.clone();
            let client = crate::stats::application_credential(&cred.id);
            Some(s.issue_token(cred.project_id, client).0)
        })
    }

    /// Stops accepting; connections in flight finish on their own.
    pub fn stop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Binds `listen` and serves `store` until the handle is dropped.
/// `advertise` overrides the base URL put in the catalog (e.g. when listening
/// on 0.0.0.0). Port 0 lets the system pick; [`SimHandle::addr`] tells which.
pub async fn start(
    store: Store,
    listen: SocketAddr,
    advertise: Option<String>,
) -> std::io::Result<SimHandle> {
    start_with(
        store,
        listen,
        SimOptions {
            advertise,
            ..SimOptions::default()
        },
    )
    .await
}

/// Optional behaviour of a simulator instance.
#[derive(Debug, Clone, Default)]
pub struct SimOptions {
    /// Base URL put in the catalog and links (e.g. when listening on 0.0.0.0).
    pub advertise: Option<String>,
    /// Publish an oslo notification to `RabbitMQ` for each successful
    /// control-API mutation.
    pub rabbitmq: Option<crate::notify::RabbitTarget>,
    /// Publish the same notifications to a Kafka topic (with or without
    /// `rabbitmq`).
    pub kafka: Option<crate::notify::KafkaTarget>,
    /// Hand the same envelopes to an in-process consumer (with or without
    /// the brokers).
    pub channel: Option<crate::notify::ChannelTarget>,
}

/// [`start`] with every option.
pub async fn start_with(
    store: Store,
    listen: SocketAddr,
    opts: SimOptions,
) -> std::io::Result<SimHandle> {
    start_on(store, TcpListener::bind(listen).await?, opts)
}

/// [`start_with`] on a listener the caller bound, e.g. to try each address
/// a host name resolves to (`lachesis sim --listen localhost:8780`). Call it
/// inside a Tokio runtime: the accept loop is spawned on it.
pub fn start_on(
    store: Store,
    listener: TcpListener,
    opts: SimOptions,
) -> std::io::Result<SimHandle> {
    let advertise = opts.advertise;
    let addr = listener.local_addr()?;
    let base_url = advertise.map_or_else(
        || format!("http://{addr}"),
        |a| a.trim_end_matches('/').to_owned(),
    );
    let notifier = [
        opts.rabbitmq.map(crate::notify::spawn_rabbit),
        opts.kafka.map(crate::notify::spawn_kafka),
        opts.channel.map(crate::notify::spawn_channel),
    ]
    .into_iter()
    .flatten()
    .reduce(crate::notify::Notifier::join);
    let ctx = Arc::new(Ctx {
        store: Arc::new(Mutex::new(store)),
        base_url,
        notifier,
    });
    let (tx, mut rx) = oneshot::channel();
    let serve_ctx = ctx.clone();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = &mut rx => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => { tokio::spawn(connection(serve_ctx.clone(), stream)); }
                    Err(e) => tracing::warn!(error = %e, "sim: accept failed"),
                },
            }
        }
    });
    Ok(SimHandle {
        addr,
        ctx,
        stop: Some(tx),
    })
}

async fn connection(ctx: Arc<Ctx>, stream: tokio::net::TcpStream) {
    let drop_now = Arc::new(Notify::new());
    let signal = drop_now.clone();
    let svc = hyper::service::service_fn(move |req| {
        let ctx = ctx.clone();
        let signal = signal.clone();
        async move {
            match handle(&ctx, req).await {
                Outcome::Reply(r) => Ok::<_, Infallible>(r),
                Outcome::Drop => {
                    signal.notify_one();
                    std::future::pending().await
                }
            }
        }
    });
    let conn =
        hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), svc);
    // Dropping the connection future closes the socket with nothing sent.
    tokio::select! {
        result = conn => if let Err(e) = result { tracing::debug!(error = %e, "sim: connection ended with an error") },
        () = drop_now.notified() => {}
    }
}

async fn handle(ctx: &Ctx, req: Request<Incoming>) -> Outcome {
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let query: Vec<(String, String)> = req
        .uri()
        .query()
        .map(|q| {
            url::form_urlencoded::parse(q.as_bytes())
                .into_owned()
                .collect()
        })
        .unwrap_or_default();
    let token = req
        .headers()
        .get("X-Auth-Token")
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned);
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return Outcome::Drop,
    };
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    match segs.as_slice() {
        ["sim", rest @ ..] => Outcome::Reply(admin::handle(ctx, &method, rest, &query, &body)),
        ["identity", "v3", "auth", "tokens"] if method == hyper::Method::POST => {
            api::issue_token(ctx, &body).await
        }
        ["r", region, iface, rest @ ..] => {
            let call = api::ApiCall {
                region,
                iface,
                rest,
                path: &path,
                query,
                token: token.as_deref(),
            };
            api::handle(ctx, &method, call).await
        }
        _ => Outcome::Reply(json(
            StatusCode::NOT_FOUND,
            &serde_json::json!({"error": {"code": 404, "title": "Not Found", "message": format!("no such path {path}")}}),
        )),
    }
}
