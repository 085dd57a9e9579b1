//! The simulator's notifications, read in-process (no broker): the payload
//! shapes Neutron 21 and Keystone 22 send for the same operations (the
//! real-cloud tier compares them with the real services'), and the changes
//! that send nothing at all.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use lachesis_sim::notify::ChannelTarget;
use lachesis_sim::{SimHandle, SimOptions};
use reqwest::Method;
use serde_json::{json, Value};
use tokio::sync::mpsc;

/// The example cloud, its notifications on a channel.
async fn sim() -> (SimHandle, common::Control, mpsc::UnboundedReceiver<Value>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let sim = common::example_sim(SimOptions {
        channel: Some(ChannelTarget {
            tx,
            host: "simhost".into(),
        }),
        ..SimOptions::default()
    })
    .await;
    let ctl = common::Control::of(&sim);
    (sim, ctl, rx)
}

/// The next event's inner oslo message (a deadline, not a timing claim).
async fn next(rx: &mut mpsc::UnboundedReceiver<Value>) -> Value {
    let envelope = tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("an event within 10 s")
        .expect("the simulator is running");
    assert_eq!(envelope["oslo.version"], "2.0");
    serde_json::from_str(envelope["oslo.message"].as_str().unwrap()).unwrap()
}

async fn ok(ctl: &common::Control, method: Method, path: &str, body: Value) {
    let (status, answer) = ctl.call(method, path, &body).await;
    assert!((200..300).contains(&status), "{path}: {status} {answer}");
}

fn keys(v: &Value) -> BTreeSet<&str> {
    v.as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .map(String::as_str)
        .collect()
}

fn set<'a>(k: &[&'a str]) -> BTreeSet<&'a str> {
    k.iter().copied().collect()
}

/// `event_type` and the payload of the next event, which must be of that
/// type.
async fn expect(rx: &mut mpsc::UnboundedReceiver<Value>, event_type: &str) -> Value {
    let m = next(rx).await;
    assert_eq!(m["event_type"], event_type, "{m}");
    m["payload"].clone()
}

#[tokio::test]
async fn neutron_payloads_carry_the_whole_resource_with_its_revision_or_ids_only() {
    let (_sim, ctl, mut rx) = sim().await;
    let port = json!({"id": "p-new", "network_id": "net-b", "project_id": "0b0000000000000000000000000000bb",
        "mac_address": "fa:16:3e:b1:00:09", "device_id": "vm-b2", "device_owner": "compute:nova",
        "fixed_ips": [{"subnet_id": "sub-b4", "ip_address": "10.2.0.9"}]});
    ok(&ctl, Method::POST, "ports", port).await;
    let p = expect(&mut rx, "port.create.end").await;
    assert_eq!(keys(&p), set(&["port"]));
    assert_eq!(
        (&p["port"]["id"], &p["port"]["revision_number"]),
        (&json!("p-new"), &json!(1))
    );
    ok(&ctl, Method::PATCH, "ports/p-new", json!({"name": "n"})).await;
    let p = expect(&mut rx, "port.update.end").await;
    assert_eq!(p["port"]["revision_number"], 2);
    ok(&ctl, Method::DELETE, "ports/p-new", Value::Null).await;
    let p = expect(&mut rx, "port.delete.end").await;
    assert_eq!(keys(&p), set(&["port", "port_id"]));
    assert_eq!(
        (&p["port_id"], &p["port"]["id"]),
        (&json!("p-new"), &json!("p-new"))
    );

    // Router interfaces: ids only, no .end, no project_id beside tenant_id.
    let iface = json!({"subnet_id": "sub-shared", "mac_address": "fa:16:3e:00:ad:01", "ip_address": "10.50.0.1"});
    ok(&ctl, Method::POST, "routers/router-admin/interfaces", iface).await;
    let ids_only = set(&[
        "id",
        "network_id",
        "port_id",
        "subnet_id",
        "subnet_ids",
        "tenant_id",
    ]);
    let ri = expect(&mut rx, "router.interface.create").await;
    assert_eq!(keys(&ri), set(&["router_interface"]));
    assert_eq!(keys(&ri["router_interface"]), ids_only);
    assert_eq!(ri["router_interface"]["id"], "router-admin");
    ok(
        &ctl,
        Method::DELETE,
        "routers/router-admin/interfaces/sub-shared",
        Value::Null,
    )
    .await;
    let ri = expect(&mut rx, "router.interface.delete").await;
    assert_eq!(keys(&ri["router_interface"]), ids_only);

    let route = json!({"destination": "10.9.0.0/16", "nexthop": "10.2.0.5"});
    ok(&ctl, Method::POST, "routers/router-b/routes", route).await;
    let r = expect(&mut rx, "router.update.end").await;
    assert_eq!(r["router"]["revision_number"], 2);
    ok(
        &ctl,
        Method::PATCH,
        "floatingips/fip-3",
        json!({"port_id": "p-vm-b1", "fixed_ip_address": "10.2.0.5"}),
    )
    .await;
    let f = expect(&mut rx, "floatingip.update.end").await;
    assert_eq!(
        (
            &f["floatingip"]["port_id"],
            &f["floatingip"]["revision_number"]
        ),
        (&json!("p-vm-b1"), &json!(1))
    );
}

#[tokio::test]
async fn a_share_flip_is_an_rbac_policy_event_and_a_project_event_names_only_the_id() {
    let (sim, ctl, mut rx) = sim().await;
    ok(&ctl, Method::PUT, "networks/net-b/share", Value::Null).await;
    let ids_only = set(&[
        "action",
        "id",
        "object_id",
        "object_type",
        "project_id",
        "target_tenant",
        "tenant_id",
    ]);
    let r = expect(&mut rx, "rbac_policy.create.end").await;
    assert_eq!(keys(&r), set(&["rbac_policy"]));
    assert_eq!(keys(&r["rbac_policy"]), ids_only);
    assert_eq!(
        (
            &r["rbac_policy"]["object_id"],
            &r["rbac_policy"]["target_tenant"]
        ),
        (&json!("net-b"), &json!("*"))
    );
    // The network is shared and a revision on, with no network event.
    let net = sim.with_store(|s| {
        (
            s.networks["net-b"].shared,
            s.meta(lachesis_planner::Resource::Networks, "net-b")
                .revision_number,
        )
    });
    assert_eq!(net, (true, 2));
    assert_eq!(
        ctl.send(Method::PUT, "networks/net-b/share", &Value::Null)
            .await,
        409
    );
    ok(&ctl, Method::DELETE, "networks/net-b/share", Value::Null).await;
    let r = expect(&mut rx, "rbac_policy.delete.end").await;
    assert_eq!(keys(&r), set(&["rbac_policy", "rbac_policy_id"]));
    assert_eq!(keys(&r["rbac_policy"]), ids_only);

    ok(
        &ctl,
        Method::POST,
        "projects",
        json!({"id": "0c00000000000000000000000000000c", "name": "tenant-c"}),
    )
    .await;
    let m = next(&mut rx).await;
    assert_eq!(
        (&m["event_type"], &m["publisher_id"]),
        (
            &json!("identity.project.created"),
            &json!("identity.simhost")
        )
    );
    let p = &m["payload"];
    assert_eq!(
        keys(p),
        set(&[
            "action",
            "eventTime",
            "eventType",
            "id",
            "initiator",
            "observer",
            "outcome",
            "resource_info",
            "target",
            "typeURI"
        ])
    );
    assert_eq!(
        (&p["resource_info"], &p["target"]["id"]),
        (
            &json!("0c00000000000000000000000000000c"),
            &json!("0c00000000000000000000000000000c")
        )
    );
}

#[tokio::test]
async fn neutrons_own_ports_and_silenced_changes_send_nothing() {
    let (sim, ctl, mut rx) = sim().await;
    // A DHCP port, as Neutron's DHCP agent makes it: no port.* event.
    let dhcp = json!({"id": "p-dhcp-b", "network_id": "net-b", "project_id": "0b0000000000000000000000000000bb",
        "mac_address": "fa:16:3e:00:0d:02", "device_id": "dhcp-b", "device_owner": "network:dhcp",
        "fixed_ips": [{"subnet_id": "sub-b4", "ip_address": "10.2.0.2"}]});
    ok(&ctl, Method::POST, "ports", dhcp).await;
    ok(&ctl, Method::DELETE, "ports/p-dhcp-a", Value::Null).await;
    // Any change, asked to be silent.
    ok(
        &ctl,
        Method::PATCH,
        "ports/p-vm-b1?notify=false",
        json!({"name": "quiet"}),
    )
    .await;
    // The change happened, revision and all.
    assert_eq!(
        sim.with_store(|s| s.meta(lachesis_planner::Resource::Ports, "p-vm-b1"))
            .revision_number,
        2
    );
    // The next event is the next loud change's: nothing came before it.
    ok(
        &ctl,
        Method::PATCH,
        "ports/p-vm-a2",
        json!({"name": "loud"}),
    )
    .await;
    let p = expect(&mut rx, "port.update.end").await;
    assert_eq!(p["port"]["id"], "p-vm-a2");
}

/// Sets the notification faults.
async fn faults(ctl: &common::Control, faults: Value) {
    ok(
        ctl,
        Method::PUT,
        "settings",
        json!({"notification_faults": faults}),
    )
    .await;
}

/// Renames a port (one `port.update.end`, named after `name`).
async fn rename(ctl: &common::Control, port: &str, name: &str) {
    ok(
        ctl,
        Method::PATCH,
        &format!("ports/{port}"),
        json!({"name": name}),
    )
    .await;
}

/// The events up to and including the next `network.update.end` (a marker
/// no rule touches: everything sent before it has arrived by then), as
/// `(event_type, name)`.
async fn until_marker(rx: &mut mpsc::UnboundedReceiver<Value>) -> Vec<(String, String)> {
    let mut seen = Vec::new();
    loop {
        let m = next(rx).await;
        let t = m["event_type"].as_str().unwrap().to_owned();
        let kind = t.split('.').next().unwrap().to_owned();
        let name = m["payload"][&kind]["name"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        let done = t == "network.update.end";
        seen.push((t, name));
        if done {
            return seen;
        }
    }
}

async fn marker(ctl: &common::Control) {
    ok(
        ctl,
        Method::PATCH,
        "networks/net-b",
        json!({"name": "marker"}),
    )
    .await;
}

fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    p.iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

#[tokio::test]
async fn faults_drop_duplicate_and_reorder_the_events_they_pick() {
    let (sim, ctl, mut rx) = sim().await;
    faults(
        &ctl,
        json!({"rules": [{"event_type": "port.update.end", "action": "drop"}]}),
    )
    .await;
    rename(&ctl, "p-vm-b1", "lost").await;
    marker(&ctl).await;
    assert_eq!(
        until_marker(&mut rx).await,
        pairs(&[("network.update.end", "marker")])
    );

    faults(
        &ctl,
        json!({"rules": [{"event_type": "port.*", "action": "duplicate"}]}),
    )
    .await;
    rename(&ctl, "p-vm-b1", "twice").await;
    marker(&ctl).await;
    assert_eq!(
        until_marker(&mut rx).await,
        pairs(&[
            ("port.update.end", "twice"),
            ("port.update.end", "twice"),
            ("network.update.end", "marker")
        ])
    );

    faults(
        &ctl,
        json!({"rules": [{"event_type": "port.update.end", "action": "reorder"}]}),
    )
    .await;
    rename(&ctl, "p-vm-b1", "late").await;
    marker(&ctl).await;
    // The marker overtakes it; the held event follows right behind.
    assert_eq!(
        until_marker(&mut rx).await,
        pairs(&[("network.update.end", "marker")])
    );
    let p = expect(&mut rx, "port.update.end").await;
    assert_eq!(p["port"]["name"], "late");
    let counts = sim.with_store(|s| s.stats()).notifications;
    assert_eq!(
        (
            counts.dropped,
            counts.duplicated,
            counts.reordered,
            counts.sent
        ),
        (1, 1, 1, 1 + 3 + 2)
    );

    // A rule the simulator cannot apply is refused whole.
    for bad in [
        json!({"rules": [{"action": "drop", "probability": 2}]}),
        json!({"rules": [{"action": "delay"}]}),
        json!({"rules": [{"action": "vanish"}]}),
    ] {
        let (status, _) = ctl
            .call(
                Method::PUT,
                "settings",
                &json!({"notification_faults": bad}),
            )
            .await;
        assert_eq!(status, 400, "{bad}");
    }
}

#[tokio::test]
async fn a_delayed_event_arrives_no_sooner_than_its_delay() {
    let (_sim, ctl, mut rx) = sim().await;
    faults(
        &ctl,
        json!({"rules": [{"event_type": "port.update.end", "action": "delay", "delay_ms": 400}]}),
    )
    .await;
    let asked = std::time::Instant::now();
    rename(&ctl, "p-vm-b1", "slow").await;
    let m = next(&mut rx).await;
    assert_eq!(m["payload"]["port"]["name"], "slow");
    // A lower bound only: a delay can make it late, never early.
    assert!(
        asked.elapsed() >= Duration::from_millis(400),
        "arrived after {:?}",
        asked.elapsed()
    );
}

/// The names of the 40 renames a run with `seed` lets through (half are
/// dropped at random).
async fn kept_with_seed(seed: u64) -> Vec<String> {
    let (_sim, ctl, mut rx) = sim().await;
    faults(
        &ctl,
        json!({"seed": seed, "rules": [{"event_type": "port.*", "probability": 0.5, "action": "drop"}]}),
    )
    .await;
    for i in 0..40 {
        rename(&ctl, "p-vm-b1", &format!("n{i}")).await;
    }
    marker(&ctl).await;
    let arrived = until_marker(&mut rx).await;
    arrived[..arrived.len() - 1]
        .iter()
        .map(|(_, name)| name.clone())
        .collect()
}

#[tokio::test]
async fn probabilistic_faults_are_the_same_for_the_same_seed() {
    let first = kept_with_seed(42).await;
    assert_eq!(first, kept_with_seed(42).await);
    assert_ne!(first, kept_with_seed(7).await);
    assert!(
        first.len() > 5 && first.len() < 35,
        "about half kept: {first:?}"
    );
}
