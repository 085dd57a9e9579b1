//! Trie rows, the seven steps of DESIGN §6.1.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use lachesis_abi::Zone;
use rustc_hash::{FxHashMap, FxHashSet};

use crate::bindings::BoundPorts;
use crate::index::{Index, METADATA_ADDRESSES};
use crate::octavia::OctaviaJoin;
use crate::plan::{Anomaly, AnomalyClass, FallbackReason, PlanOptions, Scope, TrieRow};
use crate::resolver::{meet, resolve, Answer};
use crate::snapshot::Subnet;
use crate::zone::zone_for;
use lachesis_abi::Prefix;

mod cover;

/// Which step produced a row; when two steps produce the same (tenant,
/// prefix), the later variant wins, with no anomaly (DESIGN §6.2's
/// precedence). Per tenant: infra (step 7) > owned subnet (4) > resolved
/// static route (6) > neighbour (5) > shared re-emission (7) > fallback
/// static route (6): a platform /32 is step 7's whole point, a tenant's own
/// subnets are ground truth, an explicit route that resolved is the owner's
/// statement and outranks an inferred neighbour, and a fallback is a guess
/// that outranks nothing. Globally: infra > shared > catch-all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Source {
    CatchAll,
    FallbackRoute,
    Shared,
    Neighbour,
    Route,
    Owned,
    Infra,
}

/// A row's tenant while planning, interned: building 10⁵ rows then hashes
/// and compares integers, not project-id strings. [`GLOBAL`] is `*`.
type Tenant = u32;

const GLOBAL: Tenant = 0;

struct Rows<'r> {
    /// Tenant id → project id (`""` for [`GLOBAL`]).
    names: Vec<&'r str>,
    ids: FxHashMap<&'r str, Tenant>,
    map: FxHashMap<(Tenant, Prefix), (Zone, Source)>,
}

impl<'r> Rows<'r> {
    fn new() -> Rows<'r> {
        Rows {
            names: vec![""],
            ids: FxHashMap::default(),
            map: FxHashMap::default(),
        }
    }

    fn intern(&mut self, project: &'r str) -> Tenant {
        let next = self.names.len() as Tenant;
        let id = *self.ids.entry(project).or_insert(next);
        if id == next {
            self.names.push(project);
        }
        id
    }

    fn put(&mut self, scope: Tenant, prefix: Prefix, zone: Zone, source: Source) {
        use std::collections::hash_map::Entry;
        match self.map.entry((scope, prefix)) {
            Entry::Vacant(v) => {
                v.insert((zone, source));
            }
            Entry::Occupied(mut o) => {
                let (z, s) = *o.get();
                // Same step, different answers: keep the lower zone code so
                // the outcome does not depend on visiting order.
                if source > s || (source == s && zone.code() < z.code()) {
                    o.insert((zone, source));
                }
            }
        }
    }
}

pub(crate) struct TrieOut {
    pub rows: Vec<TrieRow>,
    pub fallbacks: BTreeMap<FallbackReason, u64>,
}

pub(crate) fn rows<'r>(
    idx: &'r Index<'r>,
    bound: &'r BoundPorts<'r>,
    octavia: &'r OctaviaJoin<'r>,
    opts: PlanOptions,
    anomalies: &mut Vec<Anomaly>,
) -> TrieOut {
    let mut rows = Rows::new();

    // 1. Catch-all.
    rows.put(
        GLOBAL,
        Prefix::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0).expect("/0"),
        Zone::External,
        Source::CatchAll,
    );
    rows.put(
        GLOBAL,
        Prefix::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0).expect("/0"),
        Zone::External,
        Source::CatchAll,
    );

    global_rows(idx, &mut rows);

    // 4. Owned subnets. `subnet_rows` collects every per-tenant subnet row
    // (steps 4 and 5) for step 7.
    let mut subnet_rows: Vec<(Tenant, &Subnet, Source)> = Vec::new();
    let mut owned_by_tenant: BTreeMap<&str, Vec<&Subnet>> = BTreeMap::new();
    for subnet in &idx.snap.subnets {
        let Some(net) = idx.network_of(subnet) else {
            continue;
        };
        if net.shared || net.external || net.project.is_empty() {
            continue;
        }
        owned_by_tenant
            .entry(net.project.as_str())
            .or_default()
            .push(subnet);
        let scope = rows.intern(&net.project);
        rows.put(scope, subnet.cidr, Zone::SameTenant, Source::Owned);
        subnet_rows.push((scope, subnet, Source::Owned));
    }
    for (tenant, subnets) in &mut owned_by_tenant {
        overlapping(tenant, subnets, anomalies);
    }

    neighbours(idx, bound, &mut rows, &mut subnet_rows);

    let fallbacks = static_routes(idx, &mut rows, opts, anomalies);

    // 7, beyond the subnet rows: what static-route rows hide.
    cover::attached_shared(idx, bound, &mut rows, &mut subnet_rows);
    cover::platform_under_routes(idx, &mut rows);

    // 7. Platform addresses inside a tenant's subnet rows, and amphora
    // data-port addresses under the LB owner: per-tenant rows are looked up
    // before global ones, so a /24 would otherwise hide its gateway's /32.
    for &(scope, subnet, source) in &subnet_rows {
        // A neighbour subnet hidden by the tenant's own subnet of the same
        // CIDR lends it no /32s: they would describe someone else's ports.
        if rows
            .map
            .get(&(scope, subnet.cidr))
            .is_none_or(|(_, s)| *s != source)
        {
            continue;
        }
        if let Some(addrs) = idx.platform_by_subnet.get(subnet.id.as_str()) {
            for a in addrs {
                rows.put(scope, Prefix::host(*a), Zone::Infra, Source::Infra);
            }
        }
        for a in METADATA_ADDRESSES {
            if subnet.cidr.contains(a) {
                rows.put(scope, Prefix::host(a), Zone::Infra, Source::Infra);
            }
        }
    }
    for amp in &octavia.amphora_ips {
        let scope = rows.intern(&amp.tenant);
        rows.put(scope, Prefix::host(amp.address), Zone::Infra, Source::Infra);
    }

    // Order tenants by project id once (`*` first, as in the output), then
    // sort rows by (rank, prefix) without comparing strings.
    let mut order: Vec<Tenant> = (1..rows.names.len() as Tenant).collect();
    order.sort_unstable_by_key(|t| rows.names[*t as usize]);
    let mut rank = vec![0usize; rows.names.len()];
    for (i, t) in order.iter().enumerate() {
        rank[*t as usize] = i + 1;
    }
    let scopes: Vec<Scope> = rows
        .names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            if i == 0 {
                Scope::Global
            } else {
                Scope::Tenant((*n).to_owned())
            }
        })
        .collect();
    let mut sorted: Vec<(usize, Prefix, Tenant, Zone)> = rows
        .map
        .into_iter()
        .map(|((tenant, prefix), (zone, _))| (rank[tenant as usize], prefix, tenant, zone))
        .collect();
    sorted.sort_unstable_by_key(|r| (r.0, r.1));
    TrieOut {
        rows: sorted
            .into_iter()
            .map(|(_, prefix, tenant, zone)| TrieRow {
                tenant: scopes[tenant as usize].clone(),
                prefix,
                zone,
            })
            .collect(),
        fallbacks,
    }
}

/// Reports owned subnets of one project that overlap (a sweep over subnets
/// sorted by start address, per family).
fn overlapping(tenant: &str, subnets: &mut [&Subnet], anomalies: &mut Vec<Anomaly>) {
    subnets.sort_by(|a, b| (a.cidr, &a.id).cmp(&(b.cidr, &b.id)));
    let mut open: Option<&Subnet> = None;
    for s in subnets.iter().copied() {
        if let Some(o) = open {
            if o.cidr.is_ipv4() == s.cidr.is_ipv4() && o.cidr.overlaps(s.cidr) {
                anomalies.push(Anomaly {
                    class: AnomalyClass::OverlappingOwnedSubnets,
                    detail: format!(
                        "project {tenant}: subnet {} ({}, network {}) overlaps subnet {} ({}, network {})",
                        o.id, o.cidr, o.network_id, s.id, s.cidr, s.network_id
                    ),
                });
            }
            if o.cidr.is_ipv4() == s.cidr.is_ipv4()
                && o.cidr.last_as_u128() >= s.cidr.last_as_u128()
            {
                continue;
            }
        }
        open = Some(s);
    }
}

/// A route's answer as gathered for its (tenant, destination).
type Routed<'r> = (&'r str, IpAddr, Answer);

/// Step 6: static routes, resolved for the router's owner.
fn static_routes<'r>(
    idx: &'r Index<'r>,
    rows: &mut Rows<'r>,
    opts: PlanOptions,
    anomalies: &mut Vec<Anomaly>,
) -> BTreeMap<FallbackReason, u64> {
    // Answers are gathered per (tenant, destination) first: the routes of
    // one destination across a tenant's routers (or ECMP routes of one
    // router) meet by DESIGN §6.2's rule, in any input order.
    let mut fallbacks: BTreeMap<FallbackReason, u64> =
        FallbackReason::ALL.iter().map(|r| (*r, 0)).collect();
    let mut routed: BTreeMap<(&str, Prefix), Vec<Routed<'r>>> = BTreeMap::new();
    for router in &idx.snap.routers {
        if router.project.is_empty() {
            continue;
        }
        for route in &router.routes {
            let res = resolve(idx, router, *route, &router.project, opts.hop_limit);
            for reason in res.fallbacks {
                *fallbacks.entry(reason).or_insert(0) += 1;
            }
            anomalies.extend(res.anomalies);
            routed
                .entry((router.project.as_str(), route.destination))
                .or_default()
                .push((router.id.as_str(), route.nexthop, res.answer));
        }
    }
    for ((tenant, destination), mut answers) in routed {
        answers.sort_unstable();
        let met = meet(answers.iter().map(|a| a.2));
        if met.ambiguous {
            anomalies.push(disagreement(tenant, destination, &answers, met.answer));
        }
        let source = match met.answer {
            Answer::Resolved(_) => Source::Route,
            Answer::Fallback(_) => Source::FallbackRoute,
        };
        let scope = rows.intern(tenant);
        rows.put(scope, destination, met.answer.zone(), source);
    }
    fallbacks
}

/// The `ambiguity` of routes of one destination whose resolved answers
/// disagree: the router or routers, the destination, the zones.
fn disagreement(
    tenant: &str,
    destination: Prefix,
    answers: &[Routed<'_>],
    chosen: Answer,
) -> Anomaly {
    let resolved: Vec<&Routed<'_>> = answers
        .iter()
        .filter(|a| matches!(a.2, Answer::Resolved(_)))
        .collect();
    let mut routers: Vec<&str> = resolved.iter().map(|a| a.0).collect();
    routers.dedup();
    let list: Vec<String> = resolved
        .iter()
        .map(|(r, n, a)| format!("router {r} via {n} {}", a.zone()))
        .collect();
    let through = if routers.len() == 1 {
        format!("router {} (ECMP)", routers[0])
    } else {
        format!("routers {}", routers.join(", "))
    };
    Anomaly {
        class: AnomalyClass::Ambiguity,
        detail: format!(
            "project {tenant} routes {destination} through {through} to different zones: {}; row uses {}",
            list.join(", "),
            chosen.zone()
        ),
    }
}

/// Steps 2 and 3: shared subnets and platform addresses, for every tenant.
fn global_rows<'r>(idx: &'r Index<'r>, rows: &mut Rows<'r>) {
    // 2. Shared, non-external subnets.
    for subnet in &idx.snap.subnets {
        if idx
            .network_of(subnet)
            .is_some_and(|n| n.shared && !n.external)
        {
            rows.put(GLOBAL, subnet.cidr, Zone::Shared, Source::Shared);
        }
    }

    // 3. Platform addresses (ports, every gateway_ip, metadata).
    for a in &idx.platform_addresses {
        rows.put(GLOBAL, Prefix::host(*a), Zone::Infra, Source::Infra);
    }
}

/// Step 5: router neighbours, for tenants with a bound port on the router.
fn neighbours<'r>(
    idx: &'r Index<'r>,
    bound: &'r BoundPorts<'r>,
    rows: &mut Rows<'r>,
    subnet_rows: &mut Vec<(Tenant, &'r Subnet, Source)>,
) {
    for attached in idx.router_interfaces.values() {
        for tenant in tenants_behind(bound, attached) {
            let scope = rows.intern(tenant);
            for subnet in attached {
                let net = idx.network_of(subnet);
                if net.is_some_and(|n| n.shared || n.external) {
                    continue;
                }
                let owner = idx.owner_of(subnet);
                if owner == tenant {
                    continue;
                }
                rows.put(
                    scope,
                    subnet.cidr,
                    zone_for(owner, tenant, net),
                    Source::Neighbour,
                );
                subnet_rows.push((scope, subnet, Source::Neighbour));
            }
        }
    }
}

/// The tenants with a bound port on any of a router's attached subnets
/// (after amphora re-attribution), sorted: whose traffic the router carries.
fn tenants_behind<'r>(bound: &'r BoundPorts<'r>, attached: &[&'r Subnet]) -> Vec<&'r str> {
    let mut tenants: Vec<&str> = attached
        .iter()
        .filter_map(|s| bound.tenants_by_subnet.get(s.id.as_str()))
        .flatten()
        .copied()
        .collect::<FxHashSet<_>>()
        .into_iter()
        .collect();
    tenants.sort_unstable();
    tenants
}
