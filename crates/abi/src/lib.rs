//! The kernel ABI of the Lachesis classifier (DESIGN §3, §4.1) as Rust types.
//!
//! `bpf/lachesis.h` is the C side of this contract. Both sides assert every
//! size and field offset at compile time (`_Static_assert` there, `const`
//! assertions here) against the same numbers, and the datapath crate's tests
//! compare these types with the ones generated from the compiled object's BTF,
//! so the two cannot drift silently.
//!
//! The zone, direction, L4 and stats codes are persisted and exported: a code
//! never changes meaning once released.
//!
//! [`Prefix`] and [`Mac`] are the value types both sides of the plan use: the
//! planner writes them into the plan, the datapath writes them into map keys.
//! The `serde` feature gives [`Prefix`] its plan-text (de)serialisation.

#![deny(missing_docs)]

mod codes;
mod layout;
mod mac;
mod prefix;

pub use codes::{Direction, L4Class, StatReason, UnknownCode, Zone};
pub use layout::{
    AmphoraKey, DrainRecord, EndpointValue, EntryKey, FlowCounters, FlowKey, FlowValue, TapPort,
    VerdictGenLine, VerdictKey, VerdictSlot, ZoneKeyV4, ZoneKeyV6, ENDPOINT_FLAG_AMPHORA,
    ENTRY_KEY_SIZE, FLOW_COUNTERS_SIZE, FLOW_KEY_SIZE, FLOW_VALUE_SIZE, FOLDED_CPU,
};
pub use mac::{Mac, MacParseError};
pub use prefix::{Prefix, PrefixParseError};
