//! `lachesis plan --cloud` against the simulator: both auth kinds print the
//! same plan, and `--save-dir` writes a folder that `--from-dir` replays to
//! the identical plan, byte for byte.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

fn lachesis(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lachesis"))
        .args(args)
        .output()
        .expect("run lachesis")
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The simulator as a child process on a free loopback port; killed on drop.
struct Sim {
    child: Child,
    port: u16,
}

impl Sim {
    /// Starts on port 0 and reads the port the OS chose from the
    /// simulator's own `auth_url:` line, so no other process can take it
    /// between a probe and the bind.
    fn start() -> Sim {
        let topology = repo().join("examples/topology.yaml");
        let mut child = Command::new(env!("CARGO_BIN_EXE_lachesis"))
            .args([
                "sim",
                "--topology",
                topology.to_str().unwrap(),
                "--listen",
                "127.0.0.1:0",
                "--page-size",
                "2",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the simulator");
        let stdout = child.stdout.take().expect("the simulator's stdout");
        let mut lines = BufReader::new(stdout).lines();
        // The line is printed once the listener is bound.
        let port = lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|line| {
                let url = line
                    .trim()
                    .strip_prefix("auth_url: http://127.0.0.1:")?
                    .to_owned();
                url.split('/').next()?.parse::<u16>().ok()
            })
            .expect("the simulator printed no auth_url line");
        // Keep reading so its later lines never meet a closed pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Sim { child, port }
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn cloud_plan_matches_its_saved_replay_with_both_auth_kinds() {
    let sim = Sim::start();
    let dir = tempfile::tempdir().unwrap();
    let clouds = dir.path().join("clouds.yaml");
    let text = std::fs::read_to_string(repo().join("examples/clouds.yaml")).unwrap();
    std::fs::write(
        &clouds,
        text.replace("127.0.0.1:8780", &format!("127.0.0.1:{}", sim.port)),
    )
    .unwrap();
    let saved = dir.path().join("saved");

    let password = lachesis(&[
        "plan",
        "--cloud",
        "sim",
        "--clouds-file",
        clouds.to_str().unwrap(),
        "--save-dir",
        saved.to_str().unwrap(),
    ]);
    assert!(
        password.status.success(),
        "{}",
        String::from_utf8_lossy(&password.stderr)
    );
    let appcred = lachesis(&[
        "plan",
        "--cloud",
        "sim-appcred",
        "--clouds-file",
        clouds.to_str().unwrap(),
    ]);
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
    let out = lachesis(&[
        "plan",
        "--cloud",
        "nope",
        "--clouds-file",
        clouds.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("nope"), "{stderr}");
}
