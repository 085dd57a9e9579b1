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
        out.families.insert(
            name,
            Family {
                kind: kind.to_owned(),
                labels: label_names(sample)
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
/// bucket's `le` among them). Values are skipped as the format quotes them, so a
/// `,`, `=` or `}` inside a name from the cloud does not end a label.
#[must_use]
pub fn label_names(sample: &str) -> Vec<String> {
    // The metric name ends at its labels' `{` or at the space before the value.
    match sample.find([' ', '{']) {
        Some(i) if sample[i..].starts_with('{') => label_names_in(&sample[i + 1..]),
        _ => Vec::new(),
    }
}

/// [`label_names`] of the text after a sample's `{`.
fn label_names_in(mut rest: &str) -> Vec<String> {
    let mut names = Vec::new();
    while let Some((name, after)) = rest.split_once("=\"") {
        let name = name.trim_start_matches(',');
        if name.starts_with('}') {
            break;
        }
        names.push(name.to_owned());
        // The value ends at the first quote no backslash escapes.
        let mut escaped = false;
        let end = after.char_indices().find_map(|(i, c)| {
            let closes = c == '"' && !escaped;
            escaped = c == '\\' && !escaped;
            closes.then_some(i)
        });
        let Some(end) = end else { break };
        rest = &after[end + 1..];
        if rest.starts_with('}') {
            break;
        }
    }
    names
}

/// The sample lines of an OpenMetrics or Prometheus text rendering whose
/// label names are not their family's in the catalogue, in the catalogue's
/// order, then a bucket's `le` (a family the catalogue lacks counts too):
/// the first line of each family and wrong order found, with what was
/// found and what is documented.
#[must_use]
pub fn series_off_catalogue(text: &str) -> Vec<String> {
    let docs = documented();
    let mut family: Option<(&str, Option<&Family>)> = None;
    let mut off = Vec::new();
    let mut seen = BTreeSet::new();
    for line in text.lines() {
        if let Some(decl) = line.strip_prefix("# TYPE ") {
            let name = decl.split_once(' ').map_or(decl, |(n, _)| n);
            // OpenMetrics declares a counter and an info family without
            // the suffix their samples carry.
            let documented = [
                name.to_owned(),
                format!("{name}_total"),
                format!("{name}_info"),
            ]
            .into_iter()
            .find_map(|n| docs.get(&n));
            family = Some((name, documented));
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let found = label_names(line);
        let bucket = line
            .split(['{', ' '])
            .next()
            .is_some_and(|name| name.ends_with("_bucket"));
        match family {
            Some((_, Some(doc)))
                if found.iter().map(String::as_str).eq(doc
                    .labels
                    .iter()
                    .map(String::as_str)
                    .chain(bucket.then_some("le"))) => {}
            Some((name, _)) if !seen.insert((name, found.clone())) => {}
            Some((name, doc)) => off.push(format!(
                "{line}\n  labels {found:?}, the catalogue's {name}: {:?}",
                doc.map(|d| &d.labels)
            )),
            None => off.push(format!("{line}\n  a sample before any # TYPE")),
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
