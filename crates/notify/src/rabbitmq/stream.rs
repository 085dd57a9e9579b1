//! The state stream on a `RabbitMQ` stream queue (DESIGN §17, decision
//! 0008): `lachesis relay` writes one record per `OpenStack` resource,
//! agents read them.
//!
//! The transport is AMQP 0-9-1 on a stream queue (`RabbitMQ` ≥ 3.9: no
//! plugin, no second port, the URL, TLS and failover of the notification
//! consumer). A stream queue is an append-only log: consuming does not
//! remove anything, every delivery carries its position in the
//! `x-stream-offset` header, and a consumer chooses where it starts
//! ([`Start`]). Retention is by age (`x-max-age`), applied to whole
//! segments; there is no compaction, which is why the relay writes full
//! snapshots (DESIGN §17).
//!
//! [`StreamWriter`] (the relay) declares the stream and publishes with
//! publisher confirms: [`StreamWriter::publish_batch`] returns once the
//! broker has stored every record of the batch. [`StreamReader`] (an
//! agent) declares nothing, so read permission on the one queue is all an
//! agent's user needs. Neither reconnects: an error means drop it and
//! open a new one, a reader from [`Start::after`] the last offset it saw.

use std::fmt;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::StreamExt as _;
use lachesis_config::form;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, QueueDeclareOptions,
};
use lapin::protocol::{AMQPErrorKind, AMQPSoftError};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Channel, Confirmation, Connection};
use serde::{Deserialize, Serialize};
use serde_inline_default::serde_inline_default;
use serde_with::serde_as;

use super::connect::{connect, each_host, tls_config, Won, ATTEMPT_TIMEOUT};
use super::url::RabbitUrl;
use crate::tls::SetupError;

/// The stream's name unless configured.
pub const DEFAULT_STREAM: &str = "lachesis.state";

/// How long records are kept unless configured: two snapshot intervals of
/// the relay's default (DESIGN §17).
pub const DEFAULT_MAX_AGE: Duration = Duration::from_hours(2);

/// Unacknowledged deliveries a reader lets the broker send ahead
/// (measured: decision 0008).
pub const PREFETCH: u16 = 1000;

/// A reader acknowledges every this many deliveries at once (measured:
/// decision 0008). On a stream an acknowledgement removes nothing: it only
/// gives the broker credit to send more.
pub const ACK_EVERY: u16 = PREFETCH / 2;

/// The longest record key: it travels in the AMQP `message_id`, a short
/// string.
pub const MAX_KEY_BYTES: usize = 255;

/// The state stream's section: the broker and the stream (where the
/// agent's configuration puts it is its owner's choice). TLS follows from
/// the URL, as for the notification consumer.
#[serde_inline_default]
#[serde_as]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping of stream keys")]
pub struct StreamConfig {
    /// The brokers (an oslo transport URL or an AMQP URI, each with one or
    /// more hosts of one cluster); every password is redacted wherever it
    /// is shown. Required.
    pub url: RabbitUrl,
    /// The stream queue's name.
    #[serde_inline_default(DEFAULT_STREAM.to_owned())]
    #[serde_as(as = "form::Text")]
    pub stream: String,
    /// Retention (`x-max-age`, whole seconds, a fraction rounded up): the
    /// broker deletes a segment once all of it is older. Set by the writer
    /// when it creates the stream (whether the broker refuses a stream
    /// that exists with another age is not tested here; a policy is the
    /// way to change it).
    #[serde_inline_default(DEFAULT_MAX_AGE)]
    #[serde_as(as = "form::Duration")]
    pub max_age: Duration,
    /// CA bundle for TLS; `None`: the system roots.
    #[serde_as(as = "Option<form::Path>")]
    pub ca_file: Option<PathBuf>,
    /// The host tried first (an index of the URL's hosts, taken modulo
    /// their count; no key): drawn at random by an owner with many
    /// readers, so that they spread over the cluster's nodes.
    #[serde(skip)]
    pub first_host: usize,
}

impl StreamConfig {
    /// The defaults for `url`.
    #[must_use]
    pub fn new(url: RabbitUrl) -> StreamConfig {
        StreamConfig {
            url,
            stream: DEFAULT_STREAM.to_owned(),
            max_age: DEFAULT_MAX_AGE,
            ca_file: None,
            first_host: 0,
        }
    }

    /// `x-max-age` as `RabbitMQ` spells it: `7200s`.
    #[must_use]
    pub fn max_age_arg(&self) -> String {
        let secs = self.max_age.as_secs() + u64::from(self.max_age.subsec_nanos() > 0);
        format!("{}s", secs.max(1))
    }
}

/// Where a reader starts (`x-stream-offset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// The oldest record the broker still holds.
    First,
    /// The start of the last chunk written (the broker's unit of storage:
    /// one or more records written together), not only the last record.
    Last,
    /// Only records written after the subscription.
    Next,
    /// The record at this offset (or the first kept after it, if it was
    /// removed by retention). The broker reads from the start of the
    /// chunk holding it; the reader skips any record before it.
    Offset(u64),
    /// The first chunk written at or after this time (whole seconds): the
    /// broker's granularity is the chunk, so records a little older than
    /// the time may come first.
    Timestamp(SystemTime),
}

impl Start {
    /// Right after `offset`: where a reader that saw `offset` last
    /// continues.
    #[must_use]
    pub fn after(offset: u64) -> Start {
        Start::Offset(offset.saturating_add(1))
    }

    fn argument(self) -> AMQPValue {
        let word = |w: &str| AMQPValue::LongString(w.into());
        match self {
            Start::First => word("first"),
            Start::Last => word("last"),
            Start::Next => word("next"),
            Start::Offset(o) => AMQPValue::LongLongInt(i64::try_from(o).unwrap_or(i64::MAX)),
            Start::Timestamp(t) => AMQPValue::Timestamp(unix_seconds(t)),
        }
    }
}

/// One record read from the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// Its position in the stream; increasing, not always by one (a
    /// gap is a removed or a non-record entry).
    pub offset: u64,
    /// The record's key (`<kind>/<id>`), from the AMQP `message_id`.
    pub key: String,
    /// The record.
    pub body: Vec<u8>,
    /// When the writer published it (whole seconds), if it said.
    pub timestamp: Option<SystemTime>,
}

/// Why the stream could not be opened, written or read. Hosts are named
/// `host:port`, never with credentials.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// The CA file cannot be used.
    #[error("stream {stream:?}: {source}")]
    Setup {
        /// The stream.
        stream: String,
        /// What is wrong with the file.
        source: SetupError,
    },
    /// Connecting, logging in, opening the vhost or the channel failed.
    #[error("connecting to {host} for stream {stream:?}: {source}")]
    Connect {
        /// The broker.
        host: String,
        /// The stream.
        stream: String,
        /// lapin's error.
        source: Box<lapin::Error>,
    },
    /// The host did not connect (and declare or subscribe) within
    /// [`ATTEMPT_TIMEOUT`].
    #[error("{host} did not open stream {stream:?} within {ATTEMPT_TIMEOUT:?}")]
    TimedOut {
        /// The broker.
        host: String,
        /// The stream.
        stream: String,
    },
    /// The writer's declaration was refused: `PRECONDITION_FAILED` means
    /// a queue of that name exists with other arguments.
    #[error("declaring stream {stream:?} (x-max-age {max_age}) on {host}: {source}; if the broker says PRECONDITION_FAILED a queue of that name exists with another type or max_age")]
    Declare {
        /// The broker.
        host: String,
        /// The stream.
        stream: String,
        /// The retention asked for.
        max_age: String,
        /// lapin's error.
        source: Box<lapin::Error>,
    },
    /// A reader found no queue of that name (`NOT_FOUND`).
    #[error("stream {stream:?} does not exist on {host}: the relay (lachesis relay) creates it; is one running against this broker and vhost, with the same stream name?")]
    MissingStream {
        /// The broker.
        host: String,
        /// The stream.
        stream: String,
    },
    /// The broker refused the user (`ACCESS_REFUSED`, 403): a wrong
    /// password, or no permission on the queue.
    #[error("{host} refused {doing} stream {stream:?}: {source}")]
    Refused {
        /// The broker.
        host: String,
        /// The stream.
        stream: String,
        /// What was refused.
        doing: Step,
        /// lapin's error, with the broker's words.
        source: Box<lapin::Error>,
    },
    /// Setting the prefetch or subscribing failed, the delivery stream
    /// failed, or an acknowledgement could not be sent.
    #[error("consuming stream {stream:?} on {host}: {source}")]
    Consume {
        /// The broker.
        host: String,
        /// The stream.
        stream: String,
        /// lapin's error.
        source: Box<lapin::Error>,
    },
    /// A record could not be sent, or its confirmation was lost with the
    /// connection.
    #[error("publishing to stream {stream:?} on {host}: {source}")]
    Publish {
        /// The broker.
        host: String,
        /// The stream.
        stream: String,
        /// lapin's error.
        source: Box<lapin::Error>,
    },
    /// The broker refused (nacked) or returned (no such queue) records of
    /// a batch: they were not stored.
    #[error(
        "{host} did not confirm {unconfirmed} of the {sent} records published to stream {stream:?}"
    )]
    NotConfirmed {
        /// The broker.
        host: String,
        /// The stream.
        stream: String,
        /// Records nacked or returned.
        unconfirmed: usize,
        /// Records in the batch.
        sent: usize,
    },
    /// A record key longer than [`MAX_KEY_BYTES`]; nothing of the batch
    /// was sent.
    #[error("record key of {len} bytes for stream {stream:?}: at most {MAX_KEY_BYTES}")]
    KeyTooLong {
        /// The stream.
        stream: String,
        /// The key's length.
        len: usize,
    },
    /// A delivery without an `x-stream-offset` header: the queue is not a
    /// stream (a classic queue would also lose what is read).
    #[error("a delivery from {stream:?} on {host} has no x-stream-offset: the queue is not a stream queue (x-queue-type: stream)")]
    NotAStream {
        /// The broker.
        host: String,
        /// The stream.
        stream: String,
    },
    /// The broker ended the subscription (the channel or the connection
    /// closed).
    #[error("{host} closed the subscription to stream {stream:?}")]
    Closed {
        /// The broker.
        host: String,
        /// The stream.
        stream: String,
    },
    /// Every host of the URL failed to connect, each for its reason.
    #[error("no host opened stream {stream:?}: {}", Failures(failed))]
    Unreachable {
        /// The stream.
        stream: String,
        /// Each host's error, in the order tried.
        failed: Vec<StreamError>,
    },
}

/// What a refused request was doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Logging in (a wrong user or password, or no access to the vhost).
    Login,
    /// Declaring the stream (configure permission).
    Declare,
    /// Consuming (read permission).
    Consume,
    /// Publishing (write permission on the default exchange).
    Publish,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(match self {
            Step::Login => "the login for",
            Step::Declare => "declaring",
            Step::Consume => "consuming",
            Step::Publish => "publishing to",
        })
    }
}

/// `error; error` for [`StreamError::Unreachable`].
struct Failures<'a>(&'a [StreamError]);

impl fmt::Display for Failures<'_> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl StreamError {
    /// Whether the broker answered for the whole cluster (the stream, the
    /// user and the permissions are the cluster's): another host would
    /// say the same.
    fn is_the_clusters(&self) -> bool {
        matches!(
            self,
            StreamError::MissingStream { .. }
                | StreamError::Refused { .. }
                | StreamError::Declare { .. }
                | StreamError::NotAStream { .. }
        )
    }
}

/// The broker's soft error code in a lapin error, if it closed the channel
/// or the connection with one.
fn soft_error(e: &lapin::Error) -> Option<AMQPSoftError> {
    match e.kind() {
        lapin::ErrorKind::ProtocolError(p) => match p.kind() {
            AMQPErrorKind::Soft(s) => Some(s.clone()),
            AMQPErrorKind::Hard(_) => None,
        },
        _ => None,
    }
}

/// One host and stream: the error constructors.
#[derive(Debug, Clone)]
struct At {
    host: String,
    stream: String,
}

impl At {
    /// `ACCESS_REFUSED` as [`StreamError::Refused`], anything else as
    /// `otherwise` makes it.
    fn refused_or(
        &self,
        doing: Step,
        source: lapin::Error,
        otherwise: impl FnOnce(String, String, Box<lapin::Error>) -> StreamError,
    ) -> StreamError {
        let (host, stream, source) = (self.host.clone(), self.stream.clone(), Box::new(source));
        if soft_error(&source) == Some(AMQPSoftError::ACCESSREFUSED) {
            return StreamError::Refused {
                host,
                stream,
                doing,
                source,
            };
        }
        otherwise(host, stream, source)
    }

    fn connect(&self, source: lapin::Error) -> StreamError {
        self.refused_or(Step::Login, source, |host, stream, source| {
            StreamError::Connect {
                host,
                stream,
                source,
            }
        })
    }

    fn declare(&self, max_age: String, source: lapin::Error) -> StreamError {
        self.refused_or(Step::Declare, source, |host, stream, source| {
            StreamError::Declare {
                host,
                stream,
                max_age,
                source,
            }
        })
    }

    fn consume(&self, source: lapin::Error) -> StreamError {
        if soft_error(&source) == Some(AMQPSoftError::NOTFOUND) {
            return StreamError::MissingStream {
                host: self.host.clone(),
                stream: self.stream.clone(),
            };
        }
        self.refused_or(Step::Consume, source, |host, stream, source| {
            StreamError::Consume {
                host,
                stream,
                source,
            }
        })
    }

    fn publish(&self, source: lapin::Error) -> StreamError {
        self.refused_or(Step::Publish, source, |host, stream, source| {
            StreamError::Publish {
                host,
                stream,
                source,
            }
        })
    }

    fn closed(&self) -> StreamError {
        StreamError::Closed {
            host: self.host.clone(),
            stream: self.stream.clone(),
        }
    }
}

/// Opens `open` on the config's hosts, one after the other from
/// `first_host`, until one succeeds. When all fail: the first answer that
/// holds for the whole cluster (a missing stream, a refusal), else the one
/// host's error, else every host's.
async fn on_some_host<T, F, Fut>(config: &StreamConfig, open: F) -> Result<T, StreamError>
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = Result<T, StreamError>>,
{
    let hosts = config.url.hosts();
    let round = each_host(
        hosts.len(),
        config.first_host % hosts.len().max(1),
        open,
        |i| StreamError::TimedOut {
            host: hosts[i].to_string(),
            stream: config.stream.clone(),
        },
        |_, _| {},
    );
    match round.await {
        Ok(Won { made, .. }) => Ok(made),
        Err(mut failed) => {
            if let Some(i) = failed.iter().position(|(_, e)| e.is_the_clusters()) {
                return Err(failed.swap_remove(i).1);
            }
            if failed.len() == 1 {
                return Err(failed.remove(0).1);
            }
            Err(StreamError::Unreachable {
                stream: config.stream.clone(),
                failed: failed.into_iter().map(|(_, e)| e).collect(),
            })
        }
    }
}

/// A connection and its one channel on host `i` of the config's URL.
async fn channel_on(
    config: &StreamConfig,
    tls: &lapin::tcp::OwnedTLSConfig,
    i: usize,
) -> Result<(Connection, Channel, At), StreamError> {
    let broker = &config.url.hosts()[i];
    let at = At {
        host: broker.to_string(),
        stream: config.stream.clone(),
    };
    let connection = connect(&config.url, broker, tls)
        .await
        .map_err(|e| at.connect(e))?;
    let channel = connection
        .create_channel()
        .await
        .map_err(|e| at.connect(e))?;
    Ok((connection, channel, at))
}

fn setup(config: &StreamConfig) -> Result<lapin::tcp::OwnedTLSConfig, StreamError> {
    tls_config(config.ca_file.as_deref()).map_err(|source| StreamError::Setup {
        stream: config.stream.clone(),
        source,
    })
}

fn unix_seconds(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The relay's side: declares the stream and publishes confirmed batches.
#[derive(Debug)]
pub struct StreamWriter {
    _connection: Connection,
    channel: Channel,
    at: At,
}

impl StreamWriter {
    /// Connects (the URL's hosts in turn), declares the stream (durable,
    /// `x-queue-type: stream`, `x-max-age`; a no-op when it exists alike)
    /// and turns publisher confirms on.
    ///
    /// # Errors
    /// The CA file is unusable, or no host could be used
    /// ([`StreamError::Declare`]: the stream exists with other arguments).
    pub async fn open(config: &StreamConfig) -> Result<StreamWriter, StreamError> {
        let tls = setup(config)?;
        on_some_host(config, |i| Self::open_on(config, &tls, i)).await
    }

    async fn open_on(
        config: &StreamConfig,
        tls: &lapin::tcp::OwnedTLSConfig,
        i: usize,
    ) -> Result<StreamWriter, StreamError> {
        let (connection, channel, at) = channel_on(config, tls, i).await?;
        let max_age = config.max_age_arg();
        let mut arguments = FieldTable::default();
        arguments.insert(
            "x-queue-type".into(),
            AMQPValue::LongString("stream".into()),
        );
        arguments.insert(
            "x-max-age".into(),
            AMQPValue::LongString(max_age.as_str().into()),
        );
        channel
            .queue_declare(
                config.stream.as_str().into(),
                QueueDeclareOptions {
                    durable: true,
                    ..QueueDeclareOptions::default()
                },
                arguments,
            )
            .await
            .map_err(|e| at.declare(max_age, e))?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(|e| at.publish(e))?;
        Ok(StreamWriter {
            _connection: connection,
            channel,
            at,
        })
    }

    /// The broker written to (`host:port`).
    #[must_use]
    pub fn host(&self) -> &str {
        &self.at.host
    }

    /// Publishes `records` (key, body) in order through the default
    /// exchange, each key in the AMQP `message_id` and the time in its
    /// `timestamp`, and returns once the broker has confirmed every one
    /// (they are then in the stream's log). Records are sent back to back
    /// and their confirmations awaited together.
    ///
    /// # Errors
    /// A key is too long (nothing sent); sending failed; the broker
    /// nacked or returned records ([`StreamError::NotConfirmed`]: a batch
    /// that fails may be partly stored; publishing it again duplicates
    /// those, which readers that keep the newest revision absorb).
    pub async fn publish_batch(&self, records: &[(String, Vec<u8>)]) -> Result<(), StreamError> {
        if let Some((key, _)) = records.iter().find(|(k, _)| k.len() > MAX_KEY_BYTES) {
            return Err(StreamError::KeyTooLong {
                stream: self.at.stream.clone(),
                len: key.len(),
            });
        }
        let now = unix_seconds(SystemTime::now());
        let mut confirms = Vec::with_capacity(records.len());
        for (key, body) in records {
            let properties = BasicProperties::default()
                .with_message_id(key.as_str().into())
                .with_timestamp(now);
            let confirm = self
                .channel
                .basic_publish(
                    "".into(),
                    self.at.stream.as_str().into(),
                    // Mandatory: a stream deleted under us makes the
                    // default exchange return the record, not drop it.
                    BasicPublishOptions {
                        mandatory: true,
                        ..BasicPublishOptions::default()
                    },
                    body,
                    properties,
                )
                .await
                .map_err(|e| self.at.publish(e))?;
            confirms.push(confirm);
        }
        let mut unconfirmed = 0;
        for confirm in confirms {
            match confirm.await.map_err(|e| self.at.publish(e))? {
                Confirmation::Ack(None) => {}
                Confirmation::Ack(Some(_)) | Confirmation::Nack(_) | Confirmation::NotRequested => {
                    unconfirmed += 1;
                }
            }
        }
        if unconfirmed > 0 {
            return Err(StreamError::NotConfirmed {
                host: self.at.host.clone(),
                stream: self.at.stream.clone(),
                unconfirmed,
                sent: records.len(),
            });
        }
        Ok(())
    }
}

/// How a reader paces the broker: [`PREFETCH`] and [`ACK_EVERY`] unless
/// measuring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tuning {
    /// Unacknowledged deliveries in flight (at least 1: a stream refuses
    /// a consumer without a prefetch).
    pub prefetch: u16,
    /// Acknowledge every this many deliveries at once (1 to `prefetch`:
    /// more would stall the broker).
    pub ack_every: u16,
}

impl Default for Tuning {
    fn default() -> Tuning {
        Tuning {
            prefetch: PREFETCH,
            ack_every: ACK_EVERY,
        }
    }
}

/// An agent's side: reads the stream from a [`Start`].
#[derive(Debug)]
pub struct StreamReader {
    _connection: Connection,
    consumer: lapin::Consumer,
    at: At,
    /// Offsets below this are skipped ([`Start::Offset`]).
    from: u64,
    ack_every: u16,
    /// Deliveries received since the last acknowledgement.
    unacked: u16,
}

impl StreamReader {
    /// Connects (the URL's hosts in turn) and subscribes from `start`.
    /// Declares nothing: read permission on the stream is enough.
    ///
    /// # Errors
    /// The CA file is unusable, or no host could be used
    /// ([`StreamError::MissingStream`]: the relay has not created it yet).
    pub async fn open(config: &StreamConfig, start: Start) -> Result<StreamReader, StreamError> {
        StreamReader::open_tuned(config, start, Tuning::default()).await
    }

    /// [`StreamReader::open`] with another pace (for measuring).
    ///
    /// # Errors
    /// As [`StreamReader::open`].
    pub async fn open_tuned(
        config: &StreamConfig,
        start: Start,
        tuning: Tuning,
    ) -> Result<StreamReader, StreamError> {
        let tls = setup(config)?;
        on_some_host(config, |i| Self::open_on(config, &tls, i, start, tuning)).await
    }

    async fn open_on(
        config: &StreamConfig,
        tls: &lapin::tcp::OwnedTLSConfig,
        i: usize,
        start: Start,
        tuning: Tuning,
    ) -> Result<StreamReader, StreamError> {
        let prefetch = tuning.prefetch.max(1);
        let (connection, channel, at) = channel_on(config, tls, i).await?;
        channel
            .basic_qos(prefetch, BasicQosOptions::default())
            .await
            .map_err(|e| at.consume(e))?;
        let mut arguments = FieldTable::default();
        arguments.insert("x-stream-offset".into(), start.argument());
        let consumer = channel
            .basic_consume(
                config.stream.as_str().into(),
                "".into(),
                BasicConsumeOptions::default(),
                arguments,
            )
            .await
            .map_err(|e| at.consume(e))?;
        Ok(StreamReader {
            _connection: connection,
            consumer,
            at,
            from: match start {
                Start::Offset(o) => o,
                _ => 0,
            },
            ack_every: tuning.ack_every.clamp(1, prefetch),
            unacked: 0,
        })
    }

    /// The broker read from (`host:port`).
    #[must_use]
    pub fn host(&self) -> &str {
        &self.at.host
    }

    /// The next record, waiting for one to be written if the reader is at
    /// the end. Deliveries are acknowledged as they are read, several at
    /// once (an acknowledgement on a stream is only credit).
    ///
    /// # Errors
    /// The subscription failed or ended: drop the reader and open another
    /// from [`Start::after`] the last offset returned.
    pub async fn next(&mut self) -> Result<Delivery, StreamError> {
        loop {
            let delivery = match self.consumer.next().await {
                Some(Ok(d)) => d,
                Some(Err(e)) => return Err(self.at.consume(e)),
                None => return Err(self.at.closed()),
            };
            self.unacked += 1;
            if self.unacked >= self.ack_every {
                delivery
                    .acker
                    .ack(BasicAckOptions { multiple: true })
                    .await
                    .map_err(|e| self.at.consume(e))?;
                self.unacked = 0;
            }
            let offset =
                offset_of(&delivery.properties).ok_or_else(|| StreamError::NotAStream {
                    host: self.at.host.clone(),
                    stream: self.at.stream.clone(),
                })?;
            // The broker reads from the chunk holding the offset asked for.
            if offset < self.from {
                continue;
            }
            let p = &delivery.properties;
            return Ok(Delivery {
                offset,
                key: p
                    .message_id()
                    .as_ref()
                    .map(|k| k.as_str().to_owned())
                    .unwrap_or_default(),
                timestamp: p.timestamp().map(|s| UNIX_EPOCH + Duration::from_secs(s)),
                body: delivery.data,
            });
        }
    }
}

/// A delivery's `x-stream-offset` header (`RabbitMQ` sends a signed long).
fn offset_of(p: &BasicProperties) -> Option<u64> {
    let value = p.headers().as_ref()?.inner().get("x-stream-offset")?;
    match value {
        AMQPValue::LongLongInt(v) => u64::try_from(*v).ok(),
        AMQPValue::LongInt(v) => u64::try_from(*v).ok(),
        AMQPValue::LongUInt(v) => Some(u64::from(*v)),
        AMQPValue::Timestamp(v) => Some(*v),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(url: &str) -> StreamConfig {
        StreamConfig::new(RabbitUrl::parse(url).unwrap())
    }

    #[test]
    fn max_age_is_whole_seconds_as_rabbitmq_spells_it() {
        let mut c = config("amqp://u:p@h/");
        assert_eq!(c.max_age_arg(), "7200s");
        c.max_age = Duration::from_millis(1500);
        assert_eq!(c.max_age_arg(), "2s");
        c.max_age = Duration::from_millis(1);
        assert_eq!(c.max_age_arg(), "1s");
    }

    #[test]
    fn start_words_and_numbers() {
        let t = UNIX_EPOCH + Duration::from_millis(1_700_000_000_900);
        let cases = [
            (Start::First, AMQPValue::LongString("first".into())),
            (Start::Last, AMQPValue::LongString("last".into())),
            (Start::Next, AMQPValue::LongString("next".into())),
            (Start::after(41), AMQPValue::LongLongInt(42)),
            (Start::Offset(u64::MAX), AMQPValue::LongLongInt(i64::MAX)),
            (Start::Timestamp(t), AMQPValue::Timestamp(1_700_000_000)),
        ];
        for (start, want) in cases {
            assert_eq!(start.argument(), want, "{start:?}");
        }
        assert_eq!(Start::after(u64::MAX), Start::Offset(u64::MAX));
    }

    #[test]
    fn the_offset_header_is_read_as_the_broker_sends_it() {
        let with = |v: AMQPValue| {
            let mut h = FieldTable::default();
            h.insert("x-stream-offset".into(), v);
            BasicProperties::default().with_headers(h)
        };
        assert_eq!(offset_of(&with(AMQPValue::LongLongInt(7))), Some(7));
        assert_eq!(offset_of(&with(AMQPValue::LongLongInt(-1))), None);
        assert_eq!(offset_of(&with(AMQPValue::LongString("7".into()))), None);
        assert_eq!(offset_of(&BasicProperties::default()), None);
    }

    #[test]
    fn a_section_reads_with_defaults_and_refuses_typos() {
        let c: StreamConfig =
            serde_json::from_str(r#"{"url": "rabbit://agent:s3cret@h1:5672,agent:s3cret@h2/"}"#)
                .unwrap();
        assert_eq!(c.stream, DEFAULT_STREAM);
        assert_eq!(c.max_age, DEFAULT_MAX_AGE);
        assert_eq!(c.ca_file, None);
        assert!(!format!("{c:?}").contains("s3cret"));
        let c: StreamConfig = serde_json::from_str(
            r#"{"url": "amqp://u:p@h/", "stream": "s", "max_age": "30m", "ca_file": "/etc/ca.pem"}"#,
        )
        .unwrap();
        assert_eq!(
            (c.stream.as_str(), c.max_age_arg().as_str()),
            ("s", "1800s")
        );
        let e = serde_json::from_str::<StreamConfig>(r#"{"url": "amqp://u:p@h/", "max_ag": "1h"}"#)
            .unwrap_err();
        assert!(e.to_string().contains("max_ag"), "{e}");
        assert!(serde_json::from_str::<StreamConfig>(r#"{"stream": "s"}"#).is_err());
    }

    fn broker_closed(code: u16, text: &str) -> lapin::Error {
        let e = lapin::protocol::AMQPError::from_id(code, text.into()).unwrap();
        lapin::ErrorKind::ProtocolError(e).into()
    }

    #[test]
    fn the_brokers_answers_become_typed_errors_naming_host_and_stream() {
        let at = At {
            host: "h1:5672".into(),
            stream: "lachesis.state".into(),
        };
        let missing = at.consume(broker_closed(404, "NOT_FOUND - no queue 'lachesis.state'"));
        assert!(matches!(missing, StreamError::MissingStream { .. }));
        let text = missing.to_string();
        assert!(
            text.contains("h1:5672")
                && text.contains("\"lachesis.state\"")
                && text.contains("relay"),
            "{text}"
        );
        let refused = at.consume(broker_closed(403, "ACCESS_REFUSED - access to queue"));
        assert!(matches!(
            refused,
            StreamError::Refused {
                doing: Step::Consume,
                ..
            }
        ));
        assert!(matches!(
            at.connect(broker_closed(403, "ACCESS_REFUSED - Login was refused")),
            StreamError::Refused {
                doing: Step::Login,
                ..
            }
        ));
        assert!(matches!(
            at.declare("7200s".into(), broker_closed(406, "PRECONDITION_FAILED")),
            StreamError::Declare { .. }
        ));
        let reset = || std::io::Error::from(std::io::ErrorKind::ConnectionReset).into();
        assert!(matches!(at.consume(reset()), StreamError::Consume { .. }));
        assert!(matches!(at.connect(reset()), StreamError::Connect { .. }));
    }

    #[tokio::test]
    async fn every_host_is_tried_and_named_never_with_its_password() {
        let ports: Vec<u16> = (0..2)
            .map(|_| {
                let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                l.local_addr().unwrap().port()
            })
            .collect();
        let url = format!(
            "rabbit://u:s3cret@127.0.0.1:{},u:s3cret@127.0.0.1:{}/",
            ports[0], ports[1]
        );
        let e = StreamReader::open(&config(&url), Start::First)
            .await
            .unwrap_err();
        let StreamError::Unreachable { failed, .. } = &e else {
            panic!("{e:?}")
        };
        assert_eq!(failed.len(), 2);
        let text = e.to_string();
        for p in &ports {
            assert!(text.contains(&format!("127.0.0.1:{p}")), "{text}");
        }
        assert!(
            !text.contains("s3cret") && !format!("{e:?}").contains("s3cret"),
            "{text}"
        );
        let one = format!("rabbit://u:s3cret@127.0.0.1:{}/", ports[0]);
        let e = StreamWriter::open(&config(&one)).await.unwrap_err();
        assert!(matches!(e, StreamError::Connect { .. }), "{e:?}");
    }
}
