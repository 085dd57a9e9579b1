//! The simulator publishes the same oslo notifications to a Kafka topic; read
//! back from a real Kafka-protocol broker (tansu, started by
//! `scripts/real-cloud up-kafka` on a private loopback port). Root only;
//! fails loudly when the broker cannot run.

use crate::common;

use std::time::{Duration, Instant};

use lachesis_sim::notify::KafkaTarget;
use lachesis_sim::SimOptions;
use reqwest::Method;
use rskafka::client::partition::UnknownTopicHandling;
use serde_json::{json, Value};

const BROKER: &str = "127.0.0.1:19092";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutations_publish_to_the_kafka_topic() {
    let _broker = lachesis_lab::Services::kafka();
    let client = rskafka::client::ClientBuilder::new(vec![BROKER.into()])
        .build()
        .await
        .unwrap();
    let partition = client
        .partition_client("notifications.info", 0, UnknownTopicHandling::Retry)
        .await
        .unwrap();
    let (_, start) = partition.fetch_records(0, 1..1_000_000, 100).await.unwrap();

    let sim = common::example_sim(SimOptions {
        kafka: Some(KafkaTarget {
            brokers: vec![BROKER.into()],
            topic: "notifications.info".into(),
            host: "simhost".into(),
        }),
        ..SimOptions::default()
    })
    .await;
    let ctl = common::Control::of(&sim);
    let owner = json!({"device_owner": "compute:az2"});
    assert_eq!(ctl.send(Method::PATCH, "ports/p-vm-a2", &owner).await, 200);
    let project = "projects/0b0000000000000000000000000000bb";
    assert_eq!(ctl.send(Method::DELETE, project, &Value::Null).await, 204);

    let mut got: Vec<Value> = Vec::new();
    let mut offset = start;
    let deadline = Instant::now() + Duration::from_secs(15);
    while got.len() < 2 {
        assert!(
            Instant::now() < deadline,
            "only {} of 2 notifications within 15 s: {got:?}",
            got.len()
        );
        let (records, _) = partition
            .fetch_records(offset, 1..1_000_000, 500)
            .await
            .unwrap();
        for r in records {
            offset = r.offset + 1;
            let envelope: Value =
                serde_json::from_slice(r.record.value.as_deref().unwrap()).unwrap();
            assert_eq!(envelope["oslo.version"], "2.0");
            got.push(serde_json::from_str(envelope["oslo.message"].as_str().unwrap()).unwrap());
        }
    }
    assert_eq!(got[0]["event_type"], "port.update.end");
    assert_eq!(got[0]["publisher_id"], "network.simhost");
    assert_eq!(got[0]["payload"]["port"]["device_owner"], "compute:az2");
    assert_eq!(got[1]["event_type"], "identity.project.deleted");
    assert_eq!(got[1]["publisher_id"], "identity.simhost");
    assert_eq!(
        got[1]["payload"]["resource_info"],
        "0b0000000000000000000000000000bb"
    );
}
