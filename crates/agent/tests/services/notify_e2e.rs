//! Notifications end to end (root, brokers): the simulator publishes an
//! oslo notification for each mutation of its control API, the agent's
//! consumer turns it into a kick, and the new port's binding appears in the
//! kernel's `endpoints` map (read with bpftool) within 3 s, with a
//! reconcile interval of 5 minutes so only the notification can explain it.
//! With the broker down, the next reconcile tick picks the port up instead.
//! The event-to-kernel latency of 20 ports is printed per transport.
//!
//! The test's thread runs in a network namespace of its own (the agent
//! owns every program of ours in its namespace), so the broker's loopback
//! port is forwarded into it by a thread left in the original namespace.

use crate::common;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::agent::{endpoints_map, has_mac, topology_head, MAC_A, TENANT_A as TENANT};
use common::{start_agent, Sim};
use lachesis_lab::agent::{metric, Agent, AgentConfig};
use lachesis_lab::http::Forwarder;
use lachesis_lab::netns::{isolate, Lab};
use lachesis_lab::Services;

const RABBITMQ_PORT: u16 = 16672;
const KAFKA_PORT: u16 = 19092;

/// A broker, as the simulator and the agent are pointed at it.
#[derive(Clone, Copy)]
enum Broker {
    RabbitMq,
    Kafka,
}

impl Broker {
    fn label(self) -> &'static str {
        match self {
            Broker::RabbitMq => "rabbitmq",
            Broker::Kafka => "kafka",
        }
    }

    fn services(self) -> Services {
        match self {
            Broker::RabbitMq => Services::rabbitmq(),
            Broker::Kafka => Services::kafka(),
        }
    }

    fn port(self) -> u16 {
        match self {
            Broker::RabbitMq => RABBITMQ_PORT,
            Broker::Kafka => KAFKA_PORT,
        }
    }

    fn sim_args(self) -> Vec<String> {
        match self {
            Broker::RabbitMq => vec![
                "--rabbitmq-url".into(),
                format!("amqp://guest:guest@127.0.0.1:{RABBITMQ_PORT}/%2f"),
            ],
            Broker::Kafka => vec!["--kafka-broker".into(), format!("127.0.0.1:{KAFKA_PORT}")],
        }
    }

    /// Points the agent's consumer at this broker.
    fn configure(self, agent: &mut AgentConfig) {
        match self {
            Broker::RabbitMq => {
                agent.rabbitmq_url =
                    Some(format!("amqp://guest:guest@127.0.0.1:{RABBITMQ_PORT}/%2f"));
            }
            Broker::Kafka => agent.kafka_brokers = vec![format!("127.0.0.1:{KAFKA_PORT}")],
        }
    }
}

/// One project, one network and subnet, VM A's port (its tap is the
/// lab's: the agent attaches to it, which is how its maps are found).
fn topology() -> String {
    topology_head()
        + &format!(
            r"networks:
  - {{id: net-lab, name: lab, project_id: {TENANT}}}
subnets:
  - {{id: sub-lab, network_id: net-lab, project_id: {TENANT}, cidr: 10.77.0.0/24, gateway_ip: null}}
ports:
  - {{id: p-a, network_id: net-lab, project_id: {TENANT}, mac_address: '{MAC_A}', device_id: vm-a, device_owner: compute:nova, fixed_ips: [{{subnet_id: sub-lab, ip_address: 10.77.0.1}}]}}
servers:
  - {{id: vm-a, name: a-web, tenant_id: {TENANT}}}
"
        )
}

/// The world of one test: broker, namespace, lab, simulator, agent.
struct Rig {
    agent: Agent,
    sim: Sim,
    metrics: SocketAddr,
    bpffs: PathBuf,
    broker: Broker,
    services: Services,
    _dir: tempfile::TempDir,
    _lab: Lab,
}

impl Rig {
    /// `broker_up`: whether the broker runs when the agent starts.
    fn new(broker: Broker, reconcile_interval: Duration, broker_up: bool) -> Rig {
        lachesis_lab::require_root_for("network namespaces, BPF, brokers");
        let services = broker.services();
        if !broker_up {
            services.stop_broker();
        }
        let forwarder = Forwarder::start(broker.port());
        isolate();
        forwarder.listen();
        let mut lab = Lab::new();
        lab.add_vm(MAC_A.parse().unwrap(), Ipv4Addr::new(10, 77, 0, 1));
        let dir = tempfile::tempdir().unwrap();
        let topo = dir.path().join("topology.yaml");
        std::fs::write(&topo, topology()).unwrap();
        let args = broker.sim_args();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let sim = Sim::start_topology(&topo, &args);
        let clouds = sim.clouds_yaml(dir.path(), |t| t);
        let bpffs = PathBuf::from(format!(
            "/sys/fs/bpf/lachesis-notify-{}-{}",
            std::process::id(),
            lab.id()
        ));
        let mut settings = AgentConfig::new("sim", &clouds, &bpffs, &dir.path().join("state.json"));
        settings.interface_prefixes = vec![format!("tap{}v", lab.id())];
        settings.flows_memory_budget_mib = Some(4);
        settings.tunables.reconcile_interval = Some(reconcile_interval);
        settings.log_level = Some("info".to_owned());
        broker.configure(&mut settings);
        let metrics = settings.metrics;
        let config = dir.path().join("lachesis.yaml");
        settings.write(&config);
        let mut agent = start_agent(&config, dir.path().join("agent.log"));
        agent.wait_ready(metrics);
        Rig {
            agent,
            sim,
            metrics,
            bpffs,
            broker,
            services,
            _dir: dir,
            _lab: lab,
        }
    }

    fn series(&self, family: &str) -> String {
        format!("{family}{{transport=\"{}\"}}", self.broker.label())
    }

    /// The value of one of the transport's notification series.
    fn value(&self, family: &str) -> Option<f64> {
        metric(self.metrics, &self.series(family))
    }

    fn wait_connected(&self, up: bool) {
        let want = if up { 1.0 } else { 0.0 };
        let until = Instant::now() + Duration::from_mins(1);
        while self.value("lachesis_notifications_connected") != Some(want) {
            assert!(
                Instant::now() < until,
                "{} connected never {want}; log:\n{}",
                self.broker.label(),
                self.agent.log_text()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Posts a new port with `mac` on the lab network, returning when the
    /// simulator answered (its notification is queued by then).
    fn create_port(&self, n: u8, mac: &str) {
        let body = format!(
            r#"{{"id": "p-new-{n}", "network_id": "net-lab", "project_id": "{TENANT}", "mac_address": "{mac}", "device_id": "vm-new-{n}", "device_owner": "compute:nova", "fixed_ips": [{{"subnet_id": "sub-lab", "ip_address": "10.77.0.{}"}}]}}"#,
            u16::from(n) + 100
        );
        let status = self.sim.control("POST", "/sim/ports", &body);
        assert!((200..300).contains(&status), "create port: {status}");
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        // Only this run's pins (the agent leaves `flows` pinned by design).
        let _ = std::fs::remove_dir_all(&self.bpffs);
    }
}

/// Polls the map every 10 ms until `mac` is in it; the time taken.
fn time_until_present(
    rig: &Rig,
    map: &str,
    mac: &str,
    since: Instant,
    limit: Duration,
) -> Duration {
    loop {
        if has_mac(map, mac) {
            return since.elapsed();
        }
        assert!(
            since.elapsed() < limit,
            "{mac} not in the kernel's endpoints map within {limit:?} ({}); log:\n{}",
            rig.broker.label(),
            rig.agent.log_text()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// 20 ports, each in the kernel within 3 s of the simulator's answer with
/// a 5-minute reconcile interval; prints the median and the worst.
fn ports_reach_the_kernel_through_notifications(broker: Broker) {
    let rig = Rig::new(broker, Duration::from_mins(5), true);
    rig.wait_connected(true);
    let map = endpoints_map(&rig.bpffs);
    assert!(has_mac(&map, MAC_A), "the cold start's binding is there");
    let runs_before = metric(rig.metrics, "lachesis_reconcile_runs_total{result=\"ok\"}");
    let mut latencies = Vec::new();
    for n in 0..20u8 {
        let mac = format!("fa:16:3e:cc:00:{n:02x}");
        assert!(!has_mac(&map, &mac));
        let sent = Instant::now();
        rig.create_port(n, &mac);
        latencies.push(time_until_present(
            &rig,
            &map,
            &mac,
            sent,
            Duration::from_secs(3),
        ));
    }
    latencies.sort();
    eprintln!(
        "event-to-kernel latency via {} over {} ports: median {:?}, worst {:?}",
        broker.label(),
        latencies.len(),
        latencies[latencies.len() / 2],
        latencies[latencies.len() - 1]
    );
    let kicked = rig.value("lachesis_notifications_kicked_total").unwrap();
    assert!(kicked >= 20.0, "kicked {kicked}");
    let runs = metric(rig.metrics, "lachesis_reconcile_runs_total{result=\"ok\"}");
    assert!(runs > runs_before, "passes ran: {runs_before:?} → {runs:?}");
    assert_eq!(
        rig.value("lachesis_notifications_gap_kicks_total"),
        Some(0.0)
    );
}

/// With the broker down, nothing is notified: the port arrives with the
/// next tick of a 2-second interval, and the consumer connects once the
/// broker is back.
fn with_the_broker_down_the_next_tick_picks_the_port_up(broker: Broker) {
    let rig = Rig::new(broker, Duration::from_secs(2), false);
    rig.wait_connected(false);
    let map = endpoints_map(&rig.bpffs);
    let mac = "fa:16:3e:dd:00:01";
    let sent = Instant::now();
    rig.create_port(1, mac);
    let took = time_until_present(&rig, &map, mac, sent, Duration::from_secs(10));
    eprintln!(
        "{}: broker down, port in the kernel after {took:?} (tick 2 s)",
        broker.label()
    );
    assert_eq!(
        rig.value("lachesis_notifications_received_total"),
        Some(0.0)
    );
    assert_eq!(rig.value("lachesis_notifications_kicked_total"), Some(0.0));
    rig.services.start_broker();
    rig.wait_connected(true);
}

#[test]
fn rabbitmq_notifications_bring_a_new_port_to_the_kernel_within_3s() {
    ports_reach_the_kernel_through_notifications(Broker::RabbitMq);
}

#[test]
fn kafka_notifications_bring_a_new_port_to_the_kernel_within_3s() {
    ports_reach_the_kernel_through_notifications(Broker::Kafka);
}

#[test]
fn rabbitmq_down_the_next_tick_picks_the_port_up() {
    with_the_broker_down_the_next_tick_picks_the_port_up(Broker::RabbitMq);
}

#[test]
fn kafka_down_the_next_tick_picks_the_port_up() {
    with_the_broker_down_the_next_tick_picks_the_port_up(Broker::Kafka);
}
