//! Shared by the broker tests: a sink that records what the consumers
//! report (and can be held shut to stall a consumer), and polling helpers.

pub mod stream;

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use lachesis_notify::{Decision, Gap, Sink, Transport};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// What a consumer reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    Decided(Decision),
    Gap(Gap),
}

/// Records every report; while [`Recorder::gate`] is held by the test, the
/// consumer blocks in the sink (its backlog stays unread).
#[derive(Debug, Clone)]
pub struct Recorder {
    tx: mpsc::UnboundedSender<Seen>,
    pub gate: Arc<Mutex<()>>,
}

impl Recorder {
    pub fn new() -> (Recorder, mpsc::UnboundedReceiver<Seen>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            Recorder {
                tx,
                gate: Arc::new(Mutex::new(())),
            },
            rx,
        )
    }

    fn pass(&self) {
        // Blocking a runtime worker outright would strand the tasks queued
        // on it (the test's own producer among them): hand them off first.
        tokio::task::block_in_place(|| {
            drop(self.gate.lock().unwrap_or_else(PoisonError::into_inner));
        });
    }
}

impl Sink for Recorder {
    fn decided(&self, _: Transport, decision: &Decision) {
        self.pass();
        let _ = self.tx.send(Seen::Decided(decision.clone()));
    }

    fn gap(&self, _: Transport, gap: Gap) {
        let _ = self.tx.send(Seen::Gap(gap));
    }
}

/// The consumers' log lines in the test's captured output.
pub fn logs() {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_max_level(tracing::Level::INFO)
        .try_init();
}

/// Polls `done` every 50 ms for up to `limit`; fails naming `what`.
pub async fn wait_until(what: &str, limit: Duration, done: impl Fn() -> bool) {
    let until = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < until, "never within {limit:?}: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The next `n` decisions (gaps skipped) within `limit`, in order.
pub async fn decisions(
    rx: &mut mpsc::UnboundedReceiver<Seen>,
    n: usize,
    limit: Duration,
) -> Vec<Decision> {
    let mut out = Vec::new();
    let until = Instant::now() + limit;
    while out.len() < n {
        let left = until.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, rx.recv()).await {
            Ok(Some(Seen::Decided(d))) => out.push(d),
            Ok(Some(Seen::Gap(_))) => {}
            Ok(None) => panic!("the consumer stopped"),
            Err(tokio::time::error::Elapsed { .. }) => {
                panic!(
                    "only {} of {n} decisions within {limit:?}: {out:?}",
                    out.len()
                )
            }
        }
    }
    out
}

/// Nothing more arrives within `quiet`.
pub async fn nothing_more(rx: &mut mpsc::UnboundedReceiver<Seen>, quiet: Duration) {
    if let Ok(Some(s)) = tokio::time::timeout(quiet, rx.recv()).await {
        panic!("unexpected report {s:?}");
    }
}

/// The event types of `decisions`, with whether each kicked.
pub fn kinds(decisions: &[Decision]) -> Vec<(String, bool)> {
    decisions
        .iter()
        .map(|d| (d.event_type().to_owned(), d.is_kick()))
        .collect()
}

/// A spawned consumer, aborted when dropped (also when a test fails).
pub struct Running(pub tokio::task::JoinHandle<()>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.abort();
    }
}

pub fn spawn(f: impl Future<Output = ()> + Send + 'static) -> Running {
    Running(tokio::spawn(f))
}

/// A notification in the AMQP drivers' envelope.
pub fn envelope(event_type: &str, publisher: Option<&str>) -> Vec<u8> {
    let inner = serde_json::json!({
        "message_id": "0c7f3a52-7b1e-4a7a-9d6b-1e5f0a3c2d10",
        "publisher_id": publisher,
        "event_type": event_type,
        "priority": "INFO",
        "payload": {"port": {"id": "p1", "mac_address": "fa:16:3e:00:00:01"}},
        "timestamp": "2026-11-30 21:30:00.000001",
        "_unique_id": "9f2c1b0a8e7d6c5b4a39281706f5e4d3",
        "_context_request_id": "req-test",
        "_context_project_id": "0b0000000000000000000000000000aa",
    });
    serde_json::json!({"oslo.version": "2.0", "oslo.message": inner.to_string()})
        .to_string()
        .into_bytes()
}

/// A notification as the Kafka driver sends it: no envelope, one nested
/// `_context` object, no `_unique_id`.
pub fn kafka_shape(event_type: &str, publisher: Option<&str>) -> Vec<u8> {
    serde_json::json!({
        "message_id": "6a1e0f4d-2c3b-4d5e-8f70-91a2b3c4d5e6",
        "publisher_id": publisher,
        "event_type": event_type,
        "priority": "INFO",
        "payload": {"router": {"id": "r1", "routes": []}},
        "timestamp": "2026-11-30 21:30:00.000001",
        "_context": {"request_id": "req-test", "project_id": "0b0000000000000000000000000000bb",
            "is_admin": true, "roles": ["admin"]},
    })
    .to_string()
    .into_bytes()
}
