//! Boot, DESIGN §12 (load-bearing; docs/operations.md "Start"): each step
//! below in this order, each phase on the [`BootGate`], the
//! `lachesis_boot_phase` gauge and one log line.
//!
//! 1. The program and maps; the state file read, not applied; the metrics
//!    listener (systemd's `READY=1`); the debug listener bound.
//! 2. Cold start: sync and plan (retried with backoff while there is no
//!    state file; degraded from the file's plan otherwise), then every
//!    trie row, binding and amphora address written — before any new tap
//!    is attached. → `metadata_ready`
//! 3. Every matching tap attached. → `attached`
//! 4. The ledger restored under the file's plan, retired maps drained
//!    first, then settled to the fresh plan. → `state_restored`
//! 5. Every task of the table (tasks.rs).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use anyhow::Context as _;
use lachesis_abi::Mac;
use lachesis_datapath::{Datapath, RetiredFlows};
use lachesis_ledger::state::{self, LoadSource, StatePaths};
use lachesis_ledger::Exporter;
use lachesis_notify::backoff;
use lachesis_notify::rabbitmq::stream::StreamConfig;
use lachesis_planner::{Plan, Topology};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use super::debug::{DebugState, LiveConfig};
use super::metrics::{DaemonMetrics, Families};
use super::notify::Notifications;
use super::source::ConfiguredSource;
use super::stream::{StateStream, StreamMetrics};
use super::systemd::Notifier;
use super::tasks::{StartedEarly, Task, TaskSet};
use super::{cold_writes, follow, health, Owner, PRESENCE_INTERVAL};
use crate::boot::{BootGate, Phase};
use crate::config::{Config, SharedTunables};
use crate::http::{serve, DebugRoutes, LogLevelControl, MetricsRoutes};
use crate::links::{self, LinkMetrics, Matcher, TapPorts, Watcher};
use crate::order::{
    run_flusher, run_scraper, run_sweeper, LedgerOwner, OrderMetrics, PlannedAttribution,
};
use crate::preflight::Resolved;
use crate::reconcile::{
    committed, AttributionSnapshot, BindingTable, Committed, Ghost, Initial, KernelWriter as _,
    Kicker, LedgerOrder as _, Named, ReconcileMetrics, Reconciler, Seams, SharedAssembler,
};
use lachesis_listen::Endpoint;

/// The reconciler over the real seams.
type Agent = Reconciler<ConfiguredSource, Arc<Datapath>, Owner>;

/// Boot in progress: what every step reads, and the tasks it starts.
pub(super) struct Boot<'a> {
    pub(super) config: &'a Config,
    pub(super) gate: &'a Arc<BootGate>,
    pub(super) daemon: DaemonMetrics,
    pub(super) tunables: &'a Arc<SharedTunables>,
    pub(super) notifier: &'a Notifier,
    /// Cancelled by a stop requested during boot: only cold start's
    /// waiting gives way to it, every other step finishes (nothing is
    /// left half-applied).
    pub(super) stopping: &'a CancellationToken,
    pub(super) tasks: &'a mut TaskSet,
    /// What the debug listener shows and changes.
    pub(super) live: LiveConfig,
    pub(super) log: Arc<dyn LogLevelControl>,
}

/// The state file, read but not applied (§12 step 1): its plan may stand
/// in at step 2, its ledger section is applied at step 4.
struct FileState {
    loaded: state::Loaded,
    /// The file's committed plan, when it has one.
    previous: Option<Plan>,
    /// The attribution the file's rows were written under: its plan and
    /// its ghosts, which the sweep evicts on their schedule after the
    /// restart.
    table: BindingTable,
    /// When the file was last written ([`file_written`]).
    written: SystemTime,
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

/// SIGTERM or SIGINT while cold start was still waiting for Keystone and
/// Neutron: a clean stop, not a failure (nothing was attached yet).
#[derive(Debug)]
pub(super) struct StoppedDuringBoot(&'static str);

impl std::fmt::Display for StoppedDuringBoot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "stopped by {} during cold start", self.0)
    }
}

impl std::error::Error for StoppedDuringBoot {}

/// Moves the gate, the gauge and the log to `phase`.
pub(super) fn advance(
    gate: &BootGate,
    metrics: &DaemonMetrics,
    phase: Phase,
) -> anyhow::Result<()> {
    gate.advance(phase)?;
    metrics.phase(phase);
    info!(phase = phase.label(), "boot phase");
    Ok(())
}

impl Boot<'_> {
    /// Boot up to `state_restored` with every task started; the ledger
    /// owner the final drain and flush go through.
    pub(super) async fn run(
        mut self,
        resolved: &Resolved,
        families: Families,
        notifications: Notifications,
    ) -> anyhow::Result<Owner> {
        let Families {
            registry,
            listeners,
            order,
            reconcile,
            links: link_metrics,
            api,
            stream,
            ..
        } = families;
        // 1. The program and maps; the state file read, not applied; the
        // metrics listener.
        let (dp, retired) = self.load_datapath()?;
        let file = self.read_state_file()?;
        let owner = self.ledger_owner(&dp, &file, order)?;
        self.start_metrics_listener(&owner, registry, listeners.metrics)
            .await?;
        // Observable from here on: systemd's start job ends (systemd.rs says
        // why not at `running`).
        self.notifier.ready();
        let debug_listener = TcpListener::bind(self.config.listen.debug)
            .await
            .with_context(|| format!("binding the debug listener {}", self.config.listen.debug))?;

        // Relay mode: the stream is read from here on, so cold start can
        // plan from it; its kicks wait for the reconciler's phase.
        let kicker = Kicker::new(reconcile.clone());
        let relay = self.start_state_stream(stream, &kicker)?;

        // 2. Cold start: sync and plan, then every trie row, binding and
        // amphora address, before any new tap is attached.
        let source = ConfiguredSource::new(resolved, relay, api, &reconcile)?;
        let previous = file.previous.as_ref().map(|p| (p, file.written));
        let meta = self.cold_start(&source, previous).await?;
        self.daemon.degraded(meta.degraded);
        write_metadata(&dp, &owner, &meta)?;
        self.advance(Phase::MetadataReady)?;

        // 3. Every matching tap attached.
        let watcher = attach(
            &dp,
            self.config,
            link_metrics,
            TapPorts::from_plan(&meta.plan),
        )
        .await?;
        self.advance(Phase::Attached)?;

        // 4. The ledger restored under the file's plan, retired maps drained
        // first, then settled to the fresh plan.
        let view = self.restore(&owner, file, retired, &meta).await?;

        // 5. Every task of the table.
        let degraded = meta.degraded;
        let reconciler = self
            .reconciler(source, &dp, &owner, meta, reconcile.clone(), view)
            .with_kicker(kicker);
        let debug = self.debug_routes(&dp, &owner, &reconciler, &watcher, reconcile);
        self.start_debug_listener(debug_listener, listeners.debug, debug)?;
        self.start_tasks(reconciler, &dp, &owner, watcher, notifications, degraded)?;
        Ok(owner)
    }

    fn advance(&self, phase: Phase) -> anyhow::Result<()> {
        advance(self.gate, &self.daemon, phase)
    }

    /// The program and maps; the pinned `flows` reused, or retired for a
    /// last drain at step 4. → `bpf_loaded`
    fn load_datapath(&self) -> anyhow::Result<(Arc<Datapath>, Vec<RetiredFlows>)> {
        let dp_config = self.config.datapath.clone();
        let (dp, pin, retired) = tokio::task::block_in_place(|| Datapath::load(&dp_config))
            .with_context(|| {
                format!(
                    "loading the datapath (bpffs {})",
                    dp_config.bpffs_dir.display()
                )
            })?;
        let dp = Arc::new(dp);
        info!(flows_pin = ?pin, retired = retired.len(), capacity = dp.flows_max_entries(), "datapath loaded");
        self.advance(Phase::BpfLoaded)?;
        Ok((dp, retired))
    }

    /// The state file, read but not applied.
    fn read_state_file(&self) -> anyhow::Result<FileState> {
        let path = &self.config.state.path;
        let paths = StatePaths::new(path.clone());
        let loaded = tokio::task::block_in_place(|| state::load(&paths))
            .with_context(|| format!("reading the state file {}", path.display()))?;
        let (previous, table) = committed::file_table(
            &loaded.plan,
            (tokio::time::Instant::now(), SystemTime::now()),
            Gauge::default(),
        )
        .context("decoding the state file's committed plan")?;
        let written = file_written(&paths, loaded.source);
        if !table.ghosts().is_empty() {
            info!(
                ghosts = table.ghosts().len(),
                "ghosts restored from the state file"
            );
        }
        Ok(FileState {
            loaded,
            previous,
            table,
            written,
        })
    }

    /// The one owner of ledger order, serving the file's attribution until
    /// step 4 settles it to the fresh plan.
    fn ledger_owner(
        &self,
        dp: &Arc<Datapath>,
        file: &FileState,
        metrics: OrderMetrics,
    ) -> anyhow::Result<Owner> {
        let owner = LedgerOwner::new(
            dp.clone(),
            self.tunables.get().unresolved_limits(),
            PlannedAttribution {
                snapshot: file.table.attribution(),
                plan: file.loaded.plan.clone(),
                tree: Arc::new(file.previous.clone().unwrap_or_default()),
            },
            StatePaths::new(self.config.state.path.clone()),
            metrics,
        );
        // Ids handed out by cold start's writes must agree with the file's.
        owner
            .ledger()
            .restore_interner(&file.loaded.book.interner)
            .context("restoring the tenant interner")?;
        Ok(owner)
    }

    /// `/metrics`, `/healthz` and `/readyz`, answering from here on.
    async fn start_metrics_listener(
        &mut self,
        owner: &Owner,
        registry: Registry,
        endpoint: Endpoint,
    ) -> anyhow::Result<()> {
        let exporter = Arc::new(Exporter::new(
            owner.ledger().clone(),
            owner.state_file().clone(),
        ));
        let health = health::Health {
            gate: self.gate.clone(),
            order: owner.metrics().clone(),
            tunables: self.tunables.clone(),
            running_since: std::sync::OnceLock::new(),
        };
        let routes = Arc::new(MetricsRoutes::new(exporter, registry, Arc::new(health)));
        let address = self.config.listen.metrics;
        let listener = TcpListener::bind(address)
            .await
            .with_context(|| format!("binding the metrics listener {address}"))?;
        info!(address = %listener.local_addr()?, "metrics listener");
        // The web configuration's watcher lives and stops with the listener
        // that serves it first.
        let web = endpoint.web.clone();
        self.tasks
            .start(Task::MetricsListener, |cancel| async move {
                tokio::join!(
                    serve(listener, endpoint, routes, cancel.clone()),
                    web.watch(cancel)
                );
            })?;
        Ok(())
    }

    /// Relay mode's stream task, started at `bpf_loaded` (the table's
    /// order: after the metrics listener); the assembler it feeds.
    fn start_state_stream(
        &mut self,
        stream: Option<(SharedAssembler, StreamMetrics)>,
        kicker: &Kicker,
    ) -> anyhow::Result<Option<SharedAssembler>> {
        let (Some((shared, metrics)), Some((config, lookback))) = (stream, self.config.relay())
        else {
            return Ok(None);
        };
        let task = StateStream {
            config: StreamConfig {
                // Spread a fleet over the cluster's nodes (DESIGN §17).
                first_host: fastrand::usize(..config.url.hosts().len().max(1)),
                ..config.clone()
            },
            lookback,
            shared: shared.clone(),
            metrics,
            kicker: kicker.clone(),
        };
        self.tasks
            .start(Task::StateStream, |cancel| task.run(cancel))?;
        Ok(Some(shared))
    }

    /// Cold start's sync (DESIGN §12 step 2): retried with backoff while
    /// Keystone/Neutron fail (in relay mode: while the stream holds no
    /// complete snapshot) and there is no state file; with one, the
    /// file's plan stands in at the first failure (degraded).
    async fn cold_start(
        &self,
        source: &ConfiguredSource,
        previous: Option<(&Plan, SystemTime)>,
    ) -> Result<Metadata, StoppedDuringBoot> {
        let stopped = || StoppedDuringBoot("a signal");
        let mut failures = 0;
        loop {
            let options = self.tunables.get().plan_options();
            let old = previous.map(|(p, _)| Arc::new(p.clone()));
            let synced = tokio::select! {
                synced = source.first_sync(old, options) => synced,
                () = self.stopping.cancelled() => return Err(stopped()),
            };
            let e = match synced {
                Ok(s) => {
                    self.notifier.waiting(None);
                    return Ok(Metadata {
                        plan: s.plan,
                        projects: s.projects,
                        servers: s.servers,
                        synced_at: SystemTime::now(),
                        degraded: false,
                        topology: Some(s.topology),
                    });
                }
                Err(e) => e,
            };
            let cause = crate::reconcile::chain(&e);
            // A refusal is logged as an error every time: it lasts
            // until an operator changes the credentials.
            if e.is_refusal() {
                error!(error = cause, "cold start sync refused");
            }
            self.notifier.waiting(Some(cause.clone()));
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
                () = source.retry_wait(wait) => {}
                () = self.stopping.cancelled() => return Err(stopped()),
            }
        }
    }

    /// Step 4: the ledger restored under the file's plan, drained once under
    /// it (retired maps first), flushed, then settled to the fresh plan and
    /// flushed again. Bindings of the file's plan that the fresh one lacks
    /// become ghosts, beside the file's own: resolvable until the sweep
    /// evicts them and deletes their flows; the reconciler's table starts
    /// from the same view. → `state_restored`
    async fn restore(
        &self,
        owner: &Owner,
        file: FileState,
        retired: Vec<RetiredFlows>,
        meta: &Metadata,
    ) -> anyhow::Result<(Arc<AttributionSnapshot>, BTreeMap<Mac, Ghost>)> {
        let (batch, ghosts) = file.table.boot_batch(
            &meta.plan,
            &meta.projects,
            meta.servers.as_deref(),
            tokio::time::Instant::now(),
        );
        let attribution = batch.attribution.clone();
        let boot_owner = owner.clone();
        let loaded = file.loaded;
        tokio::task::spawn_blocking(move || boot_owner.boot(loaded, retired, batch))
            .await
            .context("the restore task")?
            .context("restoring the state file")?;
        self.advance(Phase::StateRestored)?;
        Ok((attribution, ghosts))
    }

    /// The reconciler, holding the cold start's plan and boot's view; the
    /// sync age follows its commits, and a degraded boot kicks it at once.
    fn reconciler(
        &self,
        source: ConfiguredSource,
        dp: &Arc<Datapath>,
        owner: &Owner,
        meta: Metadata,
        metrics: ReconcileMetrics,
        view: (Arc<AttributionSnapshot>, BTreeMap<Mac, Ghost>),
    ) -> Agent {
        let degraded = meta.degraded;
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
            self.tunables.clone(),
            self.gate.waiter(),
            metrics,
        )
        .with_tick_phase(fastrand::f64());
        self.daemon.follow_sync(reconciler.committed());
        if degraded {
            reconciler.kick();
        }
        reconciler
            .bindings()
            .try_lock()
            .expect("the table is not shared before the tasks start")
            .install(view.0, view.1);
        reconciler
    }

    /// What the debug pages read from the running agent.
    fn debug_routes(
        &self,
        dp: &Arc<Datapath>,
        owner: &Owner,
        reconciler: &Agent,
        watcher: &Watcher<Arc<Datapath>>,
        reconcile: ReconcileMetrics,
    ) -> Arc<DebugRoutes> {
        let attribution_owner = owner.clone();
        let debug = DebugState {
            config: self.live.clone(),
            committed: reconciler.committed(),
            attribution: Box::new(move || attribution_owner.attribution()),
            datapath: dp.clone(),
            ledger: owner.ledger().clone(),
            daemon: self.daemon.clone(),
            reconcile,
            taps: (watcher.board(), watcher.metrics().clone()),
        };
        Arc::new(DebugRoutes::new(Arc::new(debug), self.log.clone()))
    }

    fn start_debug_listener(
        &mut self,
        listener: TcpListener,
        endpoint: Endpoint,
        routes: Arc<DebugRoutes>,
    ) -> Result<(), StartedEarly> {
        if let Ok(address) = listener.local_addr() {
            info!(%address, "debug listener");
        }
        self.tasks.start(Task::DebugListener, |cancel| {
            serve(listener, endpoint, routes, cancel)
        })
    }

    /// The rest of the table, in its order. Every handle on the reconciler
    /// is taken before it starts: a commit between its start and a
    /// `committed()` taken later would be missed by that follower.
    fn start_tasks(
        &mut self,
        reconciler: Agent,
        dp: &Arc<Datapath>,
        owner: &Owner,
        watcher: Watcher<Arc<Datapath>>,
        notifications: Notifications,
        degraded: bool,
    ) -> Result<(), StartedEarly> {
        let (kicker, table) = (reconciler.kicker(), reconciler.bindings());
        let [for_degraded, for_ports, for_fill] = [(); 3].map(|()| reconciler.committed());
        let (ports_tx, ports_rx) = watch::channel(TapPorts::from_plan(&for_ports.borrow().plan));
        let tasks = &mut *self.tasks;
        tasks.start(Task::Reconciler, |cancel| reconciler.run(cancel))?;
        if degraded {
            let daemon = self.daemon.clone();
            tasks.start(Task::DegradedWatch, |cancel| {
                follow::leave_degraded(for_degraded, kicker.clone(), daemon, cancel)
            })?;
        }
        notifications.start(&kicker, self.tunables, &self.gate.waiter(), tasks)?;
        let t = self.tunables;
        tasks.start(Task::Scraper, |cancel| {
            run_scraper(owner.clone(), t.clone(), self.gate.waiter(), cancel)
        })?;
        tasks.start(Task::Flusher, |cancel| {
            run_flusher(owner.clone(), t.clone(), self.gate.waiter(), cancel)
        })?;
        tasks.start(Task::Sweeper, |cancel| {
            run_sweeper(owner.clone(), table, t.clone(), self.gate.waiter(), cancel)
        })?;
        tasks.start(Task::LinkWatcher, |cancel| async move {
            links::run(watcher, PRESENCE_INTERVAL, ports_rx, cancel).await;
        })?;
        tasks.start(Task::TapPorts, |cancel| {
            follow::tap_ports(for_ports, ports_tx, cancel)
        })?;
        let (dp, metrics) = (dp.clone(), owner.metrics().clone());
        tasks.start(Task::MapFill, |cancel| {
            follow::metadata_fill(dp, metrics, for_fill, cancel)
        })
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
