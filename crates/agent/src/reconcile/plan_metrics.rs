//! The plan's families (docs/metrics.md; DESIGN §6.2, §6.6, §10): the
//! committed plan's anomalies by class and route fallbacks by reason, and
//! how long each step of getting a plan took.
//!
//! The planner is pure (no clock, no registry), so the agent registers and
//! sets these: the gauges follow the plan the kernel holds (the one the
//! debug pages show), the step histogram the syncs that produced one.

use std::time::Duration;

use lachesis_planner::{AnomalyClass, FallbackReason, Plan};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// A step of getting from the cloud to a plan the kernel can be given
/// (`lachesis_plan_step_duration_seconds{step}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PlanStep {
    /// Every list fetched (Keystone, Neutron, Nova, Octavia), pages merged,
    /// a token request included when one was due.
    Fetch,
    /// The bodies parsed into a snapshot and planned, both then freed.
    Plan,
    /// The new plan compared with the committed one (a reconcile pass).
    Diff,
}

impl PlanStep {
    /// Every step, seeded.
    pub const ALL: [PlanStep; 3] = [PlanStep::Fetch, PlanStep::Plan, PlanStep::Diff];

    /// The label value.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            PlanStep::Fetch => "fetch",
            PlanStep::Plan => "plan",
            PlanStep::Diff => "diff",
        }
    }
}

/// One label: `class`, `reason` or `step`, and its value.
type Label = [(&'static str, &'static str); 1];

fn class(class: AnomalyClass) -> Label {
    [("class", class.label())]
}

fn reason(reason: FallbackReason) -> Label {
    [("reason", reason.label())]
}

fn step(step: PlanStep) -> Label {
    [("step", step.label())]
}

fn step_histogram() -> Histogram {
    // 1 ms … ~33 s: a diff takes milliseconds even at DESIGN §16's size, a
    // fetch of a large cloud seconds (and up to the client's 30 s timeout).
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

/// The plan's instruments. Clones share the series.
#[derive(Debug, Clone)]
pub struct PlanMetrics {
    anomalies: Family<Label, Gauge>,
    fallbacks: Family<Label, Gauge>,
    steps: Family<Label, Histogram, fn() -> Histogram>,
}

impl Default for PlanMetrics {
    fn default() -> Self {
        let m = PlanMetrics {
            anomalies: Family::default(),
            fallbacks: Family::default(),
            steps: Family::new_with_constructor(step_histogram),
        };
        // Every class and reason exists at zero, so an alert on a class
        // compares with a value instead of with nothing (DESIGN §6.6).
        for c in AnomalyClass::ALL {
            let _ = m.anomalies.get_or_create(&class(*c));
        }
        for r in FallbackReason::ALL {
            let _ = m.fallbacks.get_or_create(&reason(*r));
        }
        for s in PlanStep::ALL {
            let _ = m.steps.get_or_create(&step(s));
        }
        m
    }
}

impl PlanMetrics {
    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register(
            "lachesis_plan_anomalies",
            "Anomalies in the committed plan, by class (details on /debug/anomalies)",
            self.anomalies.clone(),
        );
        registry.register(
            "lachesis_plan_route_fallbacks",
            "Static-route walks of the committed plan that fell back to external, by reason",
            self.fallbacks.clone(),
        );
        registry.register(
            "lachesis_plan_step_duration_seconds",
            "Duration of each step of a successful sync: fetch (every list), plan (parse and plan), diff (against the committed plan)",
            self.steps.clone(),
        );
    }

    /// The gauges of `plan`, the one now committed: every class and reason
    /// set (a plan stored before a reason existed reads 0 for it).
    pub(super) fn set_committed(&self, plan: &Plan) {
        for (c, n) in plan.anomaly_counts() {
            self.anomalies.get_or_create(&class(c)).set(gauge_value(n));
        }
        for r in FallbackReason::ALL {
            let n = plan.route_fallbacks.get(r).copied().unwrap_or(0);
            self.fallbacks
                .get_or_create(&reason(*r))
                .set(gauge_value(n));
        }
    }

    /// One step took `took`.
    pub fn observe(&self, s: PlanStep, took: Duration) {
        self.steps
            .get_or_create(&step(s))
            .observe(took.as_secs_f64());
    }

    /// The anomalies gauge of class `c`.
    #[must_use]
    pub fn anomalies(&self, c: AnomalyClass) -> i64 {
        self.anomalies.get_or_create(&class(c)).get()
    }

    /// The route-fallbacks gauge of reason `r`.
    #[must_use]
    pub fn route_fallbacks(&self, r: FallbackReason) -> i64 {
        self.fallbacks.get_or_create(&reason(r)).get()
    }
}

fn gauge_value(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
