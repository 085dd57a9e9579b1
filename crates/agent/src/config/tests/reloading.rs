//! Hot reload and the shared tunables snapshot.

use super::cases::CASES;
use super::*;

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
fn reload_classifies_every_key_by_the_layout() {
    let old = Config::from_yaml(EXAMPLE).unwrap();
    for c in CASES {
        let (input, shown) = c.valid[0];
        let outcome = reload(&old, &example_with(c.path, input))
            .unwrap_or_else(|e| panic!("{}: {e}", c.path));
        let new = super::shown(c.path, shown);
        let hot = is_hot(c.path);
        let (applied, pending): (Vec<&str>, Vec<&str>) = match hot {
            _ if leaf(&old, c.path).as_ref() == Some(&new) => (vec![], vec![]),
            true => (vec![c.path], vec![]),
            false => (vec![], vec![c.path]),
        };
        assert_eq!(outcome.applied, applied, "{}", c.path);
        assert_eq!(outcome.restart_required, pending, "{}", c.path);
        let want = if hot {
            new
        } else {
            leaf(&old, c.path).unwrap()
        };
        assert_eq!(leaf(&outcome.config, c.path), Some(want), "{}", c.path);
    }
}

#[test]
fn reload_keeps_the_environment_and_flag_layers() {
    let f = file_with("tunables:\n  scrape_interval: 7s\n");
    let loaded = load(
        config_file(Some(f.path().to_path_buf())),
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
    let gone = config_file(Some(f.path().with_extension("gone")));
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
