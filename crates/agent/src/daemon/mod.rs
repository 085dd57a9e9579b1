//! `lachesis agent`: the daemon (DESIGN §12, §13; docs/operations.md).
//!
//! [`run`] is the lifecycle as a sequence of types, as vector's
//! `src/app.rs` has it: the preflight and the instance lock, then
//! [`Booting`] → [`Running`] → [`Stopping`].
//!
//! - Booting (boot.rs): the §12 steps, each phase on the [`BootGate`], the
//!   `lachesis_boot_phase` gauge and one log line. A stop signal lets the
//!   current step finish (only cold start's waiting gives way to it); a
//!   SIGHUP is ignored. A failure, or a stop while cold start waited, ends
//!   boot there ([`BootEnded`]).
//! - Running: until SIGTERM or SIGINT, or a task that ended on its own;
//!   SIGHUP reloads the tunables (reload.rs); systemd hears the status
//!   (systemd.rs).
//! - Stopping: intake stopped (every task of the table, tasks.rs,
//!   cancelled and awaited), then the final drain and the final flush.
//!   Programs stay attached and `flows` pinned: the next instance
//!   replaces them and drains what they counted meanwhile.

mod boot;
mod debug;
mod follow;
mod health;
mod metrics;
mod notify;
mod reload;
mod signals;
mod source;
mod stream;
mod systemd;
mod tasks;
mod writes;

use std::sync::{Arc, RwLock};
use std::time::Duration;

use anyhow::{anyhow, Context as _};
use lachesis_datapath::Datapath;
use tokio::time::Interval;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

pub use debug::{bindings, listing, DebugState, LiveConfig};
pub use metrics::DaemonMetrics;
pub use notify::check_notifications;
pub use stream::StateStream;
pub use writes::cold_writes;

use crate::boot::{BootGate, Phase};
use crate::config::{Loaded, SharedTunables};
use crate::http::LogLevelControl;
use crate::order::LedgerOwner;
use crate::preflight::Resolved;
use boot::{advance, Boot, StoppedDuringBoot};
use metrics::Families;
use notify::Notifications;
use reload::Reloader;
use signals::{Received, Signals};
use systemd::Notifier;
use tasks::TaskSet;

/// How often the link watcher re-checks that every matching tap carries
/// our programs (a missed netlink event must not become an undercount).
pub const PRESENCE_INTERVAL: Duration = Duration::from_secs(30);

type Owner = LedgerOwner<Arc<Datapath>>;

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
    info!(metadata = resolved.origin, "configuration resolved");
    // One agent per bpffs dir and state file, held until the process ends,
    // before anything touches the kernel (crate::instance_lock).
    let _instance = crate::instance_lock::InstanceLock::acquire(&loaded.config)?;
    let booting = Booting::new(loaded, resolved, log)?;
    match booting.boot().await {
        Ok(running) => running.until_stopped().await?.stop().await,
        Err(ended) => ended.exit().await,
    }
}

/// Signals installed and every family registered; nothing loaded yet.
struct Booting {
    loaded: Loaded,
    resolved: Resolved,
    log: Arc<dyn LogLevelControl>,
    signals: Signals,
    gate: Arc<BootGate>,
    tasks: TaskSet,
    families: Families,
    notifications: Notifications,
    tunables: Arc<SharedTunables>,
    notifier: Notifier,
    /// The systemd status tick.
    tick: Interval,
    live: LiveConfig,
}

impl Booting {
    fn new(
        loaded: Loaded,
        resolved: Resolved,
        log: Arc<dyn LogLevelControl>,
    ) -> anyhow::Result<Self> {
        let signals = Signals::install()?;
        let gate = Arc::new(BootGate::new());
        let tasks = TaskSet::new(gate.clone());
        let (families, notifications) = Families::register(&loaded.config, &resolved.web);
        let tunables = Arc::new(SharedTunables::new(loaded.config.tunables));
        let notifier = Notifier::new(&gate, &families, &tunables);
        let tick = tokio::time::interval(notifier.period());
        let live: LiveConfig = Arc::new(RwLock::new(Arc::new(loaded.config.clone())));
        Ok(Booting {
            loaded,
            resolved,
            log,
            signals,
            gate,
            tasks,
            families,
            notifications,
            tunables,
            notifier,
            tick,
            live,
        })
    }

    /// Boot (boot.rs) up to `state_restored`, every task started, while
    /// the signals and systemd's status tick are answered.
    async fn boot(mut self) -> Result<Running, BootEnded> {
        let daemon = self.families.daemon.clone();
        // A stop during boot lets the current step finish (nothing is left
        // half-applied); only cold start's retries give way to it at once.
        let stopping = CancellationToken::new();
        let steps = Boot {
            config: &self.loaded.config,
            gate: &self.gate,
            daemon: daemon.clone(),
            tunables: &self.tunables,
            notifier: &self.notifier,
            stopping: &stopping,
            tasks: &mut self.tasks,
            live: self.live.clone(),
            log: self.log.clone(),
        };
        let steps = Box::pin(steps.run(&self.resolved, self.families, self.notifications));
        let (booted, stop_requested) = answering(
            steps,
            &mut self.signals,
            &self.notifier,
            &mut self.tick,
            &stopping,
        )
        .await;
        let owner = match booted {
            Ok(owner) => owner,
            Err(error) => {
                return Err(BootEnded {
                    error,
                    gate: self.gate,
                    notifier: self.notifier,
                    tasks: self.tasks,
                })
            }
        };
        Ok(Running {
            signals: self.signals,
            tasks: self.tasks,
            owner,
            gate: self.gate,
            daemon: daemon.clone(),
            notifier: self.notifier,
            tick: self.tick,
            reloader: Reloader {
                web: self.resolved.web.clone(),
                current: self.loaded.config,
                file: self.loaded.file,
                tunables: self.tunables,
                metrics: daemon,
                log: self.log,
                live: self.live,
            },
            stop_requested,
        })
    }
}

/// Runs `boot` to its end while answering the signals and ticking
/// systemd's status: a stop signal cancels `stopping` (once), a SIGHUP is
/// ignored. Returns boot's result and the stop signal, if one came.
async fn answering<T>(
    boot: impl std::future::Future<Output = T>,
    signals: &mut Signals,
    notifier: &Notifier,
    tick: &mut Interval,
    stopping: &CancellationToken,
) -> (T, Option<&'static str>) {
    tokio::pin!(boot);
    let mut stop_requested = None;
    loop {
        tokio::select! {
            booted = &mut boot => return (booted, stop_requested),
            name = signals.stop(), if stop_requested.is_none() => {
                info!(signal = name, "stop requested during boot: finishing the current step");
                notifier.stopping();
                stop_requested = Some(name);
                stopping.cancel();
            }
            _ = tick.tick(), if notifier.active() => notifier.tick(),
        }
    }
}

/// Boot ended without reaching `running`: a stop requested while cold
/// start waited (a clean exit), or a failure (the gate says why).
struct BootEnded {
    error: anyhow::Error,
    gate: Arc<BootGate>,
    notifier: Notifier,
    tasks: TaskSet,
}

impl BootEnded {
    async fn exit(mut self) -> anyhow::Result<()> {
        let stopped = self.error.is::<StoppedDuringBoot>();
        if stopped {
            self.notifier.stopping();
            self.gate.fail(self.error.to_string());
        } else {
            let reason = format!("{:#}", self.error);
            error!(reason, "boot failed");
            self.gate.fail(reason);
            self.notifier.tick();
        }
        self.tasks.stop().await;
        if stopped {
            info!("stopped before the first sync: nothing attached, state file untouched");
            Ok(())
        } else {
            Err(self.error.context("boot failed"))
        }
    }
}

/// Booted to `state_restored`, every task started.
struct Running {
    signals: Signals,
    tasks: TaskSet,
    owner: Owner,
    gate: Arc<BootGate>,
    daemon: DaemonMetrics,
    notifier: Notifier,
    tick: Interval,
    reloader: Reloader,
    /// The stop signal that arrived during boot, if one did.
    stop_requested: Option<&'static str>,
}

impl Running {
    /// `running` until a stop signal (or one that came during boot) or a
    /// task that ended on its own.
    async fn until_stopped(mut self) -> anyhow::Result<Stopping> {
        advance(&self.gate, &self.daemon, Phase::Running)?;
        self.notifier.tick();
        let why = match self.stop_requested.take() {
            Some(name) => {
                info!(
                    signal = name,
                    "stopping: final drain and flush; programs stay attached"
                );
                None
            }
            None => self.serve().await,
        };
        Ok(Stopping {
            tasks: self.tasks,
            owner: self.owner,
            why,
        })
    }

    /// A stop signal, a reload, a task that ended, the status tick, until
    /// one of the first or third. Why it stopped: `None` for a signal, else
    /// the task's end.
    async fn serve(&mut self) -> Option<String> {
        loop {
            tokio::select! {
                sig = self.signals.next() => match sig {
                    Received::Stop(name) => {
                        info!(signal = name, "stopping: final drain and flush; programs stay attached");
                        self.notifier.stopping();
                        return None;
                    }
                    Received::Hangup => self.reloader.reload(),
                },
                Some(ended) = self.tasks.ended() => {
                    let what = tasks::describe(ended);
                    error!(reason = what, "stopping");
                    self.notifier.stopping();
                    return Some(what);
                }
                _ = self.tick.tick(), if self.notifier.active() => self.notifier.tick(),
            }
        }
    }
}

/// Stopping: what a stop does after `running` (DESIGN §12, "Graceful
/// shutdown").
struct Stopping {
    tasks: TaskSet,
    owner: Owner,
    /// `None` for a stop signal, else the end of the task that stopped it.
    why: Option<String>,
}

impl Stopping {
    async fn stop(mut self) -> anyhow::Result<()> {
        // 1. Intake: every task cancelled and awaited, so nothing writes the
        //    kernel or the ledger from here on.
        self.tasks.stop().await;
        // 2, 3. The final drain, then the final flush, under one hold of the
        //    owner. Nothing is detached or unpinned.
        self.owner
            .shutdown_async()
            .await
            .context("final drain and flush")?;
        info!("stopped; state flushed");
        match self.why {
            None => Ok(()),
            Some(what) => Err(anyhow!(what)),
        }
    }
}

#[cfg(test)]
mod tests;
