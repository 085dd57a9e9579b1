//! `lachesis relay` as a process: the cloud resolved, the families
//! registered, then the relay's loop, the configured notification
//! consumers and the `/metrics` listener side by side until cancelled
//! (no task is spawned: one `join!`, every part stops on the same token).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use lachesis_notify::{KafkaConsumer, NotifyMetrics, RabbitMqConsumer, Transport};
use lachesis_openstack::config::resolve_for_process;
use lachesis_openstack::{ApiMetrics, Client};
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::config::RelayConfig;
use crate::publish::Publisher;
use crate::run::{Relay, Schedule, HEARTBEAT_INTERVAL};
use crate::{channel, RelayMetrics};

/// Why the relay could not start. Each names the key to fix.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// `openstack.*` does not resolve to a usable cloud.
    #[error("openstack.cloud: {0}")]
    Cloud(String),
    /// A notification consumer cannot be built (TLS files, URL).
    #[error("{key}: {message}")]
    Notifications {
        /// `notifications.rabbitmq` or `notifications.kafka`.
        key: &'static str,
        /// What is wrong.
        message: String,
    },
    /// `listen.metrics` cannot be bound.
    #[error("listen.metrics: {addr}: {error}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// The system's error.
        error: std::io::Error,
    },
}

/// Runs the relay with `config` until `cancel`.
pub async fn serve<P: Publisher>(
    config: &RelayConfig,
    publisher: P,
    cancel: CancellationToken,
) -> Result<(), ServeError> {
    let cloud = resolve_for_process(&config.openstack.selection())
        .map_err(|e| ServeError::Cloud(e.to_string()))?;
    let mut registry = Registry::default();
    let metrics = RelayMetrics::default();
    metrics.register(&mut registry);
    let api = ApiMetrics::default();
    api.register(&mut registry);
    let n = &config.notifications;
    let transports: Vec<Transport> = [
        n.rabbitmq.as_ref().map(|_| Transport::RabbitMq),
        n.kafka.as_ref().map(|_| Transport::Kafka),
    ]
    .into_iter()
    .flatten()
    .collect();
    let notify = NotifyMetrics::register(
        &mut registry,
        &transports,
        n.kafka.as_ref().map(|k| k.topic.as_str()),
    );
    let rabbitmq = n
        .rabbitmq
        .clone()
        .map(|c| RabbitMqConsumer::new(c, notify.transport(Transport::RabbitMq)))
        .transpose()
        .map_err(|e| ServeError::Notifications {
            key: "notifications.rabbitmq",
            message: e.to_string(),
        })?;
    let kafka = n
        .kafka
        .clone()
        .map(|c| KafkaConsumer::new(c, notify.transport(Transport::Kafka)))
        .transpose()
        .map_err(|e| ServeError::Notifications {
            key: "notifications.kafka",
            message: e.to_string(),
        })?;
    let client = Client::new(cloud, api).map_err(|e| ServeError::Cloud(e.to_string()))?;
    let addr = config.listen.metrics;
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|error| ServeError::Listen { addr, error })?;
    let schedule = Schedule {
        name: config.name(),
        digest_interval: config.relay.digest_interval,
        resync_interval: config.relay.resync_interval,
        snapshot_interval: config.relay.snapshot_interval,
        heartbeat_interval: HEARTBEAT_INTERVAL,
    };
    tracing::info!(relay = %schedule.name, metrics = %addr, "relay starting");
    let (sink, inputs) = channel(metrics.clone());
    let relay = Relay::new(schedule, client, publisher, metrics);
    let registry = Arc::new(registry);
    tokio::join!(
        relay.run(inputs, cancel.clone()),
        async {
            if let Some(c) = &rabbitmq {
                c.run(&sink, cancel.clone()).await;
            }
        },
        async {
            if let Some(c) = &kafka {
                c.run(&sink, cancel.clone()).await;
            }
        },
        listen(listener, registry, cancel.clone()),
    );
    Ok(())
}

/// `/metrics` and `/healthz` until `cancel`; connections are served one
/// after the other (a scraper's).
async fn listen(listener: TcpListener, registry: Arc<Registry>, cancel: CancellationToken) {
    loop {
        let stream = tokio::select! {
            () = cancel.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::debug!(error = %e, "metrics listener: accept failed");
                    continue;
                }
            },
        };
        let registry = registry.clone();
        let service = hyper::service::service_fn(move |req: Request<Incoming>| {
            let registry = registry.clone();
            async move { Ok::<_, Infallible>(answer(req.uri().path(), &registry)) }
        });
        let conn = hyper::server::conn::http1::Builder::new()
            .serve_connection(TokioIo::new(stream), service);
        tokio::select! {
            () = cancel.cancelled() => return,
            served = conn => if let Err(e) = served {
                tracing::debug!(error = %e, "metrics listener: connection failed");
            },
        }
    }
}

fn answer(path: &str, registry: &Registry) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match path {
        "/metrics" => {
            let mut text = String::new();
            match prometheus_client::encoding::text::encode(&mut text, registry) {
                Ok(()) => (
                    StatusCode::OK,
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    text,
                ),
                Err(e) => (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "text/plain",
                    e.to_string(),
                ),
            }
        }
        "/healthz" => (StatusCode::OK, "text/plain", "ok\n".to_owned()),
        _ => (
            StatusCode::NOT_FOUND,
            "text/plain",
            "not found\n".to_owned(),
        ),
    };
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    if let Ok(v) = hyper::header::HeaderValue::from_str(content_type) {
        resp.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    resp
}

/// The rendered families of a registry (tests, and `--check-config`'s
/// sibling checks).
#[must_use]
pub fn render(metrics: &RelayMetrics) -> String {
    let mut registry = Registry::default();
    metrics.register(&mut registry);
    let mut text = String::new();
    let _ = prometheus_client::encoding::text::encode(&mut text, &registry);
    text
}
