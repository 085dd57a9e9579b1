//! Defaults, the example file, the reference document, the effective YAML,
//! redaction and warnings.

use super::*;

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
    assert_eq!(d.datapath.attach_mode, dp.attach_mode);
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
    // Plain HTTP on every address is the default, and warned about.
    let w: Vec<String> = d.warnings().iter().map(ToString::to_string).collect();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].starts_with("listen.metrics: 0.0.0.0:9847 is not a loopback address and listen.web_config_file is not set"),
        "{w:?}"
    );
}

#[test]
fn plain_metrics_beyond_loopback_are_warned_unless_a_web_configuration_is_set() {
    let warned = |yaml: &str| -> Vec<String> {
        Config::from_yaml(yaml)
            .unwrap()
            .warnings()
            .iter()
            .map(|w| w.key.clone())
            .collect()
    };
    assert_eq!(
        warned("listen:\n  metrics: 10.0.0.5:9847\n"),
        ["listen.metrics"]
    );
    assert_eq!(
        warned("listen:\n  metrics: '[::]:9847'\n"),
        ["listen.metrics"]
    );
    assert!(warned("listen:\n  metrics: 127.0.0.1:9847\n").is_empty());
    assert!(warned("listen:\n  metrics: '[::1]:9847'\n").is_empty());
    assert!(warned("listen:\n  web_config_file: /etc/lachesis/web.yml\n").is_empty());
}

#[test]
fn interface_matching_and_log_level_parsing() {
    let c = Config::from_yaml("datapath:\n  interface_prefixes: [tap]\n  interfaces: [eth3]\n")
        .unwrap();
    let m = crate::links::Matcher::from_settings(&c.datapath);
    assert!(m.matches("tap0a1b2c3d-4e"));
    assert!(m.matches("eth3"));
    assert!(!m.matches("eth30"));
    assert!(!m.matches("vnet0"));
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
    assert_eq!((k.tls.enabled, k.sasl), (false, None));
}

#[test]
fn the_example_file_sets_every_key_and_loads_clean() {
    let config = Config::from_yaml(EXAMPLE).expect("the example is valid");
    assert!(config.warnings().is_empty(), "{:?}", config.warnings());
    let all: BTreeSet<&str> = SCHEMA.keys().iter().map(|k| k.path.as_str()).collect();
    // Written in the file, not filled in by defaults…
    let written: BTreeSet<String> = layers::leaves(&example_tree())
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    let written: BTreeSet<&str> = written.iter().map(String::as_str).collect();
    assert!(
        all.is_subset(&written),
        "keys the example file (examples/lachesis.yaml) does not set: {:?}",
        all.difference(&written).collect::<Vec<_>>()
    );
    assert_eq!(written, all);
    // …and every key comes back out of the typed configuration: the
    // sections and the schema hold the same keys.
    let rendered: BTreeSet<String> = compared(&config).into_keys().collect();
    assert_eq!(
        rendered.iter().map(String::as_str).collect::<BTreeSet<_>>(),
        all
    );
    // Where a key has a default, the example shows it (one deliberate
    // exception: Kafka TLS is on, to show its keys).
    for (path, fallback) in fallbacks::<Config>(&SCHEMA, &example_tree()) {
        if let Fallback::Value(default) = fallback {
            let same = Config::from_yaml(&example_with(&path, &default)).is_ok_and(|c| c == config);
            assert_eq!(same, path != "notifications.kafka.tls.enabled", "{path}");
        }
    }
    let k = config.notifications.kafka.as_ref().unwrap();
    assert_eq!(
        k.sasl.as_ref().unwrap().mechanism,
        SaslMechanism::ScramSha512
    );
    assert!(k.tls.enabled && k.tls.cert_file.is_some() && k.tls.key_file.is_some());
    assert!(config.notifications.rabbitmq.as_ref().unwrap().url.is_tls());
}

#[test]
fn effective_yaml_reads_back_to_the_same_configuration() {
    let config = Config::from_yaml(EXAMPLE).unwrap();
    let shown = config.to_yaml();
    let again = Config::from_yaml(&shown).expect("the printout is a valid config");
    // Only the redacted secrets differ.
    let differing: Vec<String> = compared(&config)
        .into_iter()
        .zip(compared(&again))
        .filter(|(a, b)| a != b)
        .map(|(a, _)| a.0)
        .collect();
    assert_eq!(
        differing,
        [
            "metadata.stream.url",
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
        // Every host of the transport URL has its own password.
        for host in ["rabbit1", "rabbit2", "rabbit3"] {
            assert!(
                shown.contains(&format!("lachesis:REDACTED@{host}.example.org:5671")),
                "{shown}"
            );
        }
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
    for (from, to, said) in [
        (
            "rabbit://lachesis:",
            "rabbbit://lachesis:",
            "scheme \"rabbbit\"",
        ),
        (
            "rabbit2.example.org:5671",
            "rabbit2.example.org:567100",
            "host 2 of 3: the port",
        ),
    ] {
        let shown = errors(&text.replace(from, to)).join("\n");
        assert!(
            shown.starts_with(&format!("notifications.rabbitmq.url: {said}")),
            "{shown}"
        );
        assert!(!shown.contains("hunter2"), "{shown}");
    }
    // Nor is a secret set by the environment.
    let e = load(
        ConfigFile::implicit("/nonexistent/lachesis.yaml".into()),
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
    let c =
        Config::from_yaml("listen:\n  debug: 0.0.0.0:9848\n  metrics: 127.0.0.1:9847\n").unwrap();
    let w: Vec<String> = c.warnings().iter().map(ToString::to_string).collect();
    assert_eq!(
        w,
        [
            "listen.debug: 0.0.0.0:9848 is not a loopback address: the debug endpoints \
          (configuration, plan, flows) are reachable from the network"
        ]
    );
    let c = Config::from_yaml(
        "listen:\n  metrics: 127.0.0.1:9847\n\
         notifications:\n  kafka:\n    brokers: [k:1]\n    sasl: {mechanism: plain, username: u, password: p}\n",
    )
    .unwrap();
    assert_eq!(c.warnings()[0].key, "notifications.kafka.sasl.mechanism");
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

#[test]
fn reference_document_matches_the_defaults_table() {
    let want = rows_from_types::<Config>(&SCHEMA, &example_tree(), is_hot);
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
        "docs/configuration.md lists other keys than the configuration's types; its rows must read:\n{shown}"
    );
    for (doc, code) in got.iter().zip(&want) {
        assert_eq!(
            doc, code,
            "docs/configuration.md row (key, type, default, reload) disagrees with the types"
        );
    }
    // Every environment variable named in the reference exists.
    for word in REFERENCE.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
        if word.starts_with(ENV_PREFIX) && word.contains("__") {
            let path = word[ENV_PREFIX.len()..].to_lowercase().replace("__", ".");
            assert!(
                SCHEMA.key(&path).is_some(),
                "{word} in the reference is no key"
            );
        }
    }
}

#[test]
fn check_report_prints_the_config_or_each_error_once() {
    let ok = check_report(&Ok(Loaded {
        config: Config::from_yaml("listen:\n  debug: 10.1.1.1:9848\n  metrics: 127.0.0.1:9847\n")
            .unwrap(),
        file: config_file(Some("/x.yaml".into())),
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
            file: config_file(None),
            file_found: false,
        }),
    );
    assert_eq!(bad.code, crate::exit::CONFIG);
    assert_eq!(bad.stdout, "");
    assert_eq!(
        bad.stderr,
        "lachesis: config error: log.level: \"x\" is not one of error, warn, info, debug, trace\n\
         lachesis: config error: log.format: \"xml\" is not one of text, json\n"
    );
}
