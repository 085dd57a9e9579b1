//! From the bytes a broker delivered to a [`Decision`] (DESIGN §8): pure,
//! no I/O, never a panic on any input.
//!
//! Two shapes arrive. The AMQP drivers of oslo.messaging wrap the
//! notification in an envelope, `{"oslo.version": "2.0", "oslo.message":
//! "<the notification as a JSON string>"}`; older senders and the Kafka
//! driver send the notification object itself (the Kafka driver adds one
//! nested `_context` object and no `_unique_id`). [`decode`] reads only
//! `event_type` and `publisher_id`: the agent never applies a payload — the
//! reconcile re-reads the authoritative state — so it is skipped without
//! being kept. The relay applies payloads (DESIGN §17):
//! [`decode_with_payload`] keeps it, through the same reading.

use serde::de::{DeserializeOwned, IgnoredAny};
use serde::Deserialize;
use serde_json::Value;

/// The two fields a decision needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    /// `port.create.end`, `router.interface.create`, …
    pub event_type: String,
    /// `network.<host>`, `identity.<host>`, `nova-compute:<host>`; `None`
    /// when absent or null (Octavia sends null).
    pub publisher_id: Option<String>,
}

/// Why a message is not a notification we can read. Counted and skipped.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// Not JSON (truncated, not UTF-8, nested too deep, …).
    #[error("not JSON: {0}")]
    Json(#[source] serde_json::Error),
    /// JSON, but not a notification object: a string (double-encoded), an
    /// array, a number, a key given twice, …
    #[error("not a notification object: {0}")]
    Shape(#[source] serde_json::Error),
    /// An envelope whose `oslo.message` is not a JSON string holding an
    /// object, or whose `oslo.version` is missing or not 2.x.
    #[error("malformed oslo envelope: {0}")]
    Envelope(&'static str),
    /// The envelope's `oslo.message` string is not JSON.
    #[error("oslo.message is not JSON: {0}")]
    InnerJson(#[source] serde_json::Error),
    /// No `event_type`.
    #[error("no event_type")]
    MissingEventType,
    /// A field of another JSON type than oslo writes.
    #[error("{field} is not a string")]
    NotAString {
        /// `event_type` or `publisher_id`.
        field: &'static str,
    },
}

/// What to do about one notification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Ask the reconciler for a pass.
    Kick {
        /// The notification's event type.
        event_type: String,
        /// The §8 rule that matched.
        rule: Rule,
    },
    /// Nothing to do.
    Ignore {
        /// The notification's event type.
        event_type: String,
        /// Why not.
        why: Ignored,
    },
}

impl Decision {
    /// The notification's event type.
    #[must_use]
    pub fn event_type(&self) -> &str {
        match self {
            Decision::Kick { event_type, .. } | Decision::Ignore { event_type, .. } => event_type,
        }
    }

    /// Whether this asks for a pass.
    #[must_use]
    pub fn is_kick(&self) -> bool {
        matches!(self, Decision::Kick { .. })
    }
}

/// The kick rules of DESIGN §8.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// A committed (`.end`) Neutron change of a network, subnet, port,
    /// router or floating IP, from `network.<host>`.
    NeutronCommitted,
    /// `router.interface.create` / `.delete`, which Neutron sends with no
    /// `.start`/`.end` at all.
    NeutronRouterInterface,
    /// `identity.project.deleted` from `identity.<host>`.
    KeystoneProjectDeleted,
    /// `compute.instance.delete.end` from `compute.<host>` (legacy
    /// notifications).
    NovaInstanceDeletedLegacy,
    /// `instance.delete.end` from `nova-compute:<host>` (versioned).
    NovaInstanceDeleted,
    /// `octavia.loadbalancer.*.end`, whatever the (null) publisher.
    OctaviaLoadBalancer,
}

/// Why a decoded notification does not kick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ignored {
    /// A `.start` event: sent before the change is committed (a failed
    /// call sends one with no `.end`).
    Start,
    /// An event type a rule names, from another publisher than the rule's
    /// service.
    Publisher,
    /// Anything else: other services, other resources, other actions.
    Unrelated,
}

/// Neutron resources whose committed changes move the plan.
const NEUTRON_RESOURCES: [&str; 5] = ["network.", "subnet.", "port.", "router.", "floatingip."];

/// The object oslo sends, either shape: unknown keys (every `_context…`
/// key) are skipped, not stored; so is the payload when `P` is
/// [`IgnoredAny`].
#[derive(Deserialize)]
#[serde(bound(deserialize = "P: DeserializeOwned"))]
struct Fields<P> {
    #[serde(rename = "oslo.version")]
    version: Option<Value>,
    #[serde(rename = "oslo.message")]
    message: Option<Value>,
    event_type: Option<Value>,
    publisher_id: Option<Value>,
    payload: Option<P>,
}

/// Reads a message: the envelope or the bare object.
///
/// # Errors
/// The bytes are not an oslo notification ([`DecodeError`]).
pub fn decode(bytes: &[u8]) -> Result<Notification, DecodeError> {
    decode_as::<IgnoredAny>(bytes).map(|(n, _)| n)
}

/// [`decode`], keeping the payload (`null` when there is none): for a
/// consumer that applies payloads, the relay (DESIGN §17).
///
/// # Errors
/// As [`decode`].
pub fn decode_with_payload(bytes: &[u8]) -> Result<(Notification, Value), DecodeError> {
    decode_as::<Value>(bytes).map(|(n, payload)| (n, payload.unwrap_or(Value::Null)))
}

fn decode_as<P: DeserializeOwned>(bytes: &[u8]) -> Result<(Notification, Option<P>), DecodeError> {
    let outer = fields::<P>(bytes, DecodeError::Json)?;
    if outer.message.is_none() && outer.version.is_none() {
        return notification(outer);
    }
    match outer.version.as_ref().and_then(Value::as_str) {
        Some(v) if v == "2" || v.starts_with("2.") => {}
        Some(_) => return Err(DecodeError::Envelope("oslo.version is not 2.x")),
        None => {
            return Err(DecodeError::Envelope(
                "oslo.version missing or not a string",
            ))
        }
    }
    let Some(Value::String(inner)) = outer.message else {
        return Err(DecodeError::Envelope(
            "oslo.message missing or not a string",
        ));
    };
    let inner = fields::<P>(inner.as_bytes(), DecodeError::InnerJson)?;
    if inner.message.is_some() {
        return Err(DecodeError::Envelope("an envelope inside the envelope"));
    }
    notification(inner)
}

fn fields<P: DeserializeOwned>(
    bytes: &[u8],
    not_json: fn(serde_json::Error) -> DecodeError,
) -> Result<Fields<P>, DecodeError> {
    // Deserializing `Fields` from a non-object (or an object with a key
    // twice) is a data error; tell that apart from broken JSON.
    serde_json::from_slice::<Fields<P>>(bytes).map_err(|e| {
        if e.is_data() {
            DecodeError::Shape(e)
        } else {
            not_json(e)
        }
    })
}

fn notification<P>(f: Fields<P>) -> Result<(Notification, Option<P>), DecodeError> {
    let event_type = match f.event_type {
        None | Some(Value::Null) => return Err(DecodeError::MissingEventType),
        Some(Value::String(s)) => s,
        Some(_) => {
            return Err(DecodeError::NotAString {
                field: "event_type",
            })
        }
    };
    let publisher_id = match f.publisher_id {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(_) => {
            return Err(DecodeError::NotAString {
                field: "publisher_id",
            })
        }
    };
    Ok((
        Notification {
            event_type,
            publisher_id,
        },
        f.payload,
    ))
}

/// The §8 rules applied to one notification.
#[must_use]
#[expect(
    clippy::case_sensitive_file_extension_comparisons,
    reason = "event types, not file names: the services spell them in lower case"
)]
pub fn classify(n: &Notification) -> Decision {
    let et = n.event_type.as_str();
    let publisher = n.publisher_id.as_deref().unwrap_or("");
    let outcome = if et.ends_with(".start") {
        Err(Ignored::Start)
    } else if et.starts_with("octavia.loadbalancer.") && et.ends_with(".end") {
        // Octavia sends a null publisher_id: the event type alone decides.
        Ok(Rule::OctaviaLoadBalancer)
    } else if et == "router.interface.create" || et == "router.interface.delete" {
        from(publisher, "network.", Rule::NeutronRouterInterface)
    } else if et.ends_with(".end") && NEUTRON_RESOURCES.iter().any(|r| et.starts_with(r)) {
        from(publisher, "network.", Rule::NeutronCommitted)
    } else if et == "identity.project.deleted" {
        from(publisher, "identity.", Rule::KeystoneProjectDeleted)
    } else if et == "compute.instance.delete.end" {
        from(publisher, "compute.", Rule::NovaInstanceDeletedLegacy)
    } else if et == "instance.delete.end" {
        from(publisher, "nova-compute:", Rule::NovaInstanceDeleted)
    } else {
        Err(Ignored::Unrelated)
    };
    let event_type = n.event_type.clone();
    match outcome {
        Ok(rule) => Decision::Kick { event_type, rule },
        Err(why) => Decision::Ignore { event_type, why },
    }
}

/// `rule` when `publisher` is `<service><host>` with a non-empty host.
fn from(publisher: &str, service: &str, rule: Rule) -> Result<Rule, Ignored> {
    match publisher.strip_prefix(service) {
        Some(host) if !host.is_empty() => Ok(rule),
        _ => Err(Ignored::Publisher),
    }
}

/// [`decode`] then [`classify`].
///
/// # Errors
/// As [`decode`].
pub fn decide(bytes: &[u8]) -> Result<Decision, DecodeError> {
    decode(bytes).map(|n| classify(&n))
}

#[cfg(test)]
mod tests;
