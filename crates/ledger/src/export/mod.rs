//! Prometheus export of the ledger (DESIGN §10).

mod collector;
pub mod families;
mod ports;

pub use collector::{render_registry, Exporter, Format, LedgerCollector};
pub use ports::PortTotals;
