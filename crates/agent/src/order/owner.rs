//! [`LedgerOwner`]: the one owner of ledger order (DESIGN §7, §9, §12;
//! docs/agent-order.md).

use std::collections::{BTreeMap, BTreeSet, BinaryHeap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lachesis_abi::{EntryKey, FlowCounters, Mac};
use lachesis_datapath::DrainBuffer;
use lachesis_ledger::state::{Loaded, StateError, StateFile, StatePaths};
use lachesis_ledger::{
    DrainError, InternerConflict, InternerFull, Ledger, PruneTier, Selector, SettleError,
    SettleMode, UnresolvedLimits,
};
use tokio::time::Instant;

use super::attribution::{AgentSource, PlannedAttribution};
use super::kernel::{FlowKernel, KernelError, RetiredMap, Step};
use super::metrics::{DrainFailure, Gc, OrderMetrics};
use crate::reconcile::{
    committed, AttributionSnapshot, BatchError, BindingTable, Ghost, LedgerOrder, PruneFailed,
    Settle, SettleBatch, SharedTable,
};

/// An owner operation that did not complete.
#[derive(Debug, thiserror::Error)]
pub enum OrderError {
    /// A kernel read or delete failed.
    #[error("kernel call failed")]
    Kernel(#[source] KernelError),
    /// The ledger refused readings.
    #[error(transparent)]
    Drain(#[from] DrainError),
    /// The ledger refused a settle.
    #[error(transparent)]
    Settle(#[from] SettleError),
    /// The state flush failed (drains wait for the next one to succeed).
    #[error(transparent)]
    Flush(#[from] StateError),
    /// The state file's interner conflicts with ids handed out before it.
    #[error(transparent)]
    Interner(#[from] InternerConflict),
    /// The plan could not be encoded for the state file.
    #[error("encoding the committed plan")]
    Plan(#[source] serde_json::Error),
    /// Boot's settle batch to the fresh plan did not complete.
    #[error(transparent)]
    Batch(#[from] BatchError),
}

/// Pressure relief's live tunables (DESIGN §9, §13).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Relief {
    /// Fill above which a pass runs (below 1.0).
    pub high: f64,
    /// Fill a pass evicts down to (strictly below).
    pub low: f64,
    /// Most entries one pass deletes.
    pub max_evictions: u32,
}

impl Relief {
    /// Relief from the live tunables.
    #[must_use]
    pub fn from_tunables(t: &crate::config::Tunables) -> Self {
        Relief {
            high: t.pressure_high_watermark,
            low: t.pressure_low_watermark,
            max_evictions: t.pressure_max_evictions,
        }
    }
}

/// What a scrape did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScrapeReport {
    /// Live entries read.
    pub entries: usize,
    /// Entries pressure relief deleted (0: no relief pass).
    pub relieved: usize,
}

/// The least recently seen sub-entries to delete (DESIGN §4.7: idle CPUs
/// of live flows fall out first) so that fill drops strictly
/// below `relief.low`, at most `relief.max_evictions` of them, oldest
/// first; nothing while fill is at or below `relief.high`. A bounded
/// max-heap keeps the `k` oldest in `O(n log k)`.
#[must_use]
pub fn least_recent(
    entries: &[(EntryKey, FlowCounters)],
    capacity: u32,
    relief: Relief,
) -> Vec<EntryKey> {
    let cap = f64::from(capacity.max(1));
    #[expect(clippy::cast_precision_loss, reason = "map sizes are far below 2^52")]
    let fill = entries.len() as f64 / cap;
    if fill <= relief.high {
        return Vec::new();
    }
    // The largest count whose fill is strictly below `low`.
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a fill ratio of a u32 capacity: non-negative and below usize::MAX"
    )]
    let keep = ((relief.low * cap).ceil() as usize).saturating_sub(1);
    let want = entries
        .len()
        .saturating_sub(keep)
        .min(relief.max_evictions as usize);
    let mut heap: BinaryHeap<(u64, EntryKey)> = BinaryHeap::with_capacity(want + 1);
    for (k, v) in entries {
        heap.push((v.last_seen_ns, *k));
        if heap.len() > want {
            heap.pop();
        }
    }
    heap.into_sorted_vec().into_iter().map(|(_, k)| k).collect()
}

struct Core<K> {
    kernel: K,
    buf: DrainBuffer,
}

struct Shared<K> {
    /// Held across every whole operation: the serialisation of §7.
    core: Mutex<Core<K>>,
    ledger: Arc<Ledger>,
    /// The state file (its flush mutex, flush metrics and load fallbacks).
    file: Arc<StateFile>,
    source: Arc<AgentSource>,
    metrics: OrderMetrics,
}

/// The one owner of ledger order: every drain, flush, settle batch, ghost
/// sweep, prune, pressure relief and kernel flow delete of the process
/// runs through it, one at a time (a `std` mutex held across each whole
/// operation). Each operation is a blocking method (`scrape`, `flush`,
/// `sweep`, `shutdown`) and the same on the blocking pool for async
/// callers (`scrape_async`, …).
/// Cheap to clone: clones share the same owner.
pub struct LedgerOwner<K> {
    shared: Arc<Shared<K>>,
}

impl<K> Clone for LedgerOwner<K> {
    fn clone(&self) -> Self {
        LedgerOwner {
            shared: self.shared.clone(),
        }
    }
}

impl<K> std::fmt::Debug for LedgerOwner<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LedgerOwner")
            .field("ledger", &self.shared.ledger)
            .finish_non_exhaustive()
    }
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs_f64()
}

impl<K: FlowKernel> LedgerOwner<K> {
    /// An owner over a fresh ledger whose source serves `initial` (at boot
    /// with a state file: the file's plan, §12).
    #[must_use]
    pub fn new(
        kernel: K,
        limits: UnresolvedLimits,
        initial: PlannedAttribution,
        paths: StatePaths,
        metrics: OrderMetrics,
    ) -> Self {
        let source = Arc::new(AgentSource::new(initial));
        let ledger = Arc::new(Ledger::new(limits, source.clone()));
        LedgerOwner {
            shared: Arc::new(Shared {
                core: Mutex::new(Core {
                    kernel,
                    buf: DrainBuffer::new(),
                }),
                ledger,
                file: Arc::new(StateFile::new(paths)),
                source,
                metrics,
            }),
        }
    }

    /// The state file (for the exporter's health families and boot's load).
    #[must_use]
    pub fn state_file(&self) -> &Arc<StateFile> {
        &self.shared.file
    }

    /// The ledger (for the exporter and health families; never for writes).
    #[must_use]
    pub fn ledger(&self) -> &Arc<Ledger> {
        &self.shared.ledger
    }

    /// The attribution in force.
    #[must_use]
    pub fn attribution(&self) -> Arc<PlannedAttribution> {
        self.shared.source.current()
    }

    /// The owner's metric families.
    #[must_use]
    pub fn metrics(&self) -> &OrderMetrics {
        &self.shared.metrics
    }

    fn lock(&self) -> Guard<'_, K> {
        Guard {
            core: self
                .shared
                .core
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
            shared: &self.shared,
        }
    }

    /// Runs `op` with the owner held, on the blocking pool (it does file
    /// and map I/O).
    pub(crate) async fn blocking<T: Send + 'static>(
        &self,
        op: impl FnOnce(&LedgerOwner<K>) -> T + Send + 'static,
    ) -> T {
        let owner = self.clone();
        match tokio::task::spawn_blocking(move || op(&owner)).await {
            Ok(v) => v,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }

    /// Boot §12 step 2/4 with a state file (or the empty load of a cold
    /// start): restore the ledger under the file's plan (the source must
    /// serve it: [`LedgerOwner::new`]'s `initial`), drain the `retired`
    /// maps first, flush, remove them, then the settle batch to the fresh
    /// plan (drain of the live map → flush → settles + swap → flush).
    ///
    /// # Errors
    /// Any step's failure; boot fails with it.
    pub fn boot(
        &self,
        loaded: Loaded,
        mut retired: Vec<impl RetiredMap>,
        fresh: SettleBatch,
    ) -> Result<(), OrderError> {
        let mut g = self.lock();
        let now = g.core.kernel.now_ns();
        g.shared.file.restore(&g.shared.ledger, loaded, now)?;
        g.shared.ledger.expect_retired(retired.len());
        if !retired.is_empty() {
            for map in &mut retired {
                let Core { kernel, buf, .. } = &mut *g.core;
                map.drain(buf).map_err(OrderError::Kernel)?;
                let now = kernel.now_ns();
                g.shared.ledger.apply_retired(&buf.entries, now)?;
                kernel.observe(Step::AppliedRetired);
            }
            g.flush_and_release(Gc::Unresolved)?;
            for map in retired {
                if let Err(e) = map.remove() {
                    tracing::warn!(error = %e, "removing a drained retired flows map");
                }
            }
        }
        g.settle_batch(fresh).map_err(OrderError::from)
    }

    /// One scrape: drain → apply → kernel stats and fill → pressure relief.
    ///
    /// # Errors
    /// The kernel read failed, or the ledger refused the readings and the
    /// flush it waits for failed too.
    pub fn scrape(&self, relief: Relief) -> Result<ScrapeReport, OrderError> {
        self.lock().scrape(relief)
    }

    /// A state flush, then the deletes it released.
    ///
    /// # Errors
    /// The flush failed: drains wait until one succeeds.
    pub fn flush(&self) -> Result<(), OrderError> {
        self.lock().flush_and_release(Gc::Unresolved)
    }

    /// [`LedgerOrder::settle_batch`], blocking. The one exception to the
    /// owner's naming (a blocking `op` and its `op_async`): the async form
    /// is the reconciler's seam, whose name a blocking inherent method
    /// would shadow at every call on the owner.
    ///
    /// # Errors
    /// See [`BatchError`].
    pub fn settle_batch_now(&self, batch: SettleBatch) -> Result<(), BatchError> {
        self.lock().settle_batch(batch)
    }

    /// The §9 ghost sweep over the ghosts of `table` past `grace` at `now`;
    /// returns how many were evicted. The caller holds the table for the
    /// whole sweep.
    ///
    /// # Errors
    /// A step failed; the ghosts not yet evicted stay and the next sweep
    /// retries them.
    pub fn sweep(
        &self,
        table: &mut BindingTable,
        now: Instant,
        grace: Duration,
    ) -> Result<usize, OrderError> {
        self.lock().sweep(table, now, grace)
    }

    /// Ends the retention of swept port series older than `retention`
    /// (docs/ledger.md, "Returning port series"); returns how many ended.
    /// Measured on the wall clock, so a restart does not restart it.
    #[must_use = "how many series ended, for the log"]
    pub fn expire_port_series(&self, retention: Duration) -> usize {
        let _g = self.lock();
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_secs();
        self.shared
            .ledger
            .expire_retained_ports(now, retention.as_secs())
    }

    /// Shutdown: final drain, final flush (and the deletes it released).
    ///
    /// # Errors
    /// The drain or the flush failed.
    pub fn shutdown(&self) -> Result<(), OrderError> {
        let mut g = self.lock();
        let drained = g.drain_apply().map(drop);
        g.flush_and_release(Gc::Unresolved)?;
        drained
    }

    /// [`LedgerOwner::scrape`] on the blocking pool.
    ///
    /// # Errors
    /// As [`LedgerOwner::scrape`].
    pub async fn scrape_async(&self, relief: Relief) -> Result<ScrapeReport, OrderError> {
        self.blocking(move |o| o.scrape(relief)).await
    }

    /// [`LedgerOwner::flush`] on the blocking pool.
    ///
    /// # Errors
    /// As [`LedgerOwner::flush`].
    pub async fn flush_async(&self) -> Result<(), OrderError> {
        self.blocking(LedgerOwner::flush).await
    }

    /// [`LedgerOwner::sweep`] on the blocking pool, holding `table` for
    /// the whole sweep.
    ///
    /// # Errors
    /// As [`LedgerOwner::sweep`].
    pub async fn sweep_async(
        &self,
        table: SharedTable,
        grace: Duration,
    ) -> Result<usize, OrderError> {
        let mut table = table.lock_owned().await;
        let now = Instant::now();
        self.blocking(move |o| o.sweep(&mut table, now, grace))
            .await
    }

    /// [`LedgerOwner::shutdown`] on the blocking pool.
    ///
    /// # Errors
    /// As [`LedgerOwner::shutdown`].
    pub async fn shutdown_async(&self) -> Result<(), OrderError> {
        self.blocking(LedgerOwner::shutdown).await
    }
}

/// The owner, held.
struct Guard<'a, K> {
    core: MutexGuard<'a, Core<K>>,
    shared: &'a Shared<K>,
}

impl<K: FlowKernel> Guard<'_, K> {
    /// Reads the live map into the buffer (and the kernel stats); returns
    /// when it was read.
    fn read_map(&mut self) -> Result<u64, OrderError> {
        let Core { kernel, buf, .. } = &mut *self.core;
        if let Err(e) = kernel.drain(buf) {
            self.shared.metrics.drain_failed(DrainFailure::Kernel);
            return Err(OrderError::Kernel(e));
        }
        match kernel.stats() {
            Ok(s) => self.shared.metrics.kernel_stats(s),
            Err(e) => tracing::warn!(error = %e, "reading the kernel stats"),
        }
        Ok(kernel.now_ns())
    }

    /// Drains the live map and applies it. A refusal for an unflushed
    /// settle is answered with the flush it waits for, then the map is
    /// read again and applied: the refused reading is older than the final
    /// readings that flush may apply, so applied now it would be outdated
    /// and what the kernel counted since would stay unread — then a settle
    /// would move those bytes to the new attribution (docs/ledger.md).
    fn drain_apply(&mut self) -> Result<usize, OrderError> {
        let started = std::time::Instant::now();
        let now = self.read_map()?;
        let shared: &Shared<K> = self.shared;
        let ledger = &shared.ledger;
        let applied = match ledger.apply_drain(&self.core.buf.entries, now) {
            Err(DrainError::SettleNotDurable { .. }) => self
                .flush_and_release(Gc::Unresolved)
                .inspect_err(|_| shared.metrics.drain_failed(DrainFailure::Refused))
                .and_then(|()| {
                    let now = self.read_map()?;
                    ledger
                        .apply_drain(&self.core.buf.entries, now)
                        .map_err(Into::into)
                }),
            other => other.map_err(Into::into),
        };
        if let Err(e) = applied {
            if matches!(e, OrderError::Drain(_)) {
                self.shared.metrics.drain_failed(DrainFailure::Refused);
            }
            return Err(e);
        }
        let entries = self.core.buf.entries.len();
        self.core.kernel.observe(Step::Applied { entries });
        let m = &self.shared.metrics;
        m.drained(started.elapsed().as_secs_f64(), unix_now());
        m.flows_fill(entries, self.core.kernel.flows_capacity());
        let (keys, mean) = self.core.buf.fan_out();
        m.flows_fanout(keys, mean);
        Ok(entries)
    }

    fn scrape(&mut self, relief: Relief) -> Result<ScrapeReport, OrderError> {
        let entries = self.drain_apply()?;
        let capacity = self.core.kernel.flows_capacity();
        let victims = least_recent(&self.core.buf.entries, capacity, relief);
        if victims.is_empty() {
            return Ok(ScrapeReport {
                entries,
                relieved: 0,
            });
        }
        self.shared.metrics.relief_run();
        self.shared.ledger.relieve(&victims);
        let relieved = self
            .flush_and_release(Gc::Pressure)
            .map(|()| victims.len())?;
        // The fill gauge shows the map as relief left it.
        self.shared
            .metrics
            .flows_fill(entries.saturating_sub(relieved), capacity);
        Ok(ScrapeReport { entries, relieved })
    }

    /// One state flush; returns the kernel sub-entries it released.
    fn flush_once(&mut self) -> Result<Vec<EntryKey>, OrderError> {
        let report = self.shared.file.flush(&self.shared.ledger)?;
        self.core.kernel.observe(Step::Flushed {
            released: report.delete.len(),
        });
        Ok(report.delete)
    }

    /// Flush → lookup-and-delete what it released → apply the final
    /// readings → flush, until a flush releases nothing (a final reading
    /// can evict an unresolved row, whose entry the next flush releases).
    fn flush_and_release(&mut self, reason: Gc) -> Result<(), OrderError> {
        let mut released = self.flush_once()?;
        while !released.is_empty() {
            self.delete_flows(&released, reason)?;
            released = self.flush_once()?;
        }
        Ok(())
    }

    /// Lookup-and-delete of `keys`; their final readings applied.
    fn delete_flows(&mut self, keys: &[EntryKey], reason: Gc) -> Result<(), OrderError> {
        let Core { kernel, buf, .. } = &mut *self.core;
        let refused = kernel.lookup_and_delete(keys, buf);
        if refused > 0 {
            tracing::warn!(refused, "kernel refused some flow deletes");
        }
        let now = kernel.now_ns();
        self.shared.ledger.apply_final(&buf.entries, now)?;
        let entries = buf.entries.len();
        kernel.observe(Step::AppliedFinal { entries });
        self.shared.metrics.gc(reason, keys.len() - refused);
        Ok(())
    }

    fn settle_batch(&mut self, batch: SettleBatch) -> Result<(), BatchError> {
        let not_applied = |e: OrderError| BatchError::NotApplied(Box::new(e));
        let ghosts = ghosts_of(&batch.attribution, &batch.ghosted_at);
        let plan = committed::encode(&batch.plan, &ghosts, clocks())
            .map_err(|e| not_applied(OrderError::Plan(e)))?;
        let mut next = Some(PlannedAttribution {
            snapshot: batch.attribution,
            plan,
            tree: batch.plan,
        });
        let source = self.shared.source.clone();
        if batch.settles.is_empty() {
            source.store(next.take().unwrap_or_default());
            self.core.kernel.observe(Step::Swapped);
        } else {
            self.drain_apply().map_err(not_applied)?;
            self.flush_and_release(Gc::Unresolved)
                .map_err(not_applied)?;
            let last = batch.settles.len() - 1;
            for (i, settle) in batch.settles.iter().enumerate() {
                let mode = settle_mode(settle);
                let result = self.shared.ledger.settle(mode, || {
                    if i == last {
                        source.store(next.take().unwrap_or_default());
                    }
                });
                if let Err(e) = result {
                    if i == 0 {
                        return Err(not_applied(e.into()));
                    }
                    // Unreachable after the flush above (the ledger checks
                    // the same conditions for every settle of a batch); keep
                    // the view whole: swap, and owe the flush.
                    source.store(next.take().unwrap_or_default());
                    return Err(BatchError::NotDurable(Box::new(OrderError::from(e))));
                }
                self.core.kernel.observe(Step::Settled(mode.label()));
            }
            self.core.kernel.observe(Step::Swapped);
        }
        self.flush_and_release(Gc::Unresolved)
            .map_err(|e| BatchError::NotDurable(Box::new(e)))
    }

    fn sweep(
        &mut self,
        table: &mut BindingTable,
        now: Instant,
        grace: Duration,
    ) -> Result<usize, OrderError> {
        let mut macs: Vec<Mac> = Vec::new();
        for (mac, _) in table.expired_ghosts(now, grace) {
            match self.core.kernel.delete_binding(mac) {
                Ok(()) => {
                    table.kernel_entry_deleted(mac);
                    macs.push(mac);
                }
                Err(e) => {
                    tracing::warn!(%mac, error = %e, "deleting a ghost's kernel binding; retried next sweep");
                }
            }
        }
        if macs.is_empty() {
            return Ok(0);
        }
        self.drain_apply()?;
        self.flush_and_release(Gc::Unresolved)?;
        let mut snapshot = (*table.attribution()).clone();
        let mut left = table.ghosts().clone();
        for mac in &macs {
            snapshot.ghosts.remove(mac);
            left.remove(mac);
        }
        // The file's plan loses the swept ghosts with the eviction: a
        // restart must not bring them back (nor restart their port
        // series' retention).
        let tree = self.shared.source.current().tree.clone();
        let plan = committed::encode(&tree, &left, clocks()).map_err(OrderError::Plan)?;
        let mut next = Some(PlannedAttribution {
            snapshot: Arc::new(snapshot),
            plan,
            tree,
        });
        let source = self.shared.source.clone();
        let last = macs.len() - 1;
        for (i, mac) in macs.iter().enumerate() {
            let mode = SettleMode::Evict { vm_mac: *mac };
            let swapped = &mut false;
            self.shared.ledger.settle(mode, || {
                if i == last {
                    source.store(next.take().unwrap_or_default());
                    for m in &macs {
                        table.forget_ghost(*m);
                    }
                    *swapped = true;
                }
            })?;
            self.core.kernel.observe(Step::Settled(mode.label()));
            if *swapped {
                self.core.kernel.observe(Step::Swapped);
                self.core.kernel.observe(Step::GhostsForgotten(macs.len()));
            }
        }
        self.flush_and_release(Gc::GhostSweep)?;
        Ok(macs.len())
    }
}

/// The monotonic and the wall clock, read together.
fn clocks() -> (Instant, SystemTime) {
    (Instant::now(), SystemTime::now())
}

/// The ghosts of `attr` with their ghosting times (now when unknown).
fn ghosts_of(attr: &AttributionSnapshot, at: &BTreeMap<Mac, Instant>) -> BTreeMap<Mac, Ghost> {
    let now = Instant::now();
    attr.ghosts
        .iter()
        .map(|(m, b)| {
            let since = at.get(m).copied().unwrap_or(now);
            (
                *m,
                Ghost {
                    binding: b.clone(),
                    since,
                },
            )
        })
        .collect()
}

fn settle_mode(settle: &Settle) -> SettleMode {
    match settle {
        Settle::RebaseMac { mac, .. } => SettleMode::Rebase(Selector::VmMac(*mac)),
        Settle::RebaseRouterPeer { mac, .. } => SettleMode::Rebase(Selector::RouterPeer(*mac)),
    }
}

impl<K: FlowKernel> LedgerOrder for LedgerOwner<K> {
    fn tenant_id(&self, project: &str) -> Result<u32, InternerFull> {
        self.shared.ledger.intern_tenant(project)
    }

    async fn settle_batch(&self, batch: SettleBatch) -> Result<(), BatchError> {
        self.blocking(move |o| o.settle_batch_now(batch)).await
    }

    async fn prune_servers(&self, alive: BTreeSet<String>) -> Result<(), PruneFailed> {
        self.blocking(move |o| o.prune(PruneTier::Server, &alive))
            .await
    }

    async fn prune_tenants(&self, alive: BTreeSet<String>) -> Result<(), PruneFailed> {
        self.blocking(move |o| o.prune(PruneTier::Tenant, &alive))
            .await
    }
}

impl<K: FlowKernel> LedgerOwner<K> {
    /// A prune of `tier`; flushed right away when it folded anything (else
    /// the next drain would wait for that flush).
    fn prune(&self, tier: PruneTier, alive: &BTreeSet<String>) -> Result<(), PruneFailed> {
        let mut g = self.lock();
        let report = g
            .shared
            .ledger
            .prune(tier, alive.iter().map(String::as_str))
            .map_err(|e| PruneFailed {
                tier: tier.label(),
                source: Box::new(e),
            })?;
        if report.folded > 0 {
            if let Err(e) = g.flush_and_release(Gc::Unresolved) {
                tracing::warn!(error = %e, "flush after a prune failed; drains wait for the next one");
            }
        }
        Ok(())
    }
}
