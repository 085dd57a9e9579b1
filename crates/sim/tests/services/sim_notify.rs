//! The simulator publishes an oslo notification per mutation to a real
//! `RabbitMQ` (Debian's, started by `scripts/real-cloud up-rabbitmq` on a
//! private loopback port). Root only; fails loudly when the broker cannot run.

use crate::common;

use std::time::{Duration, Instant};

use lachesis_sim::notify::RabbitTarget;
use lachesis_sim::SimOptions;
use lapin::options::{
    BasicGetOptions, ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::FieldTable;
use reqwest::Method;
use serde_json::{json, Value};

const URL: &str = "amqp://guest:guest@127.0.0.1:16672/%2f";

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

    let rabbit = RabbitTarget {
        url: URL.into(),
        durable: false,
        host: "simhost".into(),
    };
    let sim = common::example_sim(SimOptions {
        rabbitmq: Some(rabbit),
        ..SimOptions::default()
    })
    .await;
    let ctl = common::Control::of(&sim);

    let port = json!({"id": "p-new", "network_id": "net-b", "project_id": "0b0000000000000000000000000000bb",
        "mac_address": "fa:16:3e:b1:00:09", "device_id": "vm-b2", "device_owner": "compute:nova",
        "fixed_ips": [{"subnet_id": "sub-b4", "ip_address": "10.2.0.9"}]});
    assert_eq!(ctl.send(Method::POST, "ports", &port).await, 200);
    let m = inner(&next_message(&chan, &queues[0]).await);
    assert_eq!(m["event_type"], "port.create.end");
    assert_eq!(m["publisher_id"], "network.simhost");
    assert_eq!(m["priority"], "INFO");
    assert_eq!(m["payload"]["port"]["mac_address"], "fa:16:3e:b1:00:09");
    assert_eq!(m["_context_project_id"], "0b0000000000000000000000000000bb");

    let iface = json!({"subnet_id": "sub-shared", "mac_address": "fa:16:3e:00:ad:01", "ip_address": "10.50.0.1"});
    assert_eq!(
        ctl.send(Method::POST, "routers/router-admin/interfaces", &iface)
            .await,
        200
    );
    let m = inner(&next_message(&chan, &queues[0]).await);
    assert_eq!(
        m["event_type"], "router.interface.create",
        "no .start/.end, as Neutron sends it"
    );
    assert_eq!(m["payload"]["router_interface"]["id"], "router-admin");
    assert_eq!(m["payload"]["router_interface"]["subnet_id"], "sub-shared");

    // A refused mutation publishes nothing; the next one arrives in order.
    assert_eq!(
        ctl.send(Method::DELETE, "ports/no-such-port", &Value::Null)
            .await,
        404
    );
    assert_eq!(
        ctl.send(Method::DELETE, "ports/p-new", &Value::Null).await,
        204
    );
    let m = inner(&next_message(&chan, &queues[0]).await);
    assert_eq!(m["event_type"], "port.delete.end");
    assert_eq!(m["payload"]["port_id"], "p-new");

    assert_eq!(
        ctl.send(Method::DELETE, "loadbalancers/lb2", &Value::Null)
            .await,
        204
    );
    let m = inner(&next_message(&chan, &queues[1]).await);
    assert_eq!(m["event_type"], "octavia.loadbalancer.delete.end");
    assert_eq!(
        m["publisher_id"],
        Value::Null,
        "Octavia sends a null publisher"
    );
}
