//! `lachesis relay` against Debian's real Keystone and Neutron (issue 23):
//! the relay, with the tier's application credential and Neutron's own
//! oslo notifications on the tier's RabbitMQ, writes a complete snapshot
//! holding exactly the ports Neutron lists; a port created through the
//! real API reaches the stream through Neutron's notification, with the
//! revision Neutron gave it, and its deletion is a tombstone.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::{Duration, Instant};

use lachesis_fleet::Assembler;
use lachesis_lab::http::free_port;
use lachesis_lab::services::RABBITMQ_PORT;
use lachesis_notify::rabbitmq::stream::StreamConfig;
use lachesis_notify::RabbitUrl;
use lachesis_planner::Resource;
use serde_json::json;

use super::harness::{id, Admin, Built, NEUTRON};
use crate::common::relay::{delete_stream, held, open_when_declared, read_until, Relay};

pub async fn follows_a_port_through_the_real_api(admin: &Admin, built: &Built, clouds: &Path) {
    let dir = tempfile::tempdir().unwrap();
    let broker = format!("rabbit://guest:guest@127.0.0.1:{RABBITMQ_PORT}/");
    let stream = format!("lt-real-relay-{}", std::process::id());
    let metrics = SocketAddr::from((Ipv4Addr::LOCALHOST, free_port()));
    let config = dir.path().join("relay.yaml");
    std::fs::write(
        &config,
        format!(
            "openstack:\n  cloud: lt-appcred\n  clouds_file: {clouds}\n\
             listen:\n  metrics: {metrics}\n\
             notifications:\n  rabbitmq:\n    url: \"{broker}\"\n\
             stream:\n  url: \"{broker}\"\n  stream: {stream}\n  max_age: 10m\n\
             relay:\n  name: real-relay\n  digest_interval: 1m\n\
             log:\n  level: info\n",
            clouds = clouds.display()
        ),
    )
    .unwrap();
    let mut relay = Relay::start(&config, dir.path().join("relay.log"), metrics);
    let mut cfg = StreamConfig::new(RabbitUrl::parse(&broker).unwrap());
    cfg.stream.clone_from(&stream);
    let mut reader = open_when_declared(&cfg, Duration::from_mins(1), &relay).await;
    let mut asm = Assembler::new();
    read_until(
        &mut reader,
        &mut asm,
        Duration::from_mins(1),
        "a complete snapshot",
        &relay,
        |a, _| a.ready(),
    )
    .await;
    let neutron_ports = |listed: Vec<serde_json::Value>| {
        listed
            .iter()
            .map(|p| p["id"].as_str().unwrap().to_owned())
            .collect::<std::collections::BTreeSet<String>>()
    };
    assert_eq!(
        held(&asm, Resource::Ports),
        neutron_ports(admin.list("ports").await),
        "the snapshot's ports are Neutron's"
    );

    // A port created through the real API: Neutron's port.create.end.
    let created_at = Instant::now();
    let port = admin
        .post(
            &format!("{NEUTRON}/ports"),
            json!({"port": {"network_id": built.shared, "name": "lt-relay-port",
                "mac_address": "fa:16:3e:5e:1a:01"}}),
        )
        .await;
    let port_id = id(&port, "port");
    let revision = port["port"]["revision_number"].as_u64().unwrap();
    read_until(
        &mut reader,
        &mut asm,
        Duration::from_secs(10),
        "the created port's record",
        &relay,
        |a, _| held(a, Resource::Ports).contains(&port_id),
    )
    .await;
    eprintln!(
        "real Neutron port created → relay record on the stream: {:.2}s",
        created_at.elapsed().as_secs_f64()
    );
    let key = lachesis_fleet::Key::new(Resource::Ports, port_id.clone());
    let rev = asm.state().get(&key).unwrap().rev;
    assert!(
        rev >= revision,
        "the record's revision {rev} is Neutron's ({revision}) or later"
    );

    // Its deletion: Neutron's port.delete.end, a tombstone.
    admin.delete(&format!("{NEUTRON}/ports/{port_id}")).await;
    read_until(
        &mut reader,
        &mut asm,
        Duration::from_secs(10),
        "the deleted port's tombstone",
        &relay,
        |a, _| !held(a, Resource::Ports).contains(&port_id),
    )
    .await;
    assert!(
        asm.state().get(&key).unwrap().body.is_none(),
        "a tombstone, not a gap"
    );

    relay.kill();
    drop(reader);
    delete_stream(&stream)
        .await
        .expect("delete the test's stream");
}
