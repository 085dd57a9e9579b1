//! An agent's side of the stream: records in stream order become a
//! [`State`] that is ready once a complete snapshot has been read
//! (docs/fleet.md, "Snapshot assembly").
//!
//! A RabbitMQ stream is not compacted, so an agent starts reading about two
//! snapshot intervals back and cannot know that what precedes the first
//! snapshot start it sees is complete: it ignores it. From that start every
//! resource and tombstone goes through the guard; the first snapshot whose
//! end matches (same relay and id, as many records as it says) makes the
//! state ready.

use std::collections::{btree_map, BTreeMap, BTreeSet};

use crate::record::{Entry, Heartbeat, Key, Marker, Phase, Record};
use crate::state::{Outcome, State};

/// What the assembler did with one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fed {
    /// Before the first snapshot start, or an end whose start was not read.
    Ignored,
    /// At or below an offset already read (a consumer that resumed early).
    Replayed,
    /// A resource or tombstone, through the guard.
    Entry(Outcome),
    /// A snapshot start: records carrying its id follow.
    Started,
    /// A snapshot end that matched: `removed` keys were neither in it nor
    /// written after its start.
    Complete {
        /// Keys the heal rule removed.
        removed: usize,
    },
    /// A snapshot end whose count did not match, or a start that replaced
    /// the same relay's unfinished snapshot.
    Incomplete,
    /// A heartbeat.
    Heartbeat,
}

/// What the assembler has counted (for the agent's metrics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Records ignored: before the first start, or an unmatched end.
    pub ignored: u64,
    /// Records at or below an offset already read.
    pub replayed: u64,
    /// Records the guard found stale.
    pub stale: u64,
    /// Records the guard found held already.
    pub duplicate: u64,
    /// Snapshots complete (ends that matched).
    pub complete: u64,
    /// Snapshots incomplete: an end whose count did not match, or a start
    /// that replaced the same relay's unfinished one.
    pub incomplete: u64,
}

/// A snapshot whose start has been read and whose end has not.
#[derive(Debug, Clone)]
struct Pending {
    snapshot: String,
    /// Every key written since the start, whatever the guard did with it.
    written: BTreeSet<Key>,
    /// The distinct keys whose records carried this snapshot's id.
    carried: BTreeSet<Key>,
}

/// Builds the agent's state from the stream; see the module docs.
#[derive(Debug, Clone, Default)]
pub struct Assembler {
    state: State,
    started: bool,
    ready: bool,
    /// Per relay, its snapshot being read.
    pending: BTreeMap<String, Pending>,
    offset: Option<u64>,
    heartbeats: BTreeMap<String, Heartbeat>,
    counts: Counts,
}

impl Assembler {
    /// An assembler that has read nothing.
    #[must_use]
    pub fn new() -> Assembler {
        Assembler::default()
    }

    /// Feeds the record read at stream `offset`, at `now_ms` (the time
    /// applied records are stamped with, for tombstone pruning).
    ///
    /// On a complete snapshot, every key that was neither in it nor written
    /// after its start is removed: the relay held everything that existed
    /// when it started the snapshot and wrote it, and everything that
    /// changed later is written later, so such a key is gone — a tombstone
    /// the stream lost is healed this way, and tombstones the snapshot
    /// supersedes go with it.
    pub fn feed(&mut self, offset: u64, record: &Record, now_ms: u64) -> Fed {
        if self.offset.is_some_and(|last| offset <= last) {
            self.counts.replayed += 1;
            return Fed::Replayed;
        }
        self.offset = Some(offset);
        match record {
            Record::Heartbeat(hb) => {
                let newer = self
                    .heartbeats
                    .get(&hb.relay)
                    .is_none_or(|held| hb.at_ms >= held.at_ms);
                if newer {
                    self.heartbeats.insert(hb.relay.clone(), hb.clone());
                }
                Fed::Heartbeat
            }
            Record::Marker(m) => self.marker(m),
            Record::Entry(e) if self.started => self.entry(e, now_ms),
            Record::Entry(_) => {
                self.counts.ignored += 1;
                Fed::Ignored
            }
        }
    }

    fn entry(&mut self, entry: &Entry, now_ms: u64) -> Fed {
        for pending in self.pending.values_mut() {
            pending.written.insert(entry.key.clone());
            if entry.snapshot.as_deref() == Some(pending.snapshot.as_str()) {
                pending.carried.insert(entry.key.clone());
            }
        }
        let outcome = self.state.apply(entry, now_ms);
        match outcome {
            Outcome::Applied => {}
            Outcome::Stale => self.counts.stale += 1,
            Outcome::Duplicate => self.counts.duplicate += 1,
        }
        Fed::Entry(outcome)
    }

    fn marker(&mut self, marker: &Marker) -> Fed {
        match marker.phase {
            Phase::Start => {
                self.started = true;
                let fresh = Pending {
                    snapshot: marker.snapshot.clone(),
                    written: BTreeSet::new(),
                    carried: BTreeSet::new(),
                };
                if self.pending.insert(marker.relay.clone(), fresh).is_some() {
                    // The relay began again (a restart mid-snapshot): the
                    // one it left is never ended.
                    self.counts.incomplete += 1;
                }
                Fed::Started
            }
            Phase::End { records } => {
                let pending = match self.pending.entry(marker.relay.clone()) {
                    btree_map::Entry::Occupied(p) if p.get().snapshot == marker.snapshot => {
                        p.remove()
                    }
                    _ => {
                        self.counts.ignored += 1;
                        return Fed::Ignored;
                    }
                };
                // Distinct keys, so a publisher's retry that wrote a record
                // twice does not make the snapshot incomplete.
                if pending.carried.len() as u64 != records {
                    self.counts.incomplete += 1;
                    return Fed::Incomplete;
                }
                let removed = self.state.retain(|k| pending.written.contains(k));
                self.ready = true;
                self.counts.complete += 1;
                Fed::Complete { removed }
            }
        }
    }

    /// Whether a complete snapshot has been read: the state is whole, and
    /// the agent may plan from it.
    #[must_use]
    pub fn ready(&self) -> bool {
        self.ready
    }

    /// Whether a snapshot start has been read: from here on every record
    /// goes through the guard, and a complete snapshot will follow unless
    /// the relay stops mid-way.
    #[must_use]
    pub fn started(&self) -> bool {
        self.started
    }

    /// The state assembled so far (whole only once [`Assembler::ready`]).
    #[must_use]
    pub fn state(&self) -> &State {
        &self.state
    }

    /// Removes tombstones applied before `older_than_ms`
    /// ([`State::prune_tombstones`]).
    pub fn prune_tombstones(&mut self, older_than_ms: u64) -> usize {
        self.state.prune_tombstones(older_than_ms)
    }

    /// What has been counted.
    #[must_use]
    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// The last offset read: a consumer that reconnects resumes after it.
    #[must_use]
    pub fn offset(&self) -> Option<u64> {
        self.offset
    }

    /// The newest heartbeat of each relay (by its `at_ms`): the caller
    /// computes the metadata age from `checked_ms`.
    #[must_use]
    pub fn heartbeats(&self) -> &BTreeMap<String, Heartbeat> {
        &self.heartbeats
    }
}

#[cfg(test)]
mod tests;
