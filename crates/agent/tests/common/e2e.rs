//! The agent binary end to end (root): running it as a child process in
//! the test's own network namespace, reading its endpoints and the
//! kernel's tables. Shared by `agent_e2e` and `notify_e2e`.

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub const TENANT_A: &str = "0b0000000000000000000000000000aa";
pub const TENANT_B: &str = "0b0000000000000000000000000000bb";
pub const MAC_A: &str = "fa:16:3e:aa:00:01";

/// The head of a simulator topology: settings, the admin user, the admin
/// project and both tenants' projects.
pub fn topology_head() -> String {
    format!(
        r"settings:
  token_ttl_secs: 3600
  regions: [RegionOne]
  services: [identity, network, compute]
projects:
  - {{id: 0a000000000000000000000000000001, name: admin}}
  - {{id: {TENANT_A}, name: tenant-a}}
  - {{id: {TENANT_B}, name: tenant-b}}
users:
  - {{id: u-admin, name: admin, password: admin-secret}}
"
    )
}

/// A loopback TCP port nothing listens on now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The agent as a child process; killed on drop if still running.
pub struct Agent {
    child: Child,
    log: PathBuf,
}

impl Agent {
    /// `lachesis agent --config CONFIG`, its log (stderr) in `log`, with
    /// no `OS_*`, `LACHESIS_*` or `RUST_LOG` variable inherited.
    pub fn start(config: &Path, log: PathBuf) -> Agent {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_lachesis"));
        for (key, _) in std::env::vars() {
            if key.starts_with("OS_") || key.starts_with("LACHESIS_") || key == "RUST_LOG" {
                cmd.env_remove(key);
            }
        }
        let child = cmd
            .args(["agent", "--config", config.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start the agent");
        Agent { child, log }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn signal(&self, sig: i32) {
        let pid = i32::try_from(self.child.id()).unwrap();
        // SAFETY: a signal to our own child, by pid.
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
    }

    pub fn wait(&mut self, limit: Duration) -> ExitStatus {
        let until = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < until,
                "the agent did not exit within {limit:?}; log:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn wait_ready(&mut self, metrics: SocketAddr) {
        let until = Instant::now() + Duration::from_mins(1);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "the agent exited ({status}) before ready; log:\n{}",
                    self.log_text()
                );
            }
            if get(metrics, "/readyz").is_some_and(|(code, _)| code == 200) {
                return;
            }
            assert!(
                Instant::now() < until,
                "never ready; log:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// One plain HTTP GET: status and body, `None` when nothing answers.
pub fn get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    get_as(addr, path, "text/plain")
}

/// [`get`] asking for `accept`.
pub fn get_as(addr: SocketAddr, path: &str, accept: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: {accept}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut answer = String::new();
    s.read_to_string(&mut answer).ok()?;
    let code = answer.split_whitespace().nth(1)?.parse().ok()?;
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    Some((code, body.to_owned()))
}

/// Moves this thread (and the processes and threads it starts) into a
/// fresh network namespace with loopback up.
pub fn isolate() {
    // SAFETY: affects only the calling thread.
    let rc = unsafe { libc::unshare(libc::CLONE_NEWNET) };
    assert_eq!(rc, 0, "unshare: {}", std::io::Error::last_os_error());
    let ok = Command::new("ip")
        .args(["link", "set", "lo", "up"])
        .status()
        .unwrap();
    assert!(ok.success());
}

/// The value of the sample `series` (family and labels, exactly as
/// rendered) on /metrics; `None` when absent or nothing answers.
pub fn sample(metrics: SocketAddr, series: &str) -> Option<f64> {
    let (_, body) = get(metrics, "/metrics")?;
    body.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// `bpftool -j ARGS` as JSON; `None` when it fails (no such object).
pub fn bpftool(args: &[&str]) -> Option<serde_json::Value> {
    let out = Command::new("bpftool")
        .arg("-j")
        .args(args)
        .output()
        .unwrap();
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).unwrap())
}

/// The ids of the TCX links pinned under `bpffs` (one per tap and hook).
pub fn pinned_links(bpffs: &std::path::Path) -> Vec<u64> {
    let mut ids = Vec::new();
    for entry in std::fs::read_dir(bpffs.join("links")).unwrap() {
        let path = entry.unwrap().path();
        let link = bpftool(&["link", "show", "pinned", path.to_str().unwrap()]).unwrap();
        ids.push(link["id"].as_u64().unwrap());
    }
    ids
}

/// The contents of every map our attached programs use except `flows`
/// and `stats` (which traffic moves), by map name, read from the kernel
/// with bpftool: the bindings, the zone tries, the amphora addresses.
pub fn metadata_maps(bpffs: &std::path::Path) -> BTreeMap<String, serde_json::Value> {
    let mut out = BTreeMap::new();
    for link in pinned_links(bpffs) {
        let link = bpftool(&["link", "show", "id", &link.to_string()]).unwrap();
        let prog = link["prog_id"].as_u64().unwrap().to_string();
        let prog = bpftool(&["prog", "show", "id", &prog]).unwrap();
        for map in prog["map_ids"].as_array().unwrap() {
            let id = map.as_u64().unwrap().to_string();
            let name = bpftool(&["map", "show", "id", &id]).unwrap()["name"]
                .as_str()
                .unwrap()
                .to_owned();
            if !["flows", "stats"].contains(&name.as_str()) {
                let dump = bpftool(&["map", "dump", "id", &id]).unwrap();
                out.insert(name, dump);
            }
        }
    }
    assert!(out.contains_key("endpoints"), "{out:?}");
    out
}
