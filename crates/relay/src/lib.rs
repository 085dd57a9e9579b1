//! `lachesis relay` (DESIGN §17, docs/fleet.md "Running a relay"):
//! list-then-watch against OpenStack, one record per resource onto a state
//! stream, so the load a fleet of agents puts on OpenStack does not grow
//! with the number of nodes.
//!
//! - [`Relay`]: the loop — a full sync, a snapshot, then notifications
//!   (through [`lachesis_fleet::follow`] and the revision guard), digests
//!   ([`lachesis_fleet::repair`]), resyncs, snapshots and heartbeats.
//! - [`Publisher`]: the state stream, the relay's one seam;
//!   [`RabbitPublisher`] (a RabbitMQ stream queue) and [`MemoryPublisher`]
//!   for tests.
//! - [`RelaySink`] and [`channel`]: the notification consumers' side.
//! - [`RelayMetrics`]: the `lachesis_relay_*` families.
//! - [`config`]: `RelayConfig`, read in layers like the agent's;
//!   [`serve`]: the process (the loop, the consumers, `/metrics`).
//!
//! What the records hold and the rules both sides follow are
//! `lachesis-fleet`'s (pure); this crate does the I/O around them.

#![deny(missing_docs)]

pub mod config;
mod held;
pub mod metrics;
pub mod publish;
mod run;
pub mod serve;
pub mod sink;

pub use config::{RelayConfig, DEFAULT_RELAY_CONFIG_PATH};
pub use metrics::{Dropped, RelayMetrics};
pub use publish::{MemoryPublisher, PublishError, Publisher, RabbitPublisher};
pub use run::{Relay, Schedule, GAP_DIGEST_DELAY, HEARTBEAT_INTERVAL};
pub use serve::{serve, ServeError};
pub use sink::{channel, Input, RelaySink};
