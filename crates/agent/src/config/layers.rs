//! Layering (DESIGN §13): defaults, then the YAML file, then `LACHESIS_*`
//! environment variables, then flags — applied to the YAML tree before it
//! is read, so every layer goes through the same checks.
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

use lachesis_config::{Key, Shape, REDACTED};

use super::error::Issue;
use super::model::SCHEMA;

/// Prefix of every configuration variable.
pub const ENV_PREFIX: &str = "LACHESIS_";

/// One value set over the file by the environment or a flag.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Override {
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
pub(crate) fn from_env<I>(vars: I) -> (Vec<Override>, Vec<Issue>)
where
    I: IntoIterator<Item = (OsString, OsString)>,
{
    let sections = SCHEMA.children("");
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
                        env_name("tunables.scrape_interval")
                    ),
                ));
            }
            continue;
        }
        let path = rest.to_lowercase().replace("__", ".");
        let Some(key) = SCHEMA.key(&path) else {
            issues.push(Issue::new(
                &name,
                format!("not a configuration variable ({})", unknown_key(&path)),
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
pub(crate) fn from_flags(set: &[String], log_level: Option<&str>) -> (Vec<Override>, Vec<Issue>) {
    let mut overrides = Vec::new();
    let mut issues = Vec::new();
    for item in set {
        let Some((path, value)) = item.split_once('=') else {
            issues.push(Issue::new(
                format!("--set {item}"),
                "expected KEY=VALUE, e.g. --set tunables.scrape_interval=5s",
            ));
            continue;
        };
        match SCHEMA.key(path.trim()) {
            Some(key) => overrides.push(Override {
                key,
                value: value.to_owned(),
                origin: "--set".into(),
            }),
            None => issues.push(Issue::new(
                format!("--set {}", path.trim()),
                unknown_key(path.trim()),
            )),
        }
    }
    if let Some(level) = log_level {
        overrides.push(Override {
            key: SCHEMA.key("log.level").expect("log.level is a key"),
            value: level.to_owned(),
            origin: "--log-level".into(),
        });
    }
    (overrides, issues)
}

/// Explains an unknown path by what its deepest known section holds.
pub(crate) fn unknown_key(path: &str) -> String {
    let children = SCHEMA.children(path);
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
        .find(|s| !SCHEMA.children(s).is_empty())
        .unwrap_or_default();
    let holder = if section.is_empty() {
        "the top level".to_owned()
    } else {
        section.clone()
    };
    format!(
        "no key {path}; {holder} holds {}",
        SCHEMA.children(&section).join(", ")
    )
}

/// The YAML tree: the file (or nothing), then the overrides in order. A
/// key or section left empty (`null`) is taken out: it means its default,
/// and an optional section left empty stays off.
pub(crate) fn tree(text: Option<&str>, overrides: &[Override]) -> Result<Value, Vec<Issue>> {
    let mut root = match text.map(parse_yaml).transpose()? {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(v @ Value::Object(_)) => v,
        Some(_) => {
            return Err(vec![Issue::new(
                FILE_KEY,
                format!(
                    "expected a mapping of sections ({})",
                    SCHEMA.children("").join(", ")
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
pub(crate) const FILE_KEY: &str = "(file)";

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
fn override_value(o: &Override) -> Value {
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
pub(crate) fn get<'a>(root: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(root, |v, seg| v.get(seg))
}

/// Sets a dotted path, creating (or replacing null) sections on the way.
/// Fails with the first section on the way that is not a mapping.
pub(crate) fn set(root: &mut Value, path: &str, value: Value) -> Result<(), String> {
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
pub(crate) fn get_mut<'a>(root: &'a mut Value, path: &str) -> Option<&'a mut Value> {
    path.split('.').try_fold(root, |v, seg| v.get_mut(seg))
}

/// Takes out the value at a dotted path; whether there was one.
pub(crate) fn remove(root: &mut Value, path: &str) -> bool {
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
pub(crate) fn leaves(root: &Value) -> Vec<(String, Value)> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect()
    }

    #[test]
    fn env_names_map_to_paths_and_back() {
        assert_eq!(
            env_name("tunables.scrape_interval"),
            "LACHESIS_TUNABLES__SCRAPE_INTERVAL"
        );
        for key in SCHEMA.keys() {
            let (o, issues) = from_env(env(&[(&env_name(&key.path), "x")]));
            assert!(issues.is_empty(), "{issues:?}");
            assert_eq!(o[0].key.path, key.path);
        }
    }

    #[test]
    fn unknown_configuration_variables_are_named() {
        let (o, issues) = from_env(env(&[
            ("LACHESIS_TUNABLES__SCRAPE_INTERVL", "5s"),
            ("LACHESIS_TUNABLES_SCRAPE_INTERVAL", "5s"),
            ("LACHESIS_BOGUS__KEY", "1"),
            ("LACHESIS_NOTIFICATIONS__KAFKA", "x"),
            // Not configuration: the lab scripts' own variables, and others.
            ("LACHESIS_CLOUD_DIR", "/var/lib/x"),
            ("PATH", "/bin"),
        ]));
        assert!(o.is_empty());
        let shown: Vec<String> = issues.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "LACHESIS_BOGUS__KEY: not a configuration variable (no key bogus.key; the top \
                 level holds openstack, metadata, listen, datapath, state, notifications, tunables, log)",
                "LACHESIS_NOTIFICATIONS__KAFKA: not a configuration variable \
                 (notifications.kafka is a section, not a key; it holds brokers, topic, tls, sasl)",
                "LACHESIS_TUNABLES_SCRAPE_INTERVAL: not a configuration variable; separate path \
                 segments with a double underscore, e.g. LACHESIS_TUNABLES__SCRAPE_INTERVAL",
                &format!(
                    "LACHESIS_TUNABLES__SCRAPE_INTERVL: not a configuration variable (no key \
                     tunables.scrape_intervl; tunables holds {})",
                    SCHEMA.children("tunables").join(", ")
                ),
            ]
        );
    }

    #[test]
    fn flags_set_and_log_level() {
        let (o, issues) = from_flags(
            &[
                "tunables.kick_debounce=2s".into(),
                "log.level=debug".into(),
                "no-equals".into(),
                "tunables.nope=1".into(),
            ],
            Some("trace"),
        );
        let got: Vec<(&str, &str, &str)> = o
            .iter()
            .map(|o| (o.key.path.as_str(), o.value.as_str(), o.origin.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("tunables.kick_debounce", "2s", "--set"),
                ("log.level", "debug", "--set"),
                ("log.level", "trace", "--log-level"),
            ]
        );
        assert_eq!(issues.len(), 2);
        assert_eq!(issues[0].key, "--set no-equals");
        assert_eq!(issues[1].key, "--set tunables.nope");
    }

    #[test]
    fn override_values_take_their_key_kind() {
        let o = |path: &str, value: &str| Override {
            key: SCHEMA.key(path).unwrap(),
            value: value.into(),
            origin: "test".into(),
        };
        let cases = [
            (o("tunables.scrape_interval", "10s"), Value::from("10s")),
            (
                o("tunables.pressure_high_watermark", "0.9"),
                Value::from(0.9),
            ),
            (
                o("notifications.rabbitmq.durable", "true"),
                Value::from(true),
            ),
            (o("tunables.unresolved_cap", "500"), Value::from(500)),
            (
                o("datapath.interface_prefixes", "tap, vnet"),
                Value::from(vec!["tap", "vnet"]),
            ),
            (
                o("datapath.interfaces", "[eth1, eth2]"),
                Value::from(vec!["eth1", "eth2"]),
            ),
            (o("datapath.interfaces", ""), Value::Array(vec![])),
            // Secrets and paths are never read as YAML.
            (
                o("notifications.kafka.sasl.password", "*alias !tag"),
                Value::from("*alias !tag"),
            ),
            (o("openstack.cloud", "123"), Value::from("123")),
            // A mapping where a scalar belongs stays text for the check to reject.
            (o("log.level", "{a: 1}"), Value::from("{a: 1}")),
        ];
        for (ov, want) in cases {
            assert_eq!(override_value(&ov), want, "{ov:?}");
        }
        // A secret override's Debug hides it.
        let secret = o("notifications.kafka.sasl.password", "hunter2");
        assert!(!format!("{secret:?}").contains("hunter2"));
    }

    #[test]
    fn defaults_fill_only_present_optional_sections() {
        use crate::config::Config;
        let c = Config::from_yaml("notifications:\n  kafka:\n    brokers: [k:9092]\n").unwrap();
        let kafka = c.notifications.kafka.unwrap();
        assert_eq!(kafka.topic, "notifications.info");
        // tls is absent, so it is off.
        assert_eq!(kafka.tls, lachesis_notify::KafkaTls::default());
        assert!(!kafka.tls.enabled);
        assert_eq!(c.notifications.rabbitmq, None);
        assert_eq!(
            c.tunables.scrape_interval,
            std::time::Duration::from_secs(10)
        );
        // A null key takes its default like an absent one.
        let t = tree(Some("tunables:\n  scrape_interval:\n"), &[]).unwrap();
        assert_eq!(get(&t, "tunables.scrape_interval"), None);
        let c = Config::from_yaml("tunables:\n  scrape_interval:\n").unwrap();
        assert_eq!(
            c.tunables.scrape_interval,
            std::time::Duration::from_secs(10)
        );
    }

    #[test]
    fn overrides_create_sections_and_win_over_the_file() {
        let o = Override {
            key: SCHEMA.key("notifications.rabbitmq.url").unwrap(),
            value: "amqp://u:p@h/".into(),
            origin: "LACHESIS_NOTIFICATIONS__RABBITMQ__URL".into(),
        };
        let c = crate::config::Config::parse(Some("notifications:\n"), vec![o.clone()]).unwrap();
        assert_eq!(c.notifications.rabbitmq.map(|r| r.exchanges.len()), Some(5));
        let blocked = tree(Some("notifications: 5\n"), &[o]).unwrap_err();
        assert_eq!(
            blocked[0].to_string(),
            "LACHESIS_NOTIFICATIONS__RABBITMQ__URL: cannot set notifications.rabbitmq.url: \
             notifications is not a mapping"
        );
    }

    #[test]
    fn yaml_errors_show_no_file_content() {
        let err = tree(
            Some("notifications:\n  rabbitmq: {url: amqp://u:hunter2@h/\nlog: [\n"),
            &[],
        )
        .unwrap_err();
        assert_eq!(err.len(), 1);
        assert_eq!(err[0].key, FILE_KEY);
        assert!(
            err[0].message.starts_with("not valid YAML: line "),
            "{}",
            err[0]
        );
        assert!(!err[0].message.contains("hunter2"), "{}", err[0]);
        let inf = tree(Some("tunables:\n  pressure_high_watermark: .inf\n"), &[]).unwrap_err();
        assert_eq!(
            inf[0].message,
            "not valid YAML: line 2 column 28: non-finite float `.inf` rejected by the configured policy"
        );
        let dup = tree(Some("log:\n  level: info\n  level: debug\n"), &[]).unwrap_err();
        assert_eq!(
            dup[0].message,
            "not valid YAML: line 3 column 3: duplicate mapping key: level"
        );
        let list = tree(Some("- a\n"), &[]).unwrap_err();
        assert!(list[0]
            .message
            .starts_with("expected a mapping of sections"));
    }
}
