//! The state file (DESIGN §11): format, flush and load.

mod fields;
mod file;
pub(crate) mod metrics;
mod schema;
pub(crate) mod u64_string;

pub use file::{
    encode, flush, load, FlushReport, LoadSource, Loaded, Quarantined, StateError, StatePaths,
};
pub use metrics::{FlushPhase, LoadFallback};
pub use schema::SCHEMA;
