//! What the relay holds and has yet to publish: the guarded [`State`] and
//! the records waiting for the stream. Every change of the state goes
//! through here, so whatever the guard applied is published, and nothing
//! else is.

use lachesis_fleet::{
    encode, has_revision_number, lean, revision_of, Entry, Heartbeat, Key, Marker, Outcome, Phase,
    Record, SnapshotRef, State,
};
use lachesis_planner::Resource;
use serde_json::Value;

use crate::metrics::{RelayMetrics, HEARTBEAT_KIND, SNAPSHOT_KIND};
use crate::publish::{PublishError, Publisher};

/// The state and the records not yet written.
#[derive(Debug)]
pub(crate) struct Held {
    pub state: State,
    name: String,
    /// Message key and bytes, in the order written.
    pending: Vec<(String, Vec<u8>)>,
    /// The `kind` label of each pending record.
    kinds: Vec<&'static str>,
    snapshots: u64,
    /// Until the first snapshot: records change the state but are not
    /// written, since that snapshot carries every one of them (a young
    /// stream would otherwise hold the first sync twice, and every agent
    /// booting on it read both).
    quiet: bool,
    /// The snapshot queued last and not yet written ([`Held::flush`]
    /// moves it to `written`).
    queued: Option<SnapshotRef>,
    /// The newest snapshot written to the stream, named by heartbeats so
    /// a booting agent starts reading there.
    written: Option<SnapshotRef>,
    /// The newest heartbeat queued and not yet written (its `at_ms`).
    queued_beat: Option<u64>,
    /// Heartbeats queued and not yet written.
    queued_beats: u64,
    pub metrics: RelayMetrics,
}

impl Held {
    pub fn new(name: String, metrics: RelayMetrics) -> Held {
        Held {
            state: State::new(),
            name,
            pending: Vec::new(),
            kinds: Vec::new(),
            snapshots: 0,
            quiet: true,
            queued: None,
            written: None,
            queued_beat: None,
            queued_beats: 0,
            metrics,
        }
    }

    fn push(&mut self, kind: &'static str, record: &Record) {
        self.pending.push(encode(record));
        self.kinds.push(kind);
        self.metrics.pending(self.pending.len());
    }

    /// Applies `entry` under the guard at `now_ms`; queues it when applied
    /// (once the first snapshot is queued).
    pub fn put(&mut self, entry: Entry, now_ms: u64) -> Outcome {
        let outcome = self.state.apply(&entry, now_ms);
        if outcome == Outcome::Applied && !self.quiet {
            self.push(entry.key.kind.collection(), &Record::Entry(entry));
        }
        outcome
    }

    /// A resource as OpenStack answered it (a list item or a GET by id),
    /// observed at `now_ms`: cut to its list's fields, under its revision
    /// (for lists without one, the observation time, and only when the
    /// content differs from what is held). `None`: a Neutron object with
    /// no `revision_number` or an object without an id, not published.
    pub fn observed(&mut self, kind: Resource, resource: &Value, now_ms: u64) -> Option<Outcome> {
        let id = resource.get("id").and_then(Value::as_str)?;
        let rev = revision_of(kind, resource, now_ms)?;
        let body = lean(kind, resource);
        if !has_revision_number(kind) && !self.state.differs(&Key::new(kind, id), &body) {
            return Some(Outcome::Duplicate);
        }
        let entry = Entry {
            key: Key::new(kind, id),
            rev,
            body: Some(body),
            snapshot: None,
        };
        Some(self.put(entry, now_ms))
    }

    /// A resource OpenStack no longer has: its tombstone, at `rev` when
    /// known, else at the revision held, else (lists without revision) at
    /// the observation time. `None`: a Neutron resource nothing is held of
    /// and no revision is known for (there is nothing to delete).
    pub fn gone(
        &mut self,
        kind: Resource,
        id: &str,
        rev: Option<u64>,
        now_ms: u64,
    ) -> Option<Outcome> {
        let held = self.state.get(&Key::new(kind, id)).map(|h| h.rev);
        let rev = rev
            .or(held)
            .or_else(|| (!has_revision_number(kind)).then_some(now_ms))?;
        Some(self.put(Entry::tombstone(kind, id, rev), now_ms))
    }

    /// Queues a full snapshot: a start marker, every live resource held
    /// carrying the snapshot's id, an end marker with their number.
    /// Tombstones are left out: the agents' heal rule removes what a
    /// complete snapshot lacks.
    ///
    /// Records still waiting for the stream (it has been down) are dropped
    /// first: the snapshot carries the whole state, and what it lacks the
    /// heal rule removes, so they say nothing it does not. Without this a
    /// relay whose stream stays down would queue one more copy of the cloud
    /// every `relay.snapshot_interval` until it ran out of memory.
    pub fn snapshot(&mut self, now_ms: u64) {
        if !self.pending.is_empty() {
            tracing::warn!(
                superseded = self.pending.len(),
                "the state stream is behind: the records waiting for it are superseded by a new snapshot"
            );
            self.pending.clear();
            self.kinds.clear();
            self.queued = None;
            self.queued_beat = None;
            self.queued_beats = 0;
        }
        self.snapshots += 1;
        let id = format!("{now_ms}-{}", self.snapshots);
        let marker = |phase| {
            Record::Marker(Marker {
                relay: self.name.clone(),
                snapshot: id.clone(),
                phase,
            })
        };
        let start = marker(Phase::Start);
        self.push(SNAPSHOT_KIND, &start);
        let live: Vec<Entry> = self
            .state
            .iter()
            .filter_map(|(key, held)| {
                held.body.as_ref().map(|body| Entry {
                    key: key.clone(),
                    rev: held.rev,
                    body: Some(body.value()),
                    snapshot: Some(id.clone()),
                })
            })
            .collect();
        let records = live.len() as u64;
        for entry in live {
            self.push(entry.key.kind.collection(), &Record::Entry(entry));
        }
        let end = Record::Marker(Marker {
            relay: self.name.clone(),
            snapshot: id.clone(),
            phase: Phase::End { records },
        });
        self.push(SNAPSHOT_KIND, &end);
        self.quiet = false;
        self.queued = Some(SnapshotRef { id, at_ms: now_ms });
    }

    /// Queues a heartbeat: the state's digest and size, as of `now_ms`,
    /// last checked against OpenStack at `checked_ms`.
    pub fn heartbeat(&mut self, now_ms: u64, checked_ms: u64) {
        let beat = Record::Heartbeat(Heartbeat {
            relay: self.name.clone(),
            at_ms: now_ms,
            checked_ms,
            digest: self.state.digest(),
            records: self.state.live() as u64,
            snapshot: self.written.clone(),
        });
        self.push(HEARTBEAT_KIND, &beat);
        self.queued_beat = Some(now_ms);
        self.queued_beats += 1;
    }

    /// Whether records wait for the stream.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Writes every pending record, in order. On failure they all stay
    /// pending, for the next attempt.
    pub async fn flush<P: Publisher>(&mut self, publisher: &mut P) -> Result<(), PublishError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        publisher.publish_batch(&self.pending).await?;
        for kind in self.kinds.drain(..) {
            self.metrics.published(kind);
        }
        self.pending.clear();
        self.metrics.pending(0);
        if let Some(written) = self.queued.take() {
            self.written = Some(written);
            self.metrics.snapshot();
        }
        if let Some(at_ms) = self.queued_beat.take() {
            self.metrics
                .heartbeats(std::mem::take(&mut self.queued_beats), at_ms);
        }
        Ok(())
    }
}
