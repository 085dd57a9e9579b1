//! Prometheus export of the ledger (DESIGN §10).

pub(crate) mod aggregate;
mod collector;
pub mod families;

pub use collector::{render_registry, Exporter, Format, LedgerCollector};
