//! The state file (DESIGN §11): format, flush and load.

mod fields;
mod file;
mod metrics;
mod rows;
mod schema;

#[doc(hidden)]
pub use file::decode;
pub use file::{
    encode, load, FlushReport, LoadSource, Loaded, Quarantined, StateError, StateFile, StatePaths,
};
pub use metrics::{FlushMetrics, FlushPhase, LoadFallback, LoadStats};
pub use schema::SCHEMA;
