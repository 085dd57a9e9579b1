//! `lachesis agent`: the daemon (DESIGN §12, §13; docs/operations.md).
//!
//! [`run`] boots in the §12 order — datapath, state file read, cold start
//! (or degraded boot from the file's plan), kernel metadata written, taps
//! attached, the ledger restored and settled to the fresh plan — each phase
//! on the [`BootGate`], the `lachesis_boot_phase` gauge and one log line;
//! then supervises every task under one cancellation token until SIGTERM or
//! SIGINT (final drain and flush, programs left attached, `flows` left
//! pinned) and reloads the tunables on SIGHUP.

mod debug;
mod health;
mod metrics;
mod notify;
mod systemd;
mod writes;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, SystemTime};

use anyhow::{anyhow, Context as _};
use lachesis_abi::Mac;
use lachesis_datapath::Datapath;
use lachesis_ledger::state::{self, LoadSource, StatePaths};
use lachesis_ledger::Exporter;
use lachesis_planner::{Plan, Topology};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

pub use debug::{bindings, listing, DebugState, LiveConfig};
pub use metrics::DaemonMetrics;
pub use notify::check_notifications;
pub use writes::{backoff, cold_writes};

use crate::boot::{BootGate, Phase};
use crate::config::{reload_file, Config, ConfigFile, Loaded, ReloadResult, SharedTunables};
use crate::http::{serve, DebugRoutes, LogLevelControl, MetricsRoutes};
use crate::links::{self, LinkMetrics, Matcher, TapPorts, Watcher};
use crate::order::{
    run_flusher, run_scraper, run_sweeper, LedgerOwner, OrderMetrics, PlannedAttribution,
};
use crate::preflight::Resolved;
use crate::reconcile::{
    committed, AttributionSnapshot, Committed, Ghost, Initial, KernelWriter as _, LedgerOrder as _,
    MetadataSource as _, Named, OpenStackSource, ReconcileMetrics, Reconciler, Seams,
};

/// How often the link watcher re-checks that every matching tap carries
/// our programs (a missed netlink event must not become an undercount).
pub const PRESENCE_INTERVAL: Duration = Duration::from_secs(30);

type Owner = LedgerOwner<Arc<Datapath>>;
type Tasks = JoinSet<(&'static str, Result<(), String>)>;

/// SIGTERM, SIGINT and SIGHUP, installed before boot.
struct Signals {
    term: Signal,
    int: Signal,
    hup: Signal,
}

enum Received {
    Stop(&'static str),
    Hangup,
}

impl Signals {
    fn install() -> anyhow::Result<Signals> {
        let s = |k| signal(k).context("installing a signal handler");
        Ok(Signals {
            term: s(SignalKind::terminate())?,
            int: s(SignalKind::interrupt())?,
            hup: s(SignalKind::hangup())?,
        })
    }

    async fn next(&mut self) -> Received {
        tokio::select! {
            _ = self.term.recv() => Received::Stop("SIGTERM"),
            _ = self.int.recv() => Received::Stop("SIGINT"),
            _ = self.hup.recv() => Received::Hangup,
        }
    }
}

/// Every metric family of the process, registered once at start.
struct Families {
    registry: Registry,
    daemon: DaemonMetrics,
    order: OrderMetrics,
    reconcile: ReconcileMetrics,
    links: LinkMetrics,
    api: lachesis_openstack::ApiMetrics,
}

impl Families {
    /// Every family, and the notification consumers whose families are
    /// among them (started after boot).
    fn register(config: &Config) -> (Families, notify::Notifications) {
        let mut registry = Registry::default();
        let daemon = DaemonMetrics::register(&mut registry);
        let order = OrderMetrics::register(&mut registry);
        let reconcile = ReconcileMetrics::register(&mut registry);
        let links = LinkMetrics::new(&mut registry);
        let api = lachesis_openstack::ApiMetrics::default();
        api.register(&mut registry);
        let notifications = notify::Notifications::register(&mut registry, &config.notifications);
        let families = Families {
            registry,
            daemon,
            order,
            reconcile,
            links,
            api,
        };
        (families, notifications)
    }
}

/// What the supervisor hands the tasks it starts after boot: the debug
/// listener's shared state and the notification consumers.
struct Handles {
    live: LiveConfig,
    log: Arc<dyn LogLevelControl>,
    notifications: notify::Notifications,
}

/// What boot hands the supervisor.
struct Booted {
    owner: Owner,
}

/// Runs the daemon until SIGTERM/SIGINT.
///
/// # Errors
/// Boot failed (the gate is failed with the reason), or a task ended on
/// its own, or the final flush failed.
pub async fn run(loaded: Loaded, log: Arc<dyn LogLevelControl>) -> anyhow::Result<()> {
    // What the configuration refers to (the cloud entry, TLS files, the
    // bpffs dir), resolved before anything touches the kernel: a reference
    // that does not resolve is a configuration error (crate::exit::CONFIG,
    // which the unit does not restart), not a boot failure after the
    // program was loaded.
    let resolved = crate::preflight::resolve(&loaded.config)?;
    for warning in loaded.config.warnings() {
        warn!(key = warning.key, "{}", warning.message);
    }
    info!(openstack = resolved.origin, "configuration resolved");
    // One agent per bpffs dir and state file, held until the process ends,
    // before anything touches the kernel (crate::instance_lock).
    let _instance = crate::instance_lock::InstanceLock::acquire(&loaded.config)?;
    Box::pin(supervise(loaded, resolved, log)).await
}

/// [`run`], once the instance lock is held.
async fn supervise(
    loaded: Loaded,
    resolved: Resolved,
    log: Arc<dyn LogLevelControl>,
) -> anyhow::Result<()> {
    let mut signals = Signals::install()?;
    let gate = Arc::new(BootGate::new());
    let cancel = CancellationToken::new();
    let mut tasks = Tasks::new();
    let (families, notifications) = Families::register(&loaded.config);
    let daemon = families.daemon.clone();
    let tunables = Arc::new(SharedTunables::new(loaded.config.tunables));
    let notifier = Notifier::new(&gate, &families, &tunables);
    let mut notify_tick = tokio::time::interval(notifier.period());
    let config = loaded.config.clone();
    let live: LiveConfig = Arc::new(RwLock::new(Arc::new(config.clone())));
    let handles = Handles {
        live: live.clone(),
        log: log.clone(),
        notifications,
    };

    // A stop during boot lets the current step finish (nothing is left
    // half-applied); only cold start's retries give way to it at once.
    let stopping = CancellationToken::new();
    let mut stop_requested = None;
    let booted = {
        let lifecycle = Lifecycle {
            gate: &gate,
            tunables: &tunables,
            cancel: &cancel,
            stopping: &stopping,
            notifier: &notifier,
        };
        let boot = boot(&config, &resolved, families, handles, lifecycle, &mut tasks);
        tokio::pin!(boot);
        loop {
            tokio::select! {
                booted = &mut boot => break booted,
                name = stop_signal(&mut signals), if stop_requested.is_none() => {
                    info!(signal = name, "stop requested during boot: finishing the current step");
                    notifier.stopping();
                    stop_requested = Some(name);
                    stopping.cancel();
                }
                _ = notify_tick.tick(), if notifier.active() => notifier.tick(),
            }
        }
    };
    let booted = match booted {
        Ok(b) => b,
        Err(e) => return boot_ended(e, &gate, &notifier, &cancel, &mut tasks).await,
    };
    advance(&gate, &daemon, Phase::Running)?;
    notifier.tick();

    let ended = match stop_requested.take() {
        Some(name) => {
            info!(
                signal = name,
                "stopping: final drain and flush; programs stay attached"
            );
            None
        }
        None => {
            until_stopped(
                config,
                RunLoop {
                    signals: &mut signals,
                    tasks: &mut tasks,
                    file: &loaded.file,
                    tunables: &tunables,
                    daemon: &daemon,
                    log: log.as_ref(),
                    live: &live,
                    notifier: &notifier,
                    tick: &mut notify_tick,
                },
            )
            .await
        }
    };
    cancel.cancel();
    while tasks.join_next().await.is_some() {}
    booted
        .owner
        .shutdown_async()
        .await
        .context("final drain and flush")?;
    info!("stopped; state flushed");
    match ended {
        None => Ok(()),
        Some(what) => Err(anyhow!(what)),
    }
}

/// Boot ended without reaching `running`: a stop requested while cold
/// start waited (a clean exit), or a failure (the gate says why).
async fn boot_ended(
    e: anyhow::Error,
    gate: &BootGate,
    notifier: &Notifier,
    cancel: &CancellationToken,
    tasks: &mut Tasks,
) -> anyhow::Result<()> {
    let stopped = e.is::<StoppedDuringBoot>();
    if stopped {
        notifier.stopping();
        gate.fail(e.to_string());
    } else {
        let reason = format!("{e:#}");
        error!(reason, "boot failed");
        gate.fail(reason);
        notifier.tick();
    }
    cancel.cancel();
    while tasks.join_next().await.is_some() {}
    if stopped {
        info!("stopped before the first sync: nothing attached, state file untouched");
        Ok(())
    } else {
        Err(e.context("boot failed"))
    }
}

/// What the running agent's loop reacts to and keeps current.
struct RunLoop<'a> {
    signals: &'a mut Signals,
    tasks: &'a mut Tasks,
    file: &'a ConfigFile,
    tunables: &'a SharedTunables,
    daemon: &'a DaemonMetrics,
    log: &'a dyn LogLevelControl,
    live: &'a LiveConfig,
    notifier: &'a Notifier,
    tick: &'a mut tokio::time::Interval,
}

/// The running agent: a stop signal, a reload, a task that ended, the
/// status tick, until one of the first or third. Why it stopped: `None`
/// for a signal, else the task's end.
async fn until_stopped(mut current: Config, r: RunLoop<'_>) -> Option<String> {
    loop {
        tokio::select! {
            sig = r.signals.next() => match sig {
                Received::Stop(name) => {
                    info!(signal = name, "stopping: final drain and flush; programs stay attached");
                    r.notifier.stopping();
                    return None;
                }
                Received::Hangup => {
                    current = reload(r.file, current, r.tunables, r.daemon, r.log);
                    *r.live.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(current.clone());
                }
            },
            Some(done) = r.tasks.join_next() => {
                let what = match done {
                    Ok((name, Ok(()))) => format!("task {name} ended"),
                    Ok((name, Err(e))) => format!("task {name} failed: {e}"),
                    Err(e) => format!("a task panicked: {e}"),
                };
                error!(reason = what, "stopping");
                r.notifier.stopping();
                return Some(what);
            }
            _ = r.tick.tick(), if r.notifier.active() => r.notifier.tick(),
        }
    }
}

async fn stop_signal(signals: &mut Signals) -> &'static str {
    loop {
        match signals.next().await {
            Received::Stop(name) => return name,
            Received::Hangup => warn!("SIGHUP during boot ignored: reload once running"),
        }
    }
}

/// SIGTERM or SIGINT while cold start was still waiting for Keystone and
/// Neutron: a clean stop, not a failure (nothing was attached yet).
#[derive(Debug)]
struct StoppedDuringBoot(&'static str);

impl std::fmt::Display for StoppedDuringBoot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "stopped by {} during cold start", self.0)
    }
}

impl std::error::Error for StoppedDuringBoot {}

/// One SIGHUP: the file re-read, the tunables swapped whole, or nothing
/// changed; returns the configuration now in effect.
fn reload(
    file: &ConfigFile,
    current: Config,
    tunables: &SharedTunables,
    metrics: &DaemonMetrics,
    log: &dyn LogLevelControl,
) -> Config {
    match reload_file(file, &current) {
        Ok(outcome) => {
            tunables.set(outcome.tunables());
            metrics.reload(ReloadResult::Ok);
            if !outcome.restart_required.is_empty() {
                warn!(keys = ?outcome.restart_required, "changed keys take effect only at restart");
            }
            if outcome.log_level() != current.log.level {
                if let Err(e) = log.set_level(outcome.log_level()) {
                    warn!(error = e, "log.level not applied");
                }
            }
            info!(applied = ?outcome.applied, "configuration reloaded");
            outcome.config
        }
        Err((result, e)) => {
            metrics.reload(result);
            warn!(result = result.label(), error = %e, "configuration reload rejected; the old tunables stay");
            current
        }
    }
}

fn advance(gate: &BootGate, metrics: &DaemonMetrics, phase: Phase) -> anyhow::Result<()> {
    gate.advance(phase)?;
    metrics.phase(phase);
    info!(phase = phase.label(), "boot phase");
    Ok(())
}

/// What systemd is told (systemd.rs), from the daemon's own state; does
/// nothing when the process was not started by systemd as `Type=notify`.
struct Notifier {
    systemd: Option<systemd::Systemd>,
    gate: Arc<BootGate>,
    daemon: DaemonMetrics,
    reconcile: ReconcileMetrics,
    health: health::Health,
    /// Cold start's last failure while it waits for OpenStack.
    waiting: Mutex<Option<String>>,
}

impl Notifier {
    fn new(gate: &Arc<BootGate>, families: &Families, tunables: &Arc<SharedTunables>) -> Self {
        Notifier {
            systemd: systemd::Systemd::from_env(),
            gate: gate.clone(),
            daemon: families.daemon.clone(),
            reconcile: families.reconcile.clone(),
            health: health::Health {
                gate: gate.clone(),
                order: families.order.clone(),
                tunables: tunables.clone(),
                running_since: std::sync::OnceLock::new(),
            },
            waiting: Mutex::new(None),
        }
    }

    fn active(&self) -> bool {
        self.systemd.is_some()
    }

    /// How often [`Notifier::tick`] runs (an hour when inactive: the
    /// branch is off then anyway).
    fn period(&self) -> Duration {
        self.systemd
            .as_ref()
            .map_or(Duration::from_hours(1), systemd::Systemd::period)
    }

    fn ready(&self) {
        if let Some(s) = &self.systemd {
            s.send(&format!("READY=1\nSTATUS={}", self.status().0));
        }
    }

    fn stopping(&self) {
        if let Some(s) = &self.systemd {
            s.send("STOPPING=1\nSTATUS=stopping: final drain and flush; programs stay attached");
        }
    }

    fn waiting(&self, error: Option<String>) {
        *self.waiting.lock().unwrap_or_else(PoisonError::into_inner) = error;
        self.tick();
    }

    /// The status line and whether the agent is alive.
    fn status(&self) -> (String, bool) {
        let alive = crate::http::Readiness::alive(&self.health);
        let input = systemd::StatusInput {
            state: Some(self.gate.state()),
            degraded: self.daemon.is_degraded(),
            waiting: self
                .waiting
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
            last_pass: self.reconcile.last_pass().map(|p| (p.result, p.error)),
            stalled: alive.clone().err(),
        };
        (systemd::status_line(&input), alive.is_ok())
    }

    /// The status, with a watchdog ping while alive. Called from the
    /// supervisor's own loop, so a loop that stopped turning stops the
    /// pings too.
    fn tick(&self) {
        if let Some(s) = &self.systemd {
            let (line, alive) = self.status();
            s.tick(&line, alive);
        }
    }
}

/// When the state file boot loaded was last written: the file records no
/// sync time, so degraded boot counts its plan's sync age from here (a
/// lower bound: the plan is at least that old). Now if unknown.
fn file_written(paths: &StatePaths, source: LoadSource) -> SystemTime {
    let path = match source {
        LoadSource::Current => &paths.current,
        LoadSource::Backup => &paths.backup,
        LoadSource::Empty => return SystemTime::now(),
    };
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .unwrap_or_else(|e| {
            warn!(path = %path.display(), error = %e, "state file time unknown; sync age counts from now");
            SystemTime::now()
        })
}

/// The plan the kernel is written from, and where it came from.
struct Metadata {
    plan: Arc<Plan>,
    projects: Vec<Named>,
    servers: Option<Vec<Named>>,
    synced_at: SystemTime,
    degraded: bool,
    /// The cloud as the pages draw it; `None` when degraded.
    topology: Option<Arc<Topology>>,
}

/// Cold start's sync (DESIGN §12 step 2): retried with backoff while
/// Keystone/Neutron fail and there is no state file; with one, the file's
/// plan stands in at the first failure (degraded).
async fn cold_start(
    source: &OpenStackSource,
    previous: Option<(&Plan, SystemTime)>,
    lifecycle: Lifecycle<'_>,
) -> Result<Metadata, StoppedDuringBoot> {
    let (tunables, stopping) = (lifecycle.tunables, lifecycle.stopping);
    let stopped = || StoppedDuringBoot("a signal");
    let mut failures = 0;
    loop {
        let options = tunables.get().plan_options();
        let old = previous.map(|(p, _)| Arc::new(p.clone()));
        let synced = tokio::select! {
            synced = source.sync(old, options) => synced,
            () = stopping.cancelled() => return Err(stopped()),
        };
        match synced {
            Ok(s) => {
                lifecycle.notifier.waiting(None);
                return Ok(Metadata {
                    plan: s.plan,
                    projects: s.projects,
                    servers: s.servers,
                    synced_at: SystemTime::now(),
                    degraded: false,
                    topology: Some(s.topology),
                });
            }
            Err(e) => {
                let cause = crate::reconcile::chain(&e);
                // A refusal is logged as an error every time: it lasts
                // until an operator changes the credentials.
                if e.is_refusal() {
                    error!(error = cause, "cold start sync refused");
                }
                lifecycle.notifier.waiting(Some(cause.clone()));
                if let Some((plan, written)) = previous {
                    warn!(
                        error = cause,
                        "cold start sync failed; booting degraded from the state file's plan"
                    );
                    return Ok(Metadata {
                        plan: Arc::new(plan.clone()),
                        projects: Vec::new(),
                        servers: None,
                        synced_at: written,
                        degraded: true,
                        topology: None,
                    });
                }
                let wait = backoff(failures);
                failures = failures.saturating_add(1);
                warn!(error = cause, attempt = failures, retry_in = ?wait,
                    "cold start sync failed and no state file: nothing is attached until it succeeds");
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    () = stopping.cancelled() => return Err(stopped()),
                }
            }
        }
    }
}

fn openstack_source(
    resolved: &Resolved,
    api: lachesis_openstack::ApiMetrics,
    reconcile: &ReconcileMetrics,
) -> anyhow::Result<OpenStackSource> {
    let client = lachesis_openstack::Client::new(resolved.cloud.clone(), api)
        .context("building the OpenStack client")?;
    Ok(OpenStackSource::new(client)
        .with_origin(resolved.origin.clone())
        .with_step_metrics(reconcile.plan().clone()))
}

/// Boot, DESIGN §12, up to `state_restored` with every task started.
/// The running parts boot hands to the tasks.
struct Parts {
    dp: Arc<Datapath>,
    owner: Owner,
    source: OpenStackSource,
    meta: Metadata,
    watcher: Watcher<Arc<Datapath>>,
    reconcile: ReconcileMetrics,
    handles: Handles,
    debug_listener: TcpListener,
    /// The attribution boot swapped in, and its ghosts.
    view: (Arc<AttributionSnapshot>, BTreeMap<Mac, Ghost>),
}

/// What boot shares with the supervisor: the gate, the tunables, the
/// tasks' cancellation and the stop requested during boot.
#[derive(Clone, Copy)]
struct Lifecycle<'a> {
    gate: &'a Arc<BootGate>,
    tunables: &'a Arc<SharedTunables>,
    cancel: &'a CancellationToken,
    stopping: &'a CancellationToken,
    notifier: &'a Notifier,
}

async fn boot(
    config: &Config,
    resolved: &Resolved,
    families: Families,
    handles: Handles,
    lifecycle: Lifecycle<'_>,
    tasks: &mut Tasks,
) -> anyhow::Result<Booted> {
    let (gate, tunables, cancel) = (lifecycle.gate, lifecycle.tunables, lifecycle.cancel);
    let Families {
        registry,
        daemon,
        order,
        reconcile,
        links: link_metrics,
        api,
    } = families;
    // 1. The program and maps; the pinned `flows` reused or retired.
    let dp_config = config.datapath.clone();
    let (dp, pin, retired) = tokio::task::block_in_place(|| Datapath::load(&dp_config))
        .with_context(|| {
            format!(
                "loading the datapath (bpffs {})",
                dp_config.bpffs_dir.display()
            )
        })?;
    let dp = Arc::new(dp);
    info!(flows_pin = ?pin, retired = retired.len(), capacity = dp.flows_max_entries(), "datapath loaded");
    advance(gate, &daemon, Phase::BpfLoaded)?;

    // The state file, read but not applied.
    let paths = StatePaths::new(config.state.path.clone());
    let loaded_state = tokio::task::block_in_place(|| state::load(&paths))
        .with_context(|| format!("reading the state file {}", config.state.path.display()))?;
    // The attribution the file's rows were written under: its plan and its
    // ghosts, which the sweep evicts on their schedule after the restart.
    let (previous, file_table) = committed::file_table(
        &loaded_state.plan,
        (tokio::time::Instant::now(), SystemTime::now()),
        Gauge::default(),
    )
    .context("decoding the state file's committed plan")?;
    let written = file_written(&paths, loaded_state.source);
    if !file_table.ghosts().is_empty() {
        info!(
            ghosts = file_table.ghosts().len(),
            "ghosts restored from the state file"
        );
    }
    let owner = LedgerOwner::new(
        dp.clone(),
        tunables.get().unresolved_limits(),
        PlannedAttribution {
            snapshot: file_table.attribution(),
            plan: loaded_state.plan.clone(),
            tree: Arc::new(previous.clone().unwrap_or_default()),
        },
        paths,
        order,
    );
    // Ids handed out by cold start's writes must agree with the file's.
    owner
        .ledger()
        .restore_interner(&loaded_state.book.interner)
        .context("restoring the tenant interner")?;

    start_metrics_listener(config, &owner, registry, gate, tunables, cancel, tasks).await?;
    // Observable from here on: systemd's start job ends (systemd.rs says
    // why not at `running`).
    lifecycle.notifier.ready();
    let debug_listener = TcpListener::bind(config.listen.debug)
        .await
        .with_context(|| format!("binding the debug listener {}", config.listen.debug))?;

    // 2. Cold start: sync and plan, then every trie row, binding and
    // amphora address, before any new tap is attached.
    let source = openstack_source(resolved, api, &reconcile)?;
    let meta = cold_start(&source, previous.as_ref().map(|p| (p, written)), lifecycle).await?;
    daemon.degraded(meta.degraded);
    write_metadata(&dp, &owner, &meta)?;
    advance(gate, &daemon, Phase::MetadataReady)?;
    let watcher = attach(&dp, config, link_metrics, TapPorts::from_plan(&meta.plan)).await?;
    advance(gate, &daemon, Phase::Attached)?;

    // 4. The ledger restored under the file's plan, retired maps drained
    // first, then settled to the fresh plan.
    // Bindings of the file's plan that the fresh one lacks become ghosts,
    // beside the file's own: resolvable until the sweep evicts them and
    // deletes their flows; the reconciler's table starts from the same view.
    let (batch, ghosts) = file_table.boot_batch(
        &meta.plan,
        &meta.projects,
        meta.servers.as_deref(),
        tokio::time::Instant::now(),
    );
    let attribution = batch.attribution.clone();
    let boot_owner = owner.clone();
    tokio::task::spawn_blocking(move || boot_owner.boot(loaded_state, retired, batch))
        .await
        .context("the restore task")?
        .context("restoring the state file")?;
    advance(gate, &daemon, Phase::StateRestored)?;
    let parts = Parts {
        dp,
        owner: owner.clone(),
        source,
        meta,
        watcher,
        reconcile,
        handles,
        debug_listener,
        view: (attribution, ghosts),
    };
    start_tasks(parts, &daemon, gate, tunables, cancel, tasks);
    Ok(Booted { owner })
}

/// Every trie row, binding and amphora address of the cold start's plan
/// (DESIGN §12 step 2), before any tap is attached.
fn write_metadata(dp: &Datapath, owner: &Owner, meta: &Metadata) -> anyhow::Result<()> {
    let writes = cold_writes(&meta.plan, |p| owner.tenant_id(p)).context("interning tenants")?;
    let n = writes.len();
    tokio::task::block_in_place(|| writes.into_iter().try_for_each(|w| dp.write(w)))
        .context("writing the kernel metadata maps")?;
    info!(
        writes = n,
        bindings = meta.plan.bindings.len(),
        degraded = meta.degraded,
        "kernel metadata written"
    );
    Ok(())
}

/// `/metrics`, `/healthz` and `/readyz`, answering from here on.
async fn start_metrics_listener(
    config: &Config,
    owner: &Owner,
    registry: Registry,
    gate: &Arc<BootGate>,
    tunables: &Arc<SharedTunables>,
    cancel: &CancellationToken,
    tasks: &mut Tasks,
) -> anyhow::Result<()> {
    let exporter = Arc::new(Exporter::new(
        owner.ledger().clone(),
        owner.state_file().clone(),
    ));
    let health = health::Health {
        gate: gate.clone(),
        order: owner.metrics().clone(),
        tunables: tunables.clone(),
        running_since: std::sync::OnceLock::new(),
    };
    let routes = Arc::new(MetricsRoutes::new(exporter, registry, Arc::new(health)));
    let listener = TcpListener::bind(config.listen.metrics)
        .await
        .with_context(|| format!("binding the metrics listener {}", config.listen.metrics))?;
    info!(address = %listener.local_addr()?, "metrics listener");
    tasks.spawn(named(
        "metrics listener",
        serve(listener, routes, cancel.clone()),
    ));
    Ok(())
}

/// Every matching tap attached, each after the MAC of the port behind it
/// (`ports`, from the cold start's plan): a netlink dump of the existing
/// links, replayed (the link watcher's task replays again when it starts,
/// which replaces what is there).
async fn attach(
    dp: &Arc<Datapath>,
    config: &Config,
    metrics: LinkMetrics,
    ports: TapPorts,
) -> anyhow::Result<Watcher<Arc<Datapath>>> {
    let mut watcher = Watcher::new(
        dp.clone(),
        Matcher::from_settings(&config.datapath),
        metrics,
    )
    .with_ports(ports);
    let dump = links::dump_links().await.context("listing links")?;
    tokio::task::block_in_place(|| watcher.replay(&dump.links));
    Ok(watcher)
}

/// Step 5 of §12: every task under the one token.
fn start_tasks(
    parts: Parts,
    daemon: &DaemonMetrics,
    gate: &BootGate,
    tunables: &Arc<SharedTunables>,
    cancel: &CancellationToken,
    tasks: &mut Tasks,
) {
    let Parts {
        dp,
        owner,
        source,
        meta,
        watcher,
        reconcile,
        handles,
        debug_listener,
        view,
    } = parts;
    let degraded = meta.degraded;
    let tap_ports = TapPorts::from_plan(&meta.plan);
    let reconcile_view = reconcile.clone();
    // This agent's ticks at a phase of their own (DESIGN §17).
    let reconciler = Reconciler::new(
        Seams {
            source,
            kernel: dp.clone(),
            ledger: owner.clone(),
        },
        Initial {
            committed: Committed {
                plan: meta.plan,
                synced_at: meta.synced_at,
                topology: meta.topology,
            },
            projects: meta.projects,
            servers: meta.servers.unwrap_or_default(),
        },
        tunables.clone(),
        gate.waiter(),
        reconcile,
    )
    .with_tick_phase(fastrand::f64());
    follow_commits(&reconciler, degraded, daemon, cancel, tasks);
    let kicker = reconciler.kicker();
    handles
        .notifications
        .spawn(&kicker, tunables, &gate.waiter(), cancel, tasks);
    reconciler
        .bindings()
        .try_lock()
        .expect("the table is not shared before the tasks start")
        .install(view.0, view.1);
    let attribution_owner = owner.clone();
    let debug = DebugState {
        config: handles.live,
        committed: reconciler.committed(),
        attribution: Box::new(move || attribution_owner.attribution()),
        datapath: dp.clone(),
        ledger: owner.ledger().clone(),
        daemon: daemon.clone(),
        reconcile: reconcile_view,
        taps: (watcher.board(), watcher.metrics().clone()),
    };
    let routes = Arc::new(DebugRoutes::new(Arc::new(debug), handles.log));
    if let Ok(address) = debug_listener.local_addr() {
        info!(%address, "debug listener");
    }
    tasks.spawn(named(
        "debug listener",
        serve(debug_listener, routes, cancel.clone()),
    ));
    let table = reconciler.bindings();
    let committed = reconciler.committed();
    let reconciler_commits = reconciler.committed();
    let c = cancel.clone();
    tasks.spawn(named("reconciler", async move {
        reconciler.run(c).await.map_err(|e| e.to_string())
    }));
    spawn_ledger_tasks(&owner, table, tunables, gate, cancel, tasks);
    tasks.spawn(named(
        "map fill",
        follow_metadata_fill(
            dp.clone(),
            owner.metrics().clone(),
            committed,
            cancel.clone(),
        ),
    ));
    spawn_link_watcher(watcher, tap_ports, reconciler_commits, cancel, tasks);
}

/// The scraper, the flusher and the ghost sweeper: the ledger owner's
/// periodic work, each waiting for `state_restored`.
fn spawn_ledger_tasks(
    owner: &Owner,
    table: crate::reconcile::SharedTable,
    tunables: &Arc<SharedTunables>,
    gate: &BootGate,
    cancel: &CancellationToken,
    tasks: &mut Tasks,
) {
    tasks.spawn(named(
        "scraper",
        boot_failed(run_scraper(
            owner.clone(),
            tunables.clone(),
            gate.waiter(),
            cancel.clone(),
        )),
    ));
    tasks.spawn(named(
        "flusher",
        boot_failed(run_flusher(
            owner.clone(),
            tunables.clone(),
            gate.waiter(),
            cancel.clone(),
        )),
    ));
    tasks.spawn(named(
        "sweeper",
        boot_failed(run_sweeper(
            owner.clone(),
            table,
            tunables.clone(),
            gate.waiter(),
            cancel.clone(),
        )),
    ));
}

/// The link watcher's task, and the one that feeds it each committed
/// plan's taps and ports (`ports`: the cold start's).
fn spawn_link_watcher(
    watcher: Watcher<Arc<Datapath>>,
    ports: TapPorts,
    committed: watch::Receiver<Arc<Committed>>,
    cancel: &CancellationToken,
    tasks: &mut Tasks,
) {
    let (ports_tx, ports_rx) = watch::channel(ports);
    tasks.spawn(named(
        "tap ports",
        follow_tap_ports(committed, ports_tx, cancel.clone()),
    ));
    let c = cancel.clone();
    tasks.spawn(named("link watcher", async move {
        links::run(watcher, PRESENCE_INTERVAL, ports_rx, c).await;
        Ok(())
    }));
}

/// The link watcher's taps and ports follow the committed plan: a port
/// the plan learns after its tap was attached gets its MAC written then.
async fn follow_tap_ports(
    mut committed: watch::Receiver<Arc<Committed>>,
    ports: watch::Sender<TapPorts>,
    cancel: CancellationToken,
) {
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            changed = committed.changed() => {
                if changed.is_err() {
                    // The reconciler is gone; the supervisor is stopping.
                    cancel.cancelled().await;
                    return;
                }
                let next = TapPorts::from_plan(&committed.borrow_and_update().plan);
                ports.send_if_modified(|now| {
                    let changed = *now != next;
                    *now = next;
                    changed
                });
            }
        }
    }
}

/// How often the metadata maps' fill is re-counted without a commit (a
/// failed pass may have written part of its delta).
const FILL_RECOUNT: Duration = Duration::from_mins(1);

/// Counts the metadata maps' entries (only the agent writes them) at
/// start, after every commit and every [`FILL_RECOUNT`]: a key walk, too
/// costly for every scrape at 100 000 trie rows.
async fn follow_metadata_fill(
    dp: Arc<Datapath>,
    metrics: OrderMetrics,
    mut committed: tokio::sync::watch::Receiver<Arc<Committed>>,
    cancel: CancellationToken,
) {
    loop {
        let fills = tokio::task::block_in_place(|| dp.metadata_fill());
        metrics.metadata_fill(&fills);
        tokio::select! {
            () = cancel.cancelled() => return,
            changed = committed.changed() => if changed.is_err() {
                // The reconciler is gone; the supervisor is stopping.
                cancel.cancelled().await;
                return;
            },
            () = tokio::time::sleep(FILL_RECOUNT) => {}
        }
    }
}

/// The sync age follows the reconciler's commits; while degraded, a task
/// kicks it until one commits.
fn follow_commits<S, K, L>(
    reconciler: &Reconciler<S, K, L>,
    degraded: bool,
    daemon: &DaemonMetrics,
    cancel: &CancellationToken,
    tasks: &mut Tasks,
) where
    S: crate::reconcile::MetadataSource,
    K: crate::reconcile::KernelWriter,
    L: crate::reconcile::LedgerOrder,
{
    daemon.follow_sync(reconciler.committed());
    if degraded {
        reconciler.kick();
        tasks.spawn(named(
            "degraded watch",
            leave_degraded(
                reconciler.committed(),
                reconciler.kicker(),
                daemon.clone(),
                cancel.clone(),
            ),
        ));
    }
}

/// While degraded, kicks the reconciler with the cold start's backoff
/// (1 s … 30 s) until a pass commits, then clears `lachesis_degraded`.
async fn leave_degraded(
    mut committed: tokio::sync::watch::Receiver<Arc<Committed>>,
    kicker: crate::reconcile::Kicker,
    metrics: DaemonMetrics,
    cancel: CancellationToken,
) -> Result<(), String> {
    let mut failures = 0;
    loop {
        tokio::select! {
            () = cancel.cancelled() => return Ok(()),
            changed = committed.changed() => {
                if changed.is_ok() {
                    metrics.degraded(false);
                    info!("first successful sync: no longer degraded");
                }
                // Stay alive: the supervisor treats a task ending as a failure.
                cancel.cancelled().await;
                return Ok(());
            }
            () = tokio::time::sleep(backoff(failures)) => {
                failures = failures.saturating_add(1);
                kicker.kick();
            }
        }
    }
}

async fn boot_failed<F>(f: F) -> Result<(), String>
where
    F: std::future::Future<Output = Result<(), crate::boot::BootFailed>>,
{
    f.await.map_err(|e| e.to_string())
}

async fn named<F, T>(name: &'static str, f: F) -> (&'static str, Result<(), String>)
where
    F: std::future::Future<Output = T>,
    T: IntoTaskResult,
{
    (name, f.await.into_task_result())
}

/// A task's ending as the supervisor reads it.
trait IntoTaskResult {
    fn into_task_result(self) -> Result<(), String>;
}

impl IntoTaskResult for () {
    fn into_task_result(self) -> Result<(), String> {
        Ok(())
    }
}

impl IntoTaskResult for Result<(), String> {
    fn into_task_result(self) -> Result<(), String> {
        self
    }
}

#[cfg(test)]
mod tests;
