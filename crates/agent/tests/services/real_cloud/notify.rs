//! Real Neutron's notifications through the agent's RabbitMQ consumer:
//! the calls that change what the agent plans (a port created, a router
//! interface added — `router.interface.create`, which Neutron sends with no
//! `.end` — a router's routes set, a floating IP associated) each produce
//! a kick; a call Neutron refuses sends its `.start` and nothing else, and
//! kicks nothing.

use std::sync::Arc;
use std::time::Duration;

use lachesis_notify::{
    Decision, Gap, NotifyMetrics, RabbitMqConfig, RabbitMqConsumer, RabbitUrl, Sink, Transport,
    TransportMetrics,
};
use prometheus_client::registry::Registry;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::harness::{build, id, Admin, NEUTRON};

/// Every decision, in order.
struct Recorder(mpsc::UnboundedSender<Decision>);

impl Sink for Recorder {
    fn decided(&self, _: Transport, decision: &Decision) {
        let _ = self.0.send(decision.clone());
    }

    fn gap(&self, _: Transport, gap: Gap) {
        panic!("no reconnection expected: {gap:?}");
    }
}

/// Reads decisions until a kick for `event_type` (other decisions, of
/// other services or from Neutron's own bookkeeping, may come first); the
/// decisions seen before it.
async fn kick_for(rx: &mut mpsc::UnboundedReceiver<Decision>, event_type: &str) -> Vec<Decision> {
    let mut before = Vec::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(20), rx.recv()).await {
            Ok(Some(d)) if d.is_kick() && d.event_type() == event_type => return before,
            Ok(Some(d)) => before.push(d),
            other => {
                panic!("no kick for {event_type} within 20 s ({other:?}); before it: {before:?}")
            }
        }
    }
}

type Subscribed = (
    TransportMetrics,
    mpsc::UnboundedReceiver<Decision>,
    CancellationToken,
    tokio::task::JoinHandle<()>,
);

/// The agent's consumer on the default exchanges, subscribed.
async fn subscribe() -> Subscribed {
    let registry = &mut Registry::default();
    let metrics = NotifyMetrics::register(registry, &[Transport::RabbitMq], None)
        .transport(Transport::RabbitMq);
    let consumer = Arc::new(
        RabbitMqConsumer::new(
            RabbitMqConfig {
                // The transport_url real Neutron publishes through
                // (scripts/real-cloud), as it is.
                url: RabbitUrl::parse("rabbit://guest:guest@127.0.0.1:16672/").unwrap(),
                exchanges: ["neutron", "nova", "keystone", "octavia", "openstack"]
                    .map(String::from)
                    .to_vec(),
                durable: false,
                ca_file: None,
                first_host: 0,
            },
            metrics.clone(),
        )
        .unwrap(),
    );
    let (tx, rx) = mpsc::unbounded_channel();
    let cancel = CancellationToken::new();
    let c = cancel.clone();
    let task = tokio::spawn(async move { consumer.run(&Recorder(tx), c).await });
    let until = tokio::time::Instant::now() + Duration::from_secs(20);
    while !metrics.snapshot().connected {
        assert!(tokio::time::Instant::now() < until, "never subscribed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    (metrics, rx, cancel, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_neutron_changes_kick_through_rabbitmq_and_a_refused_call_does_not() {
    let _cloud = lachesis_lab::Services::cloud();
    let admin = Admin::login().await;
    admin.clean().await;
    let built = build(&admin).await;

    let (metrics, mut rx, cancel, task) = subscribe().await;

    // A port (on tenant A's network, which router A joins to the public one).
    let net_a = admin.get(&format!("{NEUTRON}/ports/{}", built.vm_a1)).await["port"]["network_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let port = id(
        &admin
            .post(
                &format!("{NEUTRON}/ports"),
                json!({"port": {"name": "lt-notify", "network_id": net_a, "project_id": built.project_a,
                    "mac_address": "fa:16:3e:a1:00:77", "device_owner": "compute:nova",
                    "device_id": "5e7a1c1e-0000-4000-8000-0000000000a7"}}),
            )
            .await,
        "port",
    );
    let before = kick_for(&mut rx, "port.create.end").await;
    assert!(
        before
            .iter()
            .any(|d| d.event_type() == "port.create.start" && !d.is_kick()),
        "the .start came first and did not kick: {before:?}"
    );

    // A router interface on a new subnet: no .start/.end at all.
    let net = id(
        &admin
            .post(
                &format!("{NEUTRON}/networks"),
                json!({"network": {"name": "lt-notify-net", "project_id": built.project_a}}),
            )
            .await,
        "network",
    );
    let subnet = id(
        &admin
            .post(
                &format!("{NEUTRON}/subnets"),
                json!({"subnet": {"network_id": net, "project_id": built.project_a, "cidr": "10.9.0.0/24",
                    "ip_version": 4, "enable_dhcp": false}}),
            )
            .await,
        "subnet",
    );
    kick_for(&mut rx, "subnet.create.end").await;
    admin
        .put(
            &format!("{NEUTRON}/routers/{}/add_router_interface", built.router_a),
            json!({"subnet_id": subnet}),
        )
        .await;
    kick_for(&mut rx, "router.interface.create").await;

    // The router's routes.
    admin
        .put(
            &format!("{NEUTRON}/routers/{}", built.router_a),
            json!({"router": {"routes": [{"destination": "192.168.88.0/24", "nexthop": "10.9.0.50"}]}}),
        )
        .await;
    kick_for(&mut rx, "router.update.end").await;

    // A floating IP associated with the new port.
    let fip = id(
        &admin
            .post(
                &format!("{NEUTRON}/floatingips"),
                json!({"floatingip": {"floating_network_id": built.public, "project_id": built.project_a}}),
            )
            .await,
        "floatingip",
    );
    kick_for(&mut rx, "floatingip.create.end").await;
    admin
        .put(
            &format!("{NEUTRON}/floatingips/{fip}"),
            json!({"floatingip": {"port_id": port}}),
        )
        .await;
    kick_for(&mut rx, "floatingip.update.end").await;

    refused_call_does_not_kick(&admin, &metrics, &mut rx, &net_a, &built.project_a).await;
    let s = metrics.snapshot();
    assert_eq!(s.decode_errors, 0, "every real message decodes: {s:?}");
    cancel.cancel();
    task.await.unwrap();
}

/// Refused (the MAC is taken on that network): `.start`, no `.end`, no
/// kick.
async fn refused_call_does_not_kick(
    admin: &Admin,
    metrics: &TransportMetrics,
    rx: &mut mpsc::UnboundedReceiver<Decision>,
    network: &str,
    project: &str,
) {
    let kicked = metrics.snapshot().kicked;
    let refused = admin
        .http
        .post(format!("{NEUTRON}/ports"))
        .header("X-Auth-Token", &admin.token)
        .header("Content-Type", "application/json")
        .body(
            json!({"port": {"network_id": network, "project_id": project,
                "mac_address": "fa:16:3e:a1:00:77"}})
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(
        refused.status().as_u16(),
        409,
        "{}",
        refused.text().await.unwrap()
    );
    let mut seen: Vec<Value> = Vec::new();
    let mut start_seen = false;
    // Everything Neutron sends in the next 5 s: the .start, and no kick.
    let quiet_until = tokio::time::Instant::now() + Duration::from_secs(5);
    while let Ok(Some(d)) = tokio::time::timeout_at(quiet_until, rx.recv()).await {
        assert!(
            !d.is_kick(),
            "the refused call kicked: {d:?} (after {seen:?})"
        );
        start_seen |= d.event_type() == "port.create.start";
        seen.push(json!(d.event_type()));
    }
    assert!(
        start_seen,
        "Neutron sent the refused call's .start: {seen:?}"
    );
    assert_eq!(metrics.snapshot().kicked, kicked);
}
