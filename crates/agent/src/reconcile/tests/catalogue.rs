//! Holds the reconciler's families against docs/metrics.md: every family it
//! registers is documented with the rendered type and labels, owner `agent`.

use std::collections::BTreeMap;

use prometheus_client::registry::Registry;

use super::super::ReconcileMetrics;

#[derive(Debug, PartialEq, Eq)]
struct Family {
    kind: String,
    labels: Vec<String>,
    owner: String,
}

/// Catalogue rows: name, type, labels, owner, meaning.
fn catalogue() -> BTreeMap<String, Family> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/metrics.md");
    let text = std::fs::read_to_string(path).expect("docs/metrics.md is readable");
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 6 || !cells[1].starts_with("`lachesis_") {
            continue;
        }
        let labels = cells[3]
            .split(',')
            .map(|l| l.trim().trim_matches('`').to_owned())
            .filter(|l| !l.is_empty() && l != "—")
            .collect();
        out.insert(
            cells[1].trim_matches('`').to_owned(),
            Family {
                kind: cells[2].to_owned(),
                labels,
                owner: cells[4].to_owned(),
            },
        );
    }
    out
}

/// Families as rendered (OpenMetrics): the sample name a reader queries
/// (`_total` for counters), the type, and the label names of its samples
/// (a histogram's `le` aside).
fn rendered() -> BTreeMap<String, Family> {
    let mut registry = Registry::default();
    let _metrics = ReconcileMetrics::register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some(decl) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let (family, kind) = decl.split_once(' ').unwrap();
        let sample = text
            .lines()
            .find(|l| !l.starts_with('#') && l.starts_with(family))
            .unwrap_or_else(|| panic!("{family} has no sample: seeded families render one"));
        let mut labels: Vec<String> = sample
            .split_once('{')
            .map_or("", |(_, rest)| rest.split_once('}').unwrap().0)
            .split(',')
            .filter_map(|kv| kv.split_once('=').map(|(k, _)| k.to_owned()))
            .filter(|k| k != "le")
            .collect();
        labels.dedup();
        let name = if kind == "counter" {
            format!("{family}_total")
        } else {
            family.to_owned()
        };
        out.insert(
            name,
            Family {
                kind: kind.to_owned(),
                labels,
                owner: "agent".to_owned(),
            },
        );
    }
    out
}

#[test]
fn every_reconciler_family_is_documented_exactly() {
    let docs = catalogue();
    let families = rendered();
    assert_eq!(
        families.keys().collect::<Vec<_>>(),
        [
            "lachesis_amphora_ports",
            "lachesis_ghost_bindings",
            "lachesis_reconcile_duration_seconds",
            "lachesis_reconcile_kicks_total",
            "lachesis_reconcile_runs_total",
        ]
    );
    for (name, family) in &families {
        let doc = docs
            .get(name)
            .unwrap_or_else(|| panic!("{name} is registered but missing from docs/metrics.md"));
        assert_eq!(doc, family, "{name}: documented type, labels and owner");
    }
}
