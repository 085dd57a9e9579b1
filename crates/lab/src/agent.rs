//! The `lachesis agent` binary under test or benchmark: its configuration
//! as a typed value rendered to the YAML file the agent reads, the child
//! process, and its `/metrics` read back.
//!
//! The binary's path is the caller's: a test passes
//! `env!("CARGO_BIN_EXE_lachesis")`, a benchmark (which has no such
//! variable) the one it built.

use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::http::{free_port, get};

/// An agent configuration file, key by key (docs/configuration.md): what
/// the tests and benchmarks set, the rest left to the agent's defaults.
/// [`AgentConfig::render`] writes plain block YAML, one key a line, in
/// this order, so a test that breaks one key on purpose can still edit
/// the text.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentConfig {
    /// `openstack.cloud`.
    pub cloud: String,
    /// `openstack.clouds_file`.
    pub clouds_file: PathBuf,
    /// `listen.metrics`.
    pub metrics: SocketAddr,
    /// `listen.debug`.
    pub debug: SocketAddr,
    /// `datapath.interface_prefixes`.
    pub interface_prefixes: Vec<String>,
    /// `datapath.interfaces` (taps named otherwise, by exact name);
    /// `None` leaves the key out.
    pub interfaces: Option<Vec<String>>,
    /// `datapath.bpffs_dir`.
    pub bpffs_dir: PathBuf,
    /// `datapath.flows_memory_budget` in MiB.
    pub flows_memory_budget_mib: Option<u32>,
    /// `state.path`.
    pub state_path: PathBuf,
    /// `tunables.*` that are set.
    pub tunables: Tunables,
    /// `log.level`.
    pub log_level: Option<String>,
    /// `notifications.rabbitmq.url`: the `RabbitMQ` consumer when set.
    pub rabbitmq_url: Option<String>,
    /// `notifications.kafka.brokers`: the Kafka consumer when not empty.
    pub kafka_brokers: Vec<String>,
    /// `notifications.kafka.topic`.
    pub kafka_topic: Option<String>,
    /// Relay mode: `metadata.stream.url` and `metadata.stream.stream`
    /// (with `metadata.source: relay`); `None`: the default source.
    pub relay_stream: Option<(String, String)>,
}

/// The `tunables` a test or benchmark sets; `None` is the agent's default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tunables {
    /// `tunables.scrape_interval`.
    pub scrape_interval: Option<Duration>,
    /// `tunables.state_flush_interval`.
    pub state_flush_interval: Option<Duration>,
    /// `tunables.reconcile_interval`.
    pub reconcile_interval: Option<Duration>,
    /// `tunables.ghost_grace`.
    pub ghost_grace: Option<Duration>,
    /// `tunables.unresolved_ttl`.
    pub unresolved_ttl: Option<Duration>,
    /// `tunables.ghost_sweep_interval`.
    pub ghost_sweep_interval: Option<Duration>,
}

impl Tunables {
    /// The fast schedule of the end-to-end tests: a scrape every 200 ms, a
    /// flush every 300 ms, ghosts swept after a second, no reconcile tick
    /// within a test (5 min).
    #[must_use]
    pub fn fast() -> Tunables {
        Tunables {
            scrape_interval: Some(Duration::from_millis(200)),
            state_flush_interval: Some(Duration::from_millis(300)),
            reconcile_interval: Some(Duration::from_mins(5)),
            ghost_grace: Some(Duration::from_secs(1)),
            unresolved_ttl: None,
            ghost_sweep_interval: Some(Duration::from_millis(500)),
        }
    }
}

impl AgentConfig {
    /// `cloud` of `clouds_file`, both listeners on free loopback ports of
    /// the calling thread's namespace, pins in `bpffs_dir`, the state file
    /// at `state_path`; nothing else set.
    #[must_use]
    pub fn new(cloud: &str, clouds_file: &Path, bpffs_dir: &Path, state_path: &Path) -> Self {
        AgentConfig {
            cloud: cloud.to_owned(),
            clouds_file: clouds_file.to_owned(),
            metrics: SocketAddr::from((Ipv4Addr::LOCALHOST, free_port())),
            debug: SocketAddr::from((Ipv4Addr::LOCALHOST, free_port())),
            interface_prefixes: Vec::new(),
            interfaces: None,
            bpffs_dir: bpffs_dir.to_owned(),
            flows_memory_budget_mib: None,
            state_path: state_path.to_owned(),
            tunables: Tunables::default(),
            log_level: None,
            rabbitmq_url: None,
            kafka_brokers: Vec::new(),
            kafka_topic: None,
            relay_stream: None,
        }
    }

    /// The YAML text.
    #[must_use]
    pub fn render(&self) -> String {
        let mut out = String::new();
        let mut line = |indent: usize, key: &str, value: &str| {
            let _ = writeln!(
                out,
                "{:indent$}{key}:{}",
                "",
                if value.is_empty() {
                    String::new()
                } else {
                    format!(" {value}")
                }
            );
        };
        // An empty cloud leaves the section out (relay mode needs none).
        if !self.cloud.is_empty() {
            line(0, "openstack", "");
            line(2, "cloud", &self.cloud);
            line(2, "clouds_file", &self.clouds_file.display().to_string());
        }
        if let Some((url, stream)) = &self.relay_stream {
            line(0, "metadata", "");
            line(2, "source", "relay");
            line(2, "stream", "");
            line(4, "url", url);
            line(4, "stream", stream);
        }
        line(0, "listen", "");
        line(2, "metrics", &self.metrics.to_string());
        line(2, "debug", &self.debug.to_string());
        line(0, "datapath", "");
        line(
            2,
            "interface_prefixes",
            &format!("[{}]", self.interface_prefixes.join(", ")),
        );
        if let Some(exact) = &self.interfaces {
            line(2, "interfaces", &format!("[{}]", exact.join(", ")));
        }
        line(2, "bpffs_dir", &self.bpffs_dir.display().to_string());
        if let Some(mib) = self.flows_memory_budget_mib {
            line(2, "flows_memory_budget", &format!("{mib}MiB"));
        }
        line(0, "state", "");
        line(2, "path", &self.state_path.display().to_string());
        let t = &self.tunables;
        let tunables = [
            ("scrape_interval", t.scrape_interval),
            ("state_flush_interval", t.state_flush_interval),
            ("reconcile_interval", t.reconcile_interval),
            ("ghost_grace", t.ghost_grace),
            ("unresolved_ttl", t.unresolved_ttl),
            ("ghost_sweep_interval", t.ghost_sweep_interval),
        ];
        if tunables.iter().any(|(_, v)| v.is_some()) {
            line(0, "tunables", "");
            for (key, value) in tunables {
                if let Some(value) = value {
                    line(2, key, &duration(value));
                }
            }
        }
        if let Some(level) = &self.log_level {
            line(0, "log", "");
            line(2, "level", level);
        }
        if self.rabbitmq_url.is_some() || !self.kafka_brokers.is_empty() {
            line(0, "notifications", "");
        }
        if let Some(url) = &self.rabbitmq_url {
            line(2, "rabbitmq", "");
            line(4, "url", url);
        }
        if !self.kafka_brokers.is_empty() {
            let brokers: Vec<String> = self
                .kafka_brokers
                .iter()
                .map(|b| format!("\"{b}\""))
                .collect();
            line(2, "kafka", "");
            line(4, "brokers", &format!("[{}]", brokers.join(", ")));
            if let Some(topic) = &self.kafka_topic {
                line(4, "topic", topic);
            }
        }
        out
    }

    /// Writes [`AgentConfig::render`] to `path`.
    ///
    /// # Panics
    /// It cannot be written.
    pub fn write(&self, path: &Path) {
        std::fs::write(path, self.render())
            .unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    }
}

/// A duration as the configuration writes one: `5m`, `1s`, `200ms`.
fn duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms > 0 && ms.is_multiple_of(60_000) {
        format!("{}m", ms / 60_000)
    } else if ms > 0 && ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// Keeps the caller's `OS_*`, `LACHESIS_*`, `RUST_LOG` and systemd's
/// notification variables from an agent started by `cmd`: the machine's
/// own openrc or unit must not change what the agent does.
pub fn scrub_env(cmd: &mut Command) {
    for (key, _) in std::env::vars_os() {
        if key.to_str().is_some_and(not_inherited) {
            cmd.env_remove(key);
        }
    }
}

/// Whether [`scrub_env`] removes variable `key`.
fn not_inherited(key: &str) -> bool {
    // Nor systemd's notification socket, were the tests or the demo run
    // under systemd: the agent would report to the caller's unit.
    key.starts_with("OS_")
        || key.starts_with("LACHESIS_")
        || key == "RUST_LOG"
        || key == "NOTIFY_SOCKET"
        || key.starts_with("WATCHDOG_")
}

/// The agent as a child process (`lachesis agent --config FILE`), its
/// standard error in a log file; killed on drop if still running.
#[derive(Debug)]
pub struct Agent {
    /// The process.
    pub child: Child,
    /// Where its standard error goes.
    pub log: PathBuf,
    started: Instant,
}

impl Agent {
    /// `binary agent --config config`, its stderr in `log`.
    #[must_use]
    pub fn start(binary: &Path, config: &Path, log: PathBuf) -> Agent {
        Agent::spawn(binary, config, log, &[], None)
    }

    /// [`Agent::start`] with `env` added to its environment and the
    /// caller's scrubbed ([`scrub_env`]), in `sandbox` (a unit's
    /// sandboxing and privileges, [`crate::sandbox`]) when given.
    ///
    /// # Panics
    /// It cannot be started (a sandbox's failure is in the log).
    #[must_use]
    pub fn spawn(
        binary: &Path,
        config: &Path,
        log: PathBuf,
        env: &[(&str, &str)],
        sandbox: Option<&crate::sandbox::Sandbox>,
    ) -> Agent {
        let mut cmd = Command::new(binary);
        scrub_env(&mut cmd);
        if let Some(sandbox) = sandbox {
            sandbox.apply(&mut cmd);
        }
        let stderr =
            std::fs::File::create(&log).unwrap_or_else(|e| panic!("create {}: {e}", log.display()));
        let started = Instant::now();
        let child = cmd
            .envs(env.iter().copied())
            .arg("agent")
            .arg("--config")
            .arg(config)
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", binary.display()));
        Agent {
            child,
            log,
            started,
        }
    }

    /// What it wrote to standard error so far.
    #[must_use]
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Sends `sig` to it.
    ///
    /// # Panics
    /// The signal cannot be sent.
    pub fn signal(&self, sig: i32) {
        let pid = i32::try_from(self.child.id()).expect("a pid");
        // SAFETY: kill(2) takes no pointers; `pid` is our own child, not
        // yet reaped (we hold its `Child`), so the id is not reused.
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0, "kill {pid} {sig}");
    }

    /// Its exit status, waiting up to `limit`.
    ///
    /// # Panics
    /// It still runs after `limit` (its log in the message).
    pub fn wait(&mut self, limit: Duration) -> ExitStatus {
        let until = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                Instant::now() < until,
                "the agent did not exit within {limit:?}; log:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until `/readyz` on `metrics` answers 200 (boot phase
    /// `running`), polling every 100 ms for up to a minute.
    ///
    /// # Panics
    /// It exits first, or is not ready within the minute.
    pub fn wait_ready(&mut self, metrics: SocketAddr) {
        self.wait_ready_polling(metrics, Duration::from_millis(100), Duration::from_mins(1));
    }

    /// [`Agent::wait_ready`] polling every `every` for up to `limit`;
    /// returns the time from its start to the first 200 (a benchmark's
    /// boot time: poll finely).
    ///
    /// # Panics
    /// It exits first, or is not ready within `limit`.
    pub fn wait_ready_polling(
        &mut self,
        metrics: SocketAddr,
        every: Duration,
        limit: Duration,
    ) -> Duration {
        let until = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                panic!(
                    "the agent exited ({status}) before ready; log:\n{}",
                    self.log_text()
                );
            }
            if get(metrics, "/readyz").is_some_and(|(code, _)| code == 200) {
                return self.started.elapsed();
            }
            assert!(
                Instant::now() < until,
                "never ready; log:\n{}",
                self.log_text()
            );
            std::thread::sleep(every);
        }
    }

    /// SIGTERM (its final drain and flush), then its exit status, waiting
    /// up to `limit`.
    pub fn terminate(&mut self, limit: Duration) -> ExitStatus {
        self.signal(libc::SIGTERM);
        self.wait(limit)
    }

    /// [`Agent::terminate`] within 20 s, which must exit 0.
    ///
    /// # Panics
    /// Another exit, or none within 20 s.
    pub fn stop(&mut self) {
        let status = self.terminate(Duration::from_secs(20));
        assert_eq!(status.code(), Some(0), "log:\n{}", self.log_text());
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

/// The value of `series` (`name{a="x"}`, labels in any order) on the
/// `/metrics` of `metrics`; `None` when absent or nothing answers.
#[must_use]
pub fn metric(metrics: SocketAddr, series: &str) -> Option<f64> {
    let (_, body) = get(metrics, "/metrics")?;
    crate::exposition::parse(&body).value(series)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_renders_one_key_a_line_in_block_yaml() {
        let mut c = AgentConfig::new(
            "sim",
            Path::new("/tmp/x/clouds.yaml"),
            Path::new("/sys/fs/bpf/lachesis-e2e-1"),
            Path::new("/tmp/x/state.json"),
        );
        c.metrics = "127.0.0.1:19847".parse().unwrap();
        c.debug = "127.0.0.1:19848".parse().unwrap();
        c.interface_prefixes = vec!["tap1v".into()];
        c.interfaces = Some(Vec::new());
        c.flows_memory_budget_mib = Some(4);
        c.tunables = Tunables::fast();
        c.kafka_brokers = vec!["127.0.0.1:2".into()];
        c.kafka_topic = Some("notifications.info".into());
        assert_eq!(
            c.render(),
            "openstack:\n  cloud: sim\n  clouds_file: /tmp/x/clouds.yaml\n\
             listen:\n  metrics: 127.0.0.1:19847\n  debug: 127.0.0.1:19848\n\
             datapath:\n  interface_prefixes: [tap1v]\n  interfaces: []\n  bpffs_dir: /sys/fs/bpf/lachesis-e2e-1\n  flows_memory_budget: 4MiB\n\
             state:\n  path: /tmp/x/state.json\n\
             tunables:\n  scrape_interval: 200ms\n  state_flush_interval: 300ms\n  reconcile_interval: 5m\n  ghost_grace: 1s\n  ghost_sweep_interval: 500ms\n\
             notifications:\n  kafka:\n    brokers: [\"127.0.0.1:2\"]\n    topic: notifications.info\n"
        );
    }

    #[test]
    fn the_callers_cloud_agent_and_systemd_settings_are_not_inherited() {
        for key in [
            "OS_CLOUD",
            "LACHESIS_CONFIG",
            "RUST_LOG",
            "NOTIFY_SOCKET",
            "WATCHDOG_USEC",
        ] {
            assert!(not_inherited(key), "{key}");
        }
        for key in ["PATH", "HOME", "RUST_BACKTRACE", "LOS_X"] {
            assert!(!not_inherited(key), "{key}");
        }
    }

    #[test]
    fn durations_take_the_largest_whole_unit() {
        assert_eq!(duration(Duration::from_mins(5)), "5m");
        assert_eq!(duration(Duration::from_secs(90)), "90s");
        assert_eq!(duration(Duration::from_millis(1500)), "1500ms");
        assert_eq!(duration(Duration::ZERO), "0ms");
    }
}
