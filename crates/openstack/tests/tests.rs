//! The OpenStack client's integration tests: one binary, its tests grouped
//! by tier (the first module of a test's path; `scripts/test-tier` runs
//! one tier). All of them are `unit`: no root, no services (the simulator
//! serves on loopback, in-process).

mod unit;
