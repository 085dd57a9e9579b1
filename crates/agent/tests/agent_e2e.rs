//! `lachesis agent` end to end (root): the simulator plays the cloud, two
//! network namespaces play VMs behind taps carrying the simulated ports'
//! MACs, and the agent runs as a child process with a per-run bpffs
//! directory, state file and listener ports. Truth is independent: every
//! tenant series on /metrics must equal the taps' own interface counters.
//!
//! Each test first moves its own thread into a fresh network namespace, so
//! the lab's bridge and taps, the simulator and the agent (children inherit
//! the thread's namespace) live there: the agent, which owns every program
//! of ours in its namespace (DESIGN §4.4), never sees another test's taps.

mod common;

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use common::e2e::{
    bpftool, free_port, get, get_as, isolate, metadata_maps, pinned_links, sample, topology_head,
    Agent, MAC_A, TENANT_A, TENANT_B,
};
use common::Sim;
use lachesis_lab::netns::{IfCounters, Lab, Vm, VmTraffic};

const MAC_B: &str = "fa:16:3e:bb:00:02";

/// Two tenants, one shared network in the lab's /24, one VM port each.
fn topology() -> String {
    topology_head()
        + &format!(
            r#"networks:
  - {{id: net-lab, name: lab, project_id: 0a000000000000000000000000000001, shared: true}}
subnets:
  - {{id: sub-lab, network_id: net-lab, project_id: 0a000000000000000000000000000001, cidr: 10.77.0.0/24, gateway_ip: null}}
ports:
  - {{id: p-a, network_id: net-lab, project_id: {TENANT_A}, mac_address: "{MAC_A}", device_id: vm-a, device_owner: compute:nova, fixed_ips: [{{subnet_id: sub-lab, ip_address: 10.77.0.1}}]}}
  - {{id: p-b, network_id: net-lab, project_id: {TENANT_B}, mac_address: "{MAC_B}", device_id: vm-b, device_owner: compute:nova, fixed_ips: [{{subnet_id: sub-lab, ip_address: 10.77.0.2}}]}}
servers:
  - {{id: vm-a, name: a-web, tenant_id: {TENANT_A}}}
  - {{id: vm-b, name: b-app, tenant_id: {TENANT_B}}}
"#
        )
}

/// Everything one agent instance needs, all names unique to this run.
struct Setup {
    dir: tempfile::TempDir,
    config: PathBuf,
    metrics: SocketAddr,
    debug: SocketAddr,
    bpffs: PathBuf,
}

impl Setup {
    fn new(lab: &Lab, sim: &Sim) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let clouds = sim.clouds_yaml(dir.path(), |t| t);
        let metrics = SocketAddr::from((Ipv4Addr::LOCALHOST, free_port()));
        let debug = SocketAddr::from((Ipv4Addr::LOCALHOST, free_port()));
        let bpffs = PathBuf::from(format!(
            "/sys/fs/bpf/lachesis-e2e-{}-{}",
            std::process::id(),
            lab.id()
        ));
        let text = format!(
            "openstack:\n  cloud: sim\n  clouds_file: {clouds}\n\
             listen:\n  metrics: {metrics}\n  debug: {debug}\n\
             datapath:\n  interface_prefixes: [tap{id}v]\n  bpffs_dir: {bpffs}\n  flows_memory_budget: 4MiB\n\
             state:\n  path: {state}\n\
             tunables:\n  scrape_interval: 200ms\n  state_flush_interval: 300ms\n  reconcile_interval: 5m\n  ghost_grace: 1s\n  ghost_sweep_interval: 500ms\n",
            clouds = clouds.display(),
            id = lab.id(),
            bpffs = bpffs.display(),
            state = dir.path().join("state.json").display(),
        );
        let config = dir.path().join("lachesis.yaml");
        std::fs::write(&config, text).unwrap();
        Setup {
            dir,
            config,
            metrics,
            debug,
            bpffs,
        }
    }

    fn log(&self, n: usize) -> PathBuf {
        self.dir.path().join(format!("agent-{n}.log"))
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        // Only this run's pins (the agent leaves `flows` pinned by design).
        let _ = std::fs::remove_dir_all(&self.bpffs);
    }
}

/// A tap's counters from this thread's namespace (`/proc/thread-self`;
/// sysfs shows the namespace it was mounted in).
fn counters(vm: &Vm) -> IfCounters {
    let text = std::fs::read_to_string("/proc/thread-self/net/dev").unwrap();
    let line = text
        .lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{}:", vm.tap)))
        .unwrap_or_else(|| panic!("{} not in /proc/thread-self/net/dev", vm.tap));
    let f: Vec<u64> = line
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect();
    IfCounters {
        rx_bytes: f[0],
        rx_packets: f[1],
        tx_bytes: f[8],
        tx_packets: f[9],
    }
}

/// Bytes and packets per direction of one VM, as the VM sees them.
type Totals = VmTraffic;

/// `lachesis_tenant_{bytes,packets}_total` summed per direction and the
/// values of `labels` (joined by `/`).
fn totals_by(body: &str, labels: &[&str]) -> BTreeMap<String, Totals> {
    let mut out: BTreeMap<String, Totals> = BTreeMap::new();
    for line in body.lines() {
        let (family, rest) = match line.split_once('{') {
            Some((f, r))
                if f == "lachesis_tenant_bytes_total" || f == "lachesis_tenant_packets_total" =>
            {
                (f, r)
            }
            _ => continue,
        };
        let (series, value) = rest.rsplit_once("} ").unwrap();
        let value: u64 = value.trim().parse().unwrap();
        let label = |name: &str| {
            series
                .split(',')
                .find_map(|kv| kv.strip_prefix(&format!("{name}=\"")))
                .map(|v| v.trim_end_matches('"').to_owned())
                .unwrap()
        };
        let key: Vec<String> = labels.iter().map(|l| label(l)).collect();
        let t = out.entry(key.join("/")).or_default();
        match (family, label("direction").as_str()) {
            ("lachesis_tenant_bytes_total", "tx") => t.tx_bytes += value,
            ("lachesis_tenant_bytes_total", "rx") => t.rx_bytes += value,
            ("lachesis_tenant_packets_total", "tx") => t.tx_packets += value,
            ("lachesis_tenant_packets_total", "rx") => t.rx_packets += value,
            other => panic!("unexpected series {other:?}"),
        }
    }
    out
}

/// Pings and a TCP exchange of known sizes, both directions.
fn traffic(a: &Vm, b: &Vm, round: u16) {
    a.exec(&[
        "ping",
        "-q",
        "-c",
        "5",
        "-i",
        "0.01",
        "-s",
        "1000",
        &b.ip.to_string(),
    ])
    .unwrap();
    b.exec(&["ping", "-q", "-c", "3", "-i", "0.01", &a.ip.to_string()])
        .unwrap();
    let addr = SocketAddr::from((b.ip, 41000 + round));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let server = b.run(move || {
        let l = TcpListener::bind(addr).unwrap();
        ready_tx.send(()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        let mut data = Vec::new();
        s.read_to_end(&mut data).unwrap();
        s.write_all(&vec![7u8; 128 * 1024]).unwrap();
        data.len()
    });
    ready_rx.recv().unwrap();
    let client = a.run(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(&vec![9u8; 512 * 1024]).unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let mut back = Vec::new();
        s.read_to_end(&mut back).unwrap();
        back.len()
    });
    assert_eq!(client.join().unwrap(), 128 * 1024);
    assert_eq!(server.join().unwrap(), 512 * 1024);
    wait_quiet(&[a, b]);
}

/// Returns once the taps' counters stopped moving (three still polls).
fn wait_quiet(vms: &[&Vm]) {
    let mut last: Vec<IfCounters> = vms.iter().map(|v| counters(v)).collect();
    let mut still = 0;
    for _ in 0..200 {
        std::thread::sleep(Duration::from_millis(50));
        let now: Vec<IfCounters> = vms.iter().map(|v| counters(v)).collect();
        still = if now == last { still + 1 } else { 0 };
        if still == 3 {
            return;
        }
        last = now;
    }
    panic!("interface counters never stopped moving");
}

/// Polls /metrics until both tenants' series equal their taps' counters
/// (series show the last flush); fails with both sides after `limit`.
fn assert_series_match(agent: &Agent, metrics: SocketAddr, a: &Vm, b: &Vm, limit: Duration) {
    assert_series_match_with(agent, metrics, a, b, limit, false);
}

/// [`assert_series_match`]; `zero_unknown`: an `unknown` tenant holding
/// no byte and no packet is tolerated (the ghost sweep's final readings
/// create one; see the sweep test).
fn assert_series_match_with(
    agent: &Agent,
    metrics: SocketAddr,
    a: &Vm,
    b: &Vm,
    limit: Duration,
    zero_unknown: bool,
) {
    let ignore = if zero_unknown {
        empty_unknown
    } else {
        |_: &str, _: &Totals| false
    };
    assert_tenants(agent, metrics, limit, ignore, &["tenant_id"], || {
        BTreeMap::from([
            (TENANT_A.to_owned(), Totals::from_tap(counters(a))),
            (TENANT_B.to_owned(), Totals::from_tap(counters(b))),
        ])
    });
}

/// An `unknown` tenant series holding no byte and no packet.
fn empty_unknown(key: &str, totals: &Totals) -> bool {
    key.starts_with("unknown") && *totals == Totals::default()
}

/// Polls /metrics until the tenant series, summed by `labels` (see
/// [`totals_by`]) less those `ignore` drops, equal `want()` (read afresh
/// at each poll); fails with both sides after `limit`.
fn assert_tenants(
    agent: &Agent,
    metrics: SocketAddr,
    limit: Duration,
    ignore: fn(&str, &Totals) -> bool,
    labels: &[&str],
    want: impl Fn() -> BTreeMap<String, Totals>,
) {
    let until = Instant::now() + limit;
    loop {
        let want = want();
        let mut got = get(metrics, "/metrics").map(|(_, body)| totals_by(&body, labels));
        if let Some(g) = got.as_mut() {
            g.retain(|k, v| !ignore(k, v));
        }
        if got.as_ref() == Some(&want) {
            return;
        }
        assert!(
            Instant::now() < until,
            "tenant series never equalled the tap counters:\n got {got:?}\nwant {want:?}\nlog:\n{}",
            agent.log_text()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Polls /metrics until it holds the line `sample` (value included).
fn wait_for_sample(agent: &Agent, metrics: SocketAddr, sample: &str) {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let body = get(metrics, "/metrics").map(|(_, b)| b).unwrap_or_default();
        if body.lines().any(|l| l == sample) {
            return;
        }
        assert!(
            Instant::now() < until,
            "never saw {sample:?} on /metrics:\n{body}\nlog:\n{}",
            agent.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Polls [`sample`] until `ok` holds for its value, which it returns.
fn wait_for_value(
    agent: &Agent,
    metrics: SocketAddr,
    series: &str,
    ok: impl Fn(f64) -> bool,
) -> f64 {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let value = sample(metrics, series);
        if let Some(v) = value.filter(|v| ok(*v)) {
            return v;
        }
        assert!(
            Instant::now() < until,
            "{series} never reached the expected value (last {value:?}); log:\n{}",
            agent.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Every sample of the ledger's byte and packet counters (all four
/// levels), by series.
fn counter_series(metrics: SocketAddr) -> BTreeMap<String, u64> {
    let (_, body) = get(metrics, "/metrics").unwrap();
    let out: BTreeMap<String, u64> = body
        .lines()
        .filter(|l| {
            let family = l.split('{').next().unwrap_or("");
            ["bytes_total", "packets_total"]
                .iter()
                .any(|f| family.starts_with("lachesis_") && family.ends_with(f))
        })
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').unwrap();
            (series.to_owned(), value.parse().unwrap())
        })
        .collect();
    assert!(
        out.keys()
            .any(|k| k.starts_with("lachesis_port_bytes_total{")),
        "{body}"
    );
    out
}

/// Polls `done` for up to 20 s; fails naming `what`.
fn wait_until(agent: &Agent, what: &str, done: impl Fn() -> bool) {
    let until = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(
            Instant::now() < until,
            "never: {what}; log:\n{}",
            agent.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

const RUNS_OK: &str = "lachesis_reconcile_runs_total{result=\"ok\"}";
const RUNS_SYNC_ERROR: &str = "lachesis_reconcile_runs_total{result=\"sync_error\"}";
const RUNS_APPLY_ERROR: &str = "lachesis_reconcile_runs_total{result=\"apply_error\"}";

/// One test's world, in a network namespace of its own: the lab's two
/// VMs, the simulator serving their ports, and an agent configuration.
struct Rig {
    a: Vm,
    b: Vm,
    sim: Sim,
    // Dropped in this order: pins, then the simulator's scratch, then the lab.
    setup: Setup,
    _scratch: tempfile::TempDir,
    _lab: Lab,
}

impl Rig {
    fn new() -> Rig {
        Rig::serving(&topology(), Ipv4Addr::new(10, 77, 0, 2))
    }

    /// [`Rig::new`] with the simulator serving `topology`, and VM B at
    /// `b_ip` (VM A is at 10.77.0.1; both on the lab's /24).
    fn serving(topology: &str, b_ip: Ipv4Addr) -> Rig {
        lachesis_lab::require_root();
        isolate();
        let mut lab = Lab::new();
        let a = lab.add_vm(MAC_A.parse().unwrap(), Ipv4Addr::new(10, 77, 0, 1));
        let b = lab.add_vm(MAC_B.parse().unwrap(), b_ip);
        lab.static_neighbours();
        let scratch = tempfile::tempdir().unwrap();
        let topo = scratch.path().join("topology.yaml");
        std::fs::write(&topo, topology).unwrap();
        let sim = Sim::start_topology(&topo, &[]);
        let setup = Setup::new(&lab, &sim);
        Rig {
            a,
            b,
            sim,
            setup,
            _scratch: scratch,
            _lab: lab,
        }
    }

    /// Replaces `from` (which must be there) with `to` in the agent's
    /// configuration file.
    fn tune(&self, from: &str, to: &str) {
        let text = std::fs::read_to_string(&self.setup.config).unwrap();
        assert!(text.contains(from), "{from:?} not in\n{text}");
        std::fs::write(&self.setup.config, text.replace(from, to)).unwrap();
    }

    /// Agent instance `n`, once `/readyz` answers 200.
    fn ready_agent(&self, n: usize) -> Agent {
        let mut agent = Agent::start(&self.setup.config, self.setup.log(n));
        agent.wait_ready(self.setup.metrics);
        agent
    }

    /// Agent 0 counts traffic round 0 and stops.
    fn first_life(&self) {
        let first = self.ready_agent(0);
        self.traffic_counted(&first, 0);
        stop(first);
    }

    /// Traffic round `round`, then the series checked against the taps.
    fn traffic_counted(&self, agent: &Agent, round: u16) {
        traffic(&self.a, &self.b, round);
        self.assert_counted(agent);
    }

    fn assert_counted(&self, agent: &Agent) {
        assert_series_match(
            agent,
            self.setup.metrics,
            &self.a,
            &self.b,
            Duration::from_secs(20),
        );
    }
}

/// SIGTERM, then exit status 0.
fn stop(mut agent: Agent) -> Agent {
    agent.signal(libc::SIGTERM);
    let status = agent.wait(Duration::from_secs(20));
    assert_eq!(status.code(), Some(0), "log:\n{}", agent.log_text());
    agent
}

/// The daemon's own families in an OpenMetrics body must render as
/// docs/metrics.md documents them.
fn assert_own_families_documented(metrics: SocketAddr) {
    let ours = [
        "lachesis_boot_phase",
        "lachesis_degraded",
        "lachesis_config_reloads",
    ];
    let family_of = |l: &str| -> String {
        let l = ["# TYPE ", "# HELP "]
            .iter()
            .find_map(|p| l.strip_prefix(p))
            .unwrap_or(l);
        let name = l.split([' ', '{']).next().unwrap_or("");
        name.strip_suffix("_total").unwrap_or(name).to_owned()
    };
    let (_, body) = get_as(metrics, "/metrics", "application/openmetrics-text").unwrap();
    let own: String = body
        .lines()
        .filter(|l| ours.contains(&family_of(l).as_str()))
        .flat_map(|l| [l, "\n"])
        .collect();
    let rendered = lachesis_lab::catalogue::rendered(&own, "agent");
    let documented = lachesis_lab::catalogue::documented();
    for name in [
        "lachesis_boot_phase",
        "lachesis_degraded",
        "lachesis_config_reloads_total",
    ] {
        assert_eq!(rendered.get(name), documented.get(name), "{name}");
    }
}

#[test]
fn cold_start_counts_every_tap_byte_and_sigterm_exits_zero_with_state_flushed() {
    let rig = Rig::new();
    let setup = &rig.setup;
    let agent = rig.ready_agent(0);
    let (_, body) = get(setup.metrics, "/metrics").unwrap();
    assert!(
        body.contains("lachesis_boot_phase{phase=\"running\"} 1"),
        "{body}"
    );
    assert!(body.contains("lachesis_degraded 0"), "{body}");
    assert_own_families_documented(setup.metrics);
    rig.traffic_counted(&agent, 0);

    // The debug listener shows the plan and the flows, attributed.
    let (code, plan) = get(setup.debug, "/debug/plan").unwrap();
    assert_eq!(code, 200, "{plan}");
    assert!(plan.contains(MAC_A) && plan.contains(MAC_B), "{plan}");
    let (code, flows) = get(setup.debug, "/debug/flows").unwrap();
    assert_eq!(code, 200, "{flows}");
    assert!(
        flows.contains(TENANT_A) && flows.contains(TENANT_B),
        "{flows}"
    );

    // SIGHUP: a valid change is applied, an unknown key rejected whole.
    let text = std::fs::read_to_string(&setup.config).unwrap();
    let faster = text.replace("scrape_interval: 200ms", "scrape_interval: 100ms");
    std::fs::write(&setup.config, faster).unwrap();
    agent.signal(libc::SIGHUP);
    wait_for_sample(
        &agent,
        setup.metrics,
        "lachesis_config_reloads_total{result=\"ok\"} 1",
    );
    std::fs::write(&setup.config, format!("{text}  scrape_intervall: 1s\n")).unwrap();
    agent.signal(libc::SIGHUP);
    wait_for_sample(
        &agent,
        setup.metrics,
        "lachesis_config_reloads_total{result=\"invalid\"} 1",
    );
    assert!(
        agent.log_text().contains("scrape_intervall"),
        "{}",
        agent.log_text()
    );
    // Still counting with the reloaded tunables.
    rig.traffic_counted(&agent, 1);

    let agent = stop(agent);
    let log = agent.log_text();
    for phase in [
        "bpf_loaded",
        "metadata_ready",
        "attached",
        "state_restored",
        "running",
    ] {
        assert!(
            log.contains(&format!("phase=\"{phase}\"")),
            "no log line for phase {phase}:\n{log}"
        );
    }
    assert!(setup.dir.path().join("state.json").exists());
    // `flows` stays pinned for the next instance.
    assert!(std::fs::read_dir(&setup.bpffs).unwrap().next().is_some());
}

#[test]
fn sigkill_under_traffic_then_restart_keeps_totals_equal_to_the_tap_counters() {
    let rig = Rig::new();
    let mut first = rig.ready_agent(0);
    rig.traffic_counted(&first, 0);
    // Traffic on another thread; the agent dies in the middle of it.
    let (ta, tb) = (rig.a.clone(), rig.b.clone());
    let during = std::thread::spawn(move || traffic(&ta, &tb, 1));
    std::thread::sleep(Duration::from_millis(30));
    first.signal(libc::SIGKILL);
    first.wait(Duration::from_secs(10));
    during.join().unwrap();
    traffic(&rig.a, &rig.b, 2); // counted by the programs left attached

    let second = rig.ready_agent(1);
    rig.traffic_counted(&second, 3);
    // The second life counted on in the first one's pinned `flows` map.
    assert!(
        second.log_text().contains("flows_pin=Reused"),
        "{}",
        second.log_text()
    );
    stop(second);
}

#[test]
fn neutron_down_at_boot_with_a_state_file_boots_degraded_and_keeps_counting() {
    let rig = Rig::new();
    rig.first_life();

    rig.sim.fail("ports");
    let second = rig.ready_agent(1);
    wait_for_sample(&second, rig.setup.metrics, "lachesis_degraded 1");
    assert!(
        second.log_text().contains("booting degraded"),
        "{}",
        second.log_text()
    );
    rig.traffic_counted(&second, 1);

    // Neutron back: a retried pass commits and degraded mode ends.
    assert!((200..300).contains(&rig.sim.control("DELETE", "/sim/faults", "")));
    wait_for_sample(&second, rig.setup.metrics, "lachesis_degraded 0");
    rig.traffic_counted(&second, 2);
    stop(second);
}

#[test]
fn a_port_deleted_while_the_agent_was_down_is_a_ghost_swept_with_its_bytes_kept() {
    let rig = Rig::new();
    rig.first_life();
    let (_, before) = get(rig.setup.metrics, "/metrics").unwrap_or_default();
    assert!(before.is_empty(), "the first agent's listener is gone");

    assert!((200..300).contains(&rig.sim.control("DELETE", "/sim/ports/p-b", "")));
    let second = rig.ready_agent(1);
    // B's binding is no longer desired: a ghost, then swept after its grace.
    wait_for_sample(&second, rig.setup.metrics, "lachesis_ghost_bindings 1");
    wait_for_sample(&second, rig.setup.metrics, "lachesis_ghost_bindings 0");
    // Nothing moved: both tenants keep exactly what their taps counted,
    // and no byte went to `unknown` (the sweep leaves a zero-valued
    // `unknown` series behind: tolerated here, reported).
    let m = rig.setup.metrics;
    assert_series_match_with(&second, m, &rig.a, &rig.b, Duration::from_secs(20), true);
    stop(second);
}

#[test]
fn neutron_500_at_boot_without_a_state_file_attaches_nothing_until_it_recovers() {
    let rig = Rig::new();
    rig.sim.fail("ports");
    let agent = Agent::start(&rig.setup.config, rig.setup.log(0));
    let m = rig.setup.metrics;
    // Retried with backoff (1 s, then 2 s): at least two failed attempts.
    let until = Instant::now() + Duration::from_secs(20);
    while agent.log_text().matches("cold start sync failed").count() < 2 {
        assert!(
            Instant::now() < until,
            "no retries; log:\n{}",
            agent.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    wait_for_sample(&agent, m, "lachesis_boot_phase{phase=\"bpf_loaded\"} 1");
    wait_for_sample(&agent, m, "lachesis_attached_interfaces 0");
    let (code, why) = get(m, "/readyz").unwrap();
    assert_eq!(code, 503, "{why}");
    assert!(
        !agent.log_text().contains("attached ifname"),
        "{}",
        agent.log_text()
    );

    assert!((200..300).contains(&rig.sim.control("DELETE", "/sim/faults", "")));
    let mut agent = agent;
    agent.wait_ready(m);
    rig.traffic_counted(&agent, 0);
    stop(agent);
}

#[test]
fn neutron_500_at_runtime_is_a_sync_error_that_leaves_the_kernel_untouched() {
    let rig = Rig::new();
    rig.tune("reconcile_interval: 5m", "reconcile_interval: 1s");
    let agent = rig.ready_agent(0);
    let (m, debug) = (rig.setup.metrics, rig.setup.debug);
    wait_for_value(&agent, m, RUNS_OK, |v| v >= 1.0);
    rig.traffic_counted(&agent, 0);
    let bpffs = &rig.setup.bpffs;
    let maps = metadata_maps(bpffs);
    let (_, plan) = get(debug, "/debug/plan").unwrap();

    rig.sim.fail("ports");
    let failed = sample(m, RUNS_SYNC_ERROR).unwrap();
    // Two failed passes: the second one starts from the first's state.
    wait_for_value(&agent, m, RUNS_SYNC_ERROR, |v| v >= failed + 2.0);
    assert_eq!(sample(m, RUNS_APPLY_ERROR), Some(0.0));
    assert_eq!(metadata_maps(bpffs), maps, "the kernel's tables moved");
    assert_eq!(get(debug, "/debug/plan").unwrap().1, plan, "the plan moved");
    rig.traffic_counted(&agent, 1);

    // Neutron back: passes succeed again and counting goes on exactly.
    assert!((200..300).contains(&rig.sim.control("DELETE", "/sim/faults", "")));
    let ok = sample(m, RUNS_OK).unwrap();
    wait_for_value(&agent, m, RUNS_OK, |v| v > ok);
    assert_eq!(metadata_maps(bpffs), maps);
    rig.traffic_counted(&agent, 2);
    stop(agent);
}

#[test]
fn sighup_changing_the_scrape_interval_changes_the_drain_rate() {
    const DRAINS: &str = "lachesis_drain_duration_seconds_count";
    // Drains over `window`, once the interval in force has been waited out.
    fn drains_in(agent: &Agent, m: SocketAddr, settle: Duration, window: Duration) -> f64 {
        std::thread::sleep(settle);
        let from = wait_for_value(agent, m, DRAINS, |_| true);
        std::thread::sleep(window);
        wait_for_value(agent, m, DRAINS, |_| true) - from
    }
    let rig = Rig::new();
    // Only the scraper drains here: no ghost, so no sweep (or its drain).
    rig.tune("ghost_sweep_interval: 500ms", "ghost_sweep_interval: 1h");
    let agent = rig.ready_agent(0);
    let m = rig.setup.metrics;
    let window = Duration::from_secs(4);
    let fast = drains_in(&agent, m, Duration::ZERO, window);
    assert!(fast >= 10.0, "{fast} drains in {window:?} at 200ms");

    rig.tune("scrape_interval: 200ms", "scrape_interval: 3s");
    agent.signal(libc::SIGHUP);
    wait_for_sample(&agent, m, "lachesis_config_reloads_total{result=\"ok\"} 1");
    // The wait already begun keeps its old length (at most 200 ms).
    let slow = drains_in(&agent, m, Duration::from_millis(500), window);
    assert!(slow <= 2.0, "{slow} drains in {window:?} at 3s");
    let stamp = wait_for_value(
        &agent,
        m,
        "lachesis_drain_last_success_timestamp_seconds",
        |_| true,
    );
    rig.traffic_counted(&agent, 0);

    rig.tune("scrape_interval: 3s", "scrape_interval: 100ms");
    agent.signal(libc::SIGHUP);
    wait_for_sample(&agent, m, "lachesis_config_reloads_total{result=\"ok\"} 2");
    let fast = drains_in(&agent, m, Duration::from_secs(3), window);
    assert!(fast >= 20.0, "{fast} drains in {window:?} at 100ms");
    assert!(
        wait_for_value(
            &agent,
            m,
            "lachesis_drain_last_success_timestamp_seconds",
            |_| true
        ) > stamp
    );
    rig.traffic_counted(&agent, 1);
    stop(agent);
}

#[test]
fn reboot_like_restart_without_pins_or_filters_continues_every_series_from_the_state_file() {
    let rig = Rig::new();
    let m = rig.setup.metrics;
    let first = rig.ready_agent(0);
    rig.traffic_counted(&first, 0);
    let before = counter_series(m);
    stop(first);

    // What a reboot loses: every pin of ours, and with the TCX links'
    // pins (nothing else holds them once the agent is gone) our programs
    // on the taps. Nothing of ours sits on the taps as a tc filter.
    for vm in [&rig.a, &rig.b] {
        for hook in ["ingress", "egress"] {
            let out = Command::new("tc")
                .args(["filter", "show", "dev", &vm.tap, hook])
                .output()
                .unwrap();
            assert!(out.stdout.is_empty(), "{}: {out:?}", vm.tap);
        }
    }
    let links = pinned_links(&rig.setup.bpffs);
    assert_eq!(links.len(), 4, "two taps, two hooks each");
    std::fs::remove_dir_all(&rig.setup.bpffs).unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    while links
        .iter()
        .any(|id| bpftool(&["link", "show", "id", &id.to_string()]).is_some())
    {
        assert!(
            Instant::now() < until,
            "links {links:?} outlived their pins"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    let second = rig.ready_agent(1);
    assert!(
        second.log_text().contains("flows_pin=Created"),
        "{}",
        second.log_text()
    );
    // Straight from the state file: every series at its last value.
    let after = counter_series(m);
    for (series, value) in &before {
        assert_eq!(after.get(series), Some(value), "{series}");
    }
    rig.traffic_counted(&second, 1);
    // New traffic only adds: no series went lower.
    let later = counter_series(m);
    for (series, value) in &before {
        assert!(later.get(series).is_some_and(|v| v >= value), "{series}");
    }
    stop(second);
}

#[test]
fn a_mac_reborn_in_another_project_starts_from_zero_and_the_old_series_stay() {
    const TENANT_C: &str = "0b0000000000000000000000000000cc";
    let rig = Rig::new();
    rig.tune("reconcile_interval: 5m", "reconcile_interval: 1s");
    let agent = rig.ready_agent(0);
    let m = rig.setup.metrics;
    rig.traffic_counted(&agent, 0);
    let (a, b) = (&rig.a, &rig.b);
    let b_before = Totals::from_tap(counters(b));

    assert!((200..300).contains(&rig.sim.control("DELETE", "/sim/ports/p-b", "")));
    wait_for_sample(&agent, m, "lachesis_ghost_bindings 1");
    wait_for_sample(&agent, m, "lachesis_ghost_bindings 0");
    let bindings = || {
        metadata_maps(&rig.setup.bpffs)["endpoints"]
            .as_array()
            .unwrap()
            .len()
    };
    wait_until(&agent, "B's binding evicted from the kernel", || {
        bindings() == 1
    });
    for (kind, body) in [
        (
            "projects",
            format!(r#"{{"id": "{TENANT_C}", "name": "tenant-c"}}"#),
        ),
        (
            "servers",
            format!(r#"{{"id": "vm-c", "name": "c-db", "tenant_id": "{TENANT_C}"}}"#),
        ),
        (
            "ports",
            format!(
                r#"{{"id": "p-c", "network_id": "net-lab", "project_id": "{TENANT_C}", "mac_address": "{MAC_B}", "device_id": "vm-c", "device_owner": "compute:nova", "fixed_ips": [{{"subnet_id": "sub-lab", "ip_address": "10.77.0.2"}}]}}"#
            ),
        ),
    ] {
        let status = rig.sim.control("POST", &format!("/sim/{kind}"), &body);
        assert!((200..300).contains(&status), "{kind}: {status}");
    }
    // The reborn binding is in the kernel before the tap sends again.
    wait_until(&agent, "the reborn binding in the kernel", || {
        bindings() == 2
    });
    traffic(a, b, 1);

    // A is all its tap's; B stays where it was; C has only what the tap
    // counted since the rebirth (and the sweep's `unknown` holds nothing).
    assert_tenants(
        &agent,
        m,
        Duration::from_secs(20),
        empty_unknown,
        &["tenant_id"],
        || {
            BTreeMap::from([
                (TENANT_A.to_owned(), Totals::from_tap(counters(a))),
                (TENANT_B.to_owned(), b_before),
                (
                    TENANT_C.to_owned(),
                    Totals::from_tap(counters(b)).since(b_before),
                ),
            ])
        },
    );
    stop(agent);
}

/// A on 10.77.0.0/25 behind `r-a` (gateway on `ext-one`); the lab's B
/// plays `r-a`: its MAC is the router interface's, its lab address,
/// 10.77.0.130, is in no subnet. A's traffic with it is zone `external`,
/// labelled by the router's gateway network (DESIGN §6.4 rule 1).
fn routed_topology() -> String {
    topology_head()
        + &format!(
            r#"networks:
  - {{id: net-ext1, name: ext-one, project_id: 0a000000000000000000000000000001, external: true}}
  - {{id: net-ext2, name: ext-two, project_id: 0a000000000000000000000000000001, external: true}}
  - {{id: net-a, name: a-private, project_id: {TENANT_A}}}
subnets:
  - {{id: sub-ext1, network_id: net-ext1, project_id: 0a000000000000000000000000000001, cidr: 203.0.113.0/24, gateway_ip: 203.0.113.1}}
  - {{id: sub-ext2, network_id: net-ext2, project_id: 0a000000000000000000000000000001, cidr: 198.51.100.0/24, gateway_ip: 198.51.100.1}}
  - {{id: sub-a, network_id: net-a, project_id: {TENANT_A}, cidr: 10.77.0.0/25, gateway_ip: 10.77.0.126}}
routers:
  - id: r-a
    name: a-router
    project_id: {TENANT_A}
    external_gateway_info: {{network_id: net-ext1, external_fixed_ips: [{{subnet_id: sub-ext1, ip_address: 203.0.113.10}}]}}
ports:
  - {{id: p-ra-gw, network_id: net-ext1, project_id: "", mac_address: "fa:16:3e:00:0a:01", device_id: r-a, device_owner: network:router_gateway, fixed_ips: [{{subnet_id: sub-ext1, ip_address: 203.0.113.10}}]}}
  - {{id: p-ra-if, network_id: net-a, project_id: {TENANT_A}, mac_address: "{MAC_B}", device_id: r-a, device_owner: network:router_interface, fixed_ips: [{{subnet_id: sub-a, ip_address: 10.77.0.126}}]}}
  - {{id: p-a, network_id: net-a, project_id: {TENANT_A}, mac_address: "{MAC_A}", device_id: vm-a, device_owner: compute:nova, fixed_ips: [{{subnet_id: sub-a, ip_address: 10.77.0.1}}]}}
servers:
  - {{id: vm-a, name: a-web, tenant_id: {TENANT_A}}}
"#
        )
}

/// Only A's series count in the re-gateway test (B's tap is the router's
/// and has no binding).
fn not_a(key: &str, _: &Totals) -> bool {
    !key.starts_with(TENANT_A)
}

#[test]
fn a_router_regatewayed_keeps_earlier_bytes_under_the_old_external_network() {
    const LABELS: &[&str] = &["tenant_id", "zone", "external_network"];
    let rig = Rig::serving(&routed_topology(), Ipv4Addr::new(10, 77, 0, 130));
    rig.tune("reconcile_interval: 5m", "reconcile_interval: 1s");
    let agent = rig.ready_agent(0);
    let (a, b, m) = (&rig.a, &rig.b, rig.setup.metrics);
    let series = |network: &str| format!("{TENANT_A}/external/{network}");
    let limit = Duration::from_secs(20);
    traffic(a, b, 0);
    assert_tenants(&agent, m, limit, not_a, LABELS, || {
        BTreeMap::from([(series("ext-one"), Totals::from_tap(counters(a)))])
    });

    // The change: quiet taps, so the counters now split old from new.
    let at_change = Totals::from_tap(counters(a));
    let body = r#"{"network_id": "net-ext2", "external_fixed_ips": [{"subnet_id": "sub-ext2", "ip_address": "198.51.100.10"}]}"#;
    let status = rig.sim.control("PUT", "/sim/routers/r-a/gateway", body);
    assert!((200..300).contains(&status), "{status}");
    // A pass that started after the change has committed.
    let ok = sample(m, RUNS_OK).unwrap();
    wait_for_value(&agent, m, RUNS_OK, |v| v >= ok + 2.0);
    traffic(a, b, 1);
    assert_tenants(&agent, m, limit, not_a, LABELS, || {
        BTreeMap::from([
            (series("ext-one"), at_change),
            (
                series("ext-two"),
                Totals::from_tap(counters(a)).since(at_change),
            ),
        ])
    });
    stop(agent);
}
