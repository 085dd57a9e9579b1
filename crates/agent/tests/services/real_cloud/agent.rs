//! `lachesis agent` against the real Keystone + Neutron: configured only
//! through a clouds.yaml and the §13 keys, cold start then traffic, SIGKILL
//! under traffic and restart; every tenant series equals its tap's own
//! interface counters (DESIGN §12, §15).
//!
//! The agent and the lab live in a network namespace of their own (as in
//! the simulator's end-to-end tests: the agent owns every program of ours
//! in its namespace); Keystone and Neutron listen on the host's loopback,
//! so their two ports are forwarded into it by a thread left outside.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::Path;
use std::time::Duration;

use lachesis_lab::netns::Lab;

use crate::common::agent::{assert_tenants, traffic, Setup, Totals};
use lachesis_lab::agent::Agent;
use lachesis_lab::http::{get, Forwarder};
use lachesis_lab::netns::isolate;
use lachesis_lab::traffic::counters;

/// Keystone's and Neutron's loopback ports (scripts/real-cloud).
const FORWARDED: [u16; 2] = [15000, 19696];

/// What the test needs from the built cloud: two ports on one shared
/// subnet, in two projects, and a clouds.yaml reaching it.
pub struct Tenants {
    pub project_a: String,
    pub project_b: String,
    pub mac_a: String,
    pub mac_b: String,
    pub ip_a: Ipv4Addr,
    pub ip_b: Ipv4Addr,
    pub port_ids: [String; 2],
}

/// Cold start, traffic, SIGKILL under traffic, restart: the tenant series
/// equal the taps' counters after each life. Runs on its own thread
/// (it moves that thread into a fresh network namespace).
pub fn cold_start_and_sigkill_restart(tenants: &Tenants, clouds: &Path) {
    lachesis_lab::require_root();
    let forwarders = FORWARDED.map(Forwarder::start);
    isolate();
    for f in &forwarders {
        f.listen();
    }
    let mut lab = Lab::new();
    let a = lab.add_vm(tenants.mac_a.parse().unwrap(), tenants.ip_a);
    let b = lab.add_vm(tenants.mac_b.parse().unwrap(), tenants.ip_b);
    lab.static_neighbours();
    let dir = tempfile::tempdir().unwrap();
    let clouds_copy = dir.path().join("clouds.yaml");
    std::fs::copy(clouds, &clouds_copy).unwrap();
    let setup = Setup::in_dir(dir, &lab, &clouds_copy, "lt-appcred");
    let m = setup.metrics;
    let want = || {
        BTreeMap::from([
            (tenants.project_a.clone(), Totals::from_tap(counters(&a))),
            (tenants.project_b.clone(), Totals::from_tap(counters(&b))),
        ])
    };
    let counted = |agent: &Agent| {
        assert_tenants(
            agent,
            m,
            Duration::from_secs(30),
            |_, _| false,
            &["tenant_id"],
            want,
        );
    };

    let mut first = setup.start(0);
    first.wait_ready(m);
    traffic(&a, &b, 0);
    counted(&first);
    // Attributed to the real ports, not only to their projects.
    let (_, body) = get(m, "/metrics").unwrap();
    for port in &tenants.port_ids {
        assert!(
            body.contains(&format!("port_id=\"{port}\"")),
            "no series for port {port}:\n{body}"
        );
    }

    let (ta, tb) = (a.clone(), b.clone());
    let during = std::thread::spawn(move || traffic(&ta, &tb, 1));
    std::thread::sleep(Duration::from_millis(30));
    first.signal(libc::SIGKILL);
    first.wait(Duration::from_secs(10));
    during.join().unwrap();
    traffic(&a, &b, 2); // counted by the programs left attached

    let mut second = setup.start(1);
    second.wait_ready(m);
    traffic(&a, &b, 3);
    counted(&second);
    assert!(
        second.log_text().contains("flows_pin=Reused"),
        "{}",
        second.log_text()
    );
    second.stop();
}
