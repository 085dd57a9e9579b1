//! `/debug/ui/anomalies`: the committed plan's anomalies grouped by class,
//! each class with what it means for the bill and what to do; then every
//! class and every route-fallback reason with its count.

use bytes::Bytes;
use hyper::{Request, StatusCode};
use lachesis_planner::{AnomalyClass, FallbackReason};

use super::html::{Html, CODE, CODE_TD, P, TD};
use super::{document, no_plan};
use crate::http::reply::Reply;
use crate::http::source::DebugSource;

const TITLE: &str = "Anomalies";
const PATH: &str = "/debug/ui/anomalies";

/// What a class means and what an operator does about it (the catalogue
/// is docs/plan-schema.md; the match is exhaustive, so a new class cannot
/// ship without its explanation).
pub(super) fn explain_class(class: AnomalyClass) -> (&'static str, &'static str) {
    match class {
        AnomalyClass::Ambiguity => (
            "A static route's destination resolves to different zones: it lies in subnets of several owners behind a router, ECMP routes at a later hop disagree, or one project's routes to it disagree. The row takes the lowest zone code (or external when the walk fell back), so some bytes may bill under the wrong zone.",
            "Read the routers, destination and zones in the detail; give the destination one owner, or remove the duplicate or conflicting route. A strict-mode configuration refuses to start on this class.",
        ),
        AnomalyClass::AmphoraWithoutLbNetworkIp => (
            "A live amphora of a live load balancer has no lb_network_ip, so its management port cannot be told from its data ports: none of its ports is re-attributed to the load balancer's owner and none of its addresses is an amphora address.",
            "Usually transient while the amphora boots. If it stays, check it in Octavia (openstack loadbalancer amphora show) and fail it over.",
        ),
        AnomalyClass::Cycle => (
            "A static route's walk came back to a router it had already visited. The route falls back to external: bytes to its destination bill as internet.",
            "Fix the routes of the routers named in the detail so the nexthops do not loop.",
        ),
        AnomalyClass::DanglingRoute => (
            "A route's nexthop is on no subnet attached to its router: the router cannot use it, and the planner falls back to external for its destination.",
            "Remove the route, or attach the nexthop's subnet to the router.",
        ),
        AnomalyClass::DuplicateRouterMac => (
            "Interface ports of several routers share one MAC. The external-network label of flows through that MAC comes from one of them (the smallest router id), perhaps not the one carrying the traffic.",
            "Find the ports with that MAC (openstack port list --mac-address …) and recreate the stale one.",
        ),
        AnomalyClass::MacConflict => (
            "Ports of different projects claim one MAC, or a port claims a platform (network:*) port's MAC. The losing claim is not bound: its bytes are counted under the winner, or as miss.",
            "Find the ports with that MAC and delete or re-create the wrong one; Neutron only enforces MAC uniqueness within a network.",
        ),
        AnomalyClass::MaxHops => (
            "A static route needs more router hops than tunables.route_hop_limit. It falls back to external.",
            "Shorten the chain of routes, or raise tunables.route_hop_limit if the chain is intended.",
        ),
        AnomalyClass::MultiExternalPath => (
            "A VM (or router) has several candidate external networks (several floating IPs, several gateways). Its internet bytes carry the lexicographically smallest label, stable from pass to pass.",
            "Usually intended. If the bill must tell those networks apart, give the VM one path (one floating IP, one gateway).",
        ),
        AnomalyClass::NonAmphoraLb => (
            "A load balancer on a provider other than amphora (e.g. OVN). Its traffic is not modelled: no segment-2 infra rows, so member traffic bills by the ordinary zones.",
            "Nothing to repair in the cloud; know that such load balancers bill like plain routed traffic.",
        ),
        AnomalyClass::OverlappingOwnedSubnets => (
            "Networks of one project have overlapping subnets. The project's rows overlap and the longest prefix wins, so an address can be attributed to the wrong one of them.",
            "Check whether the overlap is intended (separate routers, separate address spaces); renumber one subnet if not.",
        ),
        AnomalyClass::TapNameCollision => (
            "Bound ports whose ids agree on the 11 characters Nova names a tap after (tap + 11 characters): the agent cannot tell which of them a tap belongs to, so broadcast and multicast the tap delivers is counted under the group address and billed to no port. Unicast traffic is not affected.",
            "Nothing to repair unless those frames matter; the collision is a property of the port ids (recreating one port gives it a new id).",
        ),
        AnomalyClass::TrunkSubports => (
            "A trunk subport shares its MAC with another port (its traffic then bills to that port) or no parent port lists it (it bills under its own device id).",
            "Check the trunk in Neutron (openstack network trunk show); give the subport its own MAC if its traffic must be told apart.",
        ),
        AnomalyClass::UnknownDeviceOwner => (
            "A port's device_owner is not one the planner knows. The port is not bound and its addresses are not platform addresses.",
            "Tell the Lachesis maintainers which service creates such ports, so the planner learns them.",
        ),
        AnomalyClass::UnknownProject => (
            "A VM port's project is not in the Keystone list: the port is not bound, and its bytes count as miss (tenant unknown).",
            "Check whether the project was deleted with ports left behind; delete the orphan ports or restore the project.",
        ),
    }
}

/// What a resolver fallback means (docs/plan-schema.md `route_fallbacks`).
fn explain_fallback(reason: FallbackReason) -> &'static str {
    match reason {
        FallbackReason::Ambiguity => "step C: the destination lies behind several owners",
        FallbackReason::Cycle => "step B: the walk reached a router already visited",
        FallbackReason::DanglingNexthop => "step A: no attached subnet holds the nexthop",
        FallbackReason::MaxHops => "the hop limit was reached",
        FallbackReason::NexthopNoPort => "step B: no port holds the nexthop address",
        FallbackReason::NexthopNotRouter => {
            "step B: the nexthop's port is neither a router interface nor a VM (e.g. a gateway on an external network)"
        }
        FallbackReason::NoRoute => {
            "step E: the next router neither holds the destination nor routes it"
        }
    }
}

pub(super) fn page(source: &dyn DebugSource, _: &Request<Bytes>) -> Reply {
    let Some(plan) = source.committed_plan() else {
        return no_plan(source, TITLE, PATH);
    };
    let anomalies = source.anomalies();
    let mut h = Html::new();
    if anomalies.is_empty() {
        h.element(P, "The committed plan raised no anomaly.");
    }
    for class in AnomalyClass::ALL {
        let details: Vec<&str> = anomalies
            .iter()
            .filter(|a| a.class == *class)
            .map(|a| a.detail.as_str())
            .collect();
        if details.is_empty() {
            continue;
        }
        let (meaning, action) = explain_class(*class);
        h.raw("<h2>")
            .element(CODE, class.label())
            .raw(" <span class=\"muted\">")
            .text(details.len())
            .raw("</span></h2><p><strong>What it means.</strong> ")
            .text(meaning)
            .raw("</p><p><strong>What to do.</strong> ")
            .text(action)
            .raw("</p><ul>");
        for d in details {
            h.raw("<li>").text(d).raw("</li>");
        }
        h.raw("</ul>");
    }

    h.raw("<h2>Every class</h2><p class=\"muted\">The gauge lachesis_plan_anomalies{class} carries these counts.</p><table><thead><tr><th>class</th><th>count</th><th>meaning</th></tr></thead><tbody>");
    for class in AnomalyClass::ALL {
        let count = anomalies.iter().filter(|a| a.class == *class).count();
        h.raw("<tr>")
            .element(CODE_TD, class.label())
            .element(TD, count)
            .element(TD, explain_class(*class).0)
            .raw("</tr>");
    }
    h.raw("</tbody></table>");

    h.raw("<h2>Route fallbacks</h2><p class=\"muted\">Static-route walks that ended in a fallback to external, by reason (lachesis_plan_route_fallbacks{reason}); counted even when a resolved answer decided the row.</p><table><thead><tr><th>reason</th><th>count</th><th>meaning</th></tr></thead><tbody>");
    for reason in FallbackReason::ALL {
        h.raw("<tr>")
            .element(CODE_TD, reason.label())
            .element(TD, plan.route_fallbacks.get(reason).copied().unwrap_or(0))
            .element(TD, explain_fallback(*reason))
            .raw("</tr>");
    }
    h.raw("</tbody></table>");
    document(source, StatusCode::OK, TITLE, PATH, h)
}
