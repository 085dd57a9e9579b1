//! The notification consumers' integration tests: one binary, its tests
//! grouped by tier (the first module of a test's path; `scripts/test-tier`
//! runs one tier). All of them are `services`.

mod common;
mod services;
