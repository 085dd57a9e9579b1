//! The ledger's state and the drain path: rows, the unresolved buffer and
//! the absorbers, always mutated together under one lock (held by
//! [`crate::Ledger`]).

use lachesis_abi::{EntryKey, FlowCounters, FlowKey};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::absorbers::{fold, fold_row, unknown_key, Absorbers};
use crate::attribution::Attribution;
use crate::counts::Counts;
use crate::delta::{delta, Baseline, DrainMark};
use crate::flow::decode;
use crate::health::{AnomalyKind, Health};
use crate::interner::TenantInterner;
use crate::subs::Subs;
use crate::unresolved::{select_evictions, Pending, Tombstone, UnresolvedLimits};

/// One ledger row: the bytes attributed to the row's current binding since it
/// was created or last rebased, and the raw baselines of its kernel
/// sub-entries (one per CPU that counted the flow, DESIGN §4.7).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Row {
    /// Cumulative counts under the current attribution.
    pub total: Counts,
    /// The last raw reading and entry stamp of each sub-entry (§4.3).
    pub subs: Subs,
}

/// One kernel reading: which entry it came from and what it held. A bare
/// [`FlowKey`] names the folded entry of a per-CPU map of the previous
/// layout (a retired map's drain).
pub trait Reading {
    /// The kernel entry read.
    fn entry(&self) -> EntryKey;
    /// Its counters.
    fn counters(&self) -> &FlowCounters;
}

impl Reading for (EntryKey, FlowCounters) {
    fn entry(&self) -> EntryKey {
        self.0
    }
    fn counters(&self) -> &FlowCounters {
        &self.1
    }
}

impl Reading for (FlowKey, FlowCounters) {
    fn entry(&self) -> EntryKey {
        EntryKey::folded(self.0)
    }
    fn counters(&self) -> &FlowCounters {
        &self.1
    }
}

/// Everything the ledger holds.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Book {
    /// Rows of bound VM MACs, keyed by the kernel flow key.
    pub rows: FxHashMap<FlowKey, Row>,
    /// Rows waiting for their VM MAC to be bound.
    pub unresolved: FxHashMap<FlowKey, Pending>,
    /// Kernel entries reported for deletion, not yet seen gone.
    pub tombstones: FxHashMap<EntryKey, Tombstone>,
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
    /// Sub-entry baselines dropped because this full drain did not show
    /// their entries (gone from the kernel).
    pub subs_dropped: usize,
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
    /// A row or pending row of another entry under the same (key, CPU).
    Other(Baseline),
    None,
}

impl Book {
    /// Moves every unresolved row whose VM MAC is now bound into the rows,
    /// with its accumulated bytes and its raw baselines (no double count).
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
                        subs: p.subs,
                    },
                );
            }
        }
        health.resolutions += ready.len() as u64;
        ready.len()
    }

    /// Applies a set of readings (§4.3, §4.6). A [`ReadKind::Full`] drain
    /// must cover the whole live `flows` map: a tombstoned entry absent from
    /// it is gone, and so is a sub-entry baseline it did not show. Returns
    /// the report and the kernel entries of the unresolved rows it evicted
    /// that are to be deleted.
    pub(crate) fn apply_readings<R: Reading>(
        &mut self,
        attr: &dyn Attribution,
        readings: &[R],
        kind: ReadKind,
        now_ns: u64,
        limits: UnresolvedLimits,
        health: &mut Health,
    ) -> (DrainReport, Vec<EntryKey>) {
        let mut report = DrainReport {
            resolved: self.resolve_pending(attr, health),
            ..DrainReport::default()
        };
        if kind == ReadKind::Full {
            self.last_full.0 += 1;
        }
        // Tombstoned entries this drain saw again, same stamp: still there.
        let mut still_there: FxHashSet<EntryKey> = FxHashSet::default();
        for r in readings {
            let (entry, reading) = (r.entry(), r.counters());
            let key = &entry.key;
            if key.pad != 0 {
                report.nonzero_pad += 1;
                health.anomaly(AnomalyKind::NonzeroPad);
                continue;
            }
            if decode(key).is_none() {
                report.invalid_keys += 1;
                health.anomaly(AnomalyKind::InvalidKey);
                continue;
            }
            if !self.apply_one(entry, reading, kind, attr, now_ns, health) {
                report.stale += 1;
            }
            // Matched (a stamp-0 tombstone adopts the reading's stamp).
            if !self.tombstones.is_empty()
                && self
                    .tombstones
                    .get(&entry)
                    .is_some_and(|t| t.base.stamp == reading.created_ns)
            {
                still_there.insert(entry);
            }
        }
        if kind == ReadKind::Full {
            self.end_tombstones(&still_there, health);
            report.subs_dropped = self.drop_unseen_subs();
        }
        let (evicted, deletes) = self.evict_unresolved(limits, now_ns, health);
        report.evicted = evicted;
        (report, deletes)
    }

    /// After a full drain: forgets the baselines of sub-entries it did not
    /// show. Their entries are gone (a later entry of the same key and CPU
    /// carries a new stamp: a new entry whichever baseline is kept), so a
    /// row's baselines follow the CPUs that count it now, not every CPU
    /// that ever did.
    fn drop_unseen_subs(&mut self) -> usize {
        let mark = self.last_full;
        let mut dropped = 0;
        for row in self.rows.values_mut() {
            dropped += row.subs.drop_unseen(mark);
        }
        for p in self.unresolved.values_mut() {
            dropped += p.subs.drop_unseen(mark);
        }
        dropped
    }

    /// The baseline a reading is to be diffed against: the entry's own
    /// (same stamp) wherever the ledger keeps it, else a stamp-0 one (which
    /// matches any entry), else whatever the row holds for that CPU
    /// (another entry).
    fn holder(&self, entry: &EntryKey, reading: &FlowCounters) -> Holder {
        let own = self
            .rows
            .get(&entry.key)
            .map(|r| &r.subs)
            .or_else(|| self.unresolved.get(&entry.key).map(|p| &p.subs))
            .and_then(|subs| subs.get(entry.cpu))
            .map(|s| s.base);
        let tomb = self.tombstones.get(entry).map(|t| t.base);
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

    /// The steady state, in two lookups: the row tracks this very entry.
    /// `None` when it does not (the general path decides).
    fn apply_to_own_row(
        &mut self,
        entry: &EntryKey,
        reading: &FlowCounters,
        kind: ReadKind,
        health: &mut Health,
    ) -> Option<bool> {
        let row = self.rows.get_mut(&entry.key)?;
        let sub = row.subs.get_mut(entry.cpu)?;
        if sub.base.stamp != reading.created_ns {
            return None;
        }
        if kind == ReadKind::Full {
            // Shown by a full drain, even by a stale reading: it exists.
            sub.seen = self.last_full;
        }
        let (add, case) = delta(Some(&sub.base), reading);
        if !case.adopts_reading() {
            health.anomaly(AnomalyKind::Stale);
            return Some(false);
        }
        let last = Baseline {
            gone: kind == ReadKind::Final || sub.base.gone,
            ..Baseline::of(reading)
        };
        sub.base = last;
        row.total.add(add);
        if !self.tombstones.is_empty() {
            if let Some(t) = self.tombstones.get_mut(entry) {
                if t.base.stamp == reading.created_ns {
                    t.base = last;
                }
            }
        }
        Some(true)
    }

    /// Applies one reading; `false` when it was stale (nothing changed).
    /// `attr`: the attribution in force, asked whether the key's VM MAC
    /// has a binding only when a row is created (or a peer-folded row's
    /// last bytes are folded).
    fn apply_one(
        &mut self,
        entry: EntryKey,
        reading: &FlowCounters,
        kind: ReadKind,
        attr: &dyn Attribution,
        now_ns: u64,
        health: &mut Health,
    ) -> bool {
        if let Some(applied) = self.apply_to_own_row(&entry, reading, kind, health) {
            return applied;
        }
        let holder = self.holder(&entry, reading);
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
        if let Some(t) = self.tombstones.get_mut(&entry) {
            if t.base.stamp == reading.created_ns || from_tomb {
                t.base = last;
            }
        }
        // A full drain shows the entry: it exists now (see `DrainMark`).
        let seen = self.last_full;
        let full = (kind == ReadKind::Full).then_some(seen);
        let key = entry.key;
        if let Some(row) = self.rows.get_mut(&key) {
            row.total.add(add);
            if !from_tomb {
                row.subs.record(entry.cpu, last, full, seen);
            }
            return true;
        }
        if let Some(p) = self.unresolved.get_mut(&key) {
            p.acc.add(add);
            if !from_tomb {
                p.subs.record(entry.cpu, last, full, seen);
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
            if self.tombstones.get(&entry).is_some_and(|t| t.peer) {
                // The last bytes of a row folded when its peer went: its
                // VM's, into the port-settled buckets the row went to.
                fold_row(&mut self.absorbers, attr, None, &key, add);
                return true;
            }
            // The last bytes of an entry whose row was evicted: its binding
            // is gone (or never was), and the entry is gone too. They end in
            // `unknown`, never in a row a reborn MAC could inherit.
            fold(&mut self.absorbers.unknown, unknown_key(&key), add);
            return true;
        }
        let subs = Subs::one_seen(entry.cpu, last, seen);
        if decode(&key).is_some_and(|d| attr.binding(d.vm_mac).is_some()) {
            self.rows.insert(key, Row { total: add, subs });
        } else {
            self.unresolved.insert(
                key,
                Pending {
                    acc: add,
                    subs,
                    first_seen_ns: now_ns,
                    last_active_ns: now_ns,
                },
            );
        }
        true
    }

    /// After a full drain: a tombstone whose entry the drain did not show
    /// (absent, or replaced by a newer one) is gone from the kernel. If its
    /// final reading never reached the ledger, the bytes it counted since
    /// its last reading are lost: counted (§11).
    fn end_tombstones(&mut self, still_there: &FxHashSet<EntryKey>, health: &mut Health) {
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
    pub(crate) fn tombstone(&mut self, key: EntryKey, mut base: Baseline, seen: DrainMark) -> bool {
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
        self.tombstones.insert(key, Tombstone { base, peer: false });
        !base.gone
    }

    /// Tombstones every sub-entry of an evicted row; returns the entries to
    /// delete. `peer`: the row was folded because its peer went, its VM
    /// stays bound ([`Tombstone::peer`]).
    pub(crate) fn tombstone_all(
        &mut self,
        key: FlowKey,
        subs: &Subs,
        peer: bool,
        out: &mut Vec<EntryKey>,
    ) {
        for s in subs {
            let entry = EntryKey::new(key, s.cpu);
            if self.tombstone(entry, s.base, s.seen) {
                out.push(entry);
            }
            if let Some(t) = self.tombstones.get_mut(&entry) {
                t.peer = peer;
            }
        }
    }

    /// Marks kernel entries for deletion by pressure relief (§9): their
    /// rows stay; a tombstone remembers each entry until its final reading.
    /// Returns the entries to queue for release: those the ledger tracks (a
    /// key it refused at the door was never billed, and it releases nothing
    /// it cannot account for).
    pub(crate) fn relieve(&mut self, entries: &[EntryKey]) -> Vec<EntryKey> {
        let mut out = Vec::with_capacity(entries.len());
        for entry in entries {
            let held = self
                .rows
                .get(&entry.key)
                .map(|r| &r.subs)
                .or_else(|| self.unresolved.get(&entry.key).map(|p| &p.subs))
                .and_then(|subs| subs.get(entry.cpu))
                .map(|s| (s.base, s.seen));
            if held.is_some_and(|(b, seen)| self.tombstone(*entry, b, seen)) {
                out.push(*entry);
            }
        }
        out
    }

    /// Folds TTL-expired and over-capacity unresolved rows into `unknown`;
    /// returns how many, and the kernel entries to delete (those the latest
    /// full drain still showed).
    pub(crate) fn evict_unresolved(
        &mut self,
        limits: UnresolvedLimits,
        now_ns: u64,
        health: &mut Health,
    ) -> (usize, Vec<EntryKey>) {
        let chosen = select_evictions(&self.unresolved, limits, now_ns);
        let n = chosen.len();
        let mut out = Vec::with_capacity(n);
        for (key, reason) in chosen {
            if let Some(p) = self.unresolved.remove(&key) {
                fold(&mut self.absorbers.unknown, unknown_key(&key), p.acc);
                self.tombstone_all(key, &p.subs, false, &mut out);
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
