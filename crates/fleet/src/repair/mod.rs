//! The relay's digest pass (DESIGN §17, every `relay.digest_interval`):
//! OpenStack's id + `revision_number` list of one collection against the
//! relay's [`State`], what to GET and what to tombstone (docs/fleet.md,
//! "Digest repair"). This heals an update or delete whose notification was
//! lost, and changes Neutron makes without one.

use std::collections::BTreeMap;

use lachesis_planner::Resource;

use crate::record::{Entry, Key};
use crate::state::State;

/// What one collection's digest asks of the relay.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Repair {
    /// Ids to GET (and publish under the guard): absent from the state, or
    /// held at an older revision.
    pub get: Vec<String>,
    /// Tombstones to publish: resources held live that OpenStack no longer
    /// lists, at the revision held (which a tombstone beats).
    pub tombstones: Vec<Entry>,
}

/// Compares `listed` — `(id, revision_number)` of every `kind` resource,
/// from a list that began at `listed_from_ms` — with `state`.
///
/// A resource the state holds as a tombstone at or above the listed
/// revision is not fetched: it was deleted since. A live resource absent
/// from the list is tombstoned only when it was applied before the list
/// began: one applied since may have been created after the list read
/// past it, and the next digest decides.
///
/// For lists without `revision_number` (Keystone, Nova, Octavia) the relay
/// lists whole objects instead: it publishes each whose lean content
/// [`State::differs`] (at its observation time, [`crate::revision_of`]),
/// and tombstones with [`vanished`].
#[must_use]
pub fn repair(
    kind: Resource,
    listed: &[(String, u64)],
    state: &State,
    listed_from_ms: u64,
) -> Repair {
    let get = listed
        .iter()
        .filter(|(id, rev)| {
            state
                .get(&Key::new(kind, id.as_str()))
                .is_none_or(|held| held.rev < *rev)
        })
        .map(|(id, _)| id.clone())
        .collect();
    Repair {
        get,
        tombstones: vanished(
            kind,
            listed.iter().map(|(id, _)| id.as_str()),
            state,
            listed_from_ms,
        ),
    }
}

/// Tombstones for the `kind` resources held live, applied before
/// `listed_from_ms`, whose ids are not among `listed`; each at its held
/// revision.
#[must_use]
pub fn vanished<'a>(
    kind: Resource,
    listed: impl IntoIterator<Item = &'a str>,
    state: &State,
    listed_from_ms: u64,
) -> Vec<Entry> {
    let mut absent: BTreeMap<&str, u64> = state
        .iter()
        .filter(|(key, held)| {
            key.kind == kind && held.body.is_some() && held.at_ms < listed_from_ms
        })
        .map(|(key, held)| (key.id.as_str(), held.rev))
        .collect();
    for id in listed {
        absent.remove(id);
    }
    absent
        .into_iter()
        .map(|(id, rev)| Entry::tombstone(kind, id, rev))
        .collect()
}

#[cfg(test)]
mod tests;
