//! Cross-module configuration tests, by concern.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::time::Duration;

use lachesis_config::{Schema, Shape};
use lachesis_datapath::{AttachMode, DatapathConfig, DEFAULT_FLOWS_MEMORY_BUDGET};
use lachesis_ledger::UnresolvedLimits;
use lachesis_planner::PlanOptions;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use super::model::{is_hot, SCHEMA};
use super::reload::compared;
use super::*;
use lachesis_config::layered::layers;

mod adding;
mod cases;
mod files;
mod layer_values;
mod layering;
mod reloading;

const EXAMPLE: &str = include_str!("../../../../../examples/lachesis.yaml");
const REFERENCE: &str = include_str!("../../../../../docs/configuration.md");

fn example_tree() -> Value {
    serde_saphyr::from_str(EXAMPLE).expect("the example is YAML")
}

/// The example file with `path` set to `yaml` (a YAML value), as file text.
fn example_with(path: &str, yaml: &str) -> String {
    let mut tree = example_tree();
    let value: Value = serde_saphyr::from_str(yaml).expect("case values are YAML");
    layers::set(&mut tree, path, value).expect("the example has every section");
    serde_saphyr::to_string(&tree).expect("a tree serializes")
}

/// A key's value as the effective configuration shows it (a secret as its
/// fingerprint).
fn leaf(config: &Config, path: &str) -> Option<Value> {
    compared(config).remove(path)
}

/// What [`leaf`] gives for a key shown as `yaml`: the value itself, or for
/// a secret the fingerprint of the text.
fn shown(path: &str, yaml: &str) -> Value {
    let value: Value = serde_saphyr::from_str(yaml).unwrap();
    if SCHEMA.key(path).is_some_and(|k| k.label.contains("secret")) {
        let text = value.as_str().expect("a secret is text").to_owned();
        lachesis_config::secret::comparing(|| serde_json::to_value(Secret::new(text))).unwrap()
    } else {
        value
    }
}

fn errors(text: &str) -> Vec<String> {
    Config::from_yaml(text)
        .expect_err("invalid")
        .issues
        .iter()
        .map(ToString::to_string)
        .collect()
}

fn env(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
    pairs
        .iter()
        .map(|(k, v)| (OsString::from(k), OsString::from(v)))
        .collect()
}

fn file_with(text: &str) -> tempfile::NamedTempFile {
    let f = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(f.path(), text).unwrap();
    f
}

/// What a key is when nothing sets it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Fallback {
    /// This value, written as in the file (YAML flow form).
    Value(String),
    /// Unset: the feature it configures is off or chosen elsewhere.
    Unset,
    /// Must be given whenever its section is present.
    Required,
}

/// Every key of `T` with what it is when nothing sets it: read from the
/// types by turning every optional section on with nothing in it, and
/// giving each key that then turns out required its value in `example`.
fn fallbacks<T: DeserializeOwned + Serialize>(
    schema: &Schema,
    example: &Value,
) -> Vec<(String, Fallback)> {
    let mut tree = Value::Object(serde_json::Map::new());
    for section in schema.sections().iter().filter(|s| s.optional) {
        layers::set(
            &mut tree,
            &section.path,
            Value::Object(serde_json::Map::new()),
        )
        .unwrap();
    }
    let mut required = BTreeSet::new();
    let config: T = loop {
        match serde_path_to_error::deserialize(tree.clone()) {
            Ok(config) => break config,
            Err(e) => {
                let message = e.inner().to_string();
                let field = message
                    .strip_prefix("missing field `")
                    .and_then(|r| r.strip_suffix('`'))
                    .unwrap_or_else(|| panic!("{e}"));
                let key = format!("{}.{field}", e.path());
                let value = layers::get(example, &key)
                    .unwrap_or_else(|| panic!("the example has no {key}"))
                    .clone();
                layers::set(&mut tree, &key, value).unwrap();
                required.insert(key);
            }
        }
    };
    let values = serde_json::to_value(&config).unwrap();
    schema
        .keys()
        .iter()
        .map(|k| {
            let fallback = if required.contains(&k.path) {
                Fallback::Required
            } else {
                match layers::get(&values, &k.path) {
                    None | Some(Value::Null) => Fallback::Unset,
                    Some(v) => Fallback::Value(flow(v)),
                }
            };
            (k.path.clone(), fallback)
        })
        .collect()
}

/// A value in YAML's flow form, as the reference writes defaults.
fn flow(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            format!(
                "[{}]",
                items.iter().map(flow).collect::<Vec<_>>().join(", ")
            )
        }
        other => other.to_string(),
    }
}

/// `| `key` | type | default | reload | meaning |` cells of the reference
/// for every key of `schema`, as the types say they must be.
fn rows_from_types<T: DeserializeOwned + Serialize>(
    schema: &Schema,
    example: &Value,
    hot: impl Fn(&str) -> bool,
) -> Vec<[String; 4]> {
    fallbacks::<T>(schema, example)
        .into_iter()
        .zip(schema.keys())
        .map(|((path, fallback), key)| {
            let default = match fallback {
                Fallback::Value(v) => v,
                Fallback::Unset => "unset".to_owned(),
                Fallback::Required => "required".to_owned(),
            };
            assert!(!key.label.is_empty(), "{path} names no value form");
            [
                path.clone(),
                key.label.replace(" | ", " \\| "),
                default,
                if hot(&path) { "hot" } else { "restart" }.to_owned(),
            ]
        })
        .collect()
}
