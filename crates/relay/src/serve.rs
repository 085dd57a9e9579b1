//! `lachesis relay` as a process: the cloud resolved, the families
//! registered, then the relay's loop, the configured notification
//! consumers and the `/metrics` listener side by side until cancelled
//! (one `join!`, every part stops on the same token; the listener's
//! connections are tasks it owns and stops), with the watcher of
//! `listen.web_config_file`.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use lachesis_listen::{Endpoint, ListenMetrics, Web};
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

/// Runs the relay with `config` until `cancel`, its listener serving with
/// `web` (`listen.web_config_file` loaded, or plain HTTP; the caller
/// reloads it on SIGHUP).
pub async fn serve<P: Publisher>(
    config: &RelayConfig,
    web: Arc<Web>,
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
    let endpoint = Endpoint {
        web: web.clone(),
        ..Endpoint::plain("relay metrics")
    };
    registry.register_collector(Box::new(ListenMetrics::new(
        web.clone(),
        vec![("metrics", endpoint.stats.clone())],
    )));
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
    if !addr.ip().is_loopback() && web.path().is_none() {
        tracing::warn!(
            key = "listen.metrics",
            "{addr} is not a loopback address and listen.web_config_file is not set: the relay's \
             metrics are readable in plain HTTP by anyone who can reach the port \
             (docs/operations.md \"Protecting the metrics\")"
        );
    }
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
        listen(listener, endpoint, registry, cancel.clone()),
        web.watch(cancel.clone()),
    );
    Ok(())
}

/// `/metrics` and `/healthz` until `cancel`, behind the bounded accept
/// loop every Lachesis listener uses (`lachesis-listen`: connections, head
/// size and time, response time); each connection is served on its own
/// task (a scraper keeps its connection open between scrapes).
async fn listen(
    listener: TcpListener,
    endpoint: Endpoint,
    registry: Arc<Registry>,
    cancel: CancellationToken,
) {
    let handle = move |req: Request<Incoming>| {
        let registry = registry.clone();
        async move { answer(req.uri().path(), &registry) }
    };
    lachesis_listen::serve(listener, endpoint, handle, cancel).await;
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio::net::TcpStream;

    use super::*;

    /// One request on `conn`, kept open; the response's head.
    async fn get(conn: &mut TcpStream) -> String {
        conn.write_all(b"GET /healthz HTTP/1.1\r\nHost: relay\r\n\r\n")
            .await
            .unwrap();
        let mut buf = vec![0u8; 1024];
        let n = tokio::time::timeout(Duration::from_secs(5), conn.read(&mut buf))
            .await
            .expect("an answer within 5 s")
            .unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    /// A scraper keeps its connection open between scrapes: a second
    /// client (another Prometheus, an operator's curl) is answered all the
    /// same.
    #[tokio::test]
    async fn a_kept_open_connection_does_not_hold_up_another_client() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let cancel = CancellationToken::new();
        let task = tokio::spawn(listen(
            listener,
            Endpoint::plain("relay metrics"),
            Arc::new(Registry::default()),
            cancel.clone(),
        ));
        let mut first = TcpStream::connect(addr).await.unwrap();
        assert!(get(&mut first).await.starts_with("HTTP/1.1 200"));
        let mut second = TcpStream::connect(addr).await.unwrap();
        assert!(get(&mut second).await.starts_with("HTTP/1.1 200"));
        assert!(
            get(&mut first).await.starts_with("HTTP/1.1 200"),
            "the first connection is still served"
        );
        cancel.cancel();
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("the listener stops with its connections")
            .unwrap();
    }
}
