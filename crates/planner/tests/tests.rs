//! The planner's integration tests: one binary, its tests grouped by tier
//! (the first module of a test's path; `scripts/test-tier` runs one tier).
//! All of them are `unit`: no root, no services.

mod common;
mod unit;
