//! The ledger owner's families (docs/metrics.md "Datapath", "Agent
//! runtime"; DESIGN §9, §10).

use std::sync::atomic::AtomicU64;

use lachesis_abi::StatReason;
use lachesis_datapath::Stats;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// Why a kernel flow entry was deleted (`lachesis_gc_evictions_total{reason}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gc {
    /// The ghost sweep's evicted MACs (released by the flush after the evict).
    GhostSweep,
    /// Released by any other flush: unresolved rows evicted by TTL or capacity.
    Unresolved,
    /// Pressure relief.
    Pressure,
}

impl Gc {
    /// Every reason, seeded.
    pub const ALL: [Gc; 3] = [Gc::GhostSweep, Gc::Unresolved, Gc::Pressure];

    /// The label value.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            Gc::GhostSweep => "ghost_sweep",
            Gc::Unresolved => "unresolved",
            Gc::Pressure => "pressure",
        }
    }
}

type Labels = Vec<(&'static str, &'static str)>;

/// The owner's families.
#[derive(Debug, Clone)]
pub struct OrderMetrics {
    drain_duration: Histogram,
    drain_last_success: Gauge<f64, AtomicU64>,
    drain_failures: Family<Labels, Counter>,
    kernel_events: Family<Labels, Counter>,
    map_capacity: Family<Labels, Gauge>,
    map_entries: Family<Labels, Gauge>,
    flows_keys: Gauge,
    flows_fanout: Gauge<f64, AtomicU64>,
    gc_evictions: Family<Labels, Counter>,
    relief_runs: Counter,
    /// The last `stats` read, to count its increase.
    last_stats: std::sync::Arc<std::sync::Mutex<Option<Stats>>>,
}

/// Why a scrape did not apply a drain (`lachesis_drain_failures_total{reason}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DrainFailure {
    /// The kernel read failed.
    Kernel,
    /// The ledger refused the readings (a settle or the boot's retired
    /// drain not yet in the state file: the flush is owed first).
    Refused,
}

impl DrainFailure {
    fn label(self) -> &'static str {
        match self {
            DrainFailure::Kernel => "kernel",
            DrainFailure::Refused => "refused",
        }
    }
}

impl OrderMetrics {
    /// Registers the families (seeded at zero) into `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let m = OrderMetrics {
            drain_duration: Histogram::new(exponential_buckets(0.0005, 2.0, 14)),
            drain_last_success: Gauge::default(),
            drain_failures: Family::default(),
            kernel_events: Family::default(),
            map_capacity: Family::default(),
            map_entries: Family::default(),
            flows_keys: Gauge::default(),
            flows_fanout: Gauge::default(),
            gc_evictions: Family::default(),
            relief_runs: Counter::default(),
            last_stats: std::sync::Arc::default(),
        };
        for f in [DrainFailure::Kernel, DrainFailure::Refused] {
            let _ = m.drain_failures.get_or_create(&vec![("reason", f.label())]);
        }
        for r in StatReason::ALL {
            let _ = m.kernel_events.get_or_create(&vec![("reason", r.label())]);
        }
        for g in Gc::ALL {
            let _ = m.gc_evictions.get_or_create(&vec![("reason", g.label())]);
        }
        let _ = m.map_capacity.get_or_create(&flows());
        let _ = m.map_entries.get_or_create(&flows());
        registry.register(
            "lachesis_drain_duration_seconds",
            "Duration of one drain of flows + stats",
            m.drain_duration.clone(),
        );
        registry.register(
            "lachesis_drain_last_success_timestamp_seconds",
            "Unix time of the last successful drain",
            m.drain_last_success.clone(),
        );
        registry.register(
            "lachesis_drain_failures",
            "Scrapes whose drain was not applied, by reason",
            m.drain_failures.clone(),
        );
        registry.register(
            "lachesis_bpf_kernel_events",
            "The kernel stats slots",
            m.kernel_events.clone(),
        );
        registry.register(
            "lachesis_bpf_map_capacity_entries",
            "max_entries of each map",
            m.map_capacity.clone(),
        );
        registry.register(
            "lachesis_bpf_map_entries",
            "Current entries per map",
            m.map_entries.clone(),
        );
        registry.register(
            "lachesis_bpf_flows_keys",
            "Distinct flow keys among the flows sub-entries at the last drain",
            m.flows_keys.clone(),
        );
        registry.register(
            "lachesis_bpf_flows_fanout",
            "Mean flows sub-entries per flow key at the last drain: the CPUs counting each flow (DESIGN 4.7)",
            m.flows_fanout.clone(),
        );
        registry.register(
            "lachesis_gc_evictions",
            "Kernel flow entries deleted with lookup-and-delete, by reason",
            m.gc_evictions.clone(),
        );
        registry.register(
            "lachesis_pressure_relief_runs",
            "Pressure-relief passes (flows fill above the high watermark)",
            m.relief_runs.clone(),
        );
        m
    }

    /// Families not registered anywhere (tests).
    #[must_use]
    pub fn unregistered() -> Self {
        Self::register(&mut Registry::default())
    }

    pub(crate) fn drained(&self, seconds: f64, unix_now: f64) {
        self.drain_duration.observe(seconds);
        self.drain_last_success.set(unix_now);
    }

    /// Unix time of the last successful drain; `None` before the first.
    #[must_use]
    pub fn last_drain_success(&self) -> Option<f64> {
        Some(self.drain_last_success.get()).filter(|t| *t > 0.0)
    }

    pub(crate) fn drain_failed(&self, why: DrainFailure) {
        self.drain_failures
            .get_or_create(&vec![("reason", why.label())])
            .inc();
    }

    /// The fan-out of the last drain: distinct flow keys and the mean
    /// sub-entries per key (DESIGN §4.7).
    pub(crate) fn flows_fanout(&self, keys: usize, mean: f64) {
        self.flows_keys.set(i64::try_from(keys).unwrap_or(i64::MAX));
        self.flows_fanout.set(mean);
    }

    pub(crate) fn flows_fill(&self, entries: usize, capacity: u32) {
        self.map_entries
            .get_or_create(&flows())
            .set(i64::try_from(entries).unwrap_or(i64::MAX));
        self.map_capacity
            .get_or_create(&flows())
            .set(i64::from(capacity));
    }

    /// Shows the metadata maps' fill (`endpoints`, `zones_v4`, `zones_v6`,
    /// `amphora_ips`) on the same two families as `flows`.
    pub fn metadata_fill(&self, fills: &[lachesis_datapath::MapFill]) {
        for f in fills {
            let labels = vec![("map", f.name)];
            self.map_entries
                .get_or_create(&labels)
                .set(i64::try_from(f.entries).unwrap_or(i64::MAX));
            self.map_capacity
                .get_or_create(&labels)
                .set(i64::from(f.capacity));
        }
    }

    /// Counts what each kernel slot gained since the last read; a slot
    /// lower than before (a new `stats` map) counts from zero.
    pub(crate) fn kernel_stats(&self, now: Stats) {
        let mut last = self
            .last_stats
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for r in StatReason::ALL {
            let i = usize::from(r.code());
            let before = last.map_or(0, |s| s[i]);
            let gained = if now[i] >= before {
                now[i] - before
            } else {
                now[i]
            };
            self.kernel_events
                .get_or_create(&vec![("reason", r.label())])
                .inc_by(gained);
        }
        *last = Some(now);
    }

    pub(crate) fn gc(&self, why: Gc, deleted: usize) {
        self.gc_evictions
            .get_or_create(&vec![("reason", why.label())])
            .inc_by(deleted as u64);
    }

    pub(crate) fn relief_run(&self) {
        self.relief_runs.inc();
    }

    /// Evictions counted so far for `why` (tests).
    #[must_use]
    pub fn gc_count(&self, why: Gc) -> u64 {
        self.gc_evictions
            .get_or_create(&vec![("reason", why.label())])
            .get()
    }

    /// Relief passes so far (tests).
    #[must_use]
    pub fn relief_count(&self) -> u64 {
        self.relief_runs.get()
    }
}

fn flows() -> Labels {
    vec![("map", "flows")]
}
