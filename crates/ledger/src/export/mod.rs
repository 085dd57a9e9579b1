//! Prometheus export of the ledger (DESIGN §10).

mod collector;
pub mod families;
mod ports;
mod text;

pub use collector::{render_registry, render_registry_sorted, Exporter, Format, LedgerCollector};
pub use ports::PortTotals;
