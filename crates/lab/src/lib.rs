//! Test hosts for Lachesis: crafted Ethernet frames for the program
//! test-run facility, and a network-namespace lab (namespaces as VMs,
//! host-side veths named like taps) for real-traffic tests and the demo.
//!
//! Everything the lab creates carries a per-run unique name and is removed
//! when the lab is dropped; nothing else on the machine is touched.

#![deny(missing_docs)]

pub mod catalogue;
pub mod frame;
pub mod netns;
pub mod page;

pub mod services;

pub use services::{require_root, require_root_for, Services};
