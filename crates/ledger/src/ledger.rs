//! The shared ledger handle: one lock around the book, so a drain, a settle,
//! a prune or a scrape each see and leave a whole state.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use lachesis_abi::{FlowCounters, FlowKey};
use rustc_hash::FxHashSet;

use crate::attribution::{Attribution, AttributionSource};
use crate::book::{Book, DrainReport};
use crate::export::aggregate::{aggregate, Tiers};
use crate::health::Health;
use crate::interner::{InternerConflict, InternerFull, TenantInterner};
use crate::settle::{PruneError, PruneReport, SettleMode, SettleReport};
use crate::state::metrics::FlushMetrics;
use crate::unresolved::UnresolvedLimits;

/// One tier's prune in the book (server or tenant lifecycle, §7).
type TierPrune = fn(
    &mut Book,
    &dyn Attribution,
    &FxHashSet<&str>,
    &mut Health,
) -> Result<PruneReport, PruneError>;

pub(crate) struct Inner {
    pub book: Book,
    pub health: Health,
    pub limits: UnresolvedLimits,
    /// The billing tiers as of the last successful flush (or the restore):
    /// what the billing families render, so an export never shows bytes a
    /// host reboot could take back (§11).
    pub durable: Arc<Tiers>,
    /// Kernel entries to delete, in eviction order. Each successful flush
    /// releases the prefix its copy covered: deleting an entry before the
    /// eviction that justifies it is durable loses its bytes on a crash.
    pub deletes: Vec<FlowKey>,
    /// Settles and prunes applied, and how many of them the last successful
    /// flush covered. While they differ, drains are refused (see
    /// [`DrainError::SettleNotDurable`]).
    pub settles: u64,
    pub durable_settles: u64,
    /// Drains applied, and how many of them the last successful flush
    /// covered. While they differ, settles are refused (see
    /// [`SettleError::DrainsNotDurable`]).
    pub drains: u64,
    pub durable_drains: u64,
}

/// What a flush copies under the lock.
pub(crate) struct FlushCopy {
    pub book: Book,
    pub attr: Arc<dyn Attribution + Send + Sync>,
    pub marks: FlushMarks,
}

/// How far the copy reached in each pending list or counter.
#[derive(Clone, Copy)]
pub(crate) struct FlushMarks {
    pub deletes: usize,
    pub settles: u64,
    pub drains: u64,
}

/// A settle the ledger will not apply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettleError {
    /// Drains since the last flush are not in the state file. Settling on
    /// top of them would let a crash before the next flush restore rows
    /// whose baseline predates the settle point: the bytes in between would
    /// then be billed under the new attribution.
    #[error(
        "settle refused: {unflushed} drain(s) not yet in the state file; \
         expected a successful state::flush right before the settle"
    )]
    DrainsNotDurable {
        /// Drains applied since the last successful flush.
        unflushed: u64,
    },
}

/// A drain the ledger will not apply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DrainError {
    /// A settle or prune is not in the state file yet. Applying a drain on
    /// top of it would let a crash restore the pre-settle rows with a
    /// baseline the kernel has moved past, and bill those bytes under the
    /// new attribution or lower a continuing series.
    #[error(
        "drain refused: {unflushed} settle/prune operation(s) not yet in the state file; \
         expected a successful state::flush after the last settle"
    )]
    SettleNotDurable {
        /// Settles and prunes applied since the last successful flush.
        unflushed: u64,
    },
}

/// Sizes for the health gauges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LedgerSizes {
    /// Ledger rows.
    pub rows: usize,
    /// Unresolved buffer depth.
    pub unresolved: usize,
    /// Absorber buckets per tier (see [`crate::export::families::ABSORBER_TIERS`]).
    pub absorber_buckets: [usize; 6],
}

/// The billing ledger (DESIGN §9). Cheap to share behind an `Arc`.
///
/// It owns the [`AttributionSource`] and loads the attribution inside its own
/// lock for every drain, settle, prune and scrape: a caller-held snapshot may
/// predate a settle-and-swap and would re-create rows the settle just ended.
pub struct Ledger {
    inner: Mutex<Inner>,
    pub(crate) source: Arc<dyn AttributionSource>,
    pub(crate) flush_metrics: FlushMetrics,
    /// Held for a whole flush, so flushes never interleave (§11).
    pub(crate) flush_serial: Mutex<()>,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.sizes();
        f.debug_struct("Ledger")
            .field("rows", &s.rows)
            .field("unresolved", &s.unresolved)
            .finish_non_exhaustive()
    }
}

impl Ledger {
    /// An empty ledger attributing rows through `source`.
    #[must_use]
    pub fn new(limits: UnresolvedLimits, source: Arc<dyn AttributionSource>) -> Ledger {
        Ledger {
            source,
            inner: Mutex::new(Inner {
                book: Book::default(),
                health: Health::default(),
                limits,
                durable: Arc::default(),
                deletes: Vec::new(),
                settles: 0,
                durable_settles: 0,
                drains: 0,
                durable_drains: 0,
            }),
            flush_metrics: FlushMetrics::default(),
            flush_serial: Mutex::new(()),
        }
    }

    // A panic while holding the lock leaves a state that every mutation keeps
    // whole (no partial fold survives an early return), so the data is still
    // the best truth available: keep serving it rather than panicking on.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Changes the unresolved buffer's capacity and TTL (hot reload, §13).
    pub fn set_limits(&self, limits: UnresolvedLimits) {
        self.lock().limits = limits;
    }

    /// Applies one full-map drain (§4.3, §4.6): resolves waiting rows whose
    /// MAC is now bound, adds each reading's new bytes, and evicts unresolved
    /// rows past their TTL or over capacity. The kernel entries of evicted
    /// rows are handed out by the next successful flush
    /// ([`crate::state::FlushReport::delete`]), not here.
    ///
    /// Refused while a settle or prune is not yet flushed: the agent's order
    /// is settle → flush → drain (docs/ledger.md).
    pub fn apply_drain(
        &self,
        readings: &[(FlowKey, FlowCounters)],
        now_ns: u64,
    ) -> Result<DrainReport, DrainError> {
        let mut g = self.lock();
        let inner = &mut *g;
        if inner.settles != inner.durable_settles {
            return Err(DrainError::SettleNotDurable {
                unflushed: inner.settles - inner.durable_settles,
            });
        }
        let attr = self.source.load();
        let (report, evicted) = inner.book.apply_drain(
            attr.as_ref(),
            readings,
            now_ns,
            inner.limits,
            &mut inner.health,
        );
        inner.deletes.extend(evicted);
        inner.drains += 1;
        Ok(report)
    }

    /// Moves waiting rows whose MAC became bound (e.g. right after a reconcile).
    pub fn resolve_pending(&self) -> usize {
        let mut g = self.lock();
        let inner = &mut *g;
        let attr = self.source.load();
        inner.book.resolve_pending(attr.as_ref(), &mut inner.health)
    }

    /// Evicts unresolved rows past their TTL or over capacity without a
    /// drain; returns how many. Their kernel entries are released by the
    /// next successful flush.
    pub fn evict_unresolved(&self, now_ns: u64) -> usize {
        let mut g = self.lock();
        let inner = &mut *g;
        let evicted = inner
            .book
            .evict_unresolved(inner.limits, now_ns, &mut inner.health);
        let n = evicted.len();
        inner.deletes.extend(evicted);
        n
    }

    /// Settles rows under the attribution the source serves now (the one in
    /// force before the change), then runs `swap` — the caller's switch of
    /// the source to the new attribution — before releasing the lock, so a
    /// scrape or drain sees either the old attribution with unsettled rows or
    /// the new one with settled rows, never a mix.
    ///
    /// Both sides of a settle must be durable: it is refused (and `swap` not
    /// run) while a drain is not yet flushed, and drains are refused after
    /// it until the next flush. The agent's order is flush → settle(s) →
    /// flush → drain (docs/ledger.md).
    pub fn settle(
        &self,
        mode: SettleMode,
        swap: impl FnOnce(),
    ) -> Result<SettleReport, SettleError> {
        let mut g = self.lock();
        let inner = &mut *g;
        if inner.drains != inner.durable_drains {
            return Err(SettleError::DrainsNotDurable {
                unflushed: inner.drains - inner.durable_drains,
            });
        }
        let old = self.source.load();
        let report = inner
            .book
            .settle(old.as_ref(), mode, &mut inner.health, &mut inner.deletes);
        // Even a settle that moved nothing swapped the attribution: the
        // state file must carry it before bytes are drained under it.
        inner.settles += 1;
        swap();
        Ok(report)
    }

    /// Ends the server-settled buckets of servers absent from a successful,
    /// non-empty Nova list (§7), folding them into tenant-settled.
    pub fn prune_servers<'s>(
        &self,
        alive: impl IntoIterator<Item = &'s str>,
    ) -> Result<PruneReport, PruneError> {
        self.prune(alive, Book::prune_servers)
    }

    /// Ends the tenant-settled buckets of projects absent from the Keystone
    /// list (§7), folding them into total-settled.
    pub fn prune_tenants<'s>(
        &self,
        alive: impl IntoIterator<Item = &'s str>,
    ) -> Result<PruneReport, PruneError> {
        self.prune(alive, Book::prune_tenants)
    }

    /// Runs one tier's prune under the lock with the current attribution; a
    /// prune that folded anything must be flushed before the next drain,
    /// like a settle.
    fn prune<'s>(
        &self,
        alive: impl IntoIterator<Item = &'s str>,
        tier: TierPrune,
    ) -> Result<PruneReport, PruneError> {
        let alive: FxHashSet<&str> = alive.into_iter().collect();
        let mut g = self.lock();
        let inner = &mut *g;
        let attr = self.source.load();
        let report = tier(&mut inner.book, attr.as_ref(), &alive, &mut inner.health)?;
        if report.folded > 0 {
            inner.settles += 1;
        }
        Ok(report)
    }

    /// The kernel tenant id of a project, allocating one on first use.
    pub fn intern_tenant(&self, project: &str) -> Result<u32, InternerFull> {
        self.lock().book.interner.intern(project)
    }

    /// The kernel tenant id of a project, if it has one.
    #[must_use]
    pub fn tenant_id(&self, project: &str) -> Option<u32> {
        self.lock().book.interner.get(project)
    }

    /// A copy of the whole book (what a flush serializes).
    #[must_use]
    pub fn snapshot(&self) -> Book {
        self.lock().book.clone()
    }

    /// Replaces the book with a restored one (boot step 4, before the first
    /// drain). Waiting rows get a fresh TTL: the clock they were stamped
    /// with may not have survived the restart. The restored state is durable
    /// by definition: it becomes the exported view, labelled under the
    /// attribution the source serves now (the restored plan's, at boot).
    ///
    /// Tenant ids interned before the restore (boot step 2 writes trie rows
    /// before step 4) are merged into the restored interner; an id or a
    /// project that would change meaning fails the restore and changes
    /// nothing.
    pub fn restore(&self, mut book: Book, now_ns: u64) -> Result<(), InternerConflict> {
        for p in book.unresolved.values_mut() {
            p.first_seen_ns = now_ns;
            p.last_active_ns = now_ns;
        }
        let tiers = aggregate(&book, self.source.load().as_ref());
        let mut g = self.lock();
        book.interner.merge_live(&g.book.interner)?;
        g.book = book;
        g.durable = Arc::new(tiers);
        g.deletes.clear();
        g.durable_settles = g.settles;
        g.durable_drains = g.drains;
        Ok(())
    }

    /// Boot step 1: adopts the file's tenant ids before anything is
    /// interned, so the trie rows written in step 2 already use them (the
    /// rest of the state is restored in step 4).
    pub fn restore_interner(&self, interner: &TenantInterner) -> Result<(), InternerConflict> {
        let mut g = self.lock();
        let mut merged = interner.clone();
        merged.merge_live(&g.book.interner)?;
        g.book.interner = merged;
        Ok(())
    }

    /// The flush's lock-held phase: plain copies and an `Arc` clone.
    pub(crate) fn copy_for_flush(&self) -> FlushCopy {
        let g = self.lock();
        FlushCopy {
            book: g.book.clone(),
            attr: self.source.load(),
            marks: FlushMarks {
                deletes: g.deletes.len(),
                settles: g.settles,
                drains: g.drains,
            },
        }
    }

    /// After a successful flush of a copy: its aggregates become the exported
    /// view, the settles it covered stop blocking drains, and the kernel
    /// deletes it covered are released.
    pub(crate) fn publish_durable(&self, tiers: Tiers, copy: &FlushMarks) -> Vec<FlowKey> {
        let mut g = self.lock();
        g.durable = Arc::new(tiers);
        g.durable_settles = g.durable_settles.max(copy.settles);
        g.durable_drains = g.durable_drains.max(copy.drains);
        let copy_deletes = copy.deletes;
        // Flushes are serialised and deletes only ever appended, so the
        // copy's deletes are still the prefix (a restore in between empties
        // the list: nothing of the old one may be released then).
        let n = copy_deletes.min(g.deletes.len());
        g.deletes.drain(..n).collect()
    }

    /// Current health counters.
    #[must_use]
    pub fn health(&self) -> Health {
        self.lock().health
    }

    pub(crate) fn with_health(&self, f: impl FnOnce(&mut Health)) {
        f(&mut self.lock().health);
    }

    /// Row, pending and bucket counts.
    #[must_use]
    pub fn sizes(&self) -> LedgerSizes {
        let g = self.lock();
        LedgerSizes {
            rows: g.book.rows.len(),
            unresolved: g.book.unresolved.len(),
            absorber_buckets: g.book.absorbers.bucket_counts(),
        }
    }
}
