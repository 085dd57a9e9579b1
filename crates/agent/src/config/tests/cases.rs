//! Every key with values it must accept and values it must refuse, unknown
//! keys at every depth, wrong shapes.

use super::*;

/// One key: values that must be accepted (with the value the effective
/// configuration shows for them) and values that must be refused (with every
/// error they cause), each set into the example file.
pub(super) struct Case {
    pub path: &'static str,
    pub valid: &'static [(&'static str, &'static str)],
    pub invalid: &'static [(&'static str, &'static [&'static str])],
}

pub(super) const CASES: &[Case] = &[
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
        path: "metadata.source",
        valid: &[("relay", "relay"), ("openstack", "openstack")],
        invalid: &[("neutron", &["metadata.source: \"neutron\" is not one of openstack, relay"])],
    },
    Case {
        path: "metadata.stream.url",
        valid: &[("amqps://u:p@mq:5671/", "amqps://u:p@mq:5671/")],
        invalid: &[
            (
                "amqp://u:p@mq/",
                &["metadata.stream.ca_file: is set but metadata.stream.url has no TLS; use amqps://, or ?ssl=1 in a rabbit:// URL"],
            ),
            ("null", &["metadata.stream.url: is required when metadata.stream is set"]),
        ],
    },
    Case {
        path: "metadata.stream.stream",
        valid: &[("fleet.state", "fleet.state")],
        invalid: &[("''", &["metadata.stream.stream: is empty; expected some text"])],
    },
    Case {
        path: "metadata.stream.max_age",
        valid: &[("4h", "4h")],
        invalid: &[(
            "long",
            &["metadata.stream.max_age: \"long\" is not a duration; expected e.g. 200ms, 10s, 5m"],
        )],
    },
    Case {
        path: "metadata.stream.ca_file",
        valid: &[("/etc/stream-ca.pem", "/etc/stream-ca.pem")],
        invalid: &[(
            "ca.pem",
            &["metadata.stream.ca_file: \"ca.pem\" is not an absolute path; expected a path starting with /"],
        )],
    },
    Case {
        path: "metadata.lookback",
        valid: &[("1m", "1m"), ("25m", "25m"), ("24h", "1day")],
        invalid: &[
            (
                "30s",
                &["metadata.lookback: 30s is below 1m (a boot must find a relay's snapshot start in it; with none, the agent reads the whole stream after twice this); expected 1m to 1day"],
            ),
            (
                "25h",
                &["metadata.lookback: 25h is above 1day (a boot reads every record of this window, and the stream keeps 2h unless configured otherwise); expected 1m to 1day"],
            ),
        ],
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
        path: "listen.web_config_file",
        valid: &[("/etc/lachesis/web.yml", "/etc/lachesis/web.yml")],
        invalid: &[(
            "web.yml",
            &["listen.web_config_file: \"web.yml\" is not an absolute path; expected a path starting with /"],
        )],
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
            ("1MiB", "1MiB"),
            ("1GiB", "1GiB"),
            ("16GiB", "16GiB"),
            ("1048576", "1MiB"),
            ("100MB", "100000000B"),
        ],
        invalid: &[
            (
                "64M",
                &["datapath.flows_memory_budget: \"64M\" is not a size; expected bytes or e.g. 512KiB, 64MiB, 1GiB"],
            ),
            (
                "1",
                &["datapath.flows_memory_budget: 1B is below 1MiB (every smaller budget gives the flows map's floor of 8 192 entries); expected 1MiB to 16GiB"],
            ),
            (
                "17GiB",
                &["datapath.flows_memory_budget: 17GiB is above 16GiB (the flows map's ceiling of 262 144 entries needs less at any CPU count); expected 1MiB to 16GiB"],
            ),
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
        valid: &[
            (
                "amqps://guest:guest@localhost:5671/vhost",
                "amqps://guest:guest@localhost:5671/vhost",
            ),
            // An oslo.messaging transport_url as every service has it.
            (
                "'rabbit://nova:pw@10.0.0.1:5671,nova:pw@10.0.0.2:5671,nova:pw@10.0.0.3:5671/?ssl=1'",
                "'rabbit://nova:pw@10.0.0.1:5671,nova:pw@10.0.0.2:5671,nova:pw@10.0.0.3:5671/?ssl=1'",
            ),
            ("'kombu://u:p@h//?ssl=true'", "'kombu://u:p@h//?ssl=true'"),
        ],
        invalid: &[
            (
                "http://u:topsecret@host/",
                &["notifications.rabbitmq.url: scheme \"http\" is not rabbit or kombu (oslo.messaging) nor amqp or amqps; expected an oslo.messaging transport_url, rabbit://user:pass@host1:5672[,user:pass@host2:5672,…]/[vhost][?ssl=1], or amqp://user:pass@host:5672/[vhost] (amqps:// for TLS); a / ? # , or % in a user or password percent-encoded (the value is not shown: it may hold a password)"],
            ),
            (
                "'rabbit://u:topsecret@h1:5671,u:topsecret@h2:99999/?ssl=1'",
                &["notifications.rabbitmq.url: host 2 of 2: the port is not a number from 1 to 65535; expected an oslo.messaging transport_url, rabbit://user:pass@host1:5672[,user:pass@host2:5672,…]/[vhost][?ssl=1], or amqp://user:pass@host:5672/[vhost] (amqps:// for TLS); a / ? # , or % in a user or password percent-encoded (the value is not shown: it may hold a password)"],
            ),
            (
                "'rabbit://u:topsecret@h1/?ssl=1&heartbeat_timeout_threshold=60'",
                &["notifications.rabbitmq.url: query parameter \"heartbeat_timeout_threshold\" is not supported (accepted: ssl): other oslo.messaging options do not apply to this consumer; leave them out; expected an oslo.messaging transport_url, rabbit://user:pass@host1:5672[,user:pass@host2:5672,…]/[vhost][?ssl=1], or amqp://user:pass@host:5672/[vhost] (amqps:// for TLS); a / ? # , or % in a user or password percent-encoded (the value is not shown: it may hold a password)"],
            ),
            (
                "amqp://u:p@host/",
                &["notifications.rabbitmq.ca_file: is set but notifications.rabbitmq.url has no TLS; use amqps://, or ?ssl=1 in a rabbit:// URL"],
            ),
            (
                "'rabbit://u:p@h1,u:p@h2/'",
                &["notifications.rabbitmq.ca_file: is set but notifications.rabbitmq.url has no TLS; use amqps://, or ?ssl=1 in a rabbit:// URL"],
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
        valid: &[("100ms", "100ms"), ("5m", "5m"), ("10m", "10m"), ("90s", "1m 30s")],
        invalid: &[
            (
                "10 parsecs",
                &["tunables.scrape_interval: \"10 parsecs\" is not a duration; expected e.g. 200ms, 10s, 5m"],
            ),
            ("10", &["tunables.scrape_interval: 10 has no unit; expected e.g. 200ms, 10s, 5m"]),
            (
                "1ms",
                &["tunables.scrape_interval: 1ms is below 100ms (a drain of a full flows map takes tens of milliseconds: a shorter interval spends a CPU on draining); expected 100ms to 10m"],
            ),
            (
                "11m",
                &["tunables.scrape_interval: 11m is above 10m (the billing series lag the kernel by up to one interval, and a stalled drain shows on /healthz only after three); expected 100ms to 10m"],
            ),
        ],
    },
    Case {
        path: "tunables.reconcile_interval",
        valid: &[("1m", "1m"), ("1s", "1s"), ("24h", "1day")],
        invalid: &[
            (
                "100ms",
                &["tunables.reconcile_interval: 100ms is below 1s (every pass is a full OpenStack sync); expected 1s to 1day"],
            ),
            (
                "25h",
                &["tunables.reconcile_interval: 25h is above 1day (with the notification bus down, a change in OpenStack reaches the kernel only at the next pass); expected 1s to 1day"],
            ),
        ],
    },
    Case {
        path: "tunables.kick_debounce",
        valid: &[("0s", "0s"), ("5s", "5s")],
        invalid: &[(
            "6s",
            &["tunables.kick_debounce: 6s is above 5s (the reconciler caps the debounce there); expected 0s to 5s"],
        )],
    },
    Case {
        path: "tunables.ghost_grace",
        valid: &[("1s", "1s"), ("2m", "2m"), ("7d", "7days")],
        invalid: &[
            (
                "soon",
                &["tunables.ghost_grace: \"soon\" is not a duration; expected e.g. 200ms, 10s, 5m"],
            ),
            (
                "0s",
                &["tunables.ghost_grace: 0s is below 1s (a deleted port's last packets are read after its deletion, and a MAC moved between ports in two steps must not lose its binding in between); expected 1s to 7days"],
            ),
            (
                "8d",
                &["tunables.ghost_grace: 8d is above 7days (every ghost keeps its binding in the 16 384-entry endpoints map and its rows in the ledger until swept); expected 1s to 7days"],
            ),
        ],
    },
    Case {
        path: "tunables.ghost_sweep_interval",
        valid: &[("30s", "30s"), ("100ms", "100ms"), ("1h", "1h")],
        invalid: &[
            (
                "0s",
                &["tunables.ghost_sweep_interval: 0s is below 100ms (each sweep takes the ledger's order: drain, flush, settle, flush); expected 100ms to 1h"],
            ),
            (
                "2h",
                &["tunables.ghost_sweep_interval: 2h is above 1h (a ghost past its grace outlives it by up to one interval); expected 100ms to 1h"],
            ),
        ],
    },
    Case {
        path: "tunables.state_flush_interval",
        valid: &[("2m", "2m"), ("100ms", "100ms"), ("1h", "1h")],
        invalid: &[
            (
                "0s",
                &["tunables.state_flush_interval: 0s is below 100ms (each flush writes and fsyncs the whole state file); expected 100ms to 1h"],
            ),
            (
                "61m",
                &["tunables.state_flush_interval: 61m is above 1h (a host reboot loses up to one interval of counted bytes, and the billing series lag by as much); expected 100ms to 1h"],
            ),
        ],
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
        valid: &[("1", "1"), ("1048576", "1048576")],
        invalid: &[
            ("0", &["tunables.pressure_max_evictions: 0 is out of range; expected 1 to 1048576"]),
            ("1048577", &["tunables.pressure_max_evictions: 1048577 is out of range; expected 1 to 1048576"]),
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
        valid: &[("2m", "2m"), ("1s", "1s"), ("1h", "1h")],
        invalid: &[
            (
                "0s",
                &["tunables.unresolved_ttl: 0s is below 1s (a row of a MAC not yet learned must be able to wait for the reconcile pass its notification kicks); expected 1s to 1h"],
            ),
            (
                "2h",
                &["tunables.unresolved_ttl: 2h is above 1h (bytes of an unknown MAC stay out of every series (even tenant \"unknown\") that long); expected 1s to 1h"],
            ),
        ],
    },
    Case {
        path: "tunables.route_hop_limit",
        valid: &[("255", "255")],
        invalid: &[
            ("256", &["tunables.route_hop_limit: 256 is out of range; expected 1 to 255"]),
            ("-1", &["tunables.route_hop_limit: -1 is out of range; expected 1 to 255"]),
            ("0", &["tunables.route_hop_limit: 0 is out of range; expected 1 to 255"]),
        ],
    },
    Case {
        path: "tunables.port_series_retention",
        valid: &[("0s", "0s"), ("30d", "30days")],
        invalid: &[(
            "31d",
            &["tunables.port_series_retention: 31d is above 30days (a retained series is exported all along); expected 0s to 30days"],
        )],
    },
    Case {
        path: "tunables.resync_spread",
        valid: &[("0s", "0s"), ("30s", "30s"), ("10m", "10m")],
        invalid: &[(
            "11m",
            &["tunables.resync_spread: 11m is above 10m (a gap's pass waits up to this long, and changes missed in the gap reach the kernel only then); expected 0s to 10m"],
        )],
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
    let keys: Vec<&str> = SCHEMA.keys().iter().map(|k| k.path.as_str()).collect();
    let missing: Vec<&&str> = keys.iter().filter(|k| !covered.contains(k)).collect();
    assert!(
        missing.is_empty(),
        "keys without a case in CASES (add one with a valid and an invalid value): {missing:?}"
    );
    assert_eq!(covered, keys, "CASES in the order of the keys");
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
            let want = super::shown(c.path, shown);
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
    let mut sections: Vec<String> = SCHEMA.sections().iter().map(|s| s.path.clone()).collect();
    sections.insert(0, String::new());
    assert_eq!(sections.len(), 14, "{sections:?}");
    for section in &sections {
        let key = if section.is_empty() {
            "bogus".to_owned()
        } else {
            format!("{section}.bogus")
        };
        let children = SCHEMA.children(section);
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
        [format!(
            "tunables.scrape_intervl: unknown key; expected one of {}",
            SCHEMA.children("tunables").join(", ")
        )]
    );
}

/// An unknown key is one problem among the others: the bad values around
/// it, before and after it in the file and in other sections, are all
/// reported with it; keys in the schema's order, an unknown key after the
/// known keys of its section.
#[test]
fn an_unknown_key_hides_no_other_problem() {
    let shown = errors(concat!(
        "listen:\n",
        "  metrics: nowhere\n",
        "  bogus: 1\n",
        "tunables:\n",
        "  scrape_intervl: 5s\n",
        "  ghost_grace: soon\n",
        "  unresolved_cap: 0\n",
        "log:\n",
        "  level: loud\n",
        "  colour: blue\n",
    ));
    let keys: Vec<&str> = shown
        .iter()
        .map(|e| e.split_once(':').map_or(e.as_str(), |(k, _)| k))
        .collect();
    assert_eq!(
        keys,
        [
            "listen.metrics",
            "listen.bogus",
            "tunables.ghost_grace",
            "tunables.unresolved_cap",
            "tunables.scrape_intervl",
            "log.level",
            "log.colour",
        ],
        "{shown:#?}"
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
    // A shape problem stops the reading alone, wherever it is.
    assert_eq!(
        errors("openstack:\n  cloud: [a]\nlog:\n  level: loud\n"),
        ["openstack.cloud: found sequence; expected a single value (text, number or true/false)"]
    );
    assert_eq!(
        errors("datapath:\n  interfaces: [[a]]\n"),
        ["datapath.interfaces[0]: found sequence; expected a single value (text, number or true/false)"]
    );
    assert_eq!(
        errors("- a\n"),
        ["(file): expected a mapping of sections (openstack, metadata, listen, datapath, state, notifications, tunables, log)"]
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
            "tunables.unresolved_ttl: 0s is below 1s (a row of a MAC not yet learned must be able to wait for the reconcile pass its notification kicks); expected 1s to 1h",
            "log.level: \"loud\" is not one of error, warn, info, debug, trace",
        ]
    );
}

/// serde stops at the first bad value of a file; the reading goes on past
/// it: a missing required key, a bad item of a list and a bad URL each
/// leave the rest of their section to be checked.
#[test]
fn a_bad_value_hides_no_other_problem() {
    assert_eq!(
        errors("notifications:\n  kafka:\n    brokers: [k:1]\n    sasl: {password: ''}\n"),
        [
            "notifications.kafka.sasl.mechanism: is required when notifications.kafka.sasl is set",
            "notifications.kafka.sasl.username: is required when notifications.kafka.sasl is set",
            "notifications.kafka.sasl.password: is empty; expected the SASL password",
        ]
    );
    assert_eq!(
        errors("datapath:\n  interfaces: [a/b, eth1, eth1, c/d]\n"),
        [
            "datapath.interfaces[0]: \"a/b\" is not an interface name; expected 1 to 15 characters without '/', ':' or spaces",
            "datapath.interfaces[2]: \"eth1\" is listed twice",
            "datapath.interfaces[3]: \"c/d\" is not an interface name; expected 1 to 15 characters without '/', ':' or spaces",
        ]
    );
    let got = errors("notifications:\n  rabbitmq: {url: 'amqp://u:p@h:0/', exchanges: []}\n");
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(
        got[0].starts_with("notifications.rabbitmq.url: host 1 of 1: "),
        "{got:?}"
    );
    assert_eq!(
        got[1],
        "notifications.rabbitmq.exchanges: is empty: the agent's queue would receive nothing"
    );
}

#[test]
fn the_reference_states_every_bound_the_check_enforces() {
    use crate::config::validate::{FLOWS_BUDGET_MAX, FLOWS_BUDGET_MIN, SPANS};
    use lachesis_config::form::{show_duration, show_size};
    let mut rows: Vec<String> = SPANS
        .iter()
        .map(|(key, span)| {
            format!(
                "| {key} | {} | {} | ",
                show_duration(span.min),
                show_duration(span.max)
            )
        })
        .collect();
    rows.push(format!(
        "| datapath.flows_memory_budget | {} | {} | ",
        show_size(FLOWS_BUDGET_MIN),
        show_size(FLOWS_BUDGET_MAX)
    ));
    for row in rows {
        assert!(
            REFERENCE.lines().any(|l| l.starts_with(&row)),
            "docs/configuration.md \"Bounds\" has no row starting {row:?}"
        );
    }
    // Each end is accepted, and the error's range is the documented one.
    for (key, span) in SPANS {
        for end in [span.min, span.max] {
            let text = example_with(key, &show_duration(end));
            assert!(Config::from_yaml(&text).is_ok(), "{key} = {end:?}");
        }
    }
}

/// DESIGN §17: relay mode reads its desired state from the stream, so the
/// stream is required then; the `openstack` section is not.
#[test]
fn relay_mode_needs_its_stream_and_not_the_openstack_section() {
    assert_eq!(
        errors("metadata:\n  source: relay\n"),
        ["metadata.stream: is required when metadata.source is relay: the agent reads its desired state from that stream; expected a mapping with at least url"]
    );
    let c = Config::from_yaml(
        "metadata:\n  source: relay\n  stream: {url: 'amqp://agent:pw@mq:5672/'}\n",
    )
    .unwrap();
    let (stream, lookback) = c.relay().expect("relay mode");
    assert_eq!(stream.stream, "lachesis.state");
    assert_eq!(lookback, DEFAULT_LOOKBACK);
    assert_eq!(c.openstack, OpenStackSettings::default());
    // A stream beside the default source is unused, not an error.
    let c = Config::from_yaml("metadata:\n  stream: {url: 'amqp://agent:pw@mq:5672/'}\n").unwrap();
    assert!(c.relay().is_none());
}
