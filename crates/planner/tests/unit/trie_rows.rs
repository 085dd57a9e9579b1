//! Full-row-set tables for DESIGN §6.1 and the resolver of §6.2.

use crate::common;

use common::{
    anomaly_classes, assert_rows, fallbacks, lpm, pair, pair_rows, wire_pair, with_base, Cloud,
};
use lachesis_planner::PlanOptions;

/// Two tenants, a shared transit network, an external network; tA routes to
/// tB's subnet through tB's router and to 192.168.50.0/24 through its own
/// VM appliance.
fn single_hop() -> Cloud {
    let mut c = Cloud::default();
    c.projects(&["tA", "tB", "admin"]);
    c.external_network("ext", "public").subnet(
        "ext-s",
        "ext",
        "203.0.113.0/24",
        Some("203.0.113.1"),
    );
    c.shared_network("transit", "admin")
        .subnet("tr-s", "transit", "100.64.0.0/24", None);
    c.network("netA", "tA")
        .subnet("a-s", "netA", "10.1.0.0/24", Some("10.1.0.1"));
    c.network("netB", "tB")
        .subnet("b-s", "netB", "10.2.0.0/24", Some("10.2.0.1"));
    c.router(
        "rA",
        "tA",
        Some(("ext", "ext-s", "203.0.113.10")),
        &[
            ("10.2.0.0/24", "100.64.0.2"),
            ("192.168.50.0/24", "10.1.0.50"),
        ],
    );
    c.router("rB", "tB", Some(("ext", "ext-s", "203.0.113.11")), &[]);
    c.iface("rA", "fa:16:3e:00:01:a1", "a-s", "10.1.0.1");
    c.iface("rA", "fa:16:3e:00:01:a2", "tr-s", "100.64.0.1");
    c.iface("rB", "fa:16:3e:00:01:b1", "b-s", "10.2.0.1");
    c.iface("rB", "fa:16:3e:00:01:b2", "tr-s", "100.64.0.2");
    c.port(
        "dhcp-a",
        "tA",
        "fa:16:3e:00:02:a1",
        "network:dhcp",
        "dhcp-host",
        &[("a-s", "10.1.0.2")],
    );
    c.port(
        "dhcp-b",
        "tB",
        "fa:16:3e:00:02:b1",
        "network:dhcp",
        "dhcp-host",
        &[("b-s", "10.2.0.2")],
    );
    c.vm(
        "vmA1",
        "tA",
        "fa:16:3e:00:00:a1",
        "srvA1",
        "a-s",
        "10.1.0.10",
    );
    c.vm(
        "appliance",
        "tA",
        "fa:16:3e:00:00:a5",
        "srvApp",
        "a-s",
        "10.1.0.50",
    );
    c.vm(
        "vmB1",
        "tB",
        "fa:16:3e:00:00:b1",
        "srvB1",
        "b-s",
        "10.2.0.10",
    );
    c.fip("fip1", "ext", "vmB1", "10.2.0.10");
    c
}

#[test]
fn single_hop_deployment_full_rows() {
    let plan = single_hop().plan();
    assert_rows(
        &plan,
        &with_base(&[
            "* 100.64.0.0/24 shared",
            "* 10.1.0.1/32 infra",
            "* 10.1.0.2/32 infra",
            "* 10.2.0.1/32 infra",
            "* 10.2.0.2/32 infra",
            "* 100.64.0.1/32 infra",
            "* 100.64.0.2/32 infra",
            "* 203.0.113.1/32 infra",
            "* 203.0.113.10/32 infra",
            "* 203.0.113.11/32 infra",
            "tA 10.1.0.0/24 same_tenant",
            "tA 10.1.0.1/32 infra",
            "tA 10.1.0.2/32 infra",
            "tA 10.2.0.0/24 other_tenant",
            "tA 10.2.0.1/32 infra",
            "tA 10.2.0.2/32 infra",
            "tA 192.168.50.0/24 same_tenant",
            "tB 10.2.0.0/24 same_tenant",
            "tB 10.2.0.1/32 infra",
            "tB 10.2.0.2/32 infra",
        ]),
    );
    assert!(plan.anomalies.is_empty(), "{:?}", plan.anomalies);
    assert!(plan.route_fallbacks.values().all(|n| *n == 0));
    // The kernel's view: tA reaching tB's VM through the transit bills as
    // other_tenant, the internet as external, tB's router port as infra.
    assert_eq!(
        lpm(&plan, "tA", "10.2.0.10").as_deref(),
        Some("other_tenant")
    );
    assert_eq!(lpm(&plan, "tA", "8.8.8.8").as_deref(), Some("external"));
    assert_eq!(lpm(&plan, "tA", "100.64.0.2").as_deref(), Some("infra"));
    assert_eq!(lpm(&plan, "tA", "100.64.0.77").as_deref(), Some("shared"));
    assert_eq!(lpm(&plan, "tB", "10.1.0.10").as_deref(), Some("external"));
}

#[test]
fn gateway_host_row_beats_owned_subnet_for_its_owner() {
    let plan = single_hop().plan();
    assert_eq!(lpm(&plan, "tA", "10.1.0.1").as_deref(), Some("infra"));
    assert_eq!(lpm(&plan, "tA", "10.1.0.2").as_deref(), Some("infra"));
    assert_eq!(
        lpm(&plan, "tA", "10.1.0.99").as_deref(),
        Some("same_tenant")
    );
    assert_eq!(
        lpm(&plan, "tA", "169.254.169.254").as_deref(),
        Some("infra")
    );
}

/// DESIGN §6.1 step 3 takes every subnet's `gateway_ip`, and Neutron allows
/// one outside the CIDR (an IPv6 link-local router address is common): it
/// is still a global infra /128. Step 7 only lends a subnet the platform
/// addresses inside it, so no per-tenant row appears for it.
#[test]
fn gateway_outside_its_subnet_is_still_global_infra() {
    let mut c = single_hop();
    c.network("netA6", "tA")
        .subnet("a6-s", "netA6", "2001:db8:1::/64", Some("fe80::1"));
    let plan = c.plan();
    let rows = common::rows(&plan);
    assert!(
        rows.contains(&"* fe80::1/128 infra".to_owned()),
        "{rows:#?}"
    );
    assert!(rows.contains(&"tA 2001:db8:1::/64 same_tenant".to_owned()));
    assert!(
        !rows.iter().any(|r| r.starts_with("tA fe80::1/")),
        "{rows:#?}"
    );
    assert_eq!(lpm(&plan, "tA", "fe80::1").as_deref(), Some("infra"));
    assert_eq!(lpm(&plan, "tB", "fe80::1").as_deref(), Some("infra"));
    assert_eq!(lpm(&plan, "tA", "fe80::2").as_deref(), Some("external"));
}

/// Step 7 over static-route rows: tA's route row for tB's subnet would hide
/// the global infra /32s of rB's interface and tB's DHCP port, billing them
/// as `other_tenant`.
#[test]
fn static_route_row_lends_the_platform_addresses_under_it() {
    let plan = single_hop().plan();
    assert_eq!(
        lpm(&plan, "tA", "10.2.0.10").as_deref(),
        Some("other_tenant")
    );
    assert_eq!(lpm(&plan, "tA", "10.2.0.1").as_deref(), Some("infra"));
    assert_eq!(lpm(&plan, "tA", "10.2.0.2").as_deref(), Some("infra"));
}

/// rA sends everything through tA's own appliance (a default route). The
/// router still delivers to the shared transit on its connected route, so
/// the transit stays `shared` for tA (step 7 re-emits an attached shared
/// subnet a less specific tA row covers), and every platform address —
/// metadata, router ports, gateways — stays `infra`.
#[test]
fn default_route_through_an_appliance_hides_no_shared_or_platform_address() {
    let mut c = single_hop();
    c.routers.iter_mut().find(|r| r["id"] == "rA").unwrap()["routes"] =
        serde_json::json!([{"destination": "0.0.0.0/0", "nexthop": "10.1.0.50"}]);
    let plan = c.plan();
    assert_rows(
        &plan,
        &with_base(&[
            "* 100.64.0.0/24 shared",
            "* 10.1.0.1/32 infra",
            "* 10.1.0.2/32 infra",
            "* 10.2.0.1/32 infra",
            "* 10.2.0.2/32 infra",
            "* 100.64.0.1/32 infra",
            "* 100.64.0.2/32 infra",
            "* 203.0.113.1/32 infra",
            "* 203.0.113.10/32 infra",
            "* 203.0.113.11/32 infra",
            "tA 0.0.0.0/0 same_tenant",
            "tA 10.1.0.0/24 same_tenant",
            "tA 10.1.0.1/32 infra",
            "tA 10.1.0.2/32 infra",
            "tA 10.2.0.1/32 infra",
            "tA 10.2.0.2/32 infra",
            "tA 100.64.0.0/24 shared",
            "tA 100.64.0.1/32 infra",
            "tA 100.64.0.2/32 infra",
            "tA 169.254.169.254/32 infra",
            "tA 203.0.113.1/32 infra",
            "tA 203.0.113.10/32 infra",
            "tA 203.0.113.11/32 infra",
            "tB 10.2.0.0/24 same_tenant",
            "tB 10.2.0.1/32 infra",
            "tB 10.2.0.2/32 infra",
        ]),
    );
    assert_eq!(lpm(&plan, "tA", "100.64.0.77").as_deref(), Some("shared"));
    assert_eq!(
        lpm(&plan, "tA", "169.254.169.254").as_deref(),
        Some("infra")
    );
    assert_eq!(lpm(&plan, "tA", "8.8.8.8").as_deref(), Some("same_tenant"));
    assert_eq!(lpm(&plan, "tB", "100.64.0.77").as_deref(), Some("shared"));
}

/// R1 … R5 of t1 … t5, joined by four shared transit networks; each router
/// up to R4 routes 10.5.0.0/24 to the next one.
fn chain() -> Cloud {
    let mut c = Cloud::default();
    c.projects(&["t1", "t2", "t3", "t4", "t5", "admin"]);
    for (name, cidr) in [
        ("12", "100.64.12.0/24"),
        ("23", "100.64.23.0/24"),
        ("34", "100.64.34.0/24"),
        ("45", "100.64.45.0/24"),
    ] {
        let net = format!("tr{name}");
        c.shared_network(&net, "admin")
            .subnet(&format!("{net}-s"), &net, cidr, None);
    }
    for i in 1..=5 {
        let (t, net, sub) = (format!("t{i}"), format!("n{i}"), format!("s{i}"));
        c.network(&net, &t).subnet(
            &sub,
            &net,
            &format!("10.{i}.0.0/24"),
            Some(&format!("10.{i}.0.1")),
        );
        let next_hop = [
            "",
            "100.64.12.2",
            "100.64.23.3",
            "100.64.34.4",
            "100.64.45.5",
        ];
        let routes: Vec<(&str, &str)> = if i < 5 {
            vec![("10.5.0.0/24", next_hop[i])]
        } else {
            vec![]
        };
        c.router(&format!("R{i}"), &t, None, &routes);
        c.iface(
            &format!("R{i}"),
            &format!("fa:16:3e:00:0{i}:00"),
            &sub,
            &format!("10.{i}.0.1"),
        );
        c.vm(
            &format!("vm{i}"),
            &t,
            &format!("fa:16:3e:00:00:0{i}"),
            &format!("srv{i}"),
            &sub,
            &format!("10.{i}.0.10"),
        );
    }
    let links = [
        ("R1", "tr12-s", "100.64.12.1", 1),
        ("R2", "tr12-s", "100.64.12.2", 2),
        ("R2", "tr23-s", "100.64.23.2", 3),
        ("R3", "tr23-s", "100.64.23.3", 4),
        ("R3", "tr34-s", "100.64.34.3", 5),
        ("R4", "tr34-s", "100.64.34.4", 6),
        ("R4", "tr45-s", "100.64.45.4", 7),
        ("R5", "tr45-s", "100.64.45.5", 8),
    ];
    for (r, s, ip, n) in links {
        c.iface(r, &format!("fa:16:3e:00:10:0{n}"), s, ip);
    }
    c
}

const CHAIN_GLOBAL: [&str; 17] = [
    "* 100.64.12.0/24 shared",
    "* 100.64.23.0/24 shared",
    "* 100.64.34.0/24 shared",
    "* 100.64.45.0/24 shared",
    "* 10.1.0.1/32 infra",
    "* 10.2.0.1/32 infra",
    "* 10.3.0.1/32 infra",
    "* 10.4.0.1/32 infra",
    "* 10.5.0.1/32 infra",
    "* 100.64.12.1/32 infra",
    "* 100.64.12.2/32 infra",
    "* 100.64.23.2/32 infra",
    "* 100.64.23.3/32 infra",
    "* 100.64.34.3/32 infra",
    "* 100.64.34.4/32 infra",
    "* 100.64.45.4/32 infra",
    "* 100.64.45.5/32 infra",
];

#[test]
fn five_router_chain_full_rows() {
    let plan = chain().plan();
    let mut want = with_base(&CHAIN_GLOBAL);
    want.extend([
        "t1 10.1.0.0/24 same_tenant",
        "t1 10.1.0.1/32 infra",
        "t1 10.5.0.0/24 other_tenant",
        "t1 10.5.0.1/32 infra",
        "t2 10.2.0.0/24 same_tenant",
        "t2 10.2.0.1/32 infra",
        "t2 10.5.0.0/24 other_tenant",
        "t2 10.5.0.1/32 infra",
        "t3 10.3.0.0/24 same_tenant",
        "t3 10.3.0.1/32 infra",
        "t3 10.5.0.0/24 other_tenant",
        "t3 10.5.0.1/32 infra",
        "t4 10.4.0.0/24 same_tenant",
        "t4 10.4.0.1/32 infra",
        "t4 10.5.0.0/24 other_tenant",
        "t4 10.5.0.1/32 infra",
        "t5 10.5.0.0/24 same_tenant",
        "t5 10.5.0.1/32 infra",
    ]);
    assert_rows(&plan, &want);
    assert!(plan.anomalies.is_empty(), "{:?}", plan.anomalies);
    assert!(plan.route_fallbacks.values().all(|n| *n == 0));
}

#[test]
fn hop_limit_counts_router_to_router_hops() {
    // R1 → R2 → R3 → R4 → R5 is four hops: a limit of 4 is enough.
    let plan = chain().plan_with(PlanOptions { hop_limit: 4 });
    assert_eq!(
        lpm(&plan, "t1", "10.5.0.7").as_deref(),
        Some("other_tenant")
    );
    assert!(plan.anomalies.is_empty(), "{:?}", plan.anomalies);
}

#[test]
fn hop_limit_exceeded_falls_back_for_the_longest_walk_only() {
    // R1 needs four router hops, R2 three: a limit of 3 cuts R1 only.
    let plan = chain().plan_with(PlanOptions { hop_limit: 3 });
    let mut want = with_base(&CHAIN_GLOBAL);
    want.extend([
        "t1 10.1.0.0/24 same_tenant",
        "t1 10.1.0.1/32 infra",
        "t1 10.5.0.0/24 external",
        "t1 10.5.0.1/32 infra",
        "t2 10.2.0.0/24 same_tenant",
        "t2 10.2.0.1/32 infra",
        "t2 10.5.0.0/24 other_tenant",
        "t2 10.5.0.1/32 infra",
        "t3 10.3.0.0/24 same_tenant",
        "t3 10.3.0.1/32 infra",
        "t3 10.5.0.0/24 other_tenant",
        "t3 10.5.0.1/32 infra",
        "t4 10.4.0.0/24 same_tenant",
        "t4 10.4.0.1/32 infra",
        "t4 10.5.0.0/24 other_tenant",
        "t4 10.5.0.1/32 infra",
        "t5 10.5.0.0/24 same_tenant",
        "t5 10.5.0.1/32 infra",
    ]);
    assert_rows(&plan, &want);
    assert_eq!(anomaly_classes(&plan), ["max_hops"]);
    assert!(
        plan.anomalies[0]
            .detail
            .contains("router R1 route 10.5.0.0/24 via 100.64.12.2"),
        "{}",
        plan.anomalies[0].detail
    );
    assert_eq!(fallbacks(&plan, "max_hops"), 1);
    assert_eq!(plan.route_fallbacks.values().sum::<u64>(), 1);
}

#[test]
fn cycle_between_two_routers_is_external_and_reported() {
    let mut c = pair();
    wire_pair(
        &mut c,
        &[("10.9.0.0/24", "100.64.0.2")],
        &[("10.9.0.0/24", "100.64.0.1")],
    );
    let plan = c.plan();
    assert_rows(
        &plan,
        &pair_rows(&["t1 10.9.0.0/24 external", "t2 10.9.0.0/24 external"]),
    );
    assert_eq!(anomaly_classes(&plan), ["cycle", "cycle"]);
    assert!(
        plan.anomalies
            .iter()
            .any(|a| a.detail.contains("path R1 -> R2 -> R1")),
        "{:?}",
        plan.anomalies
    );
    assert_eq!(fallbacks(&plan, "cycle"), 2);
}

#[test]
fn dangling_nexthop_is_external_and_reported() {
    let mut c = pair();
    wire_pair(&mut c, &[("10.9.0.0/24", "10.77.0.1")], &[]);
    let plan = c.plan();
    assert_rows(&plan, &pair_rows(&["t1 10.9.0.0/24 external"]));
    assert_eq!(anomaly_classes(&plan), ["dangling_route"]);
    assert!(plan.anomalies[0].detail.contains("10.77.0.1"));
    assert_eq!(fallbacks(&plan, "dangling_nexthop"), 1);
}

#[test]
fn nexthop_without_port_and_dead_end_router_are_counted() {
    let mut c = pair();
    // 100.64.0.9 is on the transit but nobody holds it; 10.8.0.0/24 is
    // forwarded to R2, which has neither the subnet nor a route.
    wire_pair(
        &mut c,
        &[("10.9.0.0/24", "100.64.0.9"), ("10.8.0.0/24", "100.64.0.2")],
        &[],
    );
    let plan = c.plan();
    assert_rows(
        &plan,
        &pair_rows(&["t1 10.8.0.0/24 external", "t1 10.9.0.0/24 external"]),
    );
    assert!(plan.anomalies.is_empty(), "{:?}", plan.anomalies);
    assert_eq!(fallbacks(&plan, "nexthop_no_port"), 1);
    assert_eq!(fallbacks(&plan, "no_route"), 1);
}

#[test]
fn destination_behind_two_owners_is_ambiguous() {
    let mut c = pair();
    c.network("n3", "t3")
        .subnet("s3", "n3", "10.2.0.0/16", Some("10.2.255.254"));
    wire_pair(&mut c, &[("10.2.0.0/25", "100.64.0.2")], &[]);
    c.iface("R2", "fa:16:3e:00:02:03", "s3", "10.2.255.254");
    let plan = c.plan();
    assert_rows(
        &plan,
        &pair_rows(&[
            "* 10.2.255.254/32 infra",
            "t1 10.2.0.0/25 external",
            "t1 10.2.0.1/32 infra",
            "t3 10.2.0.0/16 same_tenant",
            "t3 10.2.255.254/32 infra",
        ]),
    );
    assert_eq!(anomaly_classes(&plan), ["ambiguity"]);
    assert!(plan.anomalies[0].detail.contains("s2") && plan.anomalies[0].detail.contains("s3"));
    assert_eq!(fallbacks(&plan, "ambiguity"), 1);
}

#[test]
fn appliance_of_another_tenant_bills_as_other_tenant() {
    // t2's service network is plugged into t1's router; t2's VM appliance
    // on it is the nexthop of t1's route.
    let mut c = pair();
    c.network("svc", "t2")
        .subnet("svc-s", "svc", "10.20.0.0/24", Some("10.20.0.1"));
    c.router("R1", "t1", None, &[("172.16.0.0/12", "10.20.0.5")]);
    c.iface("R1", "fa:16:3e:00:01:01", "s1", "10.1.0.1");
    c.iface("R1", "fa:16:3e:00:01:03", "svc-s", "10.20.0.1");
    c.vm("vm1", "t1", "fa:16:3e:00:00:01", "srv1", "s1", "10.1.0.10");
    c.vm(
        "fw",
        "t2",
        "fa:16:3e:00:00:05",
        "srvFw",
        "svc-s",
        "10.20.0.5",
    );
    let plan = c.plan();
    assert_rows(
        &plan,
        &with_base(&[
            "* 10.1.0.1/32 infra",
            "* 10.2.0.1/32 infra",
            "* 10.20.0.1/32 infra",
            "* 100.64.0.0/24 shared",
            "t1 10.1.0.0/24 same_tenant",
            "t1 10.1.0.1/32 infra",
            // Router neighbours: t1's VM sees t2's service subnet…
            "t1 10.20.0.0/24 other_tenant",
            "t1 10.20.0.1/32 infra",
            "t1 172.16.0.0/12 other_tenant",
            "t2 10.2.0.0/24 same_tenant",
            "t2 10.2.0.1/32 infra",
            "t2 10.20.0.0/24 same_tenant",
            "t2 10.20.0.1/32 infra",
            // …and t2's appliance sees t1's subnet.
            "t2 10.1.0.0/24 other_tenant",
            "t2 10.1.0.1/32 infra",
        ]),
    );
    assert!(plan.anomalies.is_empty(), "{:?}", plan.anomalies);
}

#[test]
fn router_neighbours_only_for_tenants_with_ports_there() {
    let mut c = pair();
    c.router("R", "t1", None, &[]);
    c.iface("R", "fa:16:3e:00:01:01", "s1", "10.1.0.1");
    c.iface("R", "fa:16:3e:00:01:02", "s2", "10.2.0.1");
    c.iface("R", "fa:16:3e:00:01:03", "tr-s", "100.64.0.1");
    c.vm("vm1", "t1", "fa:16:3e:00:00:01", "srv1", "s1", "10.1.0.10");
    c.vm("vm2", "t2", "fa:16:3e:00:00:02", "srv2", "s2", "10.2.0.10");
    // t3 has a VM, but not on this router's subnets: no neighbour rows.
    c.network("n3", "t3")
        .subnet("s3", "n3", "10.3.0.0/24", None);
    c.vm("vm3", "t3", "fa:16:3e:00:00:03", "srv3", "s3", "10.3.0.10");
    let plan = c.plan();
    assert_rows(
        &plan,
        &with_base(&[
            "* 100.64.0.0/24 shared",
            "* 10.1.0.1/32 infra",
            "* 10.2.0.1/32 infra",
            "* 100.64.0.1/32 infra",
            "t1 10.1.0.0/24 same_tenant",
            "t1 10.1.0.1/32 infra",
            "t1 10.2.0.0/24 other_tenant",
            "t1 10.2.0.1/32 infra",
            "t2 10.2.0.0/24 same_tenant",
            "t2 10.2.0.1/32 infra",
            "t2 10.1.0.0/24 other_tenant",
            "t2 10.1.0.1/32 infra",
            "t3 10.3.0.0/24 same_tenant",
        ]),
    );
    assert_eq!(
        lpm(&plan, "t1", "10.2.0.10").as_deref(),
        Some("other_tenant")
    );
    assert_eq!(lpm(&plan, "t3", "10.2.0.10").as_deref(), Some("external"));
}

#[test]
fn ipv6_extraroutes_resolve_and_print_canonically() {
    let mut c = Cloud::default();
    c.projects(&["t1", "t2", "admin"]);
    c.shared_network("tr6", "admin")
        .subnet("tr6-s", "tr6", "2001:db8:ff::/64", None);
    c.network("n1", "t1")
        .subnet("s1", "n1", "2001:DB8:1::/64", Some("2001:db8:1::1"));
    c.network("n2", "t2")
        .subnet("s2", "n2", "2001:db8:2:0::/64", Some("2001:db8:2::1"));
    c.router(
        "R1",
        "t1",
        None,
        &[
            ("2001:DB8:2::/64", "2001:db8:ff::2"),
            ("2001:db8:99::/48", "2001:db8:ff::2"),
        ],
    );
    c.router("R2", "t2", None, &[]);
    c.iface("R1", "fa:16:3e:00:01:01", "s1", "2001:db8:1::1");
    c.iface("R1", "fa:16:3e:00:01:02", "tr6-s", "2001:db8:ff::1");
    c.iface("R2", "fa:16:3e:00:02:01", "s2", "2001:db8:2::1");
    c.iface("R2", "fa:16:3e:00:02:02", "tr6-s", "2001:db8:ff::2");
    let plan = c.plan();
    assert_rows(
        &plan,
        &with_base(&[
            "* 2001:db8:ff::/64 shared",
            "* 2001:db8:1::1/128 infra",
            "* 2001:db8:2::1/128 infra",
            "* 2001:db8:ff::1/128 infra",
            "* 2001:db8:ff::2/128 infra",
            "t1 2001:db8:1::/64 same_tenant",
            "t1 2001:db8:1::1/128 infra",
            "t1 2001:db8:2::/64 other_tenant",
            "t1 2001:db8:2::1/128 infra",
            "t1 2001:db8:99::/48 external",
            "t2 2001:db8:2::/64 same_tenant",
            "t2 2001:db8:2::1/128 infra",
        ]),
    );
    assert_eq!(fallbacks(&plan, "no_route"), 1);
}

#[test]
fn overlapping_owned_subnets_are_reported() {
    let mut c = Cloud::default();
    c.projects(&["t1"]);
    c.network("n1", "t1")
        .subnet("s1", "n1", "10.0.0.0/16", None);
    c.network("n2", "t1")
        .subnet("s2", "n2", "10.0.5.0/24", None);
    c.network("n3", "t1")
        .subnet("s3", "n3", "10.1.0.0/24", None);
    let plan = c.plan();
    assert_eq!(anomaly_classes(&plan), ["overlapping_owned_subnets"]);
    assert!(plan.anomalies[0].detail.contains("s1") && plan.anomalies[0].detail.contains("s2"));
}

#[test]
fn own_subnet_hides_a_neighbour_of_the_same_cidr_and_its_ports() {
    // t1 and t2 both use 10.0.0.0/24, on one router (admin-made); t2's
    // DHCP port sits at an address t1 uses for a VM.
    let mut c = Cloud::default();
    c.projects(&["t1", "t2"]);
    c.network("n1", "t1")
        .subnet("s1", "n1", "10.0.0.0/24", Some("10.0.0.1"));
    c.network("n2", "t2")
        .subnet("s2", "n2", "10.0.0.0/24", Some("10.0.0.254"));
    c.router("R", "t1", None, &[]);
    c.iface("R", "fa:16:3e:00:01:01", "s1", "10.0.0.1");
    c.iface("R", "fa:16:3e:00:01:02", "s2", "10.0.0.254");
    c.port(
        "dhcp2",
        "t2",
        "fa:16:3e:00:02:02",
        "network:dhcp",
        "h",
        &[("s2", "10.0.0.3")],
    );
    c.vm("vm1", "t1", "fa:16:3e:00:00:01", "srv1", "s1", "10.0.0.3");
    c.vm("vm2", "t2", "fa:16:3e:00:00:02", "srv2", "s2", "10.0.0.4");
    let plan = c.plan();
    assert_rows(
        &plan,
        &with_base(&[
            "* 10.0.0.1/32 infra",
            "* 10.0.0.3/32 infra",
            "* 10.0.0.254/32 infra",
            "t1 10.0.0.0/24 same_tenant",
            "t1 10.0.0.1/32 infra",
            "t2 10.0.0.0/24 same_tenant",
            "t2 10.0.0.3/32 infra",
            "t2 10.0.0.254/32 infra",
        ]),
    );
    assert_eq!(lpm(&plan, "t1", "10.0.0.3").as_deref(), Some("same_tenant"));
}
