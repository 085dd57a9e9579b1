//! File, then environment, then flags; and which file.

use super::*;

#[test]
fn precedence_file_then_environment_then_flags() {
    let f =
        file_with("tunables:\n  scrape_interval: 7s\n  kick_debounce: 2s\nlog:\n  level: debug\n");
    let file = || config_file(Some(f.path().to_path_buf()));
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
        ConfigFile::implicit("/nonexistent/lachesis.yaml".into()),
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
        KafkaTls {
            enabled: true,
            ca_file: None,
            cert_file: None,
            key_file: None
        }
    );
    assert!((c.tunables.pressure_high_watermark - 0.9).abs() < 1e-12);
}

#[test]
fn layer_errors_name_the_variable_or_flag_and_are_all_reported() {
    let f = file_with("tunables:\n  ghost_grace: later\n");
    let e = load(
        config_file(Some(f.path().to_path_buf())),
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
            &format!(
                "LACHESIS_TUNABLES__SCRAPE_INTERVL: not a configuration variable (no key \
                 tunables.scrape_intervl; tunables holds {})",
                SCHEMA.children("tunables").join(", ")
            ),
            "--set nonsense: expected KEY=VALUE, e.g. --set tunables.scrape_interval=5s",
            "tunables.kick_debounce: 9s is above 5s (the reconciler caps the debounce there); \
             expected 0s to 5s (set by LACHESIS_TUNABLES__KICK_DEBOUNCE)",
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
    let loaded = load(ConfigFile::implicit(absent.clone()), [], &Flags::default()).unwrap();
    assert!(!loaded.file_found);
    assert_eq!(loaded.config, Config::default());
    let e = load(config_file(Some(absent.clone())), [], &Flags::default()).unwrap_err();
    assert_eq!(e.issues.len(), 1);
    assert_eq!(e.issues[0].key, absent.display().to_string());
    assert!(e.issues[0]
        .message
        .starts_with("cannot read the configuration file: "));
    // YAML syntax errors name the file.
    let f = file_with("log: [\n");
    let e = load(
        config_file(Some(f.path().to_path_buf())),
        [],
        &Flags::default(),
    )
    .unwrap_err();
    assert_eq!(e.issues[0].key, f.path().display().to_string());
    assert!(e.issues[0].message.starts_with("not valid YAML: line "));
}

/// `tunables.kick_debounce` defaults to 1 s, and to `RELAY_KICK_DEBOUNCE`
/// in relay mode; whichever layer sets it wins in both modes, and a reload
/// of an unchanged relay-mode file changes nothing.
#[test]
fn the_kick_debounce_default_follows_the_metadata_source_unless_a_layer_sets_it() {
    let relay = "metadata:\n  source: relay\n  stream: {url: 'amqp://agent:pw@mq:5672/'}\n";
    let debounce = |text: &str, vars: &[(&str, &str)], set: &[&str]| {
        let f = file_with(text);
        let flags = Flags {
            set: set.iter().map(|s| (*s).to_owned()).collect(),
            log_level: None,
        };
        load(config_file(Some(f.path().to_path_buf())), env(vars), &flags)
            .unwrap()
            .config
            .tunables
            .kick_debounce
    };
    assert_eq!(debounce("", &[], &[]), Duration::from_secs(1));
    assert_eq!(debounce(relay, &[], &[]), RELAY_KICK_DEBOUNCE);
    assert!(RELAY_KICK_DEBOUNCE < Duration::from_secs(1));
    let explicit = format!("{relay}tunables:\n  kick_debounce: 1s\n");
    assert_eq!(debounce(&explicit, &[], &[]), Duration::from_secs(1));
    let by_env = [("LACHESIS_TUNABLES__KICK_DEBOUNCE", "2s")];
    assert_eq!(debounce(relay, &by_env, &[]), Duration::from_secs(2));
    assert_eq!(
        debounce(relay, &[], &["tunables.kick_debounce=0s"]),
        Duration::ZERO
    );
    // The source by the environment decides the default as the file's does.
    let by_env = [
        ("LACHESIS_METADATA__SOURCE", "relay"),
        ("LACHESIS_METADATA__STREAM__URL", "amqp://agent:pw@mq:5672/"),
    ];
    assert_eq!(debounce("", &by_env, &[]), RELAY_KICK_DEBOUNCE);

    let old = Config::from_yaml(relay).unwrap();
    let outcome = crate::config::reload(&old, relay).unwrap();
    assert!(outcome.applied.is_empty(), "{:?}", outcome.applied);
    assert_eq!(outcome.config.tunables.kick_debounce, RELAY_KICK_DEBOUNCE);
}
