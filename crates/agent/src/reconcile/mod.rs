//! The reconciler (DESIGN §7; the seed's reconcile package): one task owns
//! every metadata write to the kernel and to the userspace bindings, and
//! brings both to a fresh OpenStack snapshot on a periodic tick and on
//! debounced kicks, never two passes at once.
//!
//! Seams, each owned here (docs/agent-reconcile.md):
//!
//! | seam | real | what |
//! |---|---|---|
//! | [`MetadataSource`] | [`OpenStackSource`], [`RelaySource`] | one sync: fetch (or take the relay's assembled state), parse, plan |
//! | [`KernelWriter`] | [`lachesis_datapath::Datapath`] | trie rows, bindings, amphora addresses |
//! | [`LedgerOrder`] | the agent's ledger owner | tenant ids, settle batches, prunes |
//!
//! Boot builds a [`Reconciler`] from the plan cold start wrote (no pass at
//! start), hands [`Reconciler::kicker`] to the notification consumers and
//! [`Reconciler::bindings`] to the ghost sweeper, and spawns
//! [`Reconciler::run`], which waits for `state_restored` before its first
//! pass.

#![deny(missing_docs)]

pub mod committed;
mod kernel;
mod metrics;
mod order;
mod pass;
mod plan_metrics;
mod relay;
mod schedule;
mod source;
mod table;

#[cfg(test)]
mod fakes;
#[cfg(test)]
mod tests;

use std::error::Error as StdError;
use std::sync::Arc;
use std::time::SystemTime;

use lachesis_planner::{Plan, Topology};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub use kernel::{KernelWriter, Write, WriteError};
pub use metrics::{LastPass, PassResult, ReconcileMetrics, Trigger};
pub use order::{
    AttributionSnapshot, BatchError, BoxError, LedgerOrder, PruneFailed, Settle, SettleBatch,
};
pub use plan_metrics::{PlanMetrics, PlanStep};
pub use relay::{RelaySource, SharedAssembler};
pub use schedule::Kicker;
pub use source::{MetadataSource, Named, OpenStackSource, SyncError, SyncTimings, Synced};
pub use table::{BindingTable, Ghost, SharedTable};

use crate::boot::{BootFailed, BootWaiter, Phase};
use crate::config::SharedTunables;

/// The last plan whose every write succeeded: the old side of the next
/// diff, what `/debug/plan` shows and the state file carries.
#[derive(Debug, Clone)]
pub struct Committed {
    /// The plan.
    pub plan: Arc<Plan>,
    /// When the sync it came from finished (sync age counts from here).
    pub synced_at: SystemTime,
    /// The cloud the plan was made from, for the debug pages; `None` when
    /// the plan came from the state file (degraded boot).
    pub topology: Option<Arc<Topology>>,
}

/// What boot hands over: the plan the kernel was written from (cold start),
/// or the state file's plan (degraded boot), and the names it knows.
#[derive(Debug, Clone)]
pub struct Initial {
    /// The committed plan.
    pub committed: Committed,
    /// Keystone projects (names for the info series).
    pub projects: Vec<Named>,
    /// Nova servers (empty when unknown).
    pub servers: Vec<Named>,
}

/// The three seams a reconciler drives.
#[derive(Debug)]
pub struct Seams<S, K, L> {
    /// Where the desired state comes from.
    pub source: S,
    /// The kernel metadata maps.
    pub kernel: K,
    /// The ledger's one owner of order.
    pub ledger: L,
}

/// The reconciler. Build with [`Reconciler::new`], run with
/// [`Reconciler::run`] on one long-lived task.
#[derive(Debug)]
pub struct Reconciler<S, K, L> {
    seams: Seams<S, K, L>,
    tunables: Arc<SharedTunables>,
    boot: BootWaiter,
    metrics: ReconcileMetrics,
    kicker: Kicker,
    table: SharedTable,
    committed: watch::Sender<Arc<Committed>>,
    /// Where this agent's ticks fall within an interval (schedule.rs).
    tick_phase: f64,
}

impl<S, K, L> Reconciler<S, K, L>
where
    S: MetadataSource,
    K: KernelWriter,
    L: LedgerOrder,
{
    /// A reconciler whose kernel and bindings hold `initial`'s plan.
    pub fn new(
        seams: Seams<S, K, L>,
        initial: Initial,
        tunables: Arc<SharedTunables>,
        boot: BootWaiter,
        metrics: ReconcileMetrics,
    ) -> Self {
        let table = BindingTable::from_plan(
            &initial.committed.plan,
            &initial.projects,
            &initial.servers,
            metrics.ghosts_gauge(),
        );
        metrics.set_committed(&initial.committed.plan);
        Reconciler {
            seams,
            tunables,
            boot,
            kicker: Kicker::new(metrics.clone()),
            metrics,
            table: Arc::new(tokio::sync::Mutex::new(table)),
            committed: watch::Sender::new(Arc::new(initial.committed)),
            tick_phase: 0.0,
        }
    }

    /// Puts this agent's ticks at `phase` (in [0, 1)) of each interval:
    /// the daemon draws it at random, so a fleet's agents do not tick
    /// together (DESIGN §17). 0 (the default) ticks one interval after
    /// `state_restored`.
    #[must_use]
    pub fn with_tick_phase(mut self, phase: f64) -> Self {
        self.tick_phase = phase;
        self
    }

    /// Requests a pass (see [`Kicker::kick`]).
    pub fn kick(&self) {
        self.kicker.kick();
    }

    /// Kicks through `kicker` (made before the reconciler, for a task
    /// started earlier: relay mode's stream task) instead of its own.
    #[must_use]
    pub fn with_kicker(mut self, kicker: Kicker) -> Self {
        self.kicker = kicker;
        self
    }

    /// A kick handle for other tasks (notification consumers).
    #[must_use]
    pub fn kicker(&self) -> Kicker {
        self.kicker.clone()
    }

    /// The userspace bindings and ghosts, shared with the ghost sweeper.
    #[must_use]
    pub fn bindings(&self) -> SharedTable {
        self.table.clone()
    }

    /// The last committed plan, updated at each commit.
    #[must_use]
    pub fn committed(&self) -> watch::Receiver<Arc<Committed>> {
        self.committed.subscribe()
    }

    /// Serves ticks and kicks until `cancel`, after boot reaches
    /// `state_restored` (no pass at start: cold start applied the plan).
    /// Returns the boot failure when boot fails first.
    pub async fn run(mut self, cancel: CancellationToken) -> Result<(), BootFailed> {
        tokio::select! {
            () = cancel.cancelled() => return Ok(()),
            reached = self.boot.reached(Phase::StateRestored) => reached?,
        }
        let origin = tokio::time::Instant::now();
        let mut next_tick = self.next_tick(origin);
        loop {
            let kick_due = self
                .kicker
                .pending()
                .map(|p| p.due(self.tunables.get().kick_debounce));
            let trigger = tokio::select! {
                biased;
                () = cancel.cancelled() => return Ok(()),
                () = tokio::time::sleep_until(next_tick) => Trigger::Tick,
                () = sleep_until_some(kick_due) => Trigger::Kick,
                // A deferred kick's time came: it waits like any kick.
                () = sleep_until_some(self.kicker.deferred()) => {
                    self.kicker.promote_deferred();
                    continue;
                }
                // A new kick moves the quiet window: recompute.
                () = self.kicker.kicked() => continue,
            };
            // Whatever started it, the pass covers every waiting kick.
            self.kicker.take();
            if self.pass_until(trigger, &cancel).await.is_none() {
                return Ok(());
            }
            next_tick = self.next_tick(origin);
        }
    }

    /// The tick after a pass ending now, on this agent's grid from
    /// `origin`; the interval is read at each scheduling.
    fn next_tick(&self, origin: tokio::time::Instant) -> tokio::time::Instant {
        schedule::next_tick(
            origin,
            self.tick_phase,
            self.tunables.get().reconcile_interval,
            tokio::time::Instant::now(),
        )
    }

    /// Runs one pass now (boot's first sync after a degraded start, tests,
    /// benchmarks), outside the schedule. `&mut self`: no other pass can
    /// run meanwhile.
    pub async fn pass(&mut self, trigger: Trigger) -> PassResult {
        self.pass_until(trigger, &CancellationToken::new())
            .await
            .expect("a token nobody holds is never cancelled")
    }

    /// The metrics this reconciler updates.
    #[must_use]
    pub fn metrics(&self) -> &ReconcileMetrics {
        &self.metrics
    }
}

async fn sleep_until_some(due: Option<tokio::time::Instant>) {
    match due {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// `error: cause: cause`, for one log line.
pub(crate) fn chain(e: &(dyn StdError + 'static)) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cur = c.source();
    }
    out
}
