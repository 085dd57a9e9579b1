//! `lachesis plan --format table`: the plan for people. What can make the
//! plan wrong comes first (failed sources, skipped input); ids carry the
//! names of their projects, servers, networks and routers; each section
//! header counts what its title names.

use std::collections::HashMap;
use std::fmt::Write as _;

use lachesis_planner::snapshot::Skipped;
use lachesis_planner::{ParseReport, Plan, Snapshot, SourceStatus, Sources};

/// Names of the snapshot's objects by id, for display only.
struct Names<'a> {
    projects: HashMap<&'a str, &'a str>,
    servers: HashMap<&'a str, &'a str>,
    routers: HashMap<&'a str, &'a str>,
    /// External networks by their plan label (name, or id when nameless).
    external: HashMap<&'a str, Vec<(&'a str, Option<&'a str>)>>,
}

/// `id (name)`, or the id alone when the name is unknown or empty.
fn with_name(id: &str, name: Option<&str>) -> String {
    match name.filter(|n| !n.is_empty()) {
        Some(name) => format!("{id} ({name})"),
        None => id.to_owned(),
    }
}

impl<'a> Names<'a> {
    fn new(s: &'a Snapshot) -> Self {
        let mut external: HashMap<&str, Vec<(&str, Option<&str>)>> = HashMap::new();
        for n in s.networks.iter().filter(|n| n.external) {
            external
                .entry(n.label())
                .or_default()
                .push((n.id.as_str(), n.name.as_deref()));
        }
        Self {
            projects: s
                .projects
                .iter()
                .map(|p| (p.id.as_str(), p.name.as_str()))
                .collect(),
            servers: s
                .servers
                .iter()
                .flatten()
                .map(|v| (v.id.as_str(), v.name.as_str()))
                .collect(),
            routers: s
                .routers
                .iter()
                .filter_map(|r| Some((r.id.as_str(), r.name.as_deref()?)))
                .collect(),
            external,
        }
    }

    fn tenant(&self, id: &str) -> String {
        with_name(id, self.projects.get(id).copied())
    }

    fn server(&self, id: &str) -> String {
        with_name(id, self.servers.get(id).copied())
    }

    fn router(&self, id: &str) -> String {
        with_name(id, self.routers.get(id).copied())
    }

    /// A plan's external network label as `id (name)` when exactly one
    /// external network has that label; the label itself otherwise.
    fn external(&self, label: &str) -> String {
        match self.external.get(label).map(Vec::as_slice) {
            Some([(id, name)]) => with_name(id, *name),
            _ => label.to_owned(),
        }
    }
}

/// One skipped entry or part, as table cells.
fn skipped_row(s: &Skipped) -> Vec<String> {
    let entry = match (&s.id, s.index) {
        (Some(id), _) => id.clone(),
        (None, Some(i)) => format!("#{i}"),
        (None, None) => "?".to_owned(),
    };
    vec![
        s.list.to_owned(),
        entry,
        s.reason.field().unwrap_or("-").to_owned(),
        if s.whole_entry { "entry" } else { "part" }.to_owned(),
        s.reason.to_string(),
    ]
}

/// The best-effort lists, failed ones first: they make the plan incomplete.
fn sources(out: &mut String, s: Sources) {
    let mut lists = s.by_list();
    lists.sort_by_key(|(_, status)| *status != SourceStatus::Failed);
    let failed = lists
        .iter()
        .filter(|(_, st)| *st == SourceStatus::Failed)
        .count();
    section(
        out,
        &format!("best-effort sources ({failed} of {} failed)", lists.len()),
        &["LIST", "STATUS"],
        lists
            .iter()
            .map(|(list, status)| vec![(*list).to_owned(), status.label().to_owned()]),
    );
}

/// Renders the plan, the snapshot's names and the parse report.
pub fn render(p: &Plan, snap: &Snapshot, report: &ParseReport) -> String {
    let names = Names::new(snap);
    let mut out = String::new();
    sources(&mut out, p.sources);
    section(
        &mut out,
        &format!("skipped input ({})", report.skipped.len()),
        &["LIST", "ENTRY", "FIELD", "DROPPED", "PROBLEM"],
        report.skipped.iter().map(skipped_row),
    );
    section(
        &mut out,
        &format!("trie rows ({})", p.trie.len()),
        &["TENANT", "PREFIX", "ZONE"],
        p.trie.iter().map(|r| {
            vec![
                names.tenant(&r.tenant.to_string()),
                r.prefix.to_string(),
                r.zone.to_string(),
            ]
        }),
    );
    let external = |l: &Option<String>| {
        l.as_deref()
            .map_or_else(|| "none".to_owned(), |l| names.external(l))
    };
    section(
        &mut out,
        &format!("bindings ({})", p.bindings.len()),
        &[
            "MAC",
            "TENANT",
            "SERVER",
            "PORT",
            "EXTERNAL_NETWORK",
            "AMPHORA",
        ],
        p.bindings.iter().map(|b| {
            vec![
                b.mac.to_string(),
                names.tenant(&b.tenant),
                names.server(&b.server),
                b.port.clone(),
                external(&b.external_network),
                b.amphora.to_string(),
            ]
        }),
    );
    section(
        &mut out,
        &format!("router MACs ({})", p.router_macs.len()),
        &["MAC", "ROUTER", "EXTERNAL_NETWORK"],
        p.router_macs.iter().map(|r| {
            vec![
                r.mac.to_string(),
                names.router(&r.router),
                external(&r.external_network),
            ]
        }),
    );
    section(
        &mut out,
        &format!("amphora addresses ({})", p.amphora_ips.len()),
        &["TENANT", "ADDRESS"],
        p.amphora_ips
            .iter()
            .map(|a| vec![names.tenant(&a.tenant), a.address.to_string()]),
    );
    section(
        &mut out,
        &format!("anomalies ({})", p.anomalies.len()),
        &["CLASS", "DETAIL"],
        p.anomalies
            .iter()
            .map(|a| vec![a.class.to_string(), a.detail.clone()]),
    );
    let fell_back: u64 = p.route_fallbacks.values().sum();
    section(
        &mut out,
        &format!("route fallbacks (static routes that fell back to external: {fell_back})"),
        &["REASON", "ROUTES"],
        p.route_fallbacks
            .iter()
            .map(|(r, n)| vec![r.label().to_owned(), n.to_string()]),
    );
    out
}

/// A titled, aligned section; an empty one prints its title only.
fn section(
    out: &mut String,
    title: &str,
    header: &[&str],
    rows: impl Iterator<Item = Vec<String>>,
) {
    let rows: Vec<Vec<String>> = rows.collect();
    let _ = writeln!(out, "{title}");
    if rows.is_empty() {
        out.push('\n');
        return;
    }
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    for row in std::iter::once(&header).chain(&rows) {
        let mut line = String::new();
        for (i, (cell, w)) in row.iter().zip(&widths).enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<w$}  ");
            }
        }
        let _ = writeln!(out, "  {}", line.trim_end());
    }
    out.push('\n');
}
