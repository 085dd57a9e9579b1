//! The ledger-order seam: how the reconciler asks for settles, attribution
//! swaps and prunes (DESIGN §7 "Settles and durability", §9).

use std::collections::{BTreeMap, BTreeSet};
use std::error::Error as StdError;
use std::future::Future;
use std::sync::Arc;

use lachesis_abi::Mac;
use lachesis_ledger::InternerFull;
use lachesis_planner::{Binding, Plan};

/// The attribution the ledger resolves rows with: what the userspace twin
/// of the `endpoints` map holds, plus the router-MAC map and the names.
/// Swapped whole, inside the settle batch's critical section.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AttributionSnapshot {
    /// Live bindings (desired by the last applied plan), by VM MAC.
    pub live: BTreeMap<Mac, Binding>,
    /// Ghosts: bindings no longer desired, kept resolvable until the sweep
    /// evicts them (DESIGN §9). A MAC is never in both maps.
    pub ghosts: BTreeMap<Mac, Binding>,
    /// Router interface MAC → its router's external network, only for
    /// routers with a gateway (DESIGN §6.4 rule 1).
    pub routers: BTreeMap<Mac, String>,
    /// Keystone project id → name.
    pub tenant_names: BTreeMap<String, String>,
    /// Nova server id → name.
    pub server_names: BTreeMap<String, String>,
}

impl AttributionSnapshot {
    /// The binding a VM MAC resolves to: live, else ghost.
    #[must_use]
    pub fn binding(&self, mac: Mac) -> Option<&Binding> {
        self.live.get(&mac).or_else(|| self.ghosts.get(&mac))
    }
}

/// One settle of a pass (DESIGN §9 *rebase*: fold under the attribution in
/// force, zero the rows, keep their raw baselines). Evictions are the ghost
/// sweep's, never a pass's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settle {
    /// Every row of this VM MAC: its binding's tenant, server, port or
    /// fallback external network changes (a live binding re-pointed, or a
    /// ghost desired again under another attribution).
    RebaseMac {
        /// The VM MAC.
        mac: Mac,
        /// The binding in force (the one the rows are settled under).
        from: Binding,
        /// The binding swapped in.
        to: Binding,
    },
    /// The zone-`external` rows whose peer is this router interface MAC: the
    /// external network those flows are labelled with changes (gateway set,
    /// changed or cleared; the MAC added to or removed from the map).
    RebaseRouterPeer {
        /// The router interface MAC.
        mac: Mac,
        /// The network in force (`None`: not a gateway router MAC).
        from: Option<String>,
        /// The network swapped in.
        to: Option<String>,
    },
}

impl Settle {
    /// The MAC the settle selects rows by.
    #[must_use]
    pub fn mac(&self) -> Mac {
        match self {
            Settle::RebaseMac { mac, .. } | Settle::RebaseRouterPeer { mac, .. } => *mac,
        }
    }
}

/// Everything one pass changes in the ledger's view, applied as one unit.
#[derive(Debug, Clone)]
pub struct SettleBatch {
    /// Settles, each under the attribution in force before the swap.
    pub settles: Vec<Settle>,
    /// The attribution to swap in after the settles.
    pub attribution: Arc<AttributionSnapshot>,
    /// The plan the swap comes from: the state file written by the flush
    /// after the settles must carry it (a restart restores the ledger under
    /// the attribution its rows were settled for).
    pub plan: Arc<Plan>,
    /// When each ghost of `attribution` was ghosted: written beside the
    /// plan, so a restart restores the ghosts with the grace they have left
    /// (docs/state-file.md). A ghost missing here counts from the swap.
    pub ghosted_at: BTreeMap<Mac, tokio::time::Instant>,
}

/// Boxed cause of a ledger-side failure.
pub type BoxError = Box<dyn StdError + Send + Sync>;

/// A settle batch that did not complete.
#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    /// Nothing was settled and nothing swapped (e.g. the flush before the
    /// settles failed): the old attribution is still in force.
    #[error("settle batch not applied: the previous attribution stays in force")]
    NotApplied(#[source] BoxError),
    /// Settled and swapped, but the flush after them failed: the owner keeps
    /// retrying it (the ledger refuses drains until it succeeds).
    #[error("settle batch applied but not yet durable")]
    NotDurable(#[source] BoxError),
}

/// A prune that did not complete (it is retried by the next pass).
#[derive(Debug, thiserror::Error)]
#[error("pruning {tier} buckets")]
pub struct PruneFailed {
    /// `server` or `tenant`.
    pub tier: &'static str,
    /// Why.
    #[source]
    pub source: BoxError,
}

/// The one owner of ledger order (DESIGN §7, §9), as the reconciler uses it.
/// Consumer-owned; the agent implements it over the ledger and the state
/// file, tests record the calls.
///
/// The contract an implementation keeps:
///
/// - **Serialised**: every call runs alone with respect to every other
///   drain, flush, settle batch, ghost sweep, prune and kernel flow delete
///   of the process (one task or one lock owns them all), so the periodic
///   flusher never writes settled rows beside a stale plan.
/// - [`settle_batch`](LedgerOrder::settle_batch) is **drain → flush →
///   every settle of the batch, in order, then the attribution swap, in one
///   critical section → flush** (the second flush writes
///   [`SettleBatch::plan`]). The drain first: bytes the kernel counted under
///   the old attribution since the last scrape are read before the
///   attribution moves, so none follow a port to its new project. A batch
///   with no settles moves no bytes and may skip the drain and the first
///   flush, but still swaps inside the same serialisation.
/// - An `Err(BatchError::NotApplied)` means nothing was settled or
///   swapped; `Err(BatchError::NotDurable)` means everything was and only
///   the last flush is owed.
/// - Prunes fold buckets of servers (projects) absent from `alive` and are
///   flushed before the next drain. The caller only passes a list from a
///   successful, non-empty fetch.
pub trait LedgerOrder: Send + Sync {
    /// The kernel tenant id of `project` (the ledger's persisted interner:
    /// ids are never reused or renumbered while a state file exists).
    fn tenant_id(&self, project: &str) -> Result<u32, InternerFull>;

    /// Drain → flush → settles + swap → flush, serialised.
    fn settle_batch(
        &self,
        batch: SettleBatch,
    ) -> impl Future<Output = Result<(), BatchError>> + Send;

    /// Ends the server-settled buckets of servers not in `alive`.
    fn prune_servers(
        &self,
        alive: BTreeSet<String>,
    ) -> impl Future<Output = Result<(), PruneFailed>> + Send;

    /// Folds the tenant-settled buckets of projects not in `alive` into
    /// total-settled.
    fn prune_tenants(
        &self,
        alive: BTreeSet<String>,
    ) -> impl Future<Output = Result<(), PruneFailed>> + Send;
}

impl<T: LedgerOrder> LedgerOrder for Arc<T> {
    fn tenant_id(&self, project: &str) -> Result<u32, InternerFull> {
        (**self).tenant_id(project)
    }

    fn settle_batch(
        &self,
        batch: SettleBatch,
    ) -> impl Future<Output = Result<(), BatchError>> + Send {
        (**self).settle_batch(batch)
    }

    fn prune_servers(
        &self,
        alive: BTreeSet<String>,
    ) -> impl Future<Output = Result<(), PruneFailed>> + Send {
        (**self).prune_servers(alive)
    }

    fn prune_tenants(
        &self,
        alive: BTreeSet<String>,
    ) -> impl Future<Output = Result<(), PruneFailed>> + Send {
        (**self).prune_tenants(alive)
    }
}
