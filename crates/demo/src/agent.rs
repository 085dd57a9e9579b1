//! The agent as a child process: its configuration (temporary state file,
//! the run's own pin folder, listeners inside the hypervisor namespace,
//! tunables short enough to watch), start, SIGKILL and SIGTERM.
//!
//! Not the lab's [`lachesis_lab::agent::Agent`]: that one panics on every
//! failure, which fails a test, while the demo must report a failure to its
//! user and clean up, and it also needs what no test does (SIGTERM when its
//! starting thread dies, a pid file for the next run's cleanup, one log
//! appended across restarts).

use std::net::SocketAddr;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use lachesis_lab::agent::{scrub_env, AgentConfig, Tunables};

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
    let config = dir.join("lachesis.yaml");
    std::fs::write(&config, agent_config(run, &clouds, pace).render())
        .with_context(|| format!("writing {}", config.display()))?;
    Ok(config)
}

/// The agent's configuration: cloud `demo` of `clouds`, the fixed
/// listeners, every tap, the run's pins and state file, `pace`'s tunables.
fn agent_config(run: &Run, clouds: &Path, pace: Pace) -> AgentConfig {
    let mut c = AgentConfig::new("demo", clouds, &run.bpffs(), &run.dir().join("state.json"));
    c.metrics = METRICS;
    c.debug = DEBUG;
    c.interface_prefixes = vec!["tap".to_owned()];
    c.flows_memory_budget_mib = Some(8);
    c.tunables = Tunables {
        scrape_interval: Some(pace.scrape),
        state_flush_interval: Some(pace.flush),
        reconcile_interval: Some(pace.reconcile),
        ghost_grace: Some(pace.grace),
        ghost_sweep_interval: Some(Duration::from_secs(1)),
        unresolved_ttl: Some(Duration::from_secs(3)),
    };
    c.log_level = Some("info".to_owned());
    c
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
        scrub_env(&mut cmd);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_holds_the_fixed_listeners_every_tap_and_the_pace() {
        let run = Run { pid: 7 };
        let text =
            agent_config(&run, Path::new("/run/lachesis-demo/7/clouds.yaml"), CHECK).render();
        assert_eq!(
            text,
            "openstack:\n  cloud: demo\n  clouds_file: /run/lachesis-demo/7/clouds.yaml\n\
             listen:\n  metrics: 127.0.0.1:9847\n  debug: 127.0.0.1:9848\n\
             datapath:\n  interface_prefixes: [tap]\n  bpffs_dir: /sys/fs/bpf/lachesis-demo-7\n  flows_memory_budget: 8MiB\n\
             state:\n  path: /run/lachesis-demo/7/state.json\n\
             tunables:\n  scrape_interval: 250ms\n  state_flush_interval: 300ms\n  reconcile_interval: 1s\n  \
             ghost_grace: 2s\n  unresolved_ttl: 3s\n  ghost_sweep_interval: 1s\n\
             log:\n  level: info\n"
        );
    }
}
