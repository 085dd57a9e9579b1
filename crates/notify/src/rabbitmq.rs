//! The `RabbitMQ` consumer (AMQP 0-9-1, DESIGN §8).
//!
//! Each agent declares its own exclusive, auto-delete, server-named queue
//! and binds it to every configured exchange with routing key
//! `notifications.info`: every agent sees every event, and no agent takes
//! messages from the shared `notifications.info` queue other services
//! read. The exchanges are declared as OpenStack declares them (`topic`,
//! durable as configured): a declaration that differs is refused by the
//! broker, so durability is a setting. Deliveries are acknowledged after
//! they are handled. On any failure the connection is dropped (the broker
//! deletes the queue) and rebuilt with backoff; as events published
//! meanwhile are lost, every reconnection is a gap kick.

use std::fmt;
use std::path::PathBuf;

use futures::StreamExt as _;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicQosOptions, ExchangeDeclareOptions,
    QueueBindOptions, QueueDeclareOptions,
};
use lapin::tcp::OwnedTLSConfig;
use lapin::types::FieldTable;
use lapin::{Connection, ConnectionProperties, DefaultConnectionBuilder, ExchangeKind};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::metrics::{ErrorKind, TransportMetrics};
use crate::tls::{ca_pem_text, SetupError};
use crate::{backoff, gap, handle, Gap, Sink};

/// The routing key OpenStack services publish `INFO` notifications with.
pub const ROUTING_KEY: &str = "notifications.info";

/// Unacknowledged deliveries in flight at once.
const PREFETCH: u16 = 64;

/// `notifications.rabbitmq.*`.
#[derive(Clone)]
pub struct RabbitMqConfig {
    /// `amqp://user:password@host:port/vhost` or `amqps://…`. Never shown
    /// with its password.
    pub url: String,
    /// Exchanges to bind to.
    pub exchanges: Vec<String>,
    /// Whether the deployment declares those exchanges durable.
    pub durable: bool,
    /// CA bundle for `amqps://`; `None`: the system roots.
    pub ca_file: Option<PathBuf>,
}

impl fmt::Debug for RabbitMqConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RabbitMqConfig")
            .field("url", &redact(&self.url))
            .field("exchanges", &self.exchanges)
            .field("durable", &self.durable)
            .field("ca_file", &self.ca_file)
            .finish()
    }
}

/// The URL without its credentials, for logs.
fn redact(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
            format!("{scheme}://{host}")
        }
        None => "(unparsable URL)".to_owned(),
    }
}

/// Why one connection attempt or subscription ended.
#[derive(Debug, thiserror::Error)]
pub enum RabbitError {
    /// Connecting or opening the channel failed.
    #[error("connecting to {url}: {source}")]
    Connect {
        /// The broker, without credentials.
        url: String,
        /// lapin's error.
        source: lapin::Error,
    },
    /// The exchange declaration was refused: usually `PRECONDITION_FAILED`,
    /// an exchange that exists with other parameters.
    #[error("declaring exchange {exchange:?} (topic, durable: {durable}): {source}; if the broker says PRECONDITION_FAILED the exchange exists with other parameters: set notifications.rabbitmq.durable to what the deployment declares")]
    Declare {
        /// The exchange.
        exchange: String,
        /// The durability asked for.
        durable: bool,
        /// lapin's error.
        source: lapin::Error,
    },
    /// Declaring, binding or consuming our queue failed.
    #[error("{step}: {source}")]
    Subscribe {
        /// What was being done.
        step: String,
        /// lapin's error.
        source: lapin::Error,
    },
    /// The delivery stream failed or an acknowledgement could not be sent.
    #[error("consuming: {0}")]
    Consume(lapin::Error),
    /// The broker ended the delivery stream (the channel or connection
    /// closed).
    #[error("the broker closed the subscription")]
    Closed,
}

/// A consumer, built once from its configuration.
#[derive(Debug)]
pub struct RabbitMqConsumer {
    config: RabbitMqConfig,
    tls: OwnedTLSConfig,
    metrics: TransportMetrics,
}

/// A live subscription: the connection (dropping it closes the channel
/// and deletes the exclusive queue), its channel and consumer.
#[derive(Debug)]
pub struct Subscription {
    _connection: Connection,
    consumer: lapin::Consumer,
    /// The server-named queue.
    pub queue: String,
}

impl RabbitMqConsumer {
    /// Reads the CA file, if any.
    ///
    /// # Errors
    /// The CA file cannot be read or holds no certificate; no exchange.
    pub fn new(config: RabbitMqConfig, metrics: TransportMetrics) -> Result<Self, SetupError> {
        if config.exchanges.is_empty() {
            return Err(SetupError::Setting(
                "notifications.rabbitmq.exchanges is empty".into(),
            ));
        }
        let tls = OwnedTLSConfig {
            identity: None,
            cert_chain: config.ca_file.as_deref().map(ca_pem_text).transpose()?,
        };
        Ok(RabbitMqConsumer {
            config,
            tls,
            metrics,
        })
    }

    /// Consumes until `cancel`, reconnecting with backoff (1 s … 30 s);
    /// every reconnection after the first connection is a gap kick.
    pub async fn run(&self, sink: &dyn Sink, cancel: CancellationToken) {
        let url = redact(&self.config.url);
        let mut failures = 0u32;
        let mut connected_before = false;
        loop {
            let attempt = tokio::select! {
                () = cancel.cancelled() => return,
                s = self.subscribe() => s,
            };
            let ended = match attempt {
                Ok(sub) => {
                    self.metrics.connected(true);
                    info!(broker = url, queue = sub.queue, exchanges = ?self.config.exchanges, "RabbitMQ consumer subscribed");
                    if connected_before {
                        gap(&self.metrics, sink, Gap::Reconnected);
                    }
                    connected_before = true;
                    failures = 0;
                    let ended = self.consume(sub, sink, &cancel).await;
                    self.metrics.connected(false);
                    match ended {
                        None => return,
                        Some(e) => e,
                    }
                }
                Err(e) => e,
            };
            self.metrics.error(ErrorKind::Transport);
            let wait = backoff(failures);
            failures = failures.saturating_add(1);
            warn!(broker = url, error = %ended, retry_in = ?wait, "RabbitMQ consumer disconnected");
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// Connects, declares the exchanges and our queue, binds and starts
    /// consuming (manual acks).
    ///
    /// # Errors
    /// Any step failed ([`RabbitError`] names it).
    pub async fn subscribe(&self) -> Result<Subscription, RabbitError> {
        let url = redact(&self.config.url);
        let connect = |source| RabbitError::Connect {
            url: url.clone(),
            source,
        };
        let connection = DefaultConnectionBuilder::new()
            .map_err(connect)?
            .with_uri_str(self.config.url.clone())
            .with_properties(ConnectionProperties::default())
            .with_tls_config(self.tls.clone())
            .connect()
            .await
            .map_err(connect)?;
        let channel = connection.create_channel().await.map_err(connect)?;
        let step = |step: String| move |source| RabbitError::Subscribe { step, source };
        channel
            .basic_qos(PREFETCH, BasicQosOptions::default())
            .await
            .map_err(step("setting the prefetch".into()))?;
        for exchange in &self.config.exchanges {
            channel
                .exchange_declare(
                    exchange.as_str().into(),
                    ExchangeKind::Topic,
                    ExchangeDeclareOptions {
                        durable: self.config.durable,
                        ..ExchangeDeclareOptions::default()
                    },
                    FieldTable::default(),
                )
                .await
                .map_err(|source| RabbitError::Declare {
                    exchange: exchange.clone(),
                    durable: self.config.durable,
                    source,
                })?;
        }
        let queue = channel
            .queue_declare(
                "".into(),
                QueueDeclareOptions {
                    exclusive: true,
                    auto_delete: true,
                    ..QueueDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await
            .map_err(step("declaring our exclusive queue".into()))?;
        let queue = queue.name().as_str().to_owned();
        for exchange in &self.config.exchanges {
            channel
                .queue_bind(
                    queue.as_str().into(),
                    exchange.as_str().into(),
                    ROUTING_KEY.into(),
                    QueueBindOptions::default(),
                    FieldTable::default(),
                )
                .await
                .map_err(step(format!("binding {queue} to {exchange:?}")))?;
        }
        let consumer = channel
            .basic_consume(
                queue.as_str().into(),
                "".into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await
            .map_err(step(format!("consuming from {queue}")))?;
        Ok(Subscription {
            _connection: connection,
            consumer,
            queue,
        })
    }

    /// Handles deliveries until the stream fails (`Some`) or `cancel`
    /// (`None`).
    async fn consume(
        &self,
        mut sub: Subscription,
        sink: &dyn Sink,
        cancel: &CancellationToken,
    ) -> Option<RabbitError> {
        let mut warned = false;
        loop {
            let next = tokio::select! {
                () = cancel.cancelled() => return None,
                next = sub.consumer.next() => next,
            };
            let delivery = match next {
                Some(Ok(d)) => d,
                Some(Err(e)) => return Some(RabbitError::Consume(e)),
                None => return Some(RabbitError::Closed),
            };
            handle(&delivery.data, &self.metrics, sink, &mut warned);
            if let Err(e) = delivery.acker.ack(BasicAckOptions::default()).await {
                return Some(RabbitError::Consume(e));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_never_reach_a_log_line() {
        assert_eq!(
            redact("amqp://user:s3cret@rabbit:5672/%2f"),
            "amqp://rabbit:5672/%2f"
        );
        assert_eq!(redact("amqps://h:5671/"), "amqps://h:5671/");
        let c = RabbitMqConfig {
            url: "amqp://u:s3cret@h/".into(),
            exchanges: vec!["neutron".into()],
            durable: false,
            ca_file: None,
        };
        assert!(!format!("{c:?}").contains("s3cret"));
    }

    #[test]
    fn no_exchange_or_a_bad_ca_file_is_refused_at_start() {
        let m = crate::NotifyMetrics::default().transport(crate::Transport::RabbitMq);
        let mut c = RabbitMqConfig {
            url: "amqps://h/".into(),
            exchanges: Vec::new(),
            durable: false,
            ca_file: None,
        };
        assert!(RabbitMqConsumer::new(c.clone(), m.clone()).is_err());
        c.exchanges = vec!["neutron".into()];
        c.ca_file = Some("/nonexistent/ca.pem".into());
        let e = RabbitMqConsumer::new(c, m).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/ca.pem"), "{e}");
    }
}
