//! What the parser skipped, and why (counted, never fatal).

use std::collections::BTreeMap;
use std::fmt;

use serde::ser::{Serialize, SerializeStruct, Serializer};

/// Why an entry, or a part of one, was skipped.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum SkipReason {
    /// The list element is not a JSON object.
    NotAnObject,
    /// The entry has no usable `id` (absent, empty or not a string).
    MissingId,
    /// A required field is absent, null or of the wrong JSON type.
    MissingField {
        /// The field's name.
        field: &'static str,
    },
    /// A field is present but its value does not parse.
    BadValue {
        /// The field's name (`fixed_ips[].ip_address` for nested ones).
        field: &'static str,
        /// The rejected value as it appeared (truncated for long values).
        value: String,
        /// The form that was expected.
        expected: &'static str,
    },
    /// A second entry with an id already seen; the one whose parsed form
    /// sorts first is kept so the outcome does not depend on list order.
    DuplicateId,
}

impl SkipReason {
    /// A short stable label for counting (no values in it).
    #[must_use]
    pub fn label(&self) -> String {
        match self {
            SkipReason::NotAnObject => "not_an_object".to_owned(),
            SkipReason::MissingId => "missing_id".to_owned(),
            SkipReason::MissingField { field } => format!("missing {field}"),
            SkipReason::BadValue { field, .. } => format!("bad {field}"),
            SkipReason::DuplicateId => "duplicate_id".to_owned(),
        }
    }

    /// The JSON `reason` (docs/plan-schema.md): `not_an_object`,
    /// `missing_id`, `missing_field`, `bad_value` or `duplicate_id`.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            SkipReason::NotAnObject => "not_an_object",
            SkipReason::MissingId => "missing_id",
            SkipReason::MissingField { .. } => "missing_field",
            SkipReason::BadValue { .. } => "bad_value",
            SkipReason::DuplicateId => "duplicate_id",
        }
    }

    /// The field at fault (`id` for a missing or repeated id); `None` when
    /// the list element is not an object at all.
    #[must_use]
    pub fn field(&self) -> Option<&'static str> {
        match self {
            SkipReason::NotAnObject => None,
            SkipReason::MissingId | SkipReason::DuplicateId => Some("id"),
            SkipReason::MissingField { field } | SkipReason::BadValue { field, .. } => Some(field),
        }
    }
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipReason::NotAnObject => f.write_str("list element is not an object"),
            SkipReason::MissingId => f.write_str("no usable \"id\""),
            SkipReason::MissingField { field } => {
                write!(f, "required field {field:?} absent or of the wrong type")
            }
            SkipReason::BadValue {
                field,
                value,
                expected,
            } => {
                write!(f, "field {field:?} = {value:?}: expected {expected}")
            }
            SkipReason::DuplicateId => f.write_str("duplicate id (another entry kept)"),
        }
    }
}

/// One skipped entry or part of an entry.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Skipped {
    /// The list (`ports`, `subnets`, …).
    pub list: &'static str,
    /// The entry's id when it had one.
    pub id: Option<String>,
    /// The entry's position in the list body, when it had no id (the only
    /// way to find it then; `None` whenever `id` is set, so that a plan
    /// does not depend on the order the API listed entries in).
    pub index: Option<usize>,
    /// Why.
    pub reason: SkipReason,
    /// True when the whole entry was dropped, false when only a part of it
    /// (one fixed IP, the MAC, one route) was.
    pub whole_entry: bool,
}

impl fmt::Display for Skipped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = if self.whole_entry {
            "skipped entry"
        } else {
            "ignored part of entry"
        };
        match (&self.id, self.index) {
            (Some(id), _) => write!(f, "{}: {what} {id}: {}", self.list, self.reason),
            (None, Some(i)) => write!(f, "{}: {what} #{i}: {}", self.list, self.reason),
            (None, None) => write!(f, "{}: {what}: {}", self.list, self.reason),
        }
    }
}

/// The JSON form of docs/plan-schema.md (`report.skipped[]`).
impl Serialize for Skipped {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (value, expected) = match &self.reason {
            SkipReason::BadValue {
                value, expected, ..
            } => (Some(value.as_str()), Some(*expected)),
            _ => (None, None),
        };
        let mut m = s.serialize_struct("Skipped", 9)?;
        m.serialize_field("list", self.list)?;
        m.serialize_field("id", &self.id)?;
        m.serialize_field("index", &self.index)?;
        m.serialize_field("field", &self.reason.field())?;
        m.serialize_field("reason", self.reason.kind())?;
        m.serialize_field("value", &value)?;
        m.serialize_field("expected", &expected)?;
        m.serialize_field("dropped", if self.whole_entry { "entry" } else { "part" })?;
        m.serialize_field("detail", &self.to_string())?;
        m.end()
    }
}

/// Everything the parser dropped, sorted. Serializes as `{"skipped": [...]}`
/// (the `report` key of `lachesis plan`'s JSON).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ParseReport {
    /// Each skipped entry or part, sorted by (list, id, index, reason).
    pub skipped: Vec<Skipped>,
}

impl ParseReport {
    /// Counts by (list, reason label), for a metric or a summary line.
    #[must_use]
    pub fn counts(&self) -> BTreeMap<(&'static str, String), u64> {
        let mut out = BTreeMap::new();
        for s in &self.skipped {
            *out.entry((s.list, s.reason.label())).or_insert(0) += 1;
        }
        out
    }

    /// True when nothing was skipped.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.skipped.is_empty()
    }
}
