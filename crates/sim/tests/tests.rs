//! The simulator's integration tests: one binary, its tests grouped by tier
//! (the first module of a test's path; `scripts/test-tier` runs one tier).

mod common;
mod services;
mod unit;
