//! What the debug listener reads from the running daemon, behind seams the
//! daemon implements (and the tests fake): the live state, the log level,
//! and readiness.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use lachesis_abi::{Direction, L4Class, Mac, Zone};
use lachesis_ledger::PortTotals;
use lachesis_planner::{Anomaly, Binding, Plan, Topology};
use serde::{Serialize, Serializer};

use crate::config::{Config, LogLevel};
use crate::links::TapBoard;
use crate::reconcile::LastPass;

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

    /// The agent's health now (the strip on every page).
    fn health(&self) -> AgentHealth;

    /// This node's matching interfaces as the link watcher knows them.
    fn taps(&self) -> NodeTaps;

    /// Every port's cumulative counts in the ledger's durable view (the
    /// last state-file flush: what `/metrics` exports), by port id.
    fn port_totals(&self) -> BTreeMap<String, PortTotals>;
}

/// What the health strip of every page shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentHealth {
    /// The boot phase (`lachesis_boot_phase`): `running` once boot is
    /// done; `None` before the first.
    pub phase: Option<&'static str>,
    /// Running from the state file's plan, no sync yet (`lachesis_degraded`).
    pub degraded: bool,
    /// When the committed plan was synced (`lachesis_openstack_sync_age_seconds`
    /// counts from it); `None` before the first.
    pub synced_at: Option<SystemTime>,
    /// The last reconcile pass; `None` before the first (cold start's
    /// sync is not one).
    pub last_pass: Option<LastPass>,
}

/// The link watcher's view of this node, for `/debug/ui/node`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeTaps {
    /// How the programs are attached on this kernel: `tcx` or `tc`.
    pub attach_mode: &'static str,
    /// How often the presence check runs.
    pub presence_interval: Duration,
    /// Every matching interface the watcher tracks.
    pub board: Arc<TapBoard>,
    /// `lachesis_attach_heals_total` (heals of taps since gone included).
    pub heals_total: u64,
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
/// its subscriber's reload handle) and says which filter is in force for
/// `GET /debug/log-level`.
pub trait LogLevelControl: Send + Sync {
    /// Makes `level` the least severe level written from now on.
    fn set_level(&self, level: LogLevel) -> Result<(), String>;

    /// The filter in force now; `None` when this control does not keep
    /// track (a bare closure: tests). [`TrackedLevel`] does.
    fn current(&self) -> Option<LogFilter> {
        None
    }
}

impl<F> LogLevelControl for F
where
    F: Fn(LogLevel) -> Result<(), String> + Send + Sync,
{
    fn set_level(&self, level: LogLevel) -> Result<(), String> {
        self(level)
    }
}

/// What filters the log now: one of the levels, or the directives
/// `RUST_LOG` gave at start (until a level replaces them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogFilter {
    /// `--log-level`, `log.level`, a reload or `PUT /debug/log-level`.
    Level(LogLevel),
    /// `RUST_LOG`'s directives, as given.
    Directives(String),
}

/// A [`LogLevelControl`] that remembers what it applied last: every
/// change of the filter (a SIGHUP reload, `PUT /debug/log-level`) goes
/// through the one control the process holds, so what it remembers is
/// what filters the log.
pub struct TrackedLevel<F> {
    apply: F,
    current: std::sync::Mutex<LogFilter>,
}

impl<F> std::fmt::Debug for TrackedLevel<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrackedLevel")
            .field("current", &self.current)
            .finish_non_exhaustive()
    }
}

impl<F> TrackedLevel<F>
where
    F: Fn(LogLevel) -> Result<(), String> + Send + Sync,
{
    /// `apply` replaces the filter; `initial` is the one installed at start.
    pub fn new(initial: LogFilter, apply: F) -> Self {
        TrackedLevel {
            apply,
            current: std::sync::Mutex::new(initial),
        }
    }
}

impl<F> LogLevelControl for TrackedLevel<F>
where
    F: Fn(LogLevel) -> Result<(), String> + Send + Sync,
{
    fn set_level(&self, level: LogLevel) -> Result<(), String> {
        // Held across the apply: two concurrent changes are remembered in
        // the order they were applied.
        let mut current = self
            .current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        (self.apply)(level)?;
        *current = LogFilter::Level(level);
        Ok(())
    }

    fn current(&self) -> Option<LogFilter> {
        Some(
            self.current
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone(),
        )
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

#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's `serialize_with` passes fields by reference"
)]
fn ethertype<S: Serializer>(v: &u16, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&format_args!("0x{v:04x}"))
}
