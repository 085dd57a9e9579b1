//! Adding a key is one field with its doc, its default and its form (plus
//! its use). A configuration written like [`Config`]'s tunables with one
//! field more goes through the same code as the real one: the key shows in
//! the `--check-config` printout, the reference check asks for its row,
//! and a reload classifies it.

use lachesis_config::form;
use serde::Deserialize;
use serde_inline_default::serde_inline_default;
use serde_with::serde_as;

use super::*;
use crate::config::reload::changed;

/// `tunables`, cut down to one existing key and the new one.
#[serde_inline_default]
#[serde_as]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping of tunables keys")]
struct ProbeTunables {
    /// How often `flows` is drained into the ledger.
    #[serde_inline_default(Duration::from_secs(10))]
    #[serde_as(as = "form::Duration")]
    scrape_interval: Duration,
    /// The new tunable, and all it takes: a doc, a default, a form.
    #[serde_inline_default(Duration::from_secs(30))]
    #[serde_as(as = "form::Duration")]
    probe_window: Duration,
}

impl Default for ProbeTunables {
    fn default() -> Self {
        lachesis_config::defaults()
    }
}

/// A configuration with that `tunables` and the real `log` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Probe {
    #[serde(default)]
    tunables: ProbeTunables,
    #[serde(default)]
    log: LogSettings,
}

#[test]
fn a_field_with_its_doc_and_default_is_a_key_everywhere() {
    let schema = Schema::of::<Probe>();
    let key = schema.key("tunables.probe_window").expect("a key");
    assert_eq!((key.label, key.shape), ("duration", Shape::Scalar));
    // `--check-config` prints it (Config::to_yaml is this serialization).
    let defaults: Probe = lachesis_config::defaults();
    let printed = serde_saphyr::to_string(&defaults).unwrap();
    assert!(printed.contains("\n  probe_window: 30s\n"), "{printed}");
    // The reference check asks for its row, which the reference lacks.
    let rows = rows_from_types::<Probe>(&schema, &Value::Null, is_hot);
    let row = ["tunables.probe_window", "duration", "30s", "hot"].map(String::from);
    assert!(rows.contains(&row), "{rows:?}");
    assert!(!REFERENCE.contains("`tunables.probe_window`"));
    // A reload classifies it by the layout: a tunable is hot.
    let tree: Value = serde_saphyr::from_str("tunables:\n  probe_window: 1m\n").unwrap();
    let new = Probe::deserialize(tree).unwrap();
    assert_eq!(new.tunables.probe_window, Duration::from_mins(1));
    assert_eq!(changed(&schema, &defaults, &new), ["tunables.probe_window"]);
    assert!(is_hot("tunables.probe_window"));
}
