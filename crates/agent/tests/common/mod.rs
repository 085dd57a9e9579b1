//! Shared by the tests that run the built `lachesis` binary: running it, the
//! simulator as a child process, fault injection, clouds.yaml and fixtures.

pub mod agent;
pub mod prometheus;
pub mod relay;

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Output, Stdio};

use lachesis_lab::agent::Agent;
use lachesis_lab::http::Request;

/// The binary under test.
pub const LACHESIS: &str = env!("CARGO_BIN_EXE_lachesis");

/// The agent under test on `config`, its standard error in `log`.
pub fn start_agent(config: &Path, log: PathBuf) -> Agent {
    Agent::start(Path::new(LACHESIS), config, log)
}

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The planner's reviewed `two-tenants` fixture folder's parent.
pub fn fixtures() -> PathBuf {
    repo().join("crates/planner/tests/fixtures")
}

/// Runs `lachesis` with `args`, with no `OS_*` or `RUST_LOG` variable
/// inherited (so the machine's own openrc cannot change the outcome), plus
/// `env`.
pub fn lachesis_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(LACHESIS);
    for (key, _) in std::env::vars() {
        if key.starts_with("OS_") || key == "RUST_LOG" {
            cmd.env_remove(key);
        }
    }
    cmd.args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run lachesis")
}

/// [`lachesis_env`] with no extra variable.
pub fn lachesis(args: &[&str]) -> Output {
    lachesis_env(args, &[])
}

/// `lachesis plan --cloud CLOUD --clouds-file CLOUDS EXTRA…`.
pub fn plan_cloud(cloud: &str, clouds: &Path, extra: &[&str]) -> Output {
    let clouds = clouds.to_str().unwrap();
    lachesis(
        &[
            &["plan", "--cloud", cloud, "--clouds-file", clouds][..],
            extra,
        ]
        .concat(),
    )
}

/// The exit code; a signal is a failure of the test.
pub fn code(out: &Output) -> i32 {
    out.status
        .code()
        .unwrap_or_else(|| panic!("killed by a signal: {out:?}"))
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The simulator serving `examples/topology.yaml` as a child process on an
/// OS-assigned loopback port (read back from its banner); killed on drop.
pub struct Sim {
    child: Child,
    /// Held open: the simulator prints more lines, and a closed pipe
    /// would make its `println!` panic.
    _stdout: BufReader<ChildStdout>,
    /// `127.0.0.1:PORT`.
    pub addr: String,
}

impl Sim {
    pub fn start(extra: &[&str]) -> Sim {
        Sim::start_topology(&repo().join("examples/topology.yaml"), extra)
    }

    /// [`Sim::start`] serving `topology` instead of the example.
    pub fn start_topology(topology: &Path, extra: &[&str]) -> Sim {
        let mut child = Command::new(LACHESIS)
            .args(["sim", "--topology", topology.to_str().unwrap()])
            .args(["--listen", "127.0.0.1:0"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the simulator");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut banner = String::new();
        stdout
            .read_line(&mut banner)
            .expect("read the simulator's banner");
        // "lachesis sim: serving FILE on http://127.0.0.1:PORT"
        let Some((_, addr)) = banner.trim().rsplit_once(" on http://") else {
            panic!("unexpected simulator banner {banner:?}")
        };
        let addr = addr.to_owned();
        Sim {
            child,
            _stdout: stdout,
            addr,
        }
    }

    /// One control-API call (`/sim/...`), returning the status code.
    pub fn control(&self, method: &str, path: &str, body: &str) -> u16 {
        Request::new(method, path)
            .json(body)
            .send(self.addr.as_str())
            .unwrap_or_else(|e| panic!("{method} {path} to the simulator: {e}"))
            .status
    }

    /// Makes `endpoint` answer HTTP 500 until cleared.
    pub fn fail(&self, endpoint: &str) {
        let status = self.control(
            "PUT",
            "/sim/faults",
            &format!(r#"{{"endpoint": "{endpoint}", "status": 500}}"#),
        );
        assert!((200..300).contains(&status), "fault not set: {status}");
    }

    /// `examples/clouds.yaml` pointed at this simulator, written into `dir`,
    /// with `edit` applied to its text.
    pub fn clouds_yaml(&self, dir: &Path, edit: impl FnOnce(String) -> String) -> PathBuf {
        let text = std::fs::read_to_string(repo().join("examples/clouds.yaml")).unwrap();
        let path = dir.join("clouds.yaml");
        std::fs::write(&path, edit(text.replace("127.0.0.1:8780", &self.addr))).unwrap();
        path
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A scratch copy of the `two-tenants` fixture folder; `edit` changes it.
pub fn fixture_copy(edit: impl FnOnce(&Path)) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(fixtures().join("two-tenants")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
    }
    edit(dir.path());
    dir
}
