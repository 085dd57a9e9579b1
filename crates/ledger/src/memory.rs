//! A plain in-memory [`Attribution`] and a swappable [`AttributionSource`]:
//! what tests, benchmarks and the demo use, and a reference for the agent's
//! own implementation over the planner's bindings.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use lachesis_abi::Mac;

use crate::attribution::{Attribution, AttributionSource, BindingLabels, CommittedPlan};

/// One binding, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedBinding {
    /// Project id.
    pub tenant_id: String,
    /// Server id.
    pub server_id: String,
    /// Port id.
    pub port_id: String,
    /// Fallback external network label.
    pub fallback_external_network: Option<String>,
}

impl OwnedBinding {
    /// A binding without a fallback external network.
    #[must_use]
    pub fn new(tenant_id: &str, server_id: &str, port_id: &str) -> Self {
        OwnedBinding {
            tenant_id: tenant_id.to_owned(),
            server_id: server_id.to_owned(),
            port_id: port_id.to_owned(),
            fallback_external_network: None,
        }
    }

    /// The same binding with a fallback external network.
    #[must_use]
    pub fn with_fallback(mut self, network: &str) -> Self {
        self.fallback_external_network = Some(network.to_owned());
        self
    }
}

/// Bindings, router MACs and names held in hash maps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryAttribution {
    /// VM MAC → binding.
    pub bindings: HashMap<Mac, OwnedBinding>,
    /// Router interface MAC → external network label.
    pub routers: HashMap<Mac, String>,
    /// Project id → name.
    pub tenant_names: HashMap<String, String>,
    /// Server id → name.
    pub server_names: HashMap<String, String>,
    /// The committed plan these bindings come from (what a flush writes).
    pub plan: CommittedPlan,
}

impl Attribution for MemoryAttribution {
    fn binding(&self, vm_mac: Mac) -> Option<BindingLabels<'_>> {
        self.bindings.get(&vm_mac).map(|b| BindingLabels {
            tenant_id: &b.tenant_id,
            server_id: &b.server_id,
            port_id: &b.port_id,
            fallback_external_network: b.fallback_external_network.as_deref(),
        })
    }

    fn macs_on_port(&self, server_id: &str, port_id: &str, tenant_id: &str) -> Vec<Mac> {
        self.bindings
            .iter()
            .filter(|(_, b)| {
                b.server_id == server_id && b.port_id == port_id && b.tenant_id == tenant_id
            })
            .map(|(m, _)| *m)
            .collect()
    }

    fn router_external_network(&self, peer_mac: Mac) -> Option<&str> {
        self.routers.get(&peer_mac).map(String::as_str)
    }

    fn tenant_name(&self, tenant_id: &str) -> Option<&str> {
        self.tenant_names.get(tenant_id).map(String::as_str)
    }

    fn server_name(&self, server_id: &str) -> Option<&str> {
        self.server_names.get(server_id).map(String::as_str)
    }

    fn plan(&self) -> &CommittedPlan {
        &self.plan
    }
}

/// An attribution snapshot that can be replaced atomically.
#[derive(Debug, Default)]
pub struct SwapSource {
    current: RwLock<Arc<MemoryAttribution>>,
}

impl SwapSource {
    /// A source serving `attr`.
    #[must_use]
    pub fn new(attr: MemoryAttribution) -> Self {
        SwapSource {
            current: RwLock::new(Arc::new(attr)),
        }
    }

    /// The snapshot in force.
    #[must_use]
    pub fn current(&self) -> Arc<MemoryAttribution> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Replaces the snapshot (call it inside [`crate::Ledger::settle`]'s swap).
    pub fn store(&self, attr: MemoryAttribution) {
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(attr);
    }
}

impl AttributionSource for SwapSource {
    fn load(&self) -> Arc<dyn Attribution + Send + Sync> {
        self.current()
    }
}
