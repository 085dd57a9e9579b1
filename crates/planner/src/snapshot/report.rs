//! What the parser skipped, and why (counted, never fatal).

use std::collections::BTreeMap;
use std::fmt;

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
    /// A second entry with an id already seen; the one whose JSON text
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
        match &self.id {
            Some(id) => write!(f, "{}: {what} {id}: {}", self.list, self.reason),
            None => write!(f, "{}: {what}: {}", self.list, self.reason),
        }
    }
}

/// Everything the parser dropped, sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParseReport {
    /// Each skipped entry or part, sorted by (list, id, reason).
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
