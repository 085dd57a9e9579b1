//! Where answers meet (DESIGN §6.2): a resolved zone beats a fallback
//! `external` everywhere; resolved answers of one destination that disagree
//! keep the lowest zone code and raise `ambiguity`; between steps the
//! precedence infra > owned > resolved route > neighbour > shared
//! re-emission > fallback route decides without an anomaly.

use crate::common;

use common::{
    anomaly_classes, assert_rows, lpm, nonzero_fallbacks, pair, pair_rows, wire_pair, with_base,
    Cloud,
};
use lachesis_planner::{AnomalyClass, Plan, PlanOptions};

/// The `ambiguity` detail starting with `head` names every one of `parts`.
fn assert_ambiguity(plan: &Plan, head: &str, parts: &[&str]) {
    let found: Vec<&str> = plan
        .anomalies
        .iter()
        .filter(|a| a.class == AnomalyClass::Ambiguity && a.detail.starts_with(head))
        .map(|a| a.detail.as_str())
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one ambiguity starting {head:?}: {:?}",
        plan.anomalies
    );
    for part in parts {
        assert!(found[0].contains(part), "{part:?} not in {}", found[0]);
    }
}

/// Issue example 1: t2's VM sits on a shared subnet behind t1's router, so
/// t1's 10.6.0.0/20 is t2's neighbour; t2's own router also routes that
/// prefix to an address no port holds. The neighbour row is an answer, the
/// dead route a guess: t2's traffic to t1 must not bill as internet.
#[test]
fn neighbour_beats_a_dead_route_of_the_same_prefix() {
    let mut c = Cloud::default();
    c.projects(&["t1", "t2", "admin"]);
    c.shared_network("sh", "admin")
        .subnet("sh-s", "sh", "100.64.0.0/24", None);
    c.network("n1", "t1")
        .subnet("s1", "n1", "10.6.0.0/20", Some("10.6.0.1"));
    c.network("n2", "t2")
        .subnet("s2", "n2", "10.7.0.0/24", Some("10.7.0.1"));
    c.router("R1", "t1", None, &[]);
    c.iface("R1", "fa:16:3e:00:01:01", "s1", "10.6.0.1");
    c.iface("R1", "fa:16:3e:00:01:02", "sh-s", "100.64.0.1");
    c.router("R2", "t2", None, &[("10.6.0.0/20", "10.7.0.99")]);
    c.iface("R2", "fa:16:3e:00:02:01", "s2", "10.7.0.1");
    c.vm(
        "vm2",
        "t2",
        "fa:16:3e:00:00:02",
        "srv2",
        "sh-s",
        "100.64.0.10",
    );
    let plan = c.plan();
    assert_rows(
        &plan,
        &with_base(&[
            "* 100.64.0.0/24 shared",
            "* 10.6.0.1/32 infra",
            "* 10.7.0.1/32 infra",
            "* 100.64.0.1/32 infra",
            "t1 10.6.0.0/20 same_tenant",
            "t1 10.6.0.1/32 infra",
            "t2 10.6.0.0/20 other_tenant",
            "t2 10.6.0.1/32 infra",
            "t2 10.7.0.0/24 same_tenant",
            "t2 10.7.0.1/32 infra",
        ]),
    );
    assert_eq!(
        lpm(&plan, "t2", "10.6.3.4").as_deref(),
        Some("other_tenant")
    );
    assert!(plan.anomalies.is_empty(), "{:?}", plan.anomalies);
    assert_eq!(nonzero_fallbacks(&plan), [("nexthop_no_port", 1)]);
}

/// Issue example 2: one router, two routes for one destination (ECMP), one
/// through its own VM appliance, one to an address no port holds. The
/// appliance decides; one router's ECMP is no ambiguity when only one
/// answer is resolved; the dead route is still counted.
#[test]
fn ecmp_with_a_dead_sibling_takes_the_resolved_answer() {
    let mut c = Cloud::default();
    c.projects(&["t1"]);
    c.network("n1", "t1")
        .subnet("s1", "n1", "10.1.0.0/24", Some("10.1.0.1"));
    c.router(
        "R1",
        "t1",
        None,
        &[("10.2.5.0/26", "10.1.0.50"), ("10.2.5.0/26", "10.1.0.7")],
    );
    c.iface("R1", "fa:16:3e:00:01:01", "s1", "10.1.0.1");
    c.appliance("t1", "s1", "10.1.0.50");
    let plan = c.plan();
    assert_rows(
        &plan,
        &with_base(&[
            "* 10.1.0.1/32 infra",
            "t1 10.1.0.0/24 same_tenant",
            "t1 10.1.0.1/32 infra",
            "t1 10.2.5.0/26 same_tenant",
        ]),
    );
    assert!(plan.anomalies.is_empty(), "{:?}", plan.anomalies);
    assert_eq!(nonzero_fallbacks(&plan), [("nexthop_no_port", 1)]);
}

/// R1 (t1) routes 10.9.0.0/24 to R2 (t2), which has two routes of that
/// length: through t2's appliance at 10.2.0.50, and through `other`.
fn second_hop_ecmp(other: &str) -> Cloud {
    let mut c = pair();
    wire_pair(
        &mut c,
        &[("10.9.0.0/24", "100.64.0.2")],
        &[("10.9.0.0/24", "10.2.0.50"), ("10.9.0.0/24", other)],
    );
    c.appliance("t2", "s2", "10.2.0.50");
    c
}

/// Issue example 3 and ECMP at the second hop: R1 routes 10.9.0.0/24 to
/// R2, which has two routes of that length. The smaller nexthop holds no
/// port; the other is t2's appliance. The walk meets both branches by the
/// first hop's rule, not by the smallest nexthop.
#[test]
fn ecmp_at_the_second_hop_meets_like_the_first() {
    let plan = second_hop_ecmp("10.2.0.3").plan();
    assert_rows(
        &plan,
        &pair_rows(&["t1 10.9.0.0/24 other_tenant", "t2 10.9.0.0/24 same_tenant"]),
    );
    assert!(plan.anomalies.is_empty(), "{:?}", plan.anomalies);
    // R1's walk's dead branch, and R2's own dead route.
    assert_eq!(nonzero_fallbacks(&plan), [("nexthop_no_port", 2)]);
}

/// ECMP at the second hop whose branches resolve to different zones: t2's
/// appliance (`other_tenant` for t1) and t1's own VM on the shared transit
/// (`shared`). The lower code wins, and `ambiguity` names the one router
/// where the branches split, the destination and both zones. R2's own ECMP
/// pair disagrees for t2 as well (`same_tenant` against `shared`).
#[test]
fn disagreeing_ecmp_at_the_second_hop_keeps_the_lowest_code_and_names_the_router() {
    let mut c = second_hop_ecmp("100.64.0.30");
    c.vm(
        "vm1",
        "t1",
        "fa:16:3e:00:00:30",
        "srv1",
        "tr-s",
        "100.64.0.30",
    );
    let plan = c.plan();
    assert_rows(
        &plan,
        &pair_rows(&[
            // t1's VM on the transit puts t1 behind R2: neighbour rows.
            "t1 10.2.0.0/24 other_tenant",
            "t1 10.2.0.1/32 infra",
            "t1 10.9.0.0/24 other_tenant",
            "t2 10.9.0.0/24 same_tenant",
        ]),
    );
    assert_eq!(anomaly_classes(&plan), ["ambiguity", "ambiguity"]);
    assert_ambiguity(
        &plan,
        "router R1 route 10.9.0.0/24 via 100.64.0.2",
        &[
            "ECMP routes of router R2 resolve 10.9.0.0/24",
            "via 10.2.0.50 other_tenant",
            "via 100.64.0.30 shared",
            "takes other_tenant",
        ],
    );
    assert_ambiguity(
        &plan,
        "project t2",
        &[
            "10.9.0.0/24 through router R2 (ECMP)",
            "router R2 via 10.2.0.50 same_tenant",
            "router R2 via 100.64.0.30 shared",
            "row uses same_tenant",
        ],
    );
    assert!(nonzero_fallbacks(&plan).is_empty());
}

/// Issue example 4: t1's router routes its attached shared subnet's range
/// to an address no port holds. The router delivers to the connected
/// subnet anyway; the shared re-emission outranks the fallback route row.
/// A resolved route over the same range is the owner's statement and wins.
#[test]
fn dead_route_over_an_attached_shared_subnet_keeps_it_shared() {
    let mut c = pair();
    wire_pair(&mut c, &[("100.64.0.0/24", "10.1.0.99")], &[]);
    c.vm("vm1", "t1", "fa:16:3e:00:00:01", "srv1", "s1", "10.1.0.10");
    let plan = c.plan();
    assert_rows(
        &plan,
        &pair_rows(&[
            "t1 100.64.0.0/24 shared",
            "t1 100.64.0.1/32 infra",
            "t1 100.64.0.2/32 infra",
        ]),
    );
    assert_eq!(lpm(&plan, "t1", "100.64.0.77").as_deref(), Some("shared"));
    assert!(plan.anomalies.is_empty(), "{:?}", plan.anomalies);
    assert_eq!(nonzero_fallbacks(&plan), [("nexthop_no_port", 1)]);

    let mut c = pair();
    wire_pair(&mut c, &[("100.64.0.0/24", "10.1.0.50")], &[]);
    c.vm("vm1", "t1", "fa:16:3e:00:00:01", "srv1", "s1", "10.1.0.10");
    c.appliance("t1", "s1", "10.1.0.50");
    let plan = c.plan();
    assert_eq!(
        lpm(&plan, "t1", "100.64.0.77").as_deref(),
        Some("same_tenant")
    );
    assert_eq!(lpm(&plan, "t1", "100.64.0.2").as_deref(), Some("infra"));
    assert!(nonzero_fallbacks(&plan).is_empty());
}

/// Two routers of t1 route 172.16.0.0/12: R1 through t1's appliance
/// (`same_tenant`), R1b through t2's firewall (`other_tenant`) and, a
/// second time, to an address no port holds. The resolved answers disagree:
/// the lowest code wins and `ambiguity` names both routers and both zones;
/// the dead route takes no part in the disagreement.
#[test]
fn disagreeing_resolved_routes_keep_the_lowest_code_and_raise_ambiguity() {
    let mut c = Cloud::default();
    c.projects(&["t1", "t2"]);
    c.network("n1", "t1")
        .subnet("s1", "n1", "10.1.0.0/24", Some("10.1.0.1"));
    c.network("n1b", "t1")
        .subnet("s1b", "n1b", "10.11.0.0/24", Some("10.11.0.1"));
    c.network("svc", "t2")
        .subnet("svc-s", "svc", "10.20.0.0/24", Some("10.20.0.1"));
    c.router("R1", "t1", None, &[("172.16.0.0/12", "10.1.0.50")]);
    c.iface("R1", "fa:16:3e:00:01:01", "s1", "10.1.0.1");
    c.router(
        "R1b",
        "t1",
        None,
        &[
            ("172.16.0.0/12", "10.20.0.5"),
            ("172.16.0.0/12", "10.20.0.99"),
        ],
    );
    c.iface("R1b", "fa:16:3e:00:01:b1", "s1b", "10.11.0.1");
    c.iface("R1b", "fa:16:3e:00:01:b2", "svc-s", "10.20.0.1");
    c.appliance("t1", "s1", "10.1.0.50");
    c.appliance("t2", "svc-s", "10.20.0.5");
    let plan = c.plan();
    assert_rows(
        &plan,
        &with_base(&[
            "* 10.1.0.1/32 infra",
            "* 10.11.0.1/32 infra",
            "* 10.20.0.1/32 infra",
            "t1 10.1.0.0/24 same_tenant",
            "t1 10.1.0.1/32 infra",
            "t1 10.11.0.0/24 same_tenant",
            "t1 10.11.0.1/32 infra",
            "t1 172.16.0.0/12 same_tenant",
            // t2's firewall sits behind R1b: t1's subnet there is its neighbour.
            "t2 10.11.0.0/24 other_tenant",
            "t2 10.11.0.1/32 infra",
            "t2 10.20.0.0/24 same_tenant",
            "t2 10.20.0.1/32 infra",
        ]),
    );
    assert_eq!(anomaly_classes(&plan), ["ambiguity"]);
    assert_ambiguity(
        &plan,
        "project t1 routes 172.16.0.0/12 through routers R1, R1b",
        &[
            "router R1 via 10.1.0.50 same_tenant",
            "router R1b via 10.20.0.5 other_tenant",
            "row uses same_tenant",
        ],
    );
    assert!(
        !plan.anomalies[0].detail.contains("10.20.0.99"),
        "the dead route takes no part: {}",
        plan.anomalies[0].detail
    );
    assert_eq!(nonzero_fallbacks(&plan), [("nexthop_no_port", 1)]);
}

/// Nothing but guesses for 10.9.0.0/24: a nexthop on no attached subnet,
/// one no port holds, and a router with no way on. The row stays
/// `external`, each fallback is counted under its reason, and guesses do
/// not disagree with each other.
#[test]
fn fallback_only_destination_stays_external_and_counts_every_reason() {
    let mut c = pair();
    wire_pair(
        &mut c,
        &[
            ("10.9.0.0/24", "10.77.0.1"),
            ("10.9.0.0/24", "100.64.0.9"),
            ("10.9.0.0/24", "100.64.0.2"),
        ],
        &[],
    );
    let plan = c.plan();
    assert_rows(&plan, &pair_rows(&["t1 10.9.0.0/24 external"]));
    assert_eq!(lpm(&plan, "t1", "10.9.0.5").as_deref(), Some("external"));
    assert_eq!(anomaly_classes(&plan), ["dangling_route"]);
    assert_eq!(
        nonzero_fallbacks(&plan),
        [
            ("dangling_nexthop", 1),
            ("nexthop_no_port", 1),
            ("no_route", 1)
        ]
    );
}

/// t1 … t5 on one shared transit: R1 → R2, R2 has ECMP routes to R3 and
/// R4, both of which route to R5, which holds 10.5.0.0/24. Both branches
/// enter R5: with its own visited set each, a diamond is no cycle; with
/// its own hop count each, three hops fit a limit of three.
fn diamond() -> Cloud {
    let mut c = Cloud::default();
    c.projects(&["t1", "t2", "t3", "t4", "t5", "admin"]);
    c.shared_network("tr", "admin")
        .subnet("tr-s", "tr", "100.64.0.0/24", None);
    c.network("n5", "t5")
        .subnet("s5", "n5", "10.5.0.0/24", Some("10.5.0.1"));
    let tables: [&[(&str, &str)]; 5] = [
        &[("10.5.0.0/24", "100.64.0.2")],
        &[("10.5.0.0/24", "100.64.0.3"), ("10.5.0.0/24", "100.64.0.4")],
        &[("10.5.0.0/24", "100.64.0.5")],
        &[("10.5.0.0/24", "100.64.0.5")],
        &[],
    ];
    for (i, table) in tables.iter().enumerate() {
        let n = i + 1;
        let id = format!("R{n}");
        c.router(&id, &format!("t{n}"), None, table);
        c.iface(
            &id,
            &format!("fa:16:3e:00:0{n}:01"),
            "tr-s",
            &format!("100.64.0.{n}"),
        );
    }
    c.iface("R5", "fa:16:3e:00:05:02", "s5", "10.5.0.1");
    c
}

#[test]
fn ecmp_diamond_is_no_cycle_and_each_branch_counts_its_own_hops() {
    let plan = diamond().plan_with(PlanOptions { hop_limit: 3 });
    let mut want = with_base(&[
        "* 100.64.0.0/24 shared",
        "* 10.5.0.1/32 infra",
        "* 100.64.0.1/32 infra",
        "* 100.64.0.2/32 infra",
        "* 100.64.0.3/32 infra",
        "* 100.64.0.4/32 infra",
        "* 100.64.0.5/32 infra",
        "t5 10.5.0.0/24 same_tenant",
        "t5 10.5.0.1/32 infra",
    ]);
    let routed = [
        "t1 10.5.0.0/24 other_tenant",
        "t1 10.5.0.1/32 infra",
        "t2 10.5.0.0/24 other_tenant",
        "t2 10.5.0.1/32 infra",
        "t3 10.5.0.0/24 other_tenant",
        "t3 10.5.0.1/32 infra",
        "t4 10.5.0.0/24 other_tenant",
        "t4 10.5.0.1/32 infra",
    ];
    want.extend(routed);
    assert_rows(&plan, &want);
    assert!(plan.anomalies.is_empty(), "{:?}", plan.anomalies);
    assert!(nonzero_fallbacks(&plan).is_empty());

    // One hop less: both of R1's branches hit the limit (each reported with
    // its own path); R2's own route needs two hops and still resolves.
    let plan = diamond().plan_with(PlanOptions { hop_limit: 2 });
    assert_eq!(lpm(&plan, "t1", "10.5.0.9").as_deref(), Some("external"));
    assert_eq!(
        lpm(&plan, "t2", "10.5.0.9").as_deref(),
        Some("other_tenant")
    );
    assert_eq!(anomaly_classes(&plan), ["max_hops", "max_hops"]);
    for path in ["R1 -> R2 -> R3 -> R5", "R1 -> R2 -> R4 -> R5"] {
        assert!(
            plan.anomalies.iter().any(|a| a.detail.contains(path)),
            "{path}: {:?}",
            plan.anomalies
        );
    }
    assert_eq!(nonzero_fallbacks(&plan), [("max_hops", 2)]);
}
