//! Holds the reconciler's families against docs/metrics.md: every family it
//! registers (the plan's among them) is documented with the rendered type
//! and labels, owner `agent`.

use std::collections::BTreeMap;

use lachesis_lab::catalogue::{self, Family};
use prometheus_client::registry::Registry;

use super::super::ReconcileMetrics;

/// The reconciler's families as rendered (OpenMetrics).
fn rendered() -> BTreeMap<String, Family> {
    let mut registry = Registry::default();
    let _metrics = ReconcileMetrics::register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    catalogue::rendered(&text, "agent")
}

#[test]
fn every_reconciler_family_is_documented_exactly() {
    let families = rendered();
    assert_eq!(
        families.keys().collect::<Vec<_>>(),
        [
            "lachesis_amphora_ports",
            "lachesis_ghost_bindings",
            "lachesis_plan_anomalies",
            "lachesis_plan_route_fallbacks",
            "lachesis_plan_step_duration_seconds",
            "lachesis_reconcile_duration_seconds",
            "lachesis_reconcile_kicks_total",
            "lachesis_reconcile_runs_total",
        ]
    );
    catalogue::assert_documented(&families);
}
