//! The Lachesis agent as a library: what the `lachesis` binary's daemon is
//! built from, testable without the binary (DESIGN §12, §13).

#![deny(missing_docs)]

pub mod boot;
pub mod config;
pub mod daemon;
pub mod exit;
pub mod http;
pub mod instance_lock;
pub mod links;
pub mod order;
pub mod preflight;
pub mod reconcile;
