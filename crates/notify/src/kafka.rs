//! The Kafka consumer (DESIGN §8), on rskafka: no consumer group, because
//! every agent must see every event — a group would share the partitions
//! out and each agent would see only some.
//!
//! Every partition of the topic is read, from the end (the high watermark) for the
//! partitions there at start (cold start already covered history) and from
//! the earliest for partitions that appear later (everything in them is
//! newer than our start). Offsets live in memory across reconnections, so
//! a broker that comes back with its log loses us nothing; one that comes
//! back without it (a truncated, reset or recreated log) is an offset
//! reset: reading restarts at the end and a gap kick covers the hole. The
//! partition list is re-read every [`RELIST`]; leadership changes are
//! followed by the client (a partition's requests go to its current
//! leader), and a failure that outlasts the client's own retries drops
//! the connection, which is rebuilt with backoff (1 s … 30 s).

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use lachesis_config::{form, Choice, Secret};
use rskafka::client::error::{Error as ClientError, ProtocolError};
use rskafka::client::partition::{OffsetAt, PartitionClient, UnknownTopicHandling};
use rskafka::client::{Client, ClientBuilder, Credentials, SaslConfig};
use rskafka::BackoffConfig;
use serde::{Deserialize, Serialize};
use serde_inline_default::serde_inline_default;
use serde_with::serde_as;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::metrics::{ErrorKind, TransportMetrics};
use crate::tls::{client_config, SetupError};
use crate::{backoff, gap, handle, Gap, Sink};

/// How often the topic's partition list is re-read.
pub const RELIST: Duration = Duration::from_secs(30);

/// How long one fetch waits on the broker for a record.
const FETCH_WAIT_MS: i32 = 500;

/// How long any one request may take, the client's own retries included.
/// The client nests retry loops (a fetch retries a metadata request that
/// retries a connection), so its deadlines add up; this bound is what
/// makes an outage visible within seconds.
const REQUEST_LIMIT: Duration = Duration::from_secs(8);

/// The most one fetch of one partition returns.
const FETCH_MAX_BYTES: i32 = 8 << 20;

/// A fetch that returns nothing sooner than this means the broker does not
/// hold fetches open; the partition then pauses [`EMPTY_PAUSE`] so an idle
/// topic is not polled in a tight loop.
const EMPTY_FAST: Duration = Duration::from_millis(50);
const EMPTY_PAUSE: Duration = Duration::from_millis(100);

/// `notifications.kafka.*` (DESIGN §8, §13): the section as written, one
/// field per key.
#[serde_inline_default]
#[serde_as]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping of kafka keys")]
pub struct KafkaConfig {
    /// Bootstrap brokers, `host:port`. Required.
    #[serde_as(as = "form::List<form::Broker>")]
    pub brokers: Vec<String>,
    /// The notifications topic.
    #[serde_inline_default("notifications.info".to_owned())]
    #[serde_as(as = "form::Topic")]
    pub topic: String,
    /// TLS to the brokers (off unless enabled).
    #[serde(default)]
    pub tls: KafkaTls,
    /// SASL; `None`: no authentication.
    pub sasl: Option<Sasl>,
}

/// `notifications.kafka.tls.*`.
#[serde_inline_default]
#[serde_as]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping of tls keys")]
pub struct KafkaTls {
    /// Connect with TLS; the files below are refused while this is off.
    #[serde_inline_default(false)]
    #[serde_as(as = "form::Bool")]
    pub enabled: bool,
    /// CA bundle; `None`: the system roots.
    #[serde_as(as = "Option<form::Path>")]
    pub ca_file: Option<PathBuf>,
    /// Client certificate (PEM chain) for mutual TLS, with `key_file`.
    #[serde_as(as = "Option<form::Path>")]
    pub cert_file: Option<PathBuf>,
    /// Client private key (PEM), with `cert_file`.
    #[serde_as(as = "Option<form::Path>")]
    pub key_file: Option<PathBuf>,
}

impl Default for KafkaTls {
    fn default() -> Self {
        lachesis_config::defaults()
    }
}

/// The SASL mechanisms offered (all three are built into rskafka).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaslMechanism {
    /// `PLAIN`: the password crosses the wire, so use TLS with it.
    Plain,
    /// `SCRAM-SHA-256`.
    ScramSha256,
    /// `SCRAM-SHA-512`.
    ScramSha512,
}

/// `notifications.kafka.sasl.mechanism`.
impl Choice for SaslMechanism {
    const ALL: &'static [Self] = &[
        SaslMechanism::Plain,
        SaslMechanism::ScramSha256,
        SaslMechanism::ScramSha512,
    ];
    const LABEL: &'static str = "plain | scram-sha-256 | scram-sha-512";

    fn word(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "plain",
            SaslMechanism::ScramSha256 => "scram-sha-256",
            SaslMechanism::ScramSha512 => "scram-sha-512",
        }
    }
}

/// `notifications.kafka.sasl.*`: all three keys required.
#[serde_as]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping of sasl keys")]
pub struct Sasl {
    /// The mechanism.
    #[serde_as(as = "form::OneOf")]
    pub mechanism: SaslMechanism,
    /// User name.
    #[serde_as(as = "form::Text")]
    pub username: String,
    /// Password; exposed only to the client's credentials.
    pub password: Secret,
}

impl Sasl {
    fn config(&self) -> SaslConfig {
        let c = Credentials::new(self.username.clone(), self.password.expose().to_owned());
        match self.mechanism {
            SaslMechanism::Plain => SaslConfig::Plain(c),
            SaslMechanism::ScramSha256 => SaslConfig::ScramSha256(c),
            SaslMechanism::ScramSha512 => SaslConfig::ScramSha512(c),
        }
    }
}

/// Why a connection ended.
#[derive(Debug, thiserror::Error)]
pub enum KafkaError {
    /// A client request failed past the client's own retries.
    #[error("{step}: {source}")]
    Client {
        /// What was being done.
        step: String,
        /// rskafka's error.
        source: ClientError,
    },
    /// A request took longer than [`REQUEST_LIMIT`].
    #[error("{step}: no answer within {REQUEST_LIMIT:?}")]
    Timeout {
        /// What was being done.
        step: String,
    },
    /// The topic is not on the brokers.
    #[error("topic {0:?} does not exist on the brokers")]
    NoTopic(String),
}

/// `request`, bounded by [`REQUEST_LIMIT`], its error named by `step`.
async fn bounded<T>(
    step: impl Into<String>,
    request: impl std::future::Future<Output = Result<T, ClientError>>,
) -> Result<T, KafkaError> {
    let step = step.into();
    match tokio::time::timeout(REQUEST_LIMIT, request).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(source)) => Err(KafkaError::Client { step, source }),
        Err(_) => Err(KafkaError::Timeout { step }),
    }
}

/// Where one partition is, across reconnections.
#[derive(Debug, Clone, Copy)]
struct Position {
    /// The next offset to read.
    next: i64,
    /// The high watermark last seen.
    high: i64,
}

/// Every partition's position, shared by the partitions' loops (locked
/// only between awaits).
#[derive(Debug, Default)]
struct Positions {
    by_partition: Mutex<BTreeMap<i32, Position>>,
}

impl Positions {
    fn get(&self, p: i32) -> Option<Position> {
        self.lock().get(&p).copied()
    }

    fn set(&self, p: i32, pos: Position) {
        self.lock().insert(p, pos);
    }

    /// Messages behind the high watermarks, over every partition.
    fn lag(&self) -> i64 {
        self.lock().values().map(|p| (p.high - p.next).max(0)).sum()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<i32, Position>> {
        self.by_partition
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// A consumer, built once from its configuration.
#[derive(Debug)]
pub struct KafkaConsumer {
    config: KafkaConfig,
    tls: Option<Arc<rustls::ClientConfig>>,
    metrics: TransportMetrics,
}

/// How one connection ended without an error.
enum Ended {
    Cancelled,
    PartitionsChanged,
}

impl KafkaConsumer {
    /// Reads the TLS files, if any.
    ///
    /// # Errors
    /// A TLS file cannot be read or used; no broker.
    pub fn new(config: KafkaConfig, metrics: TransportMetrics) -> Result<Self, SetupError> {
        if config.brokers.is_empty() {
            return Err(SetupError::Setting(
                "notifications.kafka.brokers is empty".into(),
            ));
        }
        let t = &config.tls;
        let tls = t
            .enabled
            .then(|| {
                client_config(
                    t.ca_file.as_deref(),
                    t.cert_file.as_deref().zip(t.key_file.as_deref()),
                )
            })
            .transpose()?;
        Ok(KafkaConsumer {
            config,
            tls,
            metrics,
        })
    }

    /// Consumes until `cancel`, reconnecting with backoff.
    pub async fn run(&self, sink: &dyn Sink, cancel: CancellationToken) {
        let positions = Positions::default();
        let mut failures = 0u32;
        let mut connected = false;
        loop {
            let ended = self
                .connection(&positions, sink, &cancel, &mut connected)
                .await;
            self.metrics.connected(false);
            let e = match ended {
                Ok(Ended::Cancelled) => return,
                Ok(Ended::PartitionsChanged) => {
                    info!(topic = self.config.topic, "Kafka topic partitions changed");
                    continue;
                }
                Err(e) => e,
            };
            if std::mem::take(&mut connected) {
                failures = 0;
            }
            self.metrics.error(ErrorKind::Transport);
            let wait = backoff(failures);
            failures = failures.saturating_add(1);
            warn!(brokers = ?self.config.brokers, topic = self.config.topic, error = %e, retry_in = ?wait,
                "Kafka consumer disconnected");
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    fn client_builder(&self) -> ClientBuilder {
        // Bounded retries inside the client: an outage surfaces here (the
        // connected gauge drops, our backoff applies) instead of being
        // retried silently for minutes.
        let mut b = ClientBuilder::new(self.config.brokers.clone())
            .client_id("lachesis")
            .backoff_config(BackoffConfig {
                init_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_secs(1),
                base: 2.0,
                deadline: Some(Duration::from_secs(3)),
            });
        if let Some(tls) = &self.tls {
            b = b.tls_config(tls.clone());
        }
        if let Some(sasl) = &self.config.sasl {
            b = b.sasl_config(sasl.config());
        }
        b
    }

    async fn partitions(&self, client: &Client) -> Result<BTreeSet<i32>, KafkaError> {
        let topics = bounded("listing topics", client.list_topics()).await?;
        topics
            .into_iter()
            .find(|t| t.name == self.config.topic)
            .map(|t| t.partitions)
            .ok_or_else(|| KafkaError::NoTopic(self.config.topic.clone()))
    }

    /// One connection: the partitions found, each read until an error,
    /// a change of the partition list, or `cancel`.
    async fn connection(
        &self,
        positions: &Positions,
        sink: &dyn Sink,
        cancel: &CancellationToken,
        connected: &mut bool,
    ) -> Result<Ended, KafkaError> {
        let topic = &self.config.topic;
        let client = tokio::select! {
            () = cancel.cancelled() => return Ok(Ended::Cancelled),
            c = bounded("connecting", self.client_builder().build()) => c?,
        };
        let partitions = self.partitions(&client).await?;
        // The first listing starts at the end; a partition first seen later
        // holds only messages newer than our start.
        let from_end = positions.lock().is_empty();
        let mut readers = Vec::new();
        for &p in &partitions {
            let pc = bounded(
                format!("partition {p}"),
                client.partition_client(topic.clone(), p, UnknownTopicHandling::Error),
            )
            .await?;
            if positions.get(p).is_none() {
                let step = format!("partition {p} offset");
                let next = if from_end {
                    bounded(step, end_of(&pc)).await?
                } else {
                    bounded(step, pc.get_offset(OffsetAt::Earliest)).await?
                };
                positions.set(p, Position { next, high: next });
            }
            readers.push(pc);
        }
        self.metrics.connected(true);
        self.metrics.lag(topic, positions.lag());
        info!(brokers = ?self.config.brokers, topic, partitions = ?partitions, "Kafka consumer reading");
        *connected = true;
        let loops = futures::future::try_join_all(
            readers
                .iter()
                .map(|pc| self.read_partition(pc, positions, sink)),
        );
        let relist = async {
            loop {
                tokio::time::sleep(RELIST).await;
                if self.partitions(&client).await? != partitions {
                    return Ok::<_, KafkaError>(());
                }
            }
        };
        tokio::select! {
            () = cancel.cancelled() => Ok(Ended::Cancelled),
            r = relist => r.map(|()| Ended::PartitionsChanged),
            r = loops => match r {
                Err(e) => Err(e),
                Ok(never) => match never.into_iter().next() {
                    Some(n) => match n {},
                    // No partition at all: nothing to read until it changes.
                    None => std::future::pending().await,
                },
            },
        }
    }

    /// Reads one partition until an error.
    async fn read_partition(
        &self,
        pc: &PartitionClient,
        positions: &Positions,
        sink: &dyn Sink,
    ) -> Result<Infallible, KafkaError> {
        let p = pc.partition();
        let topic = &self.config.topic;
        let mut warned = false;
        loop {
            let mut pos = positions
                .get(p)
                .expect("a position is set before a partition is read");
            let asked = Instant::now();
            match tokio::time::timeout(
                REQUEST_LIMIT,
                pc.fetch_records(pos.next, 1..FETCH_MAX_BYTES, FETCH_WAIT_MS),
            )
            .await
            .map_err(|_| KafkaError::Timeout {
                step: format!("fetching partition {p}"),
            })? {
                Ok((records, high)) => {
                    // The backlog as fetched, before it is handled.
                    pos.high = high;
                    positions.set(p, pos);
                    self.metrics.lag(topic, positions.lag());
                    let empty = records.is_empty();
                    if empty && high < pos.next {
                        // The log is shorter than what we read: rewritten.
                        pos.next = high;
                        positions.set(p, pos);
                        gap(&self.metrics, sink, Gap::OffsetReset);
                    }
                    for r in records {
                        if r.offset < pos.next {
                            continue;
                        }
                        pos.next = r.offset + 1;
                        if let Some(v) = r.record.value.as_deref() {
                            handle(v, &self.metrics, sink, &mut warned);
                        } else {
                            // A record with no value is no notification.
                            self.metrics.received();
                            self.metrics.error(ErrorKind::Decode);
                        }
                    }
                    positions.set(p, pos);
                    self.metrics.lag(topic, positions.lag());
                    if empty && asked.elapsed() < EMPTY_FAST {
                        tokio::time::sleep(EMPTY_PAUSE).await;
                    }
                }
                Err(ClientError::ServerError {
                    protocol_error: ProtocolError::OffsetOutOfRange,
                    ..
                }) => {
                    let next = bounded(format!("partition {p} offset"), end_of(pc)).await?;
                    warn!(
                        topic,
                        partition = p,
                        from = pos.next,
                        to = next,
                        "Kafka offset out of range: reading on from the end"
                    );
                    positions.set(p, Position { next, high: next });
                    self.metrics.lag(topic, positions.lag());
                    gap(&self.metrics, sink, Gap::OffsetReset);
                }
                Err(source) => {
                    return Err(KafkaError::Client {
                        step: format!("fetching partition {p}"),
                        source,
                    })
                }
            }
        }
    }
}

/// The offset the next message of a partition will get: the high
/// watermark, read off a fetch. (Not `ListOffsets` "latest": tansu, the
/// test broker, answers it with the last message's offset, one less than
/// Kafka does; the high watermark means the same on both.)
async fn end_of(pc: &PartitionClient) -> Result<i64, ClientError> {
    // Asked at "latest", the fetch returns at most the last message (on
    // tansu) or nothing after a short wait (on Kafka), and the watermark.
    let latest = pc.get_offset(OffsetAt::Latest).await?;
    let (_, high) = pc.fetch_records(latest, 1..FETCH_MAX_BYTES, 100).await?;
    Ok(high)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_is_never_shown() {
        let s = Sasl {
            mechanism: SaslMechanism::ScramSha512,
            username: "lachesis".into(),
            password: Secret::new("s3cret"),
        };
        assert!(!format!("{s:?}").contains("s3cret"));
        assert!(matches!(s.config(), SaslConfig::ScramSha512(_)));
        assert_eq!(SaslMechanism::LABEL, SaslMechanism::words().join(" | "));
    }

    #[test]
    fn lag_sums_every_partition_and_never_goes_negative() {
        let p = Positions::default();
        p.set(0, Position { next: 5, high: 9 });
        p.set(1, Position { next: 3, high: 3 });
        p.set(2, Position { next: 7, high: 2 });
        assert_eq!(p.lag(), 4);
    }

    #[test]
    fn no_broker_or_a_bad_tls_file_is_refused_at_start() {
        let m = crate::NotifyMetrics::default().transport(crate::Transport::Kafka);
        let mut c = KafkaConfig {
            brokers: Vec::new(),
            topic: "notifications.info".into(),
            tls: KafkaTls::default(),
            sasl: None,
        };
        assert!(KafkaConsumer::new(c.clone(), m.clone()).is_err());
        c.brokers = vec!["127.0.0.1:9092".into()];
        c.tls = KafkaTls {
            enabled: true,
            ca_file: Some("/nonexistent/ca.pem".into()),
            ..KafkaTls::default()
        };
        let e = KafkaConsumer::new(c.clone(), m.clone()).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/ca.pem"), "{e}");
        c.tls = KafkaTls {
            enabled: true,
            ..KafkaTls::default()
        };
        assert!(KafkaConsumer::new(c, m).is_ok(), "system roots");
    }
}
