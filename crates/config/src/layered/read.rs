//! The layered tree → a configuration's type: every value read by its
//! key's form, all problems collected, not just the first, in file order.
//!
//! serde stops at the first bad value, so the tree is read again after
//! each one with that value taken out (its default, or for a required key
//! its section, stands in); a configuration's own rules then skip every key
//! that was bad ([`Read::bad`]). An unknown key is reported and taken out
//! the same way. Problems of the file's structure (a list where a section
//! or a single value belongs) end the reading at the first one, alone.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Deserialize as _;
use serde_json::Value;

use super::error::Issue;
use super::layers;
use crate::form::{duration, show_duration};
use crate::{Key, Scalar, Schema, Shape};

/// A tree read into `T`, and what the reading found wrong.
#[derive(Debug)]
pub struct Read<T> {
    /// The configuration, bad values replaced by their defaults.
    pub config: T,
    /// The tree as finally read (bad values taken out).
    pub tree: Value,
    /// Keys (and sections) that were bad: rules leave them alone.
    pub bad: BTreeSet<String>,
    /// Every problem found, in the order found.
    pub issues: Vec<Issue>,
}

/// Reads `tree` into `T`, whose keys `schema` lists: the configuration (bad
/// values left at their defaults) and every problem, or a structural
/// problem alone.
pub fn read<T: DeserializeOwned>(schema: &Schema, tree: Value) -> Result<Read<T>, Vec<Issue>> {
    // serde reads a list as a struct's fields in order; a configuration
    // section must be a mapping.
    for section in schema.sections() {
        if layers::get(&tree, &section.path).is_some_and(Value::is_array) {
            let name = section.path.rsplit('.').next().unwrap_or(&section.path);
            return Err(vec![Issue::new(
                &section.path,
                format!("found sequence; expected a mapping of {name} keys"),
            )]);
        }
    }
    let mut reading = Reading {
        schema,
        tree,
        issues: Vec::new(),
        bad: BTreeSet::new(),
        kept: BTreeMap::new(),
        stood_in: BTreeSet::new(),
        absent: BTreeSet::new(),
    };
    let config = reading.values::<T>()?;
    Ok(Read {
        config,
        tree: reading.tree,
        bad: reading.bad,
        issues: reading.issues,
    })
}

/// Sorts `issues` in file order; a problem a rule found about a key stays
/// after the key's own.
pub fn in_file_order(schema: &Schema, issues: &mut [Issue]) {
    issues.sort_by_key(|i| order(schema, key_of(&i.key)));
}

/// Each bounded duration of `section` within its span, named as written:
/// a problem for each that is not (keys already bad are left alone).
pub fn check_spans(
    spans: &[(&str, Span)],
    tree: &Value,
    bad: &BTreeSet<String>,
    issues: &mut Vec<Issue>,
) {
    for (key, span) in spans {
        let written = layers::get(tree, key).and_then(|v| Scalar::deserialize(v).ok());
        let (Some(written), false) = (written, bad.contains(*key)) else {
            continue;
        };
        let checked = duration(&written).and_then(|d| span.check(d, written.text().trim()));
        if let Err(message) = checked {
            issues.push(Issue::new(*key, message));
        }
    }
}

fn order(schema: &Schema, key: &str) -> (usize, bool) {
    if let Some(at) = schema.position(key) {
        return (at, false);
    }
    // A whole section (a required one that is absent): where its keys are.
    let prefix = format!("{key}.");
    if let Some(at) = schema
        .keys()
        .iter()
        .position(|k| k.path.starts_with(&prefix))
    {
        return (at, false);
    }
    let section = key.rsplit_once('.').map_or("", |(s, _)| s);
    let last = schema
        .keys()
        .iter()
        .rposition(|k| !section.is_empty() && k.path.starts_with(&format!("{section}.")));
    (last.unwrap_or(usize::MAX), true)
}

/// `datapath.interfaces[2]` → `datapath.interfaces`.
fn key_of(path: &str) -> &str {
    path.split_once('[').map_or(path, |(key, _)| key)
}

/// The tree as it is read again and again.
struct Reading<'a> {
    schema: &'a Schema,
    tree: Value,
    issues: Vec<Issue>,
    /// Keys (and sections) that were bad: the rules leave them alone.
    bad: BTreeSet<String>,
    /// For a list an item was taken out of: the original index of every
    /// item still in it, so the next bad item is named where it was written.
    kept: BTreeMap<String, Vec<usize>>,
    /// Required keys given a stand-in (once each).
    stood_in: BTreeSet<String>,
    /// Required sections that were absent, reported once as a whole: the
    /// keys they require are not reported again.
    absent: BTreeSet<String>,
}

impl Reading<'_> {
    /// Reads until the tree is valid; a structural problem ends it alone.
    fn values<T: DeserializeOwned>(&mut self) -> Result<T, Vec<Issue>> {
        loop {
            let e = match serde_path_to_error::deserialize::<_, T>(self.tree.clone()) {
                Ok(config) => return Ok(config),
                Err(e) => e,
            };
            let message = e.inner().to_string();
            let mut keys = Vec::new();
            let mut index = None;
            for segment in e.path() {
                match segment {
                    serde_path_to_error::Segment::Map { key } => keys.push(key.as_str()),
                    serde_path_to_error::Segment::Seq { index: i } => index = Some(*i),
                    _ => {}
                }
            }
            let path = keys.join(".");
            let taken = if let Some(field) = missing_field(&message) {
                let section = if path.is_empty() {
                    field.to_owned()
                } else {
                    format!("{path}.{field}")
                };
                if self.schema.sections().iter().any(|s| s.path == section) {
                    self.missing_section(&section)
                } else {
                    self.missing(&path, field)
                }
            } else if message.starts_with("unknown field `") && !path.is_empty() {
                self.unknown(&path, &message)
            } else if self.schema.key(&path).is_some() && !message.starts_with("invalid type: ") {
                // A value of the key's form that does not read. A list or a
                // mapping where a value belongs (serde's "invalid type") is
                // the file's structure, like a list where a section belongs.
                self.bad_value(&path, index, &message)
            } else {
                false
            };
            if !taken {
                let key = if path.is_empty() {
                    "(top level)".to_owned()
                } else {
                    e.path().to_string()
                };
                return Err(vec![Issue::new(key, explain_serde(&message))]);
            }
        }
    }

    /// A required key of a present section: reported (unless its value was
    /// reported bad already). A stand-in of its form takes its place, so
    /// the section's other keys are still read (serde names one missing
    /// key at a time); without one, the section is taken out.
    fn missing(&mut self, section: &str, field: &str) -> bool {
        let key = format!("{section}.{field}");
        if self.bad.insert(key.clone()) && !self.absent.contains(section) {
            self.issues.push(Issue::new(
                &key,
                format!("is required when {section} is set"),
            ));
        }
        let stand_in = self.schema.key(&key).and_then(stand_in);
        match stand_in {
            Some(value) if self.stood_in.insert(key.clone()) => {
                layers::set(&mut self.tree, &key, value).is_ok()
            }
            _ => {
                self.bad.insert(section.to_owned());
                layers::remove(&mut self.tree, section)
            }
        }
    }

    /// A required section that is absent: reported once, then read as an
    /// empty mapping (its required keys get stand-ins, unreported), so the
    /// rest of the file is still read.
    fn missing_section(&mut self, section: &str) -> bool {
        if !self.absent.insert(section.to_owned()) {
            return false;
        }
        self.bad.insert(section.to_owned());
        let name = section.rsplit('.').next().unwrap_or(section);
        self.issues.push(Issue::new(
            section,
            format!("is required (a mapping of {name} keys)"),
        ));
        layers::set(
            &mut self.tree,
            section,
            Value::Object(serde_json::Map::new()),
        )
        .is_ok()
    }

    /// A key no section has (a typo, a key of another version): reported
    /// and taken out, so the rest of the file is still read.
    fn unknown(&mut self, key: &str, message: &str) -> bool {
        if !self.bad.insert(key.to_owned()) {
            return false;
        }
        self.issues.push(Issue::new(key, explain_serde(message)));
        layers::remove(&mut self.tree, key)
    }

    /// A bad value, or a bad item of a list: reported and taken out.
    fn bad_value(&mut self, key: &str, index: Option<usize>, message: &str) -> bool {
        if self.stood_in.contains(key) {
            // A stand-in that does not read: the section goes instead.
            let section = key.rsplit_once('.').map_or("", |(s, _)| s);
            self.bad.insert(section.to_owned());
            return layers::remove(&mut self.tree, section);
        }
        self.bad.insert(key.to_owned());
        let Some(i) = index else {
            self.issues.push(Issue::new(key, explain_serde(message)));
            return layers::remove(&mut self.tree, key);
        };
        let Some(Value::Array(items)) = layers::get_mut(&mut self.tree, key) else {
            return false;
        };
        let kept = self
            .kept
            .entry(key.to_owned())
            .or_insert_with(|| (0..items.len()).collect());
        if i >= items.len() || i >= kept.len() {
            return false;
        }
        items.remove(i);
        let written_at = kept.remove(i);
        self.issues.push(Issue::new(
            format!("{key}[{written_at}]"),
            explain_serde(message),
        ));
        true
    }
}

/// A value of a required key's form that reads well, standing in for it
/// while the rest of its section is read (the key itself is reported, and
/// the rules leave it alone). `None`: the section is taken out instead.
fn stand_in(key: &Key) -> Option<Value> {
    match (key.shape, key.label) {
        (Shape::List, "list of host:port") => Some(Value::from(vec!["stand-in:1"])),
        (Shape::List, _) => Some(Value::from(vec!["stand-in"])),
        (Shape::Text, "broker URL (secret passwords)") => Some(Value::from("amqp://stand-in/")),
        (Shape::Text, _) => Some(Value::from("stand-in")),
        (Shape::Scalar, choice) if choice.contains(" | ") => {
            choice.split(" | ").next().map(Value::from)
        }
        (Shape::Scalar, _) => None,
    }
}

/// The field of serde's "missing field `x`".
fn missing_field(message: &str) -> Option<&str> {
    message
        .strip_prefix("missing field `")
        .and_then(|r| r.strip_suffix('`'))
}

/// serde's wording, in the words of a configuration file.
fn explain_serde(message: &str) -> String {
    if let Some(rest) = message.strip_prefix("unknown field `") {
        let expected = rest.split_once("`, ").map_or("", |(_, e)| e);
        let expected = expected.replace('`', "");
        return if expected.is_empty() || expected == "there are no fields" {
            "unknown key".into()
        } else {
            format!("unknown key; {expected}")
        };
    }
    if let Some(rest) = message.strip_prefix("invalid type: ") {
        if let Some((found, expected)) = rest.split_once(", expected ") {
            let expected = if expected == "a sequence" {
                "a list, e.g. [a, b]"
            } else {
                expected
            };
            return format!("found {}; expected {expected}", found.replace('`', ""));
        }
    }
    message.to_owned()
}

/// The values a bounded duration accepts, and why its ends are where they
/// are: an error names both ends and the reason for the one crossed.
#[derive(Debug, Clone, Copy)]
pub struct Span {
    /// The shortest value accepted.
    pub min: Duration,
    /// Why nothing shorter.
    pub below: &'static str,
    /// The longest value accepted.
    pub max: Duration,
    /// Why nothing longer.
    pub above: &'static str,
}

impl Span {
    /// `Err` with the message for a value outside the span; `written` is
    /// the value as the operator wrote it.
    pub fn check(&self, d: Duration, written: &str) -> Result<Duration, String> {
        let show = show_duration;
        let range = format!("expected {} to {}", show(self.min), show(self.max));
        if d < self.min {
            let (min, why) = (show(self.min), self.below);
            Err(format!("{written} is below {min} ({why}); {range}"))
        } else if d > self.max {
            let (max, why) = (show(self.max), self.above);
            Err(format!("{written} is above {max} ({why}); {range}"))
        } else {
            Ok(d)
        }
    }
}
