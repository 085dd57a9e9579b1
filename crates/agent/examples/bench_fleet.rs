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
//! added; a burst of 100 ports created; in relay mode, a port whose
//! notification is lost, healed by the relay's digest; a broker restart.
//! For each: the simulator's requests and response bytes per agent and
//! for the fleet (`/sim/stats` by client), the time until every agent's
//! committed plan equals the plan a reference client syncs after the
//! change (for the broker restart: until every agent has made a pass
//! since), and each agent's peak resident set. A table, then one JSON line. Nothing is
//! asserted on time; the exit status is 1 when a fleet did not converge.
//!
//! `cargo run --release -p lachesis-agent --example bench_fleet [K …]`
//! (default 5 10 20). `BENCH_FLEET_MODES` (`direct`, `relay`; default
//! both) picks the modes; `BENCH_FLEET_KICK_DEBOUNCE_MS` sets the agents'
//! `tunables.kick_debounce` (default: the configuration's default).

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
use lachesis_agent::config::{Config, SharedTunables, DEFAULT_LOOKBACK};
use lachesis_agent::daemon::StateStream;
use lachesis_agent::reconcile::{
    BatchError, Committed, Initial, KernelWriter, Kicker, LedgerOrder, MetadataSource as _,
    OpenStackSource, PruneFailed, ReconcileMetrics, Reconciler, RelaySource, Seams, SettleBatch,
    SharedAssembler, Write, WriteError,
};
use lachesis_ledger::InternerFull;
use lachesis_notify::rabbitmq::stream::{StreamConfig, StreamWriter};
use lachesis_notify::{
    Decision, Gap, NotifyMetrics, RabbitMqConfig, RabbitMqConsumer, RabbitUrl, Sink, Transport,
};
use lachesis_openstack::config::AppCredRef;
use lachesis_openstack::{ApiMetrics, Client, CloudConfig, Credentials};
use lachesis_planner::Plan;
use lachesis_relay::{RabbitPublisher, Relay, RelayMetrics, Schedule, HEARTBEAT_INTERVAL};
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
    match args.first().map(String::as_str) {
        Some("agent") => return agent_main(&args[1..]),
        Some("relay-agent") => return relay_agent_main(&args[1..]),
        Some("relay") => return relay_main(&args[1..]),
        _ => {}
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

/// The relay's credential (relay mode), counted apart from the agents'.
const RELAY: &str = "ac-relay";

/// The relay's digest and resync intervals here: long, so neither mixes
/// into a scenario (the idle window asks for one digest, the one the
/// relay makes every `relay.digest_interval` at rest).
const RELAY_PERIODIC: Duration = Duration::from_hours(2);

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

/// A child process's work, on one worker thread.
fn on_one_worker(work: impl std::future::Future<Output = ()>) -> ExitCode {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(work);
    ExitCode::SUCCESS
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
    on_one_worker(agent(auth_url, credential, rabbit, interval))
}

/// One line on standard output, whole, from any task.
type Say = Arc<dyn Fn(String) + Send + Sync>;

fn sayer() -> Say {
    let out = Mutex::new(std::io::stdout());
    Arc::new(move |line: String| {
        let mut o = out.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = writeln!(o, "{line}");
        let _ = o.flush();
    })
}

/// Standard input's commands until it closes: `rss` answers `rss KIB`
/// (and resets the peak); any other line goes to `other`.
async fn commands(say: &Say, mut other: impl FnMut(&str)) {
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
        } else {
            other(command.trim());
        }
    }
}

/// `commit MS DIGEST` at each commit of `commits`.
fn say_commits(
    say: &Say,
    mut commits: tokio::sync::watch::Receiver<Arc<Committed>>,
) -> tokio::task::JoinHandle<()> {
    let say = say.clone();
    tokio::spawn(async move {
        while commits.changed().await.is_ok() {
            let plan = commits.borrow_and_update().plan.clone();
            say(format!("commit {} {}", unix_ms(), digest(&plan)));
        }
    })
}

/// A reconciler on `source` from `synced`, as the daemon builds it once
/// boot has its first plan: every phase passed, ticks at a random phase.
fn reconciler<S: lachesis_agent::reconcile::MetadataSource>(
    source: S,
    synced: &lachesis_agent::reconcile::Synced,
    tunables: Arc<SharedTunables>,
    metrics: ReconcileMetrics,
) -> Reconciler<S, Nothing, Interner> {
    let gate = BootGate::new();
    for phase in [
        Phase::BpfLoaded,
        Phase::MetadataReady,
        Phase::Attached,
        Phase::StateRestored,
    ] {
        gate.advance(phase).expect("phases in order");
    }
    Reconciler::new(
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
        metrics,
    )
    .with_tick_phase(fastrand::f64())
}

/// The tunables of an agent whose metadata come from `mode` (its
/// configuration's defaults: `kick_debounce` is shorter in relay mode),
/// with the reconcile interval `interval`.
fn tunables(mode: Mode, interval: Duration) -> Arc<SharedTunables> {
    let config = match mode {
        Mode::Direct => Config::default(),
        Mode::Relay => Config::from_yaml(
            "metadata:\n  source: relay\n  stream: {url: 'amqp://agent:pw@127.0.0.1/'}\n",
        )
        .expect("a relay-mode configuration"),
    };
    let mut tunables = config.tunables;
    tunables.reconcile_interval = interval;
    tunables.resync_spread = SPREAD;
    if let Ok(ms) = std::env::var("BENCH_FLEET_KICK_DEBOUNCE_MS") {
        let ms = ms
            .parse()
            .expect("BENCH_FLEET_KICK_DEBOUNCE_MS is a whole number of milliseconds");
        tunables.kick_debounce = Duration::from_millis(ms);
    }
    Arc::new(SharedTunables::new(tunables))
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
    let tunables = tunables(Mode::Direct, interval);
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
    let say = sayer();
    say(format!("commit {} {}", unix_ms(), digest(&synced.plan)));
    let reconciler = reconciler(source, &synced, tunables, ReconcileMetrics::default());
    let cancel = CancellationToken::new();
    let commits = reconciler.committed();
    let sink = Kicks(reconciler.kicker());
    let consumer = consumer(rabbit);
    let c = cancel.clone();
    let consuming = tokio::spawn(async move { consumer.run(&sink, c).await });
    let c = cancel.clone();
    let reconciling = tokio::spawn(reconciler.run(c));
    let watching = say_commits(&say, commits);
    // Commands on standard input; its end ends the agent.
    commands(&say, |_| {}).await;
    cancel.cancel();
    let _ = reconciling.await;
    let _ = consuming.await;
    watching.abort();
}

/// The state stream `stream` on the broker `rabbit`.
fn stream_config(rabbit: &str, stream: &str) -> StreamConfig {
    StreamConfig {
        stream: stream.to_owned(),
        ..StreamConfig::new(RabbitUrl::parse(rabbit).expect("broker URL"))
    }
}

/// Bytes this process has received over TCP: `TCP_INFO`'s
/// `tcpi_bytes_received` summed over its open sockets (an agent in relay
/// mode has one, to the broker), so the stream's framing counts too.
fn tcp_bytes_received() -> u64 {
    let Ok(fds) = std::fs::read_dir("/proc/self/fd") else {
        return 0;
    };
    let mut total = 0;
    for entry in fds.flatten() {
        let socket = std::fs::read_link(entry.path())
            .is_ok_and(|t| t.to_string_lossy().starts_with("socket:"));
        let Ok(fd) = entry.file_name().to_string_lossy().parse::<libc::c_int>() else {
            continue;
        };
        if !socket {
            continue;
        }
        // SAFETY: tcp_info is plain integers; all zeroes is a valid value.
        let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
        let mut len = libc::socklen_t::try_from(size_of::<libc::tcp_info>()).unwrap_or(0);
        // SAFETY: `info` and `len` are valid for writes of `len` bytes; a
        // descriptor closed meanwhile or not TCP fails with an error.
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_INFO,
                (&raw mut info).cast(),
                &raw mut len,
            )
        };
        let whole = usize::try_from(len).unwrap_or(0)
            >= std::mem::offset_of!(libc::tcp_info, tcpi_bytes_received) + 8;
        if rc == 0 && whole {
            total += info.tcpi_bytes_received;
        }
    }
    total
}

fn relay_agent_main(args: &[String]) -> ExitCode {
    let [rabbit, stream, interval] = args else {
        eprintln!("usage: bench_fleet relay-agent RABBIT_URL STREAM INTERVAL_SECS");
        return ExitCode::from(2);
    };
    let interval = Duration::from_secs(interval.parse().expect("interval seconds"));
    on_one_worker(relay_agent(rabbit, stream, interval))
}

/// `relay-agent RABBIT_URL STREAM INTERVAL_SECS`: one agent's metadata
/// path in relay mode (`metadata.source: relay`): the daemon's stream task
/// ([`StateStream`]) feeding a [`RelaySource`], the same reconciler, no
/// OpenStack client at all. Prints `boot BYTES` (TCP bytes received when
/// the first complete snapshot is read), `commit MS DIGEST` as the direct
/// agent does, and `heartbeat MS` at each newer relay heartbeat read.
async fn relay_agent(rabbit: &str, stream: &str, interval: Duration) {
    let say = sayer();
    let shared = SharedAssembler::new();
    let metrics = ReconcileMetrics::default();
    let kicker = Kicker::new(metrics.clone());
    let mut registry = Registry::default();
    let task = StateStream::new(
        stream_config(rabbit, stream),
        DEFAULT_LOOKBACK,
        shared.clone(),
        kicker.clone(),
        &mut registry,
    );
    let cancel = CancellationToken::new();
    let reading = tokio::spawn(task.run(cancel.clone()));
    // Boot in relay mode: the first plan once a complete snapshot is read.
    shared.ready().await;
    say(format!("boot {}", tcp_bytes_received()));
    let tunables = tunables(Mode::Relay, interval);
    let source = RelaySource::new(shared.clone());
    let synced = source
        .sync(None, tunables.get().plan_options())
        .await
        .expect("a ready assembler plans");
    say(format!("commit {} {}", unix_ms(), digest(&synced.plan)));
    let reconciler = reconciler(source, &synced, tunables, metrics).with_kicker(kicker);
    let commits = reconciler.committed();
    let c = cancel.clone();
    let reconciling = tokio::spawn(reconciler.run(c));
    let watching = say_commits(&say, commits);
    let said = say.clone();
    let beats = shared.clone();
    let heartbeats = tokio::spawn(async move {
        let mut last = 0;
        loop {
            let newest = beats.with(|a| a.heartbeats().values().map(|h| h.at_ms).max());
            if let Some(at) = newest.filter(|at| *at > last) {
                last = at;
                said(format!("heartbeat {at}"));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    commands(&say, |_| {}).await;
    cancel.cancel();
    let _ = reconciling.await;
    let _ = reading.await;
    watching.abort();
    heartbeats.abort();
}

fn relay_main(args: &[String]) -> ExitCode {
    let [auth_url, rabbit, stream] = args else {
        eprintln!("usage: bench_fleet relay AUTH_URL RABBIT_URL STREAM");
        return ExitCode::from(2);
    };
    on_one_worker(relay(auth_url, rabbit, stream))
}

/// `relay AUTH_URL RABBIT_URL STREAM`: `lachesis relay`'s loop ([`Relay`],
/// [`RabbitPublisher`]) with its own credential, fed by the same RabbitMQ
/// consumer, until standard input closes. `digest` on standard input asks
/// for one digest (as a notification gap does, one second later).
async fn relay(auth_url: &str, rabbit: &str, stream: &str) {
    let say = sayer();
    let cfg = CloudConfig::new(
        auth_url,
        Credentials::ApplicationCredential {
            credential: AppCredRef::Id(RELAY.to_owned()),
            secret: APP_CREDENTIAL_SECRET.into(),
        },
    );
    let client = Client::new(cfg, ApiMetrics::default()).expect("client");
    let metrics = RelayMetrics::default();
    let schedule = Schedule {
        name: "bench-relay".to_owned(),
        digest_interval: RELAY_PERIODIC,
        resync_interval: RELAY_PERIODIC,
        snapshot_interval: lachesis_relay::config::RelaySettings::default().snapshot_interval,
        heartbeat_interval: HEARTBEAT_INTERVAL,
    };
    let (sink, inputs) = lachesis_relay::channel(metrics.clone());
    let relay = Relay::new(
        schedule,
        client,
        RabbitPublisher::new(stream_config(rabbit, stream)),
        metrics,
    );
    let cancel = CancellationToken::new();
    let running = tokio::spawn(relay.run(inputs, cancel.clone()));
    let consumer = consumer(rabbit);
    let (c, s) = (cancel.clone(), sink.clone());
    let consuming = tokio::spawn(async move { consumer.run(&s, c).await });
    commands(&say, |command| {
        if command == "digest" {
            sink.gap(Transport::RabbitMq, Gap::Reconnected);
        }
    })
    .await;
    cancel.cancel();
    let _ = running.await;
    let _ = consuming.await;
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
    /// Relay mode: TCP bytes received when the first complete snapshot
    /// was read.
    Boot {
        agent: usize,
        bytes: u64,
    },
    /// Relay mode: the newest relay heartbeat read (its `at_ms`).
    Heartbeat {
        agent: usize,
        at_ms: u64,
    },
}

/// Where an agent's metadata comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Its own OpenStack client, kicked by notifications.
    Direct,
    /// The relay's state stream.
    Relay,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Direct => "direct",
            Mode::Relay => "relay",
        }
    }
}

/// Reads a child's lines into `tx` as [`Heard`] (as agent `i`).
fn listen(stdout: std::process::ChildStdout, i: usize, tx: mpsc::Sender<Heard>) {
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let words: Vec<&str> = line.split_whitespace().collect();
            let n = |w: &str| w.parse().unwrap_or(0);
            let heard = match words.as_slice() {
                ["commit", at, d] => Heard::Commit {
                    agent: i,
                    at_ms: n(at),
                    digest: n(d),
                },
                ["rss", kib] => Heard::Rss {
                    agent: i,
                    kib: n(kib),
                },
                ["boot", bytes] => Heard::Boot {
                    agent: i,
                    bytes: n(bytes),
                },
                ["heartbeat", at] => Heard::Heartbeat {
                    agent: i,
                    at_ms: n(at),
                },
                _ => continue,
            };
            if tx.send(heard).is_err() {
                break;
            }
        }
    });
}

/// Stops a child by closing its standard input; killed after 10 s.
fn stop_child(mut child: Child, stdin: ChildStdin) {
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

/// The relay of relay mode, a child process, on a stream of this run's.
struct RelayProc {
    child: Child,
    stdin: ChildStdin,
    heard: mpsc::Receiver<Heard>,
}

impl RelayProc {
    fn start(sim: &SimHandle, rabbit: &str, stream: &str) -> RelayProc {
        let exe = std::env::current_exe().expect("own path");
        let mut child = Command::new(&exe)
            .args(["relay", &sim.auth_url(), rabbit, stream])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the relay");
        let stdin = child.stdin.take().expect("piped");
        let (tx, heard) = mpsc::channel();
        listen(child.stdout.take().expect("piped"), 0, tx);
        RelayProc {
            child,
            stdin,
            heard,
        }
    }

    fn digest(&mut self) {
        let _ = writeln!(self.stdin, "digest");
    }

    /// Its peak resident set since last asked, KiB.
    fn peak_rss(&mut self) -> u64 {
        let _ = writeln!(self.stdin, "rss");
        loop {
            match self.heard.recv_timeout(Duration::from_secs(30)) {
                Ok(Heard::Rss { kib, .. }) => return kib,
                Ok(_) => {}
                Err(_) => return 0,
            }
        }
    }

    fn stop(self) {
        stop_child(self.child, self.stdin);
    }
}

/// K agent processes and what they said.
struct Fleet {
    children: Vec<(Child, ChildStdin)>,
    heard: mpsc::Receiver<Heard>,
    /// Each agent's last committed digest and when it first committed it.
    last: Vec<Option<(u64, u64)>>,
    /// Commits seen per agent.
    commits: Vec<u64>,
    /// When each agent last committed (a pass, whatever its plan).
    passed: Vec<u64>,
    /// Relay mode: TCP bytes each agent had received at its boot.
    boot_bytes: Vec<Option<u64>>,
    /// Relay mode: the newest heartbeat each agent read (its `at_ms`)
    /// and when the agent said so.
    heartbeats: Vec<(u64, u64)>,
}

impl Fleet {
    /// K agents in `mode`: direct ones against `sim`, relay ones on `stream`.
    fn start(
        k: usize,
        mode: Mode,
        sim: &SimHandle,
        rabbit: &str,
        stream: &str,
        interval: Duration,
    ) -> Fleet {
        let exe = std::env::current_exe().expect("own path");
        let (tx, heard) = mpsc::channel();
        let mut children = Vec::with_capacity(k);
        for i in 0..k {
            let mut command = Command::new(&exe);
            match mode {
                Mode::Direct => {
                    command.args(["agent", &sim.auth_url(), &agent_credential(i), rabbit])
                }
                Mode::Relay => command.args(["relay-agent", rabbit, stream]),
            };
            let mut child = command
                .arg(interval.as_secs().to_string())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("start an agent");
            let stdin = child.stdin.take().expect("piped");
            listen(child.stdout.take().expect("piped"), i, tx.clone());
            children.push((child, stdin));
        }
        Fleet {
            children,
            heard,
            last: vec![None; k],
            commits: vec![0; k],
            passed: vec![0; k],
            boot_bytes: vec![None; k],
            heartbeats: vec![(0, 0); k],
        }
    }

    fn take(&mut self, heard: Heard) -> Option<(usize, u64)> {
        match heard {
            Heard::Commit {
                agent,
                at_ms,
                digest,
            } => {
                // A pass that commits the same plan again (a tick) does
                // not move when the agent came to hold it.
                if self.last[agent].is_none_or(|(held, _)| held != digest) {
                    self.last[agent] = Some((digest, at_ms));
                }
                self.commits[agent] += 1;
                self.passed[agent] = at_ms;
                None
            }
            Heard::Rss { agent, kib } => Some((agent, kib)),
            Heard::Boot { agent, bytes } => {
                self.boot_bytes[agent] = Some(bytes);
                None
            }
            Heard::Heartbeat { agent, at_ms } => {
                if at_ms > self.heartbeats[agent].0 {
                    self.heartbeats[agent] = (at_ms, unix_ms());
                }
                None
            }
        }
    }

    /// Waits until `done` says every agent is there (each agent's time
    /// of getting there, ms since the epoch), taking what they say
    /// meanwhile; `None` past the limit.
    fn wait(&mut self, done: impl Fn(&Fleet) -> Option<Vec<u64>>) -> Option<Vec<u64>> {
        let until = Instant::now() + CONVERGE_LIMIT;
        loop {
            if let Some(times) = done(self) {
                return Some(times);
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

    /// Waits until every agent's last commit is `digest` (and, with
    /// `after`, at least one more commit than `after` counts); each
    /// agent's time of holding `digest` (without one: of its last pass).
    fn converge(&mut self, digest: Option<u64>, after: Option<&[u64]>) -> Option<Vec<u64>> {
        self.wait(|f| {
            let done = (0..f.last.len()).all(|i| {
                let on = digest.is_none_or(|d| f.last[i].is_some_and(|(got, _)| got == d));
                let passed = after.is_none_or(|a| f.commits[i] > a[i]);
                on && passed
            });
            done.then(|| match digest {
                Some(_) => f.last.iter().map(|l| l.map_or(0, |(_, at)| at)).collect(),
                None => f.passed.clone(),
            })
        })
    }

    /// Relay mode: waits until every agent has read a heartbeat the relay
    /// wrote at or after `since_ms` (it reads the stream again); when each
    /// said so.
    fn converge_heartbeat(&mut self, since_ms: u64) -> Option<Vec<u64>> {
        self.wait(|f| {
            f.heartbeats
                .iter()
                .all(|(at, _)| *at >= since_ms)
                .then(|| f.heartbeats.iter().map(|(_, seen)| *seen).collect())
        })
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

    /// Every agent's commits so far, what has arrived taken first.
    fn passes(&mut self) -> Vec<u64> {
        self.settle();
        self.commits.clone()
    }

    /// The plan every agent must come to hold after a change: a reference
    /// client's sync, made once each agent has passed since `before`
    /// ([`Fleet::passes`] before the change), so that the reference's own
    /// full sync (the simulator serving it 22.8 MB, the client parsing
    /// them) does not share the 2 cores with the agents' first passes.
    /// The agents' times are their commits' own, whenever read.
    async fn reference_after(&mut self, before: &[u64], source: &OpenStackSource) -> u64 {
        let _ = self.converge(None, Some(before));
        reference(source).await
    }

    /// Drains what arrived without waiting.
    fn settle(&mut self) {
        while let Ok(h) = self.heard.try_recv() {
            self.take(h);
        }
    }

    fn stop(self) {
        for (child, stdin) in self.children {
            stop_child(child, stdin);
        }
    }
}

/// One scenario's figures for one fleet.
#[derive(Debug, Clone)]
struct Row {
    k: usize,
    mode: Mode,
    scenario: &'static str,
    /// How many events the scenario is (per-event figures divide by it;
    /// 0: not an event).
    events: usize,
    /// Requests and bytes per agent (median over the agents).
    requests: f64,
    bytes: f64,
    /// The relay's (relay mode; 0 in direct mode).
    relay_requests: u64,
    relay_bytes: u64,
    /// The fleet's: every agent's and the relay's.
    fleet_requests: u64,
    fleet_bytes: u64,
    /// Until each agent held the change, seconds: median and worst over
    /// the agents (`None`: not every agent did).
    converged: Option<(f64, f64)>,
    /// Agents' peak resident sets, MiB: median and largest.
    rss_median: f64,
    rss_max: f64,
    /// The relay's peak resident set, MiB.
    relay_rss: f64,
    /// Relay mode's boot: TCP bytes an agent received from the broker
    /// until its first complete snapshot (median, largest).
    stream_boot_bytes: Option<(f64, f64)>,
}

/// What the simulator served, by client.
struct Served {
    agents: (Vec<u64>, Vec<u64>),
    relay: (u64, u64),
}

/// The simulator's counters by client, requests and bytes, reset after.
fn take_stats(sim: &SimHandle, k: usize) -> Served {
    let stats = sim.with_store(|s| {
        let st = s.stats();
        s.requests_reset();
        st
    });
    let of = |credential: &str| {
        let client = lachesis_sim::stats::application_credential(credential);
        stats.clients.get(&client).map_or((0, 0), |t| {
            (
                t.requests.values().sum::<u64>(),
                t.response_bytes.values().sum::<u64>(),
            )
        })
    };
    let (requests, bytes) = (0..k).map(|i| of(&agent_credential(i))).unzip();
    Served {
        agents: (requests, bytes),
        relay: of(RELAY),
    }
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

/// The scenario being measured: which fleet, which change.
struct Scenario {
    k: usize,
    mode: Mode,
    name: &'static str,
    events: usize,
    started_ms: u64,
}

fn row(
    at: &Scenario,
    served: Served,
    held: Option<Vec<u64>>,
    rss: &[u64],
    relay_rss: u64,
    boot_bytes: &[Option<u64>],
) -> Row {
    let f = |v: &[u64]| v.iter().map(|x| *x as f64).collect::<Vec<f64>>();
    let mib = |kib: u64| kib as f64 / 1024.0;
    let (requests, bytes) = served.agents;
    let (relay_requests, relay_bytes) = served.relay;
    let converged = held.map(|times| {
        let secs: Vec<f64> = times.iter().map(|t| secs(*t, at.started_ms)).collect();
        (median(&secs), secs.iter().copied().fold(0.0, f64::max))
    });
    let booted: Vec<u64> = boot_bytes.iter().flatten().copied().collect();
    Row {
        k: at.k,
        mode: at.mode,
        scenario: at.name,
        events: at.events,
        requests: median(&f(&requests)),
        bytes: median(&f(&bytes)),
        relay_requests,
        relay_bytes,
        fleet_requests: requests.iter().sum::<u64>() + relay_requests,
        fleet_bytes: bytes.iter().sum::<u64>() + relay_bytes,
        converged,
        rss_median: mib(median(&f(rss)) as u64),
        rss_max: mib(rss.iter().copied().max().unwrap_or(0)),
        relay_rss: mib(relay_rss),
        stream_boot_bytes: (!booted.is_empty()).then(|| {
            (
                median(&f(&booted)),
                booted.iter().copied().max().unwrap_or(0) as f64,
            )
        }),
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

/// A stream of this run's for fleet size `k`, declared now (so agents
/// that start with the relay find it), deleted by [`delete_stream`].
async fn stream_for(rabbit: &str, k: usize) -> String {
    let stream = format!("bench-fleet-{}-k{k}", std::process::id());
    StreamWriter::open(&stream_config(rabbit, &stream))
        .await
        .expect("declare the run's stream");
    stream
}

async fn delete_stream(stream: &str) {
    let deleted = async {
        let conn = lapin::Connection::connect(
            &format!(
                "amqp://guest:guest@127.0.0.1:{}/%2f",
                lachesis_lab::services::RABBITMQ_PORT
            ),
            lapin::ConnectionProperties::default(),
        )
        .await?;
        let chan = conn.create_channel().await?;
        chan.queue_delete(stream.into(), lapin::options::QueueDeleteOptions::default())
            .await?;
        Ok::<_, lapin::Error>(())
    };
    if let Err(e) = deleted.await {
        eprintln!("bench-fleet: the run's stream {stream} was not deleted: {e}");
    }
}

/// The fleet of one mode and the relay, if any, and what they cost.
struct Run<'a> {
    k: usize,
    mode: Mode,
    sim: &'a SimHandle,
    rabbit: &'a str,
    stream: String,
    relay: Option<RelayProc>,
    rows: Vec<Row>,
}

impl Run<'_> {
    fn fleet(&self, interval: Duration) -> Fleet {
        Fleet::start(
            self.k,
            self.mode,
            self.sim,
            self.rabbit,
            &self.stream,
            interval,
        )
    }

    fn at(&self, name: &'static str, events: usize, started_ms: u64) -> Scenario {
        Scenario {
            k: self.k,
            mode: self.mode,
            name,
            events,
            started_ms,
        }
    }

    /// The scenario's row: what was served since the last one, who held
    /// it when, the peaks.
    fn record(&mut self, at: &Scenario, held: Option<Vec<u64>>, fleet: &mut Fleet) {
        let served = take_stats(self.sim, self.k);
        let rss = fleet.peak_rss();
        let relay_rss = self.relay.as_mut().map_or(0, RelayProc::peak_rss);
        let boot = if at.name.starts_with("boot") {
            fleet.boot_bytes.clone()
        } else {
            Vec::new()
        };
        self.rows
            .push(row(at, served, held, &rss, relay_rss, &boot));
    }
}

#[expect(
    clippy::too_many_lines,
    reason = "one scenario after the other, in order"
)]
async fn measure(
    k: usize,
    mode: Mode,
    sim: &SimHandle,
    services: &lachesis_lab::Services,
    rabbit: &str,
    reference_source: &OpenStackSource,
) -> Vec<Row> {
    let http = reqwest::Client::new();
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
    let stream = match mode {
        Mode::Direct => String::new(),
        Mode::Relay => stream_for(rabbit, k).await,
    };
    let mut run = Run {
        k,
        mode,
        sim,
        rabbit,
        stream,
        relay: None,
        rows: Vec::new(),
    };

    // Boot (in relay mode the relay's too: its full sync, its snapshot,
    // every agent reading it), then one idle interval.
    sim.with_store(Store::requests_reset);
    let want = reference(reference_source).await;
    sim.with_store(Store::requests_reset);
    let started = unix_ms();
    if mode == Mode::Relay {
        run.relay = Some(RelayProc::start(sim, rabbit, &run.stream));
    }
    let mut fleet = run.fleet(IDLE_INTERVAL);
    let done = fleet.converge(Some(want), None);
    quiesce(sim, Duration::from_secs(2));
    let at = run.at("boot", 0, started);
    run.record(&at, done, &mut fleet);
    fleet.settle();
    let before = fleet.commits.clone();
    let started = unix_ms();
    // At rest the relay makes one digest per `relay.digest_interval`:
    // this window holds one.
    if let Some(relay) = run.relay.as_mut() {
        relay.digest();
    }
    let done = fleet.converge(None, Some(&before));
    // One tick each; then what is still in flight.
    std::thread::sleep(IDLE_INTERVAL.saturating_sub(Duration::from_millis(unix_ms() - started)));
    quiesce(sim, Duration::from_secs(2));
    fleet.settle();
    let at = run.at("idle, one interval", 0, started);
    run.record(&at, done, &mut fleet);
    fleet.stop();

    // The events, with no tick in the way.
    let mut fleet = run.fleet(EVENT_INTERVAL);
    fleet.converge(Some(want), None);
    quiesce(sim, Duration::from_secs(2));
    take_stats(sim, k);
    fleet.peak_rss();

    // One port.
    let n = PORTS.fetch_add(1, Ordering::Relaxed) as usize;
    let before = fleet.passes();
    let started = unix_ms();
    control(&http, sim, "POST", "ports", new_port(&template, n)).await;
    let want = fleet.reference_after(&before, reference_source).await;
    let done = fleet.converge(Some(want), None);
    quiesce(sim, Duration::from_secs(3));
    let at = run.at("one port created", 1, started);
    run.record(&at, done, &mut fleet);

    // One router interface: a subnet of its own first (not measured).
    let tag = k * 2 + usize::from(mode == Mode::Relay);
    let net = format!("bench-fleet-net-{tag}");
    let sub = format!("bench-fleet-sub-{tag}");
    let project = generate::project(1);
    control(
        &http,
        sim,
        "POST",
        "networks",
        serde_json::json!({"id": net, "name": net, "project_id": project}).to_string(),
    )
    .await;
    let (a, b) = (64 + tag / 250, tag % 250);
    control(&http, sim, "POST", "subnets", serde_json::json!({"id": sub, "network_id": net, "project_id": project, "cidr": format!("100.{a}.{b}.0/24"), "gateway_ip": format!("100.{a}.{b}.1"), "ip_version": 4}).to_string()).await;
    fleet.converge(Some(reference(reference_source).await), None);
    quiesce(sim, Duration::from_secs(3));
    take_stats(sim, k);
    let before = fleet.passes();
    let started = unix_ms();
    control(
        &http,
        sim,
        "POST",
        &format!("routers/{}/interfaces", generate::router_id(1)),
        serde_json::json!({"subnet_id": sub, "mac_address": format!("fa:16:3e:fe:{:02x}:{:02x}", tag >> 8 & 0xff, tag & 0xff)})
            .to_string(),
    )
    .await;
    let want = fleet.reference_after(&before, reference_source).await;
    let done = fleet.converge(Some(want), None);
    quiesce(sim, Duration::from_secs(3));
    let at = run.at("one router interface added", 1, started);
    run.record(&at, done, &mut fleet);

    // A burst.
    let before = fleet.passes();
    let started = unix_ms();
    for _ in 0..BURST {
        let n = PORTS.fetch_add(1, Ordering::Relaxed) as usize;
        control(&http, sim, "POST", "ports", new_port(&template, n)).await;
    }
    let want = fleet.reference_after(&before, reference_source).await;
    let done = fleet.converge(Some(want), None);
    quiesce(sim, Duration::from_secs(3));
    let at = run.at("burst of 100 ports", BURST, started);
    run.record(&at, done, &mut fleet);

    // Relay mode: a port whose `port.create.end` the simulator drops,
    // healed by the relay's digest (asked for as after a notification
    // gap: it starts 1 s later, `GAP_DIGEST_DELAY`). Held: from asking
    // until every agent holds the port.
    if let Some(relay) = run.relay.as_mut() {
        let drop = |event: Option<&str>| {
            let rules: Vec<serde_json::Value> = event
                .map(|e| serde_json::json!({"event_type": e, "probability": 1.0, "action": "drop"}))
                .into_iter()
                .collect();
            serde_json::json!({"notification_faults": {"rules": rules}}).to_string()
        };
        control(&http, sim, "PUT", "settings", drop(Some("port.create.end"))).await;
        let n = PORTS.fetch_add(1, Ordering::Relaxed) as usize;
        control(&http, sim, "POST", "ports", new_port(&template, n)).await;
        control(&http, sim, "PUT", "settings", drop(None)).await;
        let want = reference(reference_source).await;
        take_stats(sim, k);
        let started = unix_ms();
        relay.digest();
        let done = fleet.converge(Some(want), None);
        quiesce(sim, Duration::from_secs(3));
        let at = run.at("lost notification, digest", 1, started);
        run.record(&at, done, &mut fleet);
    }

    // A broker restart: every consumer reconnects. Direct: each agent
    // covers the gap within the spread (until every one made a pass).
    // Relay: the relay covers it with one digest; each agent reads the
    // stream again after its last offset (until every one read a
    // heartbeat written since).
    fleet.settle();
    let before = fleet.commits.clone();
    let started = unix_ms();
    services.stop_broker();
    services.start_broker();
    let done = match mode {
        Mode::Direct => fleet.converge(None, Some(&before)),
        Mode::Relay => fleet.converge_heartbeat(started),
    };
    quiesce(sim, Duration::from_secs(3));
    let at = run.at("broker restart", 0, started);
    run.record(&at, done, &mut fleet);
    fleet.stop();
    if let Some(relay) = run.relay.take() {
        relay.stop();
    }
    if mode == Mode::Relay {
        delete_stream(&run.stream).await;
    }
    run.rows
}

fn secs(at_ms: u64, started_ms: u64) -> f64 {
    round(at_ms.saturating_sub(started_ms) as f64 / 1000.0)
}

async fn parent_main(fleets: &[usize]) -> ExitCode {
    let modes = match std::env::var("BENCH_FLEET_MODES").as_deref() {
        Err(_) | Ok("" | "both") => vec![Mode::Direct, Mode::Relay],
        Ok("direct") => vec![Mode::Direct],
        Ok("relay") => vec![Mode::Relay],
        Ok(other) => {
            eprintln!("bench-fleet: BENCH_FLEET_MODES={other:?}: expected direct, relay or both");
            return ExitCode::from(2);
        }
    };
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
        .chain([REFERENCE.to_owned(), RELAY.to_owned()])
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
        "bench-fleet: {} ports, {} networks, {} routers, {} servers; page {PAGE}; fleets {fleets:?}; modes {:?}",
        topology.ports.len(),
        topology.networks.len(),
        topology.routers.len(),
        topology.servers.len(),
        modes.iter().map(|m| m.name()).collect::<Vec<_>>()
    );
    let mut rows = Vec::new();
    for &k in fleets {
        for &mode in &modes {
            let measured = measure(k, mode, &sim, &services, &rabbit, &reference_source).await;
            for r in &measured {
                print_row(r);
            }
            rows.extend(measured);
        }
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
        s if s.starts_with("lost") => "digest_repair",
        _ => "broker_restart",
    }
}

fn held(r: &Row) -> String {
    r.converged
        .map_or_else(|| "never".to_owned(), |(m, w)| format!("{m:.1}/{w:.1} s"))
}

fn print_row(r: &Row) {
    println!(
        "K={:<3} {:<6} {:<28} per agent {:>6.0} req {:>9.2} MB | relay {:>5} req {:>8.3} MB | fleet {:>6} req {:>9.2} MB | held after (median/worst) {:>13} | peak RSS agents median {:>6.1} MiB, max {:>6.1} MiB; relay {:>6.1} MiB",
        r.k,
        r.mode.name(),
        r.scenario,
        r.requests,
        r.bytes / 1e6,
        r.relay_requests,
        r.relay_bytes as f64 / 1e6,
        r.fleet_requests,
        r.fleet_bytes as f64 / 1e6,
        held(r),
        r.rss_median,
        r.rss_max,
        r.relay_rss,
    );
}

/// A scenario's scenarios in the order first measured.
fn scenarios(rows: &[Row]) -> Vec<&'static str> {
    let mut seen = Vec::new();
    for r in rows {
        if !seen.contains(&r.scenario) {
            seen.push(r.scenario);
        }
    }
    seen
}

/// Direct and relay side by side for each K; direct's rule and its
/// extrapolation to 1 000 agents; one JSON line with both.
#[expect(clippy::too_many_lines, reason = "tables, then the JSON line")]
fn report(rows: &[Row]) {
    let scenarios = scenarios(rows);
    let of = |mode: Mode, k: usize, s: &str| {
        rows.iter()
            .find(|r| r.mode == mode && r.k == k && r.scenario == s)
    };
    // One full sync: a direct agent's cold sync (the per-event target's unit).
    let full_sync = median(
        &rows
            .iter()
            .filter(|r| r.mode == Mode::Direct && r.scenario == "boot")
            .map(|r| r.bytes)
            .collect::<Vec<_>>(),
    );
    let mut ks: Vec<usize> = rows.iter().map(|r| r.k).collect();
    ks.dedup();
    let mut json = BTreeMap::new();
    json.insert("full_sync_bytes".to_owned(), round(full_sync));
    println!();
    println!(
        "side by side (fleet = every agent + the relay; per event: a burst's figures / 100; held: event -> every agent's committed plan, median/worst over agents; one full sync = {:.2} MB)",
        full_sync / 1e6
    );
    for k in ks {
        println!();
        println!(
            "K={k:<3} {:<26} | {:>22} {:>10} {:>13} | {:>22} {:>12} {:>9} {:>13} | {:>16}",
            "scenario",
            "direct: fleet req / MB",
            "per event",
            "held",
            "relay: fleet req / MB",
            "per event",
            "% sync",
            "held",
            "RSS max d/r/relay"
        );
        for s in &scenarios {
            if let (None, Some(r)) = (of(Mode::Direct, k, s), of(Mode::Relay, k, s)) {
                println!(
                    "      {:<26} | {:>47} | {:>9} / {:>10.3} {:>22} {:>13} |",
                    s,
                    "(relay mode only)",
                    r.fleet_requests,
                    r.fleet_bytes as f64 / 1e6,
                    "",
                    held(r),
                );
                let key = json_key(s);
                json.insert(
                    format!("relay_{key}_fleet_requests_k{k}"),
                    r.fleet_requests as f64,
                );
                json.insert(
                    format!("relay_{key}_fleet_bytes_k{k}"),
                    r.fleet_bytes as f64,
                );
                let (med, worst) = r.converged.unwrap_or((-1.0, -1.0));
                json.insert(format!("relay_{key}_held_median_s_k{k}"), med);
                json.insert(format!("relay_{key}_held_worst_s_k{k}"), worst);
                continue;
            }
            let (Some(d), Some(r)) = (of(Mode::Direct, k, s), of(Mode::Relay, k, s)) else {
                continue;
            };
            let per = |x: &Row| {
                if x.events == 0 {
                    ("-".to_owned(), f64::NAN)
                } else {
                    let e = x.events as f64;
                    (
                        format!("{:.1} req", x.fleet_requests as f64 / e),
                        x.fleet_bytes as f64 / e,
                    )
                }
            };
            let (d_per, _) = per(d);
            let (r_per, r_bytes) = per(r);
            println!(
                "      {:<26} | {:>9} / {:>10.2} {:>10} {:>13} | {:>9} / {:>10.3} {:>12} {:>9} {:>13} | {:>5.0}/{:>4.0}/{:>5.0}",
                s,
                d.fleet_requests,
                d.fleet_bytes as f64 / 1e6,
                d_per,
                held(d),
                r.fleet_requests,
                r.fleet_bytes as f64 / 1e6,
                r_per,
                if r_bytes.is_nan() {
                    "-".to_owned()
                } else {
                    format!("{:.3} %", r_bytes * 100.0 / full_sync)
                },
                held(r),
                d.rss_max,
                r.rss_max,
                r.relay_rss,
            );
            let key = json_key(s);
            for (mode, x) in [(Mode::Direct, d), (Mode::Relay, r)] {
                let m = mode.name();
                json.insert(
                    format!("{m}_{key}_fleet_requests_k{k}"),
                    x.fleet_requests as f64,
                );
                json.insert(format!("{m}_{key}_fleet_bytes_k{k}"), x.fleet_bytes as f64);
                if let Some((med, worst)) = x.converged {
                    json.insert(format!("{m}_{key}_held_median_s_k{k}"), med);
                    json.insert(format!("{m}_{key}_held_worst_s_k{k}"), worst);
                } else {
                    json.insert(format!("{m}_{key}_held_median_s_k{k}"), -1.0);
                }
                json.insert(format!("{m}_{key}_peak_rss_mib_max_k{k}"), round(x.rss_max));
                if x.events > 0 {
                    let e = x.events as f64;
                    json.insert(
                        format!("{m}_{key}_requests_per_event_k{k}"),
                        round(x.fleet_requests as f64 / e),
                    );
                    json.insert(
                        format!("{m}_{key}_bytes_per_event_k{k}"),
                        round(x.fleet_bytes as f64 / e),
                    );
                }
            }
            json.insert(
                format!("relay_{key}_relay_peak_rss_mib_k{k}"),
                round(r.relay_rss),
            );
            if let Some((med, max)) = r.stream_boot_bytes {
                println!(
                    "      relay mode's boot: each agent received {:.2} MB from the broker until its first complete snapshot (median; largest {:.2} MB); the relay's full sync {} req, {:.2} MB",
                    med / 1e6,
                    max / 1e6,
                    r.relay_requests,
                    r.relay_bytes as f64 / 1e6
                );
                json.insert(
                    format!("relay_boot_stream_bytes_per_agent_k{k}"),
                    round(med),
                );
            }
        }
    }
    println!();
    println!(
        "rule: every agent in direct mode makes its own full sync for each change, tick and gap,"
    );
    println!(
        "so a fleet's requests and bytes are K x one agent's; 1 000 = per-agent median x 1 000"
    );
    println!(
        "(per-agent figures across K show whether that holds); relay mode: see the tables above."
    );
    println!(
        "{:<28} {:>14} {:>14} {:>14} {:>16} {:>12}",
        "scenario (direct)",
        "MB/agent (K..)",
        "fleet MB max K",
        "at 1 000: GB",
        "at 1 000: req",
        "worst held"
    );
    for s in &scenarios {
        let of: Vec<&Row> = rows
            .iter()
            .filter(|r| r.mode == Mode::Direct && r.scenario == *s)
            .collect();
        let Some(biggest) = of.iter().max_by_key(|r| r.k) else {
            continue;
        };
        let per: Vec<String> = of.iter().map(|r| format!("{:.1}", r.bytes / 1e6)).collect();
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
                .map_or_else(|| "never".to_owned(), |(_, w)| format!("{w:.1} s"))
        );
        let key = json_key(s);
        json.insert(format!("{key}_bytes_per_agent"), round(per_agent_bytes));
        json.insert(format!("{key}_requests_per_agent"), round(per_agent_req));
        json.insert(
            format!("{key}_bytes_at_1000"),
            round(per_agent_bytes * 1000.0),
        );
    }
    println!("{}", serde_json::to_string(&json).expect("a JSON object"));
}
