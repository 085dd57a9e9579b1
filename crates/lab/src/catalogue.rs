//! The metrics catalogue (`docs/metrics.md`) as tests read it, so every
//! crate's families are held to one parse of it (DESIGN §10: a family that
//! is registered but undocumented, or documented otherwise, fails a test).

use std::collections::BTreeMap;

/// One family: its type, label names (a histogram's `le` aside) and, in the
/// catalogue, the crate that owns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Family {
    /// `counter`, `gauge`, `histogram`, `info`.
    pub kind: String,
    /// Label names in order.
    pub labels: Vec<String>,
    /// The owning crate as the catalogue names it (`ledger`, `agent`, …).
    pub owner: String,
}

/// The catalogue's rows, by the name a reader queries (`_total` included
/// for counters). Panics on a name documented twice.
#[must_use]
pub fn documented() -> BTreeMap<String, Family> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/metrics.md");
    let text = std::fs::read_to_string(path).expect("docs/metrics.md is readable");
    let mut out = BTreeMap::new();
    for line in text.lines() {
        // | `name` | type | labels | owner | meaning |
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 6 || !cells[1].starts_with("`lachesis_") {
            continue;
        }
        let name = cells[1].trim_matches('`').to_owned();
        let family = Family {
            kind: cells[2].to_owned(),
            labels: cells[3]
                .split(',')
                .map(|l| l.trim().trim_matches('`').to_owned())
                .filter(|l| !l.is_empty() && l != "—")
                .collect(),
            owner: cells[4].to_owned(),
        };
        assert!(
            out.insert(name.clone(), family).is_none(),
            "{name} documented twice"
        );
    }
    out
}

/// The families of an OpenMetrics rendering, as `owner`'s: the sample name
/// (`_total` for counters, `_info` for info), the type and the label names of the first
/// sample. A family must render at least one sample (seed label values).
#[must_use]
pub fn rendered(text: &str, owner: &str) -> BTreeMap<String, Family> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some(decl) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let (family, kind) = decl.split_once(' ').expect("`# TYPE name type`");
        // OpenMetrics names a counter's and an info's family without their
        // sample suffix.
        let name = match kind {
            "counter" => format!("{family}_total"),
            "info" => format!("{family}_info"),
            _ => family.to_owned(),
        };
        let sample = text
            .lines()
            .find(|l| !l.starts_with('#') && l.starts_with(family))
            .unwrap_or_else(|| panic!("{family} has no sample: seed its label values"));
        let mut labels: Vec<String> = sample
            .split_once('{')
            .map_or("", |(_, rest)| rest.split_once('}').map_or("", |(l, _)| l))
            .split(',')
            .filter_map(|kv| kv.split_once('=').map(|(k, _)| k.to_owned()))
            .filter(|k| k != "le")
            .collect();
        labels.dedup();
        out.insert(
            name,
            Family {
                kind: kind.to_owned(),
                labels,
                owner: owner.to_owned(),
            },
        );
    }
    out
}

/// Panics unless every family of `rendered` is in the catalogue with the
/// same type, labels and owner.
pub fn assert_documented(rendered: &BTreeMap<String, Family>) {
    let docs = documented();
    for (name, family) in rendered {
        let doc = docs
            .get(name)
            .unwrap_or_else(|| panic!("{name} is registered but missing from docs/metrics.md"));
        assert_eq!(doc, family, "{name}: documented type, labels and owner");
    }
}
