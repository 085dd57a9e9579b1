//! The plan: the desired kernel state and its diagnostics (docs/plan-schema.md).

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

use lachesis_abi::{Mac, Zone};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::sources::Sources;
use lachesis_abi::Prefix;

/// Which tenant id a trie row is keyed under: every tenant (kernel tenant
/// id 0, printed `*`) or one project.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    /// Tenant id 0: consulted when the VM's own tenant has no row.
    Global,
    /// One Keystone project (UUID string).
    Tenant(String),
}

impl Scope {
    /// The text form: `*` or the project id.
    #[must_use]
    pub fn as_str(&self) -> &str {
        match self {
            Scope::Global => "*",
            Scope::Tenant(t) => t,
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Scope {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Scope {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Ok(if s == "*" {
            Scope::Global
        } else {
            Scope::Tenant(s)
        })
    }
}

/// One LPM trie row (DESIGN §6.1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrieRow {
    /// `*` or a project id.
    pub tenant: Scope,
    /// Canonical prefix.
    pub prefix: Prefix,
    /// The zone a remote address under this row gets.
    #[serde(with = "zone_label")]
    pub zone: Zone,
}

/// One `endpoints` entry and its userspace attribution (DESIGN §6.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binding {
    /// The VM-side MAC.
    #[serde(with = "mac_text")]
    pub mac: Mac,
    /// Project billed (the load balancer's owner for amphora data ports).
    pub tenant: String,
    /// Nova server (`device_id`; a trunk subport's parent's server).
    pub server: String,
    /// Neutron port id.
    pub port: String,
    /// Fallback external network label (DESIGN §6.4); `None` prints `none`.
    #[serde(with = "label_or_none")]
    pub external_network: Option<String>,
    /// Amphora data port (kernel flag bit 0).
    pub amphora: bool,
}

/// A router interface MAC and its router's external network (DESIGN §6.4 rule 1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouterMac {
    /// The interface port's MAC.
    #[serde(with = "mac_text")]
    pub mac: Mac,
    /// Router id.
    pub router: String,
    /// The router's external gateway network label; `None` prints `none`.
    #[serde(with = "label_or_none")]
    pub external_network: Option<String>,
}

/// An amphora data-port address under its load balancer's owner (DESIGN §6.5).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AmphoraIp {
    /// The load balancer's project.
    pub tenant: String,
    /// The address.
    pub address: IpAddr,
}

/// Anomaly classes of DESIGN §6.6 (plus `amphora_without_lb_network_ip`,
/// `mac_conflict` and `unknown_project`, see docs/planner.md). Declared in label order so the
/// derived ordering is the documented sort order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnomalyClass {
    /// Resolved answers for one route destination disagree: subnets of
    /// several owners behind a router (step C), ECMP routes at a later hop,
    /// or one project's routes of that destination.
    Ambiguity,
    /// A live amphora without `lb_network_ip`: its ports are not
    /// re-attributed (the management port cannot be told apart).
    AmphoraWithoutLbNetworkIp,
    /// A static route walks back to a router already visited.
    Cycle,
    /// A route's nexthop is not on any subnet attached to its router.
    DanglingRoute,
    /// Several routers' interface ports share one MAC.
    DuplicateRouterMac,
    /// Admitted ports of different projects claim one MAC, or a port claims
    /// a platform port's MAC (not bound).
    MacConflict,
    /// A static route needs more router hops than the limit.
    MaxHops,
    /// Bound ports whose ids agree on the 11 characters Nova names their
    /// tap after (`tap` + 11): no tap can be tied to one of them, so their
    /// received broadcast and multicast stays unattributed.
    TapNameCollision,
    /// A VM (or router) has several candidate external networks.
    MultiExternalPath,
    /// A load balancer on a provider other than amphora.
    NonAmphoraLb,
    /// Networks of one project have overlapping subnets.
    OverlappingOwnedSubnets,
    /// A trunk subport whose traffic cannot be told apart from another
    /// port's, or whose parent port is unknown.
    TrunkSubports,
    /// A port whose `device_owner` this planner does not know.
    UnknownDeviceOwner,
    /// An admitted port whose project is not in the Keystone list.
    UnknownProject,
}

impl AnomalyClass {
    /// Every class, for seeding per-class gauges.
    pub const ALL: &'static [AnomalyClass] = &[
        AnomalyClass::Ambiguity,
        AnomalyClass::AmphoraWithoutLbNetworkIp,
        AnomalyClass::Cycle,
        AnomalyClass::DanglingRoute,
        AnomalyClass::DuplicateRouterMac,
        AnomalyClass::MacConflict,
        AnomalyClass::MaxHops,
        AnomalyClass::MultiExternalPath,
        AnomalyClass::NonAmphoraLb,
        AnomalyClass::OverlappingOwnedSubnets,
        AnomalyClass::TapNameCollision,
        AnomalyClass::TrunkSubports,
        AnomalyClass::UnknownDeviceOwner,
        AnomalyClass::UnknownProject,
    ];

    /// The stable label (`cycle`, `max_hops`, …).
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            AnomalyClass::Ambiguity => "ambiguity",
            AnomalyClass::AmphoraWithoutLbNetworkIp => "amphora_without_lb_network_ip",
            AnomalyClass::Cycle => "cycle",
            AnomalyClass::DanglingRoute => "dangling_route",
            AnomalyClass::DuplicateRouterMac => "duplicate_router_mac",
            AnomalyClass::MacConflict => "mac_conflict",
            AnomalyClass::MaxHops => "max_hops",
            AnomalyClass::MultiExternalPath => "multi_external_path",
            AnomalyClass::NonAmphoraLb => "non_amphora_lb",
            AnomalyClass::OverlappingOwnedSubnets => "overlapping_owned_subnets",
            AnomalyClass::TapNameCollision => "tap_name_collision",
            AnomalyClass::TrunkSubports => "trunk_subports",
            AnomalyClass::UnknownDeviceOwner => "unknown_device_owner",
            AnomalyClass::UnknownProject => "unknown_project",
        }
    }
}

impl fmt::Display for AnomalyClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// Something in the snapshot an operator should look at.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Anomaly {
    /// The class (a bounded metric label).
    pub class: AnomalyClass,
    /// Which objects, and what the planner did about it.
    pub detail: String,
}

/// Why the static-route resolver fell back to `external` (DESIGN §6.2),
/// exported as `lachesis_plan_route_fallbacks{reason}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FallbackReason {
    /// Step C: the destination is in subnets of several owners.
    Ambiguity,
    /// Step B: the walk came back to a router already visited.
    Cycle,
    /// Step A: no subnet attached to the router contains the nexthop.
    DanglingNexthop,
    /// The hop limit was reached.
    MaxHops,
    /// Step B: no port on the subnet holds the nexthop address.
    NexthopNoPort,
    /// Step B: the nexthop's port is neither a router interface nor a VM
    /// (e.g. a gateway port on an external network, or an unknown router).
    NexthopNotRouter,
    /// Step E: the next router neither holds the destination nor has a route to it.
    NoRoute,
}

impl FallbackReason {
    /// Every reason, in label order.
    pub const ALL: &'static [FallbackReason] = &[
        FallbackReason::Ambiguity,
        FallbackReason::Cycle,
        FallbackReason::DanglingNexthop,
        FallbackReason::MaxHops,
        FallbackReason::NexthopNoPort,
        FallbackReason::NexthopNotRouter,
        FallbackReason::NoRoute,
    ];

    /// The stable label.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            FallbackReason::Ambiguity => "ambiguity",
            FallbackReason::Cycle => "cycle",
            FallbackReason::DanglingNexthop => "dangling_nexthop",
            FallbackReason::MaxHops => "max_hops",
            FallbackReason::NexthopNoPort => "nexthop_no_port",
            FallbackReason::NexthopNotRouter => "nexthop_not_router",
            FallbackReason::NoRoute => "no_route",
        }
    }
}

/// Tunables of the planner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanOptions {
    /// Router-to-router hops a static route may take (DESIGN §6.2, default 16).
    pub hop_limit: u32,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions { hop_limit: 16 }
    }
}

/// The desired state: everything the agent programs, sorted, plus diagnostics.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// Trie rows sorted by (tenant, prefix); one row per (tenant, prefix).
    pub trie: Vec<TrieRow>,
    /// Bindings sorted by MAC; one per MAC.
    pub bindings: Vec<Binding>,
    /// Router interface MACs sorted by MAC; one per MAC.
    pub router_macs: Vec<RouterMac>,
    /// Amphora addresses sorted by (tenant, address).
    pub amphora_ips: Vec<AmphoraIp>,
    /// Anomalies sorted by (class, detail), deduplicated.
    pub anomalies: Vec<Anomaly>,
    /// Resolver fallbacks by reason, every reason present.
    pub route_fallbacks: BTreeMap<FallbackReason, u64>,
    /// Which best-effort lists were fetched, failed or absent. Plans stored
    /// before this key existed read back as all `absent`.
    #[serde(default)]
    pub sources: Sources,
}

impl Plan {
    /// Anomaly counts by class, every class present (for gauges).
    #[must_use]
    pub fn anomaly_counts(&self) -> BTreeMap<AnomalyClass, u64> {
        let mut out: BTreeMap<AnomalyClass, u64> =
            AnomalyClass::ALL.iter().map(|c| (*c, 0)).collect();
        for a in &self.anomalies {
            *out.entry(a.class).or_insert(0) += 1;
        }
        out
    }

    /// The documented JSON form (docs/plan-schema.md): pretty-printed, two
    /// spaces, trailing newline.
    #[must_use]
    pub fn to_json(&self) -> String {
        // Serializing these types cannot fail: every map key is a string
        // and every value is a plain string, number or boolean.
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }
}

#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's `with` functions take the field by reference, whatever its size"
)]
mod zone_label {
    use lachesis_abi::Zone;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(z: &Zone, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(z.label())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Zone, D::Error> {
        let s = String::deserialize(d)?;
        Zone::from_label(&s)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown zone label {s:?}")))
    }
}

#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's `with` functions take the field by reference, whatever its size"
)]
mod mac_text {
    use lachesis_abi::Mac;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(m: &Mac, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(m)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Mac, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[expect(
    clippy::ref_option,
    reason = "serde's `with` functions take the field itself, `&Option<T>`"
)]
mod label_or_none {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(l: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(l.as_deref().unwrap_or("none"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        let s = String::deserialize(d)?;
        Ok(if s == "none" { None } else { Some(s) })
    }
}
