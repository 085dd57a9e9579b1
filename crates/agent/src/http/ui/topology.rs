//! `/debug/ui/topology`: the cloud of the last sync drawn as SVG, laid out
//! in bands — external networks with their floating IPs on top, routers in
//! the middle, tenants' and shared networks (with their VM ports) below,
//! grouped by owner — plus the routers' static routes and the floating
//! IPs as tables. Pure: a [`Topology`] in, markup out. By default it
//! draws the tenants with VMs on this node (a node's agent is asked about
//! its own VMs first); `?tenant=*` draws every tenant, `?tenant=ID` one.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use hyper::{Request, StatusCode};
use lachesis_planner::topology::{FloatingIpSummary, NetworkSummary, RouterSummary, VmPort};
use lachesis_planner::Topology;

use super::html::{clip, Html, CODE_TD, P, TD};
use super::{bad_request, document, named_cell, node, tenant_cell, Form};
use crate::http::params::Params;
use crate::http::reply::Reply;
use crate::http::source::DebugSource;

const TITLE: &str = "Topology";
const PATH: &str = "/debug/ui/topology";

/// Node box size and spacing, in SVG user units.
pub(super) const NODE_W: usize = 180;
const NODE_H: usize = 44;
const SMALL_H: usize = 30;
const COL: usize = NODE_W + 24;
const MARGIN: usize = 24;
/// Extra room between two owners' groups of networks.
const GROUP_GAP: usize = 28;
/// Floating IPs and VM ports drawn under one network; the rest are counted.
const STACK_MAX: usize = 6;
/// Above this many networks the page asks for a tenant filter instead.
const MAX_NETWORKS: usize = 400;
/// Characters of a label that fit a box.
const LABEL_CHARS: usize = 26;

/// What `?tenant=` asks to draw.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Choice {
    /// Not given: the tenants with VMs behind this node's taps.
    ThisNode,
    /// `*`: every tenant.
    Every,
    /// One project.
    Tenant(String),
}

pub(super) fn page(source: &dyn DebugSource, req: &Request<Bytes>) -> Reply {
    let form = Form::new(req.uri().query());
    let p = Params::parse(form.filled().as_deref(), &["tenant"]);
    let choice = match p.get("tenant") {
        None => Choice::ThisNode,
        Some("*") => Choice::Every,
        Some(t) => Choice::Tenant(t.to_owned()),
    };
    if let Err(e) = p.finish(Some(())) {
        return bad_request(source, TITLE, PATH, &e, Html::new());
    }
    let Some(topology) = source.topology() else {
        let mut h = Html::new();
        h.element(
            P,
            "No topology yet: it comes with each successful sync, and the plan in force came from the state file (degraded boot) or no sync has finished.",
        );
        return document(source, StatusCode::SERVICE_UNAVAILABLE, TITLE, PATH, h);
    };
    let here = node::tenants(source);
    let mut h = Html::new();
    filter_form(&mut h, &topology, &choice, here.len());
    let tenants: Option<BTreeSet<String>> = match &choice {
        Choice::ThisNode if here.is_empty() => {
            h.element(
                P,
                "No VM behind this node's taps is bound to a port: every tenant is drawn.",
            );
            None
        }
        Choice::ThisNode => {
            let names: Vec<&str> = here.iter().map(|t| topology.project_label(t)).collect();
            h.raw("<p id=\"scope\">")
                .text(format_args!(
                    "The tenants with VMs on this node: {}. ",
                    names.join(", ")
                ))
                .link(format_args!("{PATH}?tenant=*"), "Show every tenant")
                .raw(".</p>");
            Some(here)
        }
        Choice::Every => None,
        Choice::Tenant(t) => Some(BTreeSet::from([t.clone()])),
    };
    let view = View::select(&topology, tenants.as_ref());
    if view.networks.len() > MAX_NETWORKS {
        h.raw("<p class=\"note\">")
            .text(format_args!(
                "{} networks are too many to draw legibly: choose a tenant.",
                view.networks.len()
            ))
            .raw("</p>");
    } else {
        h.raw("<div class=\"scroll\">")
            .append(svg(&topology, &view))
            .raw("</div>");
        legend(&mut h);
    }
    routes_table(&mut h, &topology, &view.routers);
    floating_ips_table(&mut h, &topology, &view.fips);
    document(source, StatusCode::OK, TITLE, PATH, h)
}

fn filter_form(h: &mut Html, t: &Topology, choice: &Choice, here: usize) {
    h.raw("<form class=\"filters\" method=\"get\" action=\"/debug/ui/topology\"><label>tenant<select name=\"tenant\"><option value=\"\"");
    if *choice == Choice::ThisNode {
        h.raw(" selected");
    }
    h.raw(">")
        .text(format_args!("tenants with VMs on this node ({here})"))
        .raw("</option><option value=\"*\"");
    if *choice == Choice::Every {
        h.raw(" selected");
    }
    h.raw(">every tenant</option>");
    for (id, name) in &t.projects {
        h.raw("<option").attr("value", id);
        if *choice == Choice::Tenant(id.clone()) {
            h.raw(" selected");
        }
        h.raw(">")
            .text(if name.is_empty() { id } else { name })
            .raw("</option>");
    }
    h.raw("</select></label><button type=\"submit\">Show</button></form>");
}

fn legend(h: &mut Html) {
    h.raw("<p class=\"muted\">Top: external networks, their floating IPs above them (dashed: a router's gateway). Middle: routers. Bottom: networks grouped by owner, shared networks first, with their VM ports. Hover a box for its ids.</p>");
}

/// What one page draws: everything, or some tenants' part and what it
/// touches.
pub(super) struct View<'a> {
    networks: Vec<&'a NetworkSummary>,
    routers: Vec<&'a RouterSummary>,
    fips: Vec<&'a FloatingIpSummary>,
    vms: Vec<&'a VmPort>,
}

impl<'a> View<'a> {
    pub(super) fn select(t: &'a Topology, tenants: Option<&BTreeSet<String>>) -> View<'a> {
        let Some(tenants) = tenants else {
            return View {
                networks: t.networks.iter().collect(),
                routers: t.routers.iter().collect(),
                fips: t.floating_ips.iter().collect(),
                vms: t.vm_ports.iter().collect(),
            };
        };
        let routers: Vec<&RouterSummary> = t
            .routers
            .iter()
            .filter(|r| tenants.contains(&r.project))
            .collect();
        let fips: Vec<&FloatingIpSummary> = t
            .floating_ips
            .iter()
            .filter(|f| tenants.contains(&f.project))
            .collect();
        let vms: Vec<&VmPort> = t
            .vm_ports
            .iter()
            .filter(|p| tenants.contains(&p.project))
            .collect();
        let mut touched: BTreeSet<&str> = BTreeSet::new();
        for r in &routers {
            touched.extend(r.gateways.iter().map(String::as_str));
            touched.extend(r.interfaces.iter().map(String::as_str));
        }
        touched.extend(fips.iter().map(|f| f.network.as_str()));
        touched.extend(vms.iter().map(|p| p.network.as_str()));
        let networks = t
            .networks
            .iter()
            .filter(|n| tenants.contains(&n.project) || touched.contains(n.id.as_str()))
            .collect();
        View {
            networks,
            routers,
            fips,
            vms,
        }
    }
}

/// A box's place.
#[derive(Debug, Clone, Copy)]
pub(super) struct At {
    pub(super) x: usize,
    pub(super) y: usize,
}

impl At {
    fn center_x(self) -> usize {
        self.x + NODE_W / 2
    }
}

/// A small box stacked by its network: floating IPs above their
/// (external) network, VM ports below theirs.
#[derive(Debug, Clone, Copy)]
enum Small<'a> {
    Fip(&'a FloatingIpSummary),
    Vm(&'a VmPort),
}

/// Where everything of a [`View`] goes.
pub(super) struct Layout<'a> {
    pub(super) width: usize,
    pub(super) height: usize,
    /// The top of the bottom band (tenants' and shared networks).
    net_y: usize,
    /// Every drawn network's box.
    pub(super) at: BTreeMap<&'a str, At>,
    pub(super) routers: Vec<(At, &'a RouterSummary)>,
    /// Owner groups of the bottom band: label, left and right edge.
    groups: Vec<(String, usize, usize)>,
    /// Floating IPs above each network.
    above: BTreeMap<&'a str, Vec<Small<'a>>>,
    /// VM ports below each network.
    below: BTreeMap<&'a str, Vec<Small<'a>>>,
}

/// Which side of its network a stack is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Above,
    Below,
}

impl<'a> Layout<'a> {
    /// Bands top to bottom: external networks with their floating IPs,
    /// routers, networks grouped by owner with their VM ports. Across:
    /// networks side by side, each router over the mean of its interface
    /// networks, each external network over the mean of its routers.
    pub(super) fn new(t: &Topology, view: &View<'a>) -> Layout<'a> {
        let (external, internal): (Vec<&NetworkSummary>, Vec<&NetworkSummary>) =
            view.networks.iter().partition(|n| n.external);
        let mut above: BTreeMap<&str, Vec<Small>> = BTreeMap::new();
        for f in &view.fips {
            above.entry(&f.network).or_default().push(Small::Fip(f));
        }
        let mut below: BTreeMap<&str, Vec<Small>> = BTreeMap::new();
        for p in &view.vms {
            below.entry(&p.network).or_default().push(Small::Vm(p));
        }
        let rows = |nets: &[&NetworkSummary], stacks: &BTreeMap<&str, Vec<Small>>| {
            nets.iter()
                .map(|n| stacked(stacks.get(n.id.as_str()).map_or(0, Vec::len)))
                .max()
                .unwrap_or(0)
        };
        // Floating IPs over the external networks, so the routers' gateway
        // lines reach them unobstructed from below.
        let ext_y = MARGIN + stack_height(rows(&external, &above)) + 4;
        let router_y = ext_y + NODE_H + stack_height(rows(&external, &below)) + 56;
        let net_y = router_y + NODE_H + 80;
        let height = net_y + NODE_H + stack_height(rows(&internal, &below)) + MARGIN + 8;

        let mut at: BTreeMap<&str, At> = BTreeMap::new();
        let mut x = MARGIN;
        let mut groups = Vec::new();
        for (label, nets) in owner_groups(t, &internal) {
            let start = x;
            for n in nets {
                at.insert(&n.id, At { x, y: net_y });
                x += COL;
            }
            groups.push((label, start, x - (COL - NODE_W)));
            x += GROUP_GAP;
        }

        let mut routers: Vec<(usize, &RouterSummary)> = view
            .routers
            .iter()
            .map(|r| (mean_x(&at, &r.interfaces), *r))
            .collect();
        routers.sort_by_key(|(wish, r)| (*wish, r.id.as_str()));
        let router_x = spread(&routers.iter().map(|(w, _)| *w).collect::<Vec<_>>());
        let routers: Vec<(At, &RouterSummary)> = routers
            .iter()
            .zip(router_x)
            .map(|((_, r), x)| (At { x, y: router_y }, *r))
            .collect();

        let mut gateway_x: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (a, r) in &routers {
            for g in &r.gateways {
                gateway_x.entry(g.as_str()).or_default().push(a.x);
            }
        }
        let mut ext: Vec<(usize, &NetworkSummary)> = external
            .iter()
            .map(|n| {
                let wish = gateway_x
                    .get(n.id.as_str())
                    .map_or(usize::MAX, |xs| xs.iter().sum::<usize>() / xs.len());
                (wish, *n)
            })
            .collect();
        ext.sort_by_key(|(wish, n)| (*wish, n.id.as_str()));
        let ext_x = spread(&ext.iter().map(|(w, _)| *w).collect::<Vec<_>>());
        for ((_, n), x) in ext.iter().zip(ext_x) {
            at.insert(&n.id, At { x, y: ext_y });
        }

        let width = at
            .values()
            .chain(routers.iter().map(|(a, _)| a))
            .map(|a| a.x)
            .max()
            .map_or(2 * MARGIN, |x| x + NODE_W + MARGIN);
        Layout {
            width,
            height,
            net_y,
            at,
            routers,
            groups,
            above,
            below,
        }
    }
}

/// Lays `view` out and draws it.
fn svg(t: &Topology, view: &View<'_>) -> Html {
    let l = Layout::new(t, view);
    let (width, height) = (l.width, l.height);
    let mut h = Html::new();
    h.raw("<svg xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" aria-label=\"topology\"")
        .attr("width", width)
        .attr("height", height)
        .attr("viewBox", format_args!("0 0 {width} {height}"))
        .raw(">");
    for (_, start, end) in &l.groups {
        h.raw("<rect class=\"group\" rx=\"8\"")
            .attr("x", start - 10)
            .attr("y", l.net_y - 30)
            .attr("width", end - start + 20)
            .attr("height", height - l.net_y + 30 - 8)
            .raw("/>");
    }
    // Edges first, under the boxes.
    for (r_at, r) in &l.routers {
        for n in &r.interfaces {
            if let Some(a) = l.at.get(n.as_str()) {
                // A network above the router meets it from below.
                let y = if a.y < r_at.y { a.y + NODE_H } else { a.y };
                line(
                    &mut h,
                    "edge",
                    (r_at.center_x(), r_at.y + NODE_H),
                    (a.center_x(), y),
                );
            }
        }
        for g in &r.gateways {
            if let Some(a) = l.at.get(g.as_str()) {
                line(
                    &mut h,
                    "edge gateway",
                    (r_at.center_x(), r_at.y),
                    (a.center_x(), a.y + NODE_H),
                );
            }
        }
    }
    for (side, stacks) in [(Side::Above, &l.above), (Side::Below, &l.below)] {
        for (net, items) in stacks {
            if let Some(a) = l.at.get(net) {
                tree_edges(&mut h, *a, side, items);
            }
        }
    }
    // Group labels over the edges (with a halo), then the boxes.
    for (label, start, end) in &l.groups {
        h.raw("<text class=\"group-label\"")
            .attr("x", start - 2)
            .attr("y", l.net_y - 12)
            .raw(">")
            // About 7 units a character: a label never runs into the next group.
            .text(clip(label, (end - start + 12) / 7))
            .raw("</text>");
    }
    for n in &view.networks {
        if let Some(a) = l.at.get(n.id.as_str()) {
            network_node(&mut h, t, n, *a);
        }
    }
    for (a, r) in &l.routers {
        router_node(&mut h, t, r, *a);
    }
    for (side, stacks) in [(Side::Above, &l.above), (Side::Below, &l.below)] {
        for (net, items) in stacks {
            if let Some(a) = l.at.get(net) {
                stack(&mut h, t, *a, side, items);
            }
        }
    }
    h.raw("</svg>");
    h
}

/// Internal networks by owner: shared networks first, then each tenant by
/// name; inside a group by label.
fn owner_groups<'a>(
    t: &Topology,
    internal: &[&'a NetworkSummary],
) -> Vec<(String, Vec<&'a NetworkSummary>)> {
    let mut shared: Vec<&NetworkSummary> = Vec::new();
    let mut owned: BTreeMap<(String, &str), Vec<&NetworkSummary>> = BTreeMap::new();
    for n in internal {
        if n.shared {
            shared.push(n);
        } else {
            let name = t.project_label(&n.project).to_owned();
            owned.entry((name, n.project.as_str())).or_default().push(n);
        }
    }
    let mut groups = Vec::new();
    if !shared.is_empty() {
        groups.push(("shared networks".to_owned(), shared));
    }
    for ((name, _), nets) in owned {
        groups.push((format!("tenant {name}"), nets));
    }
    for (_, nets) in &mut groups {
        nets.sort_by(|a, b| (a.label(), a.id.as_str()).cmp(&(b.label(), b.id.as_str())));
    }
    groups
}

/// The mean x of the networks `ids` that are placed; far right when none.
fn mean_x(at: &BTreeMap<&str, At>, ids: &[String]) -> usize {
    let xs: Vec<usize> = ids
        .iter()
        .filter_map(|n| at.get(n.as_str()))
        .map(|a| a.x)
        .collect();
    if xs.is_empty() {
        usize::MAX
    } else {
        xs.iter().sum::<usize>() / xs.len()
    }
}

/// Left edges for boxes wishing to sit at `wishes` (sorted), at least one
/// column apart; a box with no wish (`usize::MAX`) goes right of the rest.
fn spread(wishes: &[usize]) -> Vec<usize> {
    let mut out = Vec::with_capacity(wishes.len());
    let mut next = MARGIN;
    for w in wishes {
        let x = if *w == usize::MAX {
            next
        } else {
            (*w).max(next)
        };
        out.push(x);
        next = x + COL;
    }
    out
}

/// Rows a stack of `n` items takes: at most [`STACK_MAX`] boxes, then one
/// line counting the rest.
fn stacked(n: usize) -> usize {
    if n > STACK_MAX {
        STACK_MAX + 1
    } else {
        n
    }
}

fn stack_height(rows: usize) -> usize {
    rows * (SMALL_H + 8)
}

/// The top of the `i`th of `n` small boxes stacked on `side` of a network
/// box at `a` (row `i` counted from the top in both cases).
fn stack_y(a: At, side: Side, i: usize, n: usize) -> usize {
    match side {
        Side::Below => a.y + NODE_H + 10 + i * (SMALL_H + 8),
        Side::Above => a.y - 10 - SMALL_H - (n - 1 - i) * (SMALL_H + 8),
    }
}

fn line(h: &mut Html, class: &'static str, from: (usize, usize), to: (usize, usize)) {
    h.raw("<line class=\"")
        .raw(class)
        .raw("\"")
        .attr("x1", from.0)
        .attr("y1", from.1)
        .attr("x2", to.0)
        .attr("y2", to.1)
        .raw("/>");
}

/// The comb joining a network box to the small boxes stacked by it.
fn tree_edges(h: &mut Html, a: At, side: Side, items: &[Small<'_>]) {
    let shown = items.len().min(STACK_MAX);
    let from = match side {
        Side::Above => a.y,
        Side::Below => a.y + NODE_H,
    };
    for (i, item) in items.iter().take(shown).enumerate() {
        let class = match item {
            Small::Fip(_) => "edge fip",
            Small::Vm(_) => "edge",
        };
        let y = stack_y(a, side, i, shown) + SMALL_H / 2;
        h.raw("<path class=\"")
            .raw(class)
            .raw("\"")
            .attr("d", format_args!("M{} {from} V{y} H{}", a.x + 8, a.x + 18))
            .raw("/>");
    }
}

fn stack(h: &mut Html, t: &Topology, a: At, side: Side, items: &[Small<'_>]) {
    let shown = items.len().min(STACK_MAX);
    for (i, item) in items.iter().take(shown).enumerate() {
        let at = At {
            x: a.x + 18,
            y: stack_y(a, side, i, shown),
        };
        match item {
            Small::Fip(f) => fip_node(h, t, f, at),
            Small::Vm(p) => vm_node(h, t, p, at),
        }
    }
    if items.len() > shown {
        // The count goes past the far end of the stack.
        let y = match side {
            Side::Below => stack_y(a, side, shown, shown + 1) + 14,
            Side::Above => stack_y(a, side, 0, shown) - 8,
        };
        h.raw("<text class=\"small\"")
            .attr("x", a.x + 18)
            .attr("y", y)
            .raw(">")
            .text(format_args!("+ {} more", items.len() - shown))
            .raw("</text>");
    }
}

/// The opening of one node's group: kind and id as data attributes (what
/// a test counts), its tooltip, its box.
fn node_head(h: &mut Html, class: &'static str, kind: &'static str, id: &str, at: At, tip: &str) {
    let height = if kind == "network" || kind == "router" {
        NODE_H
    } else {
        SMALL_H
    };
    let width = if height == NODE_H {
        NODE_W
    } else {
        NODE_W - 18
    };
    h.raw("<g class=\"node ")
        .raw(class)
        .raw("\"")
        .attr("data-kind", kind)
        .attr("data-id", id)
        .attr("transform", format_args!("translate({} {})", at.x, at.y))
        .raw("><title>")
        .text(tip)
        .raw("</title><rect rx=\"6\"")
        .attr("width", width)
        .attr("height", height)
        .raw("/>");
}

fn two_lines(h: &mut Html, first: &str, second: &str, small_box: bool) {
    let (y1, y2) = if small_box { (13, 25) } else { (18, 35) };
    h.raw("<text x=\"8\"")
        .attr("y", y1)
        .raw(">")
        .text(clip(first, LABEL_CHARS))
        .raw("</text><text class=\"small\" x=\"8\"")
        .attr("y", y2)
        .raw(">")
        .text(clip(second, LABEL_CHARS + 4))
        .raw("</text></g>");
}

fn network_node(h: &mut Html, t: &Topology, n: &NetworkSummary, at: At) {
    let class = match (n.external, n.shared) {
        (true, _) => "network external",
        (false, true) => "network shared",
        (false, false) => "network",
    };
    let cidrs: Vec<String> = n.cidrs.iter().map(ToString::to_string).collect();
    let kind = if n.external {
        "external network"
    } else if n.shared {
        "shared network"
    } else {
        "network"
    };
    let tip = format!(
        "{kind} {} ({})\nproject {} ({})\n{}",
        n.label(),
        n.id,
        t.project_label(&n.project),
        n.project,
        cidrs.join("\n")
    );
    node_head(h, class, "network", &n.id, at, &tip);
    two_lines(h, n.label(), &cidrs.join(", "), false);
}

fn router_node(h: &mut Html, t: &Topology, r: &RouterSummary, at: At) {
    let gateways: Vec<&str> = r
        .gateways
        .iter()
        .map(|g| t.network(g).map_or(g.as_str(), NetworkSummary::label))
        .collect();
    let tip = format!(
        "router {} ({})\nproject {} ({})\ngateway: {}\n{} static routes",
        r.label(),
        r.id,
        t.project_label(&r.project),
        r.project,
        if gateways.is_empty() {
            "none".to_owned()
        } else {
            gateways.join(", ")
        },
        r.routes.len()
    );
    node_head(h, "router", "router", &r.id, at, &tip);
    two_lines(h, r.label(), t.project_label(&r.project), false);
}

fn fip_node(h: &mut Html, t: &Topology, f: &FloatingIpSummary, at: At) {
    let address = f.address.map_or_else(|| f.id.clone(), |a| a.to_string());
    let target = f
        .fixed_ip
        .map_or_else(|| "free".to_owned(), |a| format!("→ {a}"));
    let tip = format!(
        "floating IP {address} ({})\nproject {}\nport {}",
        f.id,
        t.project_label(&f.project),
        f.port.as_deref().unwrap_or("none")
    );
    node_head(h, "fip", "fip", &f.id, at, &tip);
    two_lines(
        h,
        &format!("{address} {target}"),
        t.project_label(&f.project),
        true,
    );
}

fn vm_node(h: &mut Html, t: &Topology, p: &VmPort, at: At) {
    let addresses: Vec<String> = p.addresses.iter().map(ToString::to_string).collect();
    let mac = p.mac.map_or_else(|| "no MAC".to_owned(), |m| m.to_string());
    let tip = format!(
        "server {} ({})\nport {}\nMAC {mac}\n{}",
        t.server_label(&p.server),
        p.server,
        p.id,
        addresses.join("\n")
    );
    node_head(h, "vm", "vm", &p.id, at, &tip);
    two_lines(h, t.server_label(&p.server), &addresses.join(", "), true);
}

fn routes_table(h: &mut Html, t: &Topology, routers: &[&RouterSummary]) {
    h.raw("<h2>Routers</h2><table><thead><tr><th>router</th><th>project</th><th>gateway</th><th>interfaces on</th><th>static routes</th></tr></thead><tbody>");
    for r in routers {
        h.raw("<tr>");
        named_cell(h, r.name.as_deref(), &r.id);
        tenant_cell(h, Some(t), &r.project);
        let names = |ids: &[String]| {
            ids.iter()
                .map(|g| t.network(g).map_or(g.as_str(), NetworkSummary::label))
                .collect::<Vec<_>>()
                .join(", ")
        };
        h.element(TD, names(&r.gateways))
            .element(TD, names(&r.interfaces));
        let listed: Vec<String> = r
            .routes
            .iter()
            .map(|rt| format!("{} via {}", rt.destination, rt.nexthop))
            .collect();
        h.element(CODE_TD, listed.join("; ")).raw("</tr>");
    }
    h.raw("</tbody></table>");
}

fn floating_ips_table(h: &mut Html, t: &Topology, fips: &[&FloatingIpSummary]) {
    h.raw("<h2>Floating IPs</h2><table><thead><tr><th>address</th><th>external network</th><th>project</th><th>bound to</th></tr></thead><tbody>");
    for f in fips {
        h.raw("<tr>");
        match f.address {
            Some(a) => h.element(CODE_TD, a),
            None => h.element(CODE_TD, &f.id),
        };
        h.element(
            TD,
            t.network(&f.network)
                .map_or(f.network.as_str(), NetworkSummary::label),
        );
        tenant_cell(h, Some(t), &f.project);
        match (&f.port, f.fixed_ip) {
            (Some(port), Some(ip)) => h.element(CODE_TD, format_args!("{ip} (port {port})")),
            (Some(port), None) => h.element(CODE_TD, format_args!("port {port}")),
            _ => h.element(TD, "free"),
        };
        h.raw("</tr>");
    }
    h.raw("</tbody></table>");
}
