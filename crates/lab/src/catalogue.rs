//! The metrics catalogue (`docs/metrics.md`) as tests read it, so every
//! crate's families are held to one parse of it (DESIGN §10: a family that
//! is registered but undocumented, or documented otherwise, fails a test).

use std::collections::{BTreeMap, BTreeSet};

use crate::exposition;

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

/// Reads every family of an `OpenMetrics` rendering as `owner`'s: its
/// `# TYPE` and the label names of its first sample.
///
/// # Panics
/// A line neither metrics text format can hold.
#[must_use]
pub fn parse(text: &str, owner: &str) -> Rendering {
    let mut out = Rendering::default();
    for family in exposition::parse(text).families {
        let Some(kind) = family.kind else { continue };
        // OpenMetrics names a counter's and an info's family without their
        // sample suffix.
        let name = match kind.as_str() {
            "counter" => format!("{}_total", family.name),
            "info" => format!("{}_info", family.name),
            _ => family.name,
        };
        let Some(sample) = family.samples.first() else {
            out.empty.insert(name);
            continue;
        };
        out.families.insert(
            name,
            Family {
                kind,
                labels: sample
                    .label_names()
                    .into_iter()
                    .filter(|l| l != "le")
                    .collect(),
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

/// The label names of one sample line in the order written (a histogram
/// bucket's `le` among them), read by [`exposition::parse_sample`]: a
/// `,`, `=` or `}` inside a value from the cloud does not end a label.
///
/// # Panics
/// Not a sample line.
#[must_use]
pub fn label_names(sample: &str) -> Vec<String> {
    exposition::parse_sample(sample)
        .unwrap_or_else(|e| panic!("{e}"))
        .label_names()
}

/// The sample lines of an OpenMetrics or Prometheus text rendering whose
/// label names are not their family's in the catalogue, in the catalogue's
/// order, then a bucket's `le` (a family the catalogue lacks counts too):
/// the first line of each family and wrong order found, with what was
/// found and what is documented.
///
/// # Panics
/// A line neither format can hold.
#[must_use]
pub fn series_off_catalogue(text: &str) -> Vec<String> {
    let docs = documented();
    let mut off = Vec::new();
    let mut seen = BTreeSet::new();
    for family in exposition::parse(text).families {
        let name = family.name.as_str();
        // OpenMetrics declares a counter and an info family without the
        // suffix their samples carry.
        let doc = family.kind.as_ref().and_then(|_| {
            [
                name.to_owned(),
                format!("{name}_total"),
                format!("{name}_info"),
            ]
            .into_iter()
            .find_map(|n| docs.get(&n))
        });
        for sample in &family.samples {
            let line = format!("{} {}", sample.series(), sample.text);
            if family.kind.is_none() {
                off.push(format!("{line}\n  a sample outside any # TYPE"));
                continue;
            }
            let found = sample.label_names();
            let bucket = sample.name.ends_with("_bucket");
            match doc {
                Some(doc)
                    if found.iter().map(String::as_str).eq(doc
                        .labels
                        .iter()
                        .map(String::as_str)
                        .chain(bucket.then_some("le"))) => {}
                _ if !seen.insert((name.to_owned(), found.clone())) => {}
                _ => off.push(format!(
                    "{line}\n  labels {found:?}, the catalogue's {name}: {:?}",
                    doc.map(|d| &d.labels)
                )),
            }
        }
    }
    off
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_names_skip_quoted_values_whatever_they_hold() {
        assert_eq!(label_names("a_total 1"), Vec::<String>::new());
        assert_eq!(label_names("a_total{} 1"), Vec::<String>::new());
        assert_eq!(
            label_names(r#"i_info{server_id="s",name="a,b=\"c}\" d",tenant_id="t"} 1"#),
            ["server_id", "name", "tenant_id"]
        );
        assert_eq!(
            label_names(r#"h_bucket{le="0.5",phase="copy"} 3"#),
            ["le", "phase"]
        );
    }
}
