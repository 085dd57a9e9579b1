//! The notification consumers' side of the relay: a [`lachesis_notify::Sink`]
//! that hands each payload (and each gap) to the relay's loop, which runs
//! on another task than the consumer.

use lachesis_notify::{Decision, Gap, Ignored, Sink, Transport};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::metrics::{Dropped, RelayMetrics};

/// What reaches the relay's loop from the consumers.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// One notification: its event type and payload.
    Notification {
        /// `port.create.end`, …
        event_type: String,
        /// The oslo payload (`null` when there was none).
        payload: Value,
    },
    /// Notifications may have been missed (a reconnection, an offset
    /// reset): a digest runs soon.
    Gap,
}

/// Hands the consumers' findings to the relay's loop. Unbounded: a sink
/// cannot wait (the consumers call it synchronously), and a notification
/// dropped here would be healed only by the next digest.
#[derive(Debug, Clone)]
pub struct RelaySink {
    tx: mpsc::UnboundedSender<Input>,
    metrics: RelayMetrics,
}

/// A sink and the receiver the relay's loop reads ([`crate::Relay::run`]).
#[must_use]
pub fn channel(metrics: RelayMetrics) -> (RelaySink, mpsc::UnboundedReceiver<Input>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (RelaySink { tx, metrics }, rx)
}

impl Sink for RelaySink {
    fn decided(&self, _: Transport, _: &Decision) {
        // The payload follows (wants_payloads); the decision only says
        // whether its publisher is trusted.
    }

    fn gap(&self, _: Transport, _: Gap) {
        // A closed receiver means the relay is stopping.
        let _ = self.tx.send(Input::Gap);
    }

    fn wants_payloads(&self) -> bool {
        true
    }

    fn payload(&self, _: Transport, decision: &Decision, payload: &Value) {
        // A rule's event from another publisher than the rule's service
        // (DESIGN §8) is not applied: a payload is published as it is.
        if let Decision::Ignore {
            why: Ignored::Publisher,
            ..
        } = decision
        {
            self.metrics.dropped(Dropped::Publisher);
            return;
        }
        let _ = self.tx.send(Input::Notification {
            event_type: decision.event_type().to_owned(),
            payload: payload.clone(),
        });
    }
}
