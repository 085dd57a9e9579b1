//! The shared ledger handle: one lock around the book, so a drain, a settle,
//! a prune or a scrape each see and leave a whole state.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use lachesis_abi::{FlowCounters, FlowKey};
use rustc_hash::FxHashSet;

use crate::attribution::AttributionSource;
use crate::book::{Book, DrainReport};
use crate::health::Health;
use crate::interner::InternerFull;
use crate::settle::{PruneError, PruneReport, SettleMode, SettleReport};
use crate::state::metrics::FlushMetrics;
use crate::unresolved::UnresolvedLimits;

pub(crate) struct Inner {
    pub book: Book,
    pub health: Health,
    pub limits: UnresolvedLimits,
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
    /// rows past their TTL or over capacity. The returned
    /// [`DrainReport::delete`] lists kernel entries the caller must delete.
    pub fn apply_drain(&self, readings: &[(FlowKey, FlowCounters)], now_ns: u64) -> DrainReport {
        let mut g = self.lock();
        let inner = &mut *g;
        let attr = self.source.load();
        inner.book.apply_drain(
            attr.as_ref(),
            readings,
            now_ns,
            inner.limits,
            &mut inner.health,
        )
    }

    /// Moves waiting rows whose MAC became bound (e.g. right after a reconcile).
    pub fn resolve_pending(&self) -> usize {
        let mut g = self.lock();
        let inner = &mut *g;
        let attr = self.source.load();
        inner.book.resolve_pending(attr.as_ref(), &mut inner.health)
    }

    /// Evicts unresolved rows past their TTL or over capacity without a
    /// drain; returns the kernel entries to delete.
    pub fn evict_unresolved(&self, now_ns: u64) -> Vec<FlowKey> {
        let mut g = self.lock();
        let inner = &mut *g;
        inner
            .book
            .evict_unresolved(inner.limits, now_ns, &mut inner.health)
    }

    /// Settles rows under the attribution the source serves now (the one in
    /// force before the change), then runs `swap` — the caller's switch of
    /// the source to the new attribution — before releasing the lock, so a
    /// scrape or drain sees either the old attribution with unsettled rows or
    /// the new one with settled rows, never a mix.
    pub fn settle(&self, mode: SettleMode, swap: impl FnOnce()) -> SettleReport {
        let mut g = self.lock();
        let inner = &mut *g;
        let old = self.source.load();
        let report = inner.book.settle(old.as_ref(), mode, &mut inner.health);
        swap();
        report
    }

    /// Ends the server-settled buckets of servers absent from a successful,
    /// non-empty Nova list (§7), folding them into tenant-settled.
    pub fn prune_servers<'s>(
        &self,
        alive: impl IntoIterator<Item = &'s str>,
    ) -> Result<PruneReport, PruneError> {
        let alive: FxHashSet<&str> = alive.into_iter().collect();
        let mut g = self.lock();
        let inner = &mut *g;
        let attr = self.source.load();
        inner
            .book
            .prune_servers(attr.as_ref(), &alive, &mut inner.health)
    }

    /// Ends the tenant-settled buckets of projects absent from the Keystone
    /// list (§7), folding them into total-settled.
    pub fn prune_tenants<'s>(
        &self,
        alive: impl IntoIterator<Item = &'s str>,
    ) -> Result<PruneReport, PruneError> {
        let alive: FxHashSet<&str> = alive.into_iter().collect();
        let mut g = self.lock();
        let inner = &mut *g;
        let attr = self.source.load();
        inner
            .book
            .prune_tenants(attr.as_ref(), &alive, &mut inner.health)
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
    /// with may not have survived the restart.
    pub fn restore(&self, mut book: Book, now_ns: u64) {
        for p in book.unresolved.values_mut() {
            p.first_seen_ns = now_ns;
            p.last_active_ns = now_ns;
        }
        self.lock().book = book;
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
