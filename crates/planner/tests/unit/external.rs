//! DESIGN §6.4: external-network labels, and the reconcile's view of a
//! re-gatewayed router.

use crate::common;

use common::{anomaly_classes, Cloud};
use lachesis_planner::{diff, Plan};
use serde_json::json;

fn label<'p>(plan: &'p Plan, port: &str) -> &'p str {
    let b = plan
        .bindings
        .iter()
        .find(|b| b.port == port)
        .unwrap_or_else(|| panic!("no binding {port}"));
    b.external_network.as_deref().unwrap_or("none")
}

fn router_labels(plan: &Plan) -> Vec<String> {
    plan.router_macs
        .iter()
        .map(|r| {
            format!(
                "{} {} {}",
                r.mac,
                r.router,
                r.external_network.as_deref().unwrap_or("none")
            )
        })
        .collect()
}

/// Two external networks A and B; router r1 (gateway on B) serves s1.
fn base() -> Cloud {
    let mut c = Cloud::default();
    c.projects(&["t1"]);
    c.external_network("extA", "public-a").subnet(
        "a-s",
        "extA",
        "198.51.100.0/24",
        Some("198.51.100.1"),
    );
    c.external_network("extB", "public-b").subnet(
        "b-s",
        "extB",
        "203.0.113.0/24",
        Some("203.0.113.1"),
    );
    c.network("n1", "t1")
        .subnet("s1", "n1", "10.1.0.0/24", Some("10.1.0.1"));
    c.router("r1", "t1", Some(("extB", "b-s", "203.0.113.10")), &[]);
    c.iface("r1", "fa:16:3e:00:01:01", "s1", "10.1.0.1");
    c
}

#[test]
fn floating_ip_network_beats_the_gateway_rule() {
    let mut c = base();
    c.vm(
        "vm-fip",
        "t1",
        "fa:16:3e:00:00:01",
        "srv1",
        "s1",
        "10.1.0.10",
    );
    c.vm(
        "vm-plain",
        "t1",
        "fa:16:3e:00:00:02",
        "srv2",
        "s1",
        "10.1.0.11",
    );
    c.fip("f1", "extA", "vm-fip", "10.1.0.10");
    let plan = c.plan();
    assert_eq!(label(&plan, "vm-fip"), "public-a");
    assert_eq!(label(&plan, "vm-plain"), "public-b");
    assert_eq!(router_labels(&plan), ["fa:16:3e:00:01:01 r1 public-b"]);
    assert!(plan.anomalies.is_empty(), "{:?}", plan.anomalies);
}

#[test]
fn floating_ip_on_a_vip_labels_the_ports_carrying_it() {
    let mut c = base();
    c.vm(
        "keepalived",
        "t1",
        "fa:16:3e:00:00:01",
        "srv1",
        "s1",
        "10.1.0.10",
    )["allowed_address_pairs"] = json!([{"ip_address": "10.1.0.200"}]);
    c.port(
        "vip",
        "t1",
        "fa:16:3e:00:00:99",
        "",
        "",
        &[("s1", "10.1.0.200")],
    );
    c.fip("f1", "extA", "vip", "10.1.0.200");
    let plan = c.plan();
    assert_eq!(label(&plan, "keepalived"), "public-a");
}

#[test]
fn two_gateways_worth_of_subnets_pick_the_smallest_label_and_warn() {
    let mut c = base();
    c.network("n2", "t1")
        .subnet("s2", "n2", "10.2.0.0/24", Some("10.2.0.1"));
    c.router("r2", "t1", Some(("extA", "a-s", "198.51.100.10")), &[]);
    c.iface("r2", "fa:16:3e:00:02:01", "s2", "10.2.0.1");
    // One VM port with an address in each subnet: two default routes.
    let v = c.vm(
        "multi",
        "t1",
        "fa:16:3e:00:00:01",
        "srv1",
        "s1",
        "10.1.0.10",
    );
    v["fixed_ips"] = json!([{"subnet_id": "s1", "ip_address": "10.1.0.10"}, {"subnet_id": "s2", "ip_address": "10.2.0.10"}]);
    let plan = c.plan();
    assert_eq!(label(&plan, "multi"), "public-a");
    assert_eq!(anomaly_classes(&plan), ["multi_external_path"]);
    assert!(plan.anomalies[0].detail.contains("public-a, public-b"));
}

#[test]
fn router_with_two_gateways_is_labelled_stably() {
    let mut c = base();
    c.routers[0]["external_gateways"] = json!([
        {"network_id": "extB", "external_fixed_ips": [{"subnet_id": "b-s", "ip_address": "203.0.113.10"}]},
        {"network_id": "extA", "external_fixed_ips": [{"subnet_id": "a-s", "ip_address": "198.51.100.10"}]}
    ]);
    c.vm("vm", "t1", "fa:16:3e:00:00:01", "srv1", "s1", "10.1.0.10");
    let plan = c.plan();
    assert_eq!(router_labels(&plan), ["fa:16:3e:00:01:01 r1 public-a"]);
    assert_eq!(label(&plan, "vm"), "public-a");
    assert!(anomaly_classes(&plan)
        .iter()
        .all(|c| *c == "multi_external_path"));
    assert!(plan
        .anomalies
        .iter()
        .any(|a| a.detail.contains("router r1")));
}

#[test]
fn gateway_less_router_gives_none() {
    let mut c = base();
    c.routers[0]["external_gateway_info"] = json!(null);
    c.ports.retain(|p| p["id"] != "r1-gw");
    c.vm("vm", "t1", "fa:16:3e:00:00:01", "srv1", "s1", "10.1.0.10");
    let plan = c.plan();
    assert_eq!(label(&plan, "vm"), "none");
    assert_eq!(router_labels(&plan), ["fa:16:3e:00:01:01 r1 none"]);
    let json = plan.to_json();
    assert!(json.contains("\"external_network\": \"none\""));
}

#[test]
fn network_without_name_is_labelled_by_id() {
    let mut c = base();
    c.networks.iter_mut().find(|n| n["id"] == "extB").unwrap()["name"] = json!("");
    c.vm("vm", "t1", "fa:16:3e:00:00:01", "srv1", "s1", "10.1.0.10");
    assert_eq!(label(&c.plan(), "vm"), "extB");
}

#[test]
fn regatewaying_changes_only_the_affected_labels() {
    // r1 (s1) and r2 (s2) both start on B; r1 moves to A.
    let mut c = base();
    c.network("n2", "t1")
        .subnet("s2", "n2", "10.2.0.0/24", Some("10.2.0.1"));
    c.router("r2", "t1", Some(("extB", "b-s", "203.0.113.20")), &[]);
    c.iface("r2", "fa:16:3e:00:02:01", "s2", "10.2.0.1");
    c.vm("vm1", "t1", "fa:16:3e:00:00:01", "srv1", "s1", "10.1.0.10");
    c.vm("vm1b", "t1", "fa:16:3e:00:00:03", "srv3", "s1", "10.1.0.11");
    c.vm("vm2", "t1", "fa:16:3e:00:00:02", "srv2", "s2", "10.2.0.10");
    c.vm(
        "vm-fip",
        "t1",
        "fa:16:3e:00:00:04",
        "srv4",
        "s1",
        "10.1.0.12",
    );
    c.fip("f1", "extB", "vm-fip", "10.1.0.12");
    let before = c.plan();

    c.routers[0]["external_gateway_info"] = json!({"network_id": "extA", "enable_snat": true,
        "external_fixed_ips": [{"subnet_id": "a-s", "ip_address": "198.51.100.10"}]});
    let gw = c.ports.iter_mut().find(|p| p["id"] == "r1-gw").unwrap();
    gw["network_id"] = json!("extA");
    gw["fixed_ips"] = json!([{"subnet_id": "a-s", "ip_address": "198.51.100.10"}]);
    let after = c.plan();

    let d = diff(&before, &after);
    let changed: Vec<String> = d
        .bindings_changed
        .iter()
        .map(|ch| {
            assert_eq!(
                (&ch.old.tenant, &ch.old.server, &ch.old.port),
                (&ch.new.tenant, &ch.new.server, &ch.new.port)
            );
            format!(
                "{} {}->{}",
                ch.new.port,
                ch.old.external_network.as_deref().unwrap_or("none"),
                ch.new.external_network.as_deref().unwrap_or("none")
            )
        })
        .collect();
    // vm-fip keeps its floating IP's network; vm2 is behind r2.
    assert_eq!(
        changed,
        ["vm1 public-b->public-a", "vm1b public-b->public-a"]
    );
    assert!(d.bindings_added.is_empty() && d.bindings_removed.is_empty());
    let routers: Vec<String> = d
        .router_macs_changed
        .iter()
        .map(|ch| {
            format!(
                "{} {:?}->{:?}",
                ch.new.router, ch.old.external_network, ch.new.external_network
            )
        })
        .collect();
    assert_eq!(routers, ["r1 Some(\"public-b\")->Some(\"public-a\")"]);
    assert!(d.router_macs_added.is_empty() && d.router_macs_removed.is_empty());
    // Only the gateway port's platform /32 moves in the trie.
    let up: Vec<String> = d
        .trie_upsert
        .iter()
        .map(|r| format!("{} {} {}", r.tenant, r.prefix, r.zone))
        .collect();
    let del: Vec<String> = d
        .trie_delete
        .iter()
        .map(|r| format!("{} {} {}", r.tenant, r.prefix, r.zone))
        .collect();
    assert_eq!(up, ["* 198.51.100.10/32 infra"]);
    assert_eq!(del, ["* 203.0.113.10/32 infra"]);
    assert!(diff(&after, &after).is_empty());
}

#[test]
fn a_catch_all_address_pair_does_not_claim_neighbours_floating_ips() {
    let mut c = base();
    c.vm(
        "k8s-node",
        "t1",
        "fa:16:3e:00:00:01",
        "srv1",
        "s1",
        "10.1.0.10",
    )["allowed_address_pairs"] = json!([{"ip_address": "0.0.0.0/0"}]);
    c.vm("web", "t1", "fa:16:3e:00:00:02", "srv2", "s1", "10.1.0.11");
    c.fip("f1", "extA", "web", "10.1.0.11");
    let plan = c.plan();
    assert_eq!(label(&plan, "web"), "public-a");
    assert_eq!(label(&plan, "k8s-node"), "public-b");
    assert!(plan.anomalies.is_empty(), "{:?}", plan.anomalies);
}
