//! The agent's two HTTP listeners (DESIGN §10, §13).

pub mod lookup;
mod params;
mod source;

pub use params::BadParam;
pub use source::{DebugSource, FlowEntry, FlowListing, LiveBinding, LogLevelControl, Readiness};
