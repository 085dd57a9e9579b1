//! `/debug/ui/plan`: the committed plan as tables — trie rows, bindings
//! (live and ghosts), router MACs, amphora addresses — filtered by tenant,
//! MAC and address with a plain GET form.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv6Addr};

use bytes::Bytes;
use hyper::{Request, StatusCode};
use lachesis_abi::Mac;
use lachesis_planner::topology::RouterSummary;
use lachesis_planner::{AmphoraIp, Plan, RouterMac, Topology, TrieRow};

use super::html::{Html, CODE_TD, P, TD};
use super::{bad_request, document, named_cell, no_plan, tenant_cell, zone_badge, Form};
use crate::http::params::{BadParams, Params};
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
    pub(super) fn parse(form: &Form) -> Result<Filter, BadParams> {
        let mut p = Params::parse(form.filled().as_deref(), &["tenant", "mac", "address"]);
        let tenant = p.get("tenant").map(str::to_owned);
        let mac = p.optional("mac", MAC_FORM, |t| t.parse().ok());
        let address = p.optional("address", ADDRESS_FORM, |t| t.parse().ok());
        p.finish(Some(Filter {
            tenant,
            mac,
            address,
        }))
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
        return no_plan(source, TITLE, PATH);
    };
    let topology = source.topology();
    let topology = topology.as_deref();
    let bindings = source.bindings();
    let filter = match Filter::parse(&form) {
        Ok(f) => f,
        Err(e) => {
            let mut h = Html::new();
            filter_form(&mut h, &plan, &bindings, topology, &form);
            return bad_request(source, TITLE, PATH, &e, h);
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
    document(source, StatusCode::OK, TITLE, PATH, h)
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

/// One table of the page.
struct Table {
    name: &'static str,
    /// What the table is, one paragraph.
    about: &'static str,
    /// Which filters narrow it: tenant, MAC, address.
    applies: [bool; 3],
    /// The header row's cells.
    columns: &'static str,
}

impl Table {
    /// The heading (how many of `total` rows pass, by which filters), the
    /// paragraph, `note` if any, at most [`ROWS_SHOWN`] rows drawn by
    /// `row` (which writes the cells), and how many more there are.
    fn render<T>(
        &self,
        h: &mut Html,
        filter: &Filter,
        total: usize,
        rows: &[T],
        note: Option<&'static str>,
        mut row: impl FnMut(&mut Html, &T),
    ) {
        let used = filter.applied(self.applies);
        h.raw("<h2>").raw(self.name).raw(" <span class=\"muted\">");
        if used.is_empty() {
            h.text(total);
        } else {
            h.text(format_args!(
                "{} of {total}, by {}",
                rows.len(),
                used.join(" and ")
            ));
        }
        h.raw("</span></h2>").element(P, self.about);
        if let Some(note) = note {
            h.raw("<p class=\"note\">").text(note).raw("</p>");
        }
        h.raw("<table><thead><tr>")
            .raw(self.columns)
            .raw("</tr></thead><tbody>");
        for r in rows.iter().take(ROWS_SHOWN) {
            h.raw("<tr>");
            row(h, r);
            h.raw("</tr>");
        }
        h.raw("</tbody></table>");
        if rows.len() > ROWS_SHOWN {
            h.raw("<p class=\"note\">")
                .text(format_args!(
                    "{} more rows not shown: narrow with a filter.",
                    rows.len() - ROWS_SHOWN
                ))
                .raw("</p>");
        }
    }
}

const TRIE: Table = Table {
    name: "Trie rows",
    about: "The LPM tries zones_v4 and zones_v6: a VM's packet is looked up among its tenant's rows first, the global rows (*) only when none holds the address; the longest prefix wins.",
    applies: [true, true, true],
    columns: "<th>tenant</th><th>prefix</th><th>zone</th>",
};

const BINDINGS: Table = Table {
    name: "Bindings",
    about: "The endpoints map: each VM MAC the kernel knows, and who its bytes are billed to. Ghosts are bindings whose port is gone, kept for their grace window.",
    applies: [true, true, true],
    columns: "<th>MAC</th><th>tenant</th><th>server</th><th>port</th><th>fallback external network</th><th>flags</th><th></th>",
};

const ROUTER_MACS: Table = Table {
    name: "Router MACs",
    about: "Router interface MACs, never bound (a routed packet's zone is the trie's). The ledger labels a flow to such a MAC with the router's external network (DESIGN §6.4 rule 1).",
    applies: [true, true, false],
    columns: "<th>MAC</th><th>router</th><th>project</th><th>external network</th>",
};

const AMPHORAE: Table = Table {
    name: "Amphora addresses",
    about: "The amphora_ips map: load-balancer data-port addresses under the load balancer's owner; traffic from them to the members (segment 2) is infra.",
    applies: [true, false, true],
    columns: "<th>tenant</th><th>address</th>",
};

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
    let note = (filter.mac.is_some() && mac_tenant.is_none())
        .then_some("That MAC has no binding: the kernel reads no row for it (zone miss).");
    TRIE.render(h, filter, plan.trie.len(), &rows, note, |h, r| {
        tenant_cell(h, topology, r.tenant.as_str());
        h.element(CODE_TD, r.prefix).raw("<td>");
        zone_badge(h, r.zone);
        h.raw("</td>");
    });
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
    BINDINGS.render(h, filter, bindings.len(), &rows, None, |h, lb| {
        let b = &lb.binding;
        h.element(CODE_TD, b.mac);
        tenant_cell(h, topology, &b.tenant);
        named_cell(h, topology.map(|t| t.server_label(&b.server)), &b.server);
        h.element(CODE_TD, &b.port)
            .element(TD, b.external_network.as_deref().unwrap_or("none"));
        let flags: Vec<&str> = [(b.amphora, "amphora"), (lb.ghost, "ghost")]
            .into_iter()
            .filter_map(|(on, name)| on.then_some(name))
            .collect();
        h.element(TD, flags.join(", "))
            .raw("<td>")
            .link(format_args!("/debug/ui/lookup?mac={}", b.mac), "lookup…")
            .raw("</td>");
    });
}

fn routers_table(h: &mut Html, plan: &Plan, topology: Option<&Topology>, filter: &Filter) {
    let rows: Vec<&RouterMac> = plan
        .router_macs
        .iter()
        .filter(|r| filter.router(r, topology))
        .collect();
    ROUTER_MACS.render(h, filter, plan.router_macs.len(), &rows, None, |h, r| {
        h.element(CODE_TD, r.mac);
        let router = topology.and_then(|t| t.router(&r.router));
        named_cell(h, router.map(RouterSummary::label), &r.router);
        match router {
            Some(router) => tenant_cell(h, topology, &router.project),
            None => {
                h.element(TD, "");
            }
        }
        h.element(TD, r.external_network.as_deref().unwrap_or("none"));
    });
}

fn amphora_table(h: &mut Html, plan: &Plan, topology: Option<&Topology>, filter: &Filter) {
    let rows: Vec<&AmphoraIp> = plan
        .amphora_ips
        .iter()
        .filter(|a| filter.amphora(a))
        .collect();
    AMPHORAE.render(h, filter, plan.amphora_ips.len(), &rows, None, |h, a| {
        tenant_cell(h, topology, &a.tenant);
        h.element(CODE_TD, a.address);
    });
}
