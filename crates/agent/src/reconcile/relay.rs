//! Relay mode's metadata source (DESIGN §17, docs/fleet.md "An agent in
//! relay mode"): the desired state is the state the daemon's stream task
//! assembles from a relay's state stream, planned here like a sync. No
//! OpenStack request is ever made.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use lachesis_fleet::{Assembler, Body};
use lachesis_planner::{Plan, PlanOptions, Resource, SnapshotParser, SourceStatus, Sources};
use tokio::sync::watch;

use super::plan_metrics::{PlanMetrics, PlanStep};
use super::source::{plan_off_workers, MetadataSource, SyncError, Synced};

/// The assembler the stream task feeds and the source plans from, and
/// whether it is ready (a complete snapshot read).
#[derive(Debug, Clone)]
pub struct SharedAssembler {
    assembler: Arc<Mutex<Assembler>>,
    ready: watch::Sender<bool>,
}

impl Default for SharedAssembler {
    fn default() -> Self {
        SharedAssembler {
            assembler: Arc::default(),
            ready: watch::Sender::new(false),
        }
    }
}

impl SharedAssembler {
    /// An assembler that has read nothing.
    #[must_use]
    pub fn new() -> Self {
        SharedAssembler::default()
    }

    fn lock(&self) -> MutexGuard<'_, Assembler> {
        self.assembler
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on the assembler (feeding it, reading it), then publishes
    /// whether it is ready. Never held across an await.
    pub fn with<R>(&self, f: impl FnOnce(&mut Assembler) -> R) -> R {
        let mut assembler = self.lock();
        let out = f(&mut assembler);
        let ready = assembler.ready();
        drop(assembler);
        self.ready
            .send_if_modified(|r| std::mem::replace(r, ready) != ready);
        out
    }

    /// Starts over with `assembler` (reading the stream again from its
    /// first record). Only before ready: once ready, nothing replaces the
    /// state the agent plans from. Whether it reset.
    #[must_use = "a reset reads the stream again from its first record"]
    pub fn reset_unless_ready(&self) -> bool {
        self.with(|a| {
            let reset = !a.ready();
            if reset {
                *a = Assembler::new();
            }
            reset
        })
    }

    /// Whether a complete snapshot has been read.
    #[must_use]
    pub fn is_ready(&self) -> bool {
        *self.ready.borrow()
    }

    /// Waits until a complete snapshot has been read.
    pub async fn ready(&self) {
        let mut rx = self.ready.subscribe();
        // The sender lives in `self`: the wait cannot fail.
        let _ready = rx.wait_for(|r| *r).await;
    }
}

/// Relay mode's [`MetadataSource`]: plans the assembled state.
#[derive(Debug, Clone, Default)]
pub struct RelaySource {
    shared: SharedAssembler,
    steps: PlanMetrics,
}

impl RelaySource {
    /// Plans what `shared` holds.
    #[must_use]
    pub fn new(shared: SharedAssembler) -> Self {
        RelaySource {
            shared,
            steps: PlanMetrics::default(),
        }
    }

    /// Observes each sync's `fetch` (copying the assembled state's compact
    /// bodies) and `plan` (parsing them and planning) steps in `metrics`.
    #[must_use]
    pub fn with_step_metrics(mut self, metrics: PlanMetrics) -> Self {
        self.steps = metrics;
        self
    }

    /// The assembler this source plans from.
    #[must_use]
    pub fn shared(&self) -> &SharedAssembler {
        &self.shared
    }
}

/// What a relay publishes: every list it holds. A relay publishes no
/// failed list (its own failures keep its last state), so each is `ok`.
const RELAYED: Sources = Sources {
    servers: SourceStatus::Ok,
    loadbalancers: SourceStatus::Ok,
    amphorae: SourceStatus::Ok,
};

impl MetadataSource for RelaySource {
    async fn sync(
        &self,
        previous: Option<Arc<Plan>>,
        options: PlanOptions,
    ) -> Result<Synced, SyncError> {
        let started = Instant::now();
        // The state's bodies are copied as the compact text they are held
        // as (a fraction of their parsed size) under the lock, then parsed
        // one at a time into the planner's parser, off the lock: never the
        // whole state as JSON values at once.
        let bodies: Vec<(Resource, Body)> = self.shared.with(|a| {
            if !a.ready() {
                let c = a.counts();
                return Err(SyncError::NotReady(format!(
                    "{} snapshots incomplete, {} records ignored",
                    c.incomplete, c.ignored
                )));
            }
            Ok(a.state()
                .iter()
                .filter_map(|(key, held)| held.body.clone().map(|b| (key.kind, b)))
                .collect())
        })?;
        let fetch = started.elapsed();
        let (synced, plan) = plan_off_workers(previous, options, move || {
            let mut parser = SnapshotParser::new();
            for (kind, body) in bodies {
                parser.item(kind, &body.value());
            }
            parser.finish(RELAYED)
        })
        .await?;
        self.steps.observe(PlanStep::Fetch, fetch);
        self.steps.observe(PlanStep::Plan, plan);
        tracing::debug!(?fetch, ?plan, "relay state planned");
        Ok(synced)
    }
}
