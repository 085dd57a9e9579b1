//! The ledger's state and the drain path: rows, the unresolved buffer and
//! the absorbers, always mutated together under one lock (held by
//! [`crate::Ledger`]).

use lachesis_abi::{FlowCounters, FlowKey};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::absorbers::{fold, unknown_key, Absorbers};
use crate::attribution::Attribution;
use crate::counts::Counts;
use crate::delta::{delta, Baseline, DrainMark};
use crate::flow::decode;
use crate::health::{AnomalyKind, Health};
use crate::interner::TenantInterner;
use crate::unresolved::{select_evictions, Pending, Tombstone, UnresolvedLimits};

/// One ledger row: the bytes attributed to the row's current binding since it
/// was created or last rebased, and the raw baseline of the kernel entry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Row {
    /// Cumulative counts under the current attribution.
    pub total: Counts,
    /// The last raw reading and its entry stamp (§4.3).
    pub base: Baseline,
    /// The full drain that last showed the entry.
    pub(crate) seen: DrainMark,
}

/// Everything the ledger holds.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Book {
    /// Rows of bound VM MACs, keyed by the kernel flow key.
    pub rows: FxHashMap<FlowKey, Row>,
    /// Rows waiting for their VM MAC to be bound.
    pub unresolved: FxHashMap<FlowKey, Pending>,
    /// Kernel entries reported for deletion, not yet seen gone.
    pub tombstones: FxHashMap<FlowKey, Tombstone>,
    /// Absorber buckets.
    pub absorbers: Absorbers,
    /// Project ↔ kernel tenant id.
    pub interner: TenantInterner,
    /// The latest full drain applied (see [`DrainMark`]).
    pub(crate) last_full: DrainMark,
}

/// What a drain did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DrainReport {
    /// Unresolved rows moved to the ledger because their MAC got bound.
    pub resolved: usize,
    /// Unresolved rows folded into `unknown`.
    pub evicted: usize,
    /// Readings whose key carried a code this build does not know (skipped).
    pub invalid_keys: usize,
    /// Readings whose key has a non-zero pad byte (refused: not a key the
    /// kernel writes, and the state file could not restore it).
    pub nonzero_pad: usize,
    /// Readings older than what the ledger already applied for the same
    /// entry (same stamp, a counter lower): ignored.
    pub stale: usize,
}

/// How a set of readings relates to the kernel map (§4.6, §9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadKind {
    /// Every entry of the live map, read no earlier than the previous full
    /// drain: an entry absent from it is gone.
    Full,
    /// A full read taken before the newest one already applied (a retried
    /// reading): its entries are applied, its absences prove nothing.
    Outdated,
    /// The last readings of entries that no longer exist: returned by a
    /// lookup-and-delete, or the retired map's last drain (§4.4, §9).
    Final,
}

/// Where a reading's entry was last read.
#[derive(Clone, Copy)]
enum Holder {
    /// A row or a pending row tracks this very entry (or has no stamp yet).
    Own(Baseline),
    /// Only a tombstone knows the entry: released for deletion, its row gone
    /// or (pressure relief) tracking it too.
    Tomb(Baseline),
    /// A row or pending row of another entry under the same key.
    Other(Baseline),
    None,
}

impl Book {
    /// Moves every unresolved row whose VM MAC is now bound into the rows,
    /// with its accumulated bytes and its raw baseline (no double count).
    pub(crate) fn resolve_pending(&mut self, attr: &dyn Attribution, health: &mut Health) -> usize {
        let ready: Vec<FlowKey> = self
            .unresolved
            .keys()
            .filter(|k| decode(k).is_some_and(|d| attr.binding(d.vm_mac).is_some()))
            .copied()
            .collect();
        for k in &ready {
            if let Some(p) = self.unresolved.remove(k) {
                self.rows.insert(
                    *k,
                    Row {
                        total: p.acc,
                        base: p.base,
                        seen: p.seen,
                    },
                );
            }
        }
        health.resolutions += ready.len() as u64;
        ready.len()
    }

    /// Applies a set of readings (§4.3, §4.6). A [`ReadKind::Full`] drain
    /// must cover the whole live `flows` map: a tombstoned entry absent from
    /// it is gone. Returns the report and the kernel keys of the unresolved
    /// rows it evicted that are to be deleted.
    pub(crate) fn apply_readings(
        &mut self,
        attr: &dyn Attribution,
        readings: &[(FlowKey, FlowCounters)],
        kind: ReadKind,
        now_ns: u64,
        limits: UnresolvedLimits,
        health: &mut Health,
    ) -> (DrainReport, Vec<FlowKey>) {
        let mut report = DrainReport {
            resolved: self.resolve_pending(attr, health),
            ..DrainReport::default()
        };
        if kind == ReadKind::Full {
            self.last_full.0 += 1;
        }
        // Tombstoned entries this drain saw again, same stamp: still there.
        let mut still_there: FxHashSet<FlowKey> = FxHashSet::default();
        for (key, reading) in readings {
            if key.pad != 0 {
                report.nonzero_pad += 1;
                health.anomaly(AnomalyKind::NonzeroPad);
                continue;
            }
            let Some(d) = decode(key) else {
                report.invalid_keys += 1;
                health.anomaly(AnomalyKind::InvalidKey);
                continue;
            };
            let bound = || attr.binding(d.vm_mac).is_some();
            if !self.apply_one(key, reading, kind, bound, now_ns, health) {
                report.stale += 1;
            }
            // Matched (a stamp-0 tombstone adopts the reading's stamp).
            if !self.tombstones.is_empty()
                && self
                    .tombstones
                    .get(key)
                    .is_some_and(|t| t.base.stamp == reading.created_ns)
            {
                still_there.insert(*key);
            }
        }
        if kind == ReadKind::Full {
            self.end_tombstones(&still_there, health);
        }
        let (evicted, deletes) = self.evict_unresolved(limits, now_ns, health);
        report.evicted = evicted;
        (report, deletes)
    }

    /// The baseline a reading is to be diffed against: the entry's own
    /// (same stamp) wherever the ledger keeps it, else a stamp-0 one (which
    /// matches any entry), else whatever the row holds (another entry).
    fn holder(&self, key: &FlowKey, reading: &FlowCounters) -> Holder {
        let own = self
            .rows
            .get(key)
            .map(|r| r.base)
            .or_else(|| self.unresolved.get(key).map(|p| p.base));
        let tomb = self.tombstones.get(key).map(|t| t.base);
        let stamp = reading.created_ns;
        match (own, tomb) {
            (Some(o), _) if o.stamp == stamp => Holder::Own(o),
            (_, Some(t)) if t.stamp == stamp => Holder::Tomb(t),
            (Some(o), _) if o.stamp == 0 => Holder::Own(o),
            (_, Some(t)) if t.stamp == 0 => Holder::Tomb(t),
            (Some(o), _) => Holder::Other(o),
            (None, _) => Holder::None,
        }
    }

    /// The steady state, in one lookup: the row tracks this very entry.
    /// `None` when it does not (the general path decides).
    fn apply_to_own_row(
        &mut self,
        key: &FlowKey,
        reading: &FlowCounters,
        kind: ReadKind,
        health: &mut Health,
    ) -> Option<bool> {
        let row = self.rows.get_mut(key)?;
        if row.base.stamp != reading.created_ns {
            return None;
        }
        let (add, case) = delta(Some(&row.base), reading);
        if !case.adopts_reading() {
            health.anomaly(AnomalyKind::Stale);
            return Some(false);
        }
        let last = Baseline {
            gone: kind == ReadKind::Final || row.base.gone,
            ..Baseline::of(reading)
        };
        row.total.add(add);
        row.base = last;
        if kind == ReadKind::Full {
            row.seen = self.last_full;
        }
        if !self.tombstones.is_empty() {
            if let Some(t) = self.tombstones.get_mut(key) {
                if t.base.stamp == reading.created_ns {
                    t.base = last;
                }
            }
        }
        Some(true)
    }

    /// Applies one reading; `false` when it was stale (nothing changed).
    /// `bound`: whether the key's VM MAC has a binding (asked only when a
    /// row is created).
    fn apply_one(
        &mut self,
        key: &FlowKey,
        reading: &FlowCounters,
        kind: ReadKind,
        bound: impl FnOnce() -> bool,
        now_ns: u64,
        health: &mut Health,
    ) -> bool {
        if let Some(applied) = self.apply_to_own_row(key, reading, kind, health) {
            return applied;
        }
        let holder = self.holder(key, reading);
        if kind == ReadKind::Outdated
            && !matches!(holder, Holder::Own(b) | Holder::Tomb(b) if b.stamp == reading.created_ns)
        {
            // Newer reads already accounted for every entry this older one
            // shows that the ledger no longer tracks under its stamp.
            health.anomaly(AnomalyKind::Stale);
            return false;
        }
        let base = match holder {
            Holder::Own(b) | Holder::Tomb(b) | Holder::Other(b) => Some(b),
            Holder::None => None,
        };
        let (add, case) = delta(base.as_ref(), reading);
        if !case.adopts_reading() {
            health.anomaly(AnomalyKind::Stale);
            return false;
        }
        let last = Baseline {
            // A final reading ends the entry: whoever holds its baseline
            // keeps it (a retried older drain may still show the entry) and
            // knows there is nothing left to delete.
            gone: kind == ReadKind::Final
                || base.is_some_and(|b| b.gone && b.stamp == reading.created_ns),
            ..Baseline::of(reading)
        };
        let from_tomb = matches!(holder, Holder::Tomb(_));
        if let Some(t) = self.tombstones.get_mut(key) {
            if t.base.stamp == reading.created_ns || from_tomb {
                t.base = last;
            }
        }
        // A full drain shows the entry: it exists now (see `DrainMark`).
        let seen = self.last_full;
        let full = kind == ReadKind::Full;
        if let Some(row) = self.rows.get_mut(key) {
            row.total.add(add);
            if !from_tomb {
                row.base = last;
                if full {
                    row.seen = seen;
                }
            }
            return true;
        }
        if let Some(p) = self.unresolved.get_mut(key) {
            p.acc.add(add);
            if !from_tomb {
                p.base = last;
                if full {
                    p.seen = seen;
                }
            }
            if !add.is_zero() {
                p.last_active_ns = now_ns;
            }
            return true;
        }
        if from_tomb && add.is_zero() {
            // Nothing since the tombstone's baseline: nothing to account
            // anywhere (a zero fold would still create an `unknown` bucket).
            return true;
        }
        if from_tomb && kind == ReadKind::Final {
            // The last bytes of an entry whose row was evicted: its binding
            // is gone (or never was), and the entry is gone too. They end in
            // `unknown`, never in a row a reborn MAC could inherit.
            fold(&mut self.absorbers.unknown, unknown_key(key), add);
            return true;
        }
        if bound() {
            self.rows.insert(
                *key,
                Row {
                    total: add,
                    base: last,
                    seen,
                },
            );
        } else {
            self.unresolved.insert(
                *key,
                Pending {
                    acc: add,
                    base: last,
                    first_seen_ns: now_ns,
                    last_active_ns: now_ns,
                    seen,
                },
            );
        }
        true
    }

    /// After a full drain: a tombstone whose entry the drain did not show
    /// (absent, or replaced by a newer one) is gone from the kernel. If its
    /// final reading never reached the ledger, the bytes it counted since
    /// its last reading are lost: counted (§11).
    fn end_tombstones(&mut self, still_there: &FxHashSet<FlowKey>, health: &mut Health) {
        self.tombstones.retain(|k, t| {
            if still_there.contains(k) {
                return true;
            }
            if !t.base.gone {
                health.lost_final_readings += 1;
            }
            false
        });
    }

    /// Records that the entry `base` was read from is released for
    /// deletion; `false` when there is nothing to delete (its final reading
    /// is already in: the entry is gone). Either way the tombstone keeps the
    /// baseline until a full drain shows the entry gone, so a re-read of it
    /// (a retired map read again after a crash, a retried drain) continues
    /// from there instead of counting it again.
    pub(crate) fn tombstone(&mut self, key: FlowKey, mut base: Baseline, seen: DrainMark) -> bool {
        let unseen = seen.0 != self.last_full.0;
        if unseen
            && self
                .tombstones
                .get(&key)
                .is_some_and(|t| !t.base.gone && t.base.stamp == base.stamp)
        {
            // A restored tombstone of this very entry still awaits its
            // final reading (its delete is owed from before a restart):
            // keep it awaiting, so the drain that finds the entry gone
            // counts the lost reading instead of a "gone" one hiding it.
            return false;
        }
        // Not shown by the latest full drain: the entry no longer exists.
        base.gone |= unseen
            || self
                .tombstones
                .get(&key)
                .is_some_and(|t| t.base.gone && t.base.stamp == base.stamp);
        self.tombstones.insert(key, Tombstone { base });
        !base.gone
    }

    /// Marks kernel entries for deletion by pressure relief (§9): their
    /// rows stay; a tombstone remembers each entry until its final reading.
    /// Returns the keys to queue for release: those the ledger tracks (a key
    /// it refused at the door was never billed, and it releases nothing it
    /// cannot account for).
    pub(crate) fn relieve(&mut self, keys: &[FlowKey]) -> Vec<FlowKey> {
        let mut out = Vec::with_capacity(keys.len());
        for key in keys {
            let held = self
                .rows
                .get(key)
                .map(|r| (r.base, r.seen))
                .or_else(|| self.unresolved.get(key).map(|p| (p.base, p.seen)));
            if held.is_some_and(|(b, seen)| self.tombstone(*key, b, seen)) {
                out.push(*key);
            }
        }
        out
    }

    /// Folds TTL-expired and over-capacity unresolved rows into `unknown`;
    /// returns how many, and the kernel keys to delete (those whose entry
    /// the latest full drain still showed).
    pub(crate) fn evict_unresolved(
        &mut self,
        limits: UnresolvedLimits,
        now_ns: u64,
        health: &mut Health,
    ) -> (usize, Vec<FlowKey>) {
        let chosen = select_evictions(&self.unresolved, limits, now_ns);
        let n = chosen.len();
        let mut out = Vec::with_capacity(n);
        for (key, reason) in chosen {
            if let Some(p) = self.unresolved.remove(&key) {
                fold(&mut self.absorbers.unknown, unknown_key(&key), p.acc);
                if self.tombstone(key, p.base, p.seen) {
                    out.push(key);
                }
                health.evicted(reason);
            }
        }
        (n, out)
    }

    /// Sum of everything the ledger holds (rows, pending, every absorber
    /// except the port tiers, which duplicate rows' bytes at server level).
    #[must_use]
    pub fn grand_total(&self) -> Counts {
        let mut c = Counts::default();
        self.rows.values().for_each(|r| c.add(r.total));
        self.unresolved.values().for_each(|p| c.add(p.acc));
        self.absorbers.port.values().for_each(|v| c.add(*v));
        self.absorbers.server.values().for_each(|v| c.add(*v));
        self.absorbers.tenant.values().for_each(|v| c.add(*v));
        self.absorbers.total.values().for_each(|v| c.add(*v));
        self.absorbers.unknown.values().for_each(|v| c.add(*v));
        c
    }
}
