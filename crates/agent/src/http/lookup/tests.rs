use super::*;
use crate::http::ui::{lookup_answer_text, prose};

pub(crate) fn mac(text: &str) -> Mac {
    text.parse().unwrap()
}

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

/// A trie row; tenant `*` is the global scope.
pub(crate) fn row(tenant: &str, prefix: &str, zone: Zone) -> TrieRow {
    TrieRow {
        tenant: if tenant == "*" {
            Scope::Global
        } else {
            Scope::Tenant(tenant.to_owned())
        },
        prefix: prefix.parse().unwrap(),
        zone,
    }
}

fn bound(m: &str, tenant: &str, amphora: bool) -> LiveBinding {
    LiveBinding::live(lachesis_planner::Binding {
        mac: mac(m),
        tenant: tenant.to_owned(),
        server: format!("server-{m}"),
        port: format!("port-{m}"),
        external_network: None,
        amphora,
    })
}

const VM_A: &str = "02:00:00:00:00:0a";
const VM_A2: &str = "02:00:00:00:00:1a";
const VM_B: &str = "02:00:00:00:00:0b";
const ROUTER: &str = "02:00:00:00:00:fe";

fn bindings() -> Vec<LiveBinding> {
    vec![
        bound(VM_A, "project-a", false),
        bound(VM_A2, "project-a", false),
        bound(VM_B, "project-b", false),
    ]
}

/// Global catch-alls and platform rows, tenant A's own subnets (v4, v6)
/// with their gateways re-emitted, and a tenant B subnet overlapping A's.
fn trie() -> Vec<TrieRow> {
    vec![
        row("*", "0.0.0.0/0", Zone::External),
        row("*", "100.64.0.0/24", Zone::Shared),
        row("*", "10.0.0.1/32", Zone::Infra),
        row("*", "::/0", Zone::External),
        row("*", "fd00:64::/64", Zone::Shared),
        row("project-a", "10.0.0.0/16", Zone::SameTenant),
        row("project-a", "10.0.5.0/24", Zone::OtherTenant),
        row("project-a", "10.0.5.1/32", Zone::Infra),
        row("project-a", "fd00:a::/48", Zone::SameTenant),
        row("project-a", "fd00:a:0:5::/64", Zone::OtherTenant),
        row("project-b", "192.168.0.0/16", Zone::SameTenant),
        row("project-b", "fd00:b::/48", Zone::SameTenant),
    ]
}

fn query(vm: &str, remote: &str) -> Query {
    Query {
        vm_mac: mac(vm),
        remote: ip(remote),
        peer_mac: None,
        local: None,
        direction: Direction::Tx,
    }
}

/// [`explain`], holding every sentence it produces — the JSON's reason
/// and caveats, the lookup page's answer — to sentences a space apart, so
/// each branch a test here takes is checked as it is taken.
fn explained(
    q: &Query,
    trie: &[TrieRow],
    bindings: &[LiveBinding],
    amphora_ips: &[AmphoraIp],
) -> Explanation {
    let e = explain(q, trie, bindings, amphora_ips);
    let what = format!("{q:?}");
    prose::assert_sentences_apart(&what, &e.reason);
    for caveat in &e.caveats {
        prose::assert_sentences_apart(&what, caveat);
    }
    prose::assert_sentences_apart(&what, &lookup_answer_text(&e, &routers()));
    e
}

fn run(q: &Query) -> Explanation {
    explained(q, &trie(), &bindings(), &[])
}

/// The `matched` prefixes of the trie steps, in order (`-` for no match).
fn trie_path(e: &Explanation) -> Vec<String> {
    e.steps
        .iter()
        .filter_map(|s| match s {
            Step::Trie {
                tenant, matched, ..
            } => Some(format!(
                "{tenant}:{}",
                matched
                    .as_ref()
                    .map_or("-".to_owned(), |r| r.prefix.to_string())
            )),
            _ => None,
        })
        .collect()
}

#[test]
fn an_unbound_vm_mac_is_a_miss_without_consulting_anything_else() {
    let q = Query {
        peer_mac: Some(mac(VM_B)),
        ..query("02:00:00:00:00:99", "8.8.8.8")
    };
    let e = run(&q);
    assert_eq!(e.zone, Zone::Miss);
    assert_eq!(e.reason, "the VM MAC has no binding");
    assert_eq!(e.steps.len(), 2, "{:?}", e.steps);
    assert!(matches!(&e.steps[1], Step::VmBinding { binding: None, .. }));
}

#[test]
fn a_group_destination_is_multicast_before_any_binding_is_read() {
    // On tx the destination is the peer; the VM MAC need not even be bound.
    let q = Query {
        peer_mac: Some(mac("01:00:5e:00:00:fb")),
        ..query("02:00:00:00:00:99", "224.0.0.251")
    };
    let e = run(&q);
    assert_eq!(e.zone, Zone::Multicast);
    assert_eq!(e.steps.len(), 1);
    // On rx the destination is the VM side of the swap.
    let q = Query {
        direction: Direction::Rx,
        ..query("33:33:00:00:00:01", "fe80::1")
    };
    assert_eq!(run(&q).zone, Zone::Multicast);
}

#[test]
fn on_rx_a_group_peer_is_the_source_and_does_not_gate() {
    let q = Query {
        peer_mac: Some(mac("01:00:5e:00:00:fb")),
        direction: Direction::Rx,
        ..query(VM_A, "8.8.8.8")
    };
    let e = run(&q);
    assert_eq!(e.zone, Zone::External);
    assert!(e.caveats.is_empty(), "{:?}", e.caveats);
}

#[test]
fn a_peer_of_the_same_tenant_is_same_tenant_without_the_trie() {
    // The trie would have said external: direct L2 never looks.
    let q = Query {
        peer_mac: Some(mac(VM_A2)),
        ..query(VM_A, "8.8.8.8")
    };
    let e = run(&q);
    assert_eq!(e.zone, Zone::SameTenant);
    assert!(trie_path(&e).is_empty());
    assert!(e.caveats.is_empty());
}

#[test]
fn a_peer_of_another_tenant_is_other_tenant_without_the_trie() {
    let q = Query {
        peer_mac: Some(mac(VM_B)),
        ..query(VM_A, "10.0.0.7")
    };
    let e = run(&q);
    assert_eq!(e.zone, Zone::OtherTenant);
    assert!(trie_path(&e).is_empty());
}

#[test]
fn an_unknown_peer_mac_goes_to_the_trie() {
    let q = Query {
        peer_mac: Some(mac(ROUTER)),
        ..query(VM_A, "10.0.0.7")
    };
    let e = run(&q);
    assert_eq!(e.zone, Zone::SameTenant);
    assert!(matches!(
        &e.steps[2],
        Step::PeerBinding {
            binding: None,
            mac: Some(_)
        }
    ));
    assert_eq!(trie_path(&e), ["project-a:10.0.0.0/16"]);
    // Only the omitted-peer caveats are about a missing parameter.
    assert!(e.caveats.is_empty());
}

#[test]
fn the_longest_prefix_wins_within_a_tenant_v4() {
    for (remote, zone, prefix) in [
        ("10.0.9.9", Zone::SameTenant, "10.0.0.0/16"),
        ("10.0.5.9", Zone::OtherTenant, "10.0.5.0/24"),
        ("10.0.5.1", Zone::Infra, "10.0.5.1/32"),
    ] {
        let e = run(&query(VM_A, remote));
        assert_eq!(e.zone, zone, "{remote}");
        assert_eq!(trie_path(&e), [format!("project-a:{prefix}")], "{remote}");
    }
    let e = run(&query(VM_A, "10.0.5.1"));
    let Step::Trie {
        containing,
        rows_in_scope,
        family,
        ..
    } = &e.steps[3]
    else {
        panic!("{:?}", e.steps)
    };
    assert_eq!(*family, "ipv4");
    assert_eq!(*rows_in_scope, 3, "the tenant's v4 rows only");
    let order: Vec<String> = containing.iter().map(|r| r.prefix.to_string()).collect();
    assert_eq!(order, ["10.0.5.1/32", "10.0.5.0/24", "10.0.0.0/16"]);
}

#[test]
fn the_longest_prefix_wins_within_a_tenant_v6() {
    for (remote, zone, prefix) in [
        ("fd00:a::9", Zone::SameTenant, "fd00:a::/48"),
        ("fd00:a:0:5::9", Zone::OtherTenant, "fd00:a:0:5::/64"),
    ] {
        let e = run(&query(VM_A, remote));
        assert_eq!(e.zone, zone, "{remote}");
        assert_eq!(trie_path(&e), [format!("project-a:{prefix}")], "{remote}");
    }
}

#[test]
fn tenant_rows_come_before_more_specific_global_rows() {
    // 10.0.0.1/32 is a global infra row, but tenant A's /16 holds the
    // address: the kernel never reaches tenant 0 (why §6.1 step 7 exists).
    let e = run(&query(VM_A, "10.0.0.1"));
    assert_eq!(e.zone, Zone::SameTenant);
    assert_eq!(trie_path(&e), ["project-a:10.0.0.0/16"]);
    // Tenant B has no row there: the global /32 answers.
    let e = run(&query(VM_B, "10.0.0.1"));
    assert_eq!(e.zone, Zone::Infra);
    assert_eq!(trie_path(&e), ["project-b:-", "*:10.0.0.1/32"]);
}

#[test]
fn the_global_rows_answer_when_the_tenant_has_none_v4_and_v6() {
    for (remote, zone, path) in [
        ("8.8.8.8", Zone::External, "*:0.0.0.0/0"),
        ("100.64.0.9", Zone::Shared, "*:100.64.0.0/24"),
        ("2001:db8::1", Zone::External, "*:::/0"),
        ("fd00:64::9", Zone::Shared, "*:fd00:64::/64"),
    ] {
        let e = run(&query(VM_A, remote));
        assert_eq!(e.zone, zone, "{remote}");
        assert_eq!(trie_path(&e), ["project-a:-", path], "{remote}");
        assert!(e.reason.contains("global rows"), "{}", e.reason);
    }
}

#[test]
fn another_tenants_rows_are_never_consulted() {
    // 192.168.0.0/16 is tenant B's; tenant A falls to the catch-all.
    let e = run(&query(VM_A, "192.168.1.1"));
    assert_eq!(e.zone, Zone::External);
    assert_eq!(trie_path(&e), ["project-a:-", "*:0.0.0.0/0"]);
}

#[test]
fn rows_of_the_other_family_are_not_consulted() {
    let v4_only = vec![row("*", "0.0.0.0/0", Zone::External)];
    let e = explained(&query(VM_A, "2001:db8::1"), &v4_only, &bindings(), &[]);
    assert_eq!(e.zone, Zone::Miss);
    assert!(e.reason.contains("catch-all"), "{}", e.reason);
    let Step::Trie {
        family,
        rows_in_scope,
        ..
    } = &e.steps[4]
    else {
        panic!("{:?}", e.steps)
    };
    assert_eq!((*family, *rows_in_scope), ("ipv6", 0));
}

#[test]
fn no_row_at_all_is_a_miss() {
    let e = explained(&query(VM_A, "8.8.8.8"), &[], &bindings(), &[]);
    assert_eq!(e.zone, Zone::Miss);
    assert_eq!(trie_path(&e), ["project-a:-", "*:-"]);
}

#[test]
fn omitted_peer_is_stated_as_assumptions() {
    let e = run(&query(VM_A, "8.8.8.8"));
    assert_eq!(e.caveats.len(), 2, "{:?}", e.caveats);
    assert!(e.caveats[0].contains("unicast"));
    assert!(e.caveats[1].contains("routed"));
}

fn amphora_world() -> (Vec<LiveBinding>, Vec<AmphoraIp>) {
    let bindings = vec![
        bound("02:00:00:00:00:a0", "lb-owner", true),
        bound(VM_A, "project-a", false),
        bound(VM_B, "project-b", false),
    ];
    let ips = vec![
        AmphoraIp {
            tenant: "lb-owner".to_owned(),
            address: ip("10.0.5.20"),
        },
        AmphoraIp {
            tenant: "lb-owner".to_owned(),
            address: ip("fd00:a:0:5::20"),
        },
    ];
    (bindings, ips)
}

#[test]
fn an_amphora_vm_talking_from_its_listed_address_is_infra() {
    let (b, ips) = amphora_world();
    for (local, remote, peer) in [
        // Segment 2 to a member VM on the same L2: overrides other_tenant.
        ("10.0.5.20", "10.0.5.9", Some(VM_A)),
        // Routed segment 2: overrides the trie's answer.
        ("10.0.5.20", "8.8.8.8", None),
        ("fd00:a:0:5::20", "fd00:a::9", None),
        // The kernel keys IPv4 as ::ffff:a.b.c.d: the mapped form matches.
        ("::ffff:10.0.5.20", "::ffff:8.8.8.8", None),
    ] {
        let q = Query {
            vm_mac: mac("02:00:00:00:00:a0"),
            remote: ip(remote),
            peer_mac: peer.map(mac),
            local: Some(ip(local)),
            direction: Direction::Tx,
        };
        let e = explained(&q, &trie(), &b, &ips);
        assert_eq!(e.zone, Zone::Infra, "{local} → {remote}");
        assert!(
            matches!(
                e.steps.last(),
                Some(Step::Amphora {
                    endpoint: "vm",
                    listed: Some(true),
                    ..
                })
            ),
            "{:?}",
            e.steps
        );
    }
}

#[test]
fn an_amphora_vm_on_another_address_keeps_its_zone() {
    // Segment 1 (the VIP, not in amphora_ips) keeps the client's zone.
    let (b, ips) = amphora_world();
    let q = Query {
        vm_mac: mac("02:00:00:00:00:a0"),
        remote: ip("8.8.8.8"),
        peer_mac: Some(mac(ROUTER)),
        local: Some(ip("10.0.5.100")),
        direction: Direction::Tx,
    };
    let e = explained(&q, &trie(), &b, &ips);
    assert_eq!(e.zone, Zone::External);
    assert!(matches!(
        e.steps.last(),
        Some(Step::Amphora {
            listed: Some(false),
            ..
        })
    ));
    // Without `local` the check cannot run, and the answer says so.
    let e = explained(&Query { local: None, ..q }, &trie(), &b, &ips);
    assert_eq!(e.zone, Zone::External);
    assert!(matches!(
        e.steps.last(),
        Some(Step::Amphora {
            listed: None,
            address: None,
            ..
        })
    ));
    assert!(e
        .caveats
        .iter()
        .any(|c| c.contains("segment 2 not checked")));
}

#[test]
fn an_amphora_peer_is_checked_under_the_peers_tenant_with_the_remote_address() {
    let (b, mut ips) = amphora_world();
    let q = Query {
        vm_mac: mac(VM_B),
        remote: ip("10.0.5.20"),
        peer_mac: Some(mac("02:00:00:00:00:a0")),
        local: None,
        direction: Direction::Rx,
    };
    let e = explained(&q, &trie(), &b, &ips);
    assert_eq!(e.zone, Zone::Infra);
    assert!(matches!(
        e.steps.last(),
        Some(Step::Amphora { endpoint: "peer", listed: Some(true), tenant, .. }) if tenant == "lb-owner"
    ));
    // The same address listed under another tenant does not count.
    for a in &mut ips {
        "project-b".clone_into(&mut a.tenant);
    }
    let e = explained(&q, &trie(), &b, &ips);
    assert_eq!(e.zone, Zone::OtherTenant);
}

#[test]
fn a_ghost_binding_still_classifies_and_is_shown_as_one() {
    let mut b = bindings();
    b[0].ghost = true;
    let e = explained(&query(VM_A, "10.0.9.9"), &trie(), &b, &[]);
    assert_eq!(e.zone, Zone::SameTenant);
    assert!(matches!(&e.steps[1], Step::VmBinding { binding: Some(l), .. } if l.ghost));
}

#[test]
fn parses_every_parameter() {
    let q = Query::parse(Some(
        "mac=02-00-00-00-00-0A&ip=2001:db8::1&peer=02:00:00:00:00:fe&local=10.0.0.2&direction=rx",
    ))
    .unwrap();
    assert_eq!(
        q,
        Query {
            vm_mac: mac(VM_A),
            remote: ip("2001:db8::1"),
            peer_mac: Some(mac(ROUTER)),
            local: Some(ip("10.0.0.2")),
            direction: Direction::Rx,
        }
    );
    let q = Query::parse(Some("ip=8.8.8.8&mac=02:00:00:00:00:0a")).unwrap();
    assert_eq!(q, query(VM_A, "8.8.8.8"));
}

/// `(name, problem, a piece of the expected form)` of every problem
/// `Query::parse` finds in `text`.
fn parse_problems(text: Option<&str>) -> Vec<(String, String, String)> {
    Query::parse(text).map_or_else(
        |bad| {
            bad.each()
                .iter()
                .map(|b| (b.name.clone(), b.problem.clone(), b.expected.clone()))
                .collect()
        },
        |q| panic!("{text:?} parsed as {q:?}"),
    )
}

#[test]
fn bad_input_names_the_parameter_and_the_expected_form() {
    const GOOD: &str = "mac=02:00:00:00:00:0a&ip=8.8.8.8";
    for (text, name, form) in [
        (Some("ip=8.8.8.8".to_owned()), "mac", "MAC address"),
        (
            Some("mac=02:00:00:00:00&ip=8.8.8.8".to_owned()),
            "mac",
            "six hex octets",
        ),
        (
            Some("mac=02:00:00:00:00:0a".to_owned()),
            "ip",
            "IPv4 or IPv6",
        ),
        (
            Some("mac=02:00:00:00:00:0a&ip=10.0.0.0/8".to_owned()),
            "ip",
            "IPv4 or IPv6",
        ),
        (Some(format!("{GOOD}&peer=x")), "peer", "MAC address"),
        (Some(format!("{GOOD}&local=x")), "local", "IPv4 or IPv6"),
        (Some(format!("{GOOD}&direction=in")), "direction", "tx"),
        (Some(format!("{GOOD}&zone=x")), "zone", "mac, ip, peer"),
        (Some(format!("{GOOD}&ip=1.1.1.1")), "ip", "at most once"),
    ] {
        let bad = parse_problems(text.as_deref());
        assert_eq!(bad.len(), 1, "{text:?}: {bad:?}");
        assert_eq!(bad[0].0, name, "{text:?}");
        assert!(bad[0].2.contains(form), "{text:?}: {bad:?}");
    }
}

#[test]
fn every_bad_parameter_is_reported_at_once() {
    let names = |text: Option<&str>| -> Vec<String> {
        parse_problems(text).into_iter().map(|(n, ..)| n).collect()
    };
    // Both required ones missing.
    assert_eq!(names(None), ["mac", "ip"]);
    assert_eq!(names(Some("")), ["mac", "ip"]);
    // Unknown, given twice, invalid and missing, all in one answer:
    // the query's own problems first, then each value in reading order.
    let bad = parse_problems(Some(
        "zone=x&peer=02:00:00:00:00:fe&peer=02:00:00:00:00:fd&mac=zz&local=x&direction=up",
    ));
    let problems: Vec<(&str, &str)> = bad
        .iter()
        .map(|(n, p, _)| (n.as_str(), p.as_str()))
        .collect();
    assert_eq!(
        problems,
        [
            ("zone", "unknown parameter"),
            ("peer", "given twice"),
            ("mac", "\"zz\" is not valid"),
            ("ip", "missing"),
            ("local", "\"x\" is not valid"),
            ("direction", "\"up\" is not valid"),
        ]
    );
    for (name, _, expected) in &bad {
        assert!(!expected.is_empty(), "{name} has no expected form");
    }
    // Every optional one invalid beside good required ones.
    assert_eq!(
        names(Some(
            "mac=02:00:00:00:00:0a&ip=8.8.8.8&peer=1&local=2&direction=3"
        )),
        ["peer", "local", "direction"]
    );
    // Each invalid required one with its own form.
    let bad = parse_problems(Some("mac=1&ip=2"));
    assert_eq!(bad.len(), 2, "{bad:?}");
    assert!(bad[0].2.contains("MAC address"), "{bad:?}");
    assert!(bad[1].2.contains("IPv4 or IPv6"), "{bad:?}");
}

#[test]
fn the_json_names_steps_zones_and_macs_in_text() {
    let q = Query {
        peer_mac: Some(mac(ROUTER)),
        ..query(VM_A, "10.0.5.1")
    };
    let v = serde_json::to_value(run(&q)).unwrap();
    assert_eq!(v["zone"], "infra");
    assert_eq!(v["query"]["mac"], VM_A);
    assert_eq!(v["query"]["peer"], ROUTER);
    assert_eq!(v["query"]["local"], serde_json::Value::Null);
    assert_eq!(v["query"]["direction"], "tx");
    let steps: Vec<&str> = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step"].as_str().unwrap())
        .collect();
    assert_eq!(
        steps,
        ["multicast_gate", "vm_binding", "peer_binding", "trie"]
    );
    assert_eq!(v["steps"][1]["binding"]["tenant"], "project-a");
    assert_eq!(v["steps"][1]["binding"]["ghost"], false);
    assert_eq!(v["steps"][3]["tenant"], "project-a");
    assert_eq!(
        v["steps"][3]["matched"],
        serde_json::json!({"tenant": "project-a", "prefix": "10.0.5.1/32", "zone": "infra"})
    );
}

fn routers() -> Vec<RouterMac> {
    vec![
        RouterMac {
            mac: mac(ROUTER),
            router: "router-1".to_owned(),
            external_network: Some("public".to_owned()),
        },
        RouterMac {
            mac: mac("02:00:00:00:00:fd"),
            router: "router-2".to_owned(),
            external_network: None,
        },
    ]
}

#[test]
fn the_external_network_follows_the_ledgers_rules_in_order() {
    let mut b = bindings();
    b[0].binding.external_network = Some("fip-net".to_owned());
    let label = |q: &Query| external_network(&explained(q, &trie(), &b, &[]), &routers());
    // Rule 1: the router MAC with a gateway beats the VM's fallback.
    let via = |peer: &str| Query {
        peer_mac: Some(mac(peer)),
        ..query(VM_A, "8.8.8.8")
    };
    assert_eq!(
        label(&via(ROUTER)),
        ExternalAttribution {
            label: "public".to_owned(),
            rule: ExternalRule::RouterMac {
                router: "router-1".to_owned()
            },
        }
    );
    // A router without a gateway, or no peer at all: the VM's fallback.
    for q in [via("02:00:00:00:00:fd"), query(VM_A, "8.8.8.8")] {
        assert_eq!(
            label(&q),
            ExternalAttribution {
                label: "fip-net".to_owned(),
                rule: ExternalRule::VmFallback,
            },
            "{q:?}"
        );
    }
    // Neither: `none`.
    assert_eq!(
        label(&query(VM_A2, "8.8.8.8")),
        ExternalAttribution {
            label: "none".to_owned(),
            rule: ExternalRule::NoRule,
        }
    );
    // Only zone external carries a label, whatever the router.
    let e = explained(&via(ROUTER), &trie(), &b, &[]);
    assert_eq!(e.zone, Zone::External);
    let internal = Query {
        remote: ip("10.0.9.9"),
        ..via(ROUTER)
    };
    assert_eq!(
        label(&internal),
        ExternalAttribution {
            label: "none".to_owned(),
            rule: ExternalRule::NotExternal,
        }
    );
    // An unbound VM is a miss: no label either.
    assert_eq!(
        label(&query("02:00:00:00:00:99", "8.8.8.8")).rule,
        ExternalRule::NotExternal
    );
}
