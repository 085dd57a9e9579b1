//! One running demo: what never changes once it is up, the scene the
//! scenario steps change (the hosts, the simulated cloud, the truth), the
//! agent process, what the scraper has seen, and the event log — each
//! behind its own lock, so the scraper and the view never wait for a step.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use lachesis_lab::netns::IfCounters;
use lachesis_sim::{SimHandle, Store, Topology};

use crate::agent::{self, Agent, Pace};
use crate::cleanup::Run;
use crate::metrics::{self, Snapshot};
use crate::net::Names;
use crate::scenario::{self, Step};
use crate::traffic::Traffic;
use crate::truth::{Monotonic, Truth};
use crate::world::World;

/// The span the view's rates are averaged over.
pub(crate) const RATE_WINDOW: Duration = Duration::from_secs(10);

/// What the scraper has seen.
#[derive(Debug, Default)]
pub(crate) struct Observed {
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
    pub fn latest(&self) -> Option<&Snapshot> {
        self.history.back()
    }

    /// The scrape to compute rates against: the oldest one within
    /// [`RATE_WINDOW`] of the latest, `None` while there is only one. A
    /// window rather than the previous scrape: the billing families move
    /// in steps (at each state flush; `unknown` at each unresolved-buffer
    /// eviction), so a one-second rate would read 0 between steps.
    pub fn rate_base(&self) -> Option<&Snapshot> {
        let latest = self.latest()?;
        self.history
            .iter()
            .find(|s| latest.at.duration_since(s.at) <= RATE_WINDOW)
            .filter(|s| s.at < latest.at)
    }
}

/// Where the user reaches the agent (loopback of the machine).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Urls {
    /// Forwarded to the agent's metrics listener.
    pub metrics: SocketAddr,
    /// Forwarded to its debug listener.
    pub debug: SocketAddr,
}

/// What a run is, fixed once it is up.
#[derive(Debug)]
pub(crate) struct Fixed {
    /// Namespace names of the run.
    pub names: Names,
    /// The run's pid, folders and pins.
    pub run: Run,
    /// The `lachesis` binary the agent is started from.
    pub exe: PathBuf,
    /// The agent's configuration file.
    pub config: PathBuf,
    /// Tunables in force.
    pub pace: Pace,
    /// Where the user reaches the agent.
    pub urls: Urls,
    /// When the demo started.
    pub started: Instant,
    /// Print events as they happen (plain output).
    pub echo: bool,
}

/// What the scenario steps change, together: the hosts as built, the
/// simulated cloud, the truth kept from the taps' counters, the hosts
/// removed.
#[derive(Debug)]
pub(crate) struct Scene {
    /// The hosts as built now.
    pub world: World,
    /// The simulated cloud.
    pub sim: SimHandle,
    /// What each series must equal.
    pub truth: Truth,
    /// Hosts a step removed (their flows end).
    pub gone: BTreeSet<String>,
}

/// The events said so far, and the scenario keys already used.
#[derive(Debug, Default)]
pub(crate) struct Log {
    pub events: Vec<String>,
    pub done: BTreeSet<char>,
}

/// One running demo, shared by the view, the scraper and the scenario.
#[derive(Debug)]
pub(crate) struct Demo {
    /// What never changes.
    pub fixed: Fixed,
    /// The flows.
    pub traffic: Arc<Traffic>,
    /// Set by Ctrl-C, SIGTERM, `q`, or the end of a script.
    pub stop: Arc<AtomicBool>,
    scene: Mutex<Scene>,
    agent: Mutex<Option<Agent>>,
    observed: Mutex<Observed>,
    log: Mutex<Log>,
}

/// Locks `m`; a panicked holder left nothing half-done that matters here.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Demo {
    pub fn new(fixed: Fixed, scene: Scene, stop: Arc<AtomicBool>) -> Demo {
        Demo {
            fixed,
            traffic: Arc::new(Traffic::default()),
            stop,
            scene: Mutex::new(scene),
            agent: Mutex::new(None),
            observed: Mutex::default(),
            log: Mutex::default(),
        }
    }

    /// The scene; hold it briefly (never across a wait).
    pub fn scene(&self) -> MutexGuard<'_, Scene> {
        lock(&self.scene)
    }

    /// The agent process, when one was started.
    pub fn agent(&self) -> MutexGuard<'_, Option<Agent>> {
        lock(&self.agent)
    }

    /// What the scraper has seen.
    pub fn observed(&self) -> MutexGuard<'_, Observed> {
        lock(&self.observed)
    }

    /// The events said so far.
    pub fn events(&self) -> Vec<String> {
        lock(&self.log).events.clone()
    }

    /// Scenario keys already used.
    pub fn done(&self) -> BTreeSet<char> {
        lock(&self.log).done.clone()
    }

    /// Marks `step` used; `false` when it was already.
    pub fn mark_done(&self, step: Step) -> bool {
        lock(&self.log).done.insert(step.key())
    }

    /// The agent's pid, when it runs.
    pub fn agent_pid(&self) -> Option<u32> {
        self.agent().as_ref().map(Agent::pid)
    }

    /// Time since the demo started.
    pub fn uptime(&self) -> Duration {
        self.fixed.started.elapsed()
    }

    /// Records (and with plain output prints) an event.
    pub fn say(&self, text: impl Into<String>) {
        let text = text.into();
        // Printed only with plain output: on the terminal view, standard
        // output and error are the screen.
        if self.fixed.echo {
            println!("{text}");
        }
        lock(&self.log).events.push(text);
    }

    /// Applies `f` to the simulated cloud.
    pub fn sim_mutate(
        &self,
        f: impl FnOnce(&mut Store) -> Result<(), lachesis_sim::MutationError>,
    ) -> anyhow::Result<()> {
        self.scene()
            .sim
            .with_store(f)
            .context("changing the simulated cloud")
    }

    /// The simulated cloud as a topology.
    pub fn sim_topology(&self) -> Topology {
        self.scene().sim.with_store(|s| s.to_topology())
    }

    /// Waits until the latest scrape satisfies `ok` (a minute at most).
    pub fn wait_metric(&self, what: &str, ok: impl Fn(&Snapshot) -> bool) -> anyhow::Result<()> {
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
    pub fn wait_flushes(&self, n: u32) {
        let pace = self.fixed.pace;
        std::thread::sleep(pace.flush * n + pace.view * 2);
    }

    /// Successful reconcile passes in the latest scrape.
    pub fn runs_ok(&self) -> f64 {
        self.observed().latest().map_or(0.0, scenario::runs_ok)
    }

    /// `tenant`'s bytes (both directions) of zone external via `network`.
    pub fn external_bytes(&self, tenant: &str, network: &str) -> u64 {
        self.observed().latest().map_or(0, |s| {
            s.family("lachesis_tenant_bytes_total")
                .filter(|x| {
                    metrics::label(x, "tenant_id") == tenant
                        && metrics::label(x, "zone") == "external"
                        && metrics::label(x, "external_network") == network
                })
                .map(metrics::count)
                .sum()
        })
    }

    /// Starts the agent (from the calling thread, which it must not
    /// outlive: it gets SIGTERM when that thread ends) and waits until ready.
    pub fn start_agent(&self) -> anyhow::Result<()> {
        let f = &self.fixed;
        let log = f.run.dir().join("agent.log");
        let mut agent = Agent::start(&f.exe, &f.config, &log, &f.run)?;
        let ready = agent.wait_ready(Duration::from_mins(1));
        *self.agent() = Some(agent);
        ready
    }

    /// Runs `step` once (a second press of its key does nothing).
    pub fn run_step(&self, step: Step) {
        if !self.mark_done(step) {
            self.say(format!(
                "key {:?} ({}) already ran: each step runs once",
                step.key(),
                step.label()
            ));
            return;
        }
        if let Err(e) = scenario::run(self, step) {
            self.say(format!("  step failed: {e:#}"));
        }
    }

    /// Reads the agent's `/metrics` once into what was observed.
    pub fn scrape(&self) {
        let answer = lachesis_lab::http::get(agent::METRICS, "/metrics");
        let mut o = self.observed();
        match answer {
            Some((200, body)) => {
                let snap = Snapshot {
                    at: Instant::now(),
                    unix: std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0.0, |d| d.as_secs_f64()),
                    samples: metrics::samples(&body),
                };
                o.monotonic.observe(&snap);
                if o.first_row.is_none()
                    && metrics::rows(&snap, None).iter().any(|r| r.tx + r.rx > 0)
                {
                    o.first_row = Some(self.fixed.started.elapsed());
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
    pub fn live_counters(&self) -> anyhow::Result<BTreeMap<String, IfCounters>> {
        let taps = self.scene().truth.live_taps();
        taps.into_iter()
            .map(|t| {
                let c = IfCounters::read_here(&t).map_err(anyhow::Error::msg)?;
                Ok((t, c))
            })
            .collect()
    }
}
