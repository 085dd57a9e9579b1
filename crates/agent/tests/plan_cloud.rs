//! `lachesis plan --cloud` against the simulator: both auth kinds print the
//! same plan, and `--save-dir` writes a folder that `--from-dir` replays to
//! the identical plan, byte for byte.

mod common;

use common::{lachesis, plan_cloud, repo, Sim};

#[test]
fn cloud_plan_matches_its_saved_replay_with_both_auth_kinds() {
    let sim = Sim::start(&["--page-size", "2"]);
    let dir = tempfile::tempdir().unwrap();
    let clouds = sim.clouds_yaml(dir.path(), |t| t);
    let saved = dir.path().join("saved");

    let password = plan_cloud("sim", &clouds, &["--save-dir", saved.to_str().unwrap()]);
    assert!(
        password.status.success(),
        "{}",
        String::from_utf8_lossy(&password.stderr)
    );
    let appcred = plan_cloud("sim-appcred", &clouds, &[]);
    assert!(
        appcred.status.success(),
        "{}",
        String::from_utf8_lossy(&appcred.stderr)
    );
    let replay = lachesis(&["plan", "--from-dir", saved.to_str().unwrap()]);
    assert!(
        replay.status.success(),
        "{}",
        String::from_utf8_lossy(&replay.stderr)
    );

    assert_eq!(
        password.stdout, appcred.stdout,
        "both auth kinds see the same cloud"
    );
    assert_eq!(
        password.stdout, replay.stdout,
        "the saved folder reproduces the plan"
    );
    let plan: serde_json::Value = serde_json::from_slice(&password.stdout).unwrap();
    assert!(
        plan["bindings"].as_array().is_some_and(|b| !b.is_empty()),
        "{plan}"
    );
    assert_eq!(
        plan["sources"],
        serde_json::json!({"servers": "ok", "loadbalancers": "ok", "amphorae": "ok"})
    );
    for file in [
        "networks",
        "subnets",
        "ports",
        "routers",
        "floatingips",
        "projects",
        "servers",
        "loadbalancers",
        "amphorae",
        "sources",
    ] {
        assert!(
            saved.join(format!("{file}.json")).exists(),
            "{file}.json saved"
        );
    }
}

#[test]
fn unknown_cloud_names_the_entry() {
    let dir = tempfile::tempdir().unwrap();
    let clouds = dir.path().join("clouds.yaml");
    std::fs::copy(repo().join("examples/clouds.yaml"), &clouds).unwrap();
    let out = plan_cloud("nope", &clouds, &[]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("nope"), "{stderr}");
}
