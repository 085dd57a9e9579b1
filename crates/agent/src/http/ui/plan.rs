//! `/debug/ui/plan`: the committed plan as tables — trie rows, bindings
//! (live and ghosts), router MACs, amphora addresses — filtered by tenant,
//! MAC and address with a plain GET form.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv6Addr};

use bytes::Bytes;
use hyper::{Request, StatusCode};
use lachesis_abi::Mac;
use lachesis_planner::{AmphoraIp, Plan, RouterMac, Topology, TrieRow};

use super::html::{Html, CODE_TD, P, TD};
use super::{bad_request, document, no_plan, tenant_cell, zone_badge, Form};
use crate::http::params::{BadParam, Params};
use crate::http::reply::Reply;
use crate::http::source::{DebugSource, LiveBinding};

const TITLE: &str = "Plan";
const PATH: &str = "/debug/ui/plan";

/// Rows shown per table; the rest are counted and a filter suggested.
pub(super) const ROWS_SHOWN: usize = 500;

const MAC_FORM: &str = "a MAC address like fa:16:3e:00:00:01";
const ADDRESS_FORM: &str = "an IPv4 or IPv6 address";

/// The page's filters; each narrows every table it applies to.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Filter {
    /// A project id, or `*` for the global rows.
    pub tenant: Option<String>,
    /// A VM or router MAC.
    pub mac: Option<Mac>,
    /// An address.
    pub address: Option<IpAddr>,
}

impl Filter {
    pub(super) fn parse(form: &Form) -> Result<Filter, BadParam> {
        let p = Params::parse(form.filled().as_deref(), &["tenant", "mac", "address"])?;
        Ok(Filter {
            tenant: p.get("tenant").map(str::to_owned),
            mac: p.optional("mac", MAC_FORM, |t| t.parse().ok())?,
            address: p.optional("address", ADDRESS_FORM, |t| t.parse().ok())?,
        })
    }

    /// Trie rows: the tenant's (or `*`'s); for a MAC the rows the kernel
    /// consults for it (its tenant's, then `*`); those holding the address.
    fn row(&self, r: &TrieRow, mac_tenant: Option<&str>) -> bool {
        let scope = r.tenant.as_str();
        self.tenant.as_deref().is_none_or(|t| t == scope)
            && self
                .mac
                .is_none_or(|_| scope == "*" || mac_tenant == Some(scope))
            && self.address.is_none_or(|a| r.prefix.contains(a))
    }

    /// Bindings: the tenant's, the MAC's, those whose port holds the
    /// address (known from the topology).
    fn binding(&self, b: &LiveBinding, topology: Option<&Topology>) -> bool {
        let b = &b.binding;
        self.tenant.as_deref().is_none_or(|t| t == b.tenant)
            && self.mac.is_none_or(|m| m == b.mac)
            && self.address.is_none_or(|a| {
                topology.is_some_and(|t| {
                    t.vm_ports
                        .iter()
                        .any(|p| p.id == b.port && p.addresses.contains(&a))
                })
            })
    }

    /// Router MACs: of the tenant's routers (from the topology), the MAC.
    fn router(&self, r: &RouterMac, topology: Option<&Topology>) -> bool {
        self.tenant.as_deref().is_none_or(|t| {
            topology
                .and_then(|top| top.router(&r.router))
                .is_some_and(|router| router.project == t)
        }) && self.mac.is_none_or(|m| m == r.mac)
    }

    /// Amphora addresses: the tenant's, the address (IPv4 compared in its
    /// mapped form, as the kernel keys it).
    fn amphora(&self, a: &AmphoraIp) -> bool {
        self.tenant.as_deref().is_none_or(|t| t == a.tenant)
            && self.address.is_none_or(|x| mapped(x) == mapped(a.address))
    }

    /// Which filters a table with `applies` (tenant, mac, address) used.
    fn applied(&self, applies: [bool; 3]) -> Vec<&'static str> {
        let given = [
            self.tenant.is_some(),
            self.mac.is_some(),
            self.address.is_some(),
        ];
        ["tenant", "MAC", "address"]
            .into_iter()
            .zip(given.into_iter().zip(applies))
            .filter(|(_, (g, a))| *g && *a)
            .map(|(name, _)| name)
            .collect()
    }

    fn is_empty(&self) -> bool {
        *self == Filter::default()
    }
}

fn mapped(a: IpAddr) -> Ipv6Addr {
    match a {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    }
}

pub(super) fn page(source: &dyn DebugSource, req: &Request<Bytes>) -> Reply {
    let form = Form::new(req.uri().query());
    let Some(plan) = source.committed_plan() else {
        return no_plan(TITLE, PATH);
    };
    let topology = source.topology();
    let topology = topology.as_deref();
    let bindings = source.bindings();
    let filter = match Filter::parse(&form) {
        Ok(f) => f,
        Err(e) => {
            let mut h = Html::new();
            filter_form(&mut h, &plan, &bindings, topology, &form);
            return bad_request(TITLE, PATH, &e.to_string(), h);
        }
    };
    let mut h = Html::new();
    filter_form(&mut h, &plan, &bindings, topology, &form);
    if !filter.is_empty() {
        h.raw("<p class=\"muted\">Filters apply to the tables they make sense for; each table's heading says which it used. ")
            .link(PATH, "Clear the filters")
            .raw(".</p>");
    }
    trie_table(&mut h, &plan, &bindings, topology, &filter);
    bindings_table(&mut h, &bindings, topology, &filter);
    routers_table(&mut h, &plan, topology, &filter);
    amphora_table(&mut h, &plan, topology, &filter);
    document(StatusCode::OK, TITLE, PATH, h)
}

fn filter_form(
    h: &mut Html,
    plan: &Plan,
    bindings: &[LiveBinding],
    topology: Option<&Topology>,
    form: &Form,
) {
    let mut tenants: BTreeSet<&str> = plan.trie.iter().map(|r| r.tenant.as_str()).collect();
    tenants.extend(bindings.iter().map(|b| b.binding.tenant.as_str()));
    let chosen = form.value("tenant");
    h.raw("<form class=\"filters\" method=\"get\" action=\"/debug/ui/plan\"><label>tenant<select name=\"tenant\"><option value=\"\">any</option>");
    for t in tenants {
        h.raw("<option").attr("value", t);
        if t == chosen {
            h.raw(" selected");
        }
        h.raw(">");
        match (t, topology) {
            ("*", _) => h.text("* (global rows)"),
            (t, Some(top)) => h.text(format_args!("{} ({t})", top.project_label(t))),
            (t, None) => h.text(t),
        };
        h.raw("</option>");
    }
    h.raw("</select></label><label>MAC<input name=\"mac\" placeholder=\"fa:16:3e:…\"")
        .attr("value", form.value("mac"))
        .raw("></label><label>address<input name=\"address\" placeholder=\"10.0.0.5\"")
        .attr("value", form.value("address"))
        .raw("></label><button type=\"submit\">Filter</button></form>");
}

/// A table's heading: the name, how many rows pass of how many, the
/// filters used.
fn heading(h: &mut Html, name: &'static str, shown: usize, total: usize, used: &[&str]) {
    h.raw("<h2>").raw(name).raw(" <span class=\"muted\">");
    if used.is_empty() {
        h.text(total);
    } else {
        h.text(format_args!(
            "{shown} of {total}, by {}",
            used.join(" and ")
        ));
    }
    h.raw("</span></h2>");
}

/// The rest not shown, if any.
fn more(h: &mut Html, passing: usize) {
    if passing > ROWS_SHOWN {
        h.raw("<p class=\"note\">")
            .text(format_args!(
                "{} more rows not shown: narrow with a filter.",
                passing - ROWS_SHOWN
            ))
            .raw("</p>");
    }
}

fn trie_table(
    h: &mut Html,
    plan: &Plan,
    bindings: &[LiveBinding],
    topology: Option<&Topology>,
    filter: &Filter,
) {
    let mac_tenant = filter.mac.and_then(|m| {
        bindings
            .iter()
            .find(|b| b.binding.mac == m)
            .map(|b| b.binding.tenant.as_str())
    });
    let rows: Vec<&TrieRow> = plan
        .trie
        .iter()
        .filter(|r| filter.row(r, mac_tenant))
        .collect();
    heading(
        h,
        "Trie rows",
        rows.len(),
        plan.trie.len(),
        &filter.applied([true, true, true]),
    );
    h.element(
        P,
        "The LPM tries zones_v4 and zones_v6: a VM's packet is looked up among its tenant's rows first, the global rows (*) only when none holds the address; the longest prefix wins.",
    );
    if filter.mac.is_some() && mac_tenant.is_none() {
        h.raw("<p class=\"note\">That MAC has no binding: the kernel reads no row for it (zone miss).</p>");
    }
    h.raw("<table><thead><tr><th>tenant</th><th>prefix</th><th>zone</th></tr></thead><tbody>");
    for r in rows.iter().take(ROWS_SHOWN) {
        h.raw("<tr>");
        tenant_cell(h, topology, r.tenant.as_str());
        h.element(CODE_TD, r.prefix).raw("<td>");
        zone_badge(h, r.zone);
        h.raw("</td></tr>");
    }
    h.raw("</tbody></table>");
    more(h, rows.len());
}

fn bindings_table(
    h: &mut Html,
    bindings: &[LiveBinding],
    topology: Option<&Topology>,
    filter: &Filter,
) {
    let rows: Vec<&LiveBinding> = bindings
        .iter()
        .filter(|b| filter.binding(b, topology))
        .collect();
    heading(
        h,
        "Bindings",
        rows.len(),
        bindings.len(),
        &filter.applied([true, true, true]),
    );
    h.element(
        P,
        "The endpoints map: each VM MAC the kernel knows, and who its bytes are billed to. Ghosts are bindings whose port is gone, kept for their grace window.",
    );
    h.raw("<table><thead><tr><th>MAC</th><th>tenant</th><th>server</th><th>port</th><th>fallback external network</th><th>flags</th><th></th></tr></thead><tbody>");
    for lb in rows.iter().take(ROWS_SHOWN) {
        let b = &lb.binding;
        h.raw("<tr>").element(CODE_TD, b.mac);
        tenant_cell(h, topology, &b.tenant);
        match topology.map(|t| t.server_label(&b.server)) {
            Some(name) if name != b.server => {
                h.raw("<td>")
                    .text(name)
                    .raw("<br><code class=\"id\">")
                    .text(&b.server)
                    .raw("</code></td>");
            }
            _ => {
                h.element(CODE_TD, &b.server);
            }
        }
        h.element(CODE_TD, &b.port)
            .element(TD, b.external_network.as_deref().unwrap_or("none"));
        let flags: Vec<&str> = [(b.amphora, "amphora"), (lb.ghost, "ghost")]
            .into_iter()
            .filter_map(|(on, name)| on.then_some(name))
            .collect();
        h.element(TD, flags.join(", "))
            .raw("<td>")
            .link(format_args!("/debug/ui/lookup?mac={}", b.mac), "lookup…")
            .raw("</td></tr>");
    }
    h.raw("</tbody></table>");
    more(h, rows.len());
}

fn routers_table(h: &mut Html, plan: &Plan, topology: Option<&Topology>, filter: &Filter) {
    let rows: Vec<&RouterMac> = plan
        .router_macs
        .iter()
        .filter(|r| filter.router(r, topology))
        .collect();
    heading(
        h,
        "Router MACs",
        rows.len(),
        plan.router_macs.len(),
        &filter.applied([true, true, false]),
    );
    h.element(
        P,
        "Router interface MACs, never bound (a routed packet's zone is the trie's). The ledger labels a flow to such a MAC with the router's external network (DESIGN §6.4 rule 1).",
    );
    h.raw("<table><thead><tr><th>MAC</th><th>router</th><th>project</th><th>external network</th></tr></thead><tbody>");
    for r in rows.iter().take(ROWS_SHOWN) {
        h.raw("<tr>").element(CODE_TD, r.mac);
        let router = topology.and_then(|t| t.router(&r.router));
        match router {
            Some(router) if router.name.is_some() => {
                h.raw("<td>")
                    .text(router.label())
                    .raw("<br><code class=\"id\">")
                    .text(&r.router)
                    .raw("</code></td>");
            }
            _ => {
                h.element(CODE_TD, &r.router);
            }
        }
        match router {
            Some(router) => tenant_cell(h, topology, &router.project),
            None => {
                h.element(TD, "");
            }
        }
        h.element(TD, r.external_network.as_deref().unwrap_or("none"))
            .raw("</tr>");
    }
    h.raw("</tbody></table>");
    more(h, rows.len());
}

fn amphora_table(h: &mut Html, plan: &Plan, topology: Option<&Topology>, filter: &Filter) {
    let rows: Vec<&AmphoraIp> = plan
        .amphora_ips
        .iter()
        .filter(|a| filter.amphora(a))
        .collect();
    heading(
        h,
        "Amphora addresses",
        rows.len(),
        plan.amphora_ips.len(),
        &filter.applied([true, false, true]),
    );
    h.element(
        P,
        "The amphora_ips map: load-balancer data-port addresses under the load balancer's owner; traffic from them to the members (segment 2) is infra.",
    );
    h.raw("<table><thead><tr><th>tenant</th><th>address</th></tr></thead><tbody>");
    for a in rows.iter().take(ROWS_SHOWN) {
        h.raw("<tr>");
        tenant_cell(h, topology, &a.tenant);
        h.element(CODE_TD, a.address).raw("</tr>");
    }
    h.raw("</tbody></table>");
    more(h, rows.len());
}
