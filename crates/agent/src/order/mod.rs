//! The one owner of ledger order (DESIGN §7, §9, §12; docs/agent-order.md):
//! drains, flushes, settle batches, the ghost sweep, prunes, pressure
//! relief and every kernel flow delete go through [`LedgerOwner`], one at a
//! time; the scraper, flusher and sweeper tasks drive it on their live
//! intervals once boot has restored the state.

mod attribution;
mod kernel;
mod metrics;
mod owner;
mod tasks;

#[cfg(test)]
mod fake;
#[cfg(test)]
mod tests;

pub use attribution::{AgentSource, PlannedAttribution};
pub use kernel::{monotonic_ns, FlowKernel, KernelError, Readings, RetiredMap, Step};
pub use metrics::{DrainFailure, Gc, OrderMetrics};
pub use owner::{least_recent, LedgerOwner, OrderError, Relief, ScrapeReport};
pub use tasks::{run_flusher, run_scraper, run_sweeper};
