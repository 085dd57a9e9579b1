//! The billing ledger of Lachesis: cumulative rows fed by kernel drains,
//! the unresolved buffer, settle/absorbers, the Prometheus export and the
//! state file (DESIGN §3, §4.3, §9, §10, §11; docs/ledger.md).
//!
//! The ledger never talks to the kernel or to the cloud APIs: drains arrive as
//! folded readings, attribution comes through the [`AttributionSource`] it
//! owns (loaded inside its lock), and kernel
//! entries to delete are handed back by the flush that makes their eviction
//! durable ([`state::FlushReport::delete`]).
//!
//! How the agent wires it (with the in-memory attribution of [`memory`]):
//!
//! ```
//! use std::sync::Arc;
//! use lachesis_abi::{Direction, FlowCounters, FlowKey, L4Class, Mac, Zone};
//! use lachesis_ledger::memory::{MemoryAttribution, OwnedBinding, SwapSource};
//! use lachesis_ledger::{state, Exporter, Format, Ledger, Selector, SettleMode, UnresolvedLimits};
//!
//! let vm = Mac([2, 0, 0, 0, 0, 1]);
//! let router = Mac([2, 0, 0, 0, 0, 0xfe]);
//! let mut attr = MemoryAttribution::default();
//! attr.bindings.insert(vm, OwnedBinding::new("project-a", "server-1", "port-1"));
//! attr.routers.insert(router, "public".to_owned());
//! let source = Arc::new(SwapSource::new(attr));
//! let ledger = Arc::new(Ledger::new(UnresolvedLimits::default(), source.clone()));
//! let exporter = Exporter::new(ledger.clone());
//!
//! // Scraper task: one full-map drain every interval; delete what it reports.
//! let key = FlowKey {
//!     src_mac: vm.0,
//!     dst_mac: router.0,
//!     eth_proto: 0x0800,
//!     direction: Direction::Tx.code(),
//!     zone: Zone::External.code(),
//!     l4: L4Class::Tcp.code(),
//!     pad: 0,
//! };
//! let reading = FlowCounters { bytes: 1500, packets: 1, last_seen_ns: 9, created_ns: 7 };
//! let report = ledger.apply_drain(&[(key, reading)], 0).unwrap();
//! assert_eq!(report.evicted, 0);
//!
//! // Reconciler: the port moved to another project. The ledger settles under
//! // the attribution the source still serves; the swap runs inside the same
//! // critical section.
//! let mut new = (*source.current()).clone();
//! new.bindings.insert(vm, OwnedBinding::new("project-b", "server-1", "port-1"));
//! // Both sides of a settle are flushed: the drains before it, and the
//! // settle itself before the next drain (the ledger refuses otherwise).
//! let dir = tempfile::tempdir().unwrap();
//! let paths = state::StatePaths::new(dir.path().join("state.json"));
//! state::flush(&ledger, &paths, serde_json::json!({"plan": "old"})).unwrap();
//! ledger.settle(SettleMode::Rebase(Selector::VmMac(vm)), || source.store(new)).unwrap();
//! let flushed = state::flush(&ledger, &paths, serde_json::json!({"plan": "opaque"})).unwrap();
//! // Kernel entries to delete, right after the next full drain.
//! assert!(flushed.delete.is_empty());
//!
//! // HTTP: render in the negotiated format (billing shows the last flush).
//! let mut body = String::new();
//! exporter.render(Format::PrometheusText, &mut body).unwrap();
//! assert!(body.contains(
//!     "lachesis_tenant_bytes_total{tenant_id=\"project-a\",zone=\"external\",external_network=\"public\",direction=\"tx\"} 1500"
//! ));
//!
//! // Flusher: every 60 s and at shutdown; boot loads it back before the first drain.
//! let restored = Ledger::new(UnresolvedLimits::default(), source.clone());
//! let plan = restored.restore_loaded(state::load(&paths).unwrap(), 0).unwrap();
//! assert_eq!(plan["plan"], "opaque");
//! ```

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
mod unresolved;

pub use absorbers::{
    unknown_key, Absorbers, Label, PortBucket, PortProtoBucket, ServerBucket, TenantBucket,
    TotalBucket,
};
pub use attribution::{
    external_network, Attribution, AttributionSource, BindingLabels, NONE, UNKNOWN_TENANT,
};
pub use book::{AnomalyKind, Book, DrainReport, Row};
pub use counts::Counts;
pub use delta::{delta, Baseline, DeltaCase};
pub use export::{Exporter, Format, LedgerCollector};
pub use health::Health;
pub use interner::{
    InternerConflict, InternerFull, InvalidInterner, TenantInterner, GLOBAL_TENANT_ID,
};
pub use ledger::{DrainError, Ledger, LedgerSizes, SettleError};
pub use settle::{PruneError, PruneReport, Selector, SettleMode, SettleReport};
pub use unresolved::{EvictReason, Pending, Tombstone, UnresolvedLimits};
