//! What the debug listener reads from the running daemon (the
//! [`DebugSource`] seam of `crate::http`).

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError, RwLock};

use lachesis_abi::{EntryKey, FlowCounters, FlowKey};
use lachesis_datapath::{AttachMode, Datapath, DrainBuffer};
use lachesis_ledger::{Ledger, PortTotals};
use lachesis_planner::{Plan, Topology};
use tokio::sync::watch;

use super::metrics::DaemonMetrics;
use crate::config::Config;
use crate::http::{AgentHealth, DebugSource, FlowEntry, FlowListing, LiveBinding, NodeTaps};
use crate::links::{LinkMetrics, TapBoardHandle};
use crate::order::PlannedAttribution;
use crate::reconcile::{AttributionSnapshot, Committed, ReconcileMetrics};

/// The live configuration, swapped by each accepted reload.
pub type LiveConfig = Arc<RwLock<Arc<Config>>>;

/// The daemon's state as the debug pages show it.
pub struct DebugState {
    /// The configuration in effect.
    pub config: LiveConfig,
    /// The reconciler's last committed plan.
    pub committed: watch::Receiver<Arc<Committed>>,
    /// The attribution the ledger resolves with.
    pub attribution: Box<dyn Fn() -> Arc<PlannedAttribution> + Send + Sync>,
    /// The kernel, read (never cleared) for `/debug/flows`.
    pub datapath: Arc<Datapath>,
    /// The ledger, whose durable view gives each port's bytes.
    pub ledger: Arc<Ledger>,
    /// Boot phase and degraded mode.
    pub daemon: DaemonMetrics,
    /// The last reconcile pass.
    pub reconcile: ReconcileMetrics,
    /// What the link watcher knows of each tap, and its heal count.
    pub taps: (TapBoardHandle, LinkMetrics),
}

impl std::fmt::Debug for DebugState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DebugState").finish_non_exhaustive()
    }
}

impl DebugSource for DebugState {
    fn config(&self) -> Arc<Config> {
        self.config
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn committed_plan(&self) -> Option<Arc<Plan>> {
        Some(self.committed.borrow().plan.clone())
    }

    fn bindings(&self) -> Vec<LiveBinding> {
        bindings(&(self.attribution)().snapshot)
    }

    fn topology(&self) -> Option<Arc<Topology>> {
        self.committed.borrow().topology.clone()
    }

    fn health(&self) -> AgentHealth {
        AgentHealth {
            phase: self.daemon.current_phase().map(crate::boot::Phase::label),
            degraded: self.daemon.is_degraded(),
            synced_at: Some(self.committed.borrow().synced_at),
            last_pass: self.reconcile.last_pass(),
        }
    }

    fn taps(&self) -> NodeTaps {
        NodeTaps {
            attach_mode: match self.datapath.attach_mode() {
                AttachMode::Tcx => "tcx",
                AttachMode::Tc => "tc",
                // Resolved when the datapath loaded; never left at auto.
                AttachMode::Auto => "auto",
            },
            presence_interval: super::PRESENCE_INTERVAL,
            board: self.taps.0.get(),
            heals_total: self.taps.1.heals(),
        }
    }

    fn port_totals(&self) -> BTreeMap<String, PortTotals> {
        self.ledger.durable_port_totals()
    }

    fn flows(&self, limit: usize) -> FlowListing {
        let mut buf = DrainBuffer::new();
        match self.datapath.drain(&mut buf) {
            Ok(()) => listing(&buf.entries, &(self.attribution)().snapshot, limit),
            Err(e) => {
                tracing::warn!(error = %e, "reading flows for /debug/flows");
                FlowListing::default()
            }
        }
    }
}

/// Live bindings, then ghosts, each flagged.
#[must_use]
pub fn bindings(s: &AttributionSnapshot) -> Vec<LiveBinding> {
    let live = s.live.values().map(|b| LiveBinding::live(b.clone()));
    let ghosts = s.ghosts.values().map(|b| LiveBinding {
        binding: b.clone(),
        ghost: true,
    });
    live.chain(ghosts).collect()
}

/// The `limit` largest flows by bytes (ties by key), attributed with `s`:
/// each flow key's sub-entries (one per CPU that counts it, DESIGN §4.7)
/// summed; flows whose codes are unknown are skipped.
#[must_use]
pub fn listing(
    entries: &[(EntryKey, FlowCounters)],
    s: &AttributionSnapshot,
    limit: usize,
) -> FlowListing {
    let mut flows: BTreeMap<FlowKey, FlowCounters> = BTreeMap::new();
    for (e, v) in entries {
        flows.entry(e.key).and_modify(|f| f.fold(v)).or_insert(*v);
    }
    let total = flows.len();
    let mut sorted: Vec<(FlowKey, FlowCounters)> = flows.into_iter().collect();
    sorted.sort_by(|a, b| b.1.bytes.cmp(&a.1.bytes).then(a.0.cmp(&b.0)));
    let flows = sorted
        .into_iter()
        .filter_map(|(k, v)| {
            let (direction, zone, l4) = (k.direction().ok()?, k.zone().ok()?, k.l4().ok()?);
            let vm = k.vm_mac().ok()?;
            let binding = s.binding(vm);
            Some(FlowEntry {
                src_mac: lachesis_abi::Mac(k.src_mac),
                dst_mac: lachesis_abi::Mac(k.dst_mac),
                eth_proto: k.eth_proto,
                direction,
                zone,
                l4,
                bytes: v.bytes,
                packets: v.packets,
                tenant: binding.map(|b| b.tenant.clone()),
                server: binding.map(|b| b.server.clone()),
                port: binding.map(|b| b.port.clone()),
            })
        })
        .take(limit)
        .collect();
    FlowListing { total, flows }
}
