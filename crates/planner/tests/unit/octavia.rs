//! DESIGN §6.5: the Octavia join.

use crate::common;

use common::{anomaly_classes, lpm, Cloud};
use lachesis_planner::{diff, Plan, SourceStatus};
use serde_json::json;

/// LB owned by tLB with two amphorae (ACTIVE/STANDBY) in the service
/// project, each with a management port and a VIP-network port; amp1 also
/// plugs the member network on a second port. A DELETED amphora's leftover
/// port and an OVN load balancer complete the picture.
fn octavia() -> Cloud {
    let mut c = Cloud::default();
    c.projects(&["tLB", "svc"]);
    c.network("mgmt", "svc")
        .subnet("mgmt-s", "mgmt", "172.31.0.0/24", None);
    c.network("vipnet", "tLB")
        .subnet("vip-s", "vipnet", "10.0.0.0/24", Some("10.0.0.1"));
    c.network("members", "tLB")
        .subnet("mem-s", "members", "10.9.0.0/24", Some("10.9.0.1"));
    c.vm(
        "c1-mgmt",
        "svc",
        "fa:16:3e:0a:00:01",
        "c1",
        "mgmt-s",
        "172.31.0.11",
    );
    c.vm(
        "c1-vip",
        "svc",
        "fa:16:3e:0a:00:02",
        "c1",
        "vip-s",
        "10.0.0.21",
    )["allowed_address_pairs"] =
        json!([{"ip_address": "10.0.0.100", "mac_address": "fa:16:3e:0a:00:02"}]);
    c.vm(
        "c1-member",
        "svc",
        "fa:16:3e:0a:00:03",
        "c1",
        "mem-s",
        "10.9.0.21",
    );
    c.vm(
        "c2-mgmt",
        "svc",
        "fa:16:3e:0b:00:01",
        "c2",
        "mgmt-s",
        "172.31.0.12",
    );
    c.vm(
        "c2-vip",
        "svc",
        "fa:16:3e:0b:00:02",
        "c2",
        "vip-s",
        "10.0.0.22",
    )["allowed_address_pairs"] =
        json!([{"ip_address": "10.0.0.100", "mac_address": "fa:16:3e:0b:00:02"}]);
    c.vm(
        "c3-vip",
        "svc",
        "fa:16:3e:0c:00:02",
        "c3",
        "vip-s",
        "10.0.0.23",
    );
    c.port(
        "vip",
        "tLB",
        "fa:16:3e:0d:00:01",
        "Octavia",
        "lb-lb1",
        &[("vip-s", "10.0.0.100")],
    );
    c.lbs = Some(vec![
        json!({"id": "lb1", "project_id": "tLB", "provider": "amphora", "provisioning_status": "ACTIVE",
               "operating_status": "ONLINE", "vip_address": "10.0.0.100", "vip_port_id": "vip"}),
        json!({"id": "lb2", "project_id": "tLB", "provider": "ovn", "provisioning_status": "ACTIVE"}),
        json!({"id": "lb3", "project_id": "tLB", "provider": "ovn", "provisioning_status": "DELETED"}),
    ]);
    c.amphorae = Some(vec![
        json!({"id": "amp1", "loadbalancer_id": "lb1", "compute_id": "c1", "lb_network_ip": "172.31.0.11",
               "status": "ALLOCATED", "role": "MASTER", "vrrp_ip": "10.0.0.21", "ha_ip": "10.0.0.100"}),
        json!({"id": "amp2", "loadbalancer_id": "lb1", "compute_id": "c2", "lb_network_ip": "172.31.0.12",
               "status": "ALLOCATED", "role": "BACKUP", "vrrp_ip": "10.0.0.22", "ha_ip": "10.0.0.100"}),
        json!({"id": "amp3", "loadbalancer_id": "lb1", "compute_id": "c3", "lb_network_ip": "172.31.0.13",
               "status": "DELETED", "role": null}),
    ]);
    c
}

fn binding<'p>(plan: &'p Plan, port: &str) -> &'p lachesis_planner::Binding {
    plan.bindings
        .iter()
        .find(|b| b.port == port)
        .unwrap_or_else(|| panic!("no binding for {port}"))
}

#[test]
fn amphora_data_ports_bill_to_the_lb_owner() {
    let plan = octavia().plan();
    let table: Vec<(String, String, String, bool)> = plan
        .bindings
        .iter()
        .map(|b| {
            (
                b.port.clone(),
                b.tenant.clone(),
                b.server.clone(),
                b.amphora,
            )
        })
        .collect();
    let want = [
        ("c1-mgmt", "svc", "c1", false),
        ("c1-vip", "tLB", "c1", true),
        ("c1-member", "tLB", "c1", true),
        ("c2-mgmt", "svc", "c2", false),
        ("c2-vip", "tLB", "c2", true),
        ("c3-vip", "svc", "c3", false),
    ];
    let mut want: Vec<(String, String, String, bool)> = want
        .iter()
        .map(|(p, t, s, a)| ((*p).to_owned(), (*t).to_owned(), (*s).to_owned(), *a))
        .collect();
    let mut got = table;
    want.sort();
    got.sort();
    assert_eq!(got, want);
    assert_eq!(
        binding(&plan, "c1-vip").mac.to_string(),
        "fa:16:3e:0a:00:02"
    );
}

#[test]
fn amphora_addresses_exclude_management_and_deleted() {
    let plan = octavia().plan();
    let ips: Vec<String> = plan
        .amphora_ips
        .iter()
        .map(|a| format!("{} {}", a.tenant, a.address))
        .collect();
    assert_eq!(ips, ["tLB 10.0.0.21", "tLB 10.0.0.22", "tLB 10.9.0.21"]);
    // Segment 2 seen from the LB owner's own subnet is infra (step 7).
    assert_eq!(lpm(&plan, "tLB", "10.9.0.21").as_deref(), Some("infra"));
    assert_eq!(
        lpm(&plan, "tLB", "10.9.0.50").as_deref(),
        Some("same_tenant")
    );
}

#[test]
fn non_amphora_provider_is_warned_about_once() {
    let plan = octavia().plan();
    assert_eq!(anomaly_classes(&plan), ["non_amphora_lb"]);
    assert!(plan.anomalies[0].detail.contains("lb2") && plan.anomalies[0].detail.contains("ovn"));
}

#[test]
fn without_octavia_lists_amphora_ports_are_ordinary() {
    let mut c = octavia();
    c.lbs = None;
    c.amphorae = None;
    let plan = c.plan();
    assert!(plan.amphora_ips.is_empty());
    assert!(plan
        .bindings
        .iter()
        .all(|b| b.tenant == "svc" && !b.amphora));
    assert!(plan.anomalies.is_empty());
}

/// DESIGN §6.5 "amphora provider": `amphorav2` (the jobboard driver) and the
/// old alias `octavia` run amphorae just like `amphora`.
#[test]
fn every_amphora_driver_name_re_attributes_data_ports() {
    for provider in ["amphora", "amphorav2", "octavia"] {
        let mut c = octavia();
        c.lbs.as_mut().unwrap()[0]["provider"] = json!(provider);
        let plan = c.plan();
        let b = binding(&plan, "c1-vip");
        assert_eq!(
            (b.tenant.as_str(), b.amphora),
            ("tLB", true),
            "provider {provider}"
        );
        assert_eq!(
            anomaly_classes(&plan),
            ["non_amphora_lb"],
            "provider {provider}: only the OVN LB is reported"
        );
    }
}

/// DESIGN §6.5 re-attributes every port of the amphora "except the
/// management port (the one holding `lb_network_ip`)". While an amphora boots
/// `lb_network_ip` is null: the management port cannot be told apart, so
/// none of that amphora's ports move and none of its addresses become
/// amphora addresses (the kernel map is insert-only).
#[test]
fn amphora_without_lb_network_ip_moves_no_port() {
    let mut c = octavia();
    c.amphorae.as_mut().unwrap()[0]["lb_network_ip"] = json!(null);
    c.amphorae.as_mut().unwrap()[0]["status"] = json!("BOOTING");
    let plan = c.plan();
    for port in ["c1-mgmt", "c1-vip", "c1-member"] {
        let b = binding(&plan, port);
        assert_eq!((b.tenant.as_str(), b.amphora), ("svc", false), "{port}");
    }
    let c2 = binding(&plan, "c2-vip");
    assert_eq!((c2.tenant.as_str(), c2.amphora), ("tLB", true));
    let ips: Vec<String> = plan
        .amphora_ips
        .iter()
        .map(|a| format!("{} {}", a.tenant, a.address))
        .collect();
    assert_eq!(ips, ["tLB 10.0.0.22"]);
    assert_eq!(
        anomaly_classes(&plan),
        ["amphora_without_lb_network_ip", "non_amphora_lb"]
    );
    assert!(plan.anomalies[0].detail.contains("amp1") && plan.anomalies[0].detail.contains("c1"));
}

fn amphora_view(plan: &Plan) -> Vec<String> {
    let mut v: Vec<String> = plan
        .bindings
        .iter()
        .map(|b| format!("{} {} {}", b.port, b.tenant, b.amphora))
        .collect();
    v.extend(
        plan.amphora_ips
            .iter()
            .map(|a| format!("ip {} {}", a.tenant, a.address)),
    );
    v
}

/// Reconcile contract: a failed Octavia fetch is "unknown", not "empty".
/// The previous plan's amphora bindings and addresses stay for ports still
/// there, so a transient error neither moves the data ports back to the
/// service project (a settle and a flip back later) nor drops amphora rows.
#[test]
fn failed_octavia_keeps_the_previous_amphora_attribution() {
    let committed = octavia().plan();
    assert_eq!(committed.sources.amphorae, SourceStatus::Ok);
    let mut c = octavia();
    c.octavia_failed = true;
    let next = c.plan_after(&committed);
    assert_eq!(amphora_view(&next), amphora_view(&committed));
    assert_eq!(next.trie, committed.trie);
    assert_eq!(
        (next.sources.loadbalancers, next.sources.amphorae),
        (SourceStatus::Failed, SourceStatus::Failed)
    );
    let delta = diff(&committed, &next);
    assert!(delta.bindings_changed.is_empty(), "{delta:#?}");
    assert!(delta.amphora_ips_removed.is_empty(), "{delta:#?}");
    // Only the OVN LB's anomaly disappears: that list was not fetched.
    assert!(next.anomalies.is_empty());

    // Ports gone meanwhile are not kept, nor are their addresses; a port
    // whose MAC changed is planned afresh.
    c.ports.retain(|p| p["id"] != "c2-vip");
    c.ports.iter_mut().find(|p| p["id"] == "c1-member").unwrap()["mac_address"] =
        json!("fa:16:3e:0a:00:33");
    let next = c.plan_after(&committed);
    let view = amphora_view(&next);
    assert!(view.contains(&"c1-vip tLB true".to_owned()), "{view:#?}");
    assert!(
        view.contains(&"c1-member svc false".to_owned()),
        "{view:#?}"
    );
    assert!(!view.iter().any(|l| l.starts_with("c2-vip")), "{view:#?}");
    let ips: Vec<&String> = view.iter().filter(|l| l.starts_with("ip ")).collect();
    assert_eq!(ips, ["ip tLB 10.0.0.21"]);
}

/// With no committed plan (a cold start) a failed Octavia can only leave
/// the ports ordinary, and the plan says why.
#[test]
fn failed_octavia_at_cold_start_is_recorded_in_the_plan() {
    let mut c = octavia();
    c.octavia_failed = true;
    let plan = c.plan();
    assert!(plan
        .bindings
        .iter()
        .all(|b| b.tenant == "svc" && !b.amphora));
    assert!(plan.amphora_ips.is_empty());
    let json: serde_json::Value = serde_json::from_str(&plan.to_json()).unwrap();
    assert_eq!(
        json["sources"],
        json!({"servers": "absent", "loadbalancers": "failed", "amphorae": "failed"})
    );
}

/// Octavia removed from the cloud (not deployed) is a real change: the
/// previous attribution is not kept.
#[test]
fn octavia_not_deployed_drops_the_previous_attribution() {
    let committed = octavia().plan();
    let mut c = octavia();
    c.lbs = None;
    c.amphorae = None;
    let next = c.plan_after(&committed);
    assert!(next
        .bindings
        .iter()
        .all(|b| b.tenant == "svc" && !b.amphora));
    assert!(next.amphora_ips.is_empty());
    assert_eq!(next.sources.amphorae, SourceStatus::Absent);
    assert_eq!(diff(&committed, &next).bindings_changed.len(), 3);
}
