//! The reconciler's [`AttributionSnapshot`] as the ledger's
//! [`AttributionSource`]: one snapshot and the committed plan it came
//! from, swapped together (DESIGN §7, §11).

use std::sync::{Arc, PoisonError, RwLock};

use lachesis_abi::Mac;
use lachesis_ledger::{Attribution, AttributionSource, BindingLabels, CommittedPlan};
use lachesis_planner::Plan;

use crate::reconcile::AttributionSnapshot;

/// An attribution snapshot paired with the plan a flush writes beside it.
#[derive(Debug, Clone, Default)]
pub struct PlannedAttribution {
    /// Bindings, ghosts, router MACs and names.
    pub snapshot: Arc<AttributionSnapshot>,
    /// The committed plan `snapshot` was derived from, with its ghosts, as
    /// the state file writes it ([`crate::reconcile::committed`]).
    pub plan: CommittedPlan,
    /// The same plan, decoded: what the sweep re-encodes with the ghosts it
    /// leaves.
    pub tree: Arc<Plan>,
}

impl Attribution for PlannedAttribution {
    fn binding(&self, vm_mac: Mac) -> Option<BindingLabels<'_>> {
        self.snapshot.binding(vm_mac).map(|b| BindingLabels {
            tenant_id: &b.tenant,
            server_id: &b.server,
            port_id: &b.port,
            fallback_external_network: b.external_network.as_deref(),
        })
    }

    fn macs_on_port(&self, server_id: &str, port_id: &str, tenant_id: &str) -> Vec<Mac> {
        let s = &*self.snapshot;
        s.live
            .iter()
            .chain(s.ghosts.iter())
            .filter(|(_, b)| b.server == server_id && b.port == port_id && b.tenant == tenant_id)
            .map(|(m, _)| *m)
            .collect()
    }

    fn router_external_network(&self, peer_mac: Mac) -> Option<&str> {
        self.snapshot.routers.get(&peer_mac).map(String::as_str)
    }

    fn tenant_name(&self, tenant_id: &str) -> Option<&str> {
        self.snapshot
            .tenant_names
            .get(tenant_id)
            .map(String::as_str)
    }

    fn server_name(&self, server_id: &str) -> Option<&str> {
        self.snapshot
            .server_names
            .get(server_id)
            .map(String::as_str)
    }

    fn plan(&self) -> &CommittedPlan {
        &self.plan
    }
}

/// The ledger's attribution source: swapped only by the ledger owner,
/// inside a settle's critical section (or alone in a settle-free batch).
#[derive(Debug, Default)]
pub struct AgentSource {
    current: RwLock<Arc<PlannedAttribution>>,
}

impl AgentSource {
    /// Serving `initial`.
    #[must_use]
    pub fn new(initial: PlannedAttribution) -> Self {
        AgentSource {
            current: RwLock::new(Arc::new(initial)),
        }
    }

    /// The attribution in force.
    #[must_use]
    pub fn current(&self) -> Arc<PlannedAttribution> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Swaps in `next`.
    pub(crate) fn store(&self, next: PlannedAttribution) {
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(next);
    }
}

impl AttributionSource for AgentSource {
    fn load(&self) -> Arc<dyn Attribution + Send + Sync> {
        self.current()
    }
}
