//! Tolerant parsing (issue 3, item 1) and the binding rules of DESIGN §6.3.

use crate::common;

use common::{anomaly_classes, Cloud};
use lachesis_planner::snapshot::SkipReason;
use lachesis_planner::{
    parse_snapshot, plan, ApiBodies, OptionalBody, PlanOptions, Resource, SnapshotParser, Sources,
};
use serde_json::json;

fn bodies(
    networks: serde_json::Value,
    subnets: serde_json::Value,
    ports: serde_json::Value,
) -> ApiBodies {
    ApiBodies {
        networks,
        subnets,
        ports,
        routers: json!({"routers": []}),
        floatingips: json!({"floatingips": []}),
        projects: json!({"projects": [{"id": "p1", "name": "one"}]}),
        servers: OptionalBody::NotDeployed,
        loadbalancers: OptionalBody::NotDeployed,
        amphorae: OptionalBody::NotDeployed,
    }
}

// One realistic body exercising every tolerance rule reads better whole.
#[expect(
    clippy::too_many_lines,
    reason = "one table of cases, read top to bottom"
)]
#[test]
fn tolerates_what_real_clouds_send_and_counts_what_it_drops() {
    let b = bodies(
        json!({"networks": [
            {"id": "n1", "tenant_id": "p1", "name": "", "shared": false, "router:external": false, "qos_policy_id": null},
            {"id": "n2", "project_id": "", "tenant_id": "p1"},
            {"name": "no id"},
            "not an object"
        ]}),
        json!({"subnets": [
            {"id": "s4", "network_id": "n1", "cidr": "10.0.0.0/24", "gateway_ip": null, "ip_version": 4},
            {"id": "s6", "network_id": "n1", "cidr": "2001:DB8::/64", "gateway_ip": "2001:db8::1", "ip_version": 6,
             "ipv6_ra_mode": "slaac"},
            {"id": "bad-cidr", "network_id": "n1", "cidr": "10.0.0.0/33", "ip_version": 4},
            {"id": "bad-version", "network_id": "n1", "cidr": "10.0.1.0/24", "ip_version": 6},
            {"id": "bad-gw", "network_id": "n1", "cidr": "10.0.2.0/24", "gateway_ip": "10.0.2.x"}
        ]}),
        json!({"ports": [
            {"id": "vm", "network_id": "n1", "tenant_id": "p1", "mac_address": "FA:16:3E:00:00:01",
             "device_owner": "compute:az-1", "device_id": "srv",
             "fixed_ips": [{"subnet_id": "s4", "ip_address": "10.0.0.5"}, {"subnet_id": "s4", "ip_address": "nope"}],
             "allowed_address_pairs": [{"ip_address": "10.0.0.0/28", "mac_address": "fa:16:3e:00:00:aa"},
                                        {"ip_address": "bad"}]},
            {"id": "bad-mac", "network_id": "n1", "project_id": "p1", "mac_address": "zz:16:3e:00:00:01",
             "device_owner": "compute:nova", "device_id": "srv2", "fixed_ips": []},
            {"id": "vm", "network_id": "n1", "project_id": "p1", "mac_address": "fa:16:3e:00:00:09",
             "device_owner": "compute:nova", "device_id": "dup", "fixed_ips": []}
        ]}),
    );
    let (snap, report) = parse_snapshot(&b).expect("right top-level shape");
    assert_eq!(snap.networks.len(), 2);
    assert_eq!(snap.networks[0].project, "p1", "tenant_id fallback");
    assert_eq!(
        snap.networks[1].project, "p1",
        "empty project_id falls back to tenant_id"
    );
    assert_eq!(
        snap.networks[0].label(),
        "n1",
        "nameless network labelled by id"
    );
    let subnets: Vec<(&str, String, Option<String>)> = snap
        .subnets
        .iter()
        .map(|s| {
            (
                s.id.as_str(),
                s.cidr.to_string(),
                s.gateway.map(|g| g.to_string()),
            )
        })
        .collect();
    assert_eq!(
        subnets,
        [
            ("bad-gw", "10.0.2.0/24".to_owned(), None),
            ("s4", "10.0.0.0/24".to_owned(), None),
            (
                "s6",
                "2001:db8::/64".to_owned(),
                Some("2001:db8::1".to_owned())
            ),
        ]
    );
    let ports: Vec<(&str, Option<String>, usize, usize)> = snap
        .ports
        .iter()
        .map(|p| {
            (
                p.id.as_str(),
                p.mac.map(|m| m.to_string()),
                p.fixed_ips.len(),
                p.allowed_address_pairs.len(),
            )
        })
        .collect();
    assert_eq!(
        ports,
        [
            ("bad-mac", None, 0, 0),
            ("vm", Some("fa:16:3e:00:00:01".to_owned()), 1, 1)
        ]
    );

    let counts = report.counts();
    let get = |list: &str, reason: &str| {
        counts
            .get(&(list_name(list), reason.to_owned()))
            .copied()
            .unwrap_or(0)
    };
    assert_eq!(get("networks", "missing_id"), 1);
    assert_eq!(get("networks", "not_an_object"), 1);
    assert_eq!(get("subnets", "bad cidr"), 1);
    assert_eq!(get("subnets", "bad ip_version"), 1);
    assert_eq!(get("subnets", "bad gateway_ip"), 1);
    assert_eq!(get("ports", "bad fixed_ips[]"), 1);
    assert_eq!(get("ports", "bad allowed_address_pairs[]"), 1);
    assert_eq!(get("ports", "bad mac_address"), 1);
    assert_eq!(get("ports", "duplicate_id"), 1);
    assert_eq!(report.skipped.len(), 9, "{:#?}", report.skipped);
    let bad_mac = report
        .skipped
        .iter()
        .find(|s| s.id.as_deref() == Some("bad-mac"))
        .unwrap();
    assert!(!bad_mac.whole_entry);
    assert!(
        matches!(&bad_mac.reason, SkipReason::BadValue { value, .. } if value == "zz:16:3e:00:00:01")
    );

    // The port without a MAC is not bound; the good one and its pair MAC are.
    let p = plan(&snap, &PlanOptions::default());
    let macs: Vec<String> = p
        .bindings
        .iter()
        .map(|b| format!("{} {}", b.mac, b.port))
        .collect();
    assert_eq!(macs, ["fa:16:3e:00:00:01 vm", "fa:16:3e:00:00:aa vm"]);
}

fn list_name(s: &str) -> &'static str {
    ["networks", "subnets", "ports"]
        .into_iter()
        .find(|n| *n == s)
        .unwrap()
}

#[test]
fn wrong_top_level_shape_is_an_error_naming_the_body() {
    let b = bodies(
        json!({"networks": {}}),
        json!({"subnets": []}),
        json!({"ports": []}),
    );
    let err = parse_snapshot(&b).unwrap_err();
    assert_eq!(err.body, "networks");
    assert!(
        err.to_string()
            .contains("expected a JSON object with an array under \"networks\""),
        "{err}"
    );
    let b = bodies(json!({"networks": []}), json!({"subnets": []}), json!([]));
    assert_eq!(parse_snapshot(&b).unwrap_err().body, "ports");
    let mut b = bodies(
        json!({"networks": []}),
        json!({"subnets": []}),
        json!({"ports": []}),
    );
    b.amphorae = OptionalBody::Fetched(json!({"amphora": []}));
    assert_eq!(parse_snapshot(&b).unwrap_err().body, "amphorae");
}

/// Every field read with the wrong JSON type is reported with the entry's
/// id (or index) and the field, and read as absent — never silently.
#[test]
fn wrong_typed_fields_are_reported_with_entry_and_field() {
    let mut b = bodies(
        json!({"networks": [
            {"id": "n1", "project_id": 7, "tenant_id": "p1", "shared": "yes", "name": ["x"]},
            {"name": "no id"}
        ]}),
        json!({"subnets": [
            {"id": "s1", "network_id": "n1", "project_id": "p1", "cidr": "10.0.0.0/24", "ip_version": "4"}
        ]}),
        json!({"ports": [
            {"id": "str-fips", "network_id": "n1", "project_id": "p1", "mac_address": "fa:16:3e:00:00:01",
             "device_owner": "compute:nova", "device_id": "srv", "fixed_ips": "10.0.0.5"},
            {"id": "num-owner", "network_id": "n1", "project_id": "p1", "mac_address": "fa:16:3e:00:00:02",
             "device_owner": 42, "device_id": "srv",
             "fixed_ips": [{"subnet_id": "s1", "ip_address": "10.0.0.6"}],
             "trunk_details": {"sub_ports": [{"port_id": 5}]}},
            {"id": 99, "network_id": "n1"}
        ]}),
    );
    b.routers = json!({"routers": [
        {"id": "r1", "project_id": "p1", "routes": {"destination": "10.9.0.0/16"},
         "external_gateway_info": "n-ext"}
    ]});
    b.floatingips = json!({"floatingips": [
        {"id": "f1", "floating_network_id": "n-ext", "port_id": 12}
    ]});
    let (snap, report) = parse_snapshot(&b).expect("right top-level shape");
    let mut got: Vec<(String, Option<&str>, bool)> = report
        .skipped
        .iter()
        .map(|s| {
            let entry = s.id.clone().or(s.index.map(|i| format!("#{i}"))).unwrap();
            (
                format!("{} {entry}", s.list),
                s.reason.field(),
                s.whole_entry,
            )
        })
        .collect();
    let want: Vec<(String, Option<&str>, bool)> = [
        ("floatingips f1", "port_id", false),
        ("networks #1", "id", true),
        ("networks n1", "name", false),
        ("networks n1", "project_id", false),
        ("networks n1", "shared", false),
        ("ports #2", "id", true),
        ("ports num-owner", "device_owner", false),
        ("ports num-owner", "trunk_details.sub_ports[]", false),
        ("ports str-fips", "fixed_ips", false),
        ("routers r1", "external_gateway_info", false),
        ("routers r1", "routes", false),
        ("subnets s1", "ip_version", true),
    ]
    .into_iter()
    .map(|(e, f, w)| (e.to_owned(), Some(f), w))
    .collect();
    got.sort();
    assert_eq!(got, want, "{:#?}", report.skipped);
    // What was read instead: absent, never a guess.
    assert_eq!(snap.networks[0].project, "p1", "falls back to tenant_id");
    assert!(!snap.networks[0].shared);
    let str_fips = snap.ports.iter().find(|p| p.id == "str-fips").unwrap();
    assert!(str_fips.fixed_ips.is_empty());
    let num_owner = snap.ports.iter().find(|p| p.id == "num-owner").unwrap();
    assert_eq!(num_owner.device_owner, "");
    assert_eq!(snap.floating_ips[0].port_id, None);
    // The JSON form names the same entry and field.
    let json = serde_json::to_value(&report).unwrap();
    let fips = json["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "str-fips")
        .unwrap();
    assert_eq!(fips["field"], "fixed_ips");
    assert_eq!(fips["reason"], "bad_value");
    assert_eq!(fips["value"], "10.0.0.5");
    assert_eq!(fips["dropped"], "part");
    assert_eq!(fips["index"], serde_json::Value::Null);
}

#[test]
fn duplicate_ids_keep_the_same_entry_in_any_order() {
    let a = json!({"id": "n1", "project_id": "p1", "name": "a"});
    let b = json!({"id": "n1", "project_id": "p1", "name": "b"});
    let one = bodies(
        json!({"networks": [a.clone(), b.clone()]}),
        json!({"subnets": []}),
        json!({"ports": []}),
    );
    let two = bodies(
        json!({"networks": [b, a]}),
        json!({"subnets": []}),
        json!({"ports": []}),
    );
    assert_eq!(parse_snapshot(&one).unwrap(), parse_snapshot(&two).unwrap());
}

#[test]
fn pages_report_by_index_in_the_whole_list_and_keep_one_entry_per_id() {
    let mut parser = SnapshotParser::new();
    parser.page(
        Resource::Networks,
        &[json!({"id": "n1", "name": "b"}), json!({"id": "n2"})],
    );
    parser.page(
        Resource::Networks,
        &[json!({"name": "no id"}), json!({"id": "n1", "name": "a"})],
    );
    let (snap, report) = parser.finish(Sources::default());
    let kept: Vec<_> = snap
        .networks
        .iter()
        .map(|n| (n.id.as_str(), n.name.as_deref()))
        .collect();
    // Of the two n1, the one whose parsed form sorts first ("a" < "b").
    assert_eq!(kept, [("n1", Some("a")), ("n2", None)]);
    let skipped: Vec<_> = report
        .skipped
        .iter()
        .map(|s| (s.id.as_deref(), s.index, s.reason.kind()))
        .collect();
    assert_eq!(
        skipped,
        [
            (None, Some(2), "missing_id"),
            (Some("n1"), None, "duplicate_id")
        ]
    );
}

/// A small cloud for the binding rules.
fn bindings_cloud() -> Cloud {
    let mut c = Cloud::default();
    c.projects(&["t1", "t2"]);
    c.network("n1", "t1")
        .subnet("s1", "n1", "10.1.0.0/24", Some("10.1.0.1"));
    c
}

#[test]
fn admitted_ports_and_excluded_ones() {
    let mut c = bindings_cloud();
    c.vm("vm", "t1", "fa:16:3e:00:00:01", "srv", "s1", "10.1.0.10");
    c.port(
        "dhcp",
        "t1",
        "fa:16:3e:00:00:02",
        "network:dhcp",
        "h",
        &[("s1", "10.1.0.2")],
    );
    c.port(
        "dvr",
        "t1",
        "fa:16:3e:00:00:03",
        "network:distributed",
        "h",
        &[("s1", "10.1.0.3")],
    );
    c.port(
        "fipport",
        "t1",
        "fa:16:3e:00:00:04",
        "network:floatingip",
        "f",
        &[("s1", "10.1.0.4")],
    );
    c.port(
        "unbound",
        "t1",
        "fa:16:3e:00:00:05",
        "",
        "",
        &[("s1", "10.1.0.5")],
    );
    c.port(
        "weird",
        "t1",
        "fa:16:3e:00:00:06",
        "acme:widget",
        "w",
        &[("s1", "10.1.0.6")],
    );
    c.vm(
        "ghost-project",
        "t9",
        "fa:16:3e:00:00:07",
        "srv9",
        "s1",
        "10.1.0.7",
    );
    let plan = c.plan();
    let ports: Vec<&str> = plan.bindings.iter().map(|b| b.port.as_str()).collect();
    assert_eq!(ports, ["vm"]);
    assert_eq!(
        anomaly_classes(&plan),
        ["unknown_device_owner", "unknown_project"]
    );
    assert!(plan.anomalies[0].detail.contains("acme:widget"));
    assert!(plan.anomalies[1].detail.contains("t9"));
}

#[test]
fn vrrp_pair_mac_binds_once_like_its_owning_port() {
    let mut c = bindings_cloud();
    let vip = json!([{"ip_address": "10.1.0.100", "mac_address": "00:00:5e:00:01:01"}]);
    c.vm("ka1", "t1", "fa:16:3e:00:00:01", "srv1", "s1", "10.1.0.11")["allowed_address_pairs"] =
        vip.clone();
    c.vm("ka2", "t1", "fa:16:3e:00:00:02", "srv2", "s1", "10.1.0.12")["allowed_address_pairs"] =
        vip;
    let plan = c.plan();
    let rows: Vec<String> = plan
        .bindings
        .iter()
        .map(|b| format!("{} {} {} {}", b.mac, b.tenant, b.server, b.port))
        .collect();
    assert_eq!(
        rows,
        [
            "00:00:5e:00:01:01 t1 srv1 ka1",
            "fa:16:3e:00:00:01 t1 srv1 ka1",
            "fa:16:3e:00:00:02 t1 srv2 ka2",
        ]
    );
    assert!(
        plan.anomalies.is_empty(),
        "same project: no conflict to report"
    );
}

#[test]
fn a_mac_claimed_by_two_projects_is_reported() {
    let mut c = bindings_cloud();
    c.network("n2", "t2")
        .subnet("s2", "n2", "10.2.0.0/24", None);
    c.vm("a", "t1", "fa:16:3e:00:00:01", "srv1", "s1", "10.1.0.11");
    c.vm("b", "t2", "fa:16:3e:00:00:01", "srv2", "s2", "10.2.0.11");
    let plan = c.plan();
    assert_eq!(plan.bindings.len(), 1);
    assert_eq!(plan.bindings[0].port, "a");
    assert_eq!(anomaly_classes(&plan), ["mac_conflict"]);
}

#[test]
fn trunk_subports_bind_to_the_parent_server() {
    let mut c = bindings_cloud();
    c.network("vlan", "t1")
        .subnet("v-s", "vlan", "10.3.0.0/24", None);
    c.vm(
        "parent",
        "t1",
        "fa:16:3e:00:00:01",
        "srv1",
        "s1",
        "10.1.0.11",
    )["trunk_details"] = json!({
        "trunk_id": "trunk1",
        "sub_ports": [
            {"port_id": "sub1", "segmentation_type": "vlan", "segmentation_id": 101, "mac_address": "fa:16:3e:00:00:11"},
            {"port_id": "sub2", "segmentation_type": "vlan", "segmentation_id": 102, "mac_address": "fa:16:3e:00:00:01"}
        ]
    });
    c.port(
        "sub1",
        "t1",
        "fa:16:3e:00:00:11",
        "trunk:subport",
        "trunk1",
        &[("v-s", "10.3.0.11")],
    );
    c.port(
        "sub2",
        "t1",
        "fa:16:3e:00:00:01",
        "trunk:subport",
        "trunk1",
        &[("v-s", "10.3.0.12")],
    );
    c.port(
        "orphan",
        "t1",
        "fa:16:3e:00:00:22",
        "trunk:subport",
        "trunk9",
        &[("v-s", "10.3.0.13")],
    );
    let plan = c.plan();
    let rows: Vec<String> = plan
        .bindings
        .iter()
        .map(|b| format!("{} {} {}", b.mac, b.server, b.port))
        .collect();
    assert_eq!(
        rows,
        [
            "fa:16:3e:00:00:01 srv1 parent",
            "fa:16:3e:00:00:11 srv1 sub1",
            "fa:16:3e:00:00:22 trunk9 orphan"
        ]
    );
    assert_eq!(anomaly_classes(&plan), ["trunk_subports", "trunk_subports"]);
    assert!(plan
        .anomalies
        .iter()
        .any(|a| a.detail.contains("sub2") && a.detail.contains("parent")));
    assert!(plan.anomalies.iter().any(|a| a.detail.contains("orphan")));
}

#[test]
fn plan_json_round_trips() {
    let mut c = bindings_cloud();
    c.vm("vm", "t1", "fa:16:3e:00:00:01", "srv", "s1", "10.1.0.10");
    let plan = c.plan();
    let back: lachesis_planner::Plan = serde_json::from_str(&plan.to_json()).unwrap();
    assert_eq!(back, plan);
}

/// A plan stored before the `sources` key existed (e.g. in a state file)
/// still reads back, every list `absent`; the key is printed last.
#[test]
fn plan_without_sources_key_reads_back_as_absent() {
    let mut c = bindings_cloud();
    c.lbs = Some(vec![]);
    c.amphorae = Some(vec![]);
    let plan = c.plan();
    let text = plan.to_json();
    let at = |key: &str| text.find(&format!("\n  \"{key}\": ")).unwrap();
    assert!(at("route_fallbacks") < at("sources"), "{text}");
    let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        json["sources"],
        json!({"servers": "absent", "loadbalancers": "ok", "amphorae": "ok"})
    );
    json.as_object_mut().unwrap().remove("sources");
    let back: lachesis_planner::Plan = serde_json::from_value(json).unwrap();
    assert_eq!(back.sources, lachesis_planner::Sources::default());
    assert_eq!(
        back.sources.amphorae,
        lachesis_planner::SourceStatus::Absent
    );
    assert_eq!(back.trie, plan.trie);
}

/// DESIGN §4.2: router, DHCP and gateway MACs are never in `endpoints`.
/// Neutron only enforces MAC uniqueness per network, and an address pair may
/// name any MAC, so a VM port can claim one; binding it would make the
/// kernel's direct-L2 shortcut bill routed (e.g. internet) traffic as
/// tenant-to-tenant. Every kind of claim on a platform MAC is dropped.
fn platform_mac_claims() -> Cloud {
    let mut c = bindings_cloud();
    c.network("n2", "t2")
        .subnet("s2", "n2", "10.2.0.0/24", None);
    c.external_network("ext", "public")
        .subnet("ext-s", "ext", "203.0.113.0/24", None);
    let platform = [
        (
            "rif",
            "network:router_interface",
            "fa:16:3e:00:01:01",
            "s1",
            "10.1.0.1",
        ),
        (
            "dhcp",
            "network:dhcp",
            "fa:16:3e:00:01:02",
            "s1",
            "10.1.0.2",
        ),
        (
            "dvr",
            "network:distributed",
            "fa:16:3e:00:01:03",
            "s1",
            "10.1.0.3",
        ),
        (
            "gw",
            "network:router_gateway",
            "fa:16:3e:00:01:04",
            "ext-s",
            "203.0.113.4",
        ),
        (
            "fip",
            "network:floatingip",
            "fa:16:3e:00:01:05",
            "ext-s",
            "203.0.113.5",
        ),
    ];
    for (id, owner, mac, subnet, ip) in platform {
        c.port(id, "", mac, owner, "dev", &[(subnet, ip)]);
    }
    // Own MAC equal to the router interface's (another network: allowed).
    c.vm("own", "t2", "fa:16:3e:00:01:01", "srv2", "s2", "10.2.0.10");
    // Address pairs naming the DHCP, gateway and floating-IP MACs.
    c.vm(
        "pairs",
        "t1",
        "fa:16:3e:00:00:10",
        "srv1",
        "s1",
        "10.1.0.10",
    )["allowed_address_pairs"] = json!([
        {"ip_address": "10.1.0.200", "mac_address": "fa:16:3e:00:01:02"},
        {"ip_address": "10.1.0.201", "mac_address": "fa:16:3e:00:01:04"},
        {"ip_address": "10.1.0.202", "mac_address": "fa:16:3e:00:01:05"},
    ]);
    // A trunk subport carrying the distributed port's MAC.
    c.vm(
        "parent",
        "t1",
        "fa:16:3e:00:00:20",
        "srv3",
        "s1",
        "10.1.0.20",
    )["trunk_details"] =
        json!({"trunk_id": "tr", "sub_ports": [{"port_id": "sub", "segmentation_id": 10}]});
    c.port(
        "sub",
        "t2",
        "fa:16:3e:00:01:03",
        "trunk:subport",
        "tr",
        &[("s2", "10.2.0.30")],
    );
    c
}

#[test]
fn no_claim_binds_a_platform_mac() {
    let plan = platform_mac_claims().plan();
    let bound: Vec<String> = plan
        .bindings
        .iter()
        .map(|b| format!("{} {}", b.mac, b.port))
        .collect();
    assert_eq!(
        bound,
        ["fa:16:3e:00:00:10 pairs", "fa:16:3e:00:00:20 parent"],
        "only the VMs' own non-platform MACs are bound"
    );
    assert_eq!(anomaly_classes(&plan), ["mac_conflict"; 5]);
    for (port, mac, platform_port) in [
        ("own", "fa:16:3e:00:01:01", "rif"),
        ("pairs", "fa:16:3e:00:01:02", "dhcp"),
        ("sub", "fa:16:3e:00:01:03", "dvr"),
        ("pairs", "fa:16:3e:00:01:04", "gw"),
        ("pairs", "fa:16:3e:00:01:05", "fip"),
    ] {
        assert!(
            plan.anomalies
                .iter()
                .any(|a| a.detail.contains(&format!("port {port} "))
                    && a.detail.contains(mac)
                    && a.detail.contains(&format!("port {platform_port} "))),
            "no anomaly naming {port} and {mac}: {:#?}",
            plan.anomalies
        );
    }
}
