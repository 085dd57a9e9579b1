//! Cross-module configuration tests, by concern.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::time::Duration;

use lachesis_datapath::{AttachMode, DatapathConfig, DEFAULT_FLOWS_MEMORY_BUDGET};
use lachesis_ledger::UnresolvedLimits;
use lachesis_planner::PlanOptions;
use serde_json::Value;

use super::keys::{self, Fallback, Reload, KEYS};
use super::layers;
use super::render::Secrets;
use super::*;

mod cases;
mod files;
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

fn leaf(config: &Config, path: &str) -> Option<Value> {
    config
        .leaves(Secrets::Keep)
        .into_iter()
        .find(|(p, _)| p == path)
        .map(|(_, v)| v)
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
