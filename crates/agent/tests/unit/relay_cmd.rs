//! `lachesis relay --check-config` as an operator runs it: the real binary
//! on examples/relay.yaml, and a bad file naming its key (exit 2).

use std::process::Command;

fn check(file: &str, env: &[(&str, &str)]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lachesis"))
        .args(["relay", "--check-config", "--config", file])
        .env_clear()
        .envs(env.iter().copied())
        .output()
        .expect("the binary runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_example_checks_and_its_secrets_are_redacted() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/relay.yaml");
    let (code, out, err) = check(example, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("digest_interval: 5m"), "{out}");
    assert!(out.contains("rabbit://guest:REDACTED@"), "{out}");
}

#[test]
fn a_bad_file_exits_2_naming_every_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("relay.yaml");
    std::fs::write(
        &file,
        "relay:\n  digest_intervall: 5m\n  snapshot_interval: 0s\n",
    )
    .unwrap();
    let (code, out, err) = check(
        file.to_str().unwrap(),
        &[("LACHESIS_RELAY__RESYNC_INTERVAL", "soon")],
    );
    assert_eq!(code, 2, "{out}");
    for key in [
        "stream: is required (a mapping of stream keys)",
        "relay.digest_intervall: unknown key",
        "relay.snapshot_interval: 0s is below 1s",
        "relay.resync_interval",
        "(set by LACHESIS_RELAY__RESYNC_INTERVAL)",
    ] {
        assert!(err.contains(key), "{key} in {err}");
    }
}

/// The relay loads `listen.web_config_file` as the agent does: one that
/// cannot be served is exit 2 naming the key and the file.
#[test]
fn a_web_configuration_that_cannot_be_served_exits_2_naming_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let (file, web) = (dir.path().join("relay.yaml"), dir.path().join("web.yml"));
    std::fs::write(
        &file,
        format!(
            "stream:\n  url: rabbit://u:p@127.0.0.1:5672/\nlisten:\n  web_config_file: {}\n",
            web.display()
        ),
    )
    .unwrap();
    std::fs::write(&web, "basic_auth_users:\n  prometheus: not-a-hash\n").unwrap();
    let (code, _, err) = check(file.to_str().unwrap(), &[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.starts_with(&format!(
            "lachesis: config error: listen.web_config_file: {}: basic_auth_users.prometheus: not a bcrypt hash",
            web.display()
        )),
        "{err}"
    );
    std::fs::write(&web, lachesis_lab::tls::basic_auth("prometheus")).unwrap();
    let (code, out, err) = check(file.to_str().unwrap(), &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!("web_config_file: {}", web.display())),
        "{out}"
    );
}
