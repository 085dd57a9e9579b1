//! The simulator publishes an oslo notification per mutation to a real
//! `RabbitMQ` (Debian's, started by `scripts/real-cloud up-rabbitmq` on a
//! private loopback port). Root only; fails loudly when the broker cannot run.

use std::time::{Duration, Instant};

use lachesis_sim::notify::RabbitTarget;
use lachesis_sim::{self as sim, SimOptions, Store, Topology};
use lapin::options::{
    BasicGetOptions, ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::FieldTable;
use serde_json::{json, Value};

const URL: &str = "amqp://guest:guest@127.0.0.1:35672/%2f";

async fn next_message(chan: &lapin::Channel, queue: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(msg) = chan
            .basic_get(queue.into(), BasicGetOptions { no_ack: true })
            .await
            .unwrap()
        {
            return serde_json::from_slice(&msg.delivery.data).unwrap();
        }
        assert!(Instant::now() < deadline, "no notification within 10 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn inner(envelope: &Value) -> Value {
    assert_eq!(envelope["oslo.version"], "2.0");
    serde_json::from_str(envelope["oslo.message"].as_str().unwrap()).unwrap()
}

/// One exclusive queue per exchange, bound like an agent binds it.
async fn bind_queues(chan: &lapin::Channel) -> Vec<String> {
    let mut queues = Vec::new();
    for exchange in ["neutron", "octavia"] {
        // Declared exactly as OpenStack does (topic, non-durable), like an agent would.
        chan.exchange_declare(
            exchange.into(),
            lapin::ExchangeKind::Topic,
            ExchangeDeclareOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
        let q = chan
            .queue_declare(
                "".into(),
                QueueDeclareOptions {
                    exclusive: true,
                    auto_delete: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await
            .unwrap();
        chan.queue_bind(
            q.name().clone(),
            exchange.into(),
            "notifications.info".into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
        queues.push(q.name().as_str().to_owned());
    }
    queues
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutations_publish_real_oslo_notifications() {
    let _broker = lachesis_lab::Services::rabbitmq();
    let conn = lapin::Connection::connect(URL, lapin::ConnectionProperties::default())
        .await
        .unwrap();
    let chan = conn.create_channel().await.unwrap();
    let queues = bind_queues(&chan).await;

    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/topology.yaml");
    let topology = Topology::from_yaml(&std::fs::read_to_string(path).unwrap()).unwrap();
    let rabbit = RabbitTarget {
        url: URL.into(),
        durable: false,
        host: "simhost".into(),
    };
    let opts = SimOptions {
        rabbitmq: Some(rabbit),
        ..SimOptions::default()
    };
    let sim = sim::start_with(
        Store::from_topology(&topology).unwrap(),
        "127.0.0.1:0".parse().unwrap(),
        opts,
    )
    .await
    .unwrap();
    let http = reqwest::Client::new();
    let ctl = |p: &str| format!("{}/sim/{p}", sim.base_url());

    let resp = http
        .post(ctl("ports"))
        .body(json!({"id": "p-new", "network_id": "net-b", "project_id": "0b0000000000000000000000000000bb",
            "mac_address": "fa:16:3e:b1:00:09", "device_id": "vm-b2", "device_owner": "compute:nova",
            "fixed_ips": [{"subnet_id": "sub-b4", "ip_address": "10.2.0.9"}]}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let m = inner(&next_message(&chan, &queues[0]).await);
    assert_eq!(m["event_type"], "port.create.end");
    assert_eq!(m["publisher_id"], "network.simhost");
    assert_eq!(m["priority"], "INFO");
    assert_eq!(m["payload"]["port"]["mac_address"], "fa:16:3e:b1:00:09");
    assert_eq!(m["_context_project_id"], "0b0000000000000000000000000000bb");

    let resp = http
        .post(ctl("routers/router-admin/interfaces"))
        .body(json!({"subnet_id": "sub-shared", "mac_address": "fa:16:3e:00:ad:01", "ip_address": "10.50.0.1"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let m = inner(&next_message(&chan, &queues[0]).await);
    assert_eq!(
        m["event_type"], "router.interface.create",
        "no .start/.end, as Neutron sends it"
    );
    assert_eq!(m["payload"]["router_interface"]["id"], "router-admin");
    assert_eq!(m["payload"]["router_interface"]["subnet_id"], "sub-shared");

    // A refused mutation publishes nothing; the next one arrives in order.
    let resp = http.delete(ctl("ports/no-such-port")).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 404);
    http.delete(ctl("ports/p-new")).send().await.unwrap();
    let m = inner(&next_message(&chan, &queues[0]).await);
    assert_eq!(m["event_type"], "port.delete.end");
    assert_eq!(m["payload"]["port_id"], "p-new");

    http.delete(ctl("loadbalancers/lb2")).send().await.unwrap();
    let m = inner(&next_message(&chan, &queues[1]).await);
    assert_eq!(m["event_type"], "octavia.loadbalancer.delete.end");
    assert_eq!(
        m["publisher_id"],
        Value::Null,
        "Octavia sends a null publisher"
    );
}
