//! Keystone/Neutron/Nova/Octavia client (DESIGN §5).
//!
//! The agent sees the cloud only through the public APIs: [`client`] fetches
//! the lists of DESIGN §5 page by page into a [`PageSink`] (the planner's
//! parser, or [`lachesis_planner::ApiBodies`] merged); [`config`]
//! finds credentials the way operators configure them. The simulator that
//! serves the same wire format for tests and the demo is its own crate
//! (`lachesis-sim`), so users of the client do not build a server and
//! broker clients.

#![deny(missing_docs)]

pub mod client;
pub mod config;

pub use client::{
    fetch, load_bodies, save_bodies, ApiMetrics, Client, PageSink, Revisions, ServiceStatus,
    Services, SyncError, SyncResult,
};
pub use config::{CloudConfig, ConfigError, Credentials, OpenStackSettings};
