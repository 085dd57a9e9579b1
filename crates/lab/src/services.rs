//! Privileges and loopback services for the tests that need them.
//!
//! One place decides how a test that needs root or a real server fails when
//! it cannot have it: loudly, naming what it needed. No test skips.

use std::process::Command;
use std::time::Instant;

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
}

impl Services {
    /// The whole real cloud (Keystone, Neutron, `MariaDB`, `RabbitMQ`).
    #[must_use]
    pub fn cloud() -> Self {
        Self::up("up", "the real-cloud tier (Keystone, Neutron)")
    }

    /// Only `RabbitMQ`.
    #[must_use]
    pub fn rabbitmq() -> Self {
        Self::up("up-rabbitmq", "RabbitMQ")
    }

    /// Only the Kafka-protocol broker, with the `notifications.info` topic.
    #[must_use]
    pub fn kafka() -> Self {
        Self::up("up-kafka", "the Kafka-protocol broker")
    }

    fn up(verb: &'static str, tier: &'static str) -> Self {
        require_root_for(&format!("it installs and runs {tier}"));
        let started = Instant::now();
        let out = Command::new("bash")
            .arg(script())
            .arg(verb)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {} {verb}: {e}", script()));
        assert!(
            out.status.success(),
            "{tier} could not be brought up (scripts/real-cloud {verb})\n--- stdout\n{}\n--- stderr\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!("{tier} up in {:.1}s", started.elapsed().as_secs_f64());
        Self { tier }
    }
}

impl Drop for Services {
    fn drop(&mut self) {
        let status = Command::new("bash").arg(script()).arg("down").status();
        if !matches!(status, Ok(s) if s.success()) {
            eprintln!("warning: stopping {} failed: {status:?}", self.tier);
        }
    }
}
