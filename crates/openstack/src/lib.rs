//! Keystone/Neutron/Nova/Octavia client and the API simulator (DESIGN §5, §14).
//!
//! The agent sees the cloud only through the public APIs: [`client`] fetches
//! the lists of DESIGN §5 into [`lachesis_planner::ApiBodies`]; [`config`]
//! finds credentials the way operators configure them; [`sim`] serves a
//! topology file over the same wire format for tests and the demo.

pub mod client;
pub mod config;
pub mod sim;

pub use client::{
    fetch, load_bodies, save_bodies, ApiMetrics, Client, ServiceStatus, SyncError, SyncResult,
};
pub use config::{CloudConfig, ConfigError, Credentials};
