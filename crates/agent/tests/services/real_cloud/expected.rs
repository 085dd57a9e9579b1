//! The plan the harness's topology implies, written out row by row from
//! DESIGN §6 and docs/planner.md. Only what Neutron generates (port ids,
//! MACs of router ports, gateway-port addresses) is looked up, by name or by
//! (router, owner), in the admin's own port list — never in the plan.

use std::collections::BTreeSet;

use serde_json::Value;

use super::harness::Built;

/// (tenant, prefix, zone), the plan's `trie` row.
pub type Row = (String, String, String);
/// (mac, tenant, server, port, `external_network`, amphora).
pub type Binding = (String, String, String, String, String, bool);
/// (mac, router, `external_network`).
pub type RouterMac = (String, String, String);

pub const SERVER_A1: &str = "5e7a1c1e-0000-4000-8000-0000000000a1";
pub const SERVER_A2: &str = "5e7a1c1e-0000-4000-8000-0000000000a2";
pub const SERVER_B1: &str = "5e7a1c1e-0000-4000-8000-0000000000b1";

fn row(tenant: &str, prefix: &str, zone: &str) -> Row {
    (tenant.into(), prefix.into(), zone.into())
}

fn port_named<'a>(ports: &'a [Value], name: &str) -> &'a Value {
    let found: Vec<&Value> = ports.iter().filter(|p| p["name"] == name).collect();
    assert_eq!(found.len(), 1, "exactly one port named {name}");
    found[0]
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} is not a string in {v}"))
}

/// Ports of `owner` on the router `router`.
fn router_ports<'a>(ports: &'a [Value], router: &str, owner: &str) -> Vec<&'a Value> {
    ports
        .iter()
        .filter(|p| p["device_id"] == router && p["device_owner"] == owner)
        .collect()
}

fn fixed_ips(port: &Value) -> Vec<String> {
    port["fixed_ips"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| str_of(f, "ip_address").to_owned())
        .collect()
}

fn host(addr: &str) -> String {
    if addr.contains(':') {
        format!("{addr}/128")
    } else {
        format!("{addr}/32")
    }
}

/// Every trie row. `ports` is Neutron's port list as the admin sees it.
pub fn trie(b: &Built, ports: &[Value]) -> BTreeSet<Row> {
    let (pa, pb) = (b.project_a.as_str(), b.project_b.as_str());
    let mut rows = BTreeSet::new();
    // §6.1 step 1: catch-alls.
    rows.insert(row("*", "0.0.0.0/0", "external"));
    rows.insert(row("*", "::/0", "external"));
    // Step 2: the shared network's only subnet (the external network's two
    // subnets produce no rows: their addresses fall to the catch-all).
    rows.insert(row("*", "10.50.0.0/24", "shared"));
    // Step 3: platform addresses. Router interfaces: a4 and a6 gateways
    // (router A), b4 gateway (router B), both routers' shared-network ports.
    // Subnet gateway_ips: the same three plus public v4/v6 and shared .1
    // (held by no port, still a gateway_ip). Metadata. No DHCP (disabled).
    // Neutron's default IPv6 gateway_ip is the subnet's first address
    // (`2001:db8:a::`, the subnet-router anycast), not `::1` as one might
    // write by analogy with IPv4; router A's a6 interface takes it.
    for addr in [
        "10.1.0.1",
        "2001:db8:a::",
        "10.2.0.1",
        "10.50.0.10",
        "10.50.0.20",
        "10.50.0.1",
        "203.0.113.1",
        "2001:db8:ff::",
        "169.254.169.254",
        "fe80::a9fe:a9fe",
    ] {
        rows.insert(row("*", &host(addr), "infra"));
    }
    // ... and the addresses Neutron picked for each router's gateway port.
    for router in [&b.router_a, &b.router_b] {
        let gw = router_ports(ports, router, "network:router_gateway");
        assert_eq!(gw.len(), 1, "one gateway port on router {router}");
        let ips = fixed_ips(gw[0]);
        assert!(!ips.is_empty(), "gateway port of {router} has an address");
        for ip in ips {
            rows.insert(row("*", &host(&ip), "infra"));
        }
    }

    // Tenant A. Step 4: its own v4 and v6 subnets.
    rows.insert(row(pa, "10.1.0.0/24", "same_tenant"));
    rows.insert(row(pa, "2001:db8:a::/64", "same_tenant"));
    // Step 5: A has a VM port (lt-vm-a1-shared) on the shared subnet, which
    // router B is attached to, so B's other attached subnet 10.2.0.0/24 is
    // A's neighbour: zone_for(B, A, lt-b) = other_tenant. Step 6 gives the
    // same row: router A's route 10.2.0.0/24 via 10.50.0.20 → shared subnet
    // → router B's interface → destination inside B's attached lt-b subnet,
    // one owner (B) → other_tenant (the route outranks the neighbour; same
    // zone either way).
    rows.insert(row(pa, "10.2.0.0/24", "other_tenant"));
    // Step 6: route 192.168.77.0/24 via 10.1.0.5 → a4 → lt-vm-a1, a
    // compute:nova port of A on lt-a → zone_for(A, A, lt-a) = same_tenant.
    rows.insert(row(pa, "192.168.77.0/24", "same_tenant"));
    // Step 7: platform addresses inside A's owned subnets (router A's
    // interfaces, which are also the gateway_ips) ...
    rows.insert(row(pa, "10.1.0.1/32", "infra"));
    rows.insert(row(pa, "2001:db8:a::/128", "infra"));
    // ... and inside A's rows over B's subnet (docs/planner.md extends step 7
    // to neighbour subnets and to what route rows hide; DESIGN §6.1's stated
    // reason — a /24 must not hide its gateway's /32 — applies alike).
    rows.insert(row(pa, "10.2.0.1/32", "infra"));
    // Nothing platform lies in 192.168.77.0/24; the shared subnet is covered
    // by no A row, so it is not re-emitted under A.

    // Tenant B. Step 4, step 7. Its only router reaches the shared subnet
    // (no owned-by-others, non-shared subnet) and it has no routes.
    rows.insert(row(pb, "10.2.0.0/24", "same_tenant"));
    rows.insert(row(pb, "10.2.0.1/32", "infra"));
    rows
}

/// Every binding (§6.3, §6.4 rule 2).
pub fn bindings(b: &Built, ports: &[Value]) -> BTreeSet<Binding> {
    let (pa, pb) = (&b.project_a, &b.project_b);
    let id = |name: &str| str_of(port_named(ports, name), "id").to_owned();
    let public = "lt-public".to_owned();
    let none = "none".to_owned();
    [
        // Floating IP bound to the port → its network.
        (
            "fa:16:3e:a1:00:01",
            pa,
            SERVER_A1,
            id("lt-vm-a1"),
            public.clone(),
        ),
        // The allowed-address-pair MAC, bound like its owning port.
        (
            "fa:16:3e:a1:0f:0f",
            pa,
            SERVER_A1,
            id("lt-vm-a1"),
            public.clone(),
        ),
        // No floating IP; a4's gateway_ip is router A's port, router A is
        // gatewayed to lt-public.
        (
            "fa:16:3e:a1:00:02",
            pa,
            SERVER_A2,
            id("lt-vm-a2"),
            public.clone(),
        ),
        // The shared subnet's gateway_ip (10.50.0.1) is held by no router:
        // no candidate → none.
        (
            "fa:16:3e:a1:00:03",
            pa,
            SERVER_A1,
            id("lt-vm-a1-shared"),
            none,
        ),
        // b4's gateway_ip is router B's port, gatewayed to lt-public.
        ("fa:16:3e:b1:00:01", pb, SERVER_B1, id("lt-vm-b1"), public),
    ]
    .into_iter()
    .map(|(mac, tenant, server, port, ext)| {
        (
            mac.to_owned(),
            tenant.clone(),
            server.to_owned(),
            port,
            ext,
            false,
        )
    })
    .collect()
}

/// Every router interface MAC (§6.4 rule 1): router A's three interfaces
/// (a4, a6, shared), router B's two (b4, shared), both routers gatewayed to
/// lt-public. Gateway ports are not interfaces.
pub fn router_macs(b: &Built, ports: &[Value]) -> BTreeSet<RouterMac> {
    let mut out = BTreeSet::new();
    for (router, interfaces) in [(&b.router_a, 3), (&b.router_b, 2)] {
        let ifs = router_ports(ports, router, "network:router_interface");
        assert_eq!(ifs.len(), interfaces, "interfaces of router {router}");
        for p in ifs {
            out.insert((
                str_of(p, "mac_address").to_owned(),
                router.clone(),
                "lt-public".to_owned(),
            ));
        }
    }
    out
}
