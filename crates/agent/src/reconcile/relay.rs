//! Relay mode's metadata source (DESIGN §17, docs/fleet.md "An agent in
//! relay mode"): the desired state is the state the daemon's stream task
//! assembles from a relay's state stream, planned here like a sync. No
//! OpenStack request is ever made.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use lachesis_fleet::{Assembler, Body, Key, State};
use lachesis_planner::{LiveSnapshot, Plan, PlanOptions, SourceStatus, Sources};
use tokio::sync::watch;

use super::plan_metrics::{PlanMetrics, PlanStep};
use super::source::{off_workers, synced, MetadataSource, SyncError, Synced};

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
///
/// It keeps the state parsed between passes ([`LiveSnapshot`]) and parses
/// only the bodies that changed since the last one: a pass after one event
/// costs the plan and a walk of the keys, not a parse of the whole cloud
/// (docs/fleet.md "Running"; `make bench-relay-pass`).
#[derive(Debug, Clone, Default)]
pub struct RelaySource {
    shared: SharedAssembler,
    parsed: Arc<Mutex<Parsed>>,
    steps: PlanMetrics,
}

/// What the source has parsed of the assembled state.
#[derive(Debug)]
struct Parsed {
    live: LiveSnapshot,
    /// The stamp ([`lachesis_fleet::Held::stamp`]) of each live key's body
    /// in `live`, in key order.
    stamps: BTreeMap<Key, u64>,
}

impl Default for Parsed {
    fn default() -> Self {
        Parsed {
            live: LiveSnapshot::new(RELAYED),
            stamps: BTreeMap::new(),
        }
    }
}

/// A change of the assembled state since the last pass.
enum Change {
    /// A body to parse and file (new, or changed).
    Put(Key, u64, Body),
    /// A key no longer live (deleted, or dropped by a complete snapshot).
    Gone(Key),
}

impl Parsed {
    /// What changed in `state` since the stamps this holds: a walk of both
    /// in key order, copying only the changed bodies.
    fn changes(&self, state: &State) -> Vec<Change> {
        let mut held = state
            .iter()
            .filter_map(|(key, h)| h.body.as_ref().map(|body| (key, h.stamp, body)))
            .peekable();
        let mut seen = self.stamps.iter().peekable();
        let mut out = Vec::new();
        loop {
            let order = match (held.peek(), seen.peek()) {
                (None, None) => break,
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (Some((key, ..)), Some((had, _))) => (*key).cmp(had),
            };
            match order {
                Ordering::Less | Ordering::Equal => {
                    let Some((key, stamp, body)) = held.next() else {
                        break;
                    };
                    let was = if order == Ordering::Equal {
                        seen.next().map(|(_, s)| *s)
                    } else {
                        None
                    };
                    if was != Some(stamp) {
                        out.push(Change::Put(key.clone(), stamp, body.clone()));
                    }
                }
                Ordering::Greater => {
                    if let Some((key, _)) = seen.next() {
                        out.push(Change::Gone(key.clone()));
                    }
                }
            }
        }
        out
    }

    /// Parses and files each change.
    fn apply(&mut self, changes: Vec<Change>) {
        for change in changes {
            match change {
                Change::Put(key, stamp, body) => {
                    // A body the stream task decoded has an id, its key's,
                    // so it is filed; were it refused, the key's old entry
                    // must not stay.
                    if self.live.upsert(key.kind, &body.value()).is_err() {
                        self.live.remove(key.kind, &key.id);
                    }
                    self.stamps.insert(key, stamp);
                }
                Change::Gone(key) => {
                    self.live.remove(key.kind, &key.id);
                    self.stamps.remove(&key);
                }
            }
        }
    }
}

impl RelaySource {
    /// Plans what `shared` holds.
    #[must_use]
    pub fn new(shared: SharedAssembler) -> Self {
        RelaySource {
            shared,
            parsed: Arc::default(),
            steps: PlanMetrics::default(),
        }
    }

    /// Observes each sync's `fetch` (finding and copying the bodies that
    /// changed since the last one) and `plan` (parsing them and planning)
    /// steps in `metrics`.
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
        let (shared, parsed) = (self.shared.clone(), Arc::clone(&self.parsed));
        let (out, took) = off_workers(move || {
            // One pass at a time parses: the lock is held to the plan.
            let mut parsed = parsed.lock().unwrap_or_else(PoisonError::into_inner);
            let started = Instant::now();
            // Under the assembler's lock only the walk and the copies of
            // the changed bodies (compact text); parsing is off it.
            let changes = shared.with(|a| {
                if a.ready() {
                    Ok(parsed.changes(a.state()))
                } else {
                    let c = a.counts();
                    Err(SyncError::NotReady(format!(
                        "{} snapshots incomplete, {} records ignored",
                        c.incomplete, c.ignored
                    )))
                }
            })?;
            let fetch = started.elapsed();
            let count = changes.len();
            parsed.apply(changes);
            let live = &parsed.live;
            let synced = synced(
                live.snapshot(),
                live.skipped(),
                options,
                previous.as_deref(),
            );
            Ok::<_, SyncError>((synced, fetch, count))
        })
        .await?;
        let (synced, fetch, changed) = out?;
        let plan = took.saturating_sub(fetch);
        self.steps.observe(PlanStep::Fetch, fetch);
        self.steps.observe(PlanStep::Plan, plan);
        tracing::debug!(?fetch, ?plan, changed, "relay state planned");
        Ok(synced)
    }
}
