//! Root: how `lachesis agent` starts under a service manager (issue 19
//! items 6–9).
//!
//! - A configuration that cannot boot — a typo, an unknown cloud entry, a
//!   bpffs dir off bpffs, a missing TLS file — exits 2 (the code the unit
//!   does not restart), printing each problem once by key, before anything
//!   touches the kernel: no bpffs dir, no pin, no lock file, no state file.
//! - Started by systemd as `Type=notify`, the agent says READY once it is
//!   observable, shows in STATUS what cold start is waiting for — a cloud
//!   that refuses its credentials names the clouds file and entry, and is
//!   logged as an error — and pings the watchdog while it runs.
//!
//! Each test moves its thread into a network namespace of its own.

use crate::common;

use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::time::{Duration, Instant};

use common::agent::{topology, Setup};
use common::Sim;
use lachesis_lab::agent::metric;
use lachesis_lab::http::get;
use lachesis_lab::netns::{isolate, Lab};

/// Everything an agent of `setup` could have left on the machine.
fn traces(setup: &Setup) -> Vec<String> {
    let state = setup.dir.path().join("state.json");
    let mut found = Vec::new();
    for path in [
        setup.bpffs.clone(),
        state.clone(),
        state.with_extension("json.lock"),
        state.with_extension("json.bak"),
    ] {
        if path.exists() {
            found.push(path.display().to_string());
        }
    }
    found
}

/// Runs the agent on `setup`'s configuration to its exit: (code, stderr).
fn run_to_exit(setup: &Setup, n: usize) -> (i32, String) {
    let mut agent = setup.start(n);
    let status = agent.wait(Duration::from_secs(30));
    (status.code().expect("exited"), agent.log_text())
}

#[test]
fn a_configuration_that_cannot_boot_exits_2_before_touching_the_kernel() {
    lachesis_lab::require_root();
    isolate();
    let lab = Lab::new();
    let sim = Sim::start(&[]);
    let setup = Setup::new(&lab, &sim);
    let good = std::fs::read_to_string(&setup.config).unwrap();
    let scratch = setup.dir.path().join("scratch");
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "a typo",
            good.replace("scrape_interval:", "scrape_intervl:"),
            "lachesis: config error: tunables.scrape_intervl: unknown key",
        ),
        (
            "a tunable out of its bounds",
            good.replace("scrape_interval: 200ms", "scrape_interval: 1ms"),
            "lachesis: config error: tunables.scrape_interval: 1ms is below 100ms",
        ),
        (
            "an unknown cloud entry",
            good.replace("cloud: sim", "cloud: prod"),
            "lachesis: config error: openstack.cloud: ",
        ),
        (
            "a clouds file that does not exist",
            good.replace("clouds_file: ", "clouds_file: /nonexistent"),
            "lachesis: config error: openstack.clouds_file: no clouds.yaml found",
        ),
        (
            "a bpffs dir that is not on bpffs",
            good.replace(
                &format!("bpffs_dir: {}", setup.bpffs.display()),
                &format!("bpffs_dir: {}/pins", scratch.display()),
            ),
            "lachesis: config error: datapath.bpffs_dir: ",
        ),
        (
            "a Kafka CA file that does not exist",
            format!(
                "{good}notifications:\n  kafka:\n    brokers: ['127.0.0.1:9']\n    tls: {{enabled: true, ca_file: {}/ca.pem}}\n",
                scratch.display()
            ),
            "lachesis: config error: notifications.kafka.tls: ",
        ),
    ];
    for (what, text, expected) in cases {
        std::fs::write(&setup.config, &text).unwrap();
        let (code, stderr) = run_to_exit(&setup, 0);
        assert_eq!(code, 2, "{what}: exit code; stderr:\n{stderr}");
        let errors: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("lachesis: "))
            .collect();
        assert_eq!(errors.len(), 1, "{what}: one line per problem:\n{stderr}");
        assert!(errors[0].starts_with(expected), "{what}:\n{stderr}");
        assert_eq!(traces(&setup), Vec::<String>::new(), "{what}: left behind");
        assert!(!scratch.join("pins").exists(), "{what}");
    }
    // The same configuration, fixed, boots.
    std::fs::write(&setup.config, &good).unwrap();
    let mut agent = setup.start(1);
    agent.wait_ready(setup.metrics);
}

/// The notification socket systemd would give the agent.
struct NotifySocket {
    socket: UnixDatagram,
    path: std::path::PathBuf,
    seen: Vec<String>,
}

impl NotifySocket {
    fn bind(dir: &Path) -> NotifySocket {
        let path = dir.join("notify.sock");
        let socket = UnixDatagram::bind(&path).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        NotifySocket {
            socket,
            path,
            seen: Vec::new(),
        }
    }

    /// Reads messages until one satisfies `want` (returned), or fails
    /// after `limit` showing what came.
    fn until(&mut self, limit: Duration, what: &str, want: impl Fn(&str) -> bool) -> String {
        let end = Instant::now() + limit;
        let mut buf = [0u8; 4096];
        while Instant::now() < end {
            if let Ok(n) = self.socket.recv(&mut buf) {
                let message = String::from_utf8_lossy(&buf[..n]).into_owned();
                self.seen.push(message.clone());
                if want(&message) {
                    return message;
                }
            }
        }
        panic!("no {what} within {limit:?}; messages:\n{:#?}", self.seen);
    }
}

#[test]
fn systemd_hears_ready_what_boot_waits_for_and_the_watchdog() {
    lachesis_lab::require_root();
    isolate();
    let lab = Lab::new();
    let scratch = tempfile::tempdir().unwrap();
    let topo = scratch.path().join("topology.yaml");
    std::fs::write(&topo, topology()).unwrap();
    let sim = Sim::start_topology(&topo, &[]);
    let dir = tempfile::tempdir().unwrap();
    // Credentials Keystone refuses.
    let clouds = sim.clouds_yaml(dir.path(), |t| {
        t.replacen("password: admin-secret", "password: rotated-wrongly", 1)
    });
    let setup = Setup::in_dir(dir, &lab, &clouds, "sim");
    let mut notify = NotifySocket::bind(scratch.path());
    let socket = notify.path.to_str().unwrap().to_owned();
    let agent = setup.start_with_env(
        0,
        &[("NOTIFY_SOCKET", &socket), ("WATCHDOG_USEC", "1500000")],
    );

    // Observable at once: READY, while boot waits for OpenStack.
    notify.until(Duration::from_secs(30), "READY=1", |m| {
        m.lines().any(|l| l == "READY=1")
    });
    assert_eq!(
        get(setup.metrics, "/readyz").map(|(code, _)| code),
        Some(503),
        "not ready: nothing attached"
    );
    let refused = format!(
        "refused the credentials of cloud \"sim\" in {}",
        clouds.display()
    );
    let status = notify.until(
        Duration::from_secs(30),
        "a status naming the refusal",
        |m| m.contains(&refused),
    );
    assert!(
        status.starts_with("STATUS=booting (bpf_loaded): waiting for OpenStack"),
        "{status}"
    );
    // Watched while booting: waiting for a cloud is no stall.
    notify.until(
        Duration::from_secs(5),
        "a watchdog ping while booting",
        |m| m.lines().any(|l| l == "WATCHDOG=1"),
    );
    // Logged as an error naming the file and entry (the log quotes the
    // error text, escaping its quotes); counted for the alert.
    let log = agent.log_text();
    assert!(
        log.lines().any(|l| l.contains("ERROR")
            && l.contains("refused the credentials of cloud")
            && l.contains(&clouds.display().to_string())),
        "{log}"
    );
    let counted = metric(
        setup.metrics,
        "lachesis_openstack_api_errors_total{service=\"identity\",endpoint=\"auth\",code=\"401\"}",
    );
    assert!(counted.is_some_and(|n| n >= 1.0), "{counted:?}");
    drop(agent);

    // The credentials fixed: running, pinged.
    std::fs::write(
        &clouds,
        std::fs::read_to_string(&clouds)
            .unwrap()
            .replace("password: rotated-wrongly", "password: admin-secret"),
    )
    .unwrap();
    notify.seen.clear();
    let mut agent = setup.start_with_env(
        1,
        &[("NOTIFY_SOCKET", &socket), ("WATCHDOG_USEC", "1500000")],
    );
    agent.wait_ready(setup.metrics);
    let status = notify.until(Duration::from_secs(10), "STATUS=running", |m| {
        m.lines().any(|l| l == "STATUS=running")
    });
    assert!(status.contains("WATCHDOG=1"), "{status}");
    // Pinged again and again (every third of the period), not once.
    for _ in 0..3 {
        notify.until(Duration::from_secs(3), "another watchdog ping", |m| {
            m.contains("WATCHDOG=1")
        });
    }
    // A stop says so before the final drain.
    agent.signal(libc::SIGTERM);
    notify.until(Duration::from_secs(10), "STOPPING=1", |m| {
        m.lines().any(|l| l == "STOPPING=1")
    });
    let status = agent.wait(Duration::from_secs(30));
    assert!(status.success(), "{status}");
}
