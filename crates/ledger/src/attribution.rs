//! The seam through which the ledger learns who a MAC belongs to. The ledger
//! never knows the cloud: the agent implements these traits over the planner's
//! bindings and router-MAC map (DESIGN §6.3, §6.4).

use std::fmt::{self, Debug};
use std::sync::Arc;

use lachesis_abi::Mac;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

/// The attribution of one bound VM MAC, borrowed from the current bindings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BindingLabels<'a> {
    /// Keystone project id (UUID).
    pub tenant_id: &'a str,
    /// Nova server id (the port's `device_id`).
    pub server_id: &'a str,
    /// Neutron port id.
    pub port_id: &'a str,
    /// The VM's fallback external network label (§6.4 rule 2), if any.
    pub fallback_external_network: Option<&'a str>,
}

/// The current bindings as the ledger needs them. A ghost binding (port gone,
/// still inside its grace window) must still resolve: its rows are settled
/// under it before it is removed (§9 ghost sweep).
pub trait Attribution {
    /// The binding of a VM MAC, `None` when the MAC is not bound at all.
    fn binding(&self, vm_mac: Mac) -> Option<BindingLabels<'_>>;
    /// Every VM MAC bound to this (server, port, tenant) — several when the
    /// port has allowed-address-pair MACs such as VRRP ones (§6.3). Evicting
    /// one of them folds its bytes into the port tier under another, so the
    /// port's continuing series does not go down.
    fn macs_on_port(&self, server_id: &str, port_id: &str, tenant_id: &str) -> Vec<Mac>;
    /// The external network behind a router interface MAC (§6.4 rule 1).
    fn router_external_network(&self, peer_mac: Mac) -> Option<&str>;
    /// Display name of a project, for `lachesis_tenant_info`.
    fn tenant_name(&self, tenant_id: &str) -> Option<&str>;
    /// Display name of a server, for `lachesis_server_info`.
    fn server_name(&self, server_id: &str) -> Option<&str>;
    /// The committed plan this attribution was derived from. A flush takes
    /// it from the same snapshot as the attribution, under the ledger lock,
    /// so the state file never pairs settled rows with an older plan.
    fn plan(&self) -> &CommittedPlan;
}

/// The agent's last committed plan as the state file stores it (DESIGN
/// §11): encoded once when the plan is committed, then shared, so a flush
/// neither clones nor re-encodes it. The ledger never looks inside.
#[derive(Clone)]
pub struct CommittedPlan(Arc<RawValue>);

impl CommittedPlan {
    /// No plan (JSON `null`): what a first boot has.
    #[must_use]
    pub fn none() -> CommittedPlan {
        static NULL: std::sync::OnceLock<Arc<RawValue>> = std::sync::OnceLock::new();
        CommittedPlan(
            NULL.get_or_init(|| {
                Arc::from(RawValue::from_string("null".to_owned()).expect("null is JSON"))
            })
            .clone(),
        )
    }

    /// Encodes `plan` once.
    pub fn encode<T: Serialize + ?Sized>(plan: &T) -> Result<CommittedPlan, serde_json::Error> {
        Ok(CommittedPlan(Arc::from(serde_json::value::to_raw_value(
            plan,
        )?)))
    }

    /// Adopts already encoded JSON text (checked to be one JSON value).
    pub fn from_json(text: String) -> Result<CommittedPlan, serde_json::Error> {
        Ok(CommittedPlan(Arc::from(RawValue::from_string(text)?)))
    }

    /// The JSON text.
    #[must_use]
    pub fn json(&self) -> &str {
        self.0.get()
    }

    /// Decodes the plan into the agent's own type.
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_str(self.json())
    }

    /// Whether there is no plan (`null`).
    #[must_use]
    pub fn is_none(&self) -> bool {
        self.json() == "null"
    }
}

impl Default for CommittedPlan {
    fn default() -> Self {
        CommittedPlan::none()
    }
}

impl PartialEq for CommittedPlan {
    fn eq(&self, other: &Self) -> bool {
        self.json() == other.json()
    }
}

impl Eq for CommittedPlan {}

impl Debug for CommittedPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CommittedPlan({} bytes of JSON)", self.json().len())
    }
}

impl Serialize for CommittedPlan {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for CommittedPlan {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(d)?;
        Ok(CommittedPlan(Arc::from(raw)))
    }
}

/// Where the exporter gets the attribution in force at scrape time. Called
/// with the ledger lock held, so a settle-then-swap done through
/// [`crate::Ledger::settle`] can never be observed half-way.
pub trait AttributionSource: Debug + Send + Sync + 'static {
    /// The current attribution snapshot.
    fn load(&self) -> Arc<dyn Attribution + Send + Sync>;
}

/// External-network label for a flow (§6.4): only zone `external` carries one,
/// router MAC first, then the VM's fallback, else `none`.
#[must_use]
pub fn external_network<'a>(
    attr: &'a dyn Attribution,
    zone_is_external: bool,
    peer_mac: Mac,
    binding: Option<&BindingLabels<'a>>,
) -> &'a str {
    if !zone_is_external {
        return NONE;
    }
    attr.router_external_network(peer_mac)
        .or_else(|| binding.and_then(|b| b.fallback_external_network))
        .unwrap_or(NONE)
}

/// The label value for "no external network" and "no server/port".
pub const NONE: &str = "none";

/// The pseudo-tenant of bytes whose VM MAC never resolved (§9).
pub const UNKNOWN_TENANT: &str = "unknown";
