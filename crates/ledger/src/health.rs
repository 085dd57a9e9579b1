//! Health counters the ledger owns (rendered by its collector, DESIGN §10).

use crate::unresolved::EvictReason;

/// Classes of `lachesis_ledger_delta_anomalies_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnomalyKind {
    /// An older reading of an entry applied after a newer one (§4.3): ignored.
    Stale,
    /// A key with an unknown zone/direction/L4 code.
    InvalidKey,
    /// A key whose pad byte is not zero: refused at the door.
    NonzeroPad,
}

/// Monotone counters, mutated under the ledger lock.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Health {
    /// Unresolved rows moved to the ledger.
    pub resolutions: u64,
    /// Unresolved rows evicted on TTL.
    pub evictions_ttl: u64,
    /// Unresolved rows evicted on capacity.
    pub evictions_capacity: u64,
    /// Stale readings ignored (same entry, a counter lower than applied).
    pub anomalies_stale: u64,
    /// Undecodable keys skipped.
    pub anomalies_invalid_key: u64,
    /// Keys with a non-zero pad byte refused.
    pub anomalies_nonzero_pad: u64,
    /// Kernel entries released for deletion that were gone before their
    /// final reading reached the ledger (§11): their bytes since their last
    /// reading are lost.
    pub lost_final_readings: u64,
    /// Rows settled by eviction.
    pub settled_evict: u64,
    /// Rows settled by rebase.
    pub settled_rebase: u64,
    /// Server-settled buckets folded into tenant-settled.
    pub pruned_server: u64,
    /// Tenant-settled buckets folded into total-settled.
    pub pruned_tenant: u64,
    /// Prunes postponed because the owner still had live series.
    pub prunes_deferred: u64,
}

impl Health {
    pub(crate) fn anomaly(&mut self, kind: AnomalyKind) {
        match kind {
            AnomalyKind::Stale => self.anomalies_stale += 1,
            AnomalyKind::InvalidKey => self.anomalies_invalid_key += 1,
            AnomalyKind::NonzeroPad => self.anomalies_nonzero_pad += 1,
        }
    }

    pub(crate) fn evicted(&mut self, reason: EvictReason) {
        match reason {
            EvictReason::Ttl => self.evictions_ttl += 1,
            EvictReason::Capacity => self.evictions_capacity += 1,
        }
    }
}
