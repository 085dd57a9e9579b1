//! Record format v1: what one state-stream message holds (docs/fleet.md,
//! "Records (format v1)").
//!
//! Four records, each one JSON object with `"v": 1`, and a message key:
//! a resource or its tombstone (`<kind>/<id>`), a snapshot marker
//! (`snapshot/<relay>`) and a heartbeat (`heartbeat/<relay>`). Decoding is
//! total: any bytes give a [`Record`] or a [`DecodeError`] the caller counts
//! and skips, never a panic.

use std::fmt;

use lachesis_planner::Resource;
use serde_json::{json, Map, Value};

/// The format version this crate writes and reads.
pub const VERSION: u64 = 1;

/// One state-stream message, decoded.
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    /// A resource as the relay holds it, or its tombstone.
    Entry(Entry),
    /// The start or end of a relay's full snapshot.
    Marker(Marker),
    /// A relay's as-of heartbeat.
    Heartbeat(Heartbeat),
}

/// Which resource a record is about: its list and its id. Ordered by list
/// (in [`Resource::ALL`] order), then by id.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    /// The list the resource belongs to.
    pub kind: Resource,
    /// The resource's id.
    pub id: String,
}

impl Key {
    /// The key of `id` in `kind`'s list.
    #[must_use]
    pub fn new(kind: Resource, id: impl Into<String>) -> Key {
        Key {
            kind,
            id: id.into(),
        }
    }
}

/// The message key: `<kind>/<id>`, e.g. `ports/6a1c…`.
impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.kind, self.id)
    }
}

/// A resource record (`body` is `Some`) or a tombstone (`body` is `None`).
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The resource's list and id.
    pub key: Key,
    /// Its revision: Neutron's `revision_number`, or the relay's
    /// observation time for lists without one ([`revision_of`]).
    pub rev: u64,
    /// The resource cut to its list's fields ([`lean`]); `None` for a
    /// tombstone.
    pub body: Option<Value>,
    /// The id of the snapshot this record was written as part of, if any.
    pub snapshot: Option<String>,
}

impl Entry {
    /// A resource record: `resource` is cut to `kind`'s fields here.
    #[must_use]
    pub fn live(kind: Resource, id: impl Into<String>, rev: u64, resource: &Value) -> Entry {
        Entry {
            key: Key::new(kind, id),
            rev,
            body: Some(lean(kind, resource)),
            snapshot: None,
        }
    }

    /// A tombstone: the resource is deleted as of `rev`.
    #[must_use]
    pub fn tombstone(kind: Resource, id: impl Into<String>, rev: u64) -> Entry {
        Entry {
            key: Key::new(kind, id),
            rev,
            body: None,
            snapshot: None,
        }
    }

    /// This record, written as part of snapshot `snapshot`.
    #[must_use]
    pub fn in_snapshot(mut self, snapshot: impl Into<String>) -> Entry {
        self.snapshot = Some(snapshot.into());
        self
    }

    /// Whether this is a tombstone.
    #[must_use]
    pub fn is_tombstone(&self) -> bool {
        self.body.is_none()
    }
}

/// A snapshot marker: a relay writes `Start`, then every resource it holds
/// (each carrying the snapshot's id), then `End` with their number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marker {
    /// The relay's name (from its configuration; unique in a fleet).
    pub relay: String,
    /// The snapshot's id, unique per snapshot.
    pub snapshot: String,
    /// Start or end.
    pub phase: Phase,
}

/// Which end of a snapshot a marker is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The snapshot begins: records carrying its id follow.
    Start,
    /// The snapshot is written: `records` records carried its id.
    End {
        /// How many resource and tombstone records carried the id.
        records: u64,
    },
}

/// A relay's as-of heartbeat (every 10 s, DESIGN §17).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heartbeat {
    /// The relay's name.
    pub relay: String,
    /// When it was written, ms since the epoch (the relay's clock).
    pub at_ms: u64,
    /// The relay's last successful check against OpenStack (a full sync,
    /// a digest, or an applied notification), ms since the epoch: what
    /// `lachesis_metadata_age_seconds` is computed from.
    pub checked_ms: u64,
    /// [`crate::State::digest`] of the state the relay holds.
    pub digest: String,
    /// How many live resources that state holds.
    pub records: u64,
    /// The newest snapshot this relay has written whole (start, records,
    /// end), if any: where a booting agent starts reading. Optional in
    /// v1 (a reader ignores fields it does not know).
    pub snapshot: Option<SnapshotRef>,
}

/// A snapshot a heartbeat names: its id and when the relay began it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotRef {
    /// The snapshot's id (its markers' `snapshot`).
    pub id: String,
    /// When the relay began writing it, ms since the epoch (the relay's
    /// clock): every record of it was written at or after this time.
    pub at_ms: u64,
}

/// Why bytes are not a v1 record. Each is counted and the message skipped.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// Not JSON: truncated, not UTF-8, nested deeper than the parser's
    /// limit, …
    #[error("not JSON: {0}")]
    Json(#[source] serde_json::Error),
    /// A record of another format version (its `v`, as JSON text): a newer
    /// relay than this agent.
    #[error("format version {0}, this build reads {VERSION}")]
    Version(String),
    /// A resource record of a list this build does not know.
    #[error("unknown kind {0:?}")]
    Kind(String),
    /// JSON, version 1, but not one of its records: a field missing or of
    /// the wrong type.
    #[error("not a v1 record: {0}")]
    Shape(&'static str),
}

/// `resource` cut to the fields `kind`'s list keeps
/// ([`Resource::kept_fields`]: what the planner reads): for Neutron's lists
/// what a field-selected list answers, so a record from a notification
/// (the whole object) and one from a sync (the selected fields) hold the
/// same thing; for Keystone's, Nova's and Octavia's, the few fields read
/// of objects their APIs answer whole. A non-object is kept as it is.
#[must_use]
pub fn lean(kind: Resource, resource: &Value) -> Value {
    let fields = kind.kept_fields();
    match resource.as_object() {
        Some(obj) => Value::Object(
            obj.iter()
                .filter(|(k, _)| fields.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        None => resource.clone(),
    }
}

/// Whether `kind`'s objects carry Neutron's `revision_number`.
#[must_use]
pub fn has_revision_number(kind: Resource) -> bool {
    kind.service() == "network"
}

/// The `rev` a relay writes for `resource` of `kind`, observed at
/// `observed_ms` (ms since the epoch).
///
/// Neutron's lists carry `revision_number`, which rises on every change:
/// that is the revision, and `None` when it is missing or not an unsigned
/// integer (the caller GETs the resource instead of guessing one: a made-up
/// revision would either lose to every real one or beat them all).
///
/// Keystone, Nova and Octavia objects have no revision. For them the relay
/// writes its observation time, and only when the lean content differs from
/// what it holds ([`crate::State::differs`]). Two relays observing the same
/// content then publish the same content under different times, so
/// whichever wins the guard is right; a relay observing newer content
/// observes it later, so it wins. Clock skew between relays can hold a
/// change back until the slower relay's next observation of it (its next
/// digest); relays keep their clocks in sync (NTP) like every OpenStack
/// service.
#[must_use]
pub fn revision_of(kind: Resource, resource: &Value, observed_ms: u64) -> Option<u64> {
    if has_revision_number(kind) {
        resource.get("revision_number").and_then(Value::as_u64)
    } else {
        Some(observed_ms)
    }
}

/// The message key and the JSON bytes of `record`.
#[must_use]
pub fn encode(record: &Record) -> (String, Vec<u8>) {
    let (key, value) = match record {
        Record::Entry(e) => {
            let mut v = json!({"v": VERSION, "kind": e.key.kind.collection(),
                "id": e.key.id, "rev": e.rev});
            match &e.body {
                Some(body) => v["resource"] = body.clone(),
                None => v["deleted"] = Value::Bool(true),
            }
            if let Some(s) = &e.snapshot {
                v["snapshot"] = json!(s);
            }
            (e.key.to_string(), v)
        }
        Record::Marker(m) => {
            let mut v = json!({"v": VERSION, "snapshot": m.snapshot, "relay": m.relay});
            match m.phase {
                Phase::Start => v["phase"] = json!("start"),
                Phase::End { records } => {
                    v["phase"] = json!("end");
                    v["records"] = json!(records);
                }
            }
            (format!("snapshot/{}", m.relay), v)
        }
        Record::Heartbeat(h) => {
            let mut v = json!({"v": VERSION, "heartbeat": {"relay": h.relay, "at_ms": h.at_ms,
                "checked_ms": h.checked_ms, "digest": h.digest, "records": h.records}});
            if let Some(s) = &h.snapshot {
                v["heartbeat"]["snapshot"] = json!({"id": s.id, "at_ms": s.at_ms});
            }
            (format!("heartbeat/{}", h.relay), v)
        }
    };
    // Serializing a `Value` cannot fail: its keys are strings.
    (key, value.to_string().into_bytes())
}

/// Reads one message's bytes.
///
/// The version is checked first, so a later format's record is always
/// [`DecodeError::Version`], whatever its shape.
pub fn decode(bytes: &[u8]) -> Result<Record, DecodeError> {
    let value: Value = serde_json::from_slice(bytes).map_err(DecodeError::Json)?;
    let Value::Object(obj) = value else {
        return Err(DecodeError::Shape("not an object"));
    };
    match obj.get("v") {
        None => return Err(DecodeError::Shape("no v")),
        Some(v) if v.as_u64() == Some(VERSION) => {}
        Some(v) => return Err(DecodeError::Version(v.to_string())),
    }
    if let Some(hb) = obj.get("heartbeat") {
        return heartbeat(hb).map(Record::Heartbeat);
    }
    if obj.contains_key("kind") {
        return entry(&obj).map(Record::Entry);
    }
    if obj.contains_key("phase") {
        return marker(&obj).map(Record::Marker);
    }
    Err(DecodeError::Shape("neither kind, phase nor heartbeat"))
}

fn string(obj: &Map<String, Value>, field: &'static str) -> Result<String, DecodeError> {
    match obj.get(field) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        _ => Err(DecodeError::Shape(field)),
    }
}

fn number(obj: &Map<String, Value>, field: &'static str) -> Result<u64, DecodeError> {
    obj.get(field)
        .and_then(Value::as_u64)
        .ok_or(DecodeError::Shape(field))
}

fn entry(obj: &Map<String, Value>) -> Result<Entry, DecodeError> {
    let kind = match obj.get("kind") {
        Some(Value::String(k)) => {
            Resource::from_collection(k).ok_or_else(|| DecodeError::Kind(k.clone()))?
        }
        _ => return Err(DecodeError::Shape("kind")),
    };
    let id = string(obj, "id")?;
    let rev = number(obj, "rev")?;
    let snapshot = match obj.get("snapshot") {
        None => None,
        Some(_) => Some(string(obj, "snapshot")?),
    };
    let body = match (obj.get("resource"), obj.get("deleted")) {
        (Some(resource), None) => {
            // The planner reads the id from the body: a body about another
            // resource than its key would be filed under the wrong key.
            if resource.get("id").and_then(Value::as_str) != Some(id.as_str()) {
                return Err(DecodeError::Shape("resource.id is not the record's id"));
            }
            Some(resource.clone())
        }
        (None, Some(Value::Bool(true))) => None,
        _ => return Err(DecodeError::Shape("exactly one of resource, deleted: true")),
    };
    Ok(Entry {
        key: Key { kind, id },
        rev,
        body,
        snapshot,
    })
}

fn marker(obj: &Map<String, Value>) -> Result<Marker, DecodeError> {
    let phase = match obj.get("phase").and_then(Value::as_str) {
        Some("start") => Phase::Start,
        Some("end") => Phase::End {
            records: number(obj, "records")?,
        },
        _ => return Err(DecodeError::Shape("phase")),
    };
    Ok(Marker {
        relay: string(obj, "relay")?,
        snapshot: string(obj, "snapshot")?,
        phase,
    })
}

fn heartbeat(hb: &Value) -> Result<Heartbeat, DecodeError> {
    let Some(obj) = hb.as_object() else {
        return Err(DecodeError::Shape("heartbeat"));
    };
    Ok(Heartbeat {
        relay: string(obj, "relay")?,
        at_ms: number(obj, "at_ms")?,
        checked_ms: number(obj, "checked_ms")?,
        digest: string(obj, "digest")?,
        records: number(obj, "records")?,
        snapshot: match obj.get("snapshot") {
            None => None,
            Some(Value::Object(s)) => Some(SnapshotRef {
                id: string(s, "id").map_err(|_| DecodeError::Shape("heartbeat.snapshot.id"))?,
                at_ms: number(s, "at_ms")
                    .map_err(|_| DecodeError::Shape("heartbeat.snapshot.at_ms"))?,
            }),
            Some(_) => return Err(DecodeError::Shape("heartbeat.snapshot")),
        },
    })
}

#[cfg(test)]
mod tests;
