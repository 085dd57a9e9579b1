//! `/debug/ui/lookup`: a form, and one packet's classification told step
//! by step — which kernel map, which key, which row, which zone — then the
//! external network the ledger labels it with. The answer is
//! [`crate::http::lookup::explain`]'s, the same as `/debug/lookup`'s JSON:
//! this page only renders it.

use bytes::Bytes;
use hyper::{Request, StatusCode};
use lachesis_planner::{RouterMac, Topology, TrieRow};

use super::html::{Html, CODE, CODE_TD, P};
use super::{bad_request, document, no_plan, tenant_cell, zone_badge, Form};
use crate::http::lookup::{explain, external_network, Explanation, ExternalRule, Query, Step};
use crate::http::reply::Reply;
use crate::http::source::{DebugSource, LiveBinding};

const TITLE: &str = "Lookup";
const PATH: &str = "/debug/ui/lookup";

pub(super) fn page(source: &dyn DebugSource, req: &Request<Bytes>) -> Reply {
    let form = Form::new(req.uri().query());
    let bindings = source.bindings();
    let plan = source.committed_plan();
    let topology = source.topology();
    let topology = topology.as_deref();
    let mut h = Html::new();
    lookup_form(
        &mut h,
        &form,
        &bindings,
        plan.as_ref().map_or(&[][..], |p| &p.router_macs[..]),
        topology,
    );
    let filled = form.filled();
    if filled.is_none() {
        h.element(
            P,
            "Give the VM's MAC and the remote address; the peer MAC (a router's for routed traffic, another VM's for direct L2) and the VM's own address are optional.",
        );
        return document(source, StatusCode::OK, TITLE, PATH, h);
    }
    let query = match Query::parse(filled.as_deref()) {
        Ok(q) => q,
        Err(e) => return bad_request(source, TITLE, PATH, &e, h),
    };
    let Some(plan) = plan else {
        return no_plan(source, TITLE, PATH);
    };
    let e = explain(&query, &plan.trie, &bindings, &plan.amphora_ips);
    answer(&mut h, &e, &plan.router_macs, topology);
    h.raw("<p class=\"muted\">The same answer as JSON: ")
        .link(
            format_args!("/debug/lookup?{}", filled.unwrap_or_default()),
            "/debug/lookup",
        )
        .raw("</p>");
    document(source, StatusCode::OK, TITLE, PATH, h)
}

/// The answer's part of the page: the verdict with its external network
/// (from the plan's `router_macs`), the steps, what was assumed.
fn answer(h: &mut Html, e: &Explanation, router_macs: &[RouterMac], topology: Option<&Topology>) {
    let external = external_network(e, router_macs);
    verdict(h, e, &external.label, &external.rule, topology);
    steps(h, e, topology);
    if !e.caveats.is_empty() {
        h.raw("<h2>Assumed</h2><ul>");
        for c in &e.caveats {
            h.raw("<li>").text(c).raw("</li>");
        }
        h.raw("</ul>");
    }
}

/// What a browser shows of [`answer`] without a topology (ids for names).
#[cfg(test)]
pub(crate) fn answer_text(e: &Explanation, router_macs: &[RouterMac]) -> String {
    let mut h = Html::new();
    answer(&mut h, e, router_macs, None);
    super::prose::visible_text(&h.into_string())
}

fn lookup_form(
    h: &mut Html,
    form: &Form,
    bindings: &[LiveBinding],
    routers: &[RouterMac],
    topology: Option<&Topology>,
) {
    // Suggestions, no script: the browser offers them as the user types.
    h.raw("<datalist id=\"vm-macs\">");
    for b in bindings {
        let b = &b.binding;
        let tenant = topology.map_or(b.tenant.as_str(), |t| t.project_label(&b.tenant));
        let server = topology.map_or(b.server.as_str(), |t| t.server_label(&b.server));
        h.raw("<option")
            .attr("value", b.mac)
            .attr("label", format_args!("{tenant} · {server}"))
            .raw("></option>");
    }
    h.raw("</datalist><datalist id=\"peer-macs\">");
    for r in routers {
        let name = topology
            .and_then(|t| t.router(&r.router))
            .map_or(r.router.as_str(), |router| router.label());
        h.raw("<option")
            .attr("value", r.mac)
            .attr(
                "label",
                format_args!(
                    "router {name} → {}",
                    r.external_network.as_deref().unwrap_or("no gateway")
                ),
            )
            .raw("></option>");
    }
    h.raw("</datalist><form class=\"filters\" method=\"get\" action=\"/debug/ui/lookup\">")
        .raw(
            "<label>VM MAC<input name=\"mac\" list=\"vm-macs\" required placeholder=\"fa:16:3e:…\"",
        )
        .attr("value", form.value("mac"))
        .raw("></label><label>remote address<input name=\"ip\" required placeholder=\"10.0.0.5\"")
        .attr("value", form.value("ip"))
        .raw("></label><label>peer MAC (optional)<input name=\"peer\" list=\"peer-macs\"")
        .attr("value", form.value("peer"))
        .raw("></label><label>VM's own address (optional)<input name=\"local\"")
        .attr("value", form.value("local"))
        .raw("></label><label>direction<select name=\"direction\">");
    let rx = form.value("direction") == "rx";
    h.raw(if rx {
        "<option value=\"tx\">tx (the VM sends)</option><option value=\"rx\" selected>rx (the VM receives)</option>"
    } else {
        "<option value=\"tx\" selected>tx (the VM sends)</option><option value=\"rx\">rx (the VM receives)</option>"
    });
    h.raw("</select></label><button type=\"submit\">Explain</button></form>");
}

fn verdict(
    h: &mut Html,
    e: &Explanation,
    label: &str,
    rule: &ExternalRule,
    topology: Option<&Topology>,
) {
    h.raw("<div class=\"verdict\" id=\"verdict\">Zone ");
    zone_badge(h, e.zone);
    h.raw(" — ")
        .text(&e.reason)
        .raw(".<br>External network <strong id=\"external-network\">")
        .text(label)
        .raw("</strong> — ");
    match rule {
        ExternalRule::NotExternal => h.text("only zone external carries an external network"),
        ExternalRule::RouterMac { router } => {
            let name = topology
                .and_then(|t| t.router(router))
                .map_or(router.as_str(), |r| r.label());
            h.text(format_args!(
                "rule 1: the peer MAC is an interface of router {name}, whose gateway is this network"
            ))
        }
        ExternalRule::VmFallback => h.text(
            "rule 2: the VM's own fallback (a floating IP's network, else its default router's gateway)",
        ),
        ExternalRule::NoRule => h.text("no rule applies: no router MAC with a gateway, no fallback on the VM"),
    };
    h.raw(".</div>");
}

/// The index of the step that decided the zone: the last one that
/// answered (a group bit, a missing binding, a bound peer, a trie match,
/// a listed amphora address); the last step when none did.
fn deciding(steps: &[Step]) -> usize {
    steps
        .iter()
        .rposition(|s| match s {
            Step::MulticastGate { multicast, .. } => *multicast,
            Step::VmBinding { binding, .. } => binding.is_none(),
            Step::PeerBinding { binding, .. } => binding.is_some(),
            Step::Trie { matched, .. } => matched.is_some(),
            Step::Amphora { listed, .. } => *listed == Some(true),
        })
        .unwrap_or(steps.len().saturating_sub(1))
}

fn steps(h: &mut Html, e: &Explanation, topology: Option<&Topology>) {
    h.raw("<h2>Steps, in the kernel's order</h2><ol class=\"steps\">");
    let decided = deciding(&e.steps);
    for (i, step) in e.steps.iter().enumerate() {
        h.raw(if i == decided {
            "<li class=\"decided\">"
        } else {
            "<li>"
        });
        match step {
            Step::MulticastGate {
                destination,
                multicast,
            } => {
                h.raw("<strong>Multicast gate</strong>: the frame's destination MAC (the peer's on tx, the VM's on rx) ");
                match destination {
                    Some(d) => {
                        h.element(CODE, d).text(if *multicast {
                            " has the group bit → multicast."
                        } else {
                            " is unicast: go on."
                        });
                    }
                    None => {
                        h.text("was not given: assumed unicast.");
                    }
                }
            }
            Step::VmBinding { mac, binding } => {
                h.raw("<strong>Map <code>endpoints</code></strong>, key = the VM MAC ")
                    .element(CODE, mac)
                    .raw(": ");
                binding_text(
                    h,
                    binding.as_ref(),
                    topology,
                    "no entry → miss (the MAC is not a known VM port).",
                );
            }
            Step::PeerBinding { mac, binding } => {
                h.raw("<strong>Map <code>endpoints</code></strong>, key = the peer MAC ");
                match mac {
                    Some(m) => {
                        h.element(CODE, m).raw(": ");
                        binding_text(
                            h,
                            binding.as_ref(),
                            topology,
                            "no entry: the peer is not a VM port (a router, for routed traffic) → the trie decides.",
                        );
                        if binding.is_some() {
                            h.text(" Direct L2 between two VM ports: the tenants decide, the trie is not read.");
                        }
                    }
                    None => {
                        h.text(
                            "not given: assumed not a VM port (routed traffic) → the trie decides.",
                        );
                    }
                }
            }
            Step::Trie {
                tenant,
                family,
                rows_in_scope,
                containing,
                matched,
            } => trie_step(
                h,
                topology,
                tenant,
                family,
                *rows_in_scope,
                containing,
                matched.as_ref(),
            ),
            Step::Amphora {
                endpoint,
                tenant,
                address,
                listed,
            } => {
                h.raw("<strong>Map <code>amphora_ips</code></strong> (the ")
                    .text(endpoint)
                    .raw(" is an amphora data port), key = (")
                    .text(topology.map_or(tenant.as_str(), |t| t.project_label(tenant)))
                    .raw(", ");
                match address {
                    Some(a) => h.element(CODE, a),
                    None => h.text("?"),
                };
                h.raw("): ").text(match listed {
                    Some(true) => "listed → infra (load-balancer segment 2).",
                    Some(false) => "not listed: the zone stands.",
                    None => "not checked (no local address given).",
                });
            }
        }
        h.raw("</li>");
    }
    h.raw("</ol>");
}

fn binding_text(
    h: &mut Html,
    b: Option<&LiveBinding>,
    topology: Option<&Topology>,
    none: &'static str,
) {
    let Some(lb) = b else {
        h.text(none);
        return;
    };
    let b = &lb.binding;
    let tenant = topology.map_or(b.tenant.as_str(), |t| t.project_label(&b.tenant));
    let server = topology.map_or(b.server.as_str(), |t| t.server_label(&b.server));
    h.text(format_args!("tenant {tenant} ("))
        .element(CODE, &b.tenant)
        .text(format_args!("), server {server}, port "))
        .element(CODE, &b.port)
        .text(format_args!(
            ", fallback external network {}{}{}.",
            b.external_network.as_deref().unwrap_or("none"),
            if b.amphora { ", amphora flag set" } else { "" },
            if lb.ghost {
                ", a ghost (port gone, kept for its grace window)"
            } else {
                ""
            }
        ));
}

fn trie_step(
    h: &mut Html,
    topology: Option<&Topology>,
    tenant: &str,
    family: &str,
    rows_in_scope: usize,
    containing: &[TrieRow],
    matched: Option<&TrieRow>,
) {
    let map = if family == "ipv4" {
        "zones_v4"
    } else {
        "zones_v6"
    };
    h.raw("<strong>LPM trie <code>")
        .text(map)
        .raw("</code></strong>, ");
    if tenant == "*" {
        h.text("the global rows (tenant *)");
    } else {
        let name = topology.map_or(tenant, |t| t.project_label(tenant));
        h.text(format_args!("tenant {name}'s rows ("))
            .element(CODE, tenant)
            .text(")");
    }
    h.text(format_args!(
        ": {rows_in_scope} rows of this family, {} holding the address.",
        containing.len()
    ));
    if !containing.is_empty() {
        h.raw("<table><thead><tr><th>tenant</th><th>prefix</th><th>zone</th><th></th></tr></thead><tbody>");
        for r in containing {
            let chosen = matched == Some(r);
            h.raw(if chosen {
                "<tr class=\"matched\">"
            } else {
                "<tr>"
            });
            tenant_cell(h, topology, r.tenant.as_str());
            h.element(CODE_TD, r.prefix).raw("<td>");
            zone_badge(h, r.zone);
            h.raw("</td><td>")
                .text(if chosen { "longest: matched" } else { "" })
                .raw("</td></tr>");
        }
        h.raw("</tbody></table>");
    }
    match matched {
        Some(r) => {
            h.raw("Matched ").element(CODE, r.prefix).raw(" → ");
            zone_badge(h, r.zone);
            h.raw(".");
        }
        // After the count's sentence, with no table between: a space.
        None if tenant == "*" => {
            h.text(" No row: miss (the global catch-all is missing).");
        }
        None => {
            h.text(" No row: the global rows are consulted next.");
        }
    }
}
