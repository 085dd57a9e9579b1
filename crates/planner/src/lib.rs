//! Pure planner: OpenStack snapshot to the desired kernel state (DESIGN §5–§6).
//!
//! No I/O, no clocks, no global state: a snapshot in, a plan out.

mod bodies;

pub use bodies::ApiBodies;
