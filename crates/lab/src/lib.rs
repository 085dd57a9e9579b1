//! Test hosts for Lachesis: crafted Ethernet frames for the program
//! test-run facility, a network-namespace lab (namespaces as VMs,
//! host-side veths named like taps) and traffic between its VMs for
//! real-traffic tests and the demo, and the helpers every crate's tests,
//! the benchmarks and the demo share: the agent process and its typed
//! configuration, one HTTP client, one reader of both metrics text formats.
//!
//! Everything the lab creates carries a per-run unique name and is removed
//! when the lab is dropped; nothing else on the machine is touched.

#![deny(missing_docs)]

pub mod agent;
pub mod catalogue;
pub mod cpu;
pub mod exposition;
pub mod frame;
pub mod http;
pub mod netns;
pub mod page;
pub mod sandbox;
pub mod tls;
pub mod traffic;

pub mod services;

pub use services::{require_root, require_root_for, Services};
