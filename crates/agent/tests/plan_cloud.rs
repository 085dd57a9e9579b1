//! `lachesis plan --cloud` against the simulator: both auth kinds print the
//! same plan, and `--save-dir` writes a folder that `--from-dir` replays to
//! the identical plan, byte for byte.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

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
    fn start() -> Sim {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let topology = repo().join("examples/topology.yaml");
        let child = Command::new(env!("CARGO_BIN_EXE_lachesis"))
            .args([
                "sim",
                "--topology",
                topology.to_str().unwrap(),
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--page-size",
                "2",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the simulator");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "simulator did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
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
