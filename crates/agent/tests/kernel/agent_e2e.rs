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

use crate::common;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::Command;
use std::time::{Duration, Instant};

use common::agent::{
    assert_own_families_documented, assert_series_match, assert_series_match_with, assert_tenants,
    bpftool, counter_series, empty_unknown, metadata_maps, pinned_links, traffic, wait_for_sample,
    wait_for_value, wait_until, Setup, Totals,
};
use common::agent::{topology, topology_head, MAC_A, MAC_B, TENANT_A, TENANT_B};
use common::Sim;
use lachesis_abi::{EndpointValue, Zone};
use lachesis_agent::links::tap_name;
use lachesis_datapath::{Datapath, DatapathConfig, FlowsVariant};
use lachesis_lab::agent::{metric, Agent};
use lachesis_lab::catalogue;
use lachesis_lab::http::{get, get_as};
use lachesis_lab::netns::{isolate, Lab, Vm};
use lachesis_lab::traffic::counters;

/// Broadcasts and multicasts both ways: every tap delivers the other VM's
/// group frames, which count as its port's received bytes (zone
/// `multicast`), so a tap's rx series still equals its counters.
fn group_traffic(a: &Vm, b: &Vm, round: u16) {
    a.send_group_traffic(Ipv4Addr::new(239, 77, 0, 1), 4, 200 + usize::from(round));
    b.send_group_traffic(Ipv4Addr::new(224, 0, 0, 251), 3, 90);
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
        // Taps named as Nova names them after the ports (p-a, p-b): the
        // agent finds the port, and so the MAC, behind each tap by it.
        let a = lab.add_vm_with_tap(
            &tap_name("p-a"),
            MAC_A.parse().unwrap(),
            Ipv4Addr::new(10, 77, 0, 1),
        );
        let b = lab.add_vm_with_tap(&tap_name("p-b"), MAC_B.parse().unwrap(), b_ip);
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
        let mut agent = self.setup.start(n);
        agent.wait_ready(self.setup.metrics);
        agent
    }

    /// Agent 0 counts traffic round 0 and stops.
    fn first_life(&self) {
        let mut first = self.ready_agent(0);
        self.traffic_counted(&first, 0);
        first.stop();
    }

    /// Traffic round `round` with broadcast and multicast, then the series
    /// checked against the taps.
    fn traffic_counted(&self, agent: &Agent, round: u16) {
        traffic(&self.a, &self.b, round);
        group_traffic(&self.a, &self.b, round);
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

#[test]
fn cold_start_counts_every_tap_byte_and_sigterm_exits_zero_with_state_flushed() {
    let rig = Rig::new();
    let setup = &rig.setup;
    let mut agent = rig.ready_agent(0);
    let (_, body) = get(setup.metrics, "/metrics").unwrap();
    assert!(
        body.contains("lachesis_boot_phase{phase=\"running\"} 1"),
        "{body}"
    );
    assert!(body.contains("lachesis_degraded 0"), "{body}");
    assert_own_families_documented(setup.metrics);
    // Every map's fill, counted from the kernel: two bindings, the lab
    // subnet's trie rows (bpftool's own dump is the independent count).
    let maps = metadata_maps(&setup.bpffs);
    for (map, capacity) in [
        ("endpoints", 16384),
        ("zones_v4", 65536),
        ("zones_v6", 65536),
        ("amphora_ips", 8192),
        ("tap_ports", 16384),
    ] {
        let n = maps.get(map).map_or(0, |d| d.as_array().unwrap().len());
        wait_for_sample(
            &agent,
            setup.metrics,
            &format!("lachesis_bpf_map_entries{{map=\"{map}\"}} {n}"),
        );
        wait_for_sample(
            &agent,
            setup.metrics,
            &format!("lachesis_bpf_map_capacity_entries{{map=\"{map}\"}} {capacity}"),
        );
    }
    assert_eq!(maps["endpoints"].as_array().unwrap().len(), 2);
    // Both taps carry their port's MAC (Nova's name rule), in the kernel.
    assert_eq!(maps["tap_ports"].as_array().unwrap().len(), 2);
    wait_for_sample(
        &agent,
        setup.metrics,
        "lachesis_attached_interfaces_without_port 0",
    );
    rig.traffic_counted(&agent, 0);
    // The senders ran on two CPUs, so flows were counted in sub-entries of
    // both (DESIGN §4.7: more sub-entries than flow keys), and the series
    // above still equal the taps.
    wait_for_value(&agent, setup.metrics, "lachesis_bpf_flows_fanout", |f| {
        f > 1.0
    });

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

    agent.stop();
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
    // Counted by the programs left attached, group frames keyed by the
    // ports the first life wrote.
    traffic(&rig.a, &rig.b, 2);
    group_traffic(&rig.a, &rig.b, 2);

    let mut second = rig.ready_agent(1);
    rig.traffic_counted(&second, 3);
    // The second life counted on in the first one's pinned `flows` map.
    assert!(
        second.log_text().contains("flows_pin=Reused"),
        "{}",
        second.log_text()
    );
    second.stop();
}

/// What an agent of the previous `flows` layout (a per-CPU hash keyed by
/// the flow key, before DESIGN §4.7) leaves behind while it runs: that
/// build loaded on the agent's bpffs directory, its metadata written (the
/// two VMs bound, each tap's port recorded), attached to both taps with
/// pinned TCX links, counting. Its handles are dropped: the programs, the
/// links and the `flows` pin stay, as after the previous agent stops.
fn previous_layout_counting(setup: &Setup, a: &Vm, b: &Vm) {
    let cfg = DatapathConfig {
        bpffs_dir: setup.bpffs.clone(),
        ..DatapathConfig::default()
    };
    let (old, _, _) = Datapath::load_variant(&cfg, FlowsVariant::PerCpu).unwrap();
    for (n, vm) in [a, b].into_iter().enumerate() {
        let tenant_id = u32::try_from(n).unwrap() + 1;
        old.upsert_endpoint(
            vm.mac,
            EndpointValue {
                tenant_id,
                flags: 0,
            },
        )
        .unwrap();
        old.set_tap_port(lachesis_datapath::ifindex(&vm.tap).unwrap(), vm.mac)
            .unwrap();
        old.attach(&vm.tap).unwrap();
    }
    old.upsert_zone(0, "0.0.0.0/0".parse().unwrap(), Zone::External)
        .unwrap();
}

/// Upgrade from the previous layout under traffic (issue 24): the new agent
/// retires the per-CPU pin, replaces the old programs on every tap, drains
/// the retired map once, and removes it. Every byte the old programs
/// counted and every byte the new ones count reaches the series exactly
/// once: they equal the taps' own counters, from two pinned senders.
#[test]
fn an_agent_of_the_previous_layout_is_replaced_under_traffic_without_loss_or_double_count() {
    let rig = Rig::new();
    previous_layout_counting(&rig.setup, &rig.a, &rig.b);
    let old_pin = rig.setup.bpffs.join("flows");
    let old_flows = bpftool(&["map", "show", "pinned", old_pin.to_str().unwrap()]).unwrap();
    assert_eq!(old_flows["type"], "percpu_hash", "{old_flows}");
    traffic(&rig.a, &rig.b, 0);
    group_traffic(&rig.a, &rig.b, 0);

    // Traffic never stops while the new agent boots and swaps.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (ta, tb, flag) = (rig.a.clone(), rig.b.clone(), stop.clone());
    let during = std::thread::spawn(move || {
        let mut round = 1;
        while !flag.load(std::sync::atomic::Ordering::Relaxed) {
            traffic(&ta, &tb, round);
            round += 1;
        }
        round
    });
    let mut agent = rig.ready_agent(0);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let rounds = during.join().unwrap();
    assert!(rounds > 1, "traffic ran while the agent booted");
    let log = agent.log_text();
    assert!(log.contains("flows_pin=Replaced"), "{log}");
    assert!(log.contains("retired=1"), "{log}");

    rig.traffic_counted(&agent, 90);
    let names: Vec<String> = std::fs::read_dir(&rig.setup.bpffs)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !names.iter().any(|n| n.starts_with("flows_retired_")),
        "the retired map is removed after its last drain: {names:?}"
    );
    let flows = bpftool(&["map", "show", "pinned", old_pin.to_str().unwrap()]).unwrap();
    assert_eq!(flows["type"], "hash", "the pin is the new layout: {flows}");
    assert_ne!(flows["id"], old_flows["id"]);
    assert!(
        bpftool(&["map", "show", "id", &old_flows["id"].to_string()]).is_none(),
        "the previous layout's map is freed: nothing holds it"
    );
    agent.stop();
}

/// The agent's resident memory, in KiB (`VmRSS` of /proc/PID/status).
fn rss_kib(agent: &Agent) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", agent.child.id())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/PID/status")
}

/// Listeners under abuse (issue 25, part 4; `lachesis-listen`): 500 clients
/// holding connections open mid-head and 100 sending 64 KiB heads, on the
/// metrics listener, while a scrape is still answered within Prometheus's
/// default 10 s timeout and the agent's memory stays bounded; once the
/// slow clients are dropped (header timeout) every series still equals
/// the taps. Prints the figures.
#[test]
fn slow_and_oversized_clients_do_not_keep_a_scrape_from_being_answered() {
    use std::io::{Read as _, Write as _};
    use std::net::TcpStream;

    let rig = Rig::new();
    let mut agent = rig.ready_agent(0);
    rig.traffic_counted(&agent, 0);
    let metrics = rig.setup.metrics;
    let before = rss_kib(&agent);

    let mut slow: Vec<TcpStream> = Vec::new();
    for _ in 0..500 {
        let mut s = TcpStream::connect(metrics).unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: abuse\r\nX-Slow: ")
            .unwrap();
        slow.push(s);
    }
    let huge = format!(
        "GET /metrics HTTP/1.1\r\nHost: abuse\r\nX-Big: {}\r\n\r\n",
        "a".repeat(64 * 1024)
    );
    let mut refused = 0;
    for _ in 0..100 {
        let mut s = TcpStream::connect(metrics).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        // The agent may close before taking it all.
        let _ = s.write_all(huge.as_bytes());
        let mut head = [0u8; 12];
        if s.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.1 431") {
            refused += 1;
        }
    }
    let started = Instant::now();
    let scrape = lachesis_lab::http::Request::get("/metrics")
        .timeout(Duration::from_secs(10))
        .send(metrics)
        .expect("a scrape answered beside 500 slow clients");
    let took = started.elapsed();
    let during = rss_kib(&agent);
    assert_eq!(scrape.status, 200);
    assert!(scrape.body.contains("lachesis_tenant_bytes_total"));
    assert!(took < Duration::from_secs(10), "the scrape took {took:?}");
    assert!(
        refused >= 90,
        "{refused} of 100 oversized heads answered 431"
    );
    // The slow clients are still connected (none evicted below the limit);
    // the header timeout drops them.
    for s in &slow {
        s.set_nonblocking(true).unwrap();
    }
    // Open while a non-blocking read says "would block".
    let open = |s: &TcpStream| {
        let mut b = [0u8; 1];
        matches!((&*s).read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
    };
    let alive = slow.iter().filter(|s| open(s)).count();
    println!(
        "abuse: agent RSS {before} KiB before, {during} KiB with 500 slow and 100 oversized \
         clients; {refused} of 100 answered 431; scrape answered in {took:?} \
         ({} B); {alive} slow clients still connected",
        scrape.body.len()
    );
    assert!(
        during < before + 64 * 1024,
        "RSS grew from {before} to {during} KiB"
    );
    wait_until(
        &agent,
        "every slow client closed by the header timeout",
        || !slow.iter().any(open),
    );
    rig.traffic_counted(&agent, 1);
    agent.stop();
}

#[test]
fn neutron_down_at_boot_with_a_state_file_boots_degraded_and_keeps_counting() {
    let rig = Rig::new();
    rig.first_life();

    rig.sim.fail("ports");
    let mut second = rig.ready_agent(1);
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
    second.stop();
}

#[test]
fn a_port_deleted_while_the_agent_was_down_is_a_ghost_swept_with_its_bytes_kept() {
    let rig = Rig::new();
    rig.first_life();
    let (_, before) = get(rig.setup.metrics, "/metrics").unwrap_or_default();
    assert!(before.is_empty(), "the first agent's listener is gone");

    assert!((200..300).contains(&rig.sim.control("DELETE", "/sim/ports/p-b", "")));
    let mut second = rig.ready_agent(1);
    // B's binding is no longer desired: a ghost, then swept after its grace.
    wait_for_sample(&second, rig.setup.metrics, "lachesis_ghost_bindings 1");
    wait_for_sample(&second, rig.setup.metrics, "lachesis_ghost_bindings 0");
    // Nothing moved: both tenants keep exactly what their taps counted,
    // and no byte went to `unknown` (the sweep leaves a zero-valued
    // `unknown` series behind: tolerated here, reported).
    let m = rig.setup.metrics;
    assert_series_match_with(&second, m, &rig.a, &rig.b, Duration::from_secs(20), true);
    second.stop();
}

#[test]
fn neutron_500_at_boot_without_a_state_file_attaches_nothing_until_it_recovers() {
    let rig = Rig::new();
    rig.sim.fail("ports");
    let agent = rig.setup.start(0);
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
    agent.stop();
}

#[test]
fn sigterm_while_cold_start_retries_is_a_clean_stop_with_nothing_attached() {
    let rig = Rig::new();
    rig.sim.fail("ports");
    let mut agent = rig.setup.start(0);
    wait_until(&agent, "a failed cold start", || {
        agent.log_text().contains("cold start sync failed")
    });
    agent.signal(libc::SIGTERM);
    // Well before the next retry (2 s): the wait gives way to the stop.
    let status = agent.wait(Duration::from_secs(2));
    let log = agent.log_text();
    assert_eq!(status.code(), Some(0), "log:\n{log}");
    assert!(log.contains("nothing attached"), "{log}");
    assert!(!log.contains("attached ifname"), "{log}");
    assert!(!log.contains("boot failed"), "{log}");
    for vm in [&rig.a, &rig.b] {
        let out = Command::new("bpftool")
            .args(["-j", "net", "show", "dev", &vm.tap])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(!text.contains("lachesis"), "{}: {text}", vm.tap);
    }
    assert!(!rig.setup.dir.path().join("state.json").exists());
}

#[test]
fn neutron_500_at_runtime_is_a_sync_error_that_leaves_the_kernel_untouched() {
    let rig = Rig::new();
    rig.tune("reconcile_interval: 5m", "reconcile_interval: 1s");
    let mut agent = rig.ready_agent(0);
    let (m, debug) = (rig.setup.metrics, rig.setup.debug);
    wait_for_value(&agent, m, RUNS_OK, |v| v >= 1.0);
    rig.traffic_counted(&agent, 0);
    let bpffs = &rig.setup.bpffs;
    let maps = metadata_maps(bpffs);
    let (_, plan) = get(debug, "/debug/plan").unwrap();

    rig.sim.fail("ports");
    let failed = metric(m, RUNS_SYNC_ERROR).unwrap();
    // Two failed passes: the second one starts from the first's state.
    wait_for_value(&agent, m, RUNS_SYNC_ERROR, |v| v >= failed + 2.0);
    assert_eq!(metric(m, RUNS_APPLY_ERROR), Some(0.0));
    assert_eq!(metadata_maps(bpffs), maps, "the kernel's tables moved");
    assert_eq!(get(debug, "/debug/plan").unwrap().1, plan, "the plan moved");
    rig.traffic_counted(&agent, 1);

    // Neutron back: passes succeed again and counting goes on exactly.
    assert!((200..300).contains(&rig.sim.control("DELETE", "/sim/faults", "")));
    let ok = metric(m, RUNS_OK).unwrap();
    wait_for_value(&agent, m, RUNS_OK, |v| v > ok);
    assert_eq!(metadata_maps(bpffs), maps);
    rig.traffic_counted(&agent, 2);
    agent.stop();
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
    let mut agent = rig.ready_agent(0);
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
    agent.stop();
}

#[test]
fn reboot_like_restart_without_pins_or_filters_continues_every_series_from_the_state_file() {
    let rig = Rig::new();
    let m = rig.setup.metrics;
    let mut first = rig.ready_agent(0);
    rig.traffic_counted(&first, 0);
    let before = counter_series(m);
    first.stop();

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

    let mut second = rig.ready_agent(1);
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
    second.stop();
}

#[test]
fn a_mac_reborn_in_another_project_starts_from_zero_and_the_old_series_stay() {
    const TENANT_C: &str = "0b0000000000000000000000000000cc";
    let rig = Rig::new();
    rig.tune("reconcile_interval: 5m", "reconcile_interval: 1s");
    let mut agent = rig.ready_agent(0);
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
    agent.stop();
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
    let mut agent = rig.ready_agent(0);
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
    let ok = metric(m, RUNS_OK).unwrap();
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
    agent.stop();
}

/// Families only an agent in relay mode registers (this test's agent syncs
/// from OpenStack; `services::relay_e2e` holds them to a relay-mode agent).
const RELAY_ONLY: [(&str, &str); 6] = [
    ("lachesis_metadata_age_seconds", "Only in relay mode"),
    ("lachesis_stream_records_total", "Only in relay mode"),
    ("lachesis_stream_undecodable_total", "Only in relay mode"),
    ("lachesis_stream_snapshots_total", "Only in relay mode"),
    ("lachesis_stream_connected", "Only in relay mode"),
    ("lachesis_stream_offset", "Only in relay mode"),
];

/// Families whose series exist only once something happened, with the
/// words docs/metrics.md states that condition in; the catalogue test
/// meets each condition after its first look (but relay mode's).
const CONDITIONAL: [(&str, &str); 7] = [
    (
        "lachesis_openstack_api_errors_total",
        "No series before the first failure",
    ),
    RELAY_ONLY[0],
    RELAY_ONLY[1],
    RELAY_ONLY[2],
    RELAY_ONLY[3],
    RELAY_ONLY[4],
    RELAY_ONLY[5],
];

/// The series of the API failure the catalogue test makes.
const PORTS_503: &str =
    "lachesis_openstack_api_errors_total{service=\"network\",endpoint=\"ports\",code=\"503\"}";

/// What /metrics (OpenMetrics) and docs/metrics.md disagree on, empty
/// when every documented family but those of `waiting` (name, condition)
/// has series of its documented type and labels, none of `waiting` has
/// any and the catalogue states each one's condition, and nothing else is
/// there.
fn catalogue_differences(metrics: SocketAddr, waiting: &[(&str, &str)]) -> Vec<String> {
    let Some((_, body)) = get_as(metrics, "/metrics", "application/openmetrics-text") else {
        return vec!["/metrics did not answer".to_owned()];
    };
    let on_metrics = catalogue::parse(&body, "");
    // The relay's families are on the relay's /metrics (crates/relay).
    let documented: std::collections::BTreeMap<_, _> = catalogue::documented()
        .into_iter()
        .filter(|(_, f)| f.owner != "relay")
        .collect();
    // Every series, not only each family's first: its labels in the
    // documented order, a bucket's `le` last.
    let mut out = catalogue::series_off_catalogue(&body);
    for (name, condition) in waiting {
        if !catalogue::meaning(name).is_some_and(|m| m.contains(condition)) {
            out.push(format!(
                "{name}: docs/metrics.md does not say {condition:?}"
            ));
        }
    }
    for (name, doc) in &documented {
        let waits = waiting.iter().any(|(w, _)| w == name);
        match (on_metrics.families.get(name), waits) {
            (Some(_), true) => out.push(format!("{name}: has series before its condition")),
            (None, false) if on_metrics.empty.contains(name) => {
                out.push(format!("{name}: declared without a series"));
            }
            (None, false) => out.push(format!("{name}: documented, not on /metrics")),
            (Some(r), false) if (&r.kind, &r.labels) != (&doc.kind, &doc.labels) => {
                out.push(format!(
                    "{name}: documented {} {:?}, rendered {} {:?}",
                    doc.kind, doc.labels, r.kind, r.labels
                ));
            }
            _ => {}
        }
    }
    for name in on_metrics.families.keys().chain(&on_metrics.empty) {
        if !documented.contains_key(name) {
            out.push(format!("{name}: on /metrics, not in docs/metrics.md"));
        }
    }
    out
}

/// Polls until [`catalogue_differences`] is empty; fails listing them.
fn assert_catalogue_on_metrics(agent: &Agent, metrics: SocketAddr, waiting: &[(&str, &str)]) {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let differences = catalogue_differences(metrics, waiting);
        if differences.is_empty() {
            return;
        }
        assert!(
            Instant::now() < until,
            "/metrics and docs/metrics.md disagree:\n  {}\nlog:\n{}",
            differences.join("\n  "),
            agent.log_text()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Every family docs/metrics.md lists is on a running agent's /metrics
/// with its documented type and labels, and nothing else is (DESIGN §10).
/// The conditions series wait for are met: traffic (billing and info
/// series), both notification transports configured (at loopback ports
/// where no broker listens: their series exist, disconnected), and, after
/// the first look, one failed API call.
#[test]
fn every_documented_family_is_on_metrics_with_its_type_and_labels() {
    let rig = Rig::new();
    rig.tune("reconcile_interval: 5m", "reconcile_interval: 1s");
    let mut config = std::fs::OpenOptions::new()
        .append(true)
        .open(&rig.setup.config)
        .unwrap();
    write!(
        config,
        "notifications:\n  rabbitmq:\n    url: amqp://guest:guest@127.0.0.1:1/%2f\n  \
         kafka:\n    brokers: [\"127.0.0.1:2\"]\n    topic: notifications.info\n"
    )
    .unwrap();
    let mut agent = rig.ready_agent(0);
    let m = rig.setup.metrics;
    rig.traffic_counted(&agent, 0);
    assert_catalogue_on_metrics(&agent, m, &CONDITIONAL);

    // One failed call: the ports list answers 503 once, failing one pass.
    let fault = r#"{"endpoint": "ports", "status": 503, "times": 1}"#;
    assert!((200..300).contains(&rig.sim.control("PUT", "/sim/faults", fault)));
    wait_for_value(&agent, m, PORTS_503, |v| v >= 1.0);
    wait_for_value(&agent, m, RUNS_SYNC_ERROR, |v| v >= 1.0);
    let ok = metric(m, RUNS_OK).unwrap();
    wait_for_value(&agent, m, RUNS_OK, |v| v > ok);
    assert_eq!(metric(m, PORTS_503), Some(1.0), "one failure, counted once");
    assert_catalogue_on_metrics(&agent, m, &RELAY_ONLY);
    agent.stop();
}
