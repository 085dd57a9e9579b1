//! What the debug listener reads from the running daemon, behind seams the
//! daemon implements (and the tests fake): the live state, the log level,
//! and readiness.

use std::sync::Arc;

use lachesis_abi::{Direction, L4Class, Mac, Zone};
use lachesis_planner::{Anomaly, Binding, Plan, Topology};
use serde::{Serialize, Serializer};

use crate::config::{Config, LogLevel};

/// The daemon's live state, as the debug pages show it. Every method takes
/// a snapshot: a page never holds a daemon lock while it renders.
pub trait DebugSource: Send + Sync {
    /// The effective configuration (the one a SIGHUP reload last accepted).
    fn config(&self) -> Arc<Config>;

    /// The last plan the reconciler committed to the kernel (or the state
    /// file's plan in degraded mode); `None` before the first one.
    fn committed_plan(&self) -> Option<Arc<Plan>>;

    /// Every binding the kernel's `endpoints` map holds now: the committed
    /// plan's, plus ghosts kept for their grace window (DESIGN §9).
    fn bindings(&self) -> Vec<LiveBinding>;

    /// The cloud the committed plan was made from (names, networks,
    /// routers, floating IPs); `None` before the first sync and while the
    /// plan is the state file's.
    fn topology(&self) -> Option<Arc<Topology>>;

    /// Anomalies to list with their details (DESIGN §6.6); by default the
    /// committed plan's.
    fn anomalies(&self) -> Vec<Anomaly> {
        self.committed_plan()
            .map(|p| p.anomalies.clone())
            .unwrap_or_default()
    }

    /// At most `limit` flows, the largest byte counts first, and how many
    /// there are in all.
    fn flows(&self, limit: usize) -> FlowListing;
}

/// One `endpoints` entry as the kernel holds it now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LiveBinding {
    /// The binding (the plan's JSON form).
    #[serde(flatten)]
    pub binding: Binding,
    /// Kept past its port's deletion, inside the grace window.
    pub ghost: bool,
}

impl LiveBinding {
    /// A binding of the committed plan (not a ghost).
    #[must_use]
    pub fn live(binding: Binding) -> Self {
        LiveBinding {
            binding,
            ghost: false,
        }
    }
}

/// A bounded slice of the flow table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FlowListing {
    /// How many flows there are in all.
    pub total: usize,
    /// The largest flows, at most the requested limit.
    pub flows: Vec<FlowEntry>,
}

/// One kernel flow key, its cumulative counts in the ledger and who it is
/// billed to. MACs are the frame's own (not swapped), as in the kernel key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FlowEntry {
    /// Source MAC of the frames.
    #[serde(serialize_with = "display")]
    pub src_mac: Mac,
    /// Destination MAC of the frames.
    #[serde(serialize_with = "display")]
    pub dst_mac: Mac,
    /// Inner ethertype (`0x0800` IPv4, `0x86dd` IPv6).
    #[serde(serialize_with = "ethertype")]
    pub eth_proto: u16,
    /// `tx` or `rx`.
    #[serde(serialize_with = "display")]
    pub direction: Direction,
    /// The zone the kernel classified the flow into.
    #[serde(serialize_with = "display")]
    pub zone: Zone,
    /// L4 class.
    #[serde(serialize_with = "display")]
    pub l4: L4Class,
    /// Cumulative bytes.
    pub bytes: u64,
    /// Cumulative packets.
    pub packets: u64,
    /// Project billed; `None` while the VM MAC is unresolved.
    pub tenant: Option<String>,
    /// Nova server, when bound.
    pub server: Option<String>,
    /// Neutron port, when bound.
    pub port: Option<String>,
}

/// Applies a level chosen on `PUT /debug/log-level` (the daemon wires it to
/// its subscriber's reload handle).
pub trait LogLevelControl: Send + Sync {
    /// Makes `level` the least severe level written from now on.
    fn set_level(&self, level: LogLevel) -> Result<(), String>;
}

impl<F> LogLevelControl for F
where
    F: Fn(LogLevel) -> Result<(), String> + Send + Sync,
{
    fn set_level(&self, level: LogLevel) -> Result<(), String> {
        self(level)
    }
}

/// What `/readyz` asks: has boot completed (DESIGN §12)?
pub trait Readiness: Send + Sync {
    /// `Ok(())` once boot reached `running`; before, `Err` with the phase
    /// boot is in (or why it failed), shown in the 503 body.
    fn ready(&self) -> Result<(), String>;

    /// `/healthz`: `Err` with the reason when the process serves HTTP but
    /// no longer does its work (docs/agent-http.md: drains stalled), so a
    /// liveness probe or a watchdog can restart it. `Ok` by default.
    fn alive(&self) -> Result<(), String> {
        Ok(())
    }
}

impl<F> Readiness for F
where
    F: Fn() -> Result<(), String> + Send + Sync,
{
    fn ready(&self) -> Result<(), String> {
        self()
    }
}

pub(crate) fn display<T: std::fmt::Display, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

// serde's `serialize_with` passes fields by reference.
#[allow(clippy::trivially_copy_pass_by_ref)]
fn ethertype<S: Serializer>(v: &u16, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&format_args!("0x{v:04x}"))
}
