//! The static-route resolver of DESIGN §6.2.
//!
//! The nexthop, not the destination, says who is behind a route; a route may
//! hop through several routers. The walk is iterative with a visited set and
//! a hop limit, and every exit that is not a positive answer is a counted
//! fallback to `external`.

use std::net::IpAddr;

use lachesis_abi::Zone;

use crate::index::{is_compute, is_router_interface, Index};
use crate::plan::{Anomaly, AnomalyClass, FallbackReason};
use crate::prefix::Prefix;
use crate::snapshot::{Route, Router, Subnet};
use crate::zone::zone_for;

/// The answer for one route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Resolution {
    pub zone: Zone,
    /// Set when the zone is a fallback.
    pub fallback: Option<FallbackReason>,
    pub anomaly: Option<Anomaly>,
}

impl Resolution {
    fn found(zone: Zone) -> Resolution {
        Resolution {
            zone,
            fallback: None,
            anomaly: None,
        }
    }

    fn fallback(reason: FallbackReason) -> Resolution {
        Resolution {
            zone: Zone::External,
            fallback: Some(reason),
            anomaly: None,
        }
    }

    fn with_anomaly(mut self, class: AnomalyClass, detail: String) -> Resolution {
        self.anomaly = Some(Anomaly { class, detail });
        self
    }
}

/// Resolves `route` of `router` for the router's owner `source`.
pub(crate) fn resolve(
    idx: &Index<'_>,
    router: &Router,
    route: Route,
    source: &str,
    hop_limit: u32,
) -> Resolution {
    let destination = route.destination;
    let what = || {
        format!(
            "router {} route {} via {}",
            router.id, destination, route.nexthop
        )
    };
    let mut current: &Router = router;
    let mut nexthop: IpAddr = route.nexthop;
    let mut visited: Vec<&str> = vec![router.id.as_str()];
    let mut hops: u32 = 0;
    loop {
        // A: the subnet of the current router that holds the nexthop.
        let Some(transit) = attached_containing(idx, &current.id, nexthop) else {
            return Resolution::fallback(FallbackReason::DanglingNexthop).with_anomaly(
                AnomalyClass::DanglingRoute,
                format!(
                    "{}: nexthop {nexthop} is on no subnet attached to router {}",
                    what(),
                    current.id
                ),
            );
        };
        // B: who holds the nexthop address on that subnet.
        let Some(&port) = idx.port_at.get(&(transit.id.as_str(), nexthop)) else {
            return Resolution::fallback(FallbackReason::NexthopNoPort);
        };
        if is_compute(&port.device_owner) {
            return Resolution::found(zone_for(&port.project, source, idx.network_of(transit)));
        }
        let next = if is_router_interface(&port.device_owner) {
            idx.routers.get(port.device_id.as_str()).copied()
        } else {
            None
        };
        let Some(next) = next else {
            return Resolution::fallback(FallbackReason::NexthopNotRouter);
        };
        if visited.contains(&next.id.as_str()) {
            visited.push(next.id.as_str());
            return Resolution::fallback(FallbackReason::Cycle).with_anomaly(
                AnomalyClass::Cycle,
                format!(
                    "{}: walk returns to router {} (path {})",
                    what(),
                    next.id,
                    visited.join(" -> ")
                ),
            );
        }
        if hops >= hop_limit {
            return Resolution::fallback(FallbackReason::MaxHops).with_anomaly(
                AnomalyClass::MaxHops,
                format!(
                    "{}: more than {hop_limit} router hops (path {} -> {})",
                    what(),
                    visited.join(" -> "),
                    next.id
                ),
            );
        }
        hops += 1;
        visited.push(next.id.as_str());

        // C: the destination sits behind the next router.
        if let Some(answer) = behind(idx, next, transit, destination, source, &what) {
            return answer;
        }

        // D: follow the next router's own longest matching route.
        match longest_route(next, destination) {
            Some(r) => {
                current = next;
                nexthop = r.nexthop;
            }
            // E: nowhere to go.
            None => return Resolution::fallback(FallbackReason::NoRoute),
        }
    }
}

/// Step C: the destination inside a subnet of `next` other than the one
/// the walk came in on.
fn behind(
    idx: &Index<'_>,
    next: &Router,
    transit: &Subnet,
    destination: Prefix,
    source: &str,
    what: &dyn Fn() -> String,
) -> Option<Resolution> {
    let behind: Vec<&Subnet> = idx
        .router_reach
        .get(next.id.as_str())?
        .iter()
        .copied()
        .filter(|s| s.id != transit.id && s.cidr.covers(destination))
        .collect();
    if behind.is_empty() {
        return None;
    }
    let mut owners: Vec<&str> = behind.iter().map(|s| idx.owner_of(s)).collect();
    owners.sort_unstable();
    owners.dedup();
    if owners.len() > 1 {
        let list: Vec<String> = behind
            .iter()
            .map(|s| format!("{} ({}, owner {})", s.id, s.cidr, idx.owner_of(s)))
            .collect();
        return Some(
            Resolution::fallback(FallbackReason::Ambiguity).with_anomaly(
                AnomalyClass::Ambiguity,
                format!(
                    "{}: destination lies in subnets of several owners behind router {}: {}",
                    what(),
                    next.id,
                    list.join(", ")
                ),
            ),
        );
    }
    // The most specific subnet decides the network (shared/external).
    let best = behind
        .iter()
        .max_by(|a, b| {
            a.cidr
                .prefix_len()
                .cmp(&b.cidr.prefix_len())
                .then_with(|| b.id.cmp(&a.id))
        })
        .copied();
    let network = best.and_then(|s| idx.network_of(s));
    Some(Resolution::found(zone_for(owners[0], source, network)))
}

fn attached_containing<'a>(idx: &Index<'a>, router: &str, addr: IpAddr) -> Option<&'a Subnet> {
    // Longest prefix first; ties by subnet id, so the choice is order-free.
    idx.router_reach
        .get(router)?
        .iter()
        .copied()
        .filter(|s| s.cidr.contains(addr))
        .max_by(|a, b| {
            a.cidr
                .prefix_len()
                .cmp(&b.cidr.prefix_len())
                .then_with(|| b.id.cmp(&a.id))
        })
}

/// The route with the longest destination containing `destination`; equal
/// lengths (ECMP) resolve to the smallest nexthop, so the walk is stable.
fn longest_route(router: &Router, destination: Prefix) -> Option<Route> {
    router
        .routes
        .iter()
        .filter(|r| r.destination.covers(destination))
        .max_by(|a, b| {
            a.destination
                .prefix_len()
                .cmp(&b.destination.prefix_len())
                .then_with(|| b.nexthop.cmp(&a.nexthop))
        })
        .copied()
}
