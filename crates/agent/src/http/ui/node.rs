//! `/debug/ui/node`: this node's taps as the link watcher knows them —
//! each matching interface, attached or not, with the port behind it
//! (the MAC the watcher wrote for it, else Nova's naming rule), that
//! port's tenant and server, its bytes in the ledger's durable view, its
//! attach state and its heals; then the ports the ledger bills on this
//! node that no tap shows any more.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use hyper::{Request, StatusCode};
use lachesis_ledger::PortTotals;
use lachesis_planner::{tap_name, Topology};

use super::html::{Html, CODE, CODE_TD, P, TD};
use super::units::{bytes_cell, duration, lasting, when};
use super::{document, named_cell};
use crate::http::reply::Reply;
use crate::http::source::{DebugSource, LiveBinding};
use crate::links::{TapState, TapStatus};

const TITLE: &str = "This node";
pub(super) const PATH: &str = "/debug/ui/node";

/// Who is behind a tap.
#[derive(Debug)]
pub(super) enum Behind<'a> {
    /// The binding of the port MAC the watcher wrote for the tap.
    Port(&'a LiveBinding),
    /// One port is named by the tap but its MAC is not written (refused,
    /// or the plan named it after the last write): retried at each check.
    Unwritten(&'a LiveBinding),
    /// Several ports' ids share the tap's name (anomaly
    /// `tap_name_collision`): none is chosen.
    Ambiguous(Vec<&'a str>),
    /// No binding's port is named by the tap.
    Nothing,
}

impl<'a> Behind<'a> {
    /// The port of `tap` among `bindings` (ghosts included: a port deleted
    /// moments ago still bills its grace window).
    pub(super) fn of(tap: &TapStatus, bindings: &'a [LiveBinding]) -> Behind<'a> {
        let by_mac = |live: bool| {
            bindings
                .iter()
                .find(|b| Some(b.binding.mac) == tap.port_mac && b.ghost != live)
        };
        if let Some(b) = by_mac(true).or_else(|| by_mac(false)) {
            return Behind::Port(b);
        }
        let named: Vec<&LiveBinding> = bindings
            .iter()
            .filter(|b| tap_name(&b.binding.port) == tap.name)
            .collect();
        let ports: BTreeSet<&str> = named.iter().map(|b| b.binding.port.as_str()).collect();
        match (ports.len(), named.first()) {
            (0, _) | (_, None) => Behind::Nothing,
            (1, Some(b)) => Behind::Unwritten(b),
            _ => Behind::Ambiguous(ports.into_iter().collect()),
        }
    }

    pub(super) fn binding(&self) -> Option<&'a LiveBinding> {
        match self {
            Behind::Port(b) | Behind::Unwritten(b) => Some(b),
            Behind::Ambiguous(_) | Behind::Nothing => None,
        }
    }
}

/// The projects with a VM behind one of this node's taps.
pub(super) fn tenants(source: &dyn DebugSource) -> BTreeSet<String> {
    let bindings = source.bindings();
    source
        .taps()
        .board
        .taps
        .iter()
        .filter_map(|t| Behind::of(t, &bindings).binding())
        .map(|b| b.binding.tenant.clone())
        .collect()
}

pub(super) fn page(source: &dyn DebugSource, _: &Request<Bytes>) -> Reply {
    let config = source.config();
    let node = source.taps();
    let bindings = source.bindings();
    let topology = source.topology();
    let topology = topology.as_deref();
    let totals = source.port_totals();
    let mut taps: Vec<&TapStatus> = node.board.taps.iter().collect();
    taps.sort_by(|a, b| a.name.cmp(&b.name));
    let attached = taps
        .iter()
        .filter(|t| t.state == TapState::Attached)
        .count();

    let mut h = Html::new();
    h.raw("<p>Interfaces whose name starts with ");
    names(&mut h, &config.datapath.interface_prefixes);
    h.raw(" (<code>datapath.interface_prefixes</code>) or is ");
    names(&mut h, &config.datapath.interfaces);
    h.raw(" (<code>datapath.interfaces</code>), as the link watcher tracks them: ")
        .text(format_args!(
            "{attached} attached, {} failing; programs attached with {}.",
            taps.len() - attached,
            node.attach_mode
        ))
        .raw(" A presence check every ")
        .text(duration(node.presence_interval));
    match node.board.last_check {
        Some(t) => {
            h.raw(", the last ");
            when(&mut h, t);
        }
        None => {
            h.raw(", none yet");
        }
    }
    h.raw("; heals since start: ")
        .text(node.heals_total)
        .raw(" (<code>lachesis_attach_heals_total</code>).</p>");

    h.raw("<h2>Taps</h2>");
    if taps.is_empty() {
        h.element(
            P,
            "No interface on this node matches: no VM is metered here. A tap Nova creates appears at once (a netlink event) or at the next presence check.",
        );
    } else {
        taps_table(&mut h, &taps, &bindings, topology, &totals);
    }
    h.raw("<p class=\"muted\">Bytes and packets are the ledger's durable view: the last state-file flush, the numbers <code>/metrics</code> exports (<code>lachesis_port_bytes_total</code> and <code>_packets_total</code> of the port, summed over zone and external network). tx is what the VM sent (the tap's own rx counter), rx what it received. The kernel's counts run ahead of them by at most <code>tunables.state_flush_interval</code> (")
        .text(duration(config.tunables.state_flush_interval))
        .raw(").</p>");

    let shown: BTreeSet<&str> = taps
        .iter()
        .filter_map(|t| Behind::of(t, &bindings).binding())
        .map(|b| b.binding.port.as_str())
        .collect();
    let gone: Vec<(&String, &PortTotals)> = totals
        .iter()
        .filter(|(port, _)| !shown.contains(port.as_str()))
        .collect();
    if !gone.is_empty() {
        gone_table(&mut h, &gone, &bindings, topology);
    }
    document(source, StatusCode::OK, TITLE, PATH, h)
}

/// `a`, `b` as code, or `none`.
fn names(h: &mut Html, list: &[String]) {
    if list.is_empty() {
        h.raw("none");
    }
    for (i, name) in list.iter().enumerate() {
        if i > 0 {
            h.raw(", ");
        }
        h.element(CODE, name);
    }
}

fn taps_table(
    h: &mut Html,
    taps: &[&TapStatus],
    bindings: &[LiveBinding],
    topology: Option<&Topology>,
    totals: &BTreeMap<String, PortTotals>,
) {
    h.raw("<table id=\"taps\"><thead><tr><th>tap</th><th>port</th><th>tenant</th><th>server</th><th>tx (sent by the VM)</th><th>rx (received)</th><th>attach</th><th>heals</th></tr></thead><tbody>");
    for tap in taps {
        let behind = Behind::of(tap, bindings);
        let binding = behind.binding();
        h.raw("<tr").attr("data-tap", &tap.name);
        if let Some(b) = binding {
            h.attr("data-port", &b.binding.port);
        }
        h.raw("><td><code>")
            .text(&tap.name)
            .raw("</code><br><span class=\"muted\">")
            .text(format_args!("ifindex {}", tap.index))
            .raw("</span></td>");
        port_cell(h, &behind);
        match binding {
            Some(b) => {
                let tenant = topology.and_then(|t| t.projects.get(&b.binding.tenant));
                named_cell(h, tenant.map(String::as_str), &b.binding.tenant);
                let server = topology.and_then(|t| t.servers.get(&b.binding.server));
                named_cell(h, server.map(String::as_str), &b.binding.server);
                let t = totals.get(&b.binding.port).copied().unwrap_or_default();
                bytes_cell(h, "data-tx-bytes", t.tx.bytes, t.tx.packets);
                bytes_cell(h, "data-rx-bytes", t.rx.bytes, t.rx.packets);
            }
            None => {
                h.raw("<td class=\"muted\" colspan=\"4\">unknown: the tap names no port. Its VM's own frames are still billed by their MAC (the Plan page's bindings); only the broadcast and multicast it receives go unattributed.</td>");
            }
        }
        attach_cell(h, tap);
        h.raw("<td class=\"num\"")
            .attr("data-heals", tap.heals)
            .raw(">");
        h.text(tap.heals);
        if let Some(t) = tap.last_heal {
            h.raw("<br><span class=\"muted\">last ");
            when(h, t);
            h.raw("</span>");
        }
        h.raw("</td></tr>");
    }
    h.raw("</tbody></table>");
}

fn port_cell(h: &mut Html, behind: &Behind<'_>) {
    match behind {
        Behind::Port(b) => {
            h.raw("<td><code>")
                .text(&b.binding.port)
                .raw("</code><br><span class=\"muted\">")
                .text(b.binding.mac);
            if b.ghost {
                h.raw(" · ghost: the port is deleted, kept for its grace window");
            }
            h.raw("</span></td>");
        }
        Behind::Unwritten(b) => {
            h.raw("<td><code>")
                .text(&b.binding.port)
                .raw("</code><br><span class=\"note\">named by the tap, its MAC not written to <code>tap_ports</code> yet (retried at each presence check): its received broadcast and multicast go unattributed meanwhile</span></td>");
        }
        Behind::Ambiguous(ports) => {
            h.raw("<td class=\"error\">ports ")
                .text(ports.join(", "))
                .raw(
                " share this name (anomaly <code>tap_name_collision</code>): none is chosen</td>",
            );
        }
        Behind::Nothing => {
            h.raw("<td class=\"muted\">no port of the plan is named by this tap (Nova names a port's tap <code>tap</code> + the first 11 characters of its id)</td>");
        }
    }
}

fn attach_cell(h: &mut Html, tap: &TapStatus) {
    match &tap.state {
        TapState::Attached => {
            h.raw("<td data-state=\"attached\"><span class=\"badge good\">attached</span><br><span class=\"muted\">");
            lasting(h, tap.since);
            h.raw("</span></td>");
        }
        TapState::Failed(e) => {
            h.raw("<td data-state=\"failed\"><span class=\"badge bad\">not attached</span> ")
                .text(e)
                .raw("<br><span class=\"muted\">failing ");
            lasting(h, tap.since);
            h.raw("; retried at each presence check</span></td>");
        }
    }
}

/// Ports with counts in the durable view and no tap here now.
fn gone_table(
    h: &mut Html,
    gone: &[(&String, &PortTotals)],
    bindings: &[LiveBinding],
    topology: Option<&Topology>,
) {
    h.raw("<h2>Billed here, no tap now</h2><p class=\"muted\">Ports this node's ledger holds counts for whose tap is gone (the VM migrated away, was deleted, or its tap is named otherwise): their series stay at these values until pruned.</p><table id=\"gone\"><thead><tr><th>port</th><th>server</th><th>tx</th><th>rx</th></tr></thead><tbody>");
    for (port, t) in gone {
        h.raw("<tr").attr("data-port", port).raw(">");
        h.element(CODE_TD, port);
        match bindings.iter().find(|b| b.binding.port == **port) {
            Some(b) => {
                let server = topology.and_then(|t| t.servers.get(&b.binding.server));
                named_cell(h, server.map(String::as_str), &b.binding.server);
            }
            None => {
                h.element(TD, "—");
            }
        }
        bytes_cell(h, "data-tx-bytes", t.tx.bytes, t.tx.packets);
        bytes_cell(h, "data-rx-bytes", t.rx.bytes, t.rx.packets);
        h.raw("</tr>");
    }
    h.raw("</tbody></table>");
}
