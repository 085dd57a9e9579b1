//! The layers of the agent's configuration: its variables, flags and
//! messages (`lachesis_config::layered::layers`, read with the agent's
//! schema).

use std::ffi::OsString;

use lachesis_config::layered::layers::{self, env_name, get, override_value, Override, FILE_KEY};
use lachesis_config::layered::Issue;
use serde_json::Value;

use super::super::model::{LAYOUT, SCHEMA};

fn from_env(vars: Vec<(OsString, OsString)>) -> (Vec<Override>, Vec<Issue>) {
    layers::from_env(&LAYOUT, vars)
}

fn from_flags(set: &[String], log_level: Option<&str>) -> (Vec<Override>, Vec<Issue>) {
    layers::from_flags(&LAYOUT, set, log_level)
}

fn tree(text: Option<&str>, overrides: &[Override]) -> Result<Value, Vec<Issue>> {
    layers::tree(&SCHEMA, text, overrides)
}

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
