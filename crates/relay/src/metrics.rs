//! The relay's own families, `lachesis_relay_*` (docs/metrics.md,
//! "Relay"). Every label set is bounded and seeded at zero, so a family
//! shows from the first scrape.

use lachesis_planner::Resource;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric as _};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// `outcome` of a sync or a digest.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct Outcome {
    outcome: &'static str,
}

/// `action` of a repair.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct Action {
    action: &'static str,
}

/// `kind` of a record or a GET.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct Kind {
    kind: &'static str,
}

/// `reason` a payload was dropped.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct Reason {
    reason: &'static str,
}

/// Why a notification's payload published nothing (`reason` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// The guard holds a newer revision (or a tombstone at least as new).
    Stale,
    /// The guard holds exactly this already (a redelivery, or the other
    /// relay's record).
    Duplicate,
    /// An event that would matter, but its payload names no id.
    Undecodable,
    /// A Neutron, Keystone or Nova event from another publisher than the
    /// service's (DESIGN §8): not trusted.
    Publisher,
}

impl Dropped {
    const ALL: [Dropped; 4] = [
        Dropped::Stale,
        Dropped::Duplicate,
        Dropped::Undecodable,
        Dropped::Publisher,
    ];

    fn label(self) -> &'static str {
        match self {
            Dropped::Stale => "stale",
            Dropped::Duplicate => "duplicate",
            Dropped::Undecodable => "undecodable",
            Dropped::Publisher => "publisher",
        }
    }
}

/// The `kind` of a published record that is not a resource or tombstone.
pub(crate) const SNAPSHOT_KIND: &str = "snapshot";
/// The `kind` of a heartbeat record.
pub(crate) const HEARTBEAT_KIND: &str = "heartbeat";

/// The relay's families. Cheap to clone; clones share the series.
#[derive(Debug, Clone, Default)]
pub struct RelayMetrics {
    syncs: Family<Outcome, Counter>,
    digests: Family<Outcome, Counter>,
    repaired: Family<Action, Counter>,
    published: Family<Kind, Counter>,
    dropped: Family<Reason, Counter>,
    gets: Family<Kind, Counter>,
    openstack_errors: Counter,
    publish_errors: Counter,
    pending: Gauge,
    last_check: Gauge<f64, AtomicU64>,
    snapshots: Counter,
    heartbeats: Counter,
    /// When the newest heartbeat the stream took was made, ms since the
    /// epoch; until the first, when the families were first registered
    /// (the relay's start); 0 before that.
    heartbeat_ms: Arc<AtomicU64>,
}

impl RelayMetrics {
    /// Registers every family and seeds its label values at zero.
    pub fn register(&self, registry: &mut Registry) {
        for outcome in ["ok", "error"] {
            let _ = self.syncs.get_or_create(&Outcome { outcome });
            let _ = self.digests.get_or_create(&Outcome { outcome });
        }
        for action in ["get", "tombstone"] {
            let _ = self.repaired.get_or_create(&Action { action });
        }
        for kind in Resource::ALL.map(Resource::collection) {
            let _ = self.published.get_or_create(&Kind { kind });
            let _ = self.gets.get_or_create(&Kind { kind });
        }
        for kind in [SNAPSHOT_KIND, HEARTBEAT_KIND] {
            let _ = self.published.get_or_create(&Kind { kind });
        }
        for reason in Dropped::ALL {
            let _ = self.dropped.get_or_create(&Reason {
                reason: reason.label(),
            });
        }
        let r = registry;
        r.register(
            "lachesis_relay_syncs",
            "Full syncs against OpenStack (at start, every relay.resync_interval, and retries), by outcome",
            self.syncs.clone(),
        );
        r.register(
            "lachesis_relay_digests",
            "Digest passes (every relay.digest_interval, and soon after a notification gap), by outcome",
            self.digests.clone(),
        );
        r.register(
            "lachesis_relay_repaired",
            "What digests and resyncs repaired: resources fetched by id, tombstones for resources gone",
            self.repaired.clone(),
        );
        r.register(
            "lachesis_relay_records_published",
            "Records written to the state stream, by list (resources and tombstones), snapshot markers and heartbeats",
            self.published.clone(),
        );
        r.register(
            "lachesis_relay_payloads_dropped",
            "Notification payloads that published nothing: stale, duplicate, undecodable (no id), or from an untrusted publisher",
            self.dropped.clone(),
        );
        r.register(
            "lachesis_relay_gets",
            "Resources fetched by id from OpenStack, by list",
            self.gets.clone(),
        );
        r.register(
            "lachesis_relay_openstack_errors",
            "Failed syncs, digests and GETs by id; the relay retries with backoff",
            self.openstack_errors.clone(),
        );
        r.register(
            "lachesis_relay_publish_errors",
            "Batches the state stream did not take; their records stay pending and are offered again",
            self.publish_errors.clone(),
        );
        r.register(
            "lachesis_relay_pending_records",
            "Records waiting to be written to the state stream",
            self.pending.clone(),
        );
        r.register(
            "lachesis_relay_last_check_timestamp_seconds",
            "When the relay last checked its state against OpenStack successfully (a full sync or a digest), seconds since the epoch",
            self.last_check.clone(),
        );
        r.register(
            "lachesis_relay_snapshots",
            "Full snapshots written to the state stream (start marker, every record, end marker)",
            self.snapshots.clone(),
        );
        r.register(
            "lachesis_relay_heartbeats",
            "Heartbeats written to the state stream",
            self.heartbeats.clone(),
        );
        // Only the first registration seeds it: a render for a test or
        // --check-config registers again and must not move it.
        let _ =
            self.heartbeat_ms
                .compare_exchange(0, now_ms(), Ordering::Relaxed, Ordering::Relaxed);
        r.register_collector(Box::new(HeartbeatAge(self.heartbeat_ms.clone())));
    }

    pub(crate) fn sync(&self, ok: bool) {
        let outcome = if ok { "ok" } else { "error" };
        self.syncs.get_or_create(&Outcome { outcome }).inc();
    }

    pub(crate) fn digest(&self, ok: bool) {
        let outcome = if ok { "ok" } else { "error" };
        self.digests.get_or_create(&Outcome { outcome }).inc();
    }

    pub(crate) fn repaired_get(&self) {
        self.repaired.get_or_create(&Action { action: "get" }).inc();
    }

    pub(crate) fn repaired_tombstone(&self) {
        self.repaired
            .get_or_create(&Action {
                action: "tombstone",
            })
            .inc();
    }

    pub(crate) fn published(&self, kind: &'static str) {
        self.published.get_or_create(&Kind { kind }).inc();
    }

    /// A notification payload that published nothing.
    pub fn dropped(&self, why: Dropped) {
        self.dropped
            .get_or_create(&Reason {
                reason: why.label(),
            })
            .inc();
    }

    pub(crate) fn get(&self, kind: Resource) {
        self.gets
            .get_or_create(&Kind {
                kind: kind.collection(),
            })
            .inc();
    }

    pub(crate) fn openstack_error(&self) {
        self.openstack_errors.inc();
    }

    pub(crate) fn publish_error(&self) {
        self.publish_errors.inc();
    }

    pub(crate) fn pending(&self, records: usize) {
        self.pending.set(i64::try_from(records).unwrap_or(i64::MAX));
    }

    pub(crate) fn checked(&self, at_ms: u64) {
        #[expect(
            clippy::cast_precision_loss,
            reason = "ms since the epoch fit f64's 53 bits"
        )]
        self.last_check.set(at_ms as f64 / 1000.0);
    }

    /// A snapshot the stream took.
    pub(crate) fn snapshot(&self) {
        self.snapshots.inc();
    }

    /// `count` heartbeats the stream took, the newest made at `at_ms`.
    pub(crate) fn heartbeats(&self, count: u64, at_ms: u64) {
        self.heartbeats.inc_by(count);
        self.heartbeat_ms.fetch_max(at_ms, Ordering::Relaxed);
    }

    /// One series' value, for tests: `family` is the name without
    /// `lachesis_relay_` and `_total`, `label` the one label's value
    /// (empty for a family without labels).
    #[must_use]
    pub fn value(&self, family: &str, label: &str) -> u64 {
        let of = |f: &Family<Outcome, Counter>| {
            f.get(&Outcome {
                outcome: if label == "ok" { "ok" } else { "error" },
            })
            .map_or(0, |c| c.get())
        };
        match family {
            "syncs" => of(&self.syncs),
            "digests" => of(&self.digests),
            "repaired" => self
                .repaired
                .get(&Action {
                    action: if label == "get" { "get" } else { "tombstone" },
                })
                .map_or(0, |c| c.get()),
            "payloads_dropped" => Dropped::ALL
                .into_iter()
                .find(|d| d.label() == label)
                .and_then(|d| self.dropped.get(&Reason { reason: d.label() }))
                .map_or(0, |c| c.get()),
            "gets" => Resource::from_collection(label)
                .and_then(|r| {
                    self.gets.get(&Kind {
                        kind: r.collection(),
                    })
                })
                .map_or(0, |c| c.get()),
            "openstack_errors" => self.openstack_errors.get(),
            "publish_errors" => self.publish_errors.get(),
            "snapshots" => self.snapshots.get(),
            "heartbeats" => self.heartbeats.get(),
            "pending_records" => u64::try_from(self.pending.get()).unwrap_or(0),
            _ => panic!("no relay family {family}"),
        }
    }
}

/// `lachesis_relay_heartbeat_age_seconds`, at scrape time: what the agents'
/// `lachesis_metadata_age_seconds` cannot say when the stream does not take
/// the relay's writes (their age then rises with no error of their own).
/// Before the first heartbeat is taken it counts from the registration
/// (the relay's start), so a relay whose stream refuses it from the start
/// shows a rising age, never a blank.
#[derive(Debug)]
struct HeartbeatAge(Arc<AtomicU64>);

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Collector for HeartbeatAge {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        let from = self.0.load(Ordering::Relaxed);
        #[expect(
            clippy::cast_precision_loss,
            reason = "ms since the epoch fit an f64's 53 bits for 285 000 years"
        )]
        let age = now_ms().saturating_sub(from) as f64 / 1000.0;
        let m = enc.encode_descriptor(
            "lachesis_relay_heartbeat_age_seconds",
            "Seconds since the newest heartbeat the state stream took was made (before the first, \
             since the relay started), computed at scrape time",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(age).encode(m)
    }
}
