//! Cross-module configuration tests: every key valid and invalid, unknown
//! keys at every depth, layering, the example file, the reference document,
//! reload and redaction.

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

const EXAMPLE: &str = include_str!("../../../../examples/lachesis.yaml");
const REFERENCE: &str = include_str!("../../../../docs/configuration.md");

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

/// One key: values that must be accepted (with the value the effective
/// configuration shows for them) and values that must be refused (with every
/// error they cause), each set into the example file.
struct Case {
    path: &'static str,
    valid: &'static [(&'static str, &'static str)],
    invalid: &'static [(&'static str, &'static [&'static str])],
}

const CASES: &[Case] = &[
    Case {
        path: "openstack.cloud",
        valid: &[("other", "other"), ("123", "'123'")],
        invalid: &[
            ("''", &["openstack.cloud: is empty; expected some text"]),
            (
                "[a]",
                &["openstack.cloud: found sequence; expected a single value (text, number or true/false)"],
            ),
        ],
    },
    Case {
        path: "openstack.clouds_file",
        valid: &[("/srv/clouds.yaml", "/srv/clouds.yaml")],
        invalid: &[(
            "clouds.yaml",
            &["openstack.clouds_file: \"clouds.yaml\" is not an absolute path; expected a path starting with /"],
        )],
    },
    Case {
        path: "listen.metrics",
        valid: &[("127.0.0.1:1234", "127.0.0.1:1234"), ("'[::]:9847'", "'[::]:9847'")],
        invalid: &[
            (
                "localhost:9847",
                &["listen.metrics: \"localhost:9847\" is not an address; expected IP:port, e.g. 0.0.0.0:9847 or [::1]:9848"],
            ),
            (
                "9847",
                &["listen.metrics: 9847 is not an address; expected IP:port, e.g. 0.0.0.0:9847 or [::1]:9848"],
            ),
            (
                "127.0.0.1:9848",
                &["listen.debug: 127.0.0.1:9848 collides with listen.metrics (127.0.0.1:9848); use another port"],
            ),
        ],
    },
    Case {
        path: "listen.debug",
        valid: &[("'[::1]:9999'", "'[::1]:9999'"), ("10.0.0.1:9848", "10.0.0.1:9848")],
        invalid: &[
            (
                "0.0.0.0:9847",
                &["listen.debug: 0.0.0.0:9847 collides with listen.metrics (0.0.0.0:9847); use another port"],
            ),
            ("127.0.0.1:9847", &["listen.debug: 127.0.0.1:9847 collides with listen.metrics (0.0.0.0:9847); use another port"]),
        ],
    },
    Case {
        path: "datapath.interface_prefixes",
        valid: &[("[tap, vnet]", "[tap, vnet]")],
        invalid: &[
            (
                "[]",
                &["datapath.interface_prefixes: is empty and so is datapath.interfaces: no interface would be metered"],
            ),
            ("[tap, tap]", &["datapath.interface_prefixes[1]: \"tap\" is listed twice"]),
            (
                "tap",
                &["datapath.interface_prefixes: found string \"tap\"; expected a list, e.g. [a, b]"],
            ),
            (
                "[tap, a/b]",
                &["datapath.interface_prefixes[1]: \"a/b\" is not an interface name; expected 1 to 15 characters without '/', ':' or spaces"],
            ),
        ],
    },
    Case {
        path: "datapath.interfaces",
        valid: &[("[eth3, eth4]", "[eth3, eth4]")],
        invalid: &[(
            "[sixteen-chars-xx]",
            &["datapath.interfaces[0]: \"sixteen-chars-xx\" is not an interface name; expected 1 to 15 characters without '/', ':' or spaces"],
        )],
    },
    Case {
        path: "datapath.bpffs_dir",
        valid: &[("/sys/fs/bpf/other", "/sys/fs/bpf/other")],
        invalid: &[(
            "bpf",
            &["datapath.bpffs_dir: \"bpf\" is not an absolute path; expected a path starting with /"],
        )],
    },
    Case {
        path: "datapath.flows_memory_budget",
        valid: &[
            ("512KiB", "512KiB"),
            ("1GiB", "1GiB"),
            ("1048576", "1MiB"),
            ("100MB", "100000000B"),
        ],
        invalid: &[
            (
                "64M",
                &["datapath.flows_memory_budget: \"64M\" is not a size; expected bytes or e.g. 512KiB, 64MiB, 1GiB"],
            ),
            ("0", &["datapath.flows_memory_budget: must be above 0"]),
            (
                "-1",
                &["datapath.flows_memory_budget: -1 is not a size; expected bytes or e.g. 512KiB, 64MiB, 1GiB"],
            ),
        ],
    },
    Case {
        path: "datapath.attach_mode",
        valid: &[("tcx", "tcx"), ("tc", "tc")],
        invalid: &[(
            "xdp",
            &["datapath.attach_mode: \"xdp\" is not one of auto, tcx, tc"],
        )],
    },
    Case {
        path: "state.path",
        valid: &[("/tmp/state.json", "/tmp/state.json")],
        invalid: &[(
            "state.json",
            &["state.path: \"state.json\" is not an absolute path; expected a path starting with /"],
        )],
    },
    Case {
        path: "notifications.rabbitmq.url",
        valid: &[(
            "amqps://guest:guest@localhost:5671/vhost",
            "amqps://guest:guest@localhost:5671/vhost",
        )],
        invalid: &[
            (
                "http://u:topsecret@host/",
                &["notifications.rabbitmq.url: scheme \"http\" is not amqp or amqps; expected amqp://user:password@host:5672/vhost or amqps://… (value not shown: it may hold a password)"],
            ),
            (
                "amqp://u:p@host/",
                &["notifications.rabbitmq.ca_file: is set but notifications.rabbitmq.url is amqp:// (no TLS); use amqps://"],
            ),
            (
                "null",
                &["notifications.rabbitmq.url: is required when notifications.rabbitmq is set"],
            ),
        ],
    },
    Case {
        path: "notifications.rabbitmq.exchanges",
        valid: &[("[neutron]", "[neutron]")],
        invalid: &[
            (
                "[]",
                &["notifications.rabbitmq.exchanges: is empty: the agent's queue would receive nothing"],
            ),
            (
                "['bad name']",
                &["notifications.rabbitmq.exchanges[0]: \"bad name\" is not an exchange name; expected letters, digits and - _ . :"],
            ),
        ],
    },
    Case {
        path: "notifications.rabbitmq.durable",
        valid: &[("true", "true")],
        invalid: &[
            ("maybe", &["notifications.rabbitmq.durable: \"maybe\" is not true or false"]),
            ("1", &["notifications.rabbitmq.durable: 1 is not true or false"]),
        ],
    },
    Case {
        path: "notifications.rabbitmq.ca_file",
        valid: &[("/etc/ca.pem", "/etc/ca.pem")],
        invalid: &[(
            "ca.pem",
            &["notifications.rabbitmq.ca_file: \"ca.pem\" is not an absolute path; expected a path starting with /"],
        )],
    },
    Case {
        path: "notifications.kafka.brokers",
        valid: &[("['k:1', '[fd00::1]:9092']", "['k:1', '[fd00::1]:9092']")],
        invalid: &[
            ("[]", &["notifications.kafka.brokers: is empty; expected at least one host:port"]),
            (
                "[kafka1]",
                &["notifications.kafka.brokers[0]: \"kafka1\" is not a broker address; expected host:port, e.g. kafka1:9092 or [fd00::1]:9092"],
            ),
            (
                "null",
                &["notifications.kafka.brokers: is required when notifications.kafka is set"],
            ),
        ],
    },
    Case {
        path: "notifications.kafka.topic",
        valid: &[("events", "events")],
        invalid: &[(
            "'a b'",
            &["notifications.kafka.topic: \"a b\" is not a Kafka topic name; expected 1 to 249 letters, digits and . _ -"],
        )],
    },
    Case {
        path: "notifications.kafka.tls.enabled",
        valid: &[("true", "true")],
        invalid: &[
            (
                "false",
                &[
                    "notifications.kafka.tls.ca_file: is set but notifications.kafka.tls.enabled is false",
                    "notifications.kafka.tls.cert_file: is set but notifications.kafka.tls.enabled is false",
                    "notifications.kafka.tls.key_file: is set but notifications.kafka.tls.enabled is false",
                ],
            ),
            ("on-ish", &["notifications.kafka.tls.enabled: \"on-ish\" is not true or false"]),
        ],
    },
    Case {
        path: "notifications.kafka.tls.ca_file",
        valid: &[("/etc/other-ca.pem", "/etc/other-ca.pem")],
        invalid: &[(
            "ca.pem",
            &["notifications.kafka.tls.ca_file: \"ca.pem\" is not an absolute path; expected a path starting with /"],
        )],
    },
    Case {
        path: "notifications.kafka.tls.cert_file",
        valid: &[("/etc/other.pem", "/etc/other.pem")],
        invalid: &[(
            "null",
            &["notifications.kafka.tls.cert_file: is required with notifications.kafka.tls.key_file"],
        )],
    },
    Case {
        path: "notifications.kafka.tls.key_file",
        valid: &[("/etc/other.key", "/etc/other.key")],
        invalid: &[(
            "null",
            &["notifications.kafka.tls.key_file: is required with notifications.kafka.tls.cert_file"],
        )],
    },
    Case {
        path: "notifications.kafka.sasl.mechanism",
        valid: &[("plain", "plain"), ("scram-sha-256", "scram-sha-256")],
        invalid: &[
            (
                "gssapi",
                &["notifications.kafka.sasl.mechanism: \"gssapi\" is not one of plain, scram-sha-256, scram-sha-512"],
            ),
            (
                "null",
                &["notifications.kafka.sasl.mechanism: is required when notifications.kafka.sasl is set"],
            ),
        ],
    },
    Case {
        path: "notifications.kafka.sasl.username",
        valid: &[("svc", "svc")],
        invalid: &[("''", &["notifications.kafka.sasl.username: is empty; expected some text"])],
    },
    Case {
        path: "notifications.kafka.sasl.password",
        valid: &[("'p@ss: word'", "'p@ss: word'")],
        invalid: &[
            ("''", &["notifications.kafka.sasl.password: is empty; expected the SASL password"]),
            (
                "null",
                &["notifications.kafka.sasl.password: is required when notifications.kafka.sasl is set"],
            ),
        ],
    },
    Case {
        path: "tunables.scrape_interval",
        valid: &[("200ms", "200ms"), ("5m", "5m"), ("1h", "1h"), ("90s", "1m 30s")],
        invalid: &[
            (
                "10 parsecs",
                &["tunables.scrape_interval: \"10 parsecs\" is not a duration; expected e.g. 200ms, 10s, 5m"],
            ),
            ("10", &["tunables.scrape_interval: 10 has no unit; expected e.g. 200ms, 10s, 5m"]),
            ("0s", &["tunables.scrape_interval: must be above 0s"]),
        ],
    },
    Case {
        path: "tunables.reconcile_interval",
        valid: &[("1m", "1m")],
        invalid: &[("0ms", &["tunables.reconcile_interval: must be above 0s"])],
    },
    Case {
        path: "tunables.kick_debounce",
        valid: &[("0s", "0s"), ("5s", "5s")],
        invalid: &[(
            "6s",
            &["tunables.kick_debounce: must be at most 5s (the reconciler caps the debounce there)"],
        )],
    },
    Case {
        path: "tunables.ghost_grace",
        valid: &[("0s", "0s"), ("2m", "2m")],
        invalid: &[(
            "soon",
            &["tunables.ghost_grace: \"soon\" is not a duration; expected e.g. 200ms, 10s, 5m"],
        )],
    },
    Case {
        path: "tunables.ghost_sweep_interval",
        valid: &[("30s", "30s")],
        invalid: &[("0s", &["tunables.ghost_sweep_interval: must be above 0s"])],
    },
    Case {
        path: "tunables.state_flush_interval",
        valid: &[("2m", "2m")],
        invalid: &[("0s", &["tunables.state_flush_interval: must be above 0s"])],
    },
    Case {
        path: "tunables.pressure_high_watermark",
        valid: &[("0.9", "0.9")],
        invalid: &[
            ("1.0", &["tunables.pressure_high_watermark: 1 must be below 1.0"]),
            (
                "0.7",
                &["tunables.pressure_low_watermark: 0.75 must be below tunables.pressure_high_watermark (0.7)"],
            ),
            ("high", &["tunables.pressure_high_watermark: \"high\" is not a number; expected e.g. 0.8"]),
        ],
    },
    Case {
        path: "tunables.pressure_low_watermark",
        valid: &[("0.5", "0.5")],
        invalid: &[
            ("0", &["tunables.pressure_low_watermark: 0 must be above 0"]),
            (
                "0.8",
                &["tunables.pressure_low_watermark: 0.8 must be below tunables.pressure_high_watermark (0.8)"],
            ),
        ],
    },
    Case {
        path: "tunables.pressure_max_evictions",
        valid: &[("1", "1"), ("262144", "262144")],
        invalid: &[
            ("0", &["tunables.pressure_max_evictions: 0 is out of range; expected 1 to 262144"]),
            ("262145", &["tunables.pressure_max_evictions: 262145 is out of range; expected 1 to 262144"]),
            ("1.5", &["tunables.pressure_max_evictions: 1.5 is not a whole number"]),
        ],
    },
    Case {
        path: "tunables.unresolved_cap",
        valid: &[("1", "1")],
        invalid: &[
            ("0", &["tunables.unresolved_cap: 0 is out of range; expected 1 to 10000000"]),
            ("10000001", &["tunables.unresolved_cap: 10000001 is out of range; expected 1 to 10000000"]),
        ],
    },
    Case {
        path: "tunables.unresolved_ttl",
        valid: &[("2m", "2m")],
        invalid: &[("0s", &["tunables.unresolved_ttl: must be above 0s"])],
    },
    Case {
        path: "tunables.route_hop_limit",
        valid: &[("255", "255")],
        invalid: &[
            ("256", &["tunables.route_hop_limit: 256 is out of range; expected 1 to 255"]),
            ("-1", &["tunables.route_hop_limit: -1 is out of range; expected 1 to 255"]),
        ],
    },
    Case {
        path: "log.level",
        valid: &[("debug", "debug"), ("error", "error")],
        invalid: &[(
            "verbose",
            &["log.level: \"verbose\" is not one of error, warn, info, debug, trace"],
        )],
    },
    Case {
        path: "log.format",
        valid: &[("json", "json")],
        invalid: &[("xml", &["log.format: \"xml\" is not one of text, json"])],
    },
];

#[test]
fn every_key_has_valid_and_invalid_cases() {
    let covered: Vec<&str> = CASES.iter().map(|c| c.path).collect();
    let keys: Vec<&str> = KEYS.iter().map(|k| k.path).collect();
    assert_eq!(covered, keys);
    for c in CASES {
        assert!(!c.valid.is_empty() && !c.invalid.is_empty(), "{}", c.path);
    }
}

#[test]
fn every_key_accepts_its_valid_values() {
    for c in CASES {
        for (input, shown) in c.valid {
            let text = example_with(c.path, input);
            let config =
                Config::from_yaml(&text).unwrap_or_else(|e| panic!("{} = {input}: {e}", c.path));
            let want: Value = serde_saphyr::from_str(shown).unwrap();
            assert_eq!(leaf(&config, c.path), Some(want), "{} = {input}", c.path);
        }
    }
}

#[test]
fn every_key_refuses_its_invalid_values_naming_the_key() {
    for c in CASES {
        for (input, want) in c.invalid {
            let got = errors(&example_with(c.path, input));
            assert_eq!(got, *want, "{} = {input}", c.path);
        }
    }
}

#[test]
fn unknown_keys_are_refused_at_every_depth() {
    let mut sections = keys::sections();
    sections.insert(0, String::new());
    assert_eq!(sections.len(), 12, "{sections:?}");
    for section in &sections {
        let key = if section.is_empty() {
            "bogus".to_owned()
        } else {
            format!("{section}.bogus")
        };
        let children = keys::children(section);
        // serde's wording for one, two, and more names.
        let expected = if children.len() == 1 {
            format!("expected {}", children[0])
        } else if children.len() == 2 {
            format!("expected {} or {}", children[0], children[1])
        } else {
            format!("expected one of {}", children.join(", "))
        };
        assert_eq!(
            errors(&example_with(&key, "1")),
            [format!("{key}: unknown key; {expected}")],
        );
    }
    // A typo, as an operator would make it.
    assert_eq!(
        errors("tunables:\n  scrape_intervl: 5s\n"),
        [
            "tunables.scrape_intervl: unknown key; expected one of scrape_interval, \
          reconcile_interval, kick_debounce, ghost_grace, ghost_sweep_interval, \
          state_flush_interval, pressure_high_watermark, pressure_low_watermark, \
          pressure_max_evictions, unresolved_cap, unresolved_ttl, route_hop_limit"
        ]
    );
}

#[test]
fn wrong_shapes_name_the_key() {
    assert_eq!(
        errors("tunables: 5\n"),
        ["tunables: found integer 5; expected a mapping of tunables keys"]
    );
    assert_eq!(
        errors("notifications:\n  kafka: [a]\n"),
        ["notifications.kafka: found sequence; expected a mapping of kafka keys"]
    );
    // serde would read a list as a struct's fields in order: never here.
    assert_eq!(
        errors("tunables: [5s, 5m]\n"),
        ["tunables: found sequence; expected a mapping of tunables keys"]
    );
    assert_eq!(
        errors("datapath:\n  interfaces: [[a]]\n"),
        ["datapath.interfaces[0]: found sequence; expected a single value (text, number or true/false)"]
    );
    assert_eq!(
        errors("- a\n"),
        ["(file): expected a mapping of sections (openstack, listen, datapath, state, notifications, tunables, log)"]
    );
}

#[test]
fn several_errors_are_all_reported_once() {
    let got = errors(
        "tunables:\n  scrape_interval: 10 parsecs\n  unresolved_ttl: 0s\nlog:\n  level: loud\n",
    );
    assert_eq!(
        got,
        [
            "tunables.scrape_interval: \"10 parsecs\" is not a duration; expected e.g. 200ms, 10s, 5m",
            "tunables.unresolved_ttl: must be above 0s",
            "log.level: \"loud\" is not one of error, warn, info, debug, trace",
        ]
    );
}

#[test]
fn empty_file_and_comments_only_mean_defaults() {
    assert_eq!(Config::from_yaml("").unwrap(), Config::default());
    assert_eq!(Config::from_yaml("# nothing\n").unwrap(), Config::default());
    assert_eq!(
        Config::from_yaml("tunables:\nlog:\n").unwrap(),
        Config::default()
    );
}

#[test]
fn defaults_agree_with_the_crates_that_use_them() {
    let d = Config::default();
    let dp = DatapathConfig::default();
    assert_eq!(d.datapath.bpffs_dir, dp.bpffs_dir);
    assert_eq!(d.datapath.flows_memory_budget, DEFAULT_FLOWS_MEMORY_BUDGET);
    assert_eq!(d.datapath.attach_mode, AttachMode::Auto);
    assert_eq!(d.datapath.datapath_config().attach_mode, dp.attach_mode);
    assert_eq!(d.tunables.unresolved_limits(), UnresolvedLimits::default());
    assert_eq!(d.tunables.plan_options(), PlanOptions::default());
    // DESIGN §13 and §9, literally.
    assert_eq!(d.listen.metrics, "0.0.0.0:9847".parse().unwrap());
    assert_eq!(d.listen.debug, "127.0.0.1:9848".parse().unwrap());
    assert_eq!(d.datapath.interface_prefixes, ["tap"]);
    assert!(d.datapath.interfaces.is_empty());
    assert_eq!(d.state.path.to_str(), Some("/var/lib/lachesis/state.json"));
    assert_eq!(d.notifications, NotificationSettings::default());
    let t = d.tunables;
    assert_eq!(t.scrape_interval, Duration::from_secs(10));
    assert_eq!(t.reconcile_interval, Duration::from_mins(5));
    assert_eq!(t.kick_debounce, Duration::from_secs(1));
    assert_eq!(t.ghost_grace, Duration::from_mins(1));
    assert_eq!(t.ghost_sweep_interval, Duration::from_mins(1));
    assert_eq!(t.state_flush_interval, Duration::from_mins(1));
    assert!((t.pressure_high_watermark - 0.80).abs() < 1e-12);
    assert!((t.pressure_low_watermark - 0.75).abs() < 1e-12);
    assert_eq!(t.pressure_max_evictions, 1000);
    assert_eq!(
        (d.log.level, d.log.format),
        (LogLevel::Info, LogFormat::Text)
    );
    assert!(d.warnings().is_empty());
}

#[test]
fn interface_matching_and_log_level_parsing() {
    let c = Config::from_yaml("datapath:\n  interface_prefixes: [tap]\n  interfaces: [eth3]\n")
        .unwrap();
    assert!(c.datapath.matches("tap0a1b2c3d-4e"));
    assert!(c.datapath.matches("eth3"));
    assert!(!c.datapath.matches("eth30"));
    assert!(!c.datapath.matches("vnet0"));
    assert_eq!(parse_log_level(" debug\n"), Ok(LogLevel::Debug));
    assert_eq!(
        parse_log_level("loud"),
        Err("\"loud\" is not one of error, warn, info, debug, trace".into())
    );
}

#[test]
fn optional_sections_take_their_defaults_when_present() {
    let c = Config::from_yaml(
        "notifications:\n  rabbitmq:\n    url: amqp://u:p@mq/\n  kafka:\n    brokers: [k:9092]\n",
    )
    .unwrap();
    let r = c.notifications.rabbitmq.unwrap();
    assert_eq!(
        r.exchanges,
        ["neutron", "nova", "keystone", "octavia", "openstack"]
    );
    assert!(!r.durable);
    let k = c.notifications.kafka.unwrap();
    assert_eq!(k.topic, "notifications.info");
    assert_eq!((k.tls, k.sasl), (None, None));
}

#[test]
fn the_example_file_sets_every_key_and_loads_clean() {
    let config = Config::from_yaml(EXAMPLE).expect("the example is valid");
    assert!(config.warnings().is_empty(), "{:?}", config.warnings());
    let all: BTreeSet<&str> = KEYS.iter().map(|k| k.path).collect();
    // Written in the file, not filled in by defaults…
    let written: BTreeSet<String> = layers::leaves(&example_tree())
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    assert_eq!(
        written.iter().map(String::as_str).collect::<BTreeSet<_>>(),
        all
    );
    // …and every key comes back out of the typed configuration: the raw
    // structs, the table and the renderer hold the same keys.
    let rendered: BTreeSet<String> = config
        .leaves(Secrets::Keep)
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    assert_eq!(
        rendered.iter().map(String::as_str).collect::<BTreeSet<_>>(),
        all
    );
    // Where a key has a default, the example shows it (one deliberate
    // exception: Kafka TLS is on, to show its keys).
    for key in KEYS {
        if let Fallback::Value(default) = key.fallback {
            let same =
                Config::from_yaml(&example_with(key.path, default)).is_ok_and(|c| c == config);
            assert_eq!(
                same,
                key.path != "notifications.kafka.tls.enabled",
                "{}",
                key.path
            );
        }
    }
    let k = config.notifications.kafka.as_ref().unwrap();
    assert_eq!(
        k.sasl.as_ref().unwrap().mechanism,
        SaslMechanism::ScramSha512
    );
    assert!(k.tls.as_ref().unwrap().client.is_some());
    assert!(config.notifications.rabbitmq.as_ref().unwrap().url.is_tls());
}

#[test]
fn effective_yaml_reads_back_to_the_same_configuration() {
    let config = Config::from_yaml(EXAMPLE).unwrap();
    let shown = config.to_yaml();
    let again = Config::from_yaml(&shown).expect("the printout is a valid config");
    // Only the redacted secrets differ.
    let differing: Vec<String> = config
        .leaves(Secrets::Keep)
        .into_iter()
        .zip(again.leaves(Secrets::Keep))
        .filter(|(a, b)| a != b)
        .map(|(a, _)| a.0)
        .collect();
    assert_eq!(
        differing,
        [
            "notifications.kafka.sasl.password",
            "notifications.rabbitmq.url"
        ]
    );
    let plain = Config::from_yaml("tunables:\n  scrape_interval: 1500ms\n").unwrap();
    assert_eq!(Config::from_yaml(&plain.to_yaml()).unwrap(), plain);
}

#[test]
fn secrets_are_redacted_in_debug_yaml_and_errors() {
    let text = EXAMPLE
        .replace("lachesis:change-me@", "lachesis:amqp-hunter2@")
        .replace("password: change-me", "password: sasl-hunter2");
    let config = Config::from_yaml(&text).unwrap();
    for shown in [format!("{config:?}"), config.to_yaml()] {
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(
            shown.contains("lachesis:REDACTED@rabbitmq.example.org"),
            "{shown}"
        );
    }
    assert!(config.to_yaml().contains("password: REDACTED"));
    let sasl = config
        .notifications
        .kafka
        .as_ref()
        .unwrap()
        .sasl
        .as_ref()
        .unwrap();
    assert_eq!(sasl.password.expose(), "sasl-hunter2");
    // An invalid URL is never quoted back.
    let bad = text.replace("amqps://lachesis:", "amqqps://lachesis:");
    let shown = errors(&bad).join("\n");
    assert!(
        shown.starts_with("notifications.rabbitmq.url: scheme \"amqqps\""),
        "{shown}"
    );
    assert!(!shown.contains("hunter2"), "{shown}");
    // Nor is a secret set by the environment.
    let e = load(
        ConfigFile::default_at("/nonexistent/lachesis.yaml".into()),
        env(&[
            (
                "LACHESIS_NOTIFICATIONS__RABBITMQ__URL",
                "amqp://u:env-hunter2@",
            ),
            ("LACHESIS_NOTIFICATIONS__KAFKA__BROKERS", "k:9092"),
            (
                "LACHESIS_NOTIFICATIONS__KAFKA__SASL__PASSWORD",
                "env-hunter2",
            ),
        ]),
        &Flags::default(),
    )
    .unwrap_err();
    let shown = format!("{e} {e:?}");
    assert!(!shown.contains("hunter2"), "{shown}");
    assert!(
        shown.contains("(set by LACHESIS_NOTIFICATIONS__RABBITMQ__URL)"),
        "{shown}"
    );
}

#[test]
fn debug_listener_beyond_loopback_is_allowed_but_warned() {
    let c = Config::from_yaml("listen:\n  debug: 0.0.0.0:9848\n").unwrap();
    let w: Vec<String> = c.warnings().iter().map(ToString::to_string).collect();
    assert_eq!(
        w,
        [
            "listen.debug: 0.0.0.0:9848 is not a loopback address: the debug endpoints \
          (configuration, plan, flows) are reachable from the network"
        ]
    );
    let c = Config::from_yaml(
        "notifications:\n  kafka:\n    brokers: [k:1]\n    sasl: {mechanism: plain, username: u, password: p}\n",
    )
    .unwrap();
    assert_eq!(c.warnings()[0].key, "notifications.kafka.sasl.mechanism");
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

#[test]
fn precedence_file_then_environment_then_flags() {
    let f =
        file_with("tunables:\n  scrape_interval: 7s\n  kick_debounce: 2s\nlog:\n  level: debug\n");
    let file = || ConfigFile::new(Some(f.path().to_path_buf()));
    let vars = env(&[
        ("LACHESIS_TUNABLES__SCRAPE_INTERVAL", "8s"),
        ("LACHESIS_LOG__LEVEL", "warn"),
        ("LACHESIS_CLOUD_DIR", "/not/config"),
    ]);
    // File alone.
    let c = load(file(), [], &Flags::default()).unwrap().config;
    assert_eq!(c.tunables.scrape_interval, Duration::from_secs(7));
    assert_eq!(c.log.level, LogLevel::Debug);
    // The environment wins over the file, key by key.
    let c = load(file(), vars.clone(), &Flags::default())
        .unwrap()
        .config;
    assert_eq!(c.tunables.scrape_interval, Duration::from_secs(8));
    assert_eq!(c.tunables.kick_debounce, Duration::from_secs(2));
    assert_eq!(c.log.level, LogLevel::Warn);
    // Flags win over both; --log-level over --set log.level.
    let flags = Flags {
        set: vec![
            "tunables.scrape_interval=9s".into(),
            "log.level=error".into(),
        ],
        log_level: Some("trace".into()),
    };
    let c = load(file(), vars, &flags).unwrap().config;
    assert_eq!(c.tunables.scrape_interval, Duration::from_secs(9));
    assert_eq!(c.tunables.kick_debounce, Duration::from_secs(2));
    assert_eq!(c.log.level, LogLevel::Trace);
    assert_eq!(
        c.overridden(),
        [
            ("log.level", "LACHESIS_LOG__LEVEL"),
            (
                "tunables.scrape_interval",
                "LACHESIS_TUNABLES__SCRAPE_INTERVAL"
            ),
            ("tunables.scrape_interval", "--set"),
            ("log.level", "--set"),
            ("log.level", "--log-level"),
        ]
    );
}

#[test]
fn environment_lists_and_sections() {
    let c = load(
        ConfigFile::default_at("/nonexistent/lachesis.yaml".into()),
        env(&[
            ("LACHESIS_DATAPATH__INTERFACE_PREFIXES", "tap,vnet"),
            ("LACHESIS_DATAPATH__INTERFACES", "[eth3]"),
            ("LACHESIS_NOTIFICATIONS__KAFKA__BROKERS", "k1:9092, k2:9092"),
            ("LACHESIS_NOTIFICATIONS__KAFKA__TLS__ENABLED", "true"),
            ("LACHESIS_TUNABLES__PRESSURE_HIGH_WATERMARK", "0.9"),
        ]),
        &Flags::default(),
    )
    .unwrap()
    .config;
    assert_eq!(c.datapath.interface_prefixes, ["tap", "vnet"]);
    assert_eq!(c.datapath.interfaces, ["eth3"]);
    let k = c.notifications.kafka.unwrap();
    assert_eq!(k.brokers, ["k1:9092", "k2:9092"]);
    assert_eq!(
        k.tls,
        Some(KafkaTls {
            ca_file: None,
            client: None
        })
    );
    assert!((c.tunables.pressure_high_watermark - 0.9).abs() < 1e-12);
}

#[test]
fn layer_errors_name_the_variable_or_flag_and_are_all_reported() {
    let f = file_with("tunables:\n  ghost_grace: later\n");
    let e = load(
        ConfigFile::new(Some(f.path().to_path_buf())),
        env(&[
            ("LACHESIS_TUNABLES__SCRAPE_INTERVL", "5s"),
            ("LACHESIS_TUNABLES__KICK_DEBOUNCE", "9s"),
        ]),
        &Flags {
            set: vec!["tunables.unresolved_cap=0".into(), "nonsense".into()],
            log_level: Some("chatty".into()),
        },
    )
    .unwrap_err();
    let shown: Vec<String> = e.issues.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "LACHESIS_TUNABLES__SCRAPE_INTERVL: not a configuration variable (no key \
             tunables.scrape_intervl; tunables holds scrape_interval, reconcile_interval, \
             kick_debounce, ghost_grace, ghost_sweep_interval, state_flush_interval, \
             pressure_high_watermark, pressure_low_watermark, pressure_max_evictions, \
             unresolved_cap, unresolved_ttl, route_hop_limit)",
            "--set nonsense: expected KEY=VALUE, e.g. --set tunables.scrape_interval=5s",
            "tunables.kick_debounce: must be at most 5s (the reconciler caps the debounce there) \
             (set by LACHESIS_TUNABLES__KICK_DEBOUNCE)",
            "tunables.ghost_grace: \"later\" is not a duration; expected e.g. 200ms, 10s, 5m",
            "tunables.unresolved_cap: 0 is out of range; expected 1 to 10000000 (set by --set)",
            "log.level: \"chatty\" is not one of error, warn, info, debug, trace (set by --log-level)",
        ]
    );
}

#[test]
fn missing_file_is_defaults_only_at_the_default_path() {
    let dir = tempfile::tempdir().unwrap();
    let absent = dir.path().join("lachesis.yaml");
    let loaded = load(
        ConfigFile::default_at(absent.clone()),
        [],
        &Flags::default(),
    )
    .unwrap();
    assert!(!loaded.file_found);
    assert_eq!(loaded.config, Config::default());
    let e = load(ConfigFile::new(Some(absent.clone())), [], &Flags::default()).unwrap_err();
    assert_eq!(e.issues.len(), 1);
    assert_eq!(e.issues[0].key, absent.display().to_string());
    assert!(e.issues[0]
        .message
        .starts_with("cannot read the configuration file: "));
    // YAML syntax errors name the file.
    let f = file_with("log: [\n");
    let e = load(
        ConfigFile::new(Some(f.path().to_path_buf())),
        [],
        &Flags::default(),
    )
    .unwrap_err();
    assert_eq!(e.issues[0].key, f.path().display().to_string());
    assert!(e.issues[0].message.starts_with("not valid YAML: line "));
}

#[test]
fn reload_applies_changed_tunables_as_one_snapshot() {
    let old = Config::from_yaml(EXAMPLE).unwrap();
    let shared = SharedTunables::new(old.tunables);
    let text = EXAMPLE
        .replace("scrape_interval: 10s", "scrape_interval: 2s")
        .replace(
            "pressure_high_watermark: 0.80",
            "pressure_high_watermark: 0.9",
        )
        .replace("level: info", "level: debug");
    let outcome = reload(&old, &text).unwrap();
    assert_eq!(
        outcome.applied,
        [
            "tunables.scrape_interval",
            "tunables.pressure_high_watermark",
            "log.level"
        ]
    );
    assert!(outcome.restart_required.is_empty());
    shared.set(outcome.tunables());
    let now = shared.get();
    assert_eq!(now.scrape_interval, Duration::from_secs(2));
    assert!((now.pressure_high_watermark - 0.9).abs() < 1e-12);
    assert_eq!(outcome.log_level(), LogLevel::Debug);
    // Unchanged text: nothing to apply.
    let same = reload(&outcome.config, &text).unwrap();
    assert!(same.applied.is_empty() && same.restart_required.is_empty());
}

#[test]
fn invalid_reload_is_rejected_whole() {
    let old = Config::from_yaml(EXAMPLE).unwrap();
    let shared = SharedTunables::new(old.tunables);
    // One good change and one bad: neither is taken.
    let text = EXAMPLE
        .replace("scrape_interval: 10s", "scrape_interval: 2s")
        .replace("unresolved_ttl: 60s", "unresolved_ttl: 0s");
    let e = reload(&old, &text).unwrap_err();
    assert_eq!(e.issues.len(), 1);
    assert_eq!(e.issues[0].key, "tunables.unresolved_ttl");
    assert_eq!(shared.get(), old.tunables);
    assert!(reload(&old, "tunables: [\n").is_err());
}

#[test]
fn reload_reports_restart_only_changes_and_keeps_their_old_values() {
    let old = Config::from_yaml(EXAMPLE).unwrap();
    let text = EXAMPLE
        .replace("metrics: 0.0.0.0:9847", "metrics: 0.0.0.0:9900")
        .replace("password: change-me", "password: rotated")
        .replace("kick_debounce: 1s", "kick_debounce: 3s");
    let outcome = reload(&old, &text).unwrap();
    assert_eq!(outcome.applied, ["tunables.kick_debounce"]);
    assert_eq!(
        outcome.restart_required,
        ["listen.metrics", "notifications.kafka.sasl.password"]
    );
    assert_eq!(outcome.config.listen, old.listen);
    assert_eq!(outcome.config.notifications, old.notifications);
    assert_eq!(
        outcome.config.tunables.kick_debounce,
        Duration::from_secs(3)
    );
    // Still pending at the next reload.
    let again = reload(&outcome.config, &text).unwrap();
    assert_eq!(again.restart_required, outcome.restart_required);
}

#[test]
fn reload_classifies_every_key_by_the_table() {
    let old = Config::from_yaml(EXAMPLE).unwrap();
    for c in CASES {
        let (input, shown) = c.valid[0];
        let outcome = reload(&old, &example_with(c.path, input))
            .unwrap_or_else(|e| panic!("{}: {e}", c.path));
        let key = keys::find(c.path).unwrap();
        let new: Value = serde_saphyr::from_str(shown).unwrap();
        let (applied, pending): (Vec<&str>, Vec<&str>) = match key.reload {
            _ if leaf(&old, c.path).as_ref() == Some(&new) => (vec![], vec![]),
            Reload::Hot => (vec![c.path], vec![]),
            Reload::Restart => (vec![], vec![c.path]),
        };
        assert_eq!(outcome.applied, applied, "{}", c.path);
        assert_eq!(outcome.restart_required, pending, "{}", c.path);
        let want = match key.reload {
            Reload::Hot => new,
            Reload::Restart => leaf(&old, c.path).unwrap(),
        };
        assert_eq!(leaf(&outcome.config, c.path), Some(want), "{}", c.path);
    }
}

#[test]
fn reload_keeps_the_environment_and_flag_layers() {
    let f = file_with("tunables:\n  scrape_interval: 7s\n");
    let loaded = load(
        ConfigFile::new(Some(f.path().to_path_buf())),
        env(&[("LACHESIS_TUNABLES__SCRAPE_INTERVAL", "8s")]),
        &Flags {
            set: vec!["tunables.ghost_grace=2m".into()],
            log_level: None,
        },
    )
    .unwrap();
    std::fs::write(
        f.path(),
        "tunables:\n  scrape_interval: 1s\n  ghost_grace: 1s\n  kick_debounce: 4s\n",
    )
    .unwrap();
    let outcome = reload_file(&loaded.file, &loaded.config).unwrap();
    assert_eq!(outcome.applied, ["tunables.kick_debounce"]);
    assert_eq!(outcome.tunables().scrape_interval, Duration::from_secs(8));
    assert_eq!(outcome.tunables().ghost_grace, Duration::from_mins(2));
    // Unreadable and invalid files carry the counter's label.
    // A bad value the flag layer covers is no problem; one it does not is.
    std::fs::write(f.path(), "tunables:\n  ghost_grace: never\n").unwrap();
    assert!(reload_file(&loaded.file, &loaded.config).is_ok());
    std::fs::write(f.path(), "tunables:\n  kick_debounce: never\n").unwrap();
    let (result, e) = reload_file(&loaded.file, &loaded.config).unwrap_err();
    assert_eq!(result.label(), "invalid");
    assert_eq!(e.issues[0].key, "tunables.kick_debounce");
    let gone = ConfigFile::new(Some(f.path().with_extension("gone")));
    let (result, _) = reload_file(&gone, &loaded.config).unwrap_err();
    assert_eq!(result, ReloadResult::Unreadable);
    assert_eq!(
        ReloadResult::ALL.map(ReloadResult::label),
        ["ok", "invalid", "unreadable"]
    );
}

#[test]
fn shared_tunables_swap_whole_snapshots_under_concurrent_readers() {
    let a = Config::default().tunables;
    let mut b = a;
    b.scrape_interval = Duration::from_secs(1);
    b.pressure_high_watermark = 0.9;
    b.route_hop_limit = 3;
    let shared = std::sync::Arc::new(SharedTunables::new(a));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let shared = shared.clone();
            std::thread::spawn(move || {
                for _ in 0..20_000 {
                    let t = shared.get();
                    assert!(t == a || t == b, "torn snapshot {t:?}");
                }
            })
        })
        .collect();
    for i in 0..20_000 {
        shared.set(if i % 2 == 0 { b } else { a });
    }
    for r in readers {
        r.join().unwrap();
    }
}

/// `| `key` | type | default | reload | meaning |` rows of the reference.
fn reference_rows() -> Vec<[String; 4]> {
    REFERENCE
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            // Cells are split on unescaped pipes (`\|` is a pipe in a cell).
            let mut cells = Vec::new();
            let mut cell = String::new();
            let mut chars = l.trim().trim_matches('|').chars().peekable();
            while let Some(c) = chars.next() {
                match c {
                    '\\' if chars.peek() == Some(&'|') => {
                        cell.push_str("\\|");
                        chars.next();
                    }
                    '|' => cells.push(std::mem::take(&mut cell)),
                    c => cell.push(c),
                }
            }
            cells.push(cell);
            let cell = |i: usize| cells[i].trim().trim_matches('`').to_owned();
            [cell(0), cell(1), cell(2), cell(3)]
        })
        .collect()
}

/// The same rows as the table says they must be.
fn table_rows() -> Vec<[String; 4]> {
    KEYS.iter()
        .map(|k| {
            let default = match k.fallback {
                Fallback::Value(v) => v.to_owned(),
                Fallback::Unset => "unset".to_owned(),
                Fallback::Required => "required".to_owned(),
            };
            [
                k.path.to_owned(),
                k.kind.label(),
                default,
                k.reload.label().to_owned(),
            ]
        })
        .collect()
}

#[test]
fn reference_document_matches_the_defaults_table() {
    let want = table_rows();
    let got = reference_rows();
    let shown = want
        .iter()
        .map(|[k, t, d, r]| {
            let d = if d == "unset" || d == "required" {
                d.clone()
            } else {
                format!("`{d}`")
            };
            format!("| `{k}` | {t} | {d} | {r} | … |")
        })
        .collect::<Vec<_>>()
        .join("\n");
    let keys_of = |rows: &[[String; 4]]| rows.iter().map(|r| r[0].clone()).collect::<Vec<_>>();
    assert_eq!(
        keys_of(&got),
        keys_of(&want),
        "docs/configuration.md lists other keys than config::keys::KEYS; its rows must read:\n{shown}"
    );
    for (doc, code) in got.iter().zip(&want) {
        assert_eq!(
            doc, code,
            "docs/configuration.md row (key, type, default, reload) disagrees with KEYS"
        );
    }
    // Every environment variable named in the reference exists.
    for word in REFERENCE.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
        if word.starts_with(ENV_PREFIX) && word.contains("__") {
            let path = word[ENV_PREFIX.len()..].to_lowercase().replace("__", ".");
            assert!(
                keys::find(&path).is_some(),
                "{word} in the reference is no key"
            );
        }
    }
}

#[test]
fn check_report_prints_the_config_or_each_error_once() {
    let ok = check_report(&Ok(Loaded {
        config: Config::from_yaml("listen:\n  debug: 10.1.1.1:9848\n").unwrap(),
        file: ConfigFile::new(Some("/x.yaml".into())),
        file_found: true,
    }));
    assert_eq!(ok.code, 0);
    assert!(ok
        .stdout
        .starts_with("# lachesis effective configuration (file /x.yaml;"));
    assert!(ok.stdout.contains("  debug: 10.1.1.1:9848\n"));
    assert_eq!(
        ok.stderr,
        "lachesis: warning: listen.debug: 10.1.1.1:9848 is not a loopback address: the debug \
         endpoints (configuration, plan, flows) are reachable from the network\n"
    );
    let bad = check_report(
        &Config::from_yaml("log:\n  format: xml\n  level: x\n").map(|config| Loaded {
            config,
            file: ConfigFile::new(None),
            file_found: false,
        }),
    );
    assert_eq!(bad.code, 1);
    assert_eq!(bad.stdout, "");
    assert_eq!(
        bad.stderr,
        "lachesis: config error: log.level: \"x\" is not one of error, warn, info, debug, trace\n\
         lachesis: config error: log.format: \"xml\" is not one of text, json\n"
    );
}
