//! The agent as a child process: its configuration (temporary state file,
//! the run's own pin folder, listeners inside the hypervisor namespace,
//! tunables short enough to watch), start, SIGKILL and SIGTERM.

use std::net::SocketAddr;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

use crate::cleanup::Run;

/// Where the agent listens inside the hypervisor namespace (private to the
/// run, so fixed ports cannot collide with anything).
pub const METRICS: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 9847);
/// The debug listener, likewise.
pub const DEBUG: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 9848);

/// How quickly the agent follows the cloud and the kernel. The interactive
/// demo is paced for a human; `--check` for a bounded run.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    /// `tunables.scrape_interval`.
    pub scrape: Duration,
    /// `tunables.state_flush_interval`: /metrics shows the last flush.
    pub flush: Duration,
    /// `tunables.reconcile_interval` (no notification bus in the demo).
    pub reconcile: Duration,
    /// `tunables.ghost_grace`.
    pub grace: Duration,
    /// How often the demo reads /metrics.
    pub view: Duration,
}

/// For people watching.
pub const WATCH: Pace = Pace {
    scrape: Duration::from_secs(1),
    flush: Duration::from_secs(1),
    reconcile: Duration::from_secs(2),
    grace: Duration::from_secs(5),
    view: Duration::from_secs(1),
};

/// For `--check`.
pub const CHECK: Pace = Pace {
    scrape: Duration::from_millis(250),
    flush: Duration::from_millis(300),
    reconcile: Duration::from_secs(1),
    grace: Duration::from_secs(2),
    view: Duration::from_millis(250),
};

/// A duration as the configuration writes it.
fn ms(d: Duration) -> String {
    format!("{}ms", d.as_millis())
}

/// The agent's configuration file for `run`, talking to the simulator at
/// `sim` (its clouds.yaml beside it).
pub fn write_config(run: &Run, sim: SocketAddr, pace: Pace) -> anyhow::Result<PathBuf> {
    let dir = run.dir();
    let clouds = dir.join("clouds.yaml");
    std::fs::write(
        &clouds,
        format!(
            "clouds:\n  demo:\n    auth:\n      auth_url: http://{sim}/identity/v3\n      \
             username: admin\n      password: admin-secret\n      project_name: admin\n      \
             user_domain_name: Default\n      project_domain_name: Default\n    \
             region_name: RegionOne\n    interface: internal\n"
        ),
    )
    .with_context(|| format!("writing {}", clouds.display()))?;
    let (scrape, flush, reconcile, grace) = (
        ms(pace.scrape),
        ms(pace.flush),
        ms(pace.reconcile),
        ms(pace.grace),
    );
    let text = format!(
        "openstack:\n  cloud: demo\n  clouds_file: {clouds}\n\
         listen:\n  metrics: {METRICS}\n  debug: {DEBUG}\n\
         datapath:\n  interface_prefixes: [tap]\n  bpffs_dir: {bpffs}\n  flows_memory_budget: 8MiB\n\
         state:\n  path: {state}\n\
         tunables:\n  scrape_interval: {scrape}\n  state_flush_interval: {flush}\n  \
         reconcile_interval: {reconcile}\n  ghost_grace: {grace}\n  ghost_sweep_interval: 1s\n  \
         unresolved_ttl: 3s\n\
         log:\n  level: info\n",
        clouds = clouds.display(),
        bpffs = run.bpffs().display(),
        state = dir.join("state.json").display(),
    );
    let config = dir.join("lachesis.yaml");
    std::fs::write(&config, text).with_context(|| format!("writing {}", config.display()))?;
    Ok(config)
}

/// A running agent.
#[derive(Debug)]
pub struct Agent {
    child: Child,
    /// Its log (standard error), appended across lives.
    pub log: PathBuf,
}

impl Agent {
    /// Starts `exe agent --config CONFIG` in the calling thread's
    /// namespace, logging to `log`; its pid goes to the run's pid file.
    /// It gets SIGTERM if the thread that started it dies (a crashed demo
    /// must not leave it running).
    pub fn start(exe: &Path, config: &Path, log: &Path, run: &Run) -> anyhow::Result<Agent> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("opening {}", log.display()))?;
        let mut cmd = Command::new(exe);
        for (key, _) in std::env::vars() {
            if key.starts_with("OS_") || key.starts_with("LACHESIS_") || key == "RUST_LOG" {
                cmd.env_remove(key);
            }
        }
        cmd.args(["agent", "--config"])
            .arg(config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file);
        // SAFETY: prctl is async-signal-safe and touches only the child.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {} agent", exe.display()))?;
        std::fs::write(run.agent_pid_file(), child.id().to_string())
            .context("writing the agent's pid file")?;
        Ok(Agent {
            child,
            log: log.to_owned(),
        })
    }

    /// The child's pid.
    #[must_use]
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether it exited (and how).
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    fn signal(&self, sig: i32) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // SAFETY: a signal to our own child, by pid.
            unsafe { libc::kill(pid, sig) };
        }
    }

    /// SIGKILL, then reaps it.
    pub fn kill(&mut self) {
        self.signal(libc::SIGKILL);
        let _ = self.child.wait();
    }

    /// SIGTERM (final drain and flush), waiting up to `limit`; SIGKILL after.
    pub fn stop(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        if let Some(status) = self.exited() {
            return Some(status);
        }
        self.signal(libc::SIGTERM);
        let until = Instant::now() + limit;
        while Instant::now() < until {
            if let Some(status) = self.exited() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.kill();
        None
    }

    /// The last `n` lines of its log.
    #[must_use]
    pub fn log_tail(&self, n: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// Waits until `/readyz` answers 200 (the agent is counting), or fails
    /// with its log when it exits or `limit` passes.
    pub fn wait_ready(&mut self, limit: Duration) -> anyhow::Result<()> {
        let until = Instant::now() + limit;
        loop {
            if let Some(status) = self.exited() {
                bail!(
                    "the agent exited ({status}) before it was ready; its log ends:\n{}",
                    self.log_tail(30)
                );
            }
            if lachesis_lab::http::get(METRICS, "/readyz").is_some_and(|(code, _)| code == 200) {
                return Ok(());
            }
            if Instant::now() > until {
                bail!(
                    "the agent was not ready within {limit:?}; its log ends:\n{}",
                    self.log_tail(30)
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if self.exited().is_none() {
            self.kill();
        }
    }
}
