//! `lachesis sim` as a new user meets it, run through the built binary:
//! `--listen` takes a host name, and a subnet Neutron would refuse (a `/33`,
//! a `/129`, an `ip_version` of the other family) is refused with its id,
//! its field and the expected form, from a topology file and from the
//! control API alike.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};

use lachesis_lab::http::Request;

fn lachesis(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lachesis"))
        .args(args)
        .output()
        .expect("run lachesis")
}

/// Checks a run that must refuse to serve: its exit code, and that stderr
/// holds every one of `parts`.
fn assert_refused(out: &Output, code: i32, parts: &[&str], case: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{case}: {stderr}");
    for part in parts {
        assert!(
            stderr.contains(part),
            "{case}: {part:?} missing from {stderr}"
        );
    }
    assert!(out.stdout.is_empty(), "{case}: it must not serve");
}

fn example_topology() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/topology.yaml")
}

/// `lachesis sim` running as a child; killed on drop if still running.
struct Running {
    child: Child,
    /// Where it says it serves, from its first line.
    addr: SocketAddr,
    /// Everything it printed after the first line, once it has exited.
    rest: std::thread::JoinHandle<String>,
}

impl Running {
    fn start(listen: &str) -> Running {
        let topology = example_topology();
        let mut child = Command::new(env!("CARGO_BIN_EXE_lachesis"))
            .args(["sim", "--topology", topology.to_str().unwrap()])
            .args(["--listen", listen])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start lachesis sim");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        // Printed once the listener is bound and Ctrl-C is handled.
        let first = lines.next().expect("no output").expect("read stdout");
        let addr = first
            .rsplit_once(" on http://")
            .and_then(|(_, a)| a.parse().ok())
            .unwrap_or_else(|| panic!("no serving address in {first:?}"));
        let rest =
            std::thread::spawn(move || lines.map_while(Result::ok).collect::<Vec<_>>().join("\n"));
        Running { child, addr, rest }
    }

    /// One HTTP/1.1 request; the status code and the body.
    fn request(&self, method: &str, path: &str, body: &str) -> (u16, String) {
        let r = Request::new(method, path)
            .json(body)
            .send(self.addr)
            .unwrap_or_else(|e| panic!("{method} {path} to the simulator: {e}"));
        (r.status, r.body)
    }

    /// Sends Ctrl-C (SIGINT) and returns how it exited and what it printed.
    fn interrupt(mut self) -> (ExitStatus, String) {
        let pid = libc::pid_t::try_from(self.child.id()).unwrap();
        // SAFETY: kill(2) takes no pointers; `pid` is our own child, not yet
        // reaped (we hold its `Child` and have not waited), so the id cannot
        // have been reused by another process.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
        let status = self.child.wait().unwrap();
        let rest = std::mem::replace(&mut self.rest, std::thread::spawn(String::new));
        (status, rest.join().unwrap())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn listen_takes_a_host_name_and_serves_on_an_address_it_resolves_to() {
    let sim = Running::start("localhost:0");
    assert!(sim.addr.ip().is_loopback(), "{}", sim.addr);
    assert_ne!(sim.addr.port(), 0);
    let (status, body) = sim.request("GET", "/sim/stats", "");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("tokens_issued"), "{body}");
    let (status, rest) = sim.interrupt();
    assert!(status.success(), "{status}");
    assert!(rest.contains("lachesis sim: stopping"), "{rest}");
}

#[test]
fn listen_on_a_name_that_resolves_to_nothing_names_the_flag_and_the_form() {
    let topology = example_topology();
    let topology = topology.to_str().unwrap();
    // `.invalid` never resolves (RFC 6761).
    for (listen, says) in [
        (
            "nothing.invalid:8780",
            "cannot resolve host \"nothing.invalid\"",
        ),
        ("localhost", "no port in \"localhost\""),
    ] {
        let out = lachesis(&["sim", "--topology", topology, "--listen", listen]);
        assert_refused(
            &out,
            2,
            &["--listen <HOST:PORT>", says, "expected HOST:PORT"],
            listen,
        );
    }
}

#[test]
fn a_topology_subnet_neutron_would_refuse_fails_naming_id_field_and_form() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("topology.yaml");
    for (subnet, says) in [
        (
            "cidr: 10.0.0.0/33",
            "cidr \"10.0.0.0/33\" has prefix length 33, beyond IPv4's 32 bits",
        ),
        (
            "cidr: \"fd00::/129\"",
            "cidr \"fd00::/129\" has prefix length 129, beyond IPv6's 128 bits",
        ),
        (
            "cidr: 10.0.0.0/24, ip_version: 6",
            "cidr \"10.0.0.0/24\" does not match the ip_version 6",
        ),
    ] {
        std::fs::write(
            &file,
            format!(
                "networks: [{{id: n1, project_id: p}}]\n\
                 subnets:\n  - {{id: s-bad, network_id: n1, project_id: p, {subnet}}}\n"
            ),
        )
        .unwrap();
        // An address this host does not have: were the topology wrongly
        // accepted, the bind would fail instead of serving forever.
        let out = lachesis(&[
            "sim",
            "--topology",
            file.to_str().unwrap(),
            "--listen",
            "192.0.2.1:9",
        ]);
        assert_refused(
            &out,
            1,
            &["line 3", "subnet \"s-bad\"", says, "expected "],
            subnet,
        );
    }
}

#[test]
fn the_control_api_refuses_a_129_bit_prefix_with_a_400_and_lists_nothing_new() {
    let sim = Running::start("127.0.0.1:0");
    let bad = r#"{"id": "s-bad", "network_id": "net-a", "project_id": "p", "cidr": "fd00::/129"}"#;
    let (status, body) = sim.request("POST", "/sim/subnets", bad);
    assert_eq!(status, 400, "{body}");
    for part in [
        "subnet \\\"s-bad\\\"",
        "cidr \\\"fd00::/129\\\" has prefix length 129",
        "expected ADDRESS/LENGTH",
    ] {
        assert!(body.contains(part), "{part:?} missing from {body}");
    }
    let (status, topology) = sim.request("GET", "/sim/topology", "");
    assert_eq!(status, 200);
    assert!(!topology.contains("s-bad"), "{topology}");
    // Host bits are accepted and cleared, as Neutron stores the subnet.
    let loose =
        r#"{"id": "s-new", "network_id": "net-a", "project_id": "p", "cidr": "10.77.0.9/16"}"#;
    let (status, body) = sim.request("POST", "/sim/subnets", loose);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""cidr":"10.77.0.0/16""#), "{body}");
}
