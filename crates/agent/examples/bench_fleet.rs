//! `make bench-fleet` (root: RabbitMQ from the services tier): what a fleet
//! of agents in direct mode asks of OpenStack (DESIGN §17, issue 21).
//!
//! K agents' metadata paths run as K processes of this binary (`agent`
//! mode), each the real thing but the kernel and the ledger: the real
//! OpenStack client and [`OpenStackSource`] (its own application
//! credential, so the simulator counts it apart), the real RabbitMQ
//! consumer, the real [`Reconciler`] with its ticks at a random phase and
//! its gap kicks spread, a kernel writer that only counts, a ledger that
//! interns tenants and takes every settle. One simulator (in this
//! process, the benchmarks' generated cloud) publishes its changes to one
//! broker.
//!
//! Scenarios, for each K: the fleet's boot (every agent's cold sync); idle
//! for one reconcile interval; one port created; one router interface
//! added; a burst of 100 ports created; a broker restart. For each: the
//! simulator's requests and response bytes per agent and for the fleet
//! (`/sim/stats` by client), the time until every agent's committed plan
//! equals the plan a reference client syncs after the change (for the
//! broker restart: until every agent has made a pass since), and each
//! agent's peak resident set. A table, then one JSON line. Nothing is
//! asserted on time; the exit status is 1 when a fleet did not converge.
//!
//! `cargo run --release -p lachesis-agent --example bench_fleet [K …]`
//! (default 5 10 20).

#![expect(
    clippy::cast_precision_loss,
    clippy::cast_sign_loss,
    reason = "byte, request and memory figures far below 2^52, never negative"
)]

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash as _, Hasher as _};
use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Child, ChildStdin, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{median, round, PAGE};
use lachesis_agent::boot::{BootGate, Phase};
use lachesis_agent::config::{Config, SharedTunables};
use lachesis_agent::reconcile::{
    BatchError, Committed, Initial, KernelWriter, Kicker, LedgerOrder, MetadataSource as _,
    OpenStackSource, PruneFailed, ReconcileMetrics, Reconciler, Seams, SettleBatch, Write,
    WriteError,
};
use lachesis_ledger::InternerFull;
use lachesis_notify::{
    Decision, Gap, NotifyMetrics, RabbitMqConfig, RabbitMqConsumer, RabbitUrl, Sink, Transport,
};
use lachesis_openstack::config::AppCredRef;
use lachesis_openstack::{ApiMetrics, Client, CloudConfig, Credentials};
use lachesis_planner::Plan;
use lachesis_sim::generate::{self, APP_CREDENTIAL_SECRET};
use lachesis_sim::notify::RabbitTarget;
use lachesis_sim::topology::AppCredential;
use lachesis_sim::{SimHandle, SimOptions, Store};
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

/// Fleet sizes measured unless given on the command line.
const FLEETS: &[usize] = &[5, 10, 20];
/// The agents' reconcile interval during the idle window (short, so the
/// benchmark waits one; the cost of an interval does not depend on it).
const IDLE_INTERVAL: Duration = Duration::from_secs(20);
/// Their interval during the event scenarios: long, so no tick mixes into
/// what an event costs.
const EVENT_INTERVAL: Duration = Duration::from_hours(1);
/// The default `tunables.resync_spread`: a broker restart's passes spread
/// over it.
const SPREAD: Duration = Duration::from_secs(30);
/// Longest wait for a fleet to converge on one scenario.
const CONVERGE_LIMIT: Duration = Duration::from_mins(5);
/// Ports of the burst scenario.
const BURST: usize = 100;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("agent") {
        return agent_main(&args[1..]);
    }
    lachesis_lab::require_root_for("the benchmark's RabbitMQ (scripts/real-cloud)");
    let fleets: Vec<usize> = if args.is_empty() {
        FLEETS.to_vec()
    } else {
        args.iter()
            .map(|a| a.parse().expect("fleet sizes are whole numbers"))
            .collect()
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(parent_main(&fleets))
}

// ---------------------------------------------------------------- agents

/// A credential id of agent `i`.
fn agent_credential(i: usize) -> String {
    format!("ac-agent-{i}")
}

/// The credential the reference client syncs with.
const REFERENCE: &str = "ac-reference";

/// The committed plan's kernel-facing parts, hashed: equal for equal
/// plans in every process of this binary (`SipHash` with fixed keys).
fn digest(plan: &Plan) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for part in [
        serde_json::to_string(&plan.trie),
        serde_json::to_string(&plan.bindings),
        serde_json::to_string(&plan.router_macs),
        serde_json::to_string(&plan.amphora_ips),
    ] {
        part.expect("a plan serializes").hash(&mut h);
    }
    h.finish()
}

fn unix_ms() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis(),
    )
    .unwrap_or(u64::MAX)
}

/// A kernel that takes every write.
struct Nothing;

impl KernelWriter for Nothing {
    fn write(&self, _: Write) -> Result<(), WriteError> {
        Ok(())
    }
}

/// A ledger that interns tenants and takes every settle: the metadata path
/// needs nothing more of it.
#[derive(Default)]
struct Interner {
    ids: Mutex<HashMap<String, u32>>,
}

impl LedgerOrder for Interner {
    fn tenant_id(&self, project: &str) -> Result<u32, InternerFull> {
        let mut ids = self.ids.lock().unwrap_or_else(PoisonError::into_inner);
        let next = u32::try_from(ids.len() + 1).unwrap_or(u32::MAX);
        Ok(*ids.entry(project.to_owned()).or_insert(next))
    }

    async fn settle_batch(&self, _: SettleBatch) -> Result<(), BatchError> {
        Ok(())
    }

    async fn prune_servers(&self, _: BTreeSet<String>) -> Result<(), PruneFailed> {
        Ok(())
    }

    async fn prune_tenants(&self, _: BTreeSet<String>) -> Result<(), PruneFailed> {
        Ok(())
    }
}

/// Kicks for kick decisions; a gap after a random share of the spread, as
/// the daemon does.
struct Kicks(Kicker);

impl Sink for Kicks {
    fn decided(&self, _: Transport, decision: &Decision) {
        if decision.is_kick() {
            self.0.kick();
        }
    }

    fn gap(&self, _: Transport, _: Gap) {
        self.0.kick_after(SPREAD.mul_f64(fastrand::f64()));
    }
}

/// `/proc/self/status`'s `VmHWM` in KiB.
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// The agent's RabbitMQ consumer, on every exchange OpenStack publishes to.
fn consumer(rabbit: &str) -> RabbitMqConsumer {
    let mut registry = Registry::default();
    let metrics = NotifyMetrics::register(&mut registry, &[Transport::RabbitMq], None)
        .transport(Transport::RabbitMq);
    RabbitMqConsumer::new(
        RabbitMqConfig {
            url: RabbitUrl::parse(rabbit).expect("broker URL"),
            exchanges: ["neutron", "nova", "keystone", "octavia", "openstack"]
                .map(String::from)
                .to_vec(),
            durable: false,
            ca_file: None,
            first_host: 0,
        },
        metrics,
    )
    .expect("consumer")
}

/// `agent AUTH_URL CREDENTIAL RABBIT_URL INTERVAL_SECS`: one agent's
/// metadata path until its standard input closes. Prints `commit MS
/// DIGEST` at start and at each commit, and when asked (`rss`) its peak
/// resident set since the last time it was asked, `rss KIB`.
fn agent_main(args: &[String]) -> ExitCode {
    let [auth_url, credential, rabbit, interval] = args else {
        eprintln!("usage: bench_fleet agent AUTH_URL CREDENTIAL RABBIT_URL INTERVAL_SECS");
        return ExitCode::from(2);
    };
    let interval = Duration::from_secs(interval.parse().expect("interval seconds"));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(agent(auth_url, credential, rabbit, interval));
    ExitCode::SUCCESS
}

async fn agent(auth_url: &str, credential: &str, rabbit: &str, interval: Duration) {
    let cfg = CloudConfig::new(
        auth_url,
        Credentials::ApplicationCredential {
            credential: AppCredRef::Id(credential.to_owned()),
            secret: APP_CREDENTIAL_SECRET.into(),
        },
    );
    let source = OpenStackSource::new(Client::new(cfg, ApiMetrics::default()).expect("client"));
    let mut tunables = Config::default().tunables;
    tunables.reconcile_interval = interval;
    tunables.resync_spread = SPREAD;
    let tunables = Arc::new(SharedTunables::new(tunables));
    // Cold start, as boot does.
    let synced = loop {
        match source.sync(None, tunables.get().plan_options()).await {
            Ok(s) => break s,
            Err(e) => {
                eprintln!("agent {credential}: cold sync failed: {e}");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    };
    let out = Arc::new(Mutex::new(std::io::stdout()));
    let say = {
        let out = out.clone();
        move |line: String| {
            let mut o = out.lock().unwrap_or_else(PoisonError::into_inner);
            let _ = writeln!(o, "{line}");
            let _ = o.flush();
        }
    };
    say(format!("commit {} {}", unix_ms(), digest(&synced.plan)));
    let gate = BootGate::new();
    for phase in [
        Phase::BpfLoaded,
        Phase::MetadataReady,
        Phase::Attached,
        Phase::StateRestored,
    ] {
        gate.advance(phase).expect("phases in order");
    }
    let reconciler = Reconciler::new(
        Seams {
            source,
            kernel: Nothing,
            ledger: Interner::default(),
        },
        Initial {
            committed: Committed {
                plan: synced.plan.clone(),
                synced_at: SystemTime::now(),
                topology: None,
            },
            projects: synced.projects.clone(),
            servers: synced.servers.clone().unwrap_or_default(),
        },
        tunables,
        gate.waiter(),
        ReconcileMetrics::default(),
    )
    .with_tick_phase(fastrand::f64());
    let cancel = CancellationToken::new();
    let mut commits = reconciler.committed();
    let sink = Kicks(reconciler.kicker());
    let consumer = consumer(rabbit);
    let c = cancel.clone();
    let consuming = tokio::spawn(async move { consumer.run(&sink, c).await });
    let c = cancel.clone();
    let reconciling = tokio::spawn(reconciler.run(c));
    let said = say.clone();
    let watching = tokio::spawn(async move {
        while commits.changed().await.is_ok() {
            let plan = commits.borrow_and_update().plan.clone();
            said(format!("commit {} {}", unix_ms(), digest(&plan)));
        }
    });
    // Commands on standard input; its end ends the agent.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    while let Some(command) = rx.recv().await {
        if command.trim() == "rss" {
            say(format!("rss {}", peak_rss_kib()));
            // The next scenario's peak is its own (proc(5), clear_refs: 5
            // resets the peak resident set).
            let _ = std::fs::write("/proc/self/clear_refs", "5");
        }
    }
    cancel.cancel();
    let _ = reconciling.await;
    let _ = consuming.await;
    watching.abort();
}

// ----------------------------------------------------------------- fleet

/// What the agents print, as it arrives.
#[derive(Clone, Copy)]
enum Heard {
    Commit {
        agent: usize,
        at_ms: u64,
        digest: u64,
    },
    Rss {
        agent: usize,
        kib: u64,
    },
}

/// K agent processes and what they said.
struct Fleet {
    children: Vec<(Child, ChildStdin)>,
    heard: mpsc::Receiver<Heard>,
    /// Each agent's last committed digest and when it was committed.
    last: Vec<Option<(u64, u64)>>,
    /// Commits seen per agent.
    commits: Vec<u64>,
}

impl Fleet {
    fn start(k: usize, sim: &SimHandle, rabbit: &str, interval: Duration) -> Fleet {
        let exe = std::env::current_exe().expect("own path");
        let (tx, heard) = mpsc::channel();
        let mut children = Vec::with_capacity(k);
        for i in 0..k {
            let mut child = Command::new(&exe)
                .args(["agent", &sim.auth_url(), &agent_credential(i), rabbit])
                .arg(interval.as_secs().to_string())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("start an agent");
            let stdin = child.stdin.take().expect("piped");
            let stdout = BufReader::new(child.stdout.take().expect("piped"));
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in stdout.lines() {
                    let Ok(line) = line else { break };
                    let words: Vec<&str> = line.split_whitespace().collect();
                    let heard = match words.as_slice() {
                        ["commit", at, d] => Heard::Commit {
                            agent: i,
                            at_ms: at.parse().unwrap_or(0),
                            digest: d.parse().unwrap_or(0),
                        },
                        ["rss", kib] => Heard::Rss {
                            agent: i,
                            kib: kib.parse().unwrap_or(0),
                        },
                        _ => continue,
                    };
                    if tx.send(heard).is_err() {
                        break;
                    }
                }
            });
            children.push((child, stdin));
        }
        Fleet {
            children,
            heard,
            last: vec![None; k],
            commits: vec![0; k],
        }
    }

    fn take(&mut self, heard: Heard) -> Option<(usize, u64)> {
        match heard {
            Heard::Commit {
                agent,
                at_ms,
                digest,
            } => {
                self.last[agent] = Some((digest, at_ms));
                self.commits[agent] += 1;
                None
            }
            Heard::Rss { agent, kib } => Some((agent, kib)),
        }
    }

    /// Waits until every agent's last commit is `digest` (and, with
    /// `after`, at least one more commit than `after` counts); the latest
    /// of their commit times, or `None` past the limit.
    fn converge(&mut self, digest: Option<u64>, after: Option<&[u64]>) -> Option<u64> {
        let until = Instant::now() + CONVERGE_LIMIT;
        loop {
            let done = (0..self.last.len()).all(|i| {
                let on = digest.is_none_or(|d| self.last[i].is_some_and(|(got, _)| got == d));
                let passed = after.is_none_or(|a| self.commits[i] > a[i]);
                on && passed
            });
            if done {
                return self.last.iter().map(|l| l.map_or(0, |(_, at)| at)).max();
            }
            let left = until.checked_duration_since(Instant::now())?;
            match self
                .heard
                .recv_timeout(left.min(Duration::from_millis(200)))
            {
                Ok(h) => {
                    self.take(h);
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    /// Every agent's peak resident set, KiB.
    fn peak_rss(&mut self) -> Vec<u64> {
        for (_, stdin) in &mut self.children {
            let _ = writeln!(stdin, "rss");
        }
        let mut rss = vec![0; self.children.len()];
        let mut got = 0;
        while got < rss.len() {
            match self.heard.recv_timeout(Duration::from_secs(30)) {
                Ok(h) => {
                    if let Some((agent, kib)) = self.take(h) {
                        rss[agent] = kib;
                        got += 1;
                    }
                }
                Err(_) => break,
            }
        }
        rss
    }

    /// Drains what arrived without waiting.
    fn settle(&mut self) {
        while let Ok(h) = self.heard.try_recv() {
            self.take(h);
        }
    }

    fn stop(self) {
        for (mut child, stdin) in self.children {
            drop(stdin);
            let until = Instant::now() + Duration::from_secs(10);
            loop {
                if child.try_wait().ok().flatten().is_some() {
                    break;
                }
                if Instant::now() > until {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// One scenario's figures for one fleet.
#[derive(Debug, Clone)]
struct Row {
    k: usize,
    scenario: &'static str,
    /// Requests and bytes per agent (median over the agents).
    requests: f64,
    bytes: f64,
    /// The fleet's.
    fleet_requests: u64,
    fleet_bytes: u64,
    /// Until every agent held the change, seconds (`None`: did not).
    converged: Option<f64>,
    /// Peak resident sets, MiB: median and largest.
    rss_median: f64,
    rss_max: f64,
}

/// The simulator's counters by client, requests and bytes, reset after.
fn take_stats(sim: &SimHandle, k: usize) -> (Vec<u64>, Vec<u64>) {
    let stats = sim.with_store(|s| {
        let st = s.stats();
        s.requests_reset();
        st
    });
    let mut requests = vec![0; k];
    let mut bytes = vec![0; k];
    for i in 0..k {
        let client = lachesis_sim::stats::application_credential(&agent_credential(i));
        if let Some(t) = stats.clients.get(&client) {
            requests[i] = t.requests.values().sum();
            bytes[i] = t.response_bytes.values().sum();
        }
    }
    (requests, bytes)
}

/// Waits until the simulator has served nothing for `quiet` (what was
/// asked for is all answered), at most a minute.
fn quiesce(sim: &SimHandle, quiet: Duration) {
    let until = Instant::now() + Duration::from_mins(1);
    let total = || sim.with_store(|s| s.stats().all.requests.values().sum::<u64>());
    let mut last = total();
    let mut since = Instant::now();
    while Instant::now() < until {
        std::thread::sleep(Duration::from_millis(200));
        let now = total();
        if now != last {
            last = now;
            since = Instant::now();
        } else if since.elapsed() >= quiet {
            return;
        }
    }
}

fn row(
    k: usize,
    scenario: &'static str,
    (requests, bytes): (Vec<u64>, Vec<u64>),
    converged: Option<f64>,
    rss: &[u64],
) -> Row {
    let f = |v: &[u64]| v.iter().map(|x| *x as f64).collect::<Vec<f64>>();
    let mib = |kib: u64| kib as f64 / 1024.0;
    Row {
        k,
        scenario,
        requests: median(&f(&requests)),
        bytes: median(&f(&bytes)),
        fleet_requests: requests.iter().sum(),
        fleet_bytes: bytes.iter().sum(),
        converged,
        rss_median: mib(median(&f(rss)) as u64),
        rss_max: mib(rss.iter().copied().max().unwrap_or(0)),
    }
}

/// The reference plan's digest now, synced like an agent syncs.
async fn reference(source: &OpenStackSource) -> u64 {
    let options = Config::default().tunables.plan_options();
    digest(
        &source
            .sync(None, options)
            .await
            .expect("reference sync")
            .plan,
    )
}

/// Posts a control-API change to the simulator.
async fn control(http: &reqwest::Client, sim: &SimHandle, method: &str, path: &str, body: String) {
    let url = format!("{}/sim/{path}", sim.base_url());
    let req = match method {
        "POST" => http.post(&url),
        "PATCH" => http.patch(&url),
        _ => http.put(&url),
    };
    let resp = req
        .header("Content-Type", "application/json")
        .body(body)
        .send()
        .await
        .expect("control API");
    assert!(
        resp.status().is_success(),
        "{method} {url}: {}",
        resp.status()
    );
}

/// Port `n` of the scenarios: a VM port on the first VM port's network.
fn new_port(template: &serde_json::Value, seq: usize) -> String {
    let mut port = template.clone();
    port["id"] = format!("bench-fleet-port-{seq}").into();
    port["mac_address"] = format!(
        "fa:16:3f:{:02x}:{:02x}:{:02x}",
        seq >> 16 & 0xff,
        seq >> 8 & 0xff,
        seq & 0xff
    )
    .into();
    port["device_id"] = format!("bench-fleet-vm-{seq}").into();
    if let Some(ip) = port["fixed_ips"][0]["ip_address"].as_str() {
        // Keep the subnet; a host address no generated port uses.
        let v4: std::net::Ipv4Addr = ip.parse().expect("an IPv4 VM address");
        let [first, second, _, _] = v4.octets();
        let (third, fourth) = (200 + (seq / 250) % 50, 2 + seq % 250);
        port["fixed_ips"][0]["ip_address"] = format!("{first}.{second}.{third}.{fourth}").into();
    }
    port.to_string()
}

static PORTS: AtomicU64 = AtomicU64::new(0);

#[expect(
    clippy::too_many_lines,
    reason = "one scenario after the other, in order"
)]
async fn measure(
    k: usize,
    sim: &SimHandle,
    services: &lachesis_lab::Services,
    rabbit: &str,
    reference_source: &OpenStackSource,
) -> Vec<Row> {
    let http = reqwest::Client::new();
    let mut rows = Vec::new();
    let template = sim.with_store(|s| {
        let t = s.to_topology();
        let port = t
            .ports
            .iter()
            .find(|p| p.device_owner.starts_with("compute:"))
            .expect("a VM port")
            .clone();
        serde_json::to_value(port).expect("a port serializes")
    });

    // Boot, then one idle interval.
    sim.with_store(Store::requests_reset);
    let want = reference(reference_source).await;
    sim.with_store(Store::requests_reset);
    let started = unix_ms();
    let mut fleet = Fleet::start(k, sim, rabbit, IDLE_INTERVAL);
    let done = fleet.converge(Some(want), None);
    quiesce(sim, Duration::from_secs(2));
    let rss = fleet.peak_rss();
    rows.push(row(
        k,
        "boot (cold sync)",
        take_stats(sim, k),
        done.map(|t| secs(t, started)),
        &rss,
    ));
    let before = fleet.commits.clone();
    let started = unix_ms();
    let done = fleet.converge(None, Some(&before));
    // One tick each; then what is still in flight.
    std::thread::sleep(IDLE_INTERVAL.saturating_sub(Duration::from_millis(unix_ms() - started)));
    quiesce(sim, Duration::from_secs(2));
    fleet.settle();
    let rss = fleet.peak_rss();
    rows.push(row(
        k,
        "idle, one interval",
        take_stats(sim, k),
        done.map(|t| secs(t, started)),
        &rss,
    ));
    fleet.stop();

    // The events, with no tick in the way.
    let mut fleet = Fleet::start(k, sim, rabbit, EVENT_INTERVAL);
    fleet.converge(Some(want), None);
    quiesce(sim, Duration::from_secs(2));
    take_stats(sim, k);

    // One port.
    let n = PORTS.fetch_add(1, Ordering::Relaxed) as usize;
    let started = unix_ms();
    control(&http, sim, "POST", "ports", new_port(&template, n)).await;
    let want = reference(reference_source).await;
    let done = fleet.converge(Some(want), None);
    quiesce(sim, Duration::from_secs(3));
    let stats = take_stats(sim, k);
    rows.push(row(
        k,
        "one port created",
        stats,
        done.map(|t| secs(t, started)),
        &fleet.peak_rss(),
    ));

    // One router interface: a subnet of its own first (not measured).
    let net = format!("bench-fleet-net-{k}");
    let sub = format!("bench-fleet-sub-{k}");
    let project = generate::project(1);
    control(
        &http,
        sim,
        "POST",
        "networks",
        serde_json::json!({"id": net, "name": net, "project_id": project}).to_string(),
    )
    .await;
    control(&http, sim, "POST", "subnets", serde_json::json!({"id": sub, "network_id": net, "project_id": project, "cidr": format!("100.{}.0.0/24", 64 + k), "gateway_ip": format!("100.{}.0.1", 64 + k), "ip_version": 4}).to_string()).await;
    fleet.converge(Some(reference(reference_source).await), None);
    quiesce(sim, Duration::from_secs(3));
    take_stats(sim, k);
    let started = unix_ms();
    control(
        &http,
        sim,
        "POST",
        &format!("routers/{}/interfaces", generate::router_id(1)),
        serde_json::json!({"subnet_id": sub, "mac_address": format!("fa:16:3e:fe:{:02x}:01", k)})
            .to_string(),
    )
    .await;
    let want = reference(reference_source).await;
    let done = fleet.converge(Some(want), None);
    quiesce(sim, Duration::from_secs(3));
    let stats = take_stats(sim, k);
    rows.push(row(
        k,
        "one router interface added",
        stats,
        done.map(|t| secs(t, started)),
        &fleet.peak_rss(),
    ));

    // A burst.
    let started = unix_ms();
    for _ in 0..BURST {
        let n = PORTS.fetch_add(1, Ordering::Relaxed) as usize;
        control(&http, sim, "POST", "ports", new_port(&template, n)).await;
    }
    let want = reference(reference_source).await;
    let done = fleet.converge(Some(want), None);
    quiesce(sim, Duration::from_secs(3));
    let stats = take_stats(sim, k);
    rows.push(row(
        k,
        "burst of 100 ports",
        stats,
        done.map(|t| secs(t, started)),
        &fleet.peak_rss(),
    ));

    // A broker restart: every consumer reconnects; each covers the gap
    // within the spread.
    fleet.settle();
    let before = fleet.commits.clone();
    let started = unix_ms();
    services.stop_broker();
    services.start_broker();
    let done = fleet.converge(None, Some(&before));
    quiesce(sim, Duration::from_secs(3));
    let stats = take_stats(sim, k);
    rows.push(row(
        k,
        "broker restart",
        stats,
        done.map(|t| secs(t, started)),
        &fleet.peak_rss(),
    ));
    fleet.stop();
    rows
}

fn secs(at_ms: u64, started_ms: u64) -> f64 {
    round(at_ms.saturating_sub(started_ms) as f64 / 1000.0)
}

async fn parent_main(fleets: &[usize]) -> ExitCode {
    let services = lachesis_lab::Services::rabbitmq();
    let rabbit = format!(
        "rabbit://guest:guest@127.0.0.1:{}/",
        lachesis_lab::services::RABBITMQ_PORT
    );
    let mut topology = generate::large();
    topology.settings.page_size = Some(PAGE);
    let most = fleets.iter().copied().max().unwrap_or(0);
    for id in (0..most)
        .map(agent_credential)
        .chain([REFERENCE.to_owned()])
    {
        topology.application_credentials.push(AppCredential {
            id: id.clone(),
            name: id,
            user_id: "u-bench".to_owned(),
            project_id: generate::project(0),
            secret: APP_CREDENTIAL_SECRET.to_owned(),
        });
    }
    let store = Store::from_topology(&topology).expect("a valid topology");
    let sim = lachesis_sim::start_with(
        store,
        "127.0.0.1:0".parse().unwrap(),
        SimOptions {
            rabbitmq: Some(RabbitTarget {
                url: format!(
                    "amqp://guest:guest@127.0.0.1:{}/%2f",
                    lachesis_lab::services::RABBITMQ_PORT
                ),
                durable: false,
                host: "bench".to_owned(),
            }),
            ..SimOptions::default()
        },
    )
    .await
    .expect("simulator");
    let reference_source = OpenStackSource::new(
        Client::new(
            CloudConfig::new(
                sim.auth_url(),
                Credentials::ApplicationCredential {
                    credential: AppCredRef::Id(REFERENCE.into()),
                    secret: APP_CREDENTIAL_SECRET.into(),
                },
            ),
            ApiMetrics::default(),
        )
        .expect("client"),
    );
    println!(
        "bench-fleet: {} ports, {} networks, {} routers, {} servers; page {PAGE}; fleets {fleets:?}",
        topology.ports.len(),
        topology.networks.len(),
        topology.routers.len(),
        topology.servers.len()
    );
    let mut rows = Vec::new();
    for &k in fleets {
        let measured = measure(k, &sim, &services, &rabbit, &reference_source).await;
        for r in &measured {
            print_row(r);
        }
        rows.extend(measured);
    }
    report(&rows);
    if rows.iter().any(|r| r.converged.is_none()) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// A scenario's short name in the JSON line.
fn json_key(scenario: &str) -> &'static str {
    match scenario {
        s if s.starts_with("boot") => "boot",
        s if s.starts_with("idle") => "idle_interval",
        s if s.starts_with("one port") => "port_created",
        s if s.starts_with("one router") => "router_interface_added",
        s if s.starts_with("burst") => "burst_100_ports",
        _ => "broker_restart",
    }
}

fn print_row(r: &Row) {
    println!(
        "K={:<3} {:<28} per agent {:>6.0} req {:>9.2} MB | fleet {:>6} req {:>9.2} MB | all held it after {:>7} | peak RSS median {:>6.1} MiB, max {:>6.1} MiB",
        r.k,
        r.scenario,
        r.requests,
        r.bytes / 1e6,
        r.fleet_requests,
        r.fleet_bytes as f64 / 1e6,
        r.converged.map_or_else(|| "never".to_owned(), |s| format!("{s:.1} s")),
        r.rss_median,
        r.rss_max
    );
}

/// The table per scenario across fleets, the rule and its extrapolation to
/// 1 000 agents, and one JSON line.
fn report(rows: &[Row]) {
    let scenarios: Vec<&'static str> = {
        let mut seen = Vec::new();
        for r in rows {
            if !seen.contains(&r.scenario) {
                seen.push(r.scenario);
            }
        }
        seen
    };
    println!();
    println!(
        "rule: every agent in direct mode makes its own full sync for each change, tick and gap,"
    );
    println!(
        "so a fleet's requests and bytes are K x one agent's; 1 000 = per-agent median x 1 000"
    );
    println!("(per-agent figures across K show whether that holds).");
    println!(
        "{:<28} {:>14} {:>14} {:>14} {:>16} {:>12}",
        "scenario",
        "MB/agent (K..)",
        "fleet MB max K",
        "at 1 000: GB",
        "at 1 000: req",
        "converged"
    );
    let mut json = BTreeMap::new();
    for s in &scenarios {
        let of: Vec<&Row> = rows.iter().filter(|r| r.scenario == *s).collect();
        let per: Vec<String> = of.iter().map(|r| format!("{:.1}", r.bytes / 1e6)).collect();
        let biggest = of.iter().max_by_key(|r| r.k).expect("a row");
        let per_agent_bytes = median(&of.iter().map(|r| r.bytes).collect::<Vec<_>>());
        let per_agent_req = median(&of.iter().map(|r| r.requests).collect::<Vec<_>>());
        println!(
            "{:<28} {:>14} {:>14.1} {:>14.1} {:>16.0} {:>12}",
            s,
            per.join("/"),
            biggest.fleet_bytes as f64 / 1e6,
            per_agent_bytes * 1000.0 / 1e9,
            per_agent_req * 1000.0,
            biggest
                .converged
                .map_or_else(|| "never".to_owned(), |c| format!("{c:.1} s"))
        );
        let key = json_key(s);
        json.insert(format!("{key}_bytes_per_agent"), round(per_agent_bytes));
        json.insert(format!("{key}_requests_per_agent"), round(per_agent_req));
        json.insert(
            format!("{key}_bytes_at_1000"),
            round(per_agent_bytes * 1000.0),
        );
        for r in &of {
            json.insert(
                format!("{key}_converged_s_k{}", r.k),
                r.converged.unwrap_or(-1.0),
            );
            json.insert(format!("{key}_peak_rss_mib_max_k{}", r.k), round(r.rss_max));
        }
    }
    println!("{}", serde_json::to_string(&json).expect("a JSON object"));
}
