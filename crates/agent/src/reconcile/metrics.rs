//! The reconciler's families (docs/metrics.md, DESIGN §7, §10).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use lachesis_planner::Plan;

use super::plan_metrics::PlanMetrics;

/// How a pass ended (`lachesis_reconcile_runs_total{result}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PassResult {
    /// Synced, applied and committed.
    Ok,
    /// The sync failed: nothing was touched.
    SyncError,
    /// A kernel write or the settle batch failed: the plan was not
    /// committed, the next pass diffs against the last committed one.
    ApplyError,
}

impl PassResult {
    /// Every outcome, seeded at zero.
    pub const ALL: [PassResult; 3] = [
        PassResult::Ok,
        PassResult::SyncError,
        PassResult::ApplyError,
    ];

    /// The label value.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            PassResult::Ok => "ok",
            PassResult::SyncError => "sync_error",
            PassResult::ApplyError => "apply_error",
        }
    }
}

/// What started a pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Trigger {
    /// The periodic tick (`reconcile_interval`).
    Tick,
    /// Debounced kicks.
    Kick,
}

impl Trigger {
    /// Both triggers, seeded.
    pub const ALL: [Trigger; 2] = [Trigger::Tick, Trigger::Kick];

    /// The label value.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            Trigger::Tick => "tick",
            Trigger::Kick => "kick",
        }
    }
}

/// How the last pass ended, for the debug pages' health strip (the
/// counters say how many; this says which was last, when, and why).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastPass {
    /// Its outcome.
    pub result: PassResult,
    /// What started it.
    pub trigger: Trigger,
    /// When it ended.
    pub ended: SystemTime,
    /// The error and its causes, when it failed.
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct TriggerLabel {
    trigger: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

fn duration_histogram() -> Histogram {
    // 5 ms … ~41 s: an unchanged pass against a large cloud is dominated by
    // the sync (seconds); a pass against the simulator takes milliseconds.
    Histogram::new(exponential_buckets(0.005, 2.0, 14))
}

/// The reconciler's instruments. Clones share the series.
#[derive(Debug, Clone)]
pub struct ReconcileMetrics {
    runs: Family<ResultLabel, Counter>,
    duration: Family<TriggerLabel, Histogram, fn() -> Histogram>,
    kicks: Family<OutcomeLabel, Counter>,
    ghosts: Gauge,
    amphora_ports: Gauge,
    last: Arc<Mutex<Option<LastPass>>>,
    plan: PlanMetrics,
}

impl Default for ReconcileMetrics {
    fn default() -> Self {
        let m = ReconcileMetrics {
            runs: Family::default(),
            duration: Family::new_with_constructor(duration_histogram),
            kicks: Family::default(),
            ghosts: Gauge::default(),
            amphora_ports: Gauge::default(),
            last: Arc::default(),
            plan: PlanMetrics::default(),
        };
        // Every series exists before the first pass, so an alert on
        // `increase(...{result="apply_error"}[1h]) > 0` has a zero to compare.
        for r in PassResult::ALL {
            let _ = m.runs.get_or_create(&ResultLabel { result: r.label() });
        }
        for t in Trigger::ALL {
            let _ = m
                .duration
                .get_or_create(&TriggerLabel { trigger: t.label() });
        }
        for outcome in ["received", "coalesced"] {
            let _ = m.kicks.get_or_create(&OutcomeLabel { outcome });
        }
        m
    }
}

impl ReconcileMetrics {
    /// Seeded instruments, registered into `registry` (the counters'
    /// `_total` is appended by the registry).
    #[must_use]
    pub fn register(registry: &mut Registry) -> Self {
        let m = ReconcileMetrics::default();
        registry.register(
            "lachesis_reconcile_runs",
            "Reconcile passes by outcome: ok, sync_error, apply_error",
            m.runs.clone(),
        );
        registry.register(
            "lachesis_reconcile_duration_seconds",
            "Reconcile pass duration by trigger (tick, kick)",
            m.duration.clone(),
        );
        registry.register(
            "lachesis_reconcile_kicks",
            "Reconcile kicks received, and those merged into an already pending kick (coalesced)",
            m.kicks.clone(),
        );
        registry.register(
            "lachesis_ghost_bindings",
            "Bindings kept past their port's deletion, inside the grace window",
            m.ghosts.clone(),
        );
        registry.register(
            "lachesis_amphora_ports",
            "Amphora data ports re-attributed to their load balancer's owner by the last pass",
            m.amphora_ports.clone(),
        );
        m.plan.register(registry);
        m
    }

    fn run_series(&self, result: PassResult) -> Counter {
        self.runs.get_or_create_owned(&ResultLabel {
            result: result.label(),
        })
    }

    fn kick_series(&self, outcome: &'static str) -> Counter {
        self.kicks.get_or_create_owned(&OutcomeLabel { outcome })
    }

    /// Counts `pass` and keeps it as the last.
    pub(crate) fn count_run(&self, pass: LastPass) {
        self.run_series(pass.result).inc();
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Some(pass);
    }

    /// The last pass that ended; `None` before the first.
    #[must_use]
    pub fn last_pass(&self) -> Option<LastPass> {
        self.last
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn observe_pass(&self, trigger: Trigger, seconds: f64) {
        self.duration
            .get_or_create(&TriggerLabel {
                trigger: trigger.label(),
            })
            .observe(seconds);
    }

    pub(crate) fn count_kick(&self, coalesced: bool) {
        self.kick_series("received").inc();
        if coalesced {
            self.kick_series("coalesced").inc();
        }
    }

    pub(crate) fn ghosts_gauge(&self) -> Gauge {
        self.ghosts.clone()
    }

    /// The gauges that follow the committed plan: amphora ports,
    /// anomalies, route fallbacks.
    pub(crate) fn set_committed(&self, plan: &Plan) {
        let amphora_ports = plan.bindings.iter().filter(|b| b.amphora).count();
        self.amphora_ports
            .set(i64::try_from(amphora_ports).unwrap_or(i64::MAX));
        self.plan.set_committed(plan);
    }

    /// The plan's families (shared with the source that times the sync).
    #[must_use]
    pub fn plan(&self) -> &PlanMetrics {
        &self.plan
    }

    /// Passes that ended with `result`.
    #[must_use]
    pub fn runs(&self, result: PassResult) -> u64 {
        self.run_series(result).get()
    }

    /// The ghosts gauge's value.
    #[must_use]
    pub fn ghosts(&self) -> i64 {
        self.ghosts.get()
    }

    /// The amphora ports gauge's value.
    #[must_use]
    pub fn amphora_ports(&self) -> i64 {
        self.amphora_ports.get()
    }
}
