//! Oslo notification consumers (DESIGN §8): a Neutron, Nova, Keystone or
//! Octavia change becomes a reconcile kick within a second or two instead
//! of waiting for the next tick.
//!
//! Layout: [`decode`] (bytes → [`Decision`], pure), [`metrics`] (the
//! `lachesis_notifications_*` families), [`rabbitmq`] and [`kafka`] (one
//! consumer each, reconnecting with backoff until cancelled). The agent
//! never applies a payload: whatever the consumers miss, the next tick
//! heals, and when they know they may have missed something (a
//! reconnection, an offset reset) they say so with a gap kick. The relay
//! (DESIGN §17) asks its [`Sink`] for payloads too, and runs a digest on a
//! gap.
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

pub use decode::{
    classify, decide, decode_with_payload, Decision, DecodeError, Ignored, Notification, Rule,
};
pub use kafka::{KafkaConfig, KafkaConsumer, KafkaError, KafkaTls, Sasl, SaslMechanism};
pub use metrics::{
    ErrorKind, NotifyMetrics, Snapshot, SubscribeFailure, Transport, TransportMetrics,
};
pub use rabbitmq::{
    BrokerHost, RabbitError, RabbitMqConfig, RabbitMqConsumer, RabbitUrl, UrlError, REDACTED,
};
pub use tls::SetupError;

/// `notifications.*`, the section of every program that consumes them
/// (the agent, the relay): each transport is off unless its section is
/// present (its consumer's own configuration type).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping of notifications keys")]
pub struct NotificationSettings {
    /// `notifications.rabbitmq.*`
    pub rabbitmq: Option<RabbitMqConfig>,
    /// `notifications.kafka.*`
    pub kafka: Option<KafkaConfig>,
}

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
/// every [`Decision::Kick`] and every gap; the relay applies payloads
/// ([`Sink::payload`]) and runs a digest on a gap; tests record them.
pub trait Sink: Send + Sync {
    /// One message decoded and classified.
    fn decided(&self, transport: Transport, decision: &Decision);
    /// Notifications may have been missed: a pass (the relay: a digest)
    /// should run.
    fn gap(&self, transport: Transport, gap: Gap);
    /// Whether this sink takes payloads ([`Sink::payload`]). Off by
    /// default: keeping a payload costs its parse, and the agent never
    /// reads one.
    fn wants_payloads(&self) -> bool {
        false
    }
    /// The payload of the message just [`Sink::decided`] (`null` when it
    /// had none); called only when [`Sink::wants_payloads`].
    fn payload(&self, transport: Transport, decision: &Decision, payload: &serde_json::Value) {
        let _ = (transport, decision, payload);
    }
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
    let decoded = if sink.wants_payloads() {
        decode_with_payload(bytes).map(|(n, payload)| (classify(&n), Some(payload)))
    } else {
        decide(bytes).map(|decision| (decision, None))
    };
    match decoded {
        Ok((decision, payload)) => {
            metrics.decided(&decision);
            tracing::debug!(
                transport = metrics.kind().as_str(),
                event_type = decision.event_type(),
                kick = decision.is_kick(),
                "notification"
            );
            sink.decided(metrics.kind(), &decision);
            if let Some(payload) = payload {
                sink.payload(metrics.kind(), &decision, &payload);
            }
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

    /// Records what `handle` hands a sink.
    #[derive(Default)]
    struct Recorded {
        wants: bool,
        decided: std::sync::Mutex<Vec<String>>,
        payloads: std::sync::Mutex<Vec<(String, serde_json::Value)>>,
    }

    impl Sink for Recorded {
        fn decided(&self, _: Transport, decision: &Decision) {
            self.decided
                .lock()
                .unwrap()
                .push(decision.event_type().to_owned());
        }
        fn gap(&self, _: Transport, _: Gap) {}
        fn wants_payloads(&self) -> bool {
            self.wants
        }
        fn payload(&self, _: Transport, decision: &Decision, payload: &serde_json::Value) {
            self.payloads
                .lock()
                .unwrap()
                .push((decision.event_type().to_owned(), payload.clone()));
        }
    }

    /// A sink that asks gets each decoded message's payload after its
    /// decision; one that does not (the agent's) gets decisions only.
    #[test]
    fn payloads_reach_only_a_sink_that_asks() {
        let message = serde_json::json!({"event_type": "port.create.end",
            "publisher_id": "network.ctl", "payload": {"port": {"id": "p1"}}})
        .to_string();
        let metrics = NotifyMetrics::default().transport(Transport::Kafka);
        for wants in [false, true] {
            let sink = Recorded {
                wants,
                ..Recorded::default()
            };
            let mut warned = false;
            handle(message.as_bytes(), &metrics, &sink, &mut warned);
            handle(b"not json", &metrics, &sink, &mut warned);
            assert_eq!(*sink.decided.lock().unwrap(), ["port.create.end"]);
            let payloads = sink.payloads.lock().unwrap().clone();
            if wants {
                assert_eq!(
                    payloads,
                    [(
                        "port.create.end".to_owned(),
                        serde_json::json!({"port": {"id": "p1"}})
                    )]
                );
            } else {
                assert!(payloads.is_empty());
            }
        }
    }

    #[test]
    fn backoff_is_one_to_thirty_seconds() {
        let secs: Vec<u64> = (0..8).map(|f| backoff(f).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(backoff(u32::MAX).as_secs(), 30);
    }
}
