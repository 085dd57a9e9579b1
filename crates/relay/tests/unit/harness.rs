//! A relay against the simulator: the example cloud on loopback, its
//! notifications on a channel the test delivers (or drops) one by one, the
//! stream in memory.

use std::time::Duration;

use lachesis_fleet::{Entry, Key, Record};
use lachesis_notify::{classify, decode_with_payload, Sink as _, Transport};
use lachesis_openstack::config::AppCredRef;
use lachesis_openstack::{ApiMetrics, Client, CloudConfig, Credentials};
use lachesis_relay::{channel, MemoryPublisher, Relay, RelayMetrics, RelaySink, Schedule};
use lachesis_sim::notify::ChannelTarget;
use lachesis_sim::{SimHandle, SimOptions, Store, Topology};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// `examples/topology.yaml`.
pub fn topology() -> Topology {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/topology.yaml");
    Topology::from_yaml(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The relay's credential in the example cloud.
pub fn cloud(sim: &SimHandle) -> CloudConfig {
    let mut cfg = CloudConfig::new(
        sim.auth_url(),
        Credentials::ApplicationCredential {
            credential: AppCredRef::Id("ac-lachesis".into()),
            secret: "appcred-secret".into(),
        },
    );
    cfg.timeout = Duration::from_secs(5);
    cfg
}

/// Long enough never to fall due in a test.
pub const NEVER: Duration = Duration::from_hours(1);

/// The schedule of a test relay: nothing periodic unless the test says.
pub fn schedule() -> Schedule {
    Schedule {
        name: "relay-test".into(),
        digest_interval: NEVER,
        resync_interval: NEVER,
        snapshot_interval: NEVER,
        heartbeat_interval: NEVER,
    }
}

/// A running relay and what the test drives it with.
pub struct Harness {
    pub sim: SimHandle,
    events: mpsc::UnboundedReceiver<Value>,
    sink: RelaySink,
    pub stream: MemoryPublisher,
    pub metrics: RelayMetrics,
    cancel: CancellationToken,
    relay: tokio::task::JoinHandle<()>,
    http: reqwest::Client,
}

impl Harness {
    /// The example cloud and a relay on `schedule`, its first snapshot
    /// written.
    pub async fn start(schedule: Schedule) -> Harness {
        let harness = Harness::spawn(schedule, Store::from_topology(&topology()).unwrap()).await;
        harness
            .wait_for("the first snapshot", |records| {
                records.iter().any(
                    |r| matches!(r, Record::Marker(m) if m.phase != lachesis_fleet::Phase::Start),
                )
            })
            .await;
        harness
    }

    /// A relay on `schedule` against a simulator serving `store`, just
    /// started (nothing waited for).
    pub async fn spawn(schedule: Schedule, store: Store) -> Harness {
        let (tx, events) = mpsc::unbounded_channel();
        let sim = lachesis_sim::start_with(
            store,
            "127.0.0.1:0".parse().unwrap(),
            SimOptions {
                channel: Some(ChannelTarget {
                    tx,
                    host: "simhost".into(),
                }),
                ..SimOptions::default()
            },
        )
        .await
        .unwrap();
        let metrics = RelayMetrics::default();
        let (sink, inputs) = channel(metrics.clone());
        let stream = MemoryPublisher::new();
        let client = Client::new(cloud(&sim), ApiMetrics::default()).unwrap();
        let relay = Relay::new(schedule, client, stream.clone(), metrics.clone());
        let cancel = CancellationToken::new();
        let relay = tokio::spawn(relay.run(inputs, cancel.clone()));
        Harness {
            sim,
            events,
            sink,
            stream,
            metrics,
            cancel,
            relay,
            http: reqwest::Client::new(),
        }
    }

    /// Stops the relay and waits for it.
    pub async fn stop(self) {
        self.cancel.cancel();
        self.relay.await.unwrap();
    }

    /// A control-API call (`/sim/<path>`); panics unless it succeeds.
    pub async fn ctl(&self, method: reqwest::Method, path: &str, body: &Value) -> Value {
        let url = format!("{}/sim/{path}", self.sim.base_url());
        let resp = self
            .http
            .request(method, url)
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        assert!((200..300).contains(&status), "{path}: {status} {text}");
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }

    /// The simulator's next notification envelope.
    pub async fn next_event(&mut self) -> Vec<u8> {
        let envelope = tokio::time::timeout(Duration::from_secs(5), self.events.recv())
            .await
            .expect("a notification within 5 s")
            .expect("the simulator runs");
        envelope.to_string().into_bytes()
    }

    /// Hands `envelope` to the relay's sink as a consumer would.
    pub fn deliver(&self, envelope: &[u8]) {
        let (notification, payload) = decode_with_payload(envelope).unwrap();
        let decision = classify(&notification);
        self.sink.decided(Transport::RabbitMq, &decision);
        self.sink.payload(Transport::RabbitMq, &decision, &payload);
    }

    /// The next notification, delivered; its event type.
    pub async fn deliver_next(&mut self) -> String {
        let envelope = self.next_event().await;
        self.deliver(&envelope);
        event_type(&envelope)
    }

    /// Waits (at most 5 s) until the stream's records satisfy `done`.
    pub async fn wait_for(&self, what: &str, done: impl Fn(&[Record]) -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            if done(&self.stream.decoded()) {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no {what} within 5 s; the stream: {:#?}",
                self.stream.decoded()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The records of `key` written so far, in order (snapshots' included).
    pub fn entries(&self, key: &Key) -> Vec<Entry> {
        self.stream
            .decoded()
            .into_iter()
            .filter_map(|r| match r {
                Record::Entry(e) if e.key == *key => Some(e),
                _ => None,
            })
            .collect()
    }

    /// Waits for a record of `key` satisfying `matches`; returns it.
    pub async fn wait_entry(&self, key: &Key, matches: impl Fn(&Entry) -> bool) -> Entry {
        self.wait_for(&format!("matching record of {key}"), |records| {
            records
                .iter()
                .any(|r| matches!(r, Record::Entry(e) if e.key == *key && matches(e)))
        })
        .await;
        self.entries(key)
            .into_iter()
            .rfind(|e| matches(e))
            .expect("just seen")
    }

    /// What the simulator's API answers for `key` now.
    pub async fn api(&self, key: &Key) -> Option<Value> {
        Client::new(cloud(&self.sim), ApiMetrics::default())
            .unwrap()
            .get_one(key.kind, &key.id)
            .await
            .unwrap()
    }
}

/// The event type of an envelope.
pub fn event_type(envelope: &[u8]) -> String {
    decode_with_payload(envelope).unwrap().0.event_type
}
