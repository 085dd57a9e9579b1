//! `make soak` (root, `RabbitMQ` from the real-cloud tier's script; a
//! benchmark, not part of `make test`): the `lachesis agent` binary for
//! `SOAK_MINUTES` (default 10) against the simulator (a child process
//! publishing an oslo notification per change to a real `RabbitMQ`) and
//! network namespaces playing VMs, under compressed churn:
//!
//! - ports of a churn network created, moved to another server and project,
//!   and deleted, ten a second, a pool of 150 alive (bindings, ghosts and
//!   their sweep, the planner and the kernel writes, without traffic);
//! - a router re-gatewayed between two external networks every 20 s;
//! - short-lived VMs, one every few traffic rounds: a server, a port and a
//!   real tap appear, exchange traffic with a long-lived VM, and are deleted
//!   (the link watcher, attach, the ghost sweep with its bytes kept);
//! - the broker stopped for 15 s and started again at 35 % of the run;
//! - a SIGHUP changing a hot tunable every minute;
//! - one SIGKILL under traffic and a restart at 65 %.
//!
//! Four long-lived VMs (two per project) exchange pings, UDP and TCP all
//! along. Every second (the scrape interval) it samples the agent's RSS,
//! open descriptors, map fills, ledger rows, state-file size and billing
//! series, and checks that no billing series ever went down (across the
//! restart too). At the end, with the taps quiet, every project's series,
//! every long-lived port's and the all-traffic total must equal the taps'
//! own interface counters (the deleted VMs' read just before deletion).
//!
//! A table (per resource: the medians of the first and the last minute
//! after the warm-up, the maximum, the slope per minute, and a verdict),
//! then one JSON line; every sample and the logs are kept in
//! `$TMPDIR/lachesis-soak-PID/`. Exit 1 when a correctness check failed (a
//! series went down, the final sums differ, traffic lost bytes, a reload
//! was not applied, the broker never reconnected) or a resource is not flat
//! after the warm-up (its last minute above 1.25 times its first plus a
//! small absolute slack). No time is asserted.

mod common;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::io::{BufRead as _, BufReader};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use common::{binary, memory, Pins};
use lachesis_agent::links::tap_name;
use lachesis_lab::agent::{Agent, AgentConfig, Tunables};
use lachesis_lab::catalogue;
use lachesis_lab::exposition::{self, Exposition};
use lachesis_lab::http::{get, Forwarder, Request};
use lachesis_lab::netns::{isolate, Lab, Vm, VmTraffic};
use lachesis_lab::traffic::{counters, wait_quiet, Exchange};
use lachesis_lab::Services;

const TENANT_A: &str = "0b0000000000000000000000000000aa";
const TENANT_B: &str = "0b0000000000000000000000000000bb";
const ADMIN: &str = "0a000000000000000000000000000001";
const RABBITMQ_PORT: u16 = 16672;
/// Churn ports alive at once.
const POOL: usize = 150;
/// One churn step (create, maybe move, maybe delete) per this.
const CHURN_STEP: Duration = Duration::from_millis(100);
/// Router re-gateways, every this many churn steps (20 s).
const REGATEWAY_EVERY: u64 = 200;
/// A short-lived VM every this many traffic rounds.
const EPHEMERAL_EVERY: u64 = 6;
/// The billing families, which must never go down: the ledger's byte and
/// packet counters, as the metrics catalogue (docs/metrics.md) lists them.
fn billing_families() -> &'static BTreeSet<String> {
    static FAMILIES: OnceLock<BTreeSet<String>> = OnceLock::new();
    FAMILIES.get_or_init(|| {
        let families: BTreeSet<String> = catalogue::documented()
            .into_iter()
            .filter(|(name, f)| {
                f.owner == "ledger"
                    && f.kind == "counter"
                    && (name.ends_with("_bytes_total") || name.ends_with("_packets_total"))
            })
            .map(|(name, _)| name)
            .collect();
        assert!(
            families.contains("lachesis_bytes_total")
                && families.contains("lachesis_port_proto_packets_total"),
            "the catalogue's billing families: {families:?}"
        );
        families
    })
}

fn rabbit_url() -> String {
    format!("amqp://guest:guest@127.0.0.1:{RABBITMQ_PORT}/%2f")
}

/// `SOAK_MINUTES`, a whole number of minutes (default 10).
fn minutes() -> Result<u64, String> {
    match std::env::var("SOAK_MINUTES") {
        Err(_) => Ok(10),
        Ok(v) => v
            .parse::<u64>()
            .ok()
            .filter(|m| (1..=10_080).contains(m))
            .ok_or(format!(
                "SOAK_MINUTES={v:?}: expected a whole number of minutes from 1 to 10080, e.g. 10"
            )),
    }
}

fn topology() -> String {
    let mut servers = String::new();
    for (tenant, tag) in [(TENANT_A, 'a'), (TENANT_B, 'b')] {
        for k in 0..10 {
            let _ = writeln!(
                servers,
                "  - {{id: vm-c{tag}{k}, name: churn-{tag}{k}, tenant_id: {tenant}}}"
            );
        }
    }
    let mut ports = String::new();
    for (n, vm) in STABLE.iter().enumerate() {
        let _ = writeln!(
            ports,
            "  - {{id: {}, network_id: net-lab, project_id: {}, mac_address: '{}', device_id: {}, device_owner: compute:nova, fixed_ips: [{{subnet_id: sub-lab, ip_address: 10.77.0.{}}}]}}",
            vm.port, vm.tenant, vm.mac, vm.server, n + 1
        );
        let _ = writeln!(
            servers,
            "  - {{id: {}, name: {}, tenant_id: {}}}",
            vm.server, vm.server, vm.tenant
        );
    }
    format!(
        r"settings:
  token_ttl_secs: 3600
  regions: [RegionOne]
  services: [identity, network, compute]
projects:
  - {{id: {ADMIN}, name: admin}}
  - {{id: {TENANT_A}, name: tenant-a}}
  - {{id: {TENANT_B}, name: tenant-b}}
users:
  - {{id: u-admin, name: admin, password: admin-secret}}
networks:
  - {{id: net-lab, name: lab, project_id: {ADMIN}, shared: true}}
  - {{id: net-churn, name: churn, project_id: {ADMIN}, shared: true}}
  - {{id: net-ext1, name: ext-one, project_id: {ADMIN}, external: true}}
  - {{id: net-ext2, name: ext-two, project_id: {ADMIN}, external: true}}
  - {{id: net-a, name: a-private, project_id: {TENANT_A}}}
subnets:
  - {{id: sub-lab, network_id: net-lab, project_id: {ADMIN}, cidr: 10.77.0.0/24, gateway_ip: null}}
  - {{id: sub-churn, network_id: net-churn, project_id: {ADMIN}, cidr: 10.88.0.0/16, gateway_ip: null}}
  - {{id: sub-ext1, network_id: net-ext1, project_id: {ADMIN}, cidr: 203.0.113.0/24, gateway_ip: 203.0.113.1}}
  - {{id: sub-ext2, network_id: net-ext2, project_id: {ADMIN}, cidr: 198.51.100.0/24, gateway_ip: 198.51.100.1}}
  - {{id: sub-a, network_id: net-a, project_id: {TENANT_A}, cidr: 10.99.0.0/24, gateway_ip: 10.99.0.1}}
routers:
  - id: r-a
    name: a-router
    project_id: {TENANT_A}
    external_gateway_info: {{network_id: net-ext1, external_fixed_ips: [{{subnet_id: sub-ext1, ip_address: 203.0.113.10}}]}}
ports:
  - {{id: p-ra-gw, network_id: net-ext1, project_id: '', mac_address: 'fa:16:3e:00:0a:01', device_id: r-a, device_owner: network:router_gateway, fixed_ips: [{{subnet_id: sub-ext1, ip_address: 203.0.113.10}}]}}
  - {{id: p-ra-if, network_id: net-a, project_id: {TENANT_A}, mac_address: 'fa:16:3e:00:0a:02', device_id: r-a, device_owner: network:router_interface, fixed_ips: [{{subnet_id: sub-a, ip_address: 10.99.0.1}}]}}
{ports}servers:
{servers}"
    )
}

/// A long-lived VM: its port, server, project and MAC.
struct Stable {
    port: &'static str,
    server: &'static str,
    tenant: &'static str,
    mac: &'static str,
}

const STABLE: [Stable; 4] = [
    Stable {
        port: "p-s0",
        server: "vm-s0",
        tenant: TENANT_A,
        mac: "fa:16:3e:aa:00:01",
    },
    Stable {
        port: "p-s1",
        server: "vm-s1",
        tenant: TENANT_A,
        mac: "fa:16:3e:aa:00:02",
    },
    Stable {
        port: "p-s2",
        server: "vm-s2",
        tenant: TENANT_B,
        mac: "fa:16:3e:bb:00:03",
    },
    Stable {
        port: "p-s3",
        server: "vm-s3",
        tenant: TENANT_B,
        mac: "fa:16:3e:bb:00:04",
    },
];

/// The simulator as a child process (`lachesis sim`), publishing to the
/// broker.
struct Sim {
    child: Child,
    /// Held open: a closed pipe would make the simulator's prints fail.
    _stdout: BufReader<ChildStdout>,
    addr: String,
    errors: AtomicU64,
}

impl Sim {
    fn start(topology: &Path, log: &Path) -> Sim {
        let log = std::fs::File::create(log).expect("simulator log");
        let mut child = Command::new(binary())
            .args(["sim", "--topology"])
            .arg(topology)
            .args(["--listen", "127.0.0.1:0", "--rabbitmq-url", &rabbit_url()])
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("start the simulator");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut banner = String::new();
        stdout
            .read_line(&mut banner)
            .expect("the simulator's banner");
        let addr = banner
            .trim()
            .rsplit_once(" on http://")
            .unwrap_or_else(|| panic!("unexpected simulator banner {banner:?}"))
            .1
            .to_owned();
        Sim {
            child,
            _stdout: stdout,
            addr,
            errors: AtomicU64::new(0),
        }
    }

    /// One control call; a refusal is counted (and reported), not fatal.
    fn control(&self, method: &str, path: &str, body: &str) -> bool {
        let ok = Request::new(method, path)
            .json(body)
            .send(self.addr.as_str())
            .is_ok_and(|r| (200..300).contains(&r.status));
        if !ok {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
        ok
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the churn thread did.
#[derive(Debug, Default, Clone, Copy)]
struct Churned {
    created: u64,
    deleted: u64,
    moved: u64,
    regateways: u64,
}

/// The churn thread: ports created, moved and deleted, the router
/// re-gatewayed, until `stop`.
fn churn(sim: &Sim, stop: &AtomicBool) -> Churned {
    let mut done = Churned::default();
    let mut pool: VecDeque<u64> = VecDeque::new();
    let mut n: u64 = 0;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(CHURN_STEP);
        n += 1;
        let slot = n % 60_000;
        let (tenant, tag) = if n.is_multiple_of(2) {
            (TENANT_A, 'a')
        } else {
            (TENANT_B, 'b')
        };
        let body = format!(
            r#"{{"id": "p-c{n}", "network_id": "net-churn", "project_id": "{tenant}", "mac_address": "fa:16:3e:cc:{:02x}:{:02x}", "device_id": "vm-c{tag}{}", "device_owner": "compute:nova", "fixed_ips": [{{"subnet_id": "sub-churn", "ip_address": "10.88.{}.{}"}}]}}"#,
            slot >> 8,
            slot & 0xff,
            n % 10,
            (slot / 250) % 256,
            slot % 250 + 1
        );
        if sim.control("POST", "/sim/ports", &body) {
            done.created += 1;
            pool.push_back(n);
        }
        if n.is_multiple_of(3) {
            // A port moves to a server of the other project.
            if let Some(&m) = pool.get(pool.len() / 2) {
                let (tenant, tag) = if m.is_multiple_of(2) == n.is_multiple_of(6) {
                    (TENANT_B, 'b')
                } else {
                    (TENANT_A, 'a')
                };
                let body = format!(
                    r#"{{"project_id": "{tenant}", "device_id": "vm-c{tag}{}"}}"#,
                    n % 10
                );
                if sim.control("PATCH", &format!("/sim/ports/p-c{m}"), &body) {
                    done.moved += 1;
                }
            }
        }
        if pool.len() > POOL {
            let m = pool.pop_front().expect("not empty");
            if sim.control("DELETE", &format!("/sim/ports/p-c{m}"), "") {
                done.deleted += 1;
            }
        }
        if n.is_multiple_of(REGATEWAY_EVERY) {
            let body = if (n / REGATEWAY_EVERY).is_multiple_of(2) {
                r#"{"network_id": "net-ext1", "external_fixed_ips": [{"subnet_id": "sub-ext1", "ip_address": "203.0.113.10"}]}"#
            } else {
                r#"{"network_id": "net-ext2", "external_fixed_ips": [{"subnet_id": "sub-ext2", "ip_address": "198.51.100.10"}]}"#
            };
            if sim.control("PUT", "/sim/routers/r-a/gateway", body) {
                done.regateways += 1;
            }
        }
    }
    done
}

/// What the traffic thread did: rounds, short-lived VMs and their final
/// counters by project.
#[derive(Debug, Default)]
struct Traffic {
    rounds: u64,
    ephemeral: u64,
    gone: BTreeMap<String, VmTraffic>,
}

fn add(into: &mut VmTraffic, t: VmTraffic) {
    into.tx_bytes += t.tx_bytes;
    into.tx_packets += t.tx_packets;
    into.rx_bytes += t.rx_bytes;
    into.rx_packets += t.rx_packets;
}

/// Shared between the main thread and the traffic thread.
struct Shared<'a> {
    sim: &'a Sim,
    lab: &'a Mutex<Lab>,
    stable: &'a [Vm],
    metrics: SocketAddr,
    /// False while the agent is killed and not yet ready again: no VM is
    /// born then (its first bytes would cross a tap nothing is attached to).
    agent_up: &'a AtomicBool,
    stop: &'a AtomicBool,
}

/// Long-lived VMs exchange traffic round after round; every few rounds a
/// short-lived VM is born, talks, and is deleted.
fn traffic(shared: &Shared<'_>) -> Traffic {
    let mut done = Traffic::default();
    while !shared.stop.load(Ordering::Relaxed) {
        let round = done.rounds;
        let from = &shared.stable[usize::try_from(round % 4).expect("small")];
        let to = &shared.stable[usize::try_from((round + 1 + round / 4 % 3) % 4).expect("small")];
        let port = 20_000 + u16::try_from(round % 20_000).expect("small");
        Exchange::between(from, to)
            .ping(2, 300)
            .udp(port, 20, 900)
            .tcp(port, 48 * 1024, 12 * 1024)
            .run();
        done.rounds += 1;
        if round.is_multiple_of(EPHEMERAL_EVERY) && shared.agent_up.load(Ordering::Relaxed) {
            let (tenant, last) = ephemeral(shared, done.ephemeral, from);
            add(done.gone.entry(tenant.to_owned()).or_default(), last);
            done.ephemeral += 1;
        }
    }
    done
}

/// A VM's life: server, port and tap created, attached and bound by the
/// agent, traffic with `peer`, its tap's final counters read, deleted.
fn ephemeral(s: &Shared<'_>, e: u64, peer: &Vm) -> (&'static str, VmTraffic) {
    let tenant = if e.is_multiple_of(2) {
        TENANT_A
    } else {
        TENANT_B
    };
    let (port, server) = (format!("p-e{e}"), format!("vm-e{e}"));
    let mac = format!("fa:16:3e:ee:{:02x}:{:02x}", (e >> 8) & 0xff, e & 0xff);
    let ip = Ipv4Addr::new(10, 77, 0, 100 + u8::try_from(e % 100).expect("small"));
    s.sim.control(
        "POST",
        "/sim/servers",
        &format!(r#"{{"id": "{server}", "name": "{server}", "tenant_id": "{tenant}"}}"#),
    );
    s.sim.control(
        "POST",
        "/sim/ports",
        &format!(
            r#"{{"id": "{port}", "network_id": "net-lab", "project_id": "{tenant}", "mac_address": "{mac}", "device_id": "{server}", "device_owner": "compute:nova", "fixed_ips": [{{"subnet_id": "sub-lab", "ip_address": "{ip}"}}]}}"#
        ),
    );
    let tap = tap_name(&port);
    let vm = {
        let mut lab = s.lab.lock().expect("lab");
        let vm = lab.add_vm_with_tap(&tap, mac.parse().expect("a MAC"), ip);
        lab.static_neighbours();
        vm
    };
    // Attached, and the port known to the agent's plan: nothing the VM
    // sends then goes uncounted or unattributed.
    let until = Instant::now() + Duration::from_mins(1);
    while !attached_and_bound(s.metrics, s.stable.len() + 1) {
        assert!(Instant::now() < until, "{tap} never attached and bound");
        std::thread::sleep(Duration::from_millis(100));
    }
    let p = 45_000 + u16::try_from(e % 10_000).expect("small");
    Exchange::between(&vm, peer)
        .ping(3, 500)
        .udp(p, 10, 700)
        .tcp(p, 32 * 1024, 8 * 1024)
        .run();
    wait_quiet(&[&vm, peer]);
    let last = VmTraffic::from_tap(counters(&vm));
    s.lab.lock().expect("lab").remove_vm(&tap);
    s.sim.control("DELETE", &format!("/sim/ports/{port}"), "");
    s.sim
        .control("DELETE", &format!("/sim/servers/{server}"), "");
    (tenant, last)
}

/// Whether `taps` interfaces are attached and none lacks its port.
fn attached_and_bound(metrics: SocketAddr, taps: usize) -> bool {
    let Some((200, body)) = get(metrics, "/metrics") else {
        return false;
    };
    let e = exposition::parse(&body);
    #[expect(clippy::cast_precision_loss, reason = "a handful of taps")]
    let want = taps as f64;
    e.value("lachesis_attached_interfaces") == Some(want)
        && e.value("lachesis_attached_interfaces_without_port") == Some(0.0)
}

/// One sample of the agent's resources.
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    at: f64,
    rss_mib: f64,
    fds: f64,
    endpoints: f64,
    flows: f64,
    ledger_rows: f64,
    state_kib: f64,
    series: f64,
}

/// A column of the table: its name, the field it shows, and the absolute
/// slack its flatness verdict allows beside 25 % (noise of small values).
type Column = (&'static str, fn(&Sample) -> f64, f64);

/// The columns of the table.
const COLUMNS: [Column; 7] = [
    ("RSS MiB", |s| s.rss_mib, 4.0),
    ("open FDs", |s| s.fds, 4.0),
    ("endpoints entries", |s| s.endpoints, 16.0),
    ("flows sub-entries", |s| s.flows, 16.0),
    ("ledger rows", |s| s.ledger_rows, 16.0),
    ("state file KiB", |s| s.state_kib, 16.0),
    ("billing series", |s| s.series, 16.0),
];

/// The billing samples of `e`, by series.
fn billing(e: &Exposition) -> BTreeMap<String, u64> {
    e.samples()
        .filter(|s| billing_families().contains(&s.name))
        .map(|s| (s.series(), s.count()))
        .collect()
}

/// Every billing series ever seen with its highest value, and what went
/// down.
#[derive(Default)]
struct Monotonic {
    seen: BTreeMap<String, u64>,
    decreases: Vec<String>,
}

impl Monotonic {
    fn check(&mut self, now: BTreeMap<String, u64>, at: f64) {
        for (series, value) in now {
            let before = self.seen.entry(series.clone()).or_insert(value);
            if value < *before {
                if self.decreases.len() < 20 {
                    self.decreases.push(format!(
                        "{series} went from {before} to {value} at {at:.0}s"
                    ));
                }
            } else {
                *before = value;
            }
        }
    }
}

fn sample(
    agent: &Agent,
    metrics: SocketAddr,
    state: &Path,
    at: f64,
) -> Option<(Sample, BTreeMap<String, u64>)> {
    let (200, body) = get(metrics, "/metrics")? else {
        return None;
    };
    let e = exposition::parse(&body);
    let map = |name: &str| {
        e.value(&format!("lachesis_bpf_map_entries{{map=\"{name}\"}}"))
            .unwrap_or(0.0)
    };
    let series = billing(&e);
    let pid = agent.child.id();
    #[expect(
        clippy::cast_precision_loss,
        reason = "sizes and counts far below 2^52"
    )]
    let s = Sample {
        at,
        rss_mib: memory(pid).0 / 1024.0,
        fds: std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count) as f64,
        endpoints: map("endpoints"),
        flows: map("flows"),
        ledger_rows: e.value("lachesis_ledger_rows").unwrap_or(0.0),
        state_kib: std::fs::metadata(state).map_or(0, |m| m.len()) as f64 / 1024.0,
        series: series.len() as f64,
    };
    Some((s, series))
}

/// Sums of a byte family and its packet twin per value of `label` (all
/// under "" when `None`), the tap's view turned into the VM's.
fn sums(
    e: &Exposition,
    bytes: &str,
    packets: &str,
    label: Option<&str>,
) -> BTreeMap<String, VmTraffic> {
    let mut out: BTreeMap<String, VmTraffic> = BTreeMap::new();
    for s in e.samples() {
        let is_bytes = s.name == bytes;
        if !is_bytes && s.name != packets {
            continue;
        }
        let key = label.map_or(String::new(), |l| s.label(l).unwrap_or("").to_owned());
        let t = out.entry(key).or_default();
        let v = s.count();
        match (is_bytes, s.label("direction")) {
            (true, Some("tx")) => t.tx_bytes += v,
            (true, _) => t.rx_bytes += v,
            (false, Some("tx")) => t.tx_packets += v,
            (false, _) => t.rx_packets += v,
        }
    }
    out.retain(|k, v| !(k == "unknown" && *v == VmTraffic::default()));
    out
}

/// What the final comparison expects: per project, per long-lived port,
/// and all together.
struct Expected {
    tenants: BTreeMap<String, VmTraffic>,
    ports: BTreeMap<String, VmTraffic>,
    total: BTreeMap<String, VmTraffic>,
}

fn expected(stable: &[Vm], gone: &BTreeMap<String, VmTraffic>) -> Expected {
    let mut tenants = gone.clone();
    let mut ports = BTreeMap::new();
    let mut all = VmTraffic::default();
    for (vm, s) in stable.iter().zip(&STABLE) {
        let t = VmTraffic::from_tap(counters(vm));
        add(tenants.entry(s.tenant.to_owned()).or_default(), t);
        ports.insert(s.port.to_owned(), t);
    }
    for t in tenants.values() {
        add(&mut all, *t);
    }
    Expected {
        tenants,
        ports,
        total: BTreeMap::from([(String::new(), all)]),
    }
}

/// Polls /metrics until the project, long-lived port and total series
/// equal `want`, or a minute passed: the differences left, if any.
fn final_differences(metrics: SocketAddr, want: &Expected) -> Vec<String> {
    let until = Instant::now() + Duration::from_mins(1);
    loop {
        let mut diffs = Vec::new();
        if let Some((200, body)) = get(metrics, "/metrics") {
            let e = exposition::parse(&body);
            let tenants = sums(
                &e,
                "lachesis_tenant_bytes_total",
                "lachesis_tenant_packets_total",
                Some("tenant_id"),
            );
            let mut ports = sums(
                &e,
                "lachesis_port_bytes_total",
                "lachesis_port_packets_total",
                Some("port_id"),
            );
            ports.retain(|k, _| want.ports.contains_key(k));
            let total = sums(&e, "lachesis_bytes_total", "lachesis_packets_total", None);
            for (what, got, want) in [
                ("projects", &tenants, &want.tenants),
                ("long-lived ports", &ports, &want.ports),
                ("all traffic", &total, &want.total),
            ] {
                if got != want {
                    diffs.push(format!("{what}: series {got:?}\n  taps {want:?}"));
                }
            }
        } else {
            diffs.push("no /metrics".to_owned());
        }
        if diffs.is_empty() || Instant::now() > until {
            return diffs;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The agent and its files, in a directory of this run.
struct Setup {
    dir: tempfile::TempDir,
    config: PathBuf,
    state: PathBuf,
    metrics: SocketAddr,
    _pins: Pins,
}

impl Setup {
    fn new(sim: &Sim, dir: tempfile::TempDir) -> Setup {
        let clouds = dir.path().join("clouds.yaml");
        let text = std::fs::read_to_string(common_repo().join("examples/clouds.yaml"))
            .expect("examples/clouds.yaml");
        std::fs::write(&clouds, text.replace("127.0.0.1:8780", &sim.addr)).expect("clouds.yaml");
        let pins = Pins::new("soak");
        let state = dir.path().join("state/state.json");
        std::fs::create_dir_all(dir.path().join("state")).expect("state dir");
        let mut settings = AgentConfig::new("sim", &clouds, &pins.0, &state);
        settings.interface_prefixes = vec!["tapp-".to_owned()];
        settings.flows_memory_budget_mib = Some(4);
        settings.log_level = Some("info".to_owned());
        settings.rabbitmq_url = Some(rabbit_url());
        settings.tunables = Tunables {
            scrape_interval: Some(Duration::from_secs(1)),
            state_flush_interval: Some(Duration::from_secs(2)),
            reconcile_interval: Some(Duration::from_secs(30)),
            ghost_grace: Some(Duration::from_secs(10)),
            unresolved_ttl: None,
            ghost_sweep_interval: Some(Duration::from_secs(2)),
        };
        let config = dir.path().join("lachesis.yaml");
        settings.write(&config);
        Setup {
            config,
            state,
            metrics: settings.metrics,
            dir,
            _pins: pins,
        }
    }

    fn start(&self, life: usize) -> Agent {
        let mut agent = Agent::start(
            &binary(),
            &self.config,
            self.dir.path().join(format!("agent-{life}.log")),
        );
        agent.wait_ready(self.metrics);
        agent
    }

    /// Flips `tunables.ghost_grace` between 10 s and 11 s (hot) and
    /// signals the agent to reload.
    fn sighup(&self, agent: &Agent, n: u64) {
        let text = std::fs::read_to_string(&self.config).expect("config");
        let (from, to) = if n.is_multiple_of(2) {
            ("ghost_grace: 10s", "ghost_grace: 11s")
        } else {
            ("ghost_grace: 11s", "ghost_grace: 10s")
        };
        assert!(text.contains(from), "{from} not in\n{text}");
        std::fs::write(&self.config, text.replace(from, to)).expect("config");
        agent.signal(libc::SIGHUP);
    }
}

fn common_repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// What happened to the agent and the broker, and the samples.
#[derive(Default)]
struct Run {
    samples: Vec<Sample>,
    monotonic: Monotonic,
    sighups: u64,
    broker_reconnect_s: Option<f64>,
    restart_ready_s: Option<f64>,
    failures: Vec<String>,
}

fn main() -> ExitCode {
    let minutes = match minutes() {
        Ok(m) => m,
        Err(e) => {
            eprintln!("soak: {e}");
            return ExitCode::from(2);
        }
    };
    lachesis_lab::require_root_for("network namespaces, BPF, RabbitMQ");
    let services = Services::rabbitmq();
    let forwarder = Forwarder::start(RABBITMQ_PORT);
    isolate();
    forwarder.listen();
    let dir = tempfile::tempdir().expect("tempdir");
    let topo = dir.path().join("topology.yaml");
    std::fs::write(&topo, topology()).expect("topology");
    let sim = Sim::start(&topo, &dir.path().join("sim.log"));
    let lab = Mutex::new(Lab::new());
    let stable: Vec<Vm> = {
        let mut l = lab.lock().expect("lab");
        let vms = STABLE
            .iter()
            .enumerate()
            .map(|(n, s)| {
                let ip = Ipv4Addr::new(10, 77, 0, u8::try_from(n + 1).expect("small"));
                l.add_vm_with_tap(&tap_name(s.port), s.mac.parse().expect("a MAC"), ip)
            })
            .collect();
        l.static_neighbours();
        vms
    };
    let setup = Setup::new(&sim, dir);
    let duration = Duration::from_mins(minutes);
    println!(
        "soak: {minutes} min of churn against lachesis agent (log: {}); progress every 30 s",
        setup.dir.path().display()
    );
    let out = soak(&services, &sim, &lab, &stable, &setup, duration);
    let refused = sim.errors.load(Ordering::Relaxed);
    let failed = report(&out, &setup, minutes, duration, refused);
    // The lab and its taps go before the agent's pins (Setup) are removed.
    drop(lab);
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// When the warm-up ends: a tenth of the run, at least a minute (half the
/// run when that is shorter).
fn warm_up(duration: Duration) -> Duration {
    (duration / 10)
        .max(Duration::from_mins(1))
        .min(duration / 2)
}

/// At 35 % of the run the broker stops for 15 s; the seconds from its
/// start to the agent's consumer connected again (`None`: never, within
/// two minutes).
fn broker_outage(
    services: &Services,
    metrics: SocketAddr,
    started: Instant,
    duration: Duration,
    stop: &AtomicBool,
) -> Option<f64> {
    let at = started + duration.mul_f64(0.35);
    while Instant::now() < at {
        if stop.load(Ordering::Relaxed) {
            return None;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    println!("soak: stopping the broker for 15 s");
    services.stop_broker();
    std::thread::sleep(Duration::from_secs(15));
    services.start_broker();
    let back = Instant::now();
    let series = "lachesis_notifications_connected{transport=\"rabbitmq\"}";
    while back.elapsed() < Duration::from_mins(2) {
        if lachesis_lab::agent::metric(metrics, series) == Some(1.0) {
            let s = back.elapsed().as_secs_f64();
            println!(
                "soak: broker back; the agent's consumer reconnected {s:.1} s after it started"
            );
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    None
}

/// Polls until the agent counted `want` applied reloads; a failure line
/// otherwise.
fn reloads_applied(metrics: SocketAddr, want: u64, life: usize) -> Option<String> {
    let series = "lachesis_config_reloads_total{result=\"ok\"}";
    let until = Instant::now() + Duration::from_secs(15);
    #[expect(clippy::cast_precision_loss, reason = "a few reloads")]
    let want_f = want as f64;
    loop {
        let got = lachesis_lab::agent::metric(metrics, series);
        if got == Some(want_f) {
            return None;
        }
        if Instant::now() > until {
            return Some(format!(
                "agent life {life}: {want} SIGHUPs, {series} is {got:?}"
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The panic message of a thread that panicked.
fn panic_text(e: &Box<dyn std::any::Any + Send>) -> String {
    e.downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "a panic".to_owned())
}

/// Everything the run did and measured.
#[derive(Default)]
struct Outcome {
    run: Run,
    churned: Churned,
    rounds: u64,
    ephemeral: u64,
    gone: BTreeMap<String, VmTraffic>,
}

/// The main thread's part until the run's end (or the traffic thread's):
/// a sample every second, a SIGHUP every minute, the SIGKILL and restart
/// at 65 %. Returns the agent's life (0, 1 after the restart) and the
/// SIGHUPs sent in it.
fn watch(
    run: &mut Run,
    agent: &mut Agent,
    setup: &Setup,
    started: Instant,
    duration: Duration,
    agent_up: &AtomicBool,
    ended: &dyn Fn() -> bool,
) -> (usize, u64) {
    let (mut life, mut life_hups) = (0, 0);
    let kill_at = duration.mul_f64(0.65);
    let mut next_hup = Duration::from_mins(1);
    let mut next_progress = Duration::from_secs(30);
    let mut tick = started;
    while started.elapsed() < duration && !ended() {
        let now = started.elapsed();
        if life == 0 && now >= kill_at {
            if let Some(f) = reloads_applied(setup.metrics, life_hups, life) {
                run.failures.push(f);
            }
            println!("soak: SIGKILL under traffic, then a restart");
            agent_up.store(false, Ordering::Relaxed);
            agent.signal(libc::SIGKILL);
            agent.wait(Duration::from_secs(10));
            let t = Instant::now();
            life = 1;
            life_hups = 0;
            *agent = setup.start(life);
            run.restart_ready_s = Some(t.elapsed().as_secs_f64());
            agent_up.store(true, Ordering::Relaxed);
        }
        if now >= next_hup {
            setup.sighup(agent, run.sighups);
            run.sighups += 1;
            life_hups += 1;
            next_hup += Duration::from_mins(1);
        }
        if let Some((s, series)) = sample(agent, setup.metrics, &setup.state, now.as_secs_f64()) {
            run.monotonic.check(series, s.at);
            if now >= next_progress {
                println!(
                    "soak: {:>4.0}s  rss {:.1} MiB  fds {}  endpoints {}  flows {}  ledger rows {}  state {:.0} KiB  series {}  decreases {}",
                    s.at, s.rss_mib, s.fds, s.endpoints, s.flows, s.ledger_rows, s.state_kib, s.series,
                    run.monotonic.decreases.len()
                );
                next_progress += Duration::from_secs(30);
            }
            run.samples.push(s);
        }
        tick += Duration::from_secs(1);
        std::thread::sleep(tick.saturating_duration_since(Instant::now()));
    }
    (life, life_hups)
}

fn soak(
    services: &Services,
    sim: &Sim,
    lab: &Mutex<Lab>,
    stable: &[Vm],
    setup: &Setup,
    duration: Duration,
) -> Outcome {
    let mut out = Outcome::default();
    let mut agent = setup.start(0);
    let agent_up = AtomicBool::new(true);
    let stop = AtomicBool::new(false);
    let shared = Shared {
        sim,
        lab,
        stable,
        metrics: setup.metrics,
        agent_up: &agent_up,
        stop: &stop,
    };
    let started = Instant::now();
    std::thread::scope(|scope| {
        let churner = scope.spawn(|| churn(sim, &stop));
        let talker = scope.spawn(|| traffic(&shared));
        let broker =
            scope.spawn(|| broker_outage(services, setup.metrics, started, duration, &stop));
        let (life, life_hups) = watch(
            &mut out.run,
            &mut agent,
            setup,
            started,
            duration,
            &agent_up,
            &|| talker.is_finished(),
        );
        stop.store(true, Ordering::Relaxed);
        match churner.join() {
            Ok(c) => out.churned = c,
            Err(e) => out.run.failures.push(format!("churn: {}", panic_text(&e))),
        }
        match talker.join() {
            Ok(t) => {
                out.rounds = t.rounds;
                out.ephemeral = t.ephemeral;
                out.gone = t.gone;
            }
            Err(e) => out
                .run
                .failures
                .push(format!("traffic: {}", panic_text(&e))),
        }
        match broker.join() {
            Ok(Some(s)) => out.run.broker_reconnect_s = Some(s),
            Ok(None) => out.run.failures.push(
                "the broker outage: the consumer never reconnected (or the run ended first)".into(),
            ),
            Err(e) => out
                .run
                .failures
                .push(format!("broker outage: {}", panic_text(&e))),
        }
        if let Some(f) = reloads_applied(setup.metrics, life_hups, life) {
            out.run.failures.push(f);
        }
    });
    // The end: quiet taps, then the series against them.
    let refs: Vec<&Vm> = stable.iter().collect();
    wait_quiet(&refs);
    let want = expected(stable, &out.gone);
    for d in final_differences(setup.metrics, &want) {
        out.run.failures.push(format!("final sums differ: {d}"));
    }
    let status = agent.terminate(Duration::from_secs(30));
    if !status.success() {
        out.run
            .failures
            .push(format!("SIGTERM: the agent exited {status}"));
    }
    let log = agent.log_text();
    if log.contains("panicked") {
        out.run
            .failures
            .push("the agent's log holds a panic".into());
    }
    out
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// The resource table's rows after the warm-up: their JSON, and the
/// columns that are not flat.
fn resources(after: &[Sample], first: &Sample, last: &Sample) -> (Vec<String>, Vec<&'static str>) {
    // Medians of the first and the last minute after the warm-up: one
    // sample (a sync's peak, a flush) does not make a verdict.
    let window = |from: f64, to: f64| -> Vec<Sample> {
        after
            .iter()
            .copied()
            .filter(|s| s.at >= from && s.at < to)
            .collect()
    };
    let early = window(first.at, first.at + 60.0);
    let late = window(last.at - 59.0, last.at + 1.0);
    let minutes_between = ((last.at - first.at) / 60.0 - 1.0).max(1.0);
    println!(
        "{:<18} {:>10} {:>10} {:>10} {:>9}  verdict",
        "", "first min", "last min", "max", "per min"
    );
    let mut json = Vec::new();
    let mut growing = Vec::new();
    for (name, field, slack) in COLUMNS {
        let max = after.iter().map(field).fold(0.0, f64::max);
        let w = median(early.iter().map(field).collect());
        let e = median(late.iter().map(field).collect());
        let slope = (e - w) / minutes_between;
        let flat = e <= w * 1.25 + slack;
        if !flat {
            growing.push(name);
        }
        let verdict = if flat { "flat" } else { "GROWS" };
        println!("{name:<18} {w:>10.1} {e:>10.1} {max:>10.1} {slope:>+9.1}  {verdict}");
        json.push(format!(
            r#""{}": {{"first_min": {w:.1}, "last_min": {e:.1}, "max": {max:.1}, "per_min": {slope:.2}, "flat": {flat}}}"#,
            name.to_lowercase().replace([' ', '-'], "_")
        ));
    }
    (json, growing)
}

/// The table and the JSON line; whether a check failed.
fn report(out: &Outcome, setup: &Setup, minutes: u64, duration: Duration, refused: u64) -> bool {
    let run = &out.run;
    let warm_s = warm_up(duration).as_secs_f64();
    let after: Vec<Sample> = run
        .samples
        .iter()
        .copied()
        .filter(|s| s.at >= warm_s)
        .collect();
    let (Some(first), Some(last)) = (after.first(), after.last()) else {
        println!("soak: no sample after the warm-up");
        return true;
    };
    println!(
        "\nsoak: {minutes} min, {} samples (1 s apart), warm-up {warm_s:.0} s; after the warm-up:",
        run.samples.len()
    );
    let (json, growing) = resources(&after, first, last);
    let c = out.churned;
    println!(
        "churn: {} ports created, {} moved, {} deleted; {} router re-gateways; {} traffic rounds; {} short-lived VMs (server, port, tap) born and deleted",
        c.created, c.moved, c.deleted, c.regateways, out.rounds, out.ephemeral
    );
    println!(
        "events: {} SIGHUPs; broker stopped 15 s, consumer back {}; SIGKILL + restart ready in {}; {refused} simulator calls refused",
        run.sighups,
        run.broker_reconnect_s.map_or("never".into(), |s| format!("{s:.1} s after the broker")),
        run.restart_ready_s.map_or("-".into(), |s| format!("{s:.1} s")),
    );
    println!(
        "billing series that went down: {}",
        run.monotonic.decreases.len()
    );
    for d in &run.monotonic.decreases {
        println!("  {d}");
    }
    let mut failures = run.failures.clone();
    failures.extend(
        run.monotonic
            .decreases
            .iter()
            .map(|d| format!("went down: {d}")),
    );
    if !growing.is_empty() {
        failures.push(format!(
            "not flat after the warm-up: {}",
            growing.join(", ")
        ));
    }
    if run.failures.is_empty() {
        println!(
            "final: every project, long-lived port and total series equals the taps' counters"
        );
    }
    if !failures.is_empty() {
        println!("FAILED ({}):", failures.len());
        for f in &failures {
            println!("  {f}");
        }
    }
    let kept = keep_logs(setup.dir.path(), &run.samples);
    println!("logs and samples (samples.csv) kept in {}", kept.display());
    println!(
        r#"{{"minutes": {minutes}, "samples": {}, "created": {}, "moved": {}, "deleted": {}, "regateways": {}, "rounds": {}, "ephemeral_vms": {}, "sighups": {}, "broker_reconnect_s": {}, "restart_ready_s": {}, "decreases": {}, "failures": {}, {}}}"#,
        run.samples.len(),
        c.created,
        c.moved,
        c.deleted,
        c.regateways,
        out.rounds,
        out.ephemeral,
        run.sighups,
        run.broker_reconnect_s
            .map_or("null".into(), |s| format!("{s:.1}")),
        run.restart_ready_s
            .map_or("null".into(), |s| format!("{s:.1}")),
        run.monotonic.decreases.len(),
        failures.len(),
        json.join(", ")
    );
    !failures.is_empty()
}

/// Copies the run's logs (agents, simulator) and configuration out of its
/// temporary directory, which goes at the end, into one that stays, with
/// every sample as `samples.csv`.
fn keep_logs(dir: &Path, samples: &[Sample]) -> PathBuf {
    let kept = std::env::temp_dir().join(format!("lachesis-soak-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&kept);
    let mut csv = String::from("seconds");
    for (name, _, _) in COLUMNS {
        let _ = write!(csv, ",{}", name.to_lowercase().replace([' ', '-'], "_"));
    }
    for s in samples {
        let _ = write!(csv, "\n{:.0}", s.at);
        for (_, field, _) in COLUMNS {
            let _ = write!(csv, ",{:.1}", field(s));
        }
    }
    csv.push('\n');
    let _ = std::fs::write(kept.join("samples.csv"), csv);
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "log" || e == "yaml") {
            let _ = std::fs::copy(&path, kept.join(entry.file_name()));
        }
    }
    kept
}
