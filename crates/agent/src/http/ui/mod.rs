//! The debug pages for a browser (`/debug/ui/…`, docs/agent-http.md):
//! server-rendered HTML over the same [`DebugSource`] as the JSON pages,
//! no script and no external asset. Every page is sent with a
//! `Content-Security-Policy` that allows neither, so a page that tried to
//! load anything would be refused by the browser (and say so on its
//! console, which the browser test reads).
//!
//! A module boundary of its own (issue 22): ~4 000 lines of HTML rendering
//! that reach the rest of the agent only through the debug listener's seam
//! (`http::source::DebugSource` and the data types it hands out) and the
//! listener's own plumbing (`reply`, `params`, `lookup`'s explanation,
//! `debug`'s flow limits) — never the daemon, the ledger's owner, the
//! configuration or the datapath. `boundary_tests` holds that.

mod anomalies;
mod flows;
mod health;
mod html;
mod lookup;
mod node;
mod plan;
#[cfg(test)]
pub(crate) mod prose;
mod topology;
mod units;

#[cfg(test)]
pub(crate) use lookup::answer_text as lookup_answer_text;

use bytes::Bytes;
use hyper::header::{HeaderValue, CACHE_CONTROL, LOCATION};
use hyper::{Request, StatusCode};
use lachesis_abi::Zone;
use lachesis_planner::{Plan, Topology};

use super::params::BadParams;
use super::reply::{reply, text, Reply};
use super::source::DebugSource;
use html::{Html, CODE_TD, P, TD, TH};

/// Each page, its name and what it shows, in the navigation bar's order
/// (every path is also in `super::debug::PATHS`).
const NAV: &[(&str, &str, &str)] = &[
    ("/debug/ui/", "Index", "this page: what the agent holds now"),
    (
        node::PATH,
        "This node",
        "this node's taps: the port, tenant and server behind each, its bytes, whether it is attached, its heals",
    ),
    (
        "/debug/ui/plan",
        "Plan",
        "the committed plan's trie rows, bindings, router MACs and amphora addresses; filter by tenant, MAC or address",
    ),
    (
        "/debug/ui/anomalies",
        "Anomalies",
        "what the planner found odd in the cloud, what each class means and what to do",
    ),
    (
        "/debug/ui/lookup",
        "Lookup",
        "how one packet would be classified, step by step: which map, which row, which zone, which external network",
    ),
    (
        flows::PATH,
        "Flows",
        "the kernel's largest flows: bytes, zone, the VM and its peer, who is billed",
    ),
    (
        "/debug/ui/topology",
        "Topology",
        "the cloud the plan came from, drawn — the tenants with VMs on this node, or every tenant",
    ),
];

/// The machine-readable pages the index links to.
const JSON_PAGES: &[(&str, &str)] = &[
    (
        "/debug/config",
        "effective configuration (YAML, secrets redacted)",
    ),
    ("/debug/plan", "committed plan (JSON)"),
    ("/debug/anomalies", "anomalies (JSON)"),
    ("/debug/flows", "largest flows (JSON)"),
    (
        "/debug/log-level",
        "the log filter in force (text; PUT a level to change it)",
    ),
];

/// Nothing but inline styles and `data:` images; forms post back here.
const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; \
                   form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

const NO_PLAN: &str = "No committed plan yet: boot has not finished its first sync.";

/// A page: what it reads from and the request.
pub(crate) type UiPage = fn(&dyn DebugSource, &Request<Bytes>) -> Reply;

/// The page serving `path`, if it is one of the UI's.
pub(crate) fn page_for(path: &str) -> Option<UiPage> {
    let page: UiPage = match path {
        // Where a person types first: sent on to the index.
        "/debug" | "/debug/" | "/debug/ui" => redirect_to_index,
        "/debug/ui/" => index,
        "/debug/ui/plan" => plan::page,
        "/debug/ui/anomalies" => anomalies::page,
        "/debug/ui/lookup" => lookup::page,
        "/debug/ui/topology" => topology::page,
        node::PATH => node::page,
        flows::PATH => flows::page,
        _ => return None,
    };
    Some(page)
}

fn redirect_to_index(_: &dyn DebugSource, _: &Request<Bytes>) -> Reply {
    let mut r = text(StatusCode::SEE_OTHER, "the debug pages are at /debug/ui/");
    r.headers_mut()
        .insert(LOCATION, HeaderValue::from_static("/debug/ui/"));
    r
}

/// `body` inside the common frame: title, navigation (`current` marked),
/// the health strip, style, and the headers every page carries.
fn document(
    source: &dyn DebugSource,
    status: StatusCode,
    title: &'static str,
    current: &str,
    body: Html,
) -> Reply {
    let mut h = Html::new();
    h.raw("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">")
        .raw("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">")
        .raw("<title>Lachesis debug · ")
        .raw(title)
        .raw("</title><link rel=\"icon\" href=\"data:,\"><style>")
        .raw(STYLE)
        .raw("</style></head><body><header><span class=\"brand\">Lachesis</span> <span class=\"muted\">debug listener</span><nav>");
    for (path, label, _) in NAV {
        h.raw("<a").attr("href", path);
        if *path == current {
            h.raw(" class=\"here\" aria-current=\"page\"");
        }
        h.raw(">").text(label).raw("</a>");
    }
    h.raw("</nav></header>");
    health::strip(&mut h, &source.health());
    h.raw("<main><h1>")
        .raw(title)
        .raw("</h1>")
        .append(body)
        .raw("</main><footer>Read-only views of the agent's live state. This listener shows tenant ids, MACs and addresses: keep it on loopback.</footer></body></html>\n");
    let mut r = reply(status, super::reply::HTML, h.into_string());
    let headers = r.headers_mut();
    headers.insert("content-security-policy", HeaderValue::from_static(CSP));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// A 503-style page before the first plan.
fn no_plan(source: &dyn DebugSource, title: &'static str, current: &str) -> Reply {
    let mut h = Html::new();
    h.element(P, NO_PLAN);
    document(source, StatusCode::SERVICE_UNAVAILABLE, title, current, h)
}

/// A page that refuses its parameters: every one, each with what was
/// wrong and the form expected; the form is still shown.
fn bad_request(
    source: &dyn DebugSource,
    title: &'static str,
    current: &str,
    problems: &BadParams,
    body: Html,
) -> Reply {
    let mut h = Html::new();
    h.raw("<ul class=\"error\" id=\"bad-params\">");
    for bad in problems.each() {
        h.raw("<li>").text(bad).raw("</li>");
    }
    h.raw("</ul>").append(body);
    document(source, StatusCode::BAD_REQUEST, title, current, h)
}

fn index(source: &dyn DebugSource, _: &Request<Bytes>) -> Reply {
    let mut h = Html::new();
    h.raw("<ul class=\"pages\">");
    for (path, label, what) in NAV.iter().skip(1) {
        h.raw("<li>")
            .link(path, label)
            .raw(" — ")
            .text(what)
            .raw("</li>");
    }
    h.raw("</ul><h2>Now</h2>");
    match source.committed_plan() {
        Some(plan) => plan_summary(
            &mut h,
            &plan,
            source.bindings().iter().filter(|b| b.ghost).count(),
        ),
        None => {
            h.element(P, NO_PLAN);
        }
    }
    let taps = source.taps();
    let attached = taps
        .board
        .taps
        .iter()
        .filter(|t| t.state == crate::links::TapState::Attached)
        .count();
    h.raw("<p>This node: ")
        .link(
            node::PATH,
            format_args!(
                "{} matching taps, {attached} attached",
                taps.board.taps.len()
            ),
        )
        .text(format_args!(
            " ({}); {} heals since start.",
            taps.attach_mode, taps.heals_total
        ))
        .raw("</p>");
    match source.topology() {
        Some(t) => topology_summary(&mut h, &t),
        None => {
            h.element(
                P,
                "No topology: the plan in force came from the state file (degraded boot), or no sync has finished yet. The topology view fills in at the next successful sync.",
            );
        }
    }
    h.raw("<h2>Machine-readable</h2><ul>");
    for (path, what) in JSON_PAGES {
        h.raw("<li>")
            .link(path, path)
            .raw(" — ")
            .text(what)
            .raw("</li>");
    }
    h.raw("<li><code>/debug/lookup?mac=…&amp;ip=…</code> — the lookup as JSON</li></ul>");
    document(source, StatusCode::OK, "Index", "/debug/ui/", h)
}

fn plan_summary(h: &mut Html, plan: &Plan, ghosts: usize) {
    let v4 = plan.trie.iter().filter(|r| r.prefix.is_ipv4()).count();
    h.raw("<table class=\"kv\"><tbody>");
    let rows: [(&str, String); 6] = [
        (
            "trie rows",
            format!(
                "{} ({v4} IPv4, {} IPv6)",
                plan.trie.len(),
                plan.trie.len() - v4
            ),
        ),
        (
            "bindings",
            format!(
                "{} (+ {ghosts} ghosts in their grace window)",
                plan.bindings.len()
            ),
        ),
        ("router MACs", plan.router_macs.len().to_string()),
        ("amphora addresses", plan.amphora_ips.len().to_string()),
        ("anomalies", plan.anomalies.len().to_string()),
        (
            "best-effort lists",
            plan.sources
                .by_list()
                .iter()
                .map(|(list, status)| format!("{list} {}", status.label()))
                .collect::<Vec<_>>()
                .join(", "),
        ),
    ];
    for (name, value) in rows {
        h.raw("<tr>")
            .element(TH, name)
            .element(TD, value)
            .raw("</tr>");
    }
    h.raw("</tbody></table>");
}

fn topology_summary(h: &mut Html, t: &Topology) {
    let external = t.networks.iter().filter(|n| n.external).count();
    h.raw("<p>The cloud of the last sync: ")
        .text(format_args!(
            "{} projects, {} networks ({external} external), {} routers, {} floating IPs, {} VM ports.",
            t.projects.len(),
            t.networks.len(),
            t.routers.len(),
            t.floating_ips.len(),
            t.vm_ports.len()
        ))
        .raw("</p>");
}

/// A page's query as an HTML form sends it: every field, the empty ones
/// as `name=`.
#[derive(Debug, Default)]
pub(crate) struct Form {
    pairs: Vec<(String, String)>,
}

impl Form {
    pub(crate) fn new(query: Option<&str>) -> Form {
        Form {
            pairs: query
                .map(|q| {
                    url::form_urlencoded::parse(q.as_bytes())
                        .into_owned()
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// What was typed into `name` (to refill the form); `""` when nothing.
    pub(crate) fn value(&self, name: &str) -> &str {
        self.pairs
            .iter()
            .find(|(n, _)| n == name)
            .map_or("", |(_, v)| v.as_str())
    }

    /// The query without its empty fields: an empty field is a parameter
    /// not given (the JSON pages' parsers then read it).
    pub(crate) fn filled(&self) -> Option<String> {
        let mut out = url::form_urlencoded::Serializer::new(String::new());
        let mut any = false;
        for (name, value) in self.pairs.iter().filter(|(_, v)| !v.trim().is_empty()) {
            out.append_pair(name, value.trim());
            any = true;
        }
        any.then(|| out.finish())
    }
}

/// A zone as a coloured label.
fn zone_badge(h: &mut Html, zone: Zone) {
    h.raw("<span class=\"zone z-")
        .raw(zone.label())
        .raw("\">")
        .raw(zone.label())
        .raw("</span>");
}

/// A project as a cell: its name (when known) over its id.
fn tenant_cell(h: &mut Html, topology: Option<&Topology>, id: &str) {
    if id == "*" {
        h.raw("<td><code>*</code> <span class=\"muted\">every tenant</span></td>");
        return;
    }
    let name = topology
        .and_then(|t| t.projects.get(id))
        .map(String::as_str);
    named_cell(h, name, id);
}

/// A cell with `name` over `id`, or `id` alone when there is no name (or
/// the name is the id).
fn named_cell(h: &mut Html, name: Option<&str>, id: &str) {
    match name.filter(|n| !n.is_empty() && *n != id) {
        Some(name) => {
            h.raw("<td>")
                .text(name)
                .raw("<br><code class=\"id\">")
                .text(id)
                .raw("</code></td>");
        }
        None => {
            h.element(CODE_TD, id);
        }
    }
}

/// Shared look: readable tables, zones in colour, nothing fetched.
const STYLE: &str = "
:root{--fg:#1d2330;--muted:#667085;--line:#d0d5dd;--bg:#f7f8fa;--accent:#2c5fb3}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;color:var(--fg);background:var(--bg)}
header{display:flex;gap:1.5em;align-items:baseline;padding:.7em 1.5em;background:#1d2330;color:#fff}
header .brand{font-weight:700;font-size:1.1em;letter-spacing:.02em}
header .muted{color:#aab3c5}
nav{display:flex;gap:1em;margin-left:auto;flex-wrap:wrap}
nav a{color:#cfd8ea;text-decoration:none;padding:.15em .4em;border-radius:4px}
nav a.here{background:#3a4660;color:#fff}
main{padding:1em 1.5em 2em;max-width:1400px}
.health{display:flex;flex-wrap:wrap;gap:.4em 1.4em;padding:.45em 1.5em;font-size:.92em;border-bottom:1px solid var(--line);background:#ecfdf3}
.health.warn{background:#fff8e1}
.health .k{color:var(--muted)}
.health .item.bad b{color:#b42318}
td.num{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}
.badge{display:inline-block;padding:0 .45em;border-radius:3px;font-size:12.5px;color:#fff}
.badge.good{background:#067647}.badge.bad{background:#b42318}
h1{font-size:1.4em;margin:.3em 0 .6em}
h2{font-size:1.1em;margin:1.4em 0 .5em}
h2 code{font-size:1em}
a{color:var(--accent)}
code{font:12.5px ui-monospace,'DejaVu Sans Mono',monospace}
code.id{color:var(--muted);font-size:11.5px}
.muted{color:var(--muted)}
table{border-collapse:collapse;background:#fff;margin:.3em 0 1em;min-width:40%}
th,td{border:1px solid var(--line);padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#eef1f6;font-weight:600}
table.kv th{width:14em}
form.filters{display:flex;flex-wrap:wrap;gap:.8em;align-items:end;background:#fff;border:1px solid var(--line);padding:.8em;margin-bottom:1em}
form.filters label{display:flex;flex-direction:column;font-size:.9em;color:var(--muted)}
input,select{font:inherit;padding:.25em .4em;border:1px solid var(--line);border-radius:4px;min-width:14em}
button{font:inherit;padding:.35em 1em;border:0;border-radius:4px;background:var(--accent);color:#fff}
.error{background:#fdecea;border:1px solid #f5c2bd;padding:.6em;color:#8a1c12}
ul.error{list-style:none;margin:0 0 1em}
.note{background:#fff8e1;border:1px solid #f1dea0;padding:.6em}
.zone{display:inline-block;padding:0 .45em;border-radius:3px;font:12.5px ui-monospace,monospace;color:#fff}
.z-external{background:#b54708}.z-same_tenant{background:#067647}.z-other_tenant{background:#6941c6}
.z-infra{background:#475467}.z-miss{background:#b42318}.z-shared{background:#0e7090}.z-multicast{background:#98a2b3}
ol.steps>li{background:#fff;border:1px solid var(--line);padding:.6em .8em;margin:.5em 0}
ol.steps>li.decided{border-color:var(--accent);box-shadow:inset 4px 0 0 var(--accent)}
.verdict{font-size:1.15em;background:#fff;border:1px solid var(--line);padding:.8em;margin:1em 0}
ul.pages li{margin:.3em 0}
footer{padding:1em 1.5em;color:var(--muted);font-size:.85em}
svg{background:#fff;border:1px solid var(--line)}
svg text{font:12px system-ui,sans-serif;fill:#1d2330}
svg text.small{font-size:10.5px;fill:#475467}
svg .edge{stroke:#98a2b3;stroke-width:1.5;fill:none}
svg .edge.gateway{stroke:#b54708;stroke-dasharray:5 3}
svg .edge.fip{stroke:#b54708;stroke-width:1}
svg .network rect{fill:#eaf2ff;stroke:#2c5fb3}
svg .network.shared rect{fill:#e0f4f8;stroke:#0e7090}
svg .network.external rect{fill:#fff1e6;stroke:#b54708}
svg .router rect{fill:#f2f4f7;stroke:#1d2330;stroke-width:1.5}
svg .fip rect{fill:#fffaf5;stroke:#b54708}
svg .vm rect{fill:#ecfdf3;stroke:#067647}
svg .group{fill:#fafbfc;stroke:#d0d5dd;stroke-dasharray:4 3}
svg text.group-label{font-weight:600;fill:#475467;paint-order:stroke;stroke:#fafbfc;stroke-width:5px}
";

#[cfg(test)]
mod tests;

#[cfg(test)]
mod boundary_tests {
    /// What the pages may name of the rest of the crate: the debug seam and
    /// the plain data types it carries, and the listener's plumbing.
    const ALLOWED: &[&str] = &[
        "crate::http::source",
        "crate::http::reply",
        "crate::http::params",
        "crate::http::lookup",
        "crate::http::debug::flows_limit",
        "crate::http::{FLOWS_DEFAULT_LIMIT, FLOWS_MAX_LIMIT}",
        "crate::reconcile::{LastPass, PassResult, Trigger}",
        "crate::reconcile::PassResult",
        "crate::links::{TapState, TapStatus}",
        "crate::links::{TapBoard, TapState, TapStatus}",
        "crate::links::TapState::",
    ];

    #[test]
    fn the_pages_reach_the_agent_only_through_the_debug_seam() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/http/ui");
        let files: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.extension().is_some_and(|e| e == "rs")
                    && !p.ends_with("tests.rs")
                    && !p.ends_with("prose.rs")
            })
            .collect();
        assert!(files.len() > 5, "{files:?}");
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            // Only the code before this file's tests.
            let code = text.split("#[cfg(test)]\nmod ").next().unwrap_or_default();
            for (at, _) in code.match_indices("crate::") {
                let rest = &code[at..];
                assert!(
                    ALLOWED.iter().any(|a| rest.starts_with(a)),
                    "{}: the pages name {:?}, outside the debug seam",
                    file.display(),
                    rest.lines().next().unwrap_or_default()
                );
            }
        }
    }
}
