//! The billing ledger of Lachesis: cumulative rows fed by kernel drains,
//! the unresolved buffer, settle/absorbers, the Prometheus export and the
//! state file (DESIGN §3, §4.3, §7, §9, §10, §11, §12; docs/ledger.md).
//!
//! The ledger never talks to the kernel or to the cloud APIs: readings
//! arrive folded, attribution comes through the [`AttributionSource`] it
//! owns (loaded inside its lock, with the committed plan a flush writes
//! beside it), and the kernel entries to delete are handed back by the
//! flush that makes their release durable ([`state::FlushReport::delete`]).
//!
//! Layers (docs/ledger.md): the core — rows and the delta rule, the
//! unresolved buffer, settle and absorbers, the billing tiers, the [`Ledger`]
//! handle — knows nothing of how it is persisted or rendered; [`state`]
//! (the file) and [`export`] (Prometheus) are built on it, and the export
//! also renders the state file's health.
//! Its ordering rules are enforced: a caller that breaks them gets a
//! [`DrainError`] or a [`SettleError`], never a silent misbill.
//!
//! The whole protocol an agent follows, with the in-memory attribution of
//! [`memory`] and a stand-in kernel (the datapath's drains and
//! lookup-and-delete return exactly these readings):
//!
//! ```
//! use std::collections::BTreeMap;
//! use std::sync::Arc;
//! use lachesis_abi::{Direction, EntryKey, FlowCounters, FlowKey, L4Class, Mac, Zone};
//! use lachesis_ledger::memory::{MemoryAttribution, OwnedBinding, SwapSource};
//! use lachesis_ledger::{
//!     CommittedPlan, Exporter, Format, Ledger, Selector, SettleMode, UnresolvedLimits,
//! };
//! use lachesis_ledger::state::{StateFile, StatePaths};
//!
//! let (vm, router) = (Mac([2, 0, 0, 0, 0, 1]), Mac([2, 0, 0, 0, 0, 0xfe]));
//! let key = FlowKey {
//!     src_mac: vm.0,
//!     dst_mac: router.0,
//!     eth_proto: 0x0800,
//!     direction: Direction::Tx.code(),
//!     zone: Zone::External.code(),
//!     l4: L4Class::Tcp.code(),
//!     pad: 0,
//! };
//! // The agent's attribution, and the plan it was derived from (encoded once).
//! let plan = |project: &str| {
//!     let mut a = MemoryAttribution::default();
//!     a.bindings.insert(vm, OwnedBinding::new(project, "server-1", "port-1"));
//!     a.routers.insert(router, "public".to_owned());
//!     a.plan = CommittedPlan::encode(&format!("bindings of {project}")).unwrap();
//!     a
//! };
//! // The kernel's `flows` map: one sub-entry per CPU that counts the flow
//! // (DESIGN §4.7), each counting on between our reads.
//! let mut kernel = BTreeMap::new();
//! let count = |kernel: &mut BTreeMap<EntryKey, FlowCounters>, cpu: u16, bytes: u64| {
//!     let created_ns = 7 + u64::from(cpu);
//!     let e = kernel
//!         .entry(EntryKey::new(key, cpu))
//!         .or_insert(FlowCounters { created_ns, ..Default::default() });
//!     e.bytes += bytes;
//!     e.packets += 1;
//! };
//! let read = |kernel: &BTreeMap<EntryKey, FlowCounters>| -> Vec<(EntryKey, FlowCounters)> {
//!     kernel.iter().map(|(k, v)| (*k, *v)).collect()
//! };
//! let dir = tempfile::tempdir().unwrap();
//! let file = Arc::new(StateFile::new(StatePaths::new(dir.path().join("state.json"))));
//!
//! // A previous life of the agent left a state file (project-a's plan).
//! let source = Arc::new(SwapSource::new(plan("project-a")));
//! let earlier = Ledger::new(UnresolvedLimits::default(), source.clone());
//! count(&mut kernel, 0, 1000);
//! earlier.apply_drain(&read(&kernel), 1).unwrap();
//! file.flush(&earlier).unwrap();
//! count(&mut kernel, 1, 500); // counted on another CPU while the agent restarts
//!
//! // Boot (§12): restore under the file's plan → drain (the retired map,
//! // if any, first) → flush → settle to the fresh plan → flush.
//! let loaded = file.load().unwrap();
//! let ledger = Arc::new(Ledger::new(UnresolvedLimits::default(), source.clone()));
//! ledger.restore_interner(&loaded.book.interner).unwrap(); // before step 2 interns
//! let file_plan = file.restore(&ledger, loaded, 2).unwrap();
//! assert_eq!(file_plan, plan("project-a").plan); // the source serves this one
//! ledger.expect_retired(0); // the datapath's load returned no retired map
//! ledger.apply_drain(&read(&kernel), 3).unwrap();
//! file.flush(&ledger).unwrap();
//! let fresh = plan("project-b"); // the port moved while the agent was down
//! ledger
//!     .settle(SettleMode::Rebase(Selector::VmMac(vm)), || source.store(fresh.clone()))
//!     .unwrap();
//! file.flush(&ledger).unwrap();
//!
//! // A reconcile pass with a settle batch: drain → flush → settles → flush.
//! count(&mut kernel, 0, 200);
//! ledger.apply_drain(&read(&kernel), 4).unwrap();
//! file.flush(&ledger).unwrap();
//! let mut regatewayed = fresh.clone();
//! regatewayed.routers.insert(router, "public-2".to_owned());
//! regatewayed.plan = CommittedPlan::encode("regatewayed").unwrap();
//! ledger
//!     .settle(SettleMode::Rebase(Selector::RouterPeer(router)), || {
//!         source.store(regatewayed.clone());
//!     })
//!     .unwrap();
//! file.flush(&ledger).unwrap();
//!
//! // A ghost sweep: final drain → flush → evict (the binding dropped in the
//! // same critical section) → flush → lookup-and-delete what that flush
//! // released → apply the final readings → flush.
//! count(&mut kernel, 1, 300);
//! ledger.apply_drain(&read(&kernel), 5).unwrap();
//! file.flush(&ledger).unwrap();
//! let mut swept = regatewayed.clone();
//! swept.bindings.remove(&vm);
//! ledger
//!     .settle(SettleMode::Evict { vm_mac: vm }, || source.store(swept.clone()))
//!     .unwrap();
//! let released = file.flush(&ledger).unwrap().delete;
//! assert_eq!(released, vec![EntryKey::new(key, 0), EntryKey::new(key, 1)]);
//! count(&mut kernel, 1, 40); // still counting until its deletion
//! let finals: Vec<_> = released.iter().filter_map(|k| kernel.remove_entry(k)).collect();
//! ledger.apply_final(&finals, 6).unwrap();
//!
//! // The periodic flush: every interval and at shutdown.
//! file.flush(&ledger).unwrap();
//!
//! // HTTP: billing shows the last flush. Project A kept its 1 500 bytes,
//! // B its 500; the 40 counted after the sweep's drain, with no binding left,
//! // went to `unknown`; nothing was lost.
//! let mut body = String::new();
//! Exporter::new(ledger.clone(), file.clone()).render(Format::PrometheusText, &mut body).unwrap();
//! let series = |tenant: &str, net: &str| {
//!     format!(
//!         "lachesis_tenant_bytes_total{{tenant_id=\"{tenant}\",zone=\"external\",\
//!          external_network=\"{net}\",direction=\"tx\"}}"
//!     )
//! };
//! assert!(body.contains(&format!("{} 1500\n", series("project-a", "public"))));
//! assert!(body.contains(&format!("{} 200\n", series("project-b", "public"))));
//! assert!(body.contains(&format!("{} 300\n", series("project-b", "public-2"))));
//! assert!(body.contains(&format!("{} 40\n", series("unknown", "none"))));
//! assert_eq!(ledger.health().lost_final_readings, 0);
//! ```

#![deny(missing_docs)]

mod absorbers;
mod attribution;
mod book;
mod counts;
mod delta;
pub mod export;
mod flow;
mod health;
mod interner;
mod ledger;
pub mod memory;
mod settle;
pub mod state;
mod subs;
mod tiers;
mod unresolved;

pub use absorbers::{
    unknown_key, Absorbers, Label, PortBucket, PortProtoBucket, ServerBucket, TenantBucket,
    TotalBucket,
};
pub use attribution::{
    external_network, Attribution, AttributionSource, BindingLabels, CommittedPlan, NONE,
    UNKNOWN_TENANT,
};
pub use book::{Book, DrainReport, Reading, Row};
pub use counts::Counts;
pub use delta::{delta, Baseline, DeltaCase};
pub use export::{Exporter, Format, LedgerCollector, PortTotals};
pub use health::{AnomalyKind, Health};
pub use interner::{
    InternerConflict, InternerFull, InvalidInterner, TenantInterner, GLOBAL_TENANT_ID,
};
pub use ledger::{DrainError, Ledger, LedgerSizes, SettleError};
pub use settle::{PruneError, PruneReport, PruneTier, Selector, SettleMode, SettleReport};
pub use subs::{Sub, Subs};
pub use unresolved::{EvictReason, Pending, Tombstone, UnresolvedLimits};
