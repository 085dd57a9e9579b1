//! The metrics catalogue (`docs/metrics.md`) as tests read it, so every
//! crate's families are held to one parse of it (DESIGN §10: a family that
//! is registered but undocumented, or documented otherwise, fails a test).

use std::collections::{BTreeMap, BTreeSet};

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
    rows()
        .into_iter()
        .map(|(name, family, _)| (name, family))
        .collect()
}

/// The catalogue's `meaning` cell of `name`, as written (for a test that
/// holds a condition a family's series depend on to its documentation).
#[must_use]
pub fn meaning(name: &str) -> Option<String> {
    rows()
        .into_iter()
        .find_map(|(n, _, meaning)| (n == name).then_some(meaning))
}

/// Every row of docs/metrics.md: name, family, meaning.
fn rows() -> Vec<(String, Family, String)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/metrics.md");
    let text = std::fs::read_to_string(path).expect("docs/metrics.md is readable");
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
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
        assert!(seen.insert(name.clone()), "{name} documented twice");
        // An escaped `\|` in a meaning was split too: join the cells back
        // (the row's last cell, after the closing `|`, is empty).
        let meaning = cells[5..cells.len() - 1].join("|");
        out.push((name, family, meaning));
    }
    out
}

/// An OpenMetrics rendering read family by family.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rendering {
    /// The families with at least one sample, by sample name (`_total` for
    /// counters, `_info` for info), with the label names of their first
    /// sample.
    pub families: BTreeMap<String, Family>,
    /// The families declared (`# TYPE`) without any sample, by the same
    /// name.
    pub empty: BTreeSet<String>,
}

/// Reads every family of an OpenMetrics rendering as `owner`'s: a
/// family's samples are the lines after its `# TYPE` up to the next
/// family's comments.
#[must_use]
pub fn parse(text: &str, owner: &str) -> Rendering {
    let mut out = Rendering::default();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
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
        while lines.peek().is_some_and(|l| l.starts_with("# UNIT ")) {
            lines.next();
        }
        let Some(sample) = lines.peek().filter(|l| !l.starts_with('#')) else {
            out.empty.insert(name);
            continue;
        };
        let mut labels: Vec<String> = sample
            .split_once('{')
            .map_or("", |(_, rest)| rest.split_once('}').map_or("", |(l, _)| l))
            .split(',')
            .filter_map(|kv| kv.split_once('=').map(|(k, _)| k.to_owned()))
            .filter(|k| k != "le")
            .collect();
        labels.dedup();
        out.families.insert(
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

/// The families of an OpenMetrics rendering, as `owner`'s (see [`parse`]).
/// A family must render at least one sample (seed label values).
#[must_use]
pub fn rendered(text: &str, owner: &str) -> BTreeMap<String, Family> {
    let rendering = parse(text, owner);
    if let Some(name) = rendering.empty.first() {
        panic!("{name} has no sample: seed its label values");
    }
    rendering.families
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
