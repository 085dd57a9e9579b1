//! Pure core of fleet mode (DESIGN §17, docs/fleet.md): no I/O, no tasks,
//! no clock read here (every time is passed in, in ms since the epoch).
//!
//! `lachesis relay` does list-then-watch against OpenStack and publishes one
//! [`Record`] per resource onto a state stream; agents in relay mode build
//! their snapshot from that stream and make no OpenStack request.
//!
//! - [`record`]: format v1 of a stream message, its key, [`encode`] and
//!   [`decode`], [`lean`] bodies and [`revision_of`].
//! - [`state`]: the revision guard ([`State::apply`]) and what it holds:
//!   [`State::pages`] for the planner's `SnapshotParser`, [`State::digest`]
//!   for heartbeats.
//! - [`assemble`]: an agent's [`Assembler`], stream records in order → a
//!   state that is ready once a complete snapshot has been read.
//! - [`follow`]: what a relay does for one oslo notification ([`Action`]).
//! - [`repair`]: the relay's digest pass, OpenStack's id + revision list
//!   against its state: what to GET, what to tombstone.

#![deny(missing_docs)]

pub mod assemble;
pub mod follow;
pub mod record;
pub mod repair;
pub mod state;

pub use assemble::{Assembler, Counts, Fed};
pub use follow::{follow, Action, Ignored};
pub use record::{
    decode, encode, has_revision_number, lean, revision_of, DecodeError, Entry, Heartbeat, Key,
    Marker, Phase, Record, SnapshotRef, VERSION,
};
pub use repair::{repair, vanished, Repair};
pub use state::{Body, Held, KindCount, Outcome, State};
