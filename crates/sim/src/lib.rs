//! `lachesis sim`: a small, honest `OpenStack` API server (DESIGN §14) for
//! development, tests and the demo. It speaks the real wire format so a
//! client that works here works against a real cloud.
//!
//! Layout: [`topology`] (the YAML file), `cidr` (subnet addressing as
//! Neutron checks it), [`clock`] (the simulator's time), [`revision`]
//! (revisions, timestamps, deleted servers), [`store`] (state + mutations +
//! faults), [`event_faults`] (notifications dropped, repeated, swapped,
//! delayed), [`stats`] (what was served, to whom), [`wire`]
//! (resources as the services list them), [`notify`] (oslo notifications
//! to `RabbitMQ` and Kafka), `paging`,
//! `api` (the `OpenStack` endpoints), `admin` (the `/sim/` control API),
//! `http` (the context and reply type both share) and `server` (the listener);
//! with feature `generate`, [`generate`]: the benchmarks' large cloud.

#![deny(missing_docs)]

mod admin;
mod api;
mod cidr;
pub mod clock;
pub mod event_faults;
#[cfg(feature = "generate")]
pub mod generate;
mod http;
pub mod notify;
mod paging;
mod render;
pub mod revision;
mod server;
pub mod stats;
pub mod store;
pub mod topology;
pub mod wire;

pub use clock::{Clock, Stamp};
pub use revision::Meta;
pub use server::{start, start_on, start_with, SimHandle, SimOptions};
pub use stats::{Stats, Traffic};
pub use store::{Fault, MutationError, SettingsError, SettingsPatch, Store};
pub use topology::{KeystonePaging, Topology, TopologyError};
