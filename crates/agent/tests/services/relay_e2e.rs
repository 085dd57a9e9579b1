//! An agent in relay mode end to end (root, the real RabbitMQ; DESIGN §17,
//! issue 23 item 3): the test is the relay — a `StreamWriter` on a stream
//! of this run's own writes a complete snapshot of a small topology — and
//! an agent process with no `openstack` section (and no `OS_*` variable)
//! boots from it. Its kernel `endpoints` map holds the snapshot's VM MACs;
//! a port published later is in the map within 3 s; its tombstone takes
//! it out after the ghost grace; a heartbeat sets the metadata age; the
//! tenant series equal the taps' interface counters; and the agent never
//! calls OpenStack (no API error series, no failed sync).
//!
//! The test's thread runs in a network namespace of its own, the broker's
//! loopback port forwarded into it.

use crate::common;

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::agent::{
    assert_series_match, endpoints_map, has_mac, traffic, wait_for_value, MAC_A, MAC_B, TENANT_A,
    TENANT_B,
};
use common::relay::now_ms;
use common::start_agent;
use lachesis_fleet::{encode, Entry, Heartbeat, Marker, Phase, Record};
use lachesis_lab::agent::{metric, Agent, AgentConfig, Tunables};
use lachesis_lab::http::{get, Forwarder};
use lachesis_lab::netns::{isolate, Lab};
use lachesis_lab::Services;
use lachesis_notify::rabbitmq::stream::{StreamConfig, StreamWriter};
use lachesis_notify::RabbitUrl;
use lachesis_planner::Resource;
use serde_json::{json, Value};

const RABBITMQ_PORT: u16 = 16672;
const ADMIN: &str = "0a000000000000000000000000000001";
const MAC_C: &str = "fa:16:3e:cc:00:03";

fn url() -> String {
    format!("amqp://guest:guest@127.0.0.1:{RABBITMQ_PORT}/%2f")
}

fn port(id: &str, tenant: &str, mac: &str, device: &str, ip: &str) -> Value {
    json!({"id": id, "network_id": "net-lab", "project_id": tenant, "mac_address": mac,
        "device_id": device, "device_owner": "compute:nova", "revision_number": 1,
        "fixed_ips": [{"subnet_id": "sub-lab", "ip_address": ip}]})
}

/// The snapshot's resources: two tenants' VMs on one shared network.
fn resources() -> Vec<(Resource, Value)> {
    vec![
        (
            Resource::Networks,
            json!({"id": "net-lab", "name": "lab", "project_id": ADMIN, "shared": true,
                "router:external": false, "revision_number": 1}),
        ),
        (
            Resource::Subnets,
            json!({"id": "sub-lab", "network_id": "net-lab", "project_id": ADMIN,
                "cidr": "10.77.0.0/24", "gateway_ip": null, "ip_version": 4, "revision_number": 1}),
        ),
        (
            Resource::Ports,
            port("p-a", TENANT_A, MAC_A, "vm-a", "10.77.0.1"),
        ),
        (
            Resource::Ports,
            port("p-b", TENANT_B, MAC_B, "vm-b", "10.77.0.2"),
        ),
        (
            Resource::Projects,
            json!({"id": TENANT_A, "name": "tenant-a"}),
        ),
        (
            Resource::Projects,
            json!({"id": TENANT_B, "name": "tenant-b"}),
        ),
        (
            Resource::Servers,
            json!({"id": "vm-a", "name": "a-web", "tenant_id": TENANT_A}),
        ),
        (
            Resource::Servers,
            json!({"id": "vm-b", "name": "b-app", "tenant_id": TENANT_B}),
        ),
    ]
}

fn entry(kind: Resource, body: &Value, rev: u64) -> Entry {
    let id = body["id"].as_str().unwrap();
    Entry::live(kind, id, rev, body)
}

/// The test's relay: a writer on a stream of this run's own.
struct Relay {
    runtime: tokio::runtime::Runtime,
    writer: StreamWriter,
    config: StreamConfig,
}

impl Relay {
    fn open(stream: &str) -> Relay {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let mut config = StreamConfig::new(RabbitUrl::parse(&url()).unwrap());
        stream.clone_into(&mut config.stream);
        let writer = runtime.block_on(StreamWriter::open(&config)).unwrap();
        Relay {
            runtime,
            writer,
            config,
        }
    }

    fn publish(&self, records: &[Record]) {
        let encoded: Vec<(String, Vec<u8>)> = records.iter().map(encode).collect();
        self.runtime
            .block_on(self.writer.publish_batch(&encoded))
            .unwrap();
    }

    /// A complete snapshot of [`resources`].
    fn snapshot(&self) {
        let marker = |phase| {
            Record::Marker(Marker {
                relay: "test-relay".into(),
                snapshot: "snap-1".into(),
                phase,
            })
        };
        let all = resources();
        let mut records = vec![marker(Phase::Start)];
        records.extend(
            all.iter()
                .map(|(kind, body)| Record::Entry(entry(*kind, body, 1).in_snapshot("snap-1"))),
        );
        records.push(marker(Phase::End {
            records: all.len() as u64,
        }));
        self.publish(&records);
    }

    /// Deletes the stream (it is durable: it would stay on the broker).
    fn delete(&self) {
        self.runtime.block_on(async {
            let c =
                lapin::Connection::connect(&url(), lapin::ConnectionProperties::default()).await;
            if let Ok(c) = c {
                if let Ok(chan) = c.create_channel().await {
                    let _ = chan
                        .queue_delete(
                            self.config.stream.as_str().into(),
                            lapin::options::QueueDeleteOptions::default(),
                        )
                        .await;
                }
            }
        });
    }
}

/// Waits until `present(mac)` is `want`; the time taken.
fn until_in_map(agent: &Agent, map: &str, mac: &str, want: bool, limit: Duration) -> Duration {
    let since = Instant::now();
    while has_mac(map, mac) != want {
        assert!(
            since.elapsed() < limit,
            "{mac} {} the endpoints map after {limit:?}; log:\n{}",
            if want { "never in" } else { "still in" },
            agent.log_text()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    since.elapsed()
}

#[test]
fn an_agent_in_relay_mode_boots_from_the_stream_and_never_calls_openstack() {
    lachesis_lab::require_root_for("network namespaces, BPF, RabbitMQ");
    let _services = Services::rabbitmq();
    let forwarder = Forwarder::start(RABBITMQ_PORT);
    isolate();
    forwarder.listen();
    let mut lab = Lab::new();
    let a = lab.add_vm(MAC_A.parse().unwrap(), Ipv4Addr::new(10, 77, 0, 1));
    let b = lab.add_vm(MAC_B.parse().unwrap(), Ipv4Addr::new(10, 77, 0, 2));
    lab.static_neighbours();
    let stream = format!("lachesis.relay-e2e.{}.{}", std::process::id(), lab.id());
    let relay = Relay::open(&stream);
    let dir = tempfile::tempdir().unwrap();
    let bpffs = PathBuf::from(format!(
        "/sys/fs/bpf/lachesis-relay-{}-{}",
        std::process::id(),
        lab.id()
    ));
    let _cleanup = Cleanup {
        bpffs: bpffs.clone(),
        relay: &relay,
    };
    relay.snapshot();

    // No openstack section at all; the agent's environment has no OS_*.
    let mut settings = AgentConfig::new("", Path::new(""), &bpffs, &dir.path().join("state.json"));
    settings.relay_stream = Some((url(), stream.clone()));
    settings.interface_prefixes = vec![format!("tap{}v", lab.id())];
    settings.flows_memory_budget_mib = Some(4);
    settings.tunables = Tunables::fast();
    settings.log_level = Some("info".to_owned());
    let m = settings.metrics;
    let config = dir.path().join("lachesis.yaml");
    settings.write(&config);
    let mut agent = start_agent(&config, dir.path().join("agent.log"));
    agent.wait_ready(m);
    assert_eq!(
        metric(m, "lachesis_degraded"),
        Some(0.0),
        "booted from the stream, not degraded"
    );

    // The snapshot's VMs are in the kernel.
    let map = endpoints_map(&bpffs);
    assert!(has_mac(&map, MAC_A) && has_mac(&map, MAC_B));
    assert_eq!(metric(m, "lachesis_stream_connected"), Some(1.0));
    assert_eq!(
        metric(m, "lachesis_stream_snapshots_total{outcome=\"complete\"}"),
        Some(1.0)
    );

    // A port published later reaches the kernel within 3 s; its tombstone
    // takes it out after the ghost grace (1 s) and a sweep.
    let new = port("p-c", TENANT_A, MAC_C, "vm-a", "10.77.0.3");
    let sent = Instant::now();
    relay.publish(&[Record::Entry(entry(Resource::Ports, &new, 1))]);
    let took = until_in_map(&agent, &map, MAC_C, true, Duration::from_secs(3));
    eprintln!(
        "relay mode: record to kernel in {took:?} (sent {:?} ago)",
        sent.elapsed()
    );
    relay.publish(&[Record::Entry(Entry::tombstone(Resource::Ports, "p-c", 2))]);
    until_in_map(&agent, &map, MAC_C, false, Duration::from_secs(10));
    assert!(has_mac(&map, MAC_A), "the snapshot's ports stay");

    // A heartbeat: the relay checked OpenStack 30 s ago.
    let at = now_ms();
    relay.publish(&[Record::Heartbeat(Heartbeat {
        relay: "test-relay".into(),
        at_ms: at,
        checked_ms: at - 30_000,
        digest: "0".into(),
        records: 8,
        snapshot: None,
    })]);
    wait_for_value(&agent, m, "lachesis_metadata_age_seconds", |age| {
        (30.0..60.0).contains(&age)
    });

    // Traffic accuracy: every tenant series equals its tap's counters.
    traffic(&a, &b, 0);
    assert_series_match(&agent, m, &a, &b, Duration::from_secs(20));

    // Nothing ever tried OpenStack.
    let (_, body) = get(m, "/metrics").unwrap();
    assert!(
        !body
            .lines()
            .any(|l| l.starts_with("lachesis_openstack_api_errors_total{")),
        "an OpenStack call failed:\n{body}"
    );
    assert_eq!(
        metric(m, "lachesis_reconcile_runs_total{result=\"sync_error\"}"),
        Some(0.0)
    );
    let log = agent.log_text();
    assert!(
        !log.contains("keystone") && !log.contains("clouds.yaml"),
        "{log}"
    );
    agent.stop();
}

/// This run's pins and stream, removed however the test ends.
struct Cleanup<'a> {
    bpffs: PathBuf,
    relay: &'a Relay,
}

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.bpffs);
        self.relay.delete();
    }
}
