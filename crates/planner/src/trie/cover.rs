//! Step 7 beyond the subnet rows (DESIGN §6.1, review finding 4).
//!
//! The kernel looks up a VM tenant's rows before the global ones, so any
//! per-tenant row hides every global row under it, not only a subnet row:
//! a static route to another tenant's subnet hides that subnet's router
//! port and DHCP /32s, and a default route through an appliance hides the
//! shared subnets and every platform address. These two passes run after
//! step 6 and before the per-subnet part of step 7.

use lachesis_abi::Zone;

use super::{tenants_behind, Rows, Source, Tenant, GLOBAL};
use crate::bindings::BoundPorts;
use crate::index::Index;
use crate::snapshot::Subnet;
use lachesis_abi::Prefix;

/// A shared subnet attached to a router is delivered on the router's
/// connected route, whatever the static routes of the tenants behind it
/// say. When a less specific row of such a tenant covers it, it is
/// re-emitted under the tenant as `shared` (and listed in `subnet_rows` so
/// step 7 lends it its platform /32s). A row of the subnet's own prefix is
/// met by precedence: the re-emission outranks only a fallback route (a
/// dead route over the shared range must not bill it as internet).
pub(super) fn attached_shared<'r>(
    idx: &'r Index<'r>,
    bound: &'r BoundPorts<'r>,
    rows: &mut Rows<'r>,
    subnet_rows: &mut Vec<(Tenant, &'r Subnet, Source)>,
) {
    for attached in idx.router_interfaces.values() {
        let shared: Vec<&Subnet> = attached
            .iter()
            .copied()
            .filter(|s| idx.network_of(s).is_some_and(|n| n.shared && !n.external))
            .collect();
        if shared.is_empty() {
            continue;
        }
        for tenant in tenants_behind(bound, attached) {
            let scope = rows.intern(tenant);
            for subnet in &shared {
                if covered(rows, scope, subnet.cidr) {
                    rows.put(scope, subnet.cidr, Zone::Shared, Source::Shared);
                    subnet_rows.push((scope, subnet, Source::Shared));
                }
            }
        }
    }
}

/// Every platform address (step 3's set: ports, gateways, metadata) whose
/// most specific row under a tenant is a static-route row (resolved or
/// fallback) or a re-emitted shared row is re-emitted under that tenant as `infra`. Addresses whose
/// most specific row is an owned or neighbour subnet are left to the
/// per-subnet part of step 7, which knows whether the address belongs to
/// that subnet or to another tenant's overlapping one.
pub(super) fn platform_under_routes(idx: &Index<'_>, rows: &mut Rows<'_>) {
    let covering: Vec<(Tenant, Prefix)> = rows
        .map
        .iter()
        .filter(|((t, _), (_, s))| *t != GLOBAL && under_route_or_shared(*s))
        .map(|(k, _)| *k)
        .collect();
    let all = &idx.platform_addresses;
    let mut found = Vec::new();
    for (scope, prefix) in covering {
        // `all` is sorted (IPv4 before IPv6, then numerically), so the
        // addresses inside the prefix are one contiguous run.
        let (lo, hi) = (prefix.addr(), prefix.last());
        let start = all.partition_point(|a| *a < lo);
        let end = all.partition_point(|a| *a <= hi);
        for &a in &all[start..end] {
            if most_specific(rows, scope, Prefix::host(a)).is_some_and(under_route_or_shared) {
                found.push((scope, a));
            }
        }
    }
    // Every put is the same (infra, Infra): the result does not depend on
    // the hash-map order `covering` was collected in.
    for (scope, a) in found {
        rows.put(scope, Prefix::host(a), Zone::Infra, Source::Infra);
    }
}

/// The source of the longest row of `scope` covering `p` (`p` included).
fn most_specific(rows: &Rows<'_>, scope: Tenant, p: Prefix) -> Option<Source> {
    (0..=p.prefix_len()).rev().find_map(|len| {
        let q = Prefix::new(p.addr(), len)?;
        rows.map.get(&(scope, q)).map(|(_, s)| *s)
    })
}

/// Rows whose platform addresses step 7 lends from the global set.
fn under_route_or_shared(s: Source) -> bool {
    matches!(s, Source::Route | Source::FallbackRoute | Source::Shared)
}

/// Whether `scope` has a row covering `p` (`p` itself included).
fn covered(rows: &Rows<'_>, scope: Tenant, p: Prefix) -> bool {
    (0..=p.prefix_len())
        .any(|len| Prefix::new(p.addr(), len).is_some_and(|q| rows.map.contains_key(&(scope, q))))
}
