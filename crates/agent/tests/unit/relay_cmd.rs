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
