//! Layering (DESIGN §13): defaults, then the YAML file, then `LACHESIS_*`
//! environment variables, then flags — applied to the YAML tree before it
//! is read, so every layer goes through the same checks. Any
//! configuration's: each function takes its [`Schema`] (or [`Layout`]).
//!
//! Environment variables name a key's path in upper case with `__` between
//! segments: `tunables.scrape_interval` is `LACHESIS_TUNABLES__SCRAPE_INTERVAL`,
//! `notifications.kafka.sasl.password` is
//! `LACHESIS_NOTIFICATIONS__KAFKA__SASL__PASSWORD`. A `LACHESIS_` variable
//! that contains `__` or starts with a section name (`LACHESIS_TUNABLES_…`)
//! is configuration and must name a key; other `LACHESIS_` names (the lab
//! scripts' `LACHESIS_CLOUD_DIR`) are not read.

use std::ffi::OsString;
use std::fmt;

use serde_json::{Map, Value};

use crate::{Key, Schema, Shape, REDACTED};

use super::error::Issue;

/// Prefix of every configuration variable.
pub const ENV_PREFIX: &str = "LACHESIS_";

/// A configuration's keys, and the key (with a value) its messages give as
/// an example.
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    /// Every key and section, from the configuration's types.
    pub schema: &'static Schema,
    /// A key shown in messages, e.g. `tunables.scrape_interval`.
    pub example: &'static str,
    /// A value of it, e.g. `5s`.
    pub example_value: &'static str,
}

/// One value set over the file by the environment or a flag.
#[derive(Clone, PartialEq, Eq)]
pub struct Override {
    pub key: &'static Key,
    pub value: String,
    /// The variable or flag that set it, for error messages.
    pub origin: String,
}

impl fmt::Debug for Override {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `secret`, `broker URL (secret passwords)`.
        let shown = if self.key.label.contains("secret") {
            REDACTED
        } else {
            &self.value
        };
        write!(f, "{}={shown:?} ({})", self.key.path, self.origin)
    }
}

/// The environment variable of a key.
#[must_use]
pub fn env_name(path: &str) -> String {
    format!("{ENV_PREFIX}{}", path.to_uppercase().replace('.', "__"))
}

/// The configuration variables among `vars` (sorted by name, so the result
/// does not depend on the environment's order).
#[must_use]
pub fn from_env<I>(layout: &Layout, vars: I) -> (Vec<Override>, Vec<Issue>)
where
    I: IntoIterator<Item = (OsString, OsString)>,
{
    let schema = layout.schema;
    let sections = schema.children("");
    let mut vars: Vec<(String, OsString)> = vars
        .into_iter()
        .filter_map(|(name, value)| Some((name.into_string().ok()?, value)))
        .filter(|(name, _)| name.starts_with(ENV_PREFIX))
        .collect();
    vars.sort_by(|a, b| a.0.cmp(&b.0));
    let mut overrides = Vec::new();
    let mut issues = Vec::new();
    for (name, value) in vars {
        let rest = &name[ENV_PREFIX.len()..];
        let first_word = rest.split('_').next().unwrap_or("").to_lowercase();
        if !rest.contains("__") {
            if sections.contains(&first_word.as_str()) {
                issues.push(Issue::new(
                    &name,
                    format!(
                        "not a configuration variable; separate path segments with a double \
                         underscore, e.g. {}",
                        env_name(layout.example)
                    ),
                ));
            }
            continue;
        }
        let path = rest.to_lowercase().replace("__", ".");
        let Some(key) = schema.key(&path) else {
            issues.push(Issue::new(
                &name,
                format!(
                    "not a configuration variable ({})",
                    unknown_key(schema, &path)
                ),
            ));
            continue;
        };
        match value.into_string() {
            Ok(value) => overrides.push(Override {
                key,
                value,
                origin: name,
            }),
            Err(_) => issues.push(Issue::new(&name, "value is not UTF-8")),
        }
    }
    (overrides, issues)
}

/// `--set key.path=value` flags, then `--log-level` (which wins over a
/// `--set log.level=…`).
#[must_use]
pub fn from_flags(
    layout: &Layout,
    set: &[String],
    log_level: Option<&str>,
) -> (Vec<Override>, Vec<Issue>) {
    let schema = layout.schema;
    let mut overrides = Vec::new();
    let mut issues = Vec::new();
    for item in set {
        let Some((path, value)) = item.split_once('=') else {
            issues.push(Issue::new(
                format!("--set {item}"),
                format!(
                    "expected KEY=VALUE, e.g. --set {}={}",
                    layout.example, layout.example_value
                ),
            ));
            continue;
        };
        match schema.key(path.trim()) {
            Some(key) => overrides.push(Override {
                key,
                value: value.to_owned(),
                origin: "--set".into(),
            }),
            None => issues.push(Issue::new(
                format!("--set {}", path.trim()),
                unknown_key(schema, path.trim()),
            )),
        }
    }
    if let Some(level) = log_level {
        overrides.push(Override {
            key: schema
                .key("log.level")
                .expect("a configuration with --log-level has log.level"),
            value: level.to_owned(),
            origin: "--log-level".into(),
        });
    }
    (overrides, issues)
}

/// Explains an unknown path by what its deepest known section holds.
#[must_use]
pub fn unknown_key(schema: &Schema, path: &str) -> String {
    let children = schema.children(path);
    if !children.is_empty() {
        return format!(
            "{path} is a section, not a key; it holds {}",
            children.join(", ")
        );
    }
    let segments: Vec<&str> = path.split('.').collect();
    let section = (0..segments.len())
        .rev()
        .map(|n| segments[..n].join("."))
        .find(|s| !schema.children(s).is_empty())
        .unwrap_or_default();
    let holder = if section.is_empty() {
        "the top level".to_owned()
    } else {
        section.clone()
    };
    format!(
        "no key {path}; {holder} holds {}",
        schema.children(&section).join(", ")
    )
}

/// The YAML tree: the file (or nothing), then the overrides in order. A
/// key or section left empty (`null`) is taken out: it means its default,
/// and an optional section left empty stays off.
pub fn tree(
    schema: &Schema,
    text: Option<&str>,
    overrides: &[Override],
) -> Result<Value, Vec<Issue>> {
    let mut root = match text.map(parse_yaml).transpose()? {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(v @ Value::Object(_)) => v,
        Some(_) => {
            return Err(vec![Issue::new(
                FILE_KEY,
                format!(
                    "expected a mapping of sections ({})",
                    schema.children("").join(", ")
                ),
            )])
        }
    };
    drop_nulls(&mut root);
    let mut issues = Vec::new();
    for o in overrides {
        if let Err(blocker) = set(&mut root, &o.key.path, override_value(o)) {
            issues.push(Issue::new(
                &o.origin,
                format!("cannot set {}: {blocker} is not a mapping", o.key.path),
            ));
        }
    }
    if issues.is_empty() {
        Ok(root)
    } else {
        Err(issues)
    }
}

/// Takes out every `null` of every mapping, depth first.
fn drop_nulls(v: &mut Value) {
    if let Value::Object(map) = v {
        map.retain(|_, child| !child.is_null());
        for child in map.values_mut() {
            drop_nulls(child);
        }
    }
}

/// The key of problems with the file as a whole (the caller names the file).
pub const FILE_KEY: &str = "(file)";

fn parse_yaml(text: &str) -> Result<Value, Vec<Issue>> {
    // Stated rather than left to the crate's default: a tree of JSON values
    // would turn `.inf`/`.nan` into null, i.e. silently into the default.
    // Duplicate keys are refused by the default policy.
    let options = serde_saphyr::options! {
        non_finite_float_policy: serde_saphyr::options::NonFiniteFloatPolicy::Reject,
    };
    serde_saphyr::from_str_with_options::<Value>(text, options).map_err(|e| {
        // The first line only: the rest is a snippet of the file, which may
        // hold a password.
        let shown = e.to_string();
        let first = shown.lines().next().unwrap_or_default();
        let first = first.strip_prefix("error: ").unwrap_or(first);
        let first = first.split(", set ").next().unwrap_or(first);
        vec![Issue::new(FILE_KEY, format!("not valid YAML: {first}"))]
    })
}

/// An override's text as a YAML value of its key's kind.
#[must_use]
pub fn override_value(o: &Override) -> Value {
    let raw = o.value.as_str();
    if o.key.shape == Shape::Text {
        return Value::String(raw.to_owned());
    }
    if o.key.shape == Shape::List && !raw.trim_start().starts_with('[') {
        return Value::Array(
            raw.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| Value::String(s.to_owned()))
                .collect(),
        );
    }
    // `10s` stays text, `0.9` a number, `true` a boolean, `[a, b]` a list;
    // what is not YAML at all is left as text for the value check to judge.
    parse_yaml(raw)
        .ok()
        .filter(|v| !v.is_object())
        .unwrap_or_else(|| Value::String(raw.to_owned()))
}

/// The value at a dotted path.
#[must_use]
pub fn get<'a>(root: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(root, |v, seg| v.get(seg))
}

/// Sets a dotted path, creating (or replacing null) sections on the way.
/// Fails with the first section on the way that is not a mapping.
pub fn set(root: &mut Value, path: &str, value: Value) -> Result<(), String> {
    let mut node = root;
    let mut walked = String::new();
    let segments: Vec<&str> = path.split('.').collect();
    for (i, seg) in segments.iter().enumerate() {
        if node.is_null() {
            *node = Value::Object(Map::new());
        }
        let Value::Object(map) = node else {
            return Err(walked);
        };
        if i + 1 == segments.len() {
            map.insert((*seg).to_owned(), value);
            return Ok(());
        }
        if !walked.is_empty() {
            walked.push('.');
        }
        walked.push_str(seg);
        node = map
            .entry((*seg).to_owned())
            .or_insert(Value::Object(Map::new()));
    }
    Ok(())
}

/// The value at a dotted path, to change it.
pub fn get_mut<'a>(root: &'a mut Value, path: &str) -> Option<&'a mut Value> {
    path.split('.').try_fold(root, |v, seg| v.get_mut(seg))
}

/// Takes out the value at a dotted path; whether there was one.
pub fn remove(root: &mut Value, path: &str) -> bool {
    let (parent, name) = match path.rsplit_once('.') {
        Some((parent, name)) => (get_mut(root, parent), name),
        None => (Some(root), path),
    };
    parent
        .and_then(Value::as_object_mut)
        .and_then(|map| map.remove(name))
        .is_some()
}

/// Every non-null leaf of a tree by dotted path (lists are leaves).
#[must_use]
pub fn leaves(root: &Value) -> Vec<(String, Value)> {
    fn walk(prefix: &str, v: &Value, out: &mut Vec<(String, Value)>) {
        match v {
            Value::Object(map) => {
                for (k, child) in map {
                    let path = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(&path, child, out);
                }
            }
            Value::Null => {}
            leaf => out.push((prefix.to_owned(), leaf.clone())),
        }
    }
    let mut out = Vec::new();
    walk("", root, &mut out);
    out
}
