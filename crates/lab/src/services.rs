//! Privileges and loopback services for the tests that need them.
//!
//! One place decides how a test that needs root or a real server fails when
//! it cannot have it: loudly, naming what it needed. No test skips.

use std::fs::File;
use std::os::fd::AsRawFd as _;
use std::process::Command;
use std::time::Instant;

use crate::netns::Netns;

/// The AMQP port of the first `RabbitMQ` node `scripts/real-cloud` starts.
pub const RABBITMQ_PORT: u16 = 16672;

/// The AMQP port of the second, independent node (`up-rabbitmq2`).
pub const RABBITMQ2_PORT: u16 = 16682;

/// The real-cloud tier's Keystone (`scripts/real-cloud`'s `KS_PORT`).
pub const KEYSTONE_URL: &str = "http://127.0.0.1:15000/v3";

/// Its Neutron (`NEUTRON_PORT`), with the API version.
pub const NEUTRON_URL: &str = "http://127.0.0.1:19696/v2.0";

/// The password of its `admin` user, project `admin`, domain `Default`.
pub const CLOUD_ADMIN_PASSWORD: &str = "lachesis-admin";

/// Held (flock) for as long as a [`Services`] lives: the tier listens on
/// fixed loopback ports, so two test runs on the machine (two worktrees, two
/// users) take turns instead of stopping each other's brokers.
const LOCK_FILE: &str = "/run/lock/lachesis-services.lock";

/// Fails loudly when not root: kernel tests must never skip silently.
pub fn require_root() {
    require_root_for("BPF, TC, network namespaces");
}

/// Fails loudly when not root, saying what the test needed root for.
pub fn require_root_for(what: &str) {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    assert!(
        euid == 0,
        "this test needs root ({what}); run `make test` as root — refusing to skip"
    );
}

/// The project's service script (`scripts/real-cloud`), which installs and
/// starts Keystone, Neutron, `MariaDB`, `RabbitMQ` and a Kafka-protocol broker
/// on private loopback ports and stops, by PID, only what it started.
#[must_use]
pub fn script() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/real-cloud").to_owned()
}

/// A service tier brought up by [`script`] for one test; stopped (by PID,
/// through the script) when dropped, also when an assertion fails.
#[derive(Debug)]
pub struct Services {
    tier: &'static str,
    /// The tier's message broker (`rabbitmq`, `kafka`), as the script's
    /// verbs name it.
    broker: &'static str,
    /// The network namespace the tier was brought up from (where its
    /// loopback ports are): every later verb runs there, even when the
    /// test's thread has moved into a namespace of its own since.
    netns: Netns,
    /// Released when dropped, after the tier is stopped.
    _lock: File,
}

impl Services {
    /// The whole real cloud (Keystone, Neutron, `MariaDB`, `RabbitMQ`).
    #[must_use]
    pub fn cloud() -> Self {
        Self::up("up", "the real-cloud tier (Keystone, Neutron)", "rabbitmq")
    }

    /// Only `RabbitMQ`.
    #[must_use]
    pub fn rabbitmq() -> Self {
        Self::up("up-rabbitmq", "RabbitMQ", "rabbitmq")
    }

    /// Two independent `RabbitMQ` nodes, on [`RABBITMQ_PORT`] and
    /// [`RABBITMQ2_PORT`]: the brokers a consumer fails over between.
    /// [`Services::stop_broker`] and [`Services::stop_second_broker`] stop
    /// one each.
    #[must_use]
    pub fn rabbitmq_pair() -> Self {
        let pair = Self::up("up-rabbitmq", "RabbitMQ", "rabbitmq");
        run_verb(&pair.netns, "up-rabbitmq2", "the second RabbitMQ node");
        pair
    }

    /// `rabbitmqctl args…` against the tier's first `RabbitMQ` node
    /// (`scripts/real-cloud rabbitmqctl`), failing loudly. For users and
    /// permissions of a test's own, which it removes.
    pub fn rabbitmqctl(&self, args: &[&str]) {
        if let Err(e) = self.try_rabbitmqctl(args) {
            panic!("rabbitmqctl {args:?} failed\n{e}");
        }
    }

    /// [`Services::rabbitmqctl`], its failure returned (for clean-ups).
    ///
    /// # Errors
    /// What the command printed, when it could not run or failed.
    pub fn try_rabbitmqctl(&self, args: &[&str]) -> Result<String, String> {
        let out = self
            .netns
            .run(|| {
                Command::new("bash")
                    .arg(script())
                    .arg("rabbitmqctl")
                    .args(args)
                    .output()
            })
            .map_err(|e| format!("cannot run {} rabbitmqctl: {e}", script()))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "--- stdout\n{}\n--- stderr\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    /// Only the Kafka-protocol broker, with the `notifications.info` topic.
    #[must_use]
    pub fn kafka() -> Self {
        Self::up("up-kafka", "the Kafka-protocol broker", "kafka")
    }

    fn up(verb: &'static str, tier: &'static str, broker: &'static str) -> Self {
        require_root_for(&format!("it installs and runs {tier}"));
        let lock = take_lock(tier);
        let netns = Netns::current();
        run_verb(&netns, verb, tier);
        Self {
            tier,
            broker,
            netns,
            _lock: lock,
        }
    }

    /// Stops the tier's broker (by PID) and leaves the rest running, for
    /// reconnection tests; [`Services::start_broker`] brings it back.
    pub fn stop_broker(&self) {
        run_verb(&self.netns, &format!("stop-{}", self.broker), self.broker);
    }

    /// Starts the broker [`Services::stop_broker`] stopped. The Kafka
    /// broker's memory engine comes back empty (`notifications.info`
    /// recreated with one partition): recreate any other topic.
    pub fn start_broker(&self) {
        run_verb(&self.netns, &format!("up-{}", self.broker), self.broker);
    }

    /// Stops (by PID) the second node of [`Services::rabbitmq_pair`].
    pub fn stop_second_broker(&self) {
        run_verb(&self.netns, "stop-rabbitmq2", "the second RabbitMQ node");
    }

    /// Starts the node [`Services::stop_second_broker`] stopped.
    pub fn start_second_broker(&self) {
        run_verb(&self.netns, "up-rabbitmq2", "the second RabbitMQ node");
    }
}

/// `scripts/real-cloud VERB` in the namespace `netns`, failing with its
/// output.
fn run_verb(netns: &Netns, verb: &str, what: &str) {
    let started = Instant::now();
    let out = netns
        .run(|| Command::new("bash").arg(script()).arg(verb).output())
        .unwrap_or_else(|e| panic!("cannot run {} {verb}: {e}", script()));
    assert!(
        out.status.success(),
        "{what}: scripts/real-cloud {verb} failed\n--- stdout\n{}\n--- stderr\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{what}: {verb} in {:.1}s", started.elapsed().as_secs_f64());
}

/// Waits (saying so) until no other run on the machine holds the tier.
fn take_lock(tier: &str) -> File {
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(LOCK_FILE)
        .unwrap_or_else(|e| panic!("cannot open {LOCK_FILE}: {e}"));
    let fd = file.as_raw_fd();
    // SAFETY: fd is a valid open descriptor owned by `file` for the call.
    if unsafe { libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        eprintln!("{tier}: another run holds {LOCK_FILE}; waiting for it");
        let started = Instant::now();
        // SAFETY: as above.
        let rc = unsafe { libc::flock(fd, libc::LOCK_EX) };
        assert!(
            rc == 0,
            "flock {LOCK_FILE}: {}",
            std::io::Error::last_os_error()
        );
        eprintln!(
            "{tier}: lock taken after {:.1}s",
            started.elapsed().as_secs_f64()
        );
    }
    file
}

/// The service logs whose tails a failing test prints (under
/// `scripts/real-cloud`'s log folder): what a server did when a request to
/// it hung or failed is otherwise gone with the machine.
const LOG_TAILS: [&str; 3] = ["neutron.log", "neutron-app.log", "keystone-app.log"];

/// Prints the last lines of each of [`LOG_TAILS`] that exists.
fn print_log_tails() {
    let dir =
        std::env::var("LACHESIS_CLOUD_DIR").unwrap_or_else(|_| "/var/lib/lachesis-cloud".into());
    for name in LOG_TAILS {
        let path = format!("{dir}/log/{name}");
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let lines: Vec<&str> = text.lines().collect();
        let tail = &lines[lines.len().saturating_sub(40)..];
        eprintln!(
            "--- last {} lines of {path} ---\n{}",
            tail.len(),
            tail.join("\n")
        );
    }
}

impl Drop for Services {
    fn drop(&mut self) {
        if std::thread::panicking() {
            print_log_tails();
        }
        let status = self
            .netns
            .run(|| Command::new("bash").arg(script()).arg("down").status());
        if !matches!(status, Ok(s) if s.success()) {
            eprintln!("warning: stopping {} failed: {status:?}", self.tier);
        }
    }
}
