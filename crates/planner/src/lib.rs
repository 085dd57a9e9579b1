//! Pure planner: OpenStack snapshot to the desired kernel state (DESIGN §5–§6).
//!
//! No I/O, no clocks, no global state: a snapshot in, a plan out, sorted
//! and deterministic. See docs/planner.md and docs/plan-schema.md.
//!
//! ```text
//! ApiBodies --parse_snapshot--> Snapshot --plan--> Plan --diff(old, new)--> PlanDelta
//! pages ------SnapshotParser--> Snapshot
//! ```
//!
//! A live sync feeds its pages to a [`SnapshotParser`] as they arrive;
//! saved bodies (`lachesis plan --from-dir`) go through [`parse_snapshot`],
//! which is the same parser fed one page per list.
//!
//! A reconcile pass plans with [`plan_with_previous`] and the last committed
//! plan (the reconcile contract of docs/planner.md).

#![deny(missing_docs)]

mod bindings;
mod bodies;
mod diff;
mod external;
mod index;
mod octavia;
mod plan;
mod resolver;
pub mod snapshot;
mod sources;
mod taps;
pub mod topology;
mod trie;
mod zone;

pub use bodies::{ApiBodies, OptionalBody, Resource};
pub use diff::{diff, Change, PlanDelta};
/// The trie rows' prefix type, re-exported from the ABI crate: the plan and
/// the kernel writer share it.
pub use lachesis_abi::{Prefix, PrefixParseError};
pub use plan::{
    AmphoraIp, Anomaly, AnomalyClass, Binding, FallbackReason, Plan, PlanOptions, RouterMac, Scope,
    TrieRow,
};
pub use snapshot::{
    parse_snapshot, LiveSnapshot, ParseError, ParseReport, Snapshot, SnapshotParser,
};
pub use sources::{SourceStatus, Sources};
pub use taps::tap_name;
pub use topology::{summarize, Topology};

/// Builds the desired state for `snapshot` (DESIGN §6), with no previous
/// plan: a cold start. Reconcile passes call [`plan_with_previous`].
#[must_use]
pub fn plan(snapshot: &Snapshot, options: &PlanOptions) -> Plan {
    plan_with_previous(snapshot, options, None)
}

/// Builds the desired state for `snapshot`, given the last committed plan.
///
/// The reconcile contract (docs/planner.md): when an Octavia list failed to
/// fetch, the amphora attribution cannot be recomputed, so the previous
/// plan's amphora bindings are kept for ports still present with the same
/// MAC, with their `amphora_ips`; everything else is planned from the
/// snapshot. With Octavia fetched or not deployed, `previous` is not read.
#[must_use]
pub fn plan_with_previous(
    snapshot: &Snapshot,
    options: &PlanOptions,
    previous: Option<&Plan>,
) -> Plan {
    let idx = index::Index::new(snapshot);
    let mut anomalies = Vec::new();
    let octavia = octavia::join(&idx, previous);
    anomalies.extend(octavia.anomalies.iter().cloned());
    let bound = bindings::bind(&idx, &octavia, &mut anomalies);
    let router_macs = external::router_macs(&idx, &mut anomalies);
    let trie = trie::rows(&idx, &bound, &octavia, *options, &mut anomalies);
    taps::collisions(&bound.bindings, &mut anomalies);
    anomalies.sort();
    anomalies.dedup();
    Plan {
        trie: trie.rows,
        bindings: bound.bindings,
        router_macs,
        amphora_ips: octavia.amphora_ips,
        anomalies,
        route_fallbacks: trie.fallbacks,
        sources: snapshot.sources,
    }
}
