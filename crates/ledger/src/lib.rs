//! The billing ledger of Lachesis: cumulative rows fed by kernel drains,
//! the unresolved buffer, settle/absorbers, the Prometheus export and the
//! state file (DESIGN §3, §4.3, §9, §10, §11; docs/ledger.md).
//!
//! The ledger never talks to the kernel or to the cloud APIs: drains arrive as
//! folded readings, attribution comes through [`Attribution`], and kernel
//! entries to delete are handed back in [`DrainReport::delete`].

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
pub use interner::{InternerFull, InvalidInterner, TenantInterner, GLOBAL_TENANT_ID};
pub use ledger::{Ledger, LedgerSizes};
pub use settle::{PruneError, PruneReport, Selector, SettleMode, SettleReport};
pub use unresolved::{EvictReason, Pending, Tombstone, UnresolvedLimits};
