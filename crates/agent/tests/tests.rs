//! The agent's integration tests: one binary, its tests grouped by tier —
//! the first module of a test's path, the folder its file sits in
//! (`scripts/test-tier` runs one tier; `make test` all of them).

mod common;
mod kernel;
mod services;
mod unit;
