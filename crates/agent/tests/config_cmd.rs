//! `lachesis agent --check-config` as an operator runs it: the real binary,
//! a file on disk, a clean environment.

use std::path::Path;
use std::process::{Command, Output};

const EXAMPLE: &str = include_str!("../../../examples/lachesis.yaml");

/// Runs the binary with only the given variables in its environment.
fn lachesis(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lachesis"))
        .args(args)
        .env_clear()
        .envs(env.iter().copied())
        .output()
        .expect("the binary runs")
}

fn check(file: &Path, extra: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut args = vec![
        "agent",
        "--check-config",
        "--config",
        file.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = lachesis(&args, env);
    (
        out.status.code().expect("exited"),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn write(dir: &tempfile::TempDir, text: &str) -> std::path::PathBuf {
    let path = dir.path().join("lachesis.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn good_file_prints_the_effective_config_with_secrets_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let text = EXAMPLE
        .replace("lachesis:change-me@", "lachesis:amqp-hunter2@")
        .replace("password: change-me", "password: sasl-hunter2")
        .replace("scrape_interval: 10s", "scrape_interval: 5s");
    let file = write(&dir, &text);
    let (code, stdout, stderr) = check(&file, &[], &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stderr, "", "the example raises no warning");
    assert!(stdout.starts_with(&format!(
        "# lachesis effective configuration (file {};",
        file.display()
    )));
    assert!(!stdout.contains("hunter2"), "{stdout}");
    // Every host of the transport URL, each with its password hidden.
    assert!(
        stdout.contains(
            "    url: >-\n      rabbit://lachesis:REDACTED@rabbit1.example.org:5671,\
             lachesis:REDACTED@rabbit2.example.org:5671,\
             lachesis:REDACTED@rabbit3.example.org:5671/?ssl=1\n"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("      password: REDACTED\n"));
    assert!(stdout.contains("  scrape_interval: 5s\n"));
    // Keys the file leaves to defaults are printed too.
    let partial = write(&dir, "log:\n  format: json\n");
    let (code, stdout, _) = check(&partial, &[], &[]);
    assert_eq!(code, 0);
    for line in [
        "  format: json\n",
        "  level: info\n",
        "  reconcile_interval: 5m\n",
        "  flows_memory_budget: 64MiB\n",
        "  metrics: 0.0.0.0:9847\n",
    ] {
        assert!(stdout.contains(line), "{line:?} missing from\n{stdout}");
    }
}

#[test]
fn bad_file_exits_1_naming_the_key_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        &dir,
        "tunables:\n  scrape_interval: 10 parsecs\nlog:\n  level: info\n",
    );
    let (code, stdout, stderr) = check(&file, &[], &[]);
    assert_eq!(code, 1);
    assert_eq!(stdout, "");
    assert_eq!(
        stderr,
        "lachesis: config error: tunables.scrape_interval: \"10 parsecs\" is not a duration; \
         expected e.g. 200ms, 10s, 5m\n"
    );
    let typo = write(&dir, "tunables:\n  scrape_intervl: 5s\n");
    let (code, _, stderr) = check(&typo, &[], &[]);
    assert_eq!(code, 1);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(
            "lachesis: config error: tunables.scrape_intervl: unknown key; expected one of \
             scrape_interval, reconcile_interval,"
        ),
        "{stderr}"
    );
}

#[test]
fn environment_and_flags_override_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        &dir,
        "tunables:\n  scrape_interval: 7s\n  ghost_grace: 30s\n",
    );
    let env = [
        ("LACHESIS_TUNABLES__SCRAPE_INTERVAL", "8s"),
        ("LACHESIS_TUNABLES__GHOST_GRACE", "45s"),
    ];
    let (code, stdout, stderr) = check(
        &file,
        &[
            "--set",
            "tunables.scrape_interval=9s",
            "--log-level",
            "debug",
        ],
        &env,
    );
    assert_eq!(code, 0, "{stderr}");
    for line in [
        "  scrape_interval: 9s\n",
        "  ghost_grace: 45s\n",
        "  level: debug\n",
        "# tunables.ghost_grace set by LACHESIS_TUNABLES__GHOST_GRACE\n",
        "# log.level set by --log-level\n",
    ] {
        assert!(stdout.contains(line), "{line:?} missing from\n{stdout}");
    }
    // An unknown configuration variable stops the agent, by name.
    let (code, stdout, stderr) = check(&file, &[], &[("LACHESIS_TUNABLES__SCRAPE", "1s")]);
    assert_eq!((code, stdout.as_str()), (1, ""));
    assert!(
        stderr.starts_with(
            "lachesis: config error: LACHESIS_TUNABLES__SCRAPE: not a configuration variable"
        ),
        "{stderr}"
    );
}

#[test]
fn missing_explicit_file_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let absent = dir.path().join("absent.yaml");
    let (code, stdout, stderr) = check(&absent, &[], &[]);
    assert_eq!((code, stdout.as_str()), (1, ""));
    assert!(
        stderr.starts_with(&format!(
            "lachesis: config error: {}: cannot read the configuration file: ",
            absent.display()
        )),
        "{stderr}"
    );
}

#[test]
fn non_loopback_debug_listener_is_a_warning_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(&dir, "listen:\n  debug: 0.0.0.0:9848\n");
    let (code, stdout, stderr) = check(&file, &[], &[]);
    assert_eq!(code, 0);
    assert!(stdout.contains("  debug: 0.0.0.0:9848\n"));
    assert!(
        stderr
            .starts_with("lachesis: warning: listen.debug: 0.0.0.0:9848 is not a loopback address"),
        "{stderr}"
    );
}
