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
//! deletes the queue) and rebuilt; as events published meanwhile are lost,
//! every reconnection is a gap kick.
//!
//! The URL may list several nodes of a cluster ([`url`]). A round tries
//! them in turn, from the one after the host whose connection dropped (it
//! is the likeliest to be still down, and a black-holed host would cost a
//! whole attempt timeout at every failover); a round in which none
//! subscribes is followed by the backoff. A consumer that cannot subscribe
//! says why on `lachesis_notifications_subscribe_failing{reason}` and in
//! one error line per change ([`outage`]).

mod connect;
mod outage;
pub mod stream;
pub mod url;

use std::path::PathBuf;

use futures::StreamExt as _;
use lachesis_config::form;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicQosOptions, ExchangeDeclareOptions,
    QueueBindOptions, QueueDeclareOptions,
};
use lapin::protocol::{AMQPErrorKind, AMQPHardError, AMQPSoftError};
use lapin::tcp::OwnedTLSConfig;
use lapin::types::FieldTable;
use lapin::{Connection, ExchangeKind};
use serde::{Deserialize, Serialize};
use serde_inline_default::serde_inline_default;
use serde_with::serde_as;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use crate::metrics::{ErrorKind, SubscribeFailure, TransportMetrics};
use crate::tls::SetupError;
use crate::{backoff, gap, handle, Gap, Sink};
pub use connect::ATTEMPT_TIMEOUT;
use connect::{connect, each_host, tls_config, Won};
use outage::{OutageLog, Said};
pub use url::{BrokerHost, RabbitUrl, UrlError, REDACTED};

/// The routing key OpenStack services publish `INFO` notifications with.
pub const ROUTING_KEY: &str = "notifications.info";

/// Unacknowledged deliveries in flight at once.
const PREFETCH: u16 = 64;

/// `notifications.rabbitmq.*` (DESIGN §8, §13): the section as written,
/// one field per key. TLS follows from the URL (`amqps://`, or `?ssl=1` in
/// an oslo transport URL).
#[serde_inline_default]
#[serde_as]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping of rabbitmq keys")]
pub struct RabbitMqConfig {
    /// The brokers (an oslo transport URL or an AMQP URI, each with one or
    /// more hosts); every password is redacted wherever it is shown.
    /// Required.
    pub url: RabbitUrl,
    /// Topic exchanges the agent's queue is bound to.
    #[serde_inline_default(["neutron", "nova", "keystone", "octavia", "openstack"].map(String::from).to_vec())]
    #[serde_as(as = "form::List<form::Exchange>")]
    pub exchanges: Vec<String>,
    /// Whether the deployment declares those exchanges durable (a
    /// declaration that differs is refused by the broker).
    #[serde_inline_default(false)]
    #[serde_as(as = "form::Bool")]
    pub durable: bool,
    /// CA bundle for TLS; `None`: the system roots.
    #[serde_as(as = "Option<form::Path>")]
    pub ca_file: Option<PathBuf>,
    /// The host tried first at start (an index of the URL's hosts, taken
    /// modulo their count; no key). The agent draws it at random, as
    /// oslo.messaging shuffles its hosts, so a fleet's consumers spread over
    /// the cluster's nodes instead of all sitting on the first one listed;
    /// tests use 0.
    #[serde(skip)]
    pub first_host: usize,
}

/// Why one connection attempt or subscription ended. Hosts are named
/// `host:port`, never with credentials.
#[derive(Debug, thiserror::Error)]
pub enum RabbitError {
    /// Connecting, logging in, opening the vhost or the channel failed.
    #[error("connecting to {host}: {source}")]
    Connect {
        /// The broker.
        host: String,
        /// lapin's error.
        source: lapin::Error,
    },
    /// The host did not connect and subscribe within [`ATTEMPT_TIMEOUT`].
    #[error("{host} did not accept the connection and subscription within {ATTEMPT_TIMEOUT:?}")]
    TimedOut {
        /// The broker.
        host: String,
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

impl RabbitError {
    /// What a failed subscription tells the operator (`reason` label).
    #[must_use]
    pub fn failure(&self) -> SubscribeFailure {
        let refused = |e: &lapin::Error| match e.kind() {
            lapin::ErrorKind::ProtocolError(_) => SubscribeFailure::Declare,
            _ => SubscribeFailure::Unreachable,
        };
        match self {
            RabbitError::Connect { source, .. } => match source.kind() {
                // RabbitMQ closes the connection with ACCESS_REFUSED (403)
                // for a refused login (lapin asks for that with the
                // authentication_failure_close capability) and with
                // NOT_ALLOWED (530) for a vhost that does not exist or is
                // not the user's.
                lapin::ErrorKind::ProtocolError(e) => match e.kind() {
                    AMQPErrorKind::Soft(AMQPSoftError::ACCESSREFUSED) => SubscribeFailure::Auth,
                    AMQPErrorKind::Hard(AMQPHardError::NOTALLOWED) => SubscribeFailure::Vhost,
                    _ => SubscribeFailure::Unreachable,
                },
                lapin::ErrorKind::IOError(io) if tls_failure(io) => SubscribeFailure::Tls,
                _ => SubscribeFailure::Unreachable,
            },
            RabbitError::Declare { source, .. } | RabbitError::Subscribe { source, .. } => {
                refused(source)
            }
            RabbitError::TimedOut { .. } | RabbitError::Consume(_) | RabbitError::Closed => {
                SubscribeFailure::Unreachable
            }
        }
    }
}

/// Whether an I/O error is a TLS handshake's (rustls's error inside it,
/// at any depth: the certificate, the protocol, or TLS against a plain
/// port).
fn tls_failure(io: &std::io::Error) -> bool {
    let mut at: Option<&(dyn std::error::Error + 'static)> = io.get_ref().map(|e| e as _);
    while let Some(e) = at {
        if e.is::<rustls::Error>() {
            return true;
        }
        if let Some(inner) = e.downcast_ref::<std::io::Error>() {
            at = inner.get_ref().map(|e| e as _);
            continue;
        }
        at = e.source();
    }
    false
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

/// How a round over the hosts ended.
enum Round {
    /// Subscribed on `host` (an index), after `skipped` failed.
    Subscribed {
        host: usize,
        sub: Box<Subscription>,
        skipped: Vec<(usize, RabbitError)>,
    },
    /// Every host failed, each for its reason.
    Failed(Vec<(usize, RabbitError)>),
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
        let tls = tls_config(config.ca_file.as_deref())?;
        Ok(RabbitMqConsumer {
            config,
            tls,
            metrics,
        })
    }

    /// Consumes until `cancel`. Each round tries every host once; after a
    /// round in which none subscribed, and after a subscription that
    /// ended, it waits the backoff (1 s … 30 s: a connection that drops as
    /// soon as it is made cannot spin). Every subscription after the first
    /// is a gap kick.
    pub async fn run(&self, sink: &dyn Sink, cancel: CancellationToken) {
        let hosts = self.config.url.hosts();
        let start = self.first();
        let mut next = start;
        let mut previous: Option<usize> = None;
        let mut failures = 0u32;
        let mut outage = OutageLog::default();
        loop {
            let round = tokio::select! {
                () = cancel.cancelled() => return,
                round = self.round(next) => round,
            };
            match round {
                Round::Subscribed { host, sub, skipped } => {
                    self.metrics.connected(true);
                    self.metrics.subscribe_failing(None);
                    if let Some(Said::Recovered { rounds, down_for }) =
                        outage.subscribed(Instant::now())
                    {
                        info!(broker = %hosts[host], failed_rounds = rounds, down_for = ?down_for,
                            "RabbitMQ consumer can subscribe again");
                    }
                    // At start the host tried first is where it should be.
                    if previous.map_or(host != start, |p| p != host) {
                        self.metrics.failover();
                    }
                    if skipped.is_empty() {
                        info!(broker = %hosts[host], queue = sub.queue, exchanges = ?self.config.exchanges,
                            "RabbitMQ consumer subscribed");
                    } else {
                        warn!(broker = %hosts[host], queue = sub.queue, failed = %self.describe(&skipped),
                            "RabbitMQ consumer subscribed on another host: the ones before it failed");
                    }
                    if previous.is_some() {
                        gap(&self.metrics, sink, Gap::Reconnected);
                    }
                    previous = Some(host);
                    failures = 0;
                    let ended = self.consume(*sub, sink, &cancel).await;
                    self.metrics.connected(false);
                    let Some(e) = ended else { return };
                    self.metrics.error(ErrorKind::Transport);
                    next = (host + 1) % hosts.len();
                    warn!(broker = %hosts[host], error = %e, next = %hosts[next],
                        "RabbitMQ consumer lost its subscription");
                }
                Round::Failed(errors) => {
                    let reason = errors
                        .iter()
                        .map(|(_, e)| e.failure())
                        .max()
                        .unwrap_or(SubscribeFailure::Unreachable);
                    self.metrics.subscribe_failing(Some(reason));
                    let failed = self.describe(&errors);
                    let (r, hint) = (reason.as_str(), reason.hint());
                    match outage.round_failed(reason, Instant::now()) {
                        Some(Said::Started) => {
                            error!(reason = r, failed = %failed, hint, "RabbitMQ consumer cannot subscribe");
                        }
                        Some(Said::Changed { from }) => {
                            error!(reason = r, was = from.as_str(), failed = %failed, hint,
                                "RabbitMQ consumer cannot subscribe, for another reason");
                        }
                        Some(Said::Still { rounds, down_for }) => {
                            error!(reason = r, failed_rounds = rounds, down_for = ?down_for, failed = %failed, hint,
                                "RabbitMQ consumer still cannot subscribe");
                        }
                        Some(Said::Recovered { .. }) | None => {
                            debug!(reason = r, failed = %failed, "RabbitMQ consumer cannot subscribe");
                        }
                    }
                }
            }
            let wait = backoff(failures);
            failures = failures.saturating_add(1);
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// The index of the host tried first at start.
    fn first(&self) -> usize {
        self.config.first_host % self.config.url.hosts().len().max(1)
    }

    /// Each host once, from `first`, until one subscribes. Every failed
    /// attempt is counted as it happens.
    async fn round(&self, first: usize) -> Round {
        let hosts = self.config.url.hosts();
        let round = each_host(
            hosts.len(),
            first,
            |i| self.subscribe(i),
            |i| RabbitError::TimedOut {
                host: hosts[i].to_string(),
            },
            |_, _| self.metrics.error(ErrorKind::Transport),
        );
        match round.await {
            Ok(Won {
                host,
                made,
                skipped,
            }) => Round::Subscribed {
                host,
                sub: Box::new(made),
                skipped,
            },
            Err(failed) => Round::Failed(failed),
        }
    }

    /// `host:port: error; …` for a log line.
    fn describe(&self, errors: &[(usize, RabbitError)]) -> String {
        let hosts = self.config.url.hosts();
        errors
            .iter()
            .map(|(i, e)| format!("{}: {e}", hosts[*i]))
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// Connects to host `host` (an index of the URL's hosts), declares the
    /// exchanges and our queue, binds and starts consuming (manual acks).
    ///
    /// # Errors
    /// Any step failed ([`RabbitError`] names it).
    ///
    /// # Panics
    /// `host` is not an index of the URL's hosts.
    pub async fn subscribe(&self, host: usize) -> Result<Subscription, RabbitError> {
        let broker = &self.config.url.hosts()[host];
        let connected = |source| RabbitError::Connect {
            host: broker.to_string(),
            source,
        };
        let connection = connect(&self.config.url, broker, &self.tls)
            .await
            .map_err(connected)?;
        let channel = connection.create_channel().await.map_err(connected)?;
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
    use lapin::protocol::AMQPError;

    fn config(url: &str) -> RabbitMqConfig {
        RabbitMqConfig {
            url: RabbitUrl::parse(url).unwrap(),
            exchanges: vec!["neutron".into()],
            durable: false,
            ca_file: None,
            first_host: 0,
        }
    }

    /// Ports nothing listens on: every attempt is refused at once.
    fn closed_ports(n: usize) -> String {
        let ports: Vec<u16> = (0..n)
            .map(|_| {
                let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                l.local_addr().unwrap().port()
            })
            .collect();
        let hosts: Vec<String> = ports.iter().map(|p| format!("u:p@127.0.0.1:{p}")).collect();
        format!("rabbit://{}/", hosts.join(","))
    }

    #[tokio::test]
    async fn a_round_starts_at_the_drawn_host_and_tries_each_once() {
        let mut registry = prometheus_client::registry::Registry::default();
        let metrics =
            crate::NotifyMetrics::register(&mut registry, &[crate::Transport::RabbitMq], None)
                .transport(crate::Transport::RabbitMq);
        let mut c = config(&closed_ports(3));
        // Taken modulo the host count: 4 is host 1.
        c.first_host = 4;
        let consumer = RabbitMqConsumer::new(c, metrics).unwrap();
        assert_eq!(consumer.first(), 1);
        let Round::Failed(errors) = consumer.round(consumer.first()).await else {
            panic!("nothing listens there")
        };
        let tried: Vec<usize> = errors.iter().map(|(i, _)| *i).collect();
        assert_eq!(tried, [1, 2, 0]);
    }

    fn broker_closed(code: u16, text: &str) -> lapin::Error {
        let e = AMQPError::from_id(code, text.into()).unwrap();
        lapin::ErrorKind::ProtocolError(e).into()
    }

    #[test]
    fn credentials_never_reach_a_log_line() {
        let c = config("rabbit://u:s3cret@h1:5672,u:s3cret@h2:5673/");
        assert!(!format!("{c:?}").contains("s3cret"));
        let m = crate::NotifyMetrics::default().transport(crate::Transport::RabbitMq);
        let consumer = RabbitMqConsumer::new(c, m).unwrap();
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let line = consumer.describe(&[
            (
                0,
                RabbitError::Connect {
                    host: "h1:5672".into(),
                    source: refused.into(),
                },
            ),
            (
                1,
                RabbitError::TimedOut {
                    host: "h2:5673".into(),
                },
            ),
        ]);
        assert!(
            line.starts_with("h1:5672: connecting to h1:5672: IO error"),
            "{line}"
        );
        assert!(line.contains("; h2:5673: h2:5673 did not accept"), "{line}");
        assert!(!line.contains("s3cret"), "{line}");
    }

    #[test]
    fn a_failed_subscription_is_classified_by_what_the_broker_said() {
        let connect = |source| RabbitError::Connect {
            host: "h:5672".into(),
            source,
        };
        let cases = [
            (
                connect(broker_closed(403, "ACCESS_REFUSED - Login was refused")),
                SubscribeFailure::Auth,
            ),
            (
                connect(broker_closed(530, "NOT_ALLOWED - vhost  not found")),
                SubscribeFailure::Vhost,
            ),
            (
                connect(broker_closed(320, "CONNECTION_FORCED - shutdown")),
                SubscribeFailure::Unreachable,
            ),
            (
                connect(std::io::Error::from(std::io::ErrorKind::ConnectionRefused).into()),
                SubscribeFailure::Unreachable,
            ),
            // A certificate the CA file does not sign, as rustls-connector
            // hands it over (rustls's error inside an I/O error), and TLS
            // against a plain port; at any depth.
            (
                connect(
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
                    )
                    .into(),
                ),
                SubscribeFailure::Tls,
            ),
            (
                connect(
                    std::io::Error::other(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType),
                    ))
                    .into(),
                ),
                SubscribeFailure::Tls,
            ),
            (
                connect(std::io::Error::other("certificate").into()),
                SubscribeFailure::Unreachable,
            ),
            (
                RabbitError::TimedOut {
                    host: "h:5672".into(),
                },
                SubscribeFailure::Unreachable,
            ),
            (
                RabbitError::Declare {
                    exchange: "nova".into(),
                    durable: false,
                    source: broker_closed(406, "PRECONDITION_FAILED - inequivalent arg 'durable'"),
                },
                SubscribeFailure::Declare,
            ),
            (
                RabbitError::Subscribe {
                    step: "binding".into(),
                    source: broker_closed(403, "ACCESS_REFUSED - access to exchange"),
                },
                SubscribeFailure::Declare,
            ),
            (
                RabbitError::Subscribe {
                    step: "binding".into(),
                    source: std::io::Error::from(std::io::ErrorKind::ConnectionReset).into(),
                },
                SubscribeFailure::Unreachable,
            ),
        ];
        for (e, want) in cases {
            assert_eq!(e.failure(), want, "{e}");
        }
    }

    #[test]
    fn no_exchange_or_a_bad_ca_file_is_refused_at_start() {
        let m = crate::NotifyMetrics::default().transport(crate::Transport::RabbitMq);
        let mut c = config("amqps://h/");
        c.exchanges = Vec::new();
        assert!(RabbitMqConsumer::new(c.clone(), m.clone()).is_err());
        c.exchanges = vec!["neutron".into()];
        c.ca_file = Some("/nonexistent/ca.pem".into());
        let e = RabbitMqConsumer::new(c, m).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/ca.pem"), "{e}");
    }
}
