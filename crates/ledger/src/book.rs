//! The ledger's state and the drain path: rows, the unresolved buffer and
//! the absorbers, always mutated together under one lock (held by
//! [`crate::Ledger`]).

use lachesis_abi::{FlowCounters, FlowKey};
use rustc_hash::FxHashMap;

use crate::absorbers::{fold, unknown_key, Absorbers};
use crate::attribution::Attribution;
use crate::counts::Counts;
use crate::delta::{delta, Baseline, DeltaCase};
use crate::flow::decode;
use crate::health::Health;
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
                    },
                );
            }
        }
        health.resolutions += ready.len() as u64;
        ready.len()
    }

    /// Applies one full-map drain (§4.3, §4.6). `readings` must cover the whole
    /// `flows` map: a tombstoned key absent from it is proven deleted.
    /// Returns the report and the kernel keys of the rows it evicted.
    pub(crate) fn apply_drain(
        &mut self,
        attr: &dyn Attribution,
        readings: &[(FlowKey, FlowCounters)],
        now_ns: u64,
        limits: UnresolvedLimits,
        health: &mut Health,
    ) -> (DrainReport, Vec<FlowKey>) {
        let mut report = DrainReport {
            resolved: self.resolve_pending(attr, health),
            ..DrainReport::default()
        };
        for (key, reading) in readings {
            let Some(d) = decode(key) else {
                report.invalid_keys += 1;
                health.anomaly(AnomalyKind::InvalidKey);
                continue;
            };
            if let Some(row) = self.rows.get_mut(key) {
                let (add, case) = delta(Some(&row.base), reading);
                row.total.add(add);
                row.base = Baseline::of(reading);
                health.note_case(case);
                continue;
            }
            if let Some(p) = self.unresolved.get_mut(key) {
                let (add, case) = delta(Some(&p.base), reading);
                p.acc.add(add);
                p.base = Baseline::of(reading);
                if !add.is_zero() {
                    p.last_active_ns = now_ns;
                }
                health.note_case(case);
                continue;
            }
            // A key the ledger holds no row for. If it was reported for
            // deletion and the entry may still be the same one, continue from
            // that baseline rather than counting its bytes a second time. A
            // stamp-0 tombstone (a row restored from schema 1) cannot be
            // compared: `delta` decides from the counters, as for a row.
            let tomb = self
                .tombstones
                .get(key)
                .filter(|t| t.base.stamp == 0 || t.base.stamp == reading.created_ns)
                .map(|t| t.base);
            let (add, case) = delta(tomb.as_ref(), reading);
            health.note_case(case);
            if attr.binding(d.vm_mac).is_some() {
                self.rows.insert(
                    *key,
                    Row {
                        total: add,
                        base: Baseline::of(reading),
                    },
                );
            } else {
                self.unresolved.insert(
                    *key,
                    Pending {
                        acc: add,
                        base: Baseline::of(reading),
                        first_seen_ns: now_ns,
                        last_active_ns: now_ns,
                    },
                );
            }
        }
        // A tombstoned entry absent from a full drain (or replaced by a newer
        // one) is gone from the kernel; one seen again is tracked by a row or
        // pending baseline from now on. Either way the tombstone has done its job.
        self.tombstones.clear();
        let evictions = self.evict_unresolved(limits, now_ns, health);
        report.evicted = evictions.len();
        (report, evictions)
    }

    /// Folds TTL-expired and over-capacity unresolved rows into `unknown` and
    /// returns the kernel keys to delete.
    pub(crate) fn evict_unresolved(
        &mut self,
        limits: UnresolvedLimits,
        now_ns: u64,
        health: &mut Health,
    ) -> Vec<FlowKey> {
        let chosen = select_evictions(&self.unresolved, limits, now_ns);
        let mut out = Vec::with_capacity(chosen.len());
        for (key, reason) in chosen {
            if let Some(p) = self.unresolved.remove(&key) {
                fold(&mut self.absorbers.unknown, unknown_key(&key), p.acc);
                self.tombstones.insert(key, Tombstone { base: p.base });
                health.evicted(reason);
                out.push(key);
            }
        }
        out
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

/// Classes of `lachesis_ledger_delta_anomalies_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnomalyKind {
    /// A counter wrapped across u64.
    Wrap,
    /// A counter went back under the same entry stamp.
    Regression,
    /// A key with an unknown zone/direction/L4 code.
    InvalidKey,
}

impl Health {
    fn note_case(&mut self, case: DeltaCase) {
        match case {
            DeltaCase::Wrapped => self.anomaly(AnomalyKind::Wrap),
            DeltaCase::Regressed => self.anomaly(AnomalyKind::Regression),
            _ => {}
        }
    }
}
