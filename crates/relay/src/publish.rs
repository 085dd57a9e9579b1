//! Where the relay's records go: the state stream, behind the one seam the
//! relay owns ([`Publisher`]), so a second engine (RabbitMQ stream, Kafka
//! compacted topic) is a second implementation, not a fork; and
//! [`MemoryPublisher`], the one tests read.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use lachesis_fleet::{decode, Record};
use lachesis_notify::rabbitmq::stream::{StreamConfig, StreamWriter};

/// A batch the stream did not take. The relay keeps every record of it
/// pending and offers them again (with backoff): a record is never dropped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("publishing to the state stream failed: {0}")]
pub struct PublishError(pub String);

/// The state stream, as the relay writes it.
pub trait Publisher: Send {
    /// Writes `records` (message key, record bytes from
    /// [`lachesis_fleet::encode`]) in order. `Ok` means every one of them
    /// is written; on `Err` the relay offers the same records again later,
    /// so a stream that took part of a batch sees some twice, which the
    /// agents' guard and snapshot count (distinct keys) make harmless.
    ///
    /// Written out as `impl Future + Send` rather than `async fn` so the
    /// relay's loop stays `Send` whatever the implementation.
    fn publish_batch(
        &mut self,
        records: &[(String, Vec<u8>)],
    ) -> impl Future<Output = Result<(), PublishError>> + Send;
}

/// What a [`MemoryPublisher`] holds.
#[derive(Debug, Default)]
struct Log {
    records: Vec<(String, Vec<u8>)>,
    /// How many of the next batches fail.
    failing: usize,
}

/// An in-memory stream: every record written, in order. Clones share it,
/// so a test keeps one while the relay writes through another.
#[derive(Debug, Clone, Default)]
pub struct MemoryPublisher {
    log: Arc<Mutex<Log>>,
}

impl MemoryPublisher {
    /// An empty stream.
    #[must_use]
    pub fn new() -> MemoryPublisher {
        MemoryPublisher::default()
    }

    fn log(&self) -> std::sync::MutexGuard<'_, Log> {
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every record written so far: key and bytes.
    #[must_use]
    pub fn records(&self) -> Vec<(String, Vec<u8>)> {
        self.log().records.clone()
    }

    /// Every record written so far, decoded (a record that does not decode
    /// panics: the relay writes only v1 records).
    #[must_use]
    pub fn decoded(&self) -> Vec<Record> {
        self.log()
            .records
            .iter()
            .map(|(key, bytes)| {
                decode(bytes).unwrap_or_else(|e| panic!("{key}: not a v1 record: {e}"))
            })
            .collect()
    }

    /// Makes the next `batches` batches fail (a stream that is down).
    pub fn fail_next(&self, batches: usize) {
        self.log().failing = batches;
    }
}

impl Publisher for MemoryPublisher {
    async fn publish_batch(&mut self, records: &[(String, Vec<u8>)]) -> Result<(), PublishError> {
        let mut log = self.log();
        if log.failing > 0 {
            log.failing -= 1;
            return Err(PublishError("the in-memory stream is set to fail".into()));
        }
        log.records.extend_from_slice(records);
        Ok(())
    }
}

/// The state stream on RabbitMQ (a stream queue, docs/decisions/0008): a
/// [`StreamWriter`] opened at the first batch (it declares the stream) and
/// opened again after any failure, so a broker restart costs the batch in
/// flight a retry, never a record.
#[derive(Debug)]
pub struct RabbitPublisher {
    config: StreamConfig,
    writer: Option<StreamWriter>,
}

impl RabbitPublisher {
    /// Writes to `config`'s stream; nothing is connected yet.
    #[must_use]
    pub fn new(config: StreamConfig) -> RabbitPublisher {
        RabbitPublisher {
            config,
            writer: None,
        }
    }
}

impl Publisher for RabbitPublisher {
    async fn publish_batch(&mut self, records: &[(String, Vec<u8>)]) -> Result<(), PublishError> {
        if self.writer.is_none() {
            let writer = StreamWriter::open(&self.config)
                .await
                .map_err(|e| PublishError(e.to_string()))?;
            tracing::info!(
                host = writer.host(),
                stream = self.config.stream,
                "writing the state stream"
            );
            self.writer = Some(writer);
        }
        let Some(writer) = self.writer.as_ref() else {
            return Err(PublishError("no writer".into()));
        };
        match writer.publish_batch(records).await {
            Ok(()) => Ok(()),
            Err(e) => {
                // Whatever failed, the next batch starts on a fresh
                // connection (the broker may have restarted or failed over).
                self.writer = None;
                Err(PublishError(e.to_string()))
            }
        }
    }
}
