//! The static-route resolver of DESIGN §6.2.
//!
//! The nexthop, not the destination, says who is behind a route; a route may
//! hop through several routers. The walk is iterative with a visited set and
//! a hop limit; ECMP routes at a later hop are each walked (each branch with
//! its own visited set and hop count) and their answers met by [`meet`].
//! Every exit that is not a positive answer is a counted fallback to
//! `external`, and a fallback never outranks a resolved answer.

use std::net::IpAddr;

use lachesis_abi::Zone;

use crate::index::{is_compute, is_router_interface, Index};
use crate::plan::{Anomaly, AnomalyClass, FallbackReason};
use crate::snapshot::{Route, Router, Subnet};
use crate::zone::zone_for;
use lachesis_abi::Prefix;

/// What one walk (or several met walks) says about a destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Answer {
    /// The walk reached a VM appliance, or a connected subnet of one owner.
    Resolved(Zone),
    /// A guess: `external`, for this reason.
    Fallback(FallbackReason),
}

impl Answer {
    /// The zone a row gets from this answer.
    pub fn zone(self) -> Zone {
        match self {
            Answer::Resolved(z) => z,
            Answer::Fallback(_) => Zone::External,
        }
    }
}

/// The outcome of [`meet`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Met {
    pub answer: Answer,
    /// Several different resolved zones met: the caller raises `ambiguity`.
    pub ambiguous: bool,
}

/// DESIGN §6.2's rule for the answers of one destination (a tenant's routes
/// to it, or ECMP routes at one hop): any resolved answer beats every
/// fallback; among resolved answers the lowest zone code wins, and more than
/// one distinct resolved zone is an ambiguity. Only fallbacks: a fallback
/// (the smallest reason, so the result is order-free). `answers` is not
/// empty.
pub(crate) fn meet(answers: impl IntoIterator<Item = Answer>) -> Met {
    let mut resolved: Option<Zone> = None;
    let mut ambiguous = false;
    let mut fallback: Option<FallbackReason> = None;
    for a in answers {
        match a {
            Answer::Resolved(z) => {
                if let Some(r) = resolved {
                    ambiguous |= r != z;
                    if z.code() < r.code() {
                        resolved = Some(z);
                    }
                } else {
                    resolved = Some(z);
                }
            }
            Answer::Fallback(f) => fallback = Some(fallback.map_or(f, |g| g.min(f))),
        }
    }
    let answer = match (resolved, fallback) {
        (Some(z), _) => Answer::Resolved(z),
        (None, Some(f)) => Answer::Fallback(f),
        (None, None) => unreachable!("meet needs at least one answer"),
    };
    Met { answer, ambiguous }
}

/// The answer for one route, with what the walk saw on the way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Resolution {
    pub answer: Answer,
    /// Every fallback exit the walk took, one per branch that ended in one,
    /// including ECMP branches a resolved sibling outranked (none is silent).
    pub fallbacks: Vec<FallbackReason>,
    pub anomalies: Vec<Anomaly>,
}

/// Resolves `route` of `router` for the router's owner `source`.
pub(crate) fn resolve<'a>(
    idx: &Index<'a>,
    router: &'a Router,
    route: Route,
    source: &str,
    hop_limit: u32,
) -> Resolution {
    let mut walk = Walk {
        idx,
        origin: router,
        route,
        source,
        hop_limit,
        fallbacks: Vec::new(),
        anomalies: Vec::new(),
    };
    let answer = walk.from(router, route.nexthop, vec![router.id.as_str()], 0);
    Resolution {
        answer,
        fallbacks: walk.fallbacks,
        anomalies: walk.anomalies,
    }
}

struct Walk<'w, 'a> {
    idx: &'w Index<'a>,
    origin: &'a Router,
    route: Route,
    source: &'w str,
    hop_limit: u32,
    fallbacks: Vec<FallbackReason>,
    anomalies: Vec<Anomaly>,
}

impl<'a> Walk<'_, 'a> {
    /// "router R route D via N", the prefix of every detail this walk writes.
    fn what(&self) -> String {
        format!(
            "router {} route {} via {}",
            self.origin.id, self.route.destination, self.route.nexthop
        )
    }

    fn fallback(&mut self, reason: FallbackReason) -> Answer {
        self.fallbacks.push(reason);
        Answer::Fallback(reason)
    }

    fn anomaly(&mut self, class: AnomalyClass, detail: String) {
        self.anomalies.push(Anomaly { class, detail });
    }

    /// Walks from `current` towards `nexthop`; `visited` and `hops` belong
    /// to this branch alone.
    fn from(
        &mut self,
        mut current: &'a Router,
        mut nexthop: IpAddr,
        mut visited: Vec<&'a str>,
        mut hops: u32,
    ) -> Answer {
        let idx = self.idx;
        let destination = self.route.destination;
        loop {
            // A: the subnet of the current router that holds the nexthop.
            let Some(transit) = attached_containing(idx, &current.id, nexthop) else {
                let detail = format!(
                    "{}: nexthop {nexthop} is on no subnet attached to router {}",
                    self.what(),
                    current.id
                );
                self.anomaly(AnomalyClass::DanglingRoute, detail);
                return self.fallback(FallbackReason::DanglingNexthop);
            };
            // B: who holds the nexthop address on that subnet.
            let Some(&port) = idx.port_at.get(&(transit.id.as_str(), nexthop)) else {
                return self.fallback(FallbackReason::NexthopNoPort);
            };
            if is_compute(&port.device_owner) {
                return Answer::Resolved(zone_for(
                    &port.project,
                    self.source,
                    idx.network_of(transit),
                ));
            }
            let next = if is_router_interface(&port.device_owner) {
                idx.routers.get(port.device_id.as_str()).copied()
            } else {
                None
            };
            let Some(next) = next else {
                return self.fallback(FallbackReason::NexthopNotRouter);
            };
            if visited.contains(&next.id.as_str()) {
                visited.push(next.id.as_str());
                let detail = format!(
                    "{}: walk returns to router {} (path {})",
                    self.what(),
                    next.id,
                    visited.join(" -> ")
                );
                self.anomaly(AnomalyClass::Cycle, detail);
                return self.fallback(FallbackReason::Cycle);
            }
            if hops >= self.hop_limit {
                let detail = format!(
                    "{}: more than {} router hops (path {} -> {})",
                    self.what(),
                    self.hop_limit,
                    visited.join(" -> "),
                    next.id
                );
                self.anomaly(AnomalyClass::MaxHops, detail);
                return self.fallback(FallbackReason::MaxHops);
            }
            hops += 1;
            visited.push(next.id.as_str());

            // C: the destination sits behind the next router.
            if let Some(answer) = self.behind(next, transit) {
                return answer;
            }

            // D: follow the next router's own longest matching routes.
            let routes = longest_routes(next, destination);
            match routes.as_slice() {
                // E: nowhere to go.
                [] => return self.fallback(FallbackReason::NoRoute),
                [one] => {
                    current = next;
                    nexthop = one.nexthop;
                }
                ecmp => {
                    let answers: Vec<(IpAddr, Answer)> = ecmp
                        .iter()
                        .map(|r| (r.nexthop, self.from(next, r.nexthop, visited.clone(), hops)))
                        .collect();
                    return self.meet_ecmp(next, &answers);
                }
            }
        }
    }

    /// Meets the answers of ECMP routes of `router`, raising `ambiguity`
    /// when resolved answers disagree.
    fn meet_ecmp(&mut self, router: &Router, answers: &[(IpAddr, Answer)]) -> Answer {
        let met = meet(answers.iter().map(|(_, a)| *a));
        if met.ambiguous {
            let list: Vec<String> = answers
                .iter()
                .filter(|(_, a)| matches!(a, Answer::Resolved(_)))
                .map(|(n, a)| format!("via {n} {}", a.zone()))
                .collect();
            let detail = format!(
                "{}: ECMP routes of router {} resolve {} to different zones: {}; the walk takes {}",
                self.what(),
                router.id,
                self.route.destination,
                list.join(", "),
                met.answer.zone()
            );
            self.anomaly(AnomalyClass::Ambiguity, detail);
        }
        met.answer
    }

    /// Step C: the destination inside a subnet of `next` other than the one
    /// the walk came in on. Several owners is a fallback.
    fn behind(&mut self, next: &Router, transit: &Subnet) -> Option<Answer> {
        let idx = self.idx;
        let destination = self.route.destination;
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
                .map(|s| {
                    let owner = idx.owner_of(s);
                    let zone = zone_for(owner, self.source, idx.network_of(s));
                    format!("{} ({}, owner {owner}, {zone})", s.id, s.cidr)
                })
                .collect();
            let detail = format!(
                "{}: {destination} lies in subnets of several owners behind router {}: {}; the walk falls back to external",
                self.what(),
                next.id,
                list.join(", ")
            );
            self.anomaly(AnomalyClass::Ambiguity, detail);
            return Some(self.fallback(FallbackReason::Ambiguity));
        }
        // The most specific subnet decides the network (shared/external).
        let network = most_specific(behind.iter().copied()).and_then(|s| idx.network_of(s));
        Some(Answer::Resolved(zone_for(owners[0], self.source, network)))
    }
}

fn attached_containing<'a>(idx: &Index<'a>, router: &str, addr: IpAddr) -> Option<&'a Subnet> {
    most_specific(
        idx.router_reach
            .get(router)?
            .iter()
            .copied()
            .filter(|s| s.cidr.contains(addr)),
    )
}

/// The longest-prefix subnet; ties by the smallest id, so the choice is
/// order-free.
fn most_specific<'s>(subnets: impl Iterator<Item = &'s Subnet>) -> Option<&'s Subnet> {
    subnets.max_by(|a, b| {
        a.cidr
            .prefix_len()
            .cmp(&b.cidr.prefix_len())
            .then_with(|| b.id.cmp(&a.id))
    })
}

/// The routes of `router` with the longest destination containing
/// `destination`: one, or several (ECMP), sorted by nexthop without
/// duplicates, so the walk does not depend on list order.
fn longest_routes(router: &Router, destination: Prefix) -> Vec<Route> {
    let Some(len) = router
        .routes
        .iter()
        .filter(|r| r.destination.covers(destination))
        .map(|r| r.destination.prefix_len())
        .max()
    else {
        return Vec::new();
    };
    let mut longest: Vec<Route> = router
        .routes
        .iter()
        .filter(|r| r.destination.prefix_len() == len && r.destination.covers(destination))
        .copied()
        .collect();
    longest.sort_unstable_by_key(|r| r.nexthop);
    longest.dedup_by_key(|r| r.nexthop);
    longest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolved_beats_fallback_and_disagreeing_resolved_keep_the_lowest_code() {
        let fb = Answer::Fallback(FallbackReason::NexthopNoPort);
        let other = Answer::Resolved(Zone::OtherTenant);
        let same = Answer::Resolved(Zone::SameTenant);
        assert_eq!(
            meet([fb, other]),
            Met {
                answer: other,
                ambiguous: false
            }
        );
        assert_eq!(
            meet([other, fb, other]),
            Met {
                answer: other,
                ambiguous: false
            }
        );
        assert_eq!(
            meet([other, same, fb]),
            Met {
                answer: same,
                ambiguous: true
            }
        );
        // A resolved `external` (a VM appliance on an external network) is
        // an answer like any other, lowest code of all.
        let ext = Answer::Resolved(Zone::External);
        assert_eq!(meet([same, ext]).answer, ext);
        assert_eq!(
            meet([
                Answer::Fallback(FallbackReason::NoRoute),
                Answer::Fallback(FallbackReason::Cycle)
            ]),
            Met {
                answer: Answer::Fallback(FallbackReason::Cycle),
                ambiguous: false
            }
        );
    }
}
