//! Relay mode's stream task (DESIGN §17, docs/fleet.md "An agent in relay
//! mode"): reads the relay's state stream into the [`SharedAssembler`] the
//! reconciler's `RelaySource` plans from, and kicks the reconciler when
//! the state changed. Never an OpenStack request: a stream that is down
//! keeps the last state, and the agent keeps counting under it.
//!
//! - Where it starts ([`Seek`]): at the newest complete snapshot, found
//!   through the relays' heartbeats. It opens [`PROBE_BACK`] back (more
//!   than two heartbeat intervals, so a heartbeat is there to read); the
//!   first heartbeat naming a snapshot, while no snapshot start has been
//!   read, moves it to that snapshot's start ([`POINTER_MARGIN`] earlier,
//!   for the relay's and the broker's clocks); a heartbeat that names none
//!   (an older relay's, or one not done with its first snapshot) moves it
//!   to `now - metadata.lookback` (more than two of the relay's snapshot
//!   intervals back) at once. A probe that reads no heartbeat, or a
//!   pointer that leads to no snapshot start, within [`SEEK_WAIT`] falls
//!   back to the lookback too.
//! - After the last offset read at every reconnection (with the process's
//!   one backoff, 1 s … 30 s).
//! - Each delivery: decoded (an undecodable record is counted by reason
//!   and skipped), fed to the assembler; an applied record kicks once the
//!   assembler is ready, and becoming ready kicks once. Kicks are
//!   debounced by the reconciler, so a batch costs one pass.
//! - No complete snapshot within twice the lookback of reading: the
//!   window held no snapshot start (a relay writing snapshots less often
//!   than assumed), so it reads the whole stream from its first record,
//!   once, and says why.

use std::collections::BTreeSet;
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lachesis_fleet::{decode, DecodeError, Fed, Outcome, Record};
use lachesis_notify::backoff;
use lachesis_notify::rabbitmq::stream::{Delivery, Start, StreamConfig, StreamError, StreamReader};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::reconcile::{chain, Kicker, SharedAssembler};

type Labels = Vec<(&'static str, &'static str)>;

/// `lachesis_stream_records_total` outcomes.
const RECORD_OUTCOMES: [&str; 4] = ["applied", "stale", "duplicate", "ignored"];
/// `lachesis_stream_undecodable_total` reasons ([`reason`]).
const UNDECODABLE: [&str; 4] = ["json", "version", "kind", "shape"];
/// `lachesis_stream_snapshots_total` outcomes.
const SNAPSHOT_OUTCOMES: [&str; 2] = ["complete", "incomplete"];

/// Relay mode's families (docs/metrics.md, "State stream"); registered
/// only in relay mode.
#[derive(Debug, Clone, Default)]
pub(super) struct StreamMetrics {
    records: Family<Labels, Counter>,
    undecodable: Family<Labels, Counter>,
    snapshots: Family<Labels, Counter>,
    connected: Gauge,
    offset: Gauge,
}

impl StreamMetrics {
    /// Seeded families, and the metadata age computed from `shared`'s
    /// heartbeats at scrape time.
    pub(super) fn register(registry: &mut Registry, shared: &SharedAssembler) -> Self {
        let m = StreamMetrics::default();
        for (family, label, values) in [
            (&m.records, "outcome", &RECORD_OUTCOMES[..]),
            (&m.undecodable, "reason", &UNDECODABLE[..]),
            (&m.snapshots, "outcome", &SNAPSHOT_OUTCOMES[..]),
        ] {
            for v in values {
                let _seeded = family.get_or_create(&vec![(label, *v)]);
            }
        }
        registry.register(
            "lachesis_stream_records",
            "Resource and tombstone records read from the state stream, by outcome: applied, stale, duplicate, ignored",
            m.records.clone(),
        );
        registry.register(
            "lachesis_stream_undecodable",
            "State-stream records skipped as undecodable, by reason: json, version, kind, shape",
            m.undecodable.clone(),
        );
        registry.register(
            "lachesis_stream_snapshots",
            "Relay snapshots read to their end marker, by outcome: complete, incomplete",
            m.snapshots.clone(),
        );
        registry.register(
            "lachesis_stream_connected",
            "1 while subscribed to the state stream",
            m.connected.clone(),
        );
        registry.register(
            "lachesis_stream_offset",
            "Stream offset of the last record read",
            m.offset.clone(),
        );
        registry.register_collector(Box::new(MetadataAge(shared.clone())));
        m
    }

    fn count(family: &Family<Labels, Counter>, label: &'static str, value: &'static str) {
        family.get_or_create(&vec![(label, value)]).inc();
    }
}

/// `lachesis_metadata_age_seconds`, at scrape time.
#[derive(Debug)]
struct MetadataAge(SharedAssembler);

impl Collector for MetadataAge {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        let freshest = self
            .0
            .with(|a| a.heartbeats().values().map(|h| h.checked_ms).max());
        #[expect(
            clippy::cast_precision_loss,
            reason = "ms since the epoch fit an f64's 53 bits for 285 000 years"
        )]
        let age = freshest.map_or(f64::NAN, |checked| {
            now_ms().saturating_sub(checked) as f64 / 1000.0
        });
        let m = enc.encode_descriptor(
            "lachesis_metadata_age_seconds",
            "Seconds since the relay's last successful check against OpenStack, from the freshest \
             heartbeat read on the state stream, computed at scrape time; NaN before the first heartbeat.",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(age).encode(m)
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The label of a decode error.
fn reason(e: &DecodeError) -> &'static str {
    match e {
        DecodeError::Json(_) => "json",
        DecodeError::Version(_) => "version",
        DecodeError::Kind(_) => "kind",
        DecodeError::Shape(_) => "shape",
    }
}

/// How far back a booting agent opens the stream to find a heartbeat:
/// two of the relay's heartbeat intervals and a margin.
pub const PROBE_BACK: Duration = Duration::from_secs(25);
/// How early, before the start a heartbeat names, the agent opens the
/// stream: the broker stamps chunks with its clock, the relay its
/// snapshots with its own.
pub const POINTER_MARGIN: Duration = Duration::from_secs(30);
/// How long a probe may read without a heartbeat naming a snapshot, and a
/// pointer without reaching a snapshot start, before the agent falls back
/// to reading `metadata.lookback` back.
pub const SEEK_WAIT: Duration = Duration::from_secs(20);

/// Where the agent opens the stream while it has read nothing it keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seek {
    /// [`PROBE_BACK`] back, for a heartbeat naming the newest snapshot.
    Probe,
    /// At the start of the snapshot a heartbeat named (its `at_ms`).
    Pointer(u64),
    /// `metadata.lookback` back.
    Lookback,
    /// The stream's first record.
    First,
}

/// A heartbeat read before any snapshot start: the snapshot it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Heard {
    /// The newest snapshot its relay wrote began at this time.
    Snapshot(u64),
    /// None (an older relay, or one not done with its first snapshot).
    NoSnapshot,
}

/// How one subscription ended.
enum Ended {
    Cancelled,
    /// Open again elsewhere (the assembler was reset).
    Seek(Seek),
    Failed(StreamError),
}

/// The task: see the module docs. Built by the daemon in relay mode, or
/// through [`StateStream::new`] by a program that runs an agent's
/// metadata path without the daemon (`make bench-fleet`'s agents): the
/// one public seam of the stream reading path.
#[derive(Debug)]
pub struct StateStream {
    pub(super) config: StreamConfig,
    pub(super) lookback: Duration,
    pub(super) shared: SharedAssembler,
    pub(super) metrics: StreamMetrics,
    pub(super) kicker: Kicker,
}

/// What the task keeps across subscriptions.
struct Progress {
    /// When the first record was read (the "no snapshot" deadline counts
    /// from here, not from a start spent waiting for the broker).
    reading_since: Option<Instant>,
    /// When the current subscription opened (the probe's and the
    /// pointer's deadlines count from here).
    opened: Instant,
    seek: Seek,
    /// Reasons of undecodable records already logged at warn level.
    warned: BTreeSet<&'static str>,
}

impl StateStream {
    /// Reads `config`'s stream from `lookback` back (as
    /// `metadata.lookback`) into `shared`, kicking `kicker` as the daemon's
    /// task does; its families (docs/metrics.md, "State stream") are
    /// registered in `registry`. [`StateStream::run`] starts it.
    #[must_use]
    pub fn new(
        config: StreamConfig,
        lookback: Duration,
        shared: SharedAssembler,
        kicker: Kicker,
        registry: &mut Registry,
    ) -> StateStream {
        let metrics = StreamMetrics::register(registry, &shared);
        StateStream {
            config,
            lookback,
            shared,
            metrics,
            kicker,
        }
    }

    /// Reads until `cancel`.
    pub async fn run(self, cancel: CancellationToken) {
        let mut progress = Progress {
            reading_since: None,
            opened: Instant::now(),
            seek: Seek::Probe,
            warned: BTreeSet::new(),
        };
        let mut failures = 0u32;
        let mut last_error: Option<String> = None;
        loop {
            let start = self.start(progress.seek);
            let opened = tokio::select! {
                () = cancel.cancelled() => return,
                opened = StreamReader::open(&self.config, start) => opened,
            };
            let ended = match opened {
                Ok(mut reader) => {
                    info!(
                        host = reader.host(),
                        stream = self.config.stream,
                        ?start,
                        "reading the state stream"
                    );
                    self.metrics.connected.set(1);
                    progress.opened = Instant::now();
                    failures = 0;
                    last_error = None;
                    let ended = self.read(&mut reader, &cancel, &mut progress).await;
                    self.metrics.connected.set(0);
                    ended
                }
                Err(e) => Ended::Failed(e),
            };
            match ended {
                Ended::Cancelled => return,
                Ended::Seek(seek) => {
                    progress.seek = seek;
                    progress.reading_since = None;
                }
                Ended::Failed(e) => {
                    // Once per change: a broker down for an hour is one line.
                    let error = chain(&e);
                    if last_error.as_ref() == Some(&error) {
                        debug!(error, "state stream still unavailable");
                    } else {
                        warn!(error, "state stream unavailable: keeping the last state (never a fallback to OpenStack), retrying with backoff");
                        last_error = Some(error);
                    }
                    let wait = backoff(failures);
                    failures = failures.saturating_add(1);
                    tokio::select! {
                        () = cancel.cancelled() => return,
                        () = tokio::time::sleep(wait) => {}
                    }
                }
            }
        }
    }

    /// After the last record read; before any, where `seek` says.
    fn start(&self, seek: Seek) -> Start {
        if let Some(last) = self.shared.with(|a| a.offset()) {
            return Start::after(last);
        }
        match seek {
            Seek::Probe => Start::Timestamp(SystemTime::now() - PROBE_BACK),
            Seek::Pointer(at_ms) => Start::Timestamp(
                (UNIX_EPOCH + Duration::from_millis(at_ms))
                    .checked_sub(POINTER_MARGIN)
                    .unwrap_or(UNIX_EPOCH),
            ),
            Seek::Lookback => Start::Timestamp(SystemTime::now() - self.lookback),
            Seek::First => Start::First,
        }
    }

    /// When reading gives up on the current seek, unless ready: a probe
    /// or a pointer that has not reached a snapshot start after
    /// [`SEEK_WAIT`]; a window that held no complete snapshot after twice
    /// the lookback of reading.
    fn deadline(&self, progress: &Progress) -> Option<(Instant, Seek)> {
        let started = self.shared.with(|a| a.started());
        match progress.seek {
            Seek::Probe | Seek::Pointer(_) if !started => {
                Some((progress.opened + SEEK_WAIT, Seek::Lookback))
            }
            Seek::First => None,
            _ => progress
                .reading_since
                .map(|since| (since + self.lookback * 2, Seek::First)),
        }
    }

    async fn read(
        &self,
        reader: &mut StreamReader,
        cancel: &CancellationToken,
        progress: &mut Progress,
    ) -> Ended {
        loop {
            let deadline = if self.shared.is_ready() {
                None
            } else {
                self.deadline(progress)
            };
            let give_up = async {
                match deadline {
                    Some((at, _)) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = cancel.cancelled() => return Ended::Cancelled,
                () = give_up => {
                    let Some((_, next)) = deadline else { continue };
                    if self.shared.reset_unless_ready() {
                        self.gave_up(progress.seek);
                        return Ended::Seek(next);
                    }
                }
                delivery = reader.next() => match delivery {
                    Ok(d) => {
                        progress.reading_since.get_or_insert_with(Instant::now);
                        let heard = self.delivery(&d, &mut progress.warned);
                        if let (Some(pointer), Seek::Probe) = (heard, progress.seek) {
                            if self.shared.reset_unless_ready() {
                                return Ended::Seek(self.pointed(pointer));
                            }
                        }
                    }
                    Err(e) => return Ended::Failed(e),
                },
            }
        }
    }

    /// Says why reading starts over elsewhere, having given up on `seek`.
    fn gave_up(&self, seek: Seek) {
        match seek {
            Seek::Probe => info!(
                wait = ?SEEK_WAIT,
                lookback = ?self.lookback,
                "no relay heartbeat naming a snapshot on the state stream: reading metadata.lookback back"
            ),
            Seek::Pointer(at_ms) => warn!(
                at_ms,
                margin = ?POINTER_MARGIN,
                lookback = ?self.lookback,
                "no snapshot start where a heartbeat said one began (the relay's and the broker's clocks apart by more than the margin?): reading metadata.lookback back"
            ),
            Seek::Lookback | Seek::First => warn!(
                lookback = ?self.lookback,
                "no complete snapshot on the state stream within twice metadata.lookback of reading: \
                 reading the whole stream from its first record, once (is the relay's snapshot interval longer than half the lookback?)"
            ),
        }
    }

    /// Where a probe goes after a heartbeat read before any snapshot
    /// start: to the snapshot it names, or (a relay that names none: an
    /// older relay, or one that has not written its first snapshot yet)
    /// `metadata.lookback` back at once.
    fn pointed(&self, heard: Heard) -> Seek {
        match heard {
            Heard::Snapshot(at_ms) => {
                debug!(
                    at_ms,
                    "a heartbeat names the newest snapshot: reading from its start"
                );
                Seek::Pointer(at_ms)
            }
            Heard::NoSnapshot => {
                info!(lookback = ?self.lookback,
                    "a relay heartbeat names no snapshot: reading metadata.lookback back");
                Seek::Lookback
            }
        }
    }

    /// One record through decode, the assembler, the metrics and kicks.
    /// For a heartbeat read before any snapshot start, what it names.
    fn delivery(&self, d: &Delivery, warned: &mut BTreeSet<&'static str>) -> Option<Heard> {
        self.metrics
            .offset
            .set(i64::try_from(d.offset).unwrap_or(i64::MAX));
        let record = match decode(&d.body) {
            Ok(record) => record,
            Err(e) => {
                let reason = reason(&e);
                StreamMetrics::count(&self.metrics.undecodable, "reason", reason);
                if warned.insert(reason) {
                    warn!(offset = d.offset, key = d.key, reason, error = %e,
                        "undecodable state-stream record skipped (further ones for this reason are logged at debug)");
                } else {
                    debug!(offset = d.offset, key = d.key, reason, error = %e, "undecodable state-stream record skipped");
                }
                return None;
            }
        };
        let entry = matches!(record, Record::Entry(_));
        let was_ready = self.shared.is_ready();
        let now = now_ms();
        let fed = self.shared.with(|a| a.feed(d.offset, &record, now));
        let outcome = match fed {
            Fed::Entry(Outcome::Applied) => {
                if was_ready {
                    self.kicker.kick();
                }
                Some("applied")
            }
            Fed::Entry(Outcome::Stale) => Some("stale"),
            Fed::Entry(Outcome::Duplicate) | Fed::Replayed => entry.then_some("duplicate"),
            Fed::Ignored => entry.then_some("ignored"),
            Fed::Complete { removed } => {
                StreamMetrics::count(&self.metrics.snapshots, "outcome", "complete");
                let live = self.shared.with(|a| {
                    // Tombstones only guard against a late stale record of
                    // their key; a snapshot's window is long past them.
                    let cutoff = now.saturating_sub(
                        u64::try_from(self.lookback.as_millis()).unwrap_or(u64::MAX),
                    );
                    a.prune_tombstones(cutoff);
                    a.state().live()
                });
                if !was_ready {
                    info!(
                        live,
                        "first complete snapshot read from the state stream: planning from it"
                    );
                    self.kicker.kick();
                } else if removed > 0 {
                    debug!(
                        removed,
                        "a complete snapshot removed keys it no longer holds"
                    );
                    self.kicker.kick();
                }
                None
            }
            Fed::Incomplete => {
                StreamMetrics::count(&self.metrics.snapshots, "outcome", "incomplete");
                info!(
                    offset = d.offset,
                    "incomplete snapshot on the state stream: waiting for the next one"
                );
                None
            }
            Fed::Started | Fed::Heartbeat => None,
        };
        if let Some(outcome) = outcome {
            StreamMetrics::count(&self.metrics.records, "outcome", outcome);
        }
        match &record {
            Record::Heartbeat(hb) if !self.shared.with(|a| a.started()) => Some(
                hb.snapshot
                    .as_ref()
                    .map_or(Heard::NoSnapshot, |s| Heard::Snapshot(s.at_ms)),
            ),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use lachesis_fleet::{encode, Entry, Heartbeat, Marker, Phase};
    use lachesis_notify::RabbitUrl;
    use lachesis_planner::Resource;
    use serde_json::json;

    use super::*;
    use crate::reconcile::ReconcileMetrics;

    fn task() -> (StateStream, Registry) {
        let mut registry = Registry::default();
        let shared = SharedAssembler::new();
        let metrics = StreamMetrics::register(&mut registry, &shared);
        let config = StreamConfig::new(RabbitUrl::parse("amqp://u:p@mq/").unwrap());
        let task = StateStream {
            config,
            lookback: Duration::from_mins(25),
            shared,
            metrics,
            kicker: Kicker::new(ReconcileMetrics::default()),
        };
        (task, registry)
    }

    fn delivery(offset: u64, record: &Record) -> Delivery {
        let (key, body) = encode(record);
        Delivery {
            offset,
            key,
            body,
            timestamp: None,
        }
    }

    fn port(id: &str, rev: u64) -> Record {
        let body = json!({"id": id, "mac_address": "fa:16:3e:00:00:01", "revision_number": rev});
        Record::Entry(Entry::live(Resource::Ports, id, rev, &body))
    }

    fn marker(phase: Phase) -> Record {
        Record::Marker(Marker {
            relay: "r".into(),
            snapshot: "s1".into(),
            phase,
        })
    }

    fn render(registry: &Registry) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
        text
    }

    fn kicked(task: &StateStream) -> bool {
        let kicked = task.kicker.pending().is_some();
        task.kicker.take();
        kicked
    }

    /// Undecodable records are counted by reason and skipped; entries are
    /// counted by outcome; becoming ready kicks once, and so does every
    /// record applied after it, never one before.
    #[test]
    fn records_are_counted_and_kick_only_once_the_state_is_whole() {
        let (task, registry) = task();
        let mut warned = BTreeSet::new();
        let garbage = |offset, body: &[u8]| Delivery {
            offset,
            key: "ports/x".into(),
            body: body.to_vec(),
            timestamp: None,
        };
        task.delivery(&garbage(0, b"{not json"), &mut warned);
        task.delivery(&garbage(1, br#"{"v": 2}"#), &mut warned);
        task.delivery(&delivery(2, &port("p0", 1)), &mut warned);
        task.delivery(&delivery(3, &marker(Phase::Start)), &mut warned);
        task.delivery(&delivery(4, &in_snapshot(port("p1", 3))), &mut warned);
        task.delivery(&delivery(5, &in_snapshot(port("p1", 3))), &mut warned);
        assert!(
            !kicked(&task),
            "nothing is planned before the state is whole"
        );
        task.delivery(
            &delivery(6, &marker(Phase::End { records: 1 })),
            &mut warned,
        );
        assert!(task.shared.is_ready());
        assert!(kicked(&task), "becoming ready kicks");
        task.delivery(&delivery(7, &port("p1", 2)), &mut warned);
        assert!(!kicked(&task), "a stale record changes nothing");
        task.delivery(&delivery(8, &port("p2", 1)), &mut warned);
        assert!(kicked(&task), "an applied record kicks");
        task.delivery(&delivery(8, &port("p3", 1)), &mut warned);
        assert!(!kicked(&task), "a replayed offset is skipped");
        let hb = Record::Heartbeat(Heartbeat {
            relay: "r".into(),
            at_ms: now_ms(),
            checked_ms: now_ms() - 42_000,
            digest: "0".into(),
            records: 2,
            snapshot: None,
        });
        task.delivery(&delivery(9, &hb), &mut warned);
        let text = render(&registry);
        for line in [
            "lachesis_stream_undecodable_total{reason=\"json\"} 1\n",
            "lachesis_stream_undecodable_total{reason=\"version\"} 1\n",
            "lachesis_stream_undecodable_total{reason=\"kind\"} 0\n",
            "lachesis_stream_records_total{outcome=\"ignored\"} 1\n",
            "lachesis_stream_records_total{outcome=\"applied\"} 2\n",
            "lachesis_stream_records_total{outcome=\"duplicate\"} 2\n",
            "lachesis_stream_records_total{outcome=\"stale\"} 1\n",
            "lachesis_stream_snapshots_total{outcome=\"complete\"} 1\n",
            "lachesis_stream_snapshots_total{outcome=\"incomplete\"} 0\n",
            "lachesis_stream_offset 9\n",
            "lachesis_stream_connected 0\n",
        ] {
            assert!(text.contains(line), "{line} not in\n{text}");
        }
        let age: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix("lachesis_metadata_age_seconds "))
            .unwrap()
            .parse()
            .unwrap();
        assert!((42.0..50.0).contains(&age), "{age}");
    }

    fn beat(snapshot: Option<u64>) -> Record {
        Record::Heartbeat(Heartbeat {
            relay: "r".into(),
            at_ms: now_ms(),
            checked_ms: now_ms(),
            digest: "0".into(),
            records: 1,
            snapshot: snapshot.map(|at_ms| lachesis_fleet::SnapshotRef {
                id: format!("{at_ms}-1"),
                at_ms,
            }),
        })
    }

    /// A booting agent probes a short window back; a heartbeat naming a
    /// snapshot moves it to that snapshot's start, unless a start was read
    /// already; a probe or a pointer that reaches no start in time falls
    /// back to the lookback, and a lookback with no complete snapshot to
    /// the first record.
    #[test]
    fn the_boot_seeks_the_snapshot_a_heartbeat_names() {
        let (task, _registry) = task();
        let mut warned = BTreeSet::new();
        let at = 1_700_000_000_000;
        let since = |start: Start| match start {
            Start::Timestamp(t) => SystemTime::now().duration_since(t).unwrap(),
            other => panic!("{other:?}"),
        };
        let probe = since(task.start(Seek::Probe));
        assert!(probe >= PROBE_BACK && probe < PROBE_BACK + Duration::from_secs(5));
        assert_eq!(
            task.start(Seek::Pointer(at)),
            Start::Timestamp(UNIX_EPOCH + Duration::from_millis(at) - POINTER_MARGIN)
        );
        assert_eq!(task.start(Seek::First), Start::First);
        let lookback = since(task.start(Seek::Lookback));
        assert!(lookback >= task.lookback);

        let opened = Instant::now();
        let mut progress = Progress {
            reading_since: None,
            opened,
            seek: Seek::Probe,
            warned: BTreeSet::new(),
        };
        assert_eq!(
            task.deadline(&progress),
            Some((opened + SEEK_WAIT, Seek::Lookback))
        );
        progress.seek = Seek::Pointer(at);
        assert_eq!(
            task.deadline(&progress),
            Some((opened + SEEK_WAIT, Seek::Lookback))
        );

        assert_eq!(
            task.delivery(&delivery(0, &beat(None)), &mut warned),
            Some(Heard::NoSnapshot),
            "a heartbeat naming no snapshot, before any start"
        );
        assert_eq!(task.pointed(Heard::NoSnapshot), Seek::Lookback);
        assert_eq!(
            task.delivery(&delivery(1, &beat(Some(at))), &mut warned),
            Some(Heard::Snapshot(at)),
            "a heartbeat naming a snapshot, before any start"
        );
        assert_eq!(task.pointed(Heard::Snapshot(at)), Seek::Pointer(at));
        task.delivery(&delivery(2, &marker(Phase::Start)), &mut warned);
        assert_eq!(
            task.delivery(&delivery(3, &beat(Some(at))), &mut warned),
            None,
            "a start was read: the snapshot being read is kept"
        );
        // Once a start is read, only the lookback's deadline is left, and
        // it counts from the first record read.
        assert_eq!(task.deadline(&progress), None);
        progress.reading_since = Some(opened);
        assert_eq!(
            task.deadline(&progress),
            Some((opened + task.lookback * 2, Seek::First))
        );
        progress.seek = Seek::First;
        assert_eq!(task.deadline(&progress), None);
        // Reconnecting resumes after the last offset, whatever the seek.
        assert_eq!(task.start(Seek::Probe), Start::after(3));
    }

    #[test]
    fn metadata_age_is_nan_before_a_heartbeat_and_the_families_are_documented() {
        let (_task, registry) = task();
        let text = render(&registry);
        assert!(
            text.contains("lachesis_metadata_age_seconds NaN\n"),
            "{text}"
        );
        let rendered = lachesis_lab::catalogue::rendered(&text, "agent");
        assert_eq!(
            rendered.keys().collect::<Vec<_>>(),
            [
                "lachesis_metadata_age_seconds",
                "lachesis_stream_connected",
                "lachesis_stream_offset",
                "lachesis_stream_records_total",
                "lachesis_stream_snapshots_total",
                "lachesis_stream_undecodable_total",
            ]
        );
        lachesis_lab::catalogue::assert_documented(&rendered);
    }

    fn in_snapshot(record: Record) -> Record {
        match record {
            Record::Entry(e) => Record::Entry(e.in_snapshot("s1")),
            other => other,
        }
    }
}
