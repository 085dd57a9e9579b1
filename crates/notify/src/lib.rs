//! Oslo notification consumers (DESIGN §8): a Neutron, Nova, Keystone or
//! Octavia change becomes a reconcile kick within a second or two instead
//! of waiting for the next tick.
//!
//! Layout: [`decode`] (bytes → [`Decision`], pure), [`metrics`] (the
//! `lachesis_notifications_*` families), [`rabbitmq`] and [`kafka`] (one
//! consumer each, reconnecting with backoff until cancelled). The
//! consumers never apply a payload: whatever they miss, the next tick
//! heals, and when they know they may have missed something (a
//! reconnection, an offset reset) they say so with a gap kick.
//!
//! [`rabbitmq::stream`] is the fleet's state stream on a `RabbitMQ` stream
//! queue (DESIGN §17): a writer for the relay and a reader for agents,
//! over the same connection code as the consumer.
//!
//! The consumers run on the caller's task: this crate never spawns.

#![deny(missing_docs)]

pub mod decode;
pub mod kafka;
pub mod metrics;
pub mod rabbitmq;
mod tls;

use std::time::Duration;

pub use decode::{classify, decide, Decision, DecodeError, Ignored, Notification, Rule};
pub use kafka::{KafkaConfig, KafkaConsumer, KafkaError, KafkaTls, Sasl, SaslMechanism};
pub use metrics::{
    ErrorKind, NotifyMetrics, Snapshot, SubscribeFailure, Transport, TransportMetrics,
};
pub use rabbitmq::{
    BrokerHost, RabbitError, RabbitMqConfig, RabbitMqConsumer, RabbitUrl, UrlError, REDACTED,
};
pub use tls::SetupError;

/// Either consumer, for an owner that starts whichever is configured.
#[derive(Debug)]
pub enum Consumer {
    /// [`RabbitMqConsumer`].
    RabbitMq(RabbitMqConsumer),
    /// [`KafkaConsumer`].
    Kafka(KafkaConsumer),
}

impl Consumer {
    /// Consumes until `cancel`, reconnecting with backoff.
    pub async fn run(&self, sink: &dyn Sink, cancel: tokio_util::sync::CancellationToken) {
        match self {
            Consumer::RabbitMq(c) => c.run(sink, cancel).await,
            Consumer::Kafka(c) => c.run(sink, cancel).await,
        }
    }
}

/// Why a gap kick was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gap {
    /// Reconnected after a disconnection: the broker dropped our queue (or
    /// we could not read) meanwhile.
    Reconnected,
    /// Kafka: the next offset to read was gone (the log was truncated,
    /// reset or recreated): reading restarts at the end.
    OffsetReset,
}

/// Where a consumer's findings go. The agent kicks its reconciler for
/// every [`Decision::Kick`] and every gap; tests record them.
pub trait Sink: Send + Sync {
    /// One message decoded and classified.
    fn decided(&self, transport: Transport, decision: &Decision);
    /// Notifications may have been missed: a pass should run.
    fn gap(&self, transport: Transport, gap: Gap);
}

/// The wait before attempt `failures + 1` of something that keeps failing:
/// 1 s, doubling, at most 30 s. The one backoff of the process: the
/// consumers' reconnections, and the agent's cold-start sync and degraded
/// kicks (DESIGN §12 step 2), which use it from here.
#[must_use]
pub fn backoff(failures: u32) -> Duration {
    Duration::from_secs((1u64 << failures.min(5)).min(30))
}

/// One delivered message through decode, metrics and the sink.
/// `warned`: whether an undecodable message was already logged at warn
/// level on this connection (later ones go to debug).
fn handle(bytes: &[u8], metrics: &TransportMetrics, sink: &dyn Sink, warned: &mut bool) {
    metrics.received();
    match decide(bytes) {
        Ok(decision) => {
            metrics.decided(&decision);
            tracing::debug!(
                transport = metrics.kind().as_str(),
                event_type = decision.event_type(),
                kick = decision.is_kick(),
                "notification"
            );
            sink.decided(metrics.kind(), &decision);
        }
        Err(e) => {
            metrics.error(ErrorKind::Decode);
            if *warned {
                tracing::debug!(transport = metrics.kind().as_str(), error = %e, "undecodable message skipped");
            } else {
                *warned = true;
                tracing::warn!(transport = metrics.kind().as_str(), error = %e, bytes = bytes.len(),
                    "undecodable message skipped (further ones on this connection are logged at debug)");
            }
        }
    }
}

/// A gap: counted, logged, passed on.
fn gap(metrics: &TransportMetrics, sink: &dyn Sink, why: Gap) {
    metrics.gap_kick();
    tracing::info!(transport = metrics.kind().as_str(), gap = ?why, "notifications may have been missed: asking for a reconcile");
    sink.gap(metrics.kind(), why);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_is_one_to_thirty_seconds() {
        let secs: Vec<u64> = (0..8).map(|f| backoff(f).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(backoff(u32::MAX).as_secs(), 30);
    }
}
