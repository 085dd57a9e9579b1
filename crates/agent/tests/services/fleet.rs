//! Fleet mode end to end (root, the services tier's RabbitMQ; DESIGN §17,
//! issue 23): the simulator, the real `lachesis relay` and five agent
//! processes, each in a network namespace of its own (its own lab of VM
//! taps, bpffs dir, state file, a 4 MiB flows budget), all with
//! `metadata.source: relay`, no `openstack` section and no credential,
//! reading one stream of this run's own.
//!
//! 1. Boot: every agent's kernel `endpoints` map holds its VMs' MACs,
//!    learnt through the stream only.
//! 2. A port created in the simulator reaches every agent's map within
//!    3 s (the map holds every binding of the plan, not only the node's
//!    taps).
//! 3. The OpenStack requests and bytes that event costs come from the
//!    relay's client only and are the same with 2 agents and with 5.
//! 4. A router interface (ids-only `router.interface.create`, which the
//!    relay must GET) reaches every agent's committed plan (`router_macs`
//!    of `/debug/plan`) within 3 s, at the same cost with 2 and 5 agents.
//! 5. The relay killed (SIGKILL): agent 0 keeps counting (its tenant series equal
//!    its taps' counters), the metadata age rises, nobody calls OpenStack;
//!    the relay restarted: every agent converges on a port made meanwhile.
//! 6. A `port.create.end` the simulator drops is healed by the relay's
//!    digest (every 2 s from the restart on).
//! 7. A `port.delete.end` the simulator drops: the digest's tombstone takes
//!    the port's MAC out of every agent's map.
//! 8. OpenStack unreachable (every API connection closed unanswered): an
//!    agent killed and its state file removed boots from the stream alone
//!    (ready, not degraded, a port made while it was down in its map), no
//!    agent calls OpenStack; then OpenStack comes back.
//! 9. A broker restart: the agents reconnect and a port made afterwards
//!    reaches them, with no OpenStack request from an agent.
//! 10. A real Prometheus, scraping the relay and the agents since phase 4,
//!     answers every panel and variable of the fleet dashboard, and shows
//!     on its panels each failure of 5-9.
//!
//! Phases 2-4 run with a relay whose digest is 10 minutes away, so every
//! request in an event's window is the event's; the restarted relay digests
//! every 2 s for phases 6-8.
//!
//! The test's thread stays in the machine's namespace (simulator, relay,
//! broker); each agent's namespace is held by a handle and entered by a
//! helper thread for each thing done there (starting the agent, reading
//! its listeners, traffic), the broker's port forwarded into it and its
//! metrics listener forwarded out of it for Prometheus.

use crate::common;

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::agent::{
    assert_series_match, endpoints_map, has_mac, topology_head, traffic, Totals, TENANT_A, TENANT_B,
};
use common::prometheus::{Dashboards, Prometheus};
use common::relay::{write_config, Relay, StreamGuard, BROKER};
use common::{start_agent, Sim};
use lachesis_lab::agent::{metric, Agent, AgentConfig, Tunables};
use lachesis_lab::http::{forward, free_port, get, Forwarder};
use lachesis_lab::netns::{Lab, Netns, Vm};
use lachesis_lab::services::RABBITMQ_PORT;
use lachesis_lab::traffic::counters;
use lachesis_lab::Services;
use serde_json::Value;

const AGENTS: usize = 5;
/// The agents the first measurement runs with.
const FEW: usize = 2;
/// The relay's client in `/sim/stats`: the `sim` cloud's admin user.
const RELAY_CLIENT: &str = "user/u-admin";
const ADMIN: &str = "0a000000000000000000000000000001";
/// Agent 0's second VM (tenant B's), for traffic between two tenants.
const MAC_SECOND: &str = "fa:16:3e:f2:00:00";
const IP_SECOND: Ipv4Addr = Ipv4Addr::new(10, 88, 0, 100);

fn vm_mac(k: usize) -> String {
    format!("fa:16:3e:f1:00:{k:02x}")
}

fn vm_ip(k: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 88, 0, 10 + u8::try_from(k).unwrap())
}

fn tenant(k: usize) -> &'static str {
    if k.is_multiple_of(2) {
        TENANT_A
    } else {
        TENANT_B
    }
}

fn port_line(id: &str, project: &str, mac: &str, device: &str, ip: Ipv4Addr) -> String {
    format!(
        "  - {{id: {id}, network_id: net-fleet, project_id: {project}, mac_address: '{mac}', \
         device_id: {device}, device_owner: compute:nova, \
         fixed_ips: [{{subnet_id: sub-fleet, ip_address: {ip}}}]}}\n"
    )
}

/// One shared network with a VM port per agent (and agent 0's second
/// VM), a router with no interface yet, and two subnets to plug into it.
fn topology() -> String {
    let server = |id: &str, t: &str| format!("  - {{id: {id}, name: {id}, tenant_id: {t}}}\n");
    let ports: String = (0..AGENTS)
        .map(|k| {
            port_line(
                &format!("p-vm-{k}"),
                tenant(k),
                &vm_mac(k),
                &format!("vm-{k}"),
                vm_ip(k),
            )
        })
        .chain([port_line(
            "p-second",
            TENANT_B,
            MAC_SECOND,
            "vm-second",
            IP_SECOND,
        )])
        .collect();
    let servers: String = (0..AGENTS)
        .map(|k| server(&format!("vm-{k}"), tenant(k)))
        .chain([server("vm-second", TENANT_B)])
        .collect();
    let side = |n: u8| {
        format!(
            "  - {{id: sub-side{n}, network_id: net-side, project_id: {TENANT_A}, \
             cidr: 10.89.{n}.0/24, gateway_ip: 10.89.{n}.1}}\n"
        )
    };
    topology_head()
        + &format!(
            "networks:\n\
             \x20 - {{id: net-fleet, name: fleet, project_id: {ADMIN}, shared: true}}\n\
             \x20 - {{id: net-side, name: side, project_id: {TENANT_A}}}\n\
             subnets:\n\
             \x20 - {{id: sub-fleet, network_id: net-fleet, project_id: {ADMIN}, cidr: 10.88.0.0/24, gateway_ip: null}}\n\
             {}{}\
             routers:\n\
             \x20 - {{id: r-fleet, name: fleet, project_id: {TENANT_A}}}\n\
             ports:\n{ports}servers:\n{servers}",
            side(2),
            side(5)
        )
}

/// One agent in a network namespace of its own: its lab (the VM taps), its
/// pins, state file and listeners. Dropped: the agent killed, the lab's
/// namespaces and links deleted, the pins removed.
struct Node {
    agent: Agent,
    metrics: SocketAddr,
    debug: SocketAddr,
    bpffs: PathBuf,
    /// The id of the kernel `endpoints` map, once ready.
    map: String,
    vms: Vec<Vm>,
    lab: Option<Lab>,
    ns: Netns,
    /// Its configuration, state file and logs.
    dir: tempfile::TempDir,
}

impl Node {
    /// Agent `k`'s namespace, lab and process (not waited for).
    fn start(k: usize, stream: &str) -> Node {
        let mut wanted = vec![(vm_mac(k), vm_ip(k))];
        if k == 0 {
            wanted.push((MAC_SECOND.to_owned(), IP_SECOND));
        }
        let forwarder = Forwarder::start(RABBITMQ_PORT);
        let ns = Netns::fresh();
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state.json");
        let (lab, vms, settings) = ns.run(|| {
            forwarder.listen();
            let mut lab = Lab::new();
            let vms: Vec<Vm> = wanted
                .iter()
                .map(|(mac, ip)| lab.add_vm(mac.parse().unwrap(), *ip))
                .collect();
            lab.static_neighbours();
            let bpffs = PathBuf::from(format!(
                "/sys/fs/bpf/lachesis-fleet-{}-{}",
                std::process::id(),
                lab.id()
            ));
            // No openstack section at all; the environment has no OS_*.
            let mut s = AgentConfig::new("", Path::new(""), &bpffs, &state);
            s.relay_stream = Some((BROKER.to_owned(), stream.to_owned()));
            s.interface_prefixes = vec![format!("tap{}v", lab.id())];
            s.flows_memory_budget_mib = Some(4);
            s.tunables = Tunables::fast();
            s.log_level = Some("info".to_owned());
            (lab, vms, s)
        });
        let config = dir.path().join("lachesis.yaml");
        settings.write(&config);
        let log = dir.path().join("agent.log");
        let agent = ns.run(|| start_agent(&config, log));
        Node {
            agent,
            metrics: settings.metrics,
            debug: settings.debug,
            bpffs: settings.bpffs_dir,
            map: String::new(),
            vms,
            lab: Some(lab),
            ns,
            dir,
        }
    }

    /// SIGKILL, and its state file removed: a restart has nothing to boot
    /// degraded from.
    fn kill_and_forget(&mut self) {
        let _ = self.agent.child.kill();
        let _ = self.agent.child.wait();
        std::fs::remove_file(self.dir.path().join("state.json")).expect("its state file");
    }

    /// Starts it again on its configuration (not waited for); `log` names
    /// the new standard-error file.
    fn restart(&mut self, log: &str) {
        let (config, log) = (
            self.dir.path().join("lachesis.yaml"),
            self.dir.path().join(log),
        );
        self.agent = self.ns.run(|| start_agent(&config, log));
    }

    /// Its metrics listener as a loopback port of the machine's namespace
    /// (where Prometheus runs): each connection is made from a thread in
    /// the agent's namespace. The thread lives as long as the test process.
    fn exposed(&self) -> SocketAddr {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let addr = listener.local_addr().unwrap();
        let target = self.metrics;
        // Threads inherit the namespace of the thread that spawns them.
        self.ns.run(move || {
            std::thread::spawn(move || forward(&listener, target));
        });
        addr
    }

    /// Waits for `/readyz`, then finds its `endpoints` map; the time from
    /// its start.
    fn ready(&mut self) -> Duration {
        let took = self.ns.run(|| {
            self.agent.wait_ready_polling(
                self.metrics,
                Duration::from_millis(20),
                Duration::from_mins(1),
            )
        });
        self.map = endpoints_map(&self.bpffs);
        took
    }

    fn metric(&self, series: &str) -> Option<f64> {
        self.ns.run(|| metric(self.metrics, series))
    }

    /// The router MACs of its committed plan (`/debug/plan`).
    fn router_macs(&self) -> Vec<String> {
        let Some((200, body)) = self.ns.run(|| get(self.debug, "/debug/plan")) else {
            return Vec::new();
        };
        let plan: Value = serde_json::from_str(&body).unwrap();
        plan["router_macs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["mac"].as_str().unwrap().to_owned())
            .collect()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.agent.child.kill();
        let _ = self.agent.child.wait();
        if let Some(lab) = self.lab.take() {
            // Its bridge is in the agent's namespace.
            self.ns.run(move || drop(lab));
        }
        let _ = std::fs::remove_dir_all(&self.bpffs);
    }
}

/// Polls every node until `seen` holds for it, failing after `limit`;
/// prints and returns the time each took from `since`.
fn until_all(
    nodes: &[Node],
    what: &str,
    since: Instant,
    limit: Duration,
    seen: impl Fn(&Node) -> bool,
) -> Vec<Duration> {
    let mut took: Vec<Option<Duration>> = vec![None; nodes.len()];
    loop {
        for (node, t) in nodes.iter().zip(took.iter_mut()) {
            if t.is_none() && seen(node) {
                *t = Some(since.elapsed());
            }
        }
        if took.iter().all(Option::is_some) {
            let took: Vec<Duration> = took.into_iter().flatten().collect();
            eprintln!(
                "{what}: at {} agents in {took:?} (worst {:?}, bound {limit:?})",
                nodes.len(),
                took.iter().max().unwrap()
            );
            return took;
        }
        if since.elapsed() > limit {
            let missing: Vec<usize> = (0..nodes.len()).filter(|&k| took[k].is_none()).collect();
            panic!(
                "{what}: agents {missing:?} not within {limit:?}; agent {}'s log:\n{}",
                missing[0],
                nodes[missing[0]].agent.log_text()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Every agent's map holds `mac` within `limit` of `since`.
fn in_every_map(nodes: &[Node], mac: &str, what: &str, since: Instant, limit: Duration) {
    until_all(nodes, what, since, limit, |n| has_mac(&n.map, mac));
}

/// Requests and response bytes by client.
type Load = BTreeMap<String, (u64, u64)>;

/// `/sim/stats`, summed per client over every endpoint.
fn load(sim: &Sim) -> Load {
    let (_, body) = get(sim.addr.parse().unwrap(), "/sim/stats").expect("GET /sim/stats");
    let stats: Value = serde_json::from_str(&body).unwrap();
    let sum = |m: &Value| -> u64 {
        m.as_object()
            .map_or(0, |m| m.values().map(|v| v.as_u64().unwrap()).sum())
    };
    stats["clients"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(client, t)| {
            (
                client.clone(),
                (sum(&t["requests"]), sum(&t["response_bytes"])),
            )
        })
        .collect()
}

/// What each client added since `before` (those that added nothing left
/// out).
fn added(before: &Load, after: &Load) -> Load {
    after
        .iter()
        .filter_map(|(client, &(r, b))| {
            let (r0, b0) = before.get(client).copied().unwrap_or_default();
            (r > r0 || b > b0).then(|| (client.clone(), (r - r0, b - b0)))
        })
        .collect()
}

/// Only the relay's client ever appears in `/sim/stats`.
fn only_the_relay(load: &Load, when: &str) {
    assert!(
        load.keys().all(|c| c == RELAY_CLIENT),
        "{when}: a client other than the relay's called OpenStack: {load:?}"
    );
}

/// Polls `done` on the relay every 50 ms until it holds, failing with
/// `what` and the relay's log after `limit`; how long it took.
fn until_relay(
    relay: &Relay,
    what: &str,
    limit: Duration,
    done: impl Fn(&Relay) -> bool,
) -> Duration {
    let since = Instant::now();
    while !done(relay) {
        assert!(
            since.elapsed() < limit,
            "{what}; the relay's log:\n{}",
            relay.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    since.elapsed()
}

fn ok(status: u16, what: &str) {
    assert!((200..300).contains(&status), "{what}: {status}");
}

/// Posts a VM port `id` with `mac` on the fleet network.
fn create_port(sim: &Sim, id: &str, mac: &str, ip: &str) {
    let body = format!(
        r#"{{"id": "{id}", "network_id": "net-fleet", "project_id": "{TENANT_A}", "mac_address": "{mac}", "device_id": "vm-{id}", "device_owner": "compute:nova", "fixed_ips": [{{"subnet_id": "sub-fleet", "ip_address": "{ip}"}}]}}"#
    );
    ok(sim.control("POST", "/sim/ports", &body), "create port");
}

/// What one event cost OpenStack, by client: from just before it to half
/// a second after every agent had it (a request it caused late counts).
fn cost_of(sim: &Sim, event: impl FnOnce()) -> Load {
    let before = load(sim);
    event();
    std::thread::sleep(Duration::from_millis(500));
    added(&before, &load(sim))
}

/// Phases 2-4 at the current number of agents: a port and a router
/// interface, each to every agent within 3 s; their costs.
fn events(sim: &Sim, nodes: &[Node]) -> (Load, Load) {
    let n = nodes.len();
    let mac = format!("fa:16:3e:e0:00:{n:02x}");
    let port = cost_of(sim, || {
        let sent = Instant::now();
        create_port(
            sim,
            &format!("p-event-{n}"),
            &mac,
            &format!("10.88.0.{}", 200 + n),
        );
        in_every_map(
            nodes,
            &mac,
            "port created → every kernel map",
            sent,
            Duration::from_secs(3),
        );
    });
    let rmac = format!("fa:16:3e:e1:00:{n:02x}");
    let interface = cost_of(sim, || {
        let body = format!(r#"{{"subnet_id": "sub-side{n}", "mac_address": "{rmac}"}}"#);
        let sent = Instant::now();
        ok(
            sim.control("POST", "/sim/routers/r-fleet/interfaces", &body),
            "add a router interface",
        );
        until_all(
            nodes,
            "router interface → every committed plan",
            sent,
            Duration::from_secs(3),
            |node| node.router_macs().contains(&rmac),
        );
    });
    eprintln!("OpenStack cost at {n} agents: port {port:?}, router interface {interface:?}");
    only_the_relay(&port, "the port event");
    only_the_relay(&interface, "the router interface event");
    (port, interface)
}

/// Starts agents `from..to`, waits for each and holds the boot to the
/// stream: its VMs' MACs in its map, not degraded, connected.
fn boot(nodes: &mut Vec<Node>, to: usize, stream: &str) {
    let from = nodes.len();
    let started = Instant::now();
    nodes.extend((from..to).map(|k| Node::start(k, stream)));
    for node in &mut nodes[from..] {
        node.ready();
    }
    eprintln!("agents {from}..{to} ready in {:?}", started.elapsed());
    for (k, node) in nodes.iter().enumerate().skip(from) {
        for vm in &node.vms {
            assert!(
                has_mac(&node.map, &vm.mac.to_string()),
                "agent {k}: {} not in its map",
                vm.mac
            );
        }
        assert_eq!(
            node.metric("lachesis_degraded"),
            Some(0.0),
            "agent {k} booted from the stream"
        );
        assert_eq!(
            node.metric("lachesis_stream_connected"),
            Some(1.0),
            "agent {k}"
        );
    }
}

/// Each agent's `lachesis_metadata_age_seconds`.
fn ages(nodes: &[Node]) -> Vec<f64> {
    nodes
        .iter()
        .map(|n| {
            n.metric("lachesis_metadata_age_seconds")
                .expect("metadata age")
        })
        .collect()
}

/// Traffic between agent 0's two VMs (of tenants A and B), held to the
/// taps' counters; returns tenant A's bytes as the agent exports them.
fn counted(node: &Node, round: u16) -> u64 {
    let (a, b) = (&node.vms[0], &node.vms[1]);
    node.ns.run(|| {
        traffic(a, b, round);
        assert_series_match(&node.agent, node.metrics, a, b, Duration::from_secs(20));
        let t = Totals::from_tap(counters(a));
        t.tx_bytes + t.rx_bytes
    })
}

/// The run's world: broker, simulator, relay and the agents so far.
/// Dropped in the order of the fields: Prometheus, the agents and their
/// labs, the relay, the stream, the simulator, then the broker.
struct Rig {
    prometheus: Option<Prometheus>,
    nodes: Vec<Node>,
    relay: Relay,
    metrics: SocketAddr,
    _stream: StreamGuard,
    stream: String,
    sim: Sim,
    dir: tempfile::TempDir,
    services: Services,
}

impl Rig {
    /// The simulator and a relay whose digest is 10 minutes away, so an
    /// event's window holds only the event's requests.
    fn new() -> Rig {
        lachesis_lab::require_root_for("network namespaces, BPF, RabbitMQ");
        let services = Services::rabbitmq();
        let dir = tempfile::tempdir().unwrap();
        let topo = dir.path().join("topology.yaml");
        std::fs::write(&topo, topology()).unwrap();
        let sim = Sim::start_topology(&topo, &["--rabbitmq-url", BROKER]);
        let stream = format!("lachesis.fleet.{}", std::process::id());
        let metrics = SocketAddr::from((Ipv4Addr::LOCALHOST, free_port()));
        let quiet = write_config(dir.path(), &sim, &stream, metrics, "10m");
        let relay = Relay::start(&quiet, dir.path().join("relay.log"), metrics);
        Rig {
            prometheus: None,
            nodes: Vec::new(),
            relay,
            metrics,
            _stream: StreamGuard(stream.clone()),
            stream,
            sim,
            dir,
            services,
        }
    }

    /// 1-4 with two agents, then with five: the same cost per event.
    fn scale(&mut self) {
        boot(&mut self.nodes, FEW, &self.stream);
        let few = events(&self.sim, &self.nodes);
        boot(&mut self.nodes, AGENTS, &self.stream);
        let many = events(&self.sim, &self.nodes);
        eprintln!(
            "OpenStack cost per event (requests, bytes), {FEW} → {AGENTS} agents: \
             port {:?} → {:?}, router interface {:?} → {:?}",
            few.0, many.0, few.1, many.1
        );
        assert_eq!(few.0, many.0, "a port event's cost grew with the agents");
        assert_eq!(
            few.1, many.1,
            "a router interface's cost grew with the agents"
        );
        for (what, cost) in [("port", &many.0), ("router interface", &many.1)] {
            let requests = cost.get(RELAY_CLIENT).map_or(0, |c| c.0);
            assert!(requests <= 2, "{what}: {requests} requests for one event");
        }
    }

    /// A real Prometheus scraping the relay (job `lachesis-relay`, as
    /// deploy/prometheus's rules expect; it keeps its scrape connection
    /// open, and the test's own reads of the relay are answered beside it)
    /// and every agent (job
    /// `lachesis`, each through a port forwarded out of its namespace),
    /// from here on.
    fn watch(&mut self) {
        let agents: Vec<SocketAddr> = self.nodes.iter().map(Node::exposed).collect();
        let prometheus =
            Prometheus::start_jobs(&[("lachesis", &agents), ("lachesis-relay", &[self.metrics])]);
        // Its first scrapes come seconds after it is ready: the failures
        // to come must find it scraping.
        let every = AGENTS + 1;
        prometheus.wait_for(&format!("count(up == 1) == {every}"), |r| !r.is_empty());
        self.prometheus = Some(prometheus);
    }

    /// 5. The relay killed: counting goes on, the age rises, nobody asks
    ///    OpenStack; a port made meanwhile arrives once it is back (digesting
    ///    every 2 s from then on).
    fn relay_outage(&mut self) {
        let (sim, nodes) = (&self.sim, &self.nodes);
        let before_kill = counted(&nodes[0], 0);
        // The relay's first heartbeat (every 10 s) sets every age.
        let beat = Instant::now();
        until_all(
            nodes,
            "a heartbeat → every metadata age",
            beat,
            Duration::from_secs(20),
            |n| {
                n.metric("lachesis_metadata_age_seconds")
                    .is_some_and(f64::is_finite)
            },
        );
        self.relay.kill();
        let killed = Instant::now();
        let at_kill = load(sim);
        let young = ages(nodes);
        create_port(sim, "p-meanwhile", "fa:16:3e:e2:00:01", "10.88.0.230");
        let after_kill = counted(&nodes[0], 1);
        std::thread::sleep(Duration::from_secs(3).saturating_sub(killed.elapsed()));
        let old = ages(nodes);
        let waited = killed.elapsed().as_secs_f64();
        eprintln!(
            "relay down {waited:.1}s: agent 0 counted tenant A {before_kill} → {after_kill} bytes; \
             metadata ages {young:?} → {old:?}"
        );
        assert!(after_kill > before_kill);
        for (k, (y, o)) in young.iter().zip(&old).enumerate() {
            assert!(
                o - y >= waited - 1.5,
                "agent {k}: age {y} → {o} over {waited:.1}s"
            );
        }
        assert_eq!(
            added(&at_kill, &load(sim)),
            Load::new(),
            "a request while the relay was down"
        );
        for (k, node) in nodes.iter().enumerate() {
            assert!(
                !has_mac(&node.map, "fa:16:3e:e2:00:01"),
                "agent {k} has a port nobody relayed"
            );
        }
        let digesting = write_config(self.dir.path(), sim, &self.stream, self.metrics, "2s");
        let restarted = Instant::now();
        self.relay = Relay::start(&digesting, self.dir.path().join("relay2.log"), self.metrics);
        in_every_map(
            nodes,
            "fa:16:3e:e2:00:01",
            "relay restarted → a port made meanwhile",
            restarted,
            Duration::from_secs(30),
        );
    }

    /// 6. A lost notification, healed by the digest (2 s).
    fn lost_notification(&self) {
        let fault = r#"{"notification_faults": {"rules": [{"event_type": "port.create.end", "probability": 1.0, "action": "drop"}]}}"#;
        ok(
            self.sim.control("PUT", "/sim/settings", fault),
            "fault injection",
        );
        let dropped = Instant::now();
        create_port(&self.sim, "p-dropped", "fa:16:3e:e3:00:01", "10.88.0.231");
        in_every_map(
            &self.nodes,
            "fa:16:3e:e3:00:01",
            "notification dropped → healed by the digest",
            dropped,
            Duration::from_secs(10),
        );
        let no_faults = r#"{"notification_faults": {"rules": []}}"#;
        ok(
            self.sim.control("PUT", "/sim/settings", no_faults),
            "clearing the faults",
        );
        let repaired = metric(
            self.relay.metrics,
            "lachesis_relay_repaired_total{action=\"get\"}",
        );
        eprintln!("the relay's digest repairs by GET: {repaired:?}");
        assert!(repaired >= Some(1.0), "repaired: {repaired:?}");
    }

    /// 7. A lost delete: the port of phase 6 deleted with its
    ///    `port.delete.end` dropped; the digest's tombstone takes its MAC
    ///    out of every kernel map (after the agents' 1 s ghost grace).
    fn lost_delete(&self) {
        let fault = r#"{"notification_faults": {"rules": [{"event_type": "port.delete.end", "probability": 1.0, "action": "drop"}]}}"#;
        ok(
            self.sim.control("PUT", "/sim/settings", fault),
            "fault injection",
        );
        let dropped_before = self.dropped_notifications();
        let deleted = Instant::now();
        ok(
            self.sim.control("DELETE", "/sim/ports/p-dropped", ""),
            "delete a port",
        );
        until_all(
            &self.nodes,
            "delete dropped → tombstoned by the digest",
            deleted,
            Duration::from_secs(10),
            |n| !has_mac(&n.map, "fa:16:3e:e3:00:01"),
        );
        let no_faults = r#"{"notification_faults": {"rules": []}}"#;
        ok(
            self.sim.control("PUT", "/sim/settings", no_faults),
            "clearing the faults",
        );
        assert_eq!(
            self.dropped_notifications(),
            dropped_before + 1,
            "the simulator dropped the port.delete.end"
        );
        let tombstones = metric(
            self.relay.metrics,
            "lachesis_relay_repaired_total{action=\"tombstone\"}",
        );
        eprintln!("the relay's digest repairs by tombstone: {tombstones:?}");
        assert!(tombstones >= Some(1.0), "tombstones: {tombstones:?}");
    }

    /// `notifications.dropped` of `/sim/stats`.
    fn dropped_notifications(&self) -> u64 {
        let (_, body) = get(self.sim.addr.parse().unwrap(), "/sim/stats").expect("GET /sim/stats");
        let stats: Value = serde_json::from_str(&body).unwrap();
        stats["notifications"]["dropped"].as_u64().unwrap()
    }

    /// 8. OpenStack unreachable (the simulator closes every API connection
    ///    unanswered), the relay failing its digests: agent 1 killed, its
    ///    state file removed, restarted, boots from the stream alone — ready,
    ///    not degraded, its map holding a port made while it was down (whole
    ///    in its notification, so the relay needs no GET for it). No agent
    ///    calls OpenStack; then OpenStack comes back and the relay's digest
    ///    succeeds again.
    fn restart_without_openstack(&mut self) {
        const NODE: usize = 1;
        const MAC: &str = "fa:16:3e:e5:00:01";
        let errors = |relay: &Relay| {
            metric(relay.metrics, "lachesis_relay_openstack_errors_total").expect("relay errors")
        };
        let before = errors(&self.relay);
        ok(
            self.sim
                .control("PUT", "/sim/faults", r#"{"endpoint": "*", "drop": true}"#),
            "OpenStack unreachable",
        );
        let took = until_relay(
            &self.relay,
            "the relay never failed to reach OpenStack",
            Duration::from_secs(10),
            |r| errors(r) > before,
        );
        eprintln!("OpenStack unreachable: the relay's first failure after {took:?}");
        let at_cut = load(&self.sim);
        self.nodes[NODE].kill_and_forget();
        let made = Instant::now();
        create_port(&self.sim, "p-offline", MAC, "10.88.0.233");
        let node = &mut self.nodes[NODE];
        node.restart("agent-restarted.log");
        let ready = node.ready();
        eprintln!("agent {NODE} restarted without OpenStack or its state file: ready in {ready:?}");
        assert_eq!(node.metric("lachesis_degraded"), Some(0.0), "agent {NODE}");
        let complete = node.metric("lachesis_stream_snapshots_total{outcome=\"complete\"}");
        assert!(
            complete >= Some(1.0),
            "agent {NODE} ready before a complete snapshot: {complete:?}"
        );
        for vm in &node.vms {
            assert!(
                has_mac(&node.map, &vm.mac.to_string()),
                "agent {NODE}: {}",
                vm.mac
            );
        }
        assert!(
            !has_mac(&node.map, "fa:16:3e:e3:00:01"),
            "agent {NODE} has the port phase 7 deleted"
        );
        in_every_map(
            &self.nodes,
            MAC,
            "a port made with OpenStack unreachable → every map (agent 1's restarted meanwhile)",
            made,
            Duration::from_secs(15),
        );
        let during = added(&at_cut, &load(&self.sim));
        eprintln!("OpenStack load while unreachable: {during:?}");
        only_the_relay(&during, "OpenStack unreachable");
        ok(
            self.sim.control("DELETE", "/sim/faults", ""),
            "OpenStack back",
        );
        let digests_ok = |relay: &Relay| {
            metric(
                relay.metrics,
                "lachesis_relay_digests_total{outcome=\"ok\"}",
            )
            .unwrap_or(0.0)
        };
        let digests = digests_ok(&self.relay);
        let took = until_relay(
            &self.relay,
            "no digest succeeded after OpenStack came back",
            Duration::from_secs(30),
            |r| digests_ok(r) > digests,
        );
        eprintln!("OpenStack back: a digest succeeded after {took:?}");
    }

    /// 9. A broker restart: the agents resume, still without OpenStack.
    fn broker_restart(&self) {
        let (sim, nodes) = (&self.sim, &self.nodes);
        let at_stop = load(sim);
        let stopped = Instant::now();
        self.services.stop_broker();
        until_all(
            nodes,
            "broker stopped → every agent disconnected",
            stopped,
            Duration::from_secs(30),
            |n| n.metric("lachesis_stream_connected") == Some(0.0),
        );
        self.services.start_broker();
        eprintln!("broker stopped and started in {:?}", stopped.elapsed());
        let after = Instant::now();
        create_port(sim, "p-after", "fa:16:3e:e4:00:01", "10.88.0.232");
        in_every_map(
            nodes,
            "fa:16:3e:e4:00:01",
            "broker restarted → a port made afterwards",
            after,
            Duration::from_mins(1),
        );
        let during = added(&at_stop, &load(sim));
        eprintln!("OpenStack load over the broker restart: {during:?}");
        only_the_relay(&during, "the broker restart");
        for (k, node) in nodes.iter().enumerate() {
            assert_eq!(
                node.metric("lachesis_stream_connected"),
                Some(1.0),
                "agent {k}"
            );
        }
    }

    /// 10. The fleet dashboard (deploy/grafana, tagged `fleet`) against
    ///     what Prometheus scraped: every panel query and variable returns
    ///     data, and the failures of 5-9 show on the panels docs/fleet.md
    ///     "When something fails" names.
    fn dashboard(&self) {
        let prometheus = self.prometheus.as_ref().expect("watched");
        let started = Instant::now();
        Dashboards::Fleet.hold(prometheus);
        let shown = [
            (
                "the relay killed",
                "Relays up",
                r#"min_over_time(up{job="lachesis-relay"}[10m]) == 0"#.to_owned(),
            ),
            (
                "a lost notification",
                "What digests and resyncs repaired",
                r#"increase(lachesis_relay_repaired_total{action="get"}[10m]) > 0"#.to_owned(),
            ),
            (
                "a lost delete",
                "What digests and resyncs repaired",
                r#"increase(lachesis_relay_repaired_total{action="tombstone"}[10m]) > 0"#
                    .to_owned(),
            ),
            (
                "OpenStack unreachable",
                "OpenStack and stream errors",
                "increase(lachesis_relay_openstack_errors_total[10m]) > 0".to_owned(),
            ),
            (
                "the broker restarted (every node)",
                "Stream connected per node",
                format!("count(min_over_time(lachesis_stream_connected[10m]) == 0) == {AGENTS}"),
            ),
        ];
        let panels: Vec<String> = Dashboards::Fleet
            .queries()
            .into_iter()
            .map(|(_, panel, _)| panel)
            .collect();
        for (failure, panel, expr) in shown {
            assert!(panels.iter().any(|p| p == panel), "no panel {panel:?}");
            eprintln!("{failure} on the fleet dashboard's {panel:?}: {expr}");
            prometheus.wait_for(&expr, |r| !r.is_empty());
        }
        eprintln!(
            "the fleet dashboard's panels, variables and failures held in {:?}",
            started.elapsed()
        );
    }
}

#[test]
fn five_agents_follow_one_relay_and_openstack_does_not_see_them() {
    let mut rig = Rig::new();
    rig.scale();
    rig.watch();
    rig.relay_outage();
    rig.lost_notification();
    rig.lost_delete();
    rig.restart_without_openstack();
    rig.broker_restart();
    rig.dashboard();
    only_the_relay(&load(&rig.sim), "the whole run");
}
