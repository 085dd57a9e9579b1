//! The revision guard and the state it protects (docs/fleet.md, "The
//! guard"): what a relay holds and publishes, and what an agent builds
//! from the stream. The same rules on both sides, so two relays publishing
//! at once, a record delivered twice or out of order, change nothing.

use std::collections::BTreeMap;

use lachesis_planner::Resource;
use serde_json::Value;

use crate::record::{Entry, Key};

/// A lean body as compact JSON text: a fraction of the memory of the
/// parsed `Value`, whose every map, key and string is an allocation of its
/// own (a relay and every relay-mode agent hold one per resource of the
/// cloud). `serde_json`'s maps keep their keys sorted, so the text is
/// canonical: two bodies are equal exactly when their values are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Body(Box<str>);

impl Body {
    /// `value` as compact text.
    #[must_use]
    pub fn new(value: &Value) -> Body {
        Body(value.to_string().into_boxed_str())
    }

    /// The text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The value again. The text was written from a `Value`, so it parses
    /// (to no deeper than the parser's limit it was read under); `Null`
    /// otherwise, which the planner reports as a skipped entry.
    #[must_use]
    pub fn value(&self) -> Value {
        serde_json::from_str(&self.0).unwrap_or(Value::Null)
    }
}

/// What the state holds for one key.
#[derive(Debug, Clone, PartialEq)]
pub struct Held {
    /// The revision of the record that set it.
    pub rev: u64,
    /// The lean body; `None` for a tombstone.
    pub body: Option<Body>,
    /// When the record was applied (the caller's clock, ms since the
    /// epoch): tombstones are pruned by age, and a digest repair leaves
    /// alone what changed while it listed.
    pub at_ms: u64,
    /// What this state numbered the change that set it: every change gets
    /// a greater stamp than any before it, so a reader that remembers the
    /// stamps it has seen can tell exactly what changed since, whatever
    /// the revisions (a relay-mode agent parses only that).
    pub stamp: u64,
}

/// What [`State::apply`] did with a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The record is now held.
    Applied,
    /// Something newer is held (or, for a resource, a tombstone of the same
    /// revision, or other content under the same revision): dropped.
    Stale,
    /// Exactly this is held already: dropped.
    Duplicate,
}

/// How many keys of one list the state holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KindCount {
    /// Resources.
    pub live: usize,
    /// Tombstones.
    pub tombstones: usize,
}

/// Key → [`Held`], in key order (list in [`Resource::ALL`] order, then id).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct State {
    held: BTreeMap<Key, Held>,
    /// The stamp of the latest change.
    stamp: u64,
}

impl State {
    /// An empty state.
    #[must_use]
    pub fn new() -> State {
        State::default()
    }

    /// Applies `entry` under the guard, at `at_ms`.
    ///
    /// A resource applies when nothing is held for its key or its `rev` is
    /// greater than the held one. A tombstone applies when nothing is held
    /// or its `rev` is greater than or equal to the held one: a delete
    /// beats every older revision and the same revision (Neutron's delete
    /// notification carries the resource as it was, with its last
    /// revision). So a resource whose `rev` is not above a held tombstone's
    /// is stale, and the outcome depends on the records, never on the order
    /// they arrive in.
    pub fn apply(&mut self, entry: &Entry, at_ms: u64) -> Outcome {
        let body = entry.body.as_ref().map(Body::new);
        let outcome = match self.held.get(&entry.key) {
            None => Outcome::Applied,
            Some(held) => judge(held, entry.rev, body.as_ref()),
        };
        if outcome == Outcome::Applied {
            self.stamp += 1;
            self.held.insert(
                entry.key.clone(),
                Held {
                    rev: entry.rev,
                    body,
                    at_ms,
                    stamp: self.stamp,
                },
            );
        }
        outcome
    }

    /// What is held for `key`, tombstones included.
    #[must_use]
    pub fn get(&self, key: &Key) -> Option<&Held> {
        self.held.get(key)
    }

    /// Every held key, in key order, tombstones included.
    pub fn iter(&self) -> impl Iterator<Item = (&Key, &Held)> {
        self.held.iter()
    }

    /// Whether `lean` (a body cut by [`crate::lean`]) differs from the live
    /// body held for `key`: true when nothing or a tombstone is held. For
    /// the lists without `revision_number`, a relay publishes only then
    /// ([`crate::revision_of`]).
    #[must_use]
    pub fn differs(&self, key: &Key, lean: &Value) -> bool {
        self.held
            .get(key)
            .and_then(|h| h.body.as_ref())
            .is_none_or(|body| *body != Body::new(lean))
    }

    /// The live bodies of each list, sorted by id, ready for
    /// `SnapshotParser::page(resource, &bodies)`. Every list is present,
    /// empty when nothing of it is held.
    #[must_use]
    pub fn pages(&self) -> BTreeMap<Resource, Vec<Value>> {
        let mut pages: BTreeMap<Resource, Vec<Value>> =
            Resource::ALL.into_iter().map(|r| (r, Vec::new())).collect();
        for (key, held) in &self.held {
            if let Some(body) = &held.body {
                pages.entry(key.kind).or_default().push(body.value());
            }
        }
        pages
    }

    /// How many resources and tombstones of each list are held; every list
    /// is present.
    #[must_use]
    pub fn counts(&self) -> BTreeMap<Resource, KindCount> {
        let mut counts: BTreeMap<Resource, KindCount> = Resource::ALL
            .into_iter()
            .map(|r| (r, KindCount::default()))
            .collect();
        for (key, held) in &self.held {
            let count = counts.entry(key.kind).or_default();
            if held.body.is_some() {
                count.live += 1;
            } else {
                count.tombstones += 1;
            }
        }
        counts
    }

    /// How many live resources are held (a heartbeat's `records`).
    #[must_use]
    pub fn live(&self) -> usize {
        self.held.values().filter(|h| h.body.is_some()).count()
    }

    /// A digest of the live state: 64-bit FNV-1a, as 16 lower-case hex
    /// digits, over each live key in key order (list in [`Resource::ALL`]
    /// order, then id bytes) as the bytes `<kind>/<id>\n<rev>\n` (`rev` in
    /// decimal). Tombstones are left out: a relay and an agent prune theirs
    /// at different times, and that is no divergence. Two states with the
    /// same live keys at the same revisions have the same digest.
    #[must_use]
    pub fn digest(&self) -> String {
        let mut hash = Fnv1a::new();
        for (key, held) in &self.held {
            if held.body.is_some() {
                hash.write(format!("{key}\n{}\n", held.rev).as_bytes());
            }
        }
        format!("{:016x}", hash.0)
    }

    /// Removes tombstones applied before `older_than_ms`; returns how many.
    /// A tombstone only guards against a late stale record of its key (a
    /// slower relay's, a redelivery); after a while no such record comes.
    pub fn prune_tombstones(&mut self, older_than_ms: u64) -> usize {
        let before = self.held.len();
        self.held
            .retain(|_, h| h.body.is_some() || h.at_ms >= older_than_ms);
        before - self.held.len()
    }

    /// Keeps only the keys `keep` says yes to; returns how many went.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&Key) -> bool) -> usize {
        let before = self.held.len();
        self.held.retain(|k, _| keep(k));
        before - self.held.len()
    }
}

/// The guard's verdict on `entry` when `held` is there.
fn judge(held: &Held, rev: u64, body: Option<&Body>) -> Outcome {
    use std::cmp::Ordering::{Equal, Greater, Less};
    match (held.body.as_ref(), body, rev.cmp(&held.rev)) {
        (None, None, Equal) => Outcome::Duplicate,
        (Some(had), Some(got), Equal) if had == got => Outcome::Duplicate,
        // A delete beats the same revision.
        (Some(_), None, Equal) | (_, _, Greater) => Outcome::Applied,
        // Older; or other content under the same revision, or a resource
        // no newer than its tombstone: what is held stays.
        (_, _, Less) | (_, Some(_), Equal) => Outcome::Stale,
    }
}

/// 64-bit FNV-1a (Fowler–Noll–Vo): simple, stable across builds and
/// platforms, and enough to tell two states apart; not a defence against
/// anyone crafting a collision.
struct Fnv1a(u64);

impl Fnv1a {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0100_0000_01b3;

    fn new() -> Fnv1a {
        Fnv1a(Self::OFFSET)
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(Self::PRIME);
        }
    }
}

#[cfg(test)]
mod tests;
