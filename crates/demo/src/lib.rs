//! `lachesis demo` (DESIGN §14): the whole system on one machine with no
//! cloud. The simulator serves the bundled topology
//! (`examples/demo-topology.yaml`), network namespaces play every VM,
//! router and the internet ([`world`], [`net`]), the real agent counts the
//! taps' traffic in the kernel ([`agent`]), flows of every zone run
//! between the hosts ([`traffic`]), and a live view reads the agent's own
//! `/metrics` ([`metrics`], [`view`]). Scenario steps ([`scenario`]) change
//! the cloud while it runs; `--check` runs them and compares every series
//! with the taps' own counters ([`truth`]). Everything the run creates
//! carries its pid and is removed on exit, Ctrl-C and SIGTERM, or by the
//! next run after a crash ([`cleanup`]). Guide: docs/demo.md.

#![deny(missing_docs)]

pub mod agent;
pub mod cleanup;
pub mod http;
pub mod metrics;
pub mod net;
pub mod scenario;
pub mod traffic;
pub mod truth;
mod tui;
pub mod view;
pub mod world;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io::IsTerminal as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use lachesis_lab::netns;
use lachesis_sim::{SimHandle, SimOptions, Store, Topology};

use crate::agent::{Agent, Pace};
use crate::cleanup::Run;
use crate::metrics::Snapshot;
use crate::net::Names;
use crate::scenario::Step;
use crate::traffic::Traffic;
use crate::truth::{Monotonic, Truth};
use crate::world::{demo_rogue, World};

/// The bundled topology.
pub const TOPOLOGY: &str = include_str!("../../../examples/demo-topology.yaml");

/// Arguments of `lachesis demo`.
#[derive(Debug, Clone, clap::Args)]
pub struct DemoArgs {
    /// Run the scenario steps unattended (one every `--step-every`), then exit.
    #[arg(long)]
    pub script: bool,
    /// Run the scripted scenario at a fast pace, then compare every tenant
    /// and port series with the taps' own interface counters and check no
    /// series went down: exit 0 only when all of it holds.
    #[arg(long, conflicts_with = "script")]
    pub check: bool,
    /// Plain periodic lines even when standard output is a terminal.
    #[arg(long)]
    pub plain: bool,
    /// Seconds between scenario steps with `--script`.
    #[arg(long, default_value_t = 15, value_name = "SECS")]
    pub step_every: u64,
}

/// What the scraper has seen.
#[derive(Debug, Default)]
pub struct Observed {
    /// Recent scrapes, oldest first (a few seconds' worth, for rates).
    pub history: VecDeque<Snapshot>,
    /// Whether the last scrape was answered.
    pub up: bool,
    /// Every billing series' highest value and each time one went lower.
    pub monotonic: Monotonic,
    /// Time from the demo's start to the first tenant row with bytes.
    pub first_row: Option<Duration>,
}

impl Observed {
    /// The latest scrape.
    #[must_use]
    pub fn latest(&self) -> Option<&Snapshot> {
        self.history.back()
    }

    /// The scrape to compute rates against: the oldest one within
    /// [`RATE_WINDOW`] of the latest, `None` while there is only one. A
    /// window rather than the previous scrape: the billing families move
    /// in steps (at each state flush; `unknown` at each unresolved-buffer
    /// eviction), so a one-second rate would read 0 between steps.
    #[must_use]
    pub fn rate_base(&self) -> Option<&Snapshot> {
        let latest = self.latest()?;
        self.history
            .iter()
            .find(|s| latest.at.duration_since(s.at) <= RATE_WINDOW)
            .filter(|s| s.at < latest.at)
    }
}

/// The span the view's rates are averaged over.
pub const RATE_WINDOW: Duration = Duration::from_secs(10);

/// Where the user reaches the agent (loopback of the machine).
#[derive(Debug, Clone, Copy)]
pub struct Urls {
    /// Forwarded to the agent's metrics listener.
    pub metrics: SocketAddr,
    /// Forwarded to its debug listener.
    pub debug: SocketAddr,
}

/// One running demo, shared by the view, the scraper and the scenario.
#[derive(Debug)]
pub struct Demo {
    /// Namespace names of the run.
    pub names: Names,
    run: Run,
    exe: PathBuf,
    config: PathBuf,
    /// Tunables in force.
    pub pace: Pace,
    world: Mutex<World>,
    sim: Mutex<SimHandle>,
    agent: Mutex<Option<Agent>>,
    /// The flows.
    pub traffic: Arc<Traffic>,
    truth: Mutex<Truth>,
    gone: Mutex<BTreeSet<String>>,
    observed: Mutex<Observed>,
    events: Mutex<Vec<String>>,
    /// Print events as they happen (plain output).
    echo: bool,
    /// Set by Ctrl-C, SIGTERM, `q`, or the end of a script.
    pub stop: Arc<AtomicBool>,
    started: Instant,
    /// Where the user reaches the agent.
    pub urls: Urls,
    done: Mutex<BTreeSet<char>>,
}

/// Locks `m`; a panicked holder left nothing half-done that matters here.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Demo {
    /// The hosts as built now.
    pub fn world(&self) -> MutexGuard<'_, World> {
        lock(&self.world)
    }

    fn world_mut(&self) -> MutexGuard<'_, World> {
        lock(&self.world)
    }

    fn truth(&self) -> MutexGuard<'_, Truth> {
        lock(&self.truth)
    }

    fn truth_mut(&self) -> MutexGuard<'_, Truth> {
        lock(&self.truth)
    }

    fn gone_mut(&self) -> MutexGuard<'_, BTreeSet<String>> {
        lock(&self.gone)
    }

    fn agent_mut(&self) -> MutexGuard<'_, Option<Agent>> {
        lock(&self.agent)
    }

    /// What the scraper has seen.
    pub fn observed(&self) -> MutexGuard<'_, Observed> {
        lock(&self.observed)
    }

    /// The events said so far.
    #[must_use]
    pub fn events(&self) -> Vec<String> {
        lock(&self.events).clone()
    }

    /// Scenario keys already used.
    #[must_use]
    pub fn done(&self) -> BTreeSet<char> {
        lock(&self.done).clone()
    }

    /// The agent's pid, when it runs.
    #[must_use]
    pub fn agent_pid(&self) -> Option<u32> {
        lock(&self.agent).as_ref().map(Agent::pid)
    }

    /// Seconds since the demo started.
    #[must_use]
    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    /// Records (and with plain output prints) an event.
    pub fn say(&self, text: impl Into<String>) {
        let text = text.into();
        // Printed only with plain output: on the terminal view, standard
        // output and error are the screen.
        if self.echo {
            println!("{text}");
        }
        lock(&self.events).push(text);
    }

    fn sim_mutate(
        &self,
        f: impl FnOnce(&mut Store) -> Result<(), lachesis_sim::MutationError>,
    ) -> anyhow::Result<()> {
        lock(&self.sim)
            .with_store(f)
            .context("changing the simulated cloud")
    }

    fn sim_topology(&self) -> Topology {
        lock(&self.sim).with_store(|s| s.to_topology())
    }

    /// Waits until the latest scrape satisfies `ok` (a minute at most).
    fn wait_metric(&self, what: &str, ok: impl Fn(&Snapshot) -> bool) -> anyhow::Result<()> {
        let until = Instant::now() + Duration::from_mins(1);
        loop {
            if self.observed().latest().is_some_and(&ok) {
                return Ok(());
            }
            if self.stop.load(Ordering::SeqCst) {
                bail!("interrupted while waiting for {what}");
            }
            if Instant::now() > until {
                bail!("waited a minute for {what} on /metrics");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Sleeps through `n` state flushes (and a scrape after them).
    fn wait_flushes(&self, n: u32) {
        std::thread::sleep(self.pace.flush * n + self.pace.view * 2);
    }

    fn runs_ok(&self) -> f64 {
        self.observed().latest().map_or(0.0, scenario::runs_ok)
    }

    /// `tenant`'s bytes (both directions) of zone external via `network`.
    fn external_bytes(&self, tenant: &str, network: &str) -> u64 {
        self.observed().latest().map_or(0, |s| {
            s.family("lachesis_tenant_bytes_total")
                .filter(|x| {
                    x.label("tenant_id") == tenant
                        && x.label("zone") == "external"
                        && x.label("external_network") == network
                })
                .map(metrics::Sample::count)
                .sum()
        })
    }

    /// Starts the agent (from the calling thread, which it must not
    /// outlive: it gets SIGTERM when that thread ends) and waits until ready.
    fn start_agent(&self) -> anyhow::Result<()> {
        let log = self.run.dir().join("agent.log");
        let mut agent = Agent::start(&self.exe, &self.config, &log, &self.run)?;
        let ready = agent.wait_ready(Duration::from_mins(1));
        *self.agent_mut() = Some(agent);
        ready
    }

    /// Runs `step` once (a second press of its key does nothing).
    pub fn run_step(&self, step: Step) {
        if !lock(&self.done).insert(step.key()) {
            self.say(format!(
                "key {:?} ({}) already ran: each step runs once",
                step.key(),
                step.label()
            ));
            return;
        }
        if let Err(e) = self.step(step) {
            self.say(format!("  step failed: {e:#}"));
        }
    }

    fn scrape(&self) {
        let answer = http::get(agent::METRICS, "/metrics");
        let mut o = self.observed();
        match answer {
            Ok((200, body)) => {
                let snap = Snapshot {
                    at: Instant::now(),
                    unix: std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0.0, |d| d.as_secs_f64()),
                    samples: metrics::parse(&body),
                };
                o.monotonic.observe(&snap);
                if o.first_row.is_none()
                    && metrics::rows(&snap, None).iter().any(|r| r.tx + r.rx > 0)
                {
                    o.first_row = Some(self.started.elapsed());
                }
                o.history.push_back(snap);
                while o
                    .history
                    .front()
                    .is_some_and(|s| s.at.elapsed() > RATE_WINDOW + Duration::from_secs(1))
                {
                    o.history.pop_front();
                }
                o.up = true;
            }
            _ => o.up = false,
        }
    }

    /// The live taps' counters now, by tap.
    fn live_counters(&self) -> anyhow::Result<BTreeMap<String, lachesis_lab::netns::IfCounters>> {
        self.truth()
            .live_taps()
            .into_iter()
            .map(|t| {
                let c =
                    lachesis_lab::netns::IfCounters::read_here(&t).map_err(anyhow::Error::msg)?;
                Ok((t, c))
            })
            .collect()
    }
}

/// Removes everything of the run when dropped: traffic, the agent
/// (SIGTERM: final drain and flush), namespaces, pins, files.
struct Guard {
    run: Run,
    demo: Option<Arc<Demo>>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(d) = &self.demo {
            d.traffic.stop();
            if let Some(agent) = d.agent_mut().as_mut() {
                agent.stop(Duration::from_secs(10));
            }
        }
        let said = cleanup::remove_run(&self.run);
        eprintln!(
            "lachesis demo: cleaned up after itself (pid {}): {}",
            self.run.pid,
            cleanup::summary(&said)
        );
    }
}

fn require_root() -> anyhow::Result<()> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        bail!(
            "lachesis demo needs root (network namespaces, BPF programs on the taps); \
             run it as root (`sudo make demo`)"
        );
    }
    Ok(())
}

/// How long the demo may take to stop after a signal before the signal
/// task cleans up itself and exits.
const STOP_GRACE: Duration = Duration::from_secs(30);

/// Sets `stop` on SIGINT, SIGTERM or SIGHUP; if the demo has not stopped
/// [`STOP_GRACE`] later (something hangs), removes the run's leftovers and
/// exits.
async fn signals(stop: Arc<AtomicBool>, run: Run) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        return;
    };
    tokio::select! {
        _ = int.recv() => {},
        _ = term.recv() => {},
        _ = hup.recv() => {},
    }
    stop.store(true, Ordering::SeqCst);
    tokio::time::sleep(STOP_GRACE).await;
    eprintln!(
        "lachesis demo: did not stop within {STOP_GRACE:?} of the signal; removing what it made and exiting"
    );
    for line in cleanup::remove_run(&run) {
        eprintln!("lachesis demo: cleanup: {line}");
    }
    std::process::exit(1);
}

fn interrupted(stop: &AtomicBool) -> anyhow::Result<()> {
    if stop.load(Ordering::SeqCst) {
        bail!("interrupted before the demo was up");
    }
    Ok(())
}

/// Runs the demo; `exe` is the `lachesis` binary (the agent is started
/// from it).
pub fn run(args: &DemoArgs, exe: &Path) -> anyhow::Result<ExitCode> {
    require_root()?;
    let started = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let run = Run {
        pid: std::process::id(),
    };
    rt.spawn(signals(stop.clone(), run.clone()));

    for crashed in cleanup::crashed_runs() {
        let said = cleanup::remove_run(&crashed);
        eprintln!(
            "lachesis demo: removed the leftovers of a demo that did not clean up (pid {}): {}",
            crashed.pid,
            cleanup::summary(&said)
        );
    }
    let mut guard = Guard {
        run: run.clone(),
        demo: None,
    };
    cleanup::create_run_dir(&run).with_context(|| format!("creating {}", run.dir().display()))?;
    let tui = !args.check && !args.plain && std::io::stdout().is_terminal();
    let demo = start(args, exe, &rt, &stop, started, tui, &mut guard)?;
    if args.check {
        println!("{}", view::check_banner(CHECK_STEP_EVERY));
    } else if !tui {
        println!("{}", view::banner(&demo));
    }
    let (hosts, taps) = {
        let w = demo.world();
        (w.hosts.len(), w.taps().count())
    };
    let reader = if args.check { "the check" } else { "the table" };
    demo.say(view::ready_line(
        started.elapsed(),
        hosts,
        taps,
        reader,
        demo.pace.view,
    ));
    let code = if args.check {
        check(&demo)
    } else {
        watch(&demo, args, tui)?
    };
    if let Some(t) = demo.observed().first_row {
        eprintln!(
            "lachesis demo: the first counted bytes showed on /metrics {:.1} s after start",
            t.as_secs_f64()
        );
    }
    drop(guard);
    Ok(code)
}

/// Builds everything and starts the agent, the traffic and the scraper.
fn start(
    args: &DemoArgs,
    exe: &Path,
    rt: &tokio::runtime::Runtime,
    stop: &Arc<AtomicBool>,
    started: Instant,
    tui: bool,
    guard: &mut Guard,
) -> anyhow::Result<Arc<Demo>> {
    let run = guard.run.clone();
    // The user's side of the agent's listeners, bound in the machine's
    // namespace before this thread moves to the hypervisor's.
    let metrics_front = http::bind_loopback(9847).context("binding a loopback port")?;
    let debug_front = http::bind_loopback(9848).context("binding a loopback port")?;
    let urls = Urls {
        metrics: metrics_front.local_addr()?,
        debug: debug_front.local_addr()?,
    };
    let names = Names {
        prefix: run.netns_prefix(),
    };
    net::create_hv(&names)?;
    netns::enter(&names.hv()).map_err(anyhow::Error::msg)?;

    let topology = Topology::from_yaml(TOPOLOGY).context("the bundled topology")?;
    let store = Store::from_topology(&topology).context("the bundled topology")?;
    let world =
        World::from_topology(&store.to_topology(), &demo_rogue()).map_err(anyhow::Error::msg)?;
    net::build(&names, &world)?;
    interrupted(stop)?;

    let sim = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        lachesis_sim::start_on(store, listener, SimOptions::default())
    })?;
    let pace = if args.check {
        agent::CHECK
    } else {
        agent::WATCH
    };
    let config = agent::write_config(&run, sim.addr(), pace)?;

    // The truth starts when the taps are quiet (enabling IPv6 sends a
    // few reports) and before the agent counts anything.
    let taps: Vec<String> = world.taps().map(|(_, i)| i.outer.clone()).collect();
    let baseline = net::wait_quiet(&taps, 15, Duration::from_secs(20))?;
    let mut truth = Truth::default();
    for ((_, iface), c) in world.taps().zip(&baseline) {
        truth.track(
            &iface.outer,
            iface.port_id.as_deref(),
            iface.bills_to.as_deref().unwrap_or(truth::UNKNOWN),
            *c,
        );
    }
    let demo = Arc::new(Demo {
        names: names.clone(),
        run,
        exe: exe.to_owned(),
        config,
        pace,
        world: Mutex::new(world),
        sim: Mutex::new(sim),
        agent: Mutex::new(None),
        traffic: Arc::new(Traffic::default()),
        truth: Mutex::new(truth),
        gone: Mutex::default(),
        observed: Mutex::default(),
        events: Mutex::default(),
        echo: !tui,
        stop: stop.clone(),
        started,
        urls,
        done: Mutex::default(),
    });
    guard.demo = Some(demo.clone());
    demo.start_agent()?;
    interrupted(stop)?;
    if net::tap_counters(&demo.world())?
        .into_iter()
        .map(|(_, c)| c)
        .ne(baseline)
    {
        bail!("a tap carried traffic before the demo's flows started: the truth would be off");
    }
    std::thread::spawn(move || http::forward(&metrics_front, agent::METRICS));
    std::thread::spawn(move || http::forward(&debug_front, agent::DEBUG));
    traffic::start(&demo.traffic, &|h: &str| names.host(h))?;
    let scraper = demo.clone();
    std::thread::spawn(move || loop {
        scraper.scrape();
        std::thread::sleep(scraper.pace.view);
    });
    Ok(demo)
}

/// The live view (terminal table or plain lines) with scenario keys, or
/// the unattended script, until stopped.
fn watch(demo: &Arc<Demo>, args: &DemoArgs, tui: bool) -> anyhow::Result<ExitCode> {
    let (tx, rx) = std::sync::mpsc::channel::<Step>();
    let scenario = {
        let demo = demo.clone();
        let script = args.script;
        let every = Duration::from_secs(args.step_every);
        std::thread::spawn(move || scenario_thread(&demo, script, every, &rx))
    };
    let shown = if tui {
        tui::run(demo, &tx)
    } else {
        view::plain(demo, &tx);
        Ok(())
    };
    demo.stop.store(true, Ordering::SeqCst);
    drop(tx);
    let _ = scenario.join();
    shown.map(|()| ExitCode::SUCCESS)
}

/// Runs steps as they come (keys), or the whole script, until stopped.
/// Long-lived on purpose: an agent it restarts lives while it does.
fn scenario_thread(
    demo: &Demo,
    script: bool,
    every: Duration,
    keys: &std::sync::mpsc::Receiver<Step>,
) {
    let sleep = |d: Duration| {
        let until = Instant::now() + d;
        while Instant::now() < until && !demo.stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    if script {
        for step in scenario::SCRIPT {
            sleep(every);
            if demo.stop.load(Ordering::SeqCst) {
                return;
            }
            demo.run_step(step);
        }
        sleep(every);
        demo.say("script done");
        demo.stop.store(true, Ordering::SeqCst);
    }
    while !demo.stop.load(Ordering::SeqCst) {
        match keys.recv_timeout(Duration::from_millis(200)) {
            Ok(step) => demo.run_step(step),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// Which (tenant, zone row) must have bytes after the scripted scenario.
const EXPECTED_ROWS: &[(&str, &str)] = &[
    ("acme", "same_tenant"),
    ("acme", "other_tenant"),
    ("acme", "external (public)"),
    ("acme", "shared"),
    ("acme", "infra"),
    ("acme", "multicast"),
    ("globex", "same_tenant"),
    ("globex", "other_tenant"),
    ("globex", "external (public)"),
    ("globex", "external (public-2)"),
    ("globex", "shared"),
    ("globex", "infra"),
    ("platform", "other_tenant"),
    ("unknown", "miss"),
];

/// The pause before each scenario step of `--check`.
const CHECK_STEP_EVERY: Duration = Duration::from_secs(2);

/// `--check`: the script at a fast pace, then every tenant and port series
/// against the taps' counters.
fn check(demo: &Demo) -> ExitCode {
    let deadline = Instant::now() + Duration::from_secs(150);
    let mut failures = Vec::new();
    for step in scenario::SCRIPT {
        std::thread::sleep(CHECK_STEP_EVERY);
        if demo.stop.load(Ordering::SeqCst) {
            failures.push("interrupted".to_owned());
            break;
        }
        lock(&demo.done).insert(step.key());
        if let Err(e) = demo.step(step) {
            failures.push(format!("step {step:?}: {e:#}"));
            break;
        }
    }
    std::thread::sleep(Duration::from_secs(2));
    demo.traffic.pause_all();
    let settled = demo.traffic.wait_idle(Duration::from_secs(10))
        && net::wait_quiet(&demo.truth().live_taps(), 3, Duration::from_secs(15)).is_ok();
    if !settled {
        failures.push("the traffic never stopped".into());
    }
    // /metrics shows the last flush: poll until it agrees or time is up.
    let mut last_diff = Vec::new();
    let mut compared = 0;
    while failures.is_empty() {
        let counters = match demo.live_counters() {
            Ok(c) => c,
            Err(e) => {
                failures.push(format!("reading the taps: {e:#}"));
                break;
            }
        };
        let want = demo.truth().expected(&counters);
        let (got, names) = {
            let o = demo.observed();
            match o.latest() {
                Some(s) => (truth::observed(s), s.tenant_names()),
                None => (truth::Expected::default(), BTreeMap::new()),
            }
        };
        last_diff = truth::diff(&want, &got, &names);
        compared = want.tenants.len() + want.ports.len();
        if last_diff.is_empty() || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    failures.extend(last_diff);
    let o = demo.observed();
    failures.extend(o.monotonic.violations.iter().cloned());
    if let Some(s) = o.latest() {
        let rows = metrics::rows(s, None);
        for (tenant, zone) in EXPECTED_ROWS {
            if !rows.iter().any(|r| r.tenant == *tenant && r.zone == *zone) {
                failures.push(format!("no bytes for {tenant} in zone {zone}"));
            }
        }
        println!("{}", view::totals_table(&rows));
    }
    failures.extend(demo.traffic.problems(&lock(&demo.gone)));
    if failures.is_empty() {
        println!(
            "lachesis demo --check: OK — {compared} tenant and port totals equal the taps' own \
             counters (bytes and packets, both directions); {} series never went down; \
             {} steps run in {:.0} s",
            o.monotonic.series(),
            scenario::SCRIPT.len(),
            demo.uptime().as_secs_f64()
        );
        ExitCode::SUCCESS
    } else {
        println!("lachesis demo --check: FAILED");
        for f in &failures {
            println!("  {f}");
        }
        if let Some(agent) = demo.agent_mut().as_ref() {
            println!("agent log ends:\n{}", agent.log_tail(40));
        }
        ExitCode::FAILURE
    }
}
