//! The shared ledger handle: one lock around the book, so a drain, a settle,
//! a prune or a scrape each see and leave a whole state.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use lachesis_abi::EntryKey;
use rustc_hash::FxHashSet;

use crate::attribution::{Attribution, AttributionSource};
use crate::book::{Book, DrainReport, ReadKind, Reading};
use crate::delta::DrainMark;
use crate::health::Health;
use crate::interner::{InternerConflict, InternerFull, TenantInterner};
use crate::settle::{self, PruneError, PruneReport, PruneTier, SettleMode, SettleReport};
use crate::tiers::{aggregate, Tiers};
use crate::unresolved::UnresolvedLimits;

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
    pub deletes: Vec<EntryKey>,
    /// Settles and prunes applied, and how many of them the last successful
    /// flush covered. While they differ, drains are refused (see
    /// [`DrainError::SettleNotDurable`]).
    pub settles: u64,
    pub durable_settles: u64,
    /// Readings applied (drains, final readings), and how many of them the
    /// last successful flush covered. While they differ, settles are
    /// refused (see [`SettleError::DrainsNotDurable`]).
    pub drains: u64,
    pub durable_drains: u64,
    /// The settle protocol (§7, §9): drain → flush → settles → flush. A
    /// full drain since the last settle batch was flushed (or since the
    /// restore) ...
    pub drained_for_settle: bool,
    /// ... or a batch still open (settled, not yet flushed) lets a settle in.
    pub batch_open: bool,
    /// `now_ns` of the newest reading applied (full drain or final): a
    /// full drain read before it is outdated.
    pub newest_read_ns: Option<u64>,
    /// Boot (§4.4, §12): retired `flows` maps still to drain before the
    /// live one, and the reading count after the last retired drain (which
    /// must be flushed before the live drain).
    pub retired_left: usize,
    pub retired_at: u64,
    /// A live full drain happened since the restore.
    pub live_drained: bool,
    /// Deletes the restored file still owed (tombstones awaiting their
    /// final reading): released only once a live full drain has shown the
    /// very entry each one meant. Before that, the entry under the key may
    /// be a newer one the ledger never saw, and a lookup-and-delete would
    /// take it with bytes no tombstone accounts for.
    pub restored_deletes: Vec<EntryKey>,
}

impl Inner {
    /// Readings wait while a settle or prune is not in the state file.
    fn refuse_readings(&self) -> Result<(), DrainError> {
        if self.settles == self.durable_settles {
            return Ok(());
        }
        Err(DrainError::SettleNotDurable {
            unflushed: self.settles - self.durable_settles,
        })
    }

    fn sizes(&self) -> LedgerSizes {
        LedgerSizes {
            rows: self.book.rows.len(),
            unresolved: self.book.unresolved.len(),
            absorber_buckets: self.book.absorbers.bucket_counts(),
        }
    }

    /// Queues kernel deletes for release by the next successful flush.
    fn queue_deletes(&mut self, keys: Vec<EntryKey>) {
        self.deletes.extend(keys);
    }
}

/// What a flush copies under the lock: the book, and the attribution in
/// force with the plan it came from (one snapshot, so the file pairs rows
/// with the plan they were settled to).
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
    /// Readings since the last flush are not in the state file. Settling on
    /// top of them would let a crash before the next flush restore rows
    /// whose baseline predates the settle point: the bytes in between would
    /// then be billed under the new attribution.
    #[error(
        "settle refused: {unflushed} drain(s) not yet in the state file; \
         expected drain → flush → settles → flush"
    )]
    DrainsNotDurable {
        /// Drains and final readings applied since the last successful flush.
        unflushed: u64,
    },
    /// No full drain since the last settle batch was flushed (or since the
    /// restore): bytes the kernel counted under the old attribution since
    /// the last read would follow the port to its new owner.
    #[error(
        "settle refused: no full drain since the last settle batch or the restore; \
         expected drain → flush → settles → flush"
    )]
    NotDrained,
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
         expected a successful flush of the state file after the last settle"
    )]
    SettleNotDurable {
        /// Settles and prunes applied since the last successful flush.
        unflushed: u64,
    },
    /// Retired `flows` maps announced at boot ([`Ledger::expect_retired`])
    /// are not all drained: the live map read first would make their
    /// entries read as new ones, counted a second time.
    #[error(
        "live drain refused: {left} retired flows map(s) not yet drained; \
         expected apply_retired for each, then a flush, before the live drain"
    )]
    RetiredNotDrained {
        /// Retired maps still to drain.
        left: usize,
    },
    /// The retired maps' last drains are not in the state file yet: after
    /// a crash the retired map would be read again against baselines a
    /// live drain had moved past.
    #[error(
        "live drain refused: the retired maps' drain is not yet in the state file; \
         expected a flush (then remove the retired maps) before the live drain"
    )]
    RetiredNotDurable,
    /// A retired map drained after the live one: its entries would read as
    /// new ones and be counted a second time.
    #[error(
        "retired drain refused: the live flows map was already drained since the restore; \
         expected the retired maps first (DESIGN §12)"
    )]
    RetiredAfterLive,
}

/// Sizes for the health gauges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LedgerSizes {
    /// Ledger rows.
    pub rows: usize,
    /// Unresolved buffer depth.
    pub unresolved: usize,
    /// Absorber buckets per tier, in [`crate::absorbers::TIERS`] order.
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
                drained_for_settle: false,
                batch_open: false,
                newest_read_ns: None,
                retired_left: 0,
                retired_at: 0,
                live_drained: false,
                restored_deletes: Vec::new(),
            }),
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

    /// Applies one full-map drain of the live `flows` map (§4.3, §4.6):
    /// resolves waiting rows whose MAC is now bound, adds each reading's new
    /// bytes, and evicts unresolved rows past their TTL or over capacity.
    /// The kernel entries of evicted rows are handed out by the next
    /// successful flush of the state file, not here.
    ///
    /// `now_ns` is the caller's monotonic clock when the map was read. A
    /// drain read before the newest reading applied (a refused drain
    /// retried) only updates entries the ledger still tracks under the same
    /// stamp; the rest of it, and its absences, newer reads accounted for
    /// (or the next drain will).
    ///
    /// Refused while a settle or prune is not yet flushed, and at boot
    /// until the retired maps are drained and flushed (docs/ledger.md).
    pub fn apply_drain<R: Reading>(
        &self,
        readings: &[R],
        now_ns: u64,
    ) -> Result<DrainReport, DrainError> {
        self.read(readings, now_ns, |inner| {
            if inner.retired_left > 0 {
                return Err(DrainError::RetiredNotDrained {
                    left: inner.retired_left,
                });
            }
            if inner.durable_drains < inner.retired_at {
                return Err(DrainError::RetiredNotDurable);
            }
            let outdated = inner.newest_read_ns.is_some_and(|newest| now_ns < newest);
            if outdated {
                return Ok(ReadKind::Outdated);
            }
            inner.drained_for_settle = true;
            inner.live_drained = true;
            Ok(ReadKind::Full)
        })
    }

    /// Applies the final readings of kernel entries that no longer exist:
    /// what the datapath's lookup-and-delete returned for the keys a flush
    /// released (§9: ghost sweep, unresolved eviction, pressure relief).
    /// Each is diffed like any reading; the bytes of an entry whose row was
    /// evicted go to `unknown` (its binding is gone). The next flush makes
    /// them durable: until then a crash loses them (counted, §11).
    pub fn apply_final<R: Reading>(
        &self,
        readings: &[R],
        now_ns: u64,
    ) -> Result<DrainReport, DrainError> {
        self.read(readings, now_ns, |_| Ok(ReadKind::Final))
    }

    /// Boot (§4.4, §12), right after the restore: `count` retired `flows`
    /// maps (from the datapath's load) are to be drained with
    /// [`Ledger::apply_retired`] and flushed before any live drain.
    pub fn expect_retired(&self, count: usize) {
        self.lock().retired_left = count;
    }

    /// The last drain of a retired `flows` map, against the restored
    /// baselines: every entry in it is final (the map is removed after the
    /// flush that follows). Refused once the live map has been drained.
    pub fn apply_retired<R: Reading>(
        &self,
        readings: &[R],
        now_ns: u64,
    ) -> Result<DrainReport, DrainError> {
        self.read(readings, now_ns, |inner| {
            if inner.live_drained {
                return Err(DrainError::RetiredAfterLive);
            }
            inner.retired_left = inner.retired_left.saturating_sub(1);
            // This drain (counted next) must be flushed before the live one.
            inner.retired_at = inner.drains + 1;
            Ok(ReadKind::Final)
        })
    }

    /// Pressure relief (§9): the kernel sub-entries `entries` are to be
    /// deleted (their rows stay). Like every kernel delete, they are
    /// released by the next successful flush; delete them with
    /// lookup-and-delete and hand the final readings to
    /// [`Ledger::apply_final`]. A bare [`lachesis_abi::FlowKey`] names the folded entry
    /// of a per-CPU map of the previous layout.
    pub fn relieve<K: Into<EntryKey> + Copy>(&self, entries: &[K]) {
        let entries: Vec<EntryKey> = entries.iter().map(|e| (*e).into()).collect();
        let mut g = self.lock();
        let inner = &mut *g;
        let released = inner.book.relieve(&entries);
        inner.queue_deletes(released);
    }

    /// Applies readings under the lock once no settle waits for its flush
    /// and `admit` — the ordering rule of this kind of read, which also
    /// records what the read changes in it — has said which kind they are.
    fn read<R: Reading>(
        &self,
        readings: &[R],
        now_ns: u64,
        admit: impl FnOnce(&mut Inner) -> Result<ReadKind, DrainError>,
    ) -> Result<DrainReport, DrainError> {
        let mut g = self.lock();
        let inner = &mut *g;
        inner.refuse_readings()?;
        let kind = admit(inner)?;
        Ok(self.apply(inner, readings, kind, now_ns))
    }

    fn apply<R: Reading>(
        &self,
        inner: &mut Inner,
        readings: &[R],
        kind: ReadKind,
        now_ns: u64,
    ) -> DrainReport {
        let attr = self.source.load();
        let (report, evicted) = inner.book.apply_readings(
            attr.as_ref(),
            readings,
            kind,
            now_ns,
            inner.limits,
            &mut inner.health,
        );
        inner.queue_deletes(evicted);
        if kind == ReadKind::Full && !inner.restored_deletes.is_empty() {
            // The drain ended every restored tombstone it did not show
            // (same stamp); those left are entries it showed: owed deletes.
            let owed: Vec<EntryKey> = std::mem::take(&mut inner.restored_deletes)
                .into_iter()
                .filter(|k| inner.book.tombstones.get(k).is_some_and(|t| !t.base.gone))
                .collect();
            inner.queue_deletes(owed);
        }
        inner.drains += 1;
        inner.newest_read_ns = Some(inner.newest_read_ns.map_or(now_ns, |n| n.max(now_ns)));
        report
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
        let (n, deletes) = inner
            .book
            .evict_unresolved(inner.limits, now_ns, &mut inner.health);
        inner.queue_deletes(deletes);
        n
    }

    /// Settles rows under the attribution the source serves now (the one in
    /// force before the change), then runs `swap` — the caller's switch of
    /// the source to the new attribution — before releasing the lock, so a
    /// scrape or drain sees either the old attribution with unsettled rows or
    /// the new one with settled rows, never a mix.
    ///
    /// The protocol is drain → flush → settles → flush (§7, §9): refused
    /// (and `swap` not run) while a reading is not yet flushed, or when no
    /// full drain preceded this settle batch; drains are refused after it
    /// until the next flush (docs/ledger.md).
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
        if !inner.batch_open && !inner.drained_for_settle {
            return Err(SettleError::NotDrained);
        }
        let old = self.source.load();
        let mut evicted = Vec::new();
        let report = settle::settle(
            &mut inner.book,
            old.as_ref(),
            mode,
            &mut inner.health,
            &mut evicted,
        );
        inner.queue_deletes(evicted);
        // Even a settle that moved nothing swapped the attribution: the
        // state file must carry it before bytes are drained under it.
        inner.settles += 1;
        inner.batch_open = true;
        swap();
        Ok(report)
    }

    /// Ends the server-settled buckets of servers absent from a successful,
    /// non-empty Nova list (§7), folding them into tenant-settled.
    pub fn prune_servers<'s>(
        &self,
        alive: impl IntoIterator<Item = &'s str>,
    ) -> Result<PruneReport, PruneError> {
        self.prune(PruneTier::Server, alive)
    }

    /// Ends the tenant-settled buckets of projects absent from the Keystone
    /// list (§7), folding them into total-settled.
    pub fn prune_tenants<'s>(
        &self,
        alive: impl IntoIterator<Item = &'s str>,
    ) -> Result<PruneReport, PruneError> {
        self.prune(PruneTier::Tenant, alive)
    }

    /// Ends the retention of evicted port series (docs/ledger.md,
    /// "Returning port series"): every MAC evicted with no other MAC on its
    /// port keeps its port buckets, so its port series stays, flat, and a
    /// port bound again within `retention_s` seconds continues from its
    /// last value instead of restarting at zero under the same labels.
    /// Past the window (measured from the first call after the eviction,
    /// `now_s` in unix seconds, so it survives a restart) the buckets fold
    /// into server-settled and the series end. Returns how many ended.
    pub fn expire_retained_ports(&self, now_s: u64, retention_s: u64) -> usize {
        let mut g = self.lock();
        let attr = self.source.load();
        settle::expire_retained(&mut g.book, attr.as_ref(), now_s, retention_s)
    }

    /// Runs one tier's prune under the lock with the current attribution; a
    /// prune that folded anything must be flushed before the next drain,
    /// like a settle.
    pub fn prune<'s>(
        &self,
        tier: PruneTier,
        alive: impl IntoIterator<Item = &'s str>,
    ) -> Result<PruneReport, PruneError> {
        let alive: FxHashSet<&str> = alive.into_iter().collect();
        let mut g = self.lock();
        let inner = &mut *g;
        let attr = self.source.load();
        let report = settle::prune(
            tier,
            &mut inner.book,
            attr.as_ref(),
            &alive,
            &mut inner.health,
        )?;
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
        // Evictions the file holds whose entries may not be deleted yet:
        // owed again, released by the flush after the first live full drain
        // that still shows each entry (deleting an entry twice loses
        // nothing, its final reading is applied either way; deleting a
        // newer entry of the same key would).
        let mut again: Vec<EntryKey> = book
            .tombstones
            .iter()
            .filter(|(_, t)| !t.base.gone)
            .map(|(k, _)| *k)
            .collect();
        again.sort_unstable();
        // No full drain of this process has shown any entry yet: until one
        // does, an eviction releases nothing (what the file's rows point at
        // may be gone, e.g. deleted just before a crash).
        book.last_full = DrainMark(1);
        g.book = book;
        g.durable = Arc::new(tiers);
        g.deletes = Vec::new();
        g.restored_deletes = again;
        g.durable_settles = g.settles;
        g.durable_drains = g.drains;
        g.drained_for_settle = false;
        g.batch_open = false;
        g.newest_read_ns = None;
        g.retired_left = 0;
        g.retired_at = 0;
        g.live_drained = false;
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
    pub(crate) fn publish_durable(&self, tiers: Tiers, copy: &FlushMarks) -> Vec<EntryKey> {
        let mut g = self.lock();
        g.durable = Arc::new(tiers);
        if copy.settles > g.durable_settles {
            // A settle or prune became durable: the drain that preceded it
            // is spent. The next settle needs a full drain applied after
            // this flush (a settle batch's drain refused and retried with
            // an outdated reading must not pass for one).
            g.drained_for_settle = false;
        }
        g.durable_settles = g.durable_settles.max(copy.settles);
        g.durable_drains = g.durable_drains.max(copy.drains);
        if g.batch_open && g.durable_settles == g.settles {
            // The batch is in the file: the next one needs a drain of its own.
            g.batch_open = false;
            g.drained_for_settle = false;
        }
        let copy_deletes = copy.deletes;
        // Flushes are serialised and deletes only ever appended, so the
        // copy's deletes are still the prefix (a restore in between replaces
        // the list: nothing of the old one may be released then).
        let n = copy_deletes.min(g.deletes.len());
        let mut out: Vec<EntryKey> = g.deletes.drain(..n).collect();
        // Only entries still awaiting their final reading: one already read
        // (and deleted) or gone must not take a newer entry of its key with it.
        out.sort_unstable();
        out.dedup();
        out.retain(|k| g.book.tombstones.get(k).is_some_and(|t| !t.base.gone));
        out
    }

    /// Current health counters.
    #[must_use]
    pub fn health(&self) -> Health {
        self.lock().health
    }

    /// What a scrape renders, taken under the lock in one go: the durable
    /// billing view (shared, computed by the last flush), the live sizes and
    /// the health counters.
    pub(crate) fn scrape_view(&self) -> (Arc<Tiers>, LedgerSizes, Health) {
        let g = self.lock();
        (g.durable.clone(), g.sizes(), g.health)
    }

    /// The attribution in force now (names for the info families).
    pub(crate) fn attribution(&self) -> Arc<dyn Attribution + Send + Sync> {
        self.source.load()
    }

    /// Row, pending and bucket counts.
    #[must_use]
    pub fn sizes(&self) -> LedgerSizes {
        self.lock().sizes()
    }
}
