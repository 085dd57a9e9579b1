//! The operator kit (deploy/, docs/operations.md "Operator kit") checked
//! with the real tools: promtool validates and unit-tests every rule file;
//! the Debian package installs into a fresh root and its systemd unit
//! passes `systemd-analyze verify`; the unit's capability set is enough for
//! a real agent to boot and count (root, namespaces); `CloudKitty`'s own
//! collector (Debian's and the newest release) builds the queries promtool
//! and a real Prometheus rate.
//! The tools come from Debian packages scripts/setup installs; a missing
//! tool fails the test loudly, naming the package.

mod cloudkitty;
mod live;
mod policy;
mod web_config;

use std::net::Ipv4Addr;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::agent::{
    assert_series_match, topology, traffic, wait_for_sample, wait_for_value, Setup, MAC_A, MAC_B,
    TENANT_A,
};
use crate::common::prometheus::{value, Dashboards, Prometheus};
use crate::common::{repo, Sim, LACHESIS};
use lachesis_lab::agent::{metric, Agent};
use lachesis_lab::http::{get, Forwarder};
use lachesis_lab::netns::{isolate, Lab};
use lachesis_lab::sandbox::Sandbox;

const UNIT: &str = "deploy/systemd/lachesis.service";

/// Runs `tool args…`, failing loudly (naming `package`) when the tool is
/// missing and with its whole output when it fails.
fn run_tool(tool: &str, package: &str, args: &[&str]) -> String {
    let out = Command::new(tool)
        .args(args)
        .current_dir(repo())
        .output()
        .unwrap_or_else(|e| {
            panic!("{tool} not runnable ({e}): install Debian's {package} (scripts/setup does)")
        });
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{tool} {args:?} failed:\n{text}");
    text
}

fn files_in(dir: &str, suffix: &str) -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(repo().join(dir))
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_str().is_some_and(|s| s.ends_with(suffix)))
        .map(|p| {
            p.strip_prefix(repo())
                .unwrap_or(Path::new(""))
                .to_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no {suffix} file in {dir}");
    files
}

#[test]
fn every_rule_file_passes_promtool_check_and_its_unit_tests() {
    for rules in files_in("deploy/prometheus", ".yml") {
        let text = run_tool("promtool", "prometheus", &["check", "rules", &rules]);
        assert!(text.contains("SUCCESS"), "{text}");
    }
    let tests = files_in("deploy/prometheus/tests", ".test.yml");
    let mut args = vec!["test", "rules"];
    args.extend(tests.iter().map(String::as_str));
    let text = run_tool("promtool", "prometheus", &args);
    assert!(!text.contains("FAILED"), "{text}");
}

#[test]
fn every_alert_has_a_unit_test_firing_and_one_node_not_firing() {
    let rules =
        std::fs::read_to_string(repo().join("deploy/prometheus/lachesis-rules.yml")).unwrap();
    let tests: String = files_in("deploy/prometheus/tests", ".test.yml")
        .iter()
        .map(|f| std::fs::read_to_string(repo().join(f)).unwrap())
        .collect();
    let alerts: Vec<&str> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .collect();
    assert!(alerts.len() >= 9, "{alerts:?}");
    for alert in alerts {
        // Fired on the unhealthy node (n1); the exact-set comparison of
        // promtool's exp_samples is what says n2 did not fire.
        assert!(
            tests.contains(&format!("alertname=\"{alert}\",alertstate=")),
            "no unit test expects {alert} to fire"
        );
    }
}

/// Two VMs of two tenants (and `extra` VMs) in a namespace of this
/// thread's own, the simulator serving their ports, an agent's setup.
struct World {
    vms: Vec<lachesis_lab::netns::Vm>,
    setup: Setup,
    _sim: Sim,
    _scratch: tempfile::TempDir,
    _lab: Lab,
}

impl World {
    /// `forward`: loopback ports of host services (a broker) the agent
    /// must reach from the namespace.
    fn new(extra: &[(&str, Ipv4Addr)], forward: &[u16]) -> World {
        World::in_dir(extra, forward, tempfile::tempdir().unwrap())
    }

    /// [`World::new`] with the agent's files (configuration, clouds.yaml,
    /// state file, logs) in `dir`.
    fn in_dir(extra: &[(&str, Ipv4Addr)], forward: &[u16], dir: tempfile::TempDir) -> World {
        lachesis_lab::require_root();
        let forwarders: Vec<Forwarder> = forward.iter().map(|p| Forwarder::start(*p)).collect();
        isolate();
        for f in &forwarders {
            f.listen();
        }
        let mut lab = Lab::new();
        let mut vms = vec![
            lab.add_vm(MAC_A.parse().unwrap(), Ipv4Addr::new(10, 77, 0, 1)),
            lab.add_vm(MAC_B.parse().unwrap(), Ipv4Addr::new(10, 77, 0, 2)),
        ];
        for (mac, ip) in extra {
            vms.push(lab.add_vm(mac.parse().unwrap(), *ip));
        }
        lab.static_neighbours();
        let scratch = tempfile::tempdir().unwrap();
        let topo = scratch.path().join("topology.yaml");
        std::fs::write(&topo, topology()).unwrap();
        let sim = Sim::start_topology(&topo, &[]);
        let clouds = sim.clouds_yaml(dir.path(), |t| t);
        let setup = Setup::in_dir(dir, &lab, &clouds, "sim");
        World {
            vms,
            setup,
            _sim: sim,
            _scratch: scratch,
            _lab: lab,
        }
    }
}

/// The values of `key=` lines in the unit's `[Service]` section.
fn unit_values(key: &str) -> Vec<String> {
    let text = std::fs::read_to_string(repo().join(UNIT)).unwrap();
    text.lines()
        .filter_map(|l| l.strip_prefix(&format!("{key}=")))
        .flat_map(|v| v.split_whitespace().map(str::to_owned))
        .collect()
}

/// Where the package puts each artifact (`dpkg -L`).
const PACKAGED: &[&str] = &[
    "/usr/bin/lachesis",
    "/lib/systemd/system/lachesis.service",
    "/lib/systemd/system/lachesis-relay.service",
    "/etc/lachesis/lachesis.yaml",
    "/etc/lachesis/relay.yaml",
    "/usr/share/lachesis/prometheus/lachesis-rules.yml",
    "/usr/share/lachesis/openstack/access-rules.json",
    "/usr/share/doc/lachesis/README.md",
    "/usr/share/doc/lachesis/copyright",
    "/usr/share/doc/lachesis/changelog.Debian.gz",
];

/// A field of `deploy/debian/control`.
fn control_field(name: &str) -> String {
    let text = std::fs::read_to_string(repo().join("deploy/debian/control")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}: ")))
        .unwrap_or_else(|| panic!("no {name} in deploy/debian/control"))
        .to_owned()
}

/// Issue 19 item 20: the package had a placeholder maintainer and homepage
/// written into the script, no Debian revision and no changelog. Its
/// version is now the changelog's top entry (`UPSTREAM-1`), its fields
/// come from `deploy/debian/control`, and a packager's own maintainer and
/// homepage (flags, or Debian's `DEBFULLNAME`/`DEBEMAIL`) replace them.
fn check_package_fields(deb: &str, dir: &Path) {
    let field = |deb: &str, name: &str| {
        run_tool("dpkg-deb", "dpkg", &["-f", deb, name])
            .trim()
            .to_owned()
    };
    let version = field(deb, "Version");
    assert_eq!(version, format!("{}-1", env!("CARGO_PKG_VERSION")));
    let changelog = run_tool(
        "dpkg-parsechangelog",
        "dpkg-dev",
        &["-l", "deploy/debian/changelog", "-S", "Version"],
    );
    assert_eq!(changelog.trim(), version, "the changelog's top entry");
    assert_eq!(field(deb, "Maintainer"), control_field("Maintainer"));
    assert_eq!(field(deb, "Homepage"), control_field("Homepage"));
    for name in ["Maintainer", "Homepage"] {
        assert!(!field(deb, name).contains("localhost"), "{name}");
    }

    // The installed changelog is the repository's, gzipped, and parses.
    let tar = Command::new("dpkg-deb")
        .args(["--fsys-tarfile", deb])
        .output()
        .unwrap();
    assert!(tar.status.success());
    let unpacked = dir.join("unpacked");
    std::fs::create_dir_all(&unpacked).unwrap();
    let mut untar = Command::new("tar")
        .args(["-x", "-C", unpacked.to_str().unwrap()])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(untar.stdin.as_mut().unwrap(), &tar.stdout).unwrap();
    drop(untar.stdin.take());
    assert!(untar.wait().unwrap().success());
    let packed =
        std::fs::read(unpacked.join("usr/share/doc/lachesis/changelog.Debian.gz")).unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&packed[..]), &mut text)
        .unwrap();
    assert_eq!(
        text,
        std::fs::read_to_string(repo().join("deploy/debian/changelog")).unwrap()
    );

    // A packager's identity replaces the file's.
    let out = dir.join("own");
    let built = Command::new("bash")
        .arg(repo().join("scripts/build-deb"))
        .args(["--binary", env!("CARGO_BIN_EXE_lachesis")])
        .args(["--out", out.to_str().unwrap(), "--compression", "gzip"])
        .args(["--homepage", "https://cloud.example.org/lachesis"])
        .env("DEBFULLNAME", "Cloud Ops")
        .env("DEBEMAIL", "ops@cloud.example.org")
        .output()
        .unwrap();
    assert!(built.status.success(), "build-deb: {built:?}");
    let own = String::from_utf8(built.stdout).unwrap().trim().to_owned();
    assert_eq!(
        field(&own, "Maintainer"),
        "Cloud Ops <ops@cloud.example.org>"
    );
    assert_eq!(
        field(&own, "Homepage"),
        "https://cloud.example.org/lachesis"
    );
    let refused = Command::new("bash")
        .arg(repo().join("scripts/build-deb"))
        .args([
            "--binary",
            env!("CARGO_BIN_EXE_lachesis"),
            "--maintainer",
            "nobody",
        ])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
}
/// The relay's unit as installed verifies, holds no capability, and the
/// relay's conffile checks as shipped with the installed binary (a compute
/// node's build carries the relay: one package for every host).
fn check_relay(r: &Path, installed: &Path, scratch: &Path) {
    let relay = std::fs::read_to_string(r.join("lib/systemd/system/lachesis-relay.service"))
        .unwrap()
        .replace("/usr/bin/lachesis ", &format!("{} ", installed.display()));
    let relay_unit = scratch.join("lachesis-relay.service");
    std::fs::write(&relay_unit, &relay).unwrap();
    let text = run_tool(
        "systemd-analyze",
        "systemd",
        &["verify", "--man=no", relay_unit.to_str().unwrap()],
    );
    let ours: Vec<&str> = text.lines().filter(|l| l.contains("lachesis")).collect();
    assert!(ours.is_empty(), "systemd-analyze verify (relay):\n{text}");
    assert!(
        relay.lines().any(|l| l == "CapabilityBoundingSet="),
        "the relay holds no capability:\n{relay}"
    );
    let checked = Command::new(installed)
        .args(["relay", "--check-config", "--config"])
        .arg(r.join("etc/lachesis/relay.yaml"))
        .env_clear()
        .output()
        .unwrap();
    assert!(
        checked.status.success(),
        "relay --check-config on the shipped conffile:\n{}",
        String::from_utf8_lossy(&checked.stderr)
    );
}

/// The installed binary and conffile work together: the conffile's
/// optional section (notifications, whose example hosts and files exist
/// nowhere) is commented out, so the one thing left for the operator is
/// the cloud; `scratch` takes a clouds.yaml.
fn check_conffile(installed: &Path, conffile: &Path, scratch: &Path) {
    let text = std::fs::read_to_string(conffile).unwrap();
    assert!(
        text.lines().any(|l| l == "# notifications:")
            && !text.lines().any(|l| l.starts_with("notifications:")),
        "{text}"
    );
    let check = |extra: &[&str]| {
        let mut cmd = Command::new(installed);
        for (key, _) in std::env::vars() {
            if key.starts_with("OS_") || key.starts_with("LACHESIS_") {
                cmd.env_remove(key);
            }
        }
        cmd.args(["agent", "--check-config", "--config"])
            .arg(conffile)
            .args(extra)
            .output()
            .unwrap()
    };
    let unconfigured = check(&[]);
    let stderr = String::from_utf8_lossy(&unconfigured.stderr);
    assert_eq!(
        unconfigured.status.code(),
        Some(i32::from(lachesis_agent::exit::CONFIG)),
        "{stderr}"
    );
    let errors: Vec<&str> = stderr.lines().collect();
    assert!(
        errors.len() == 1 && errors[0].starts_with("lachesis: config error: openstack."),
        "the conffile's only problem is the cloud, unconfigured:\n{stderr}"
    );
    let clouds = scratch.join("clouds.yaml");
    std::fs::write(
        &clouds,
        "clouds:\n  mycloud:\n    auth:\n      auth_url: https://keystone.example.org:5000/v3\n      \
         application_credential_id: id\n      application_credential_secret: secret\n    \
         auth_type: v3applicationcredential\n",
    )
    .unwrap();
    let configured = check(&[
        "--set",
        &format!("openstack.clouds_file={}", clouds.display()),
    ]);
    assert!(configured.status.success(), "{configured:?}");
    // The web configuration is the operator's to write (docs/operations.md
    // "Protecting the metrics"): commented out, and its absence warned
    // about while the metrics listen beyond loopback.
    assert!(
        text.lines()
            .any(|l| l.starts_with("#   web_config_file: /etc/lachesis/web.yml")),
        "{text}"
    );
    let stderr = String::from_utf8_lossy(&configured.stderr);
    assert!(
        stderr.contains("listen.metrics: 0.0.0.0:9847 is not a loopback address and listen.web_config_file is not set"),
        "{stderr}"
    );
}

/// What the unit promises about restarts and systemd's notifications.
fn check_unit_contract() {
    // A configuration error exits with the code the unit does not restart
    // on (issue 19 item 7); anything else restarts, within a start limit.
    assert_eq!(
        unit_values("RestartPreventExitStatus"),
        [lachesis_agent::exit::CONFIG.to_string()]
    );
    assert_eq!(unit_values("StartLimitBurst"), ["5"]);
    assert_eq!(unit_values("StartLimitIntervalSec"), ["10min"]);
    // READY, STATUS and the watchdog come from the agent itself (the
    // startup test hears them on a socket of its own).
    assert_eq!(unit_values("Type"), ["notify"]);
    assert_eq!(unit_values("NotifyAccess"), ["main"]);
    assert_eq!(unit_values("WatchdogSec"), ["90s"]);
    assert_eq!(unit_values("WatchdogSignal"), ["SIGTERM"]);
    // The agent checks its configuration itself, before the kernel, and a
    // conffile the package always ships is no condition.
    assert!(unit_values("ExecStartPre").is_empty());
    assert!(unit_values("ConditionPathExists").is_empty());
}

#[test]
fn the_debian_package_installs_into_a_fresh_root_and_its_unit_verifies() {
    let out = tempfile::tempdir().unwrap();
    let built = Command::new("bash")
        .arg(repo().join("scripts/build-deb"))
        .args(["--binary", env!("CARGO_BIN_EXE_lachesis")])
        .args(["--out", out.path().to_str().unwrap()])
        .args(["--compression", "gzip"])
        .output()
        .unwrap();
    assert!(built.status.success(), "build-deb: {built:?}");
    let deb = String::from_utf8(built.stdout).unwrap().trim().to_owned();
    assert!(
        Path::new(&deb).extension().is_some_and(|e| e == "deb"),
        "{deb}"
    );
    check_package_fields(&deb, out.path());

    // A fresh, empty dpkg root: the maintainer scripts run without chroot
    // (there is no shell inside) and honour DPKG_ROOT; the libraries the
    // binary links are not in that root, hence --force-depends.
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    std::fs::create_dir_all(r.join("var/lib/dpkg/info")).unwrap();
    std::fs::create_dir_all(r.join("var/lib/dpkg/updates")).unwrap();
    std::fs::write(r.join("var/lib/dpkg/status"), "").unwrap();
    let root_arg = format!("--root={}", r.display());
    let text = run_tool(
        "dpkg",
        "dpkg",
        &[
            &root_arg,
            "--force-script-chrootless",
            "--force-depends",
            "-i",
            &deb,
        ],
    );
    assert!(text.contains("installed, not started"), "{text}");
    let listed = run_tool("dpkg", "dpkg", &[&root_arg, "-L", "lachesis"]);
    for path in PACKAGED {
        assert!(
            listed.lines().any(|l| l == *path),
            "{path} not in:\n{listed}"
        );
        assert!(r.join(&path[1..]).exists(), "{path} not installed");
    }
    // Every dashboard, the fleet's included.
    for dashboard in files_in("deploy/grafana", ".json") {
        let name = Path::new(&dashboard).file_name().unwrap().to_str().unwrap();
        let path = format!("/usr/share/lachesis/grafana/{name}");
        assert!(
            listed.lines().any(|l| l == path),
            "{path} not in:\n{listed}"
        );
    }
    let conffiles = run_tool(
        "dpkg-query",
        "dpkg",
        &[&root_arg, "-W", "-f=${Conffiles}", "lachesis"],
    );
    for conffile in ["/etc/lachesis/lachesis.yaml", "/etc/lachesis/relay.yaml"] {
        assert!(conffiles.contains(conffile), "{conffile} in {conffiles}");
    }
    assert!(
        r.join("var/lib/lachesis").is_dir(),
        "postinst made no state dir"
    );
    let installed = r.join("usr/bin/lachesis");
    check_conffile(
        &installed,
        &r.join("etc/lachesis/lachesis.yaml"),
        out.path(),
    );

    // The installed unit, with its binary path pointing into the root.
    let text = std::fs::read_to_string(r.join("lib/systemd/system/lachesis.service")).unwrap();
    assert!(text.contains("/usr/bin/lachesis "));
    let unit = out.path().join("lachesis.service");
    let text = text.replace("/usr/bin/lachesis ", &format!("{} ", installed.display()));
    std::fs::write(&unit, text).unwrap();
    let text = run_tool(
        "systemd-analyze",
        "systemd",
        &["verify", "--man=no", unit.to_str().unwrap()],
    );
    let ours: Vec<&str> = text.lines().filter(|l| l.contains("lachesis")).collect();
    assert!(ours.is_empty(), "systemd-analyze verify:\n{text}");
    check_relay(r, &installed, out.path());
    // What the unit promises an operator.
    assert_eq!(unit_values("ExecReload"), ["/bin/kill", "-HUP", "$MAINPID"]);
    assert_eq!(unit_values("ProtectSystem"), ["strict"]);
    assert_eq!(unit_values("StateDirectory"), ["lachesis"]);
    assert_eq!(unit_values("ReadWritePaths"), ["/sys/fs/bpf"]);
    assert_eq!(unit_values("Restart"), ["on-failure"]);
    check_unit_contract();

    // Purge removes what postinst made.
    run_tool(
        "dpkg",
        "dpkg",
        &[
            &root_arg,
            "--force-script-chrootless",
            "--purge",
            "lachesis",
        ],
    );
    assert!(!r.join("var/lib/lachesis").exists());
    assert!(!r.join("usr/bin/lachesis").exists());
}

/// What the unit's sandbox must refuse and allow, checked by a process
/// in it (`python3 PROBE CONF STATE BPFFS MARKER`): it prints `refused as
/// the unit says` and ends killed by SIGSYS on a call outside
/// `SystemCallFilter=`, or exits naming the check that failed.
const PROBE: &str = r#"
import errno, mmap, os, socket, stat, subprocess, sys
conf, state, bpffs, marker = sys.argv[1:5]

def refused(what, f, *want):
    try:
        f()
    except OSError as e:
        if e.errno in want:
            return
        sys.exit(f"{what}: {e}, expected {' or '.join(errno.errorcode[w] for w in want)}")
    sys.exit(f"{what}: allowed")

def ok(what, f):
    try:
        f()
    except OSError as e:
        sys.exit(f"{what}: {e}")

def touch(path):
    open(path, "w").close()
    os.unlink(path)

# ProtectSystem=strict, with StateDirectory= and ReadWritePaths= writable.
refused("write to /etc", lambda: touch("/etc/lachesis-probe"), errno.EROFS)
refused("write to /var/lib", lambda: touch("/var/lib/lachesis-probe"), errno.EROFS)
refused("write beside the configuration", lambda: touch(os.path.join(conf, "probe")), errno.EROFS)
ok("write to the state directory", lambda: touch(os.path.join(state, "probe")))
pin_dir = os.path.join(bpffs, f"lachesis-probe-{os.getpid()}")
ok("mkdir in the bpffs", lambda: (os.mkdir(pin_dir), os.rmdir(pin_dir)))
# ProtectKernelTunables.
for tunable in ("/proc/sys/kernel/hostname", "/sys/class/net/lo/tx_queue_len"):
    refused(f"open {tunable} to write", lambda: os.close(os.open(tunable, os.O_WRONLY)), errno.EROFS)
# PrivateDevices: pseudo-devices only.
nodes = [n for n in os.listdir("/dev") if stat.S_ISBLK(os.stat(f"/dev/{n}", follow_symlinks=False).st_mode)]
if nodes:
    sys.exit(f"block devices in /dev: {nodes}")
ok("write to /dev/null", lambda: open("/dev/null", "w").write("x"))
# PrivateTmp: a /tmp of its own.
if os.path.exists(marker):
    sys.exit(f"{marker}: the host's /tmp is visible")
ok("write to /tmp", lambda: touch("/tmp/probe"))
# ProtectHome: empty and inaccessible.
for home in (h for h in ("/home", "/root") if os.path.isdir(h)):
    st = os.stat(home)
    if st.st_mode & 0o777 or st.st_dev == os.stat("/").st_dev:
        sys.exit(f"{home}: not hidden (mode {st.st_mode:o})")
    refused(f"list {home}", lambda: os.listdir(home), errno.EACCES)
# RestrictAddressFamilies.
for family in (socket.AF_UNIX, socket.AF_INET, socket.AF_INET6, socket.AF_NETLINK):
    ok(f"a socket of family {family}", lambda: socket.socket(family, socket.SOCK_DGRAM).close())
refused("an AF_PACKET socket", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW), errno.EAFNOSUPPORT)
# MemoryDenyWriteExecute.
wx = mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC
refused("a writable, executable mapping", lambda: mmap.mmap(-1, 4096, prot=wx), errno.EACCES, errno.EPERM)
# NoNewPrivileges.
if "NoNewPrivs:\t1" not in open("/proc/self/status").read():
    sys.exit("no_new_privs is not set")
# RestrictNamespaces, LockPersonality.
for argv in (["unshare", "--user", "true"], ["setarch", "linux32", "true"]):
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode == 0 or "Operation not permitted" not in r.stderr:
        sys.exit(f"{argv}: exit {r.returncode}, {r.stderr!r}")
print("refused as the unit says", flush=True)
# SystemCallFilter: a call outside it kills the process.
os.chroot("/")
sys.exit("chroot(2) was not stopped")
"#;

/// The unit's privileges and sandboxing, each proved on this machine
/// without systemd as PID 1 by [`Sandbox`] (the kernel mechanisms systemd
/// uses, read from the unit file): checked first by a probe that each
/// refuses what it should, then held by a real agent that boots, counts
/// every tap byte and restarts onto its own programs in it.
#[test]
fn an_agent_in_the_units_sandbox_with_only_its_capabilities_boots_and_counts() {
    lachesis_lab::require_root();
    let caps = unit_values("CapabilityBoundingSet").len();
    assert!(caps > 0);
    let (world, state, binary) = sandboxed_world();
    let (a, b, setup) = (&world.vms[0], &world.vms[1], &world.setup);
    let sandbox =
        Sandbox::for_unit(&repo().join(UNIT), state.path()).unwrap_or_else(|e| panic!("{e}"));
    probe_sandbox(&sandbox, setup, state.path());
    let start = |n: usize| Agent::spawn(&binary, &setup.config, setup.log(n), &[], Some(&sandbox));

    let mut agent = start(0);
    agent.wait_ready(setup.metrics);
    assert_confined(&agent, caps);
    let counted = |agent: &Agent| {
        assert_series_match(agent, setup.metrics, a, b, Duration::from_secs(20));
    };
    wait_for_sample(&agent, setup.metrics, "lachesis_attached_interfaces 2");
    traffic(a, b, 0);
    counted(&agent);
    agent.stop();

    // A restart (what `systemctl restart` and an upgrade do) must find the
    // first instance's programs on the taps and replace them, not add a
    // second pair that counts every byte twice.
    let mut agent = start(1);
    agent.wait_ready(setup.metrics);
    traffic(a, b, 1);
    counted(&agent);
    // Its presence check sees its own programs on both taps without
    // opening any by id (no CAP_SYS_ADMIN): were they not recognised, every
    // check would "heal" (re-attach) both taps.
    let presence_heals_nothing = |agent: &Agent| {
        wait_for_sample(agent, setup.metrics, "lachesis_attached_interfaces 2");
        wait_for_value(
            agent,
            setup.metrics,
            "lachesis_attach_presence_checks_total",
            |v| v >= 1.0,
        );
        assert_eq!(
            metric(setup.metrics, "lachesis_attach_heals_total"),
            Some(0.0)
        );
    };
    presence_heals_nothing(&agent);
    // A reload (`systemctl reload`, SIGHUP) in the sandbox re-reads the
    // configuration; the stop's final drain and state write are checked
    // by `stop` (exit 0).
    agent.signal(libc::SIGHUP);
    wait_for_sample(
        &agent,
        setup.metrics,
        "lachesis_config_reloads_total{result=\"ok\"} 1",
    );
    agent.stop();

    // cls_bpf filters (kernels before 6.6): a mode change removes the TCX
    // links (through their pins), and a restart finds the predecessor's
    // filters at this directory's handle and replaces them in place, though
    // it cannot open their programs to read which maps they count into.
    let text = std::fs::read_to_string(&setup.config).unwrap();
    assert!(text.contains("datapath:\n"), "{text}");
    std::fs::write(
        &setup.config,
        text.replacen("datapath:\n", "datapath:\n  attach_mode: tc\n", 1),
    )
    .unwrap();
    for n in 2..4 {
        let mut agent = start(n);
        agent.wait_ready(setup.metrics);
        traffic(a, b, u16::try_from(n).unwrap());
        counted(&agent);
        presence_heals_nothing(&agent);
        agent.stop();
    }
    let links = std::fs::read_dir(setup.bpffs.join("links")).map_or(0, Iterator::count);
    assert_eq!(links, 0, "TCX link pins left after the change to tc");
    for vm in [a, b] {
        for (hook, name) in [("ingress", "lachesis_tx"), ("egress", "lachesis_rx")] {
            let out = Command::new("tc")
                .args(["filter", "show", "dev", &vm.tap, hook])
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            let filters = text.matches(&format!("name {name} ")).count();
            assert_eq!(filters, 1, "{} {hook}: {text}", vm.tap);
        }
    }
}

/// A [`World`] whose agent files sit where the package puts them: not
/// under /tmp or /root, which the sandbox hides. The setup's directory
/// stands for /etc/lachesis and /usr/bin (read-only in the sandbox; the
/// binary is linked there), the returned one for the unit's
/// `StateDirectory` (/var/lib/lachesis), the state file in it.
fn sandboxed_world() -> (World, tempfile::TempDir, PathBuf) {
    let in_var_lib = |prefix: &str| {
        tempfile::Builder::new()
            .prefix(prefix)
            .tempdir_in("/var/lib")
            .unwrap()
    };
    let world = World::in_dir(&[], &[], in_var_lib("lachesis-sandbox-"));
    let setup = &world.setup;
    let state = in_var_lib("lachesis-state-");
    let text = std::fs::read_to_string(&setup.config).unwrap();
    let old = setup.dir.path().join("state.json");
    let old = old.to_str().unwrap();
    assert!(text.contains(old), "{text}");
    let new = state.path().join("state.json");
    std::fs::write(&setup.config, text.replace(old, new.to_str().unwrap())).unwrap();
    let binary = setup.dir.path().join("lachesis");
    if std::fs::hard_link(LACHESIS, &binary).is_err() {
        std::fs::copy(LACHESIS, &binary).unwrap();
    }
    (world, state, binary)
}

/// Runs [`PROBE`] in `sandbox`: each directive refuses what it should,
/// and a call outside the filter kills it.
fn probe_sandbox(sandbox: &Sandbox, setup: &Setup, state: &Path) {
    let marker = tempfile::Builder::new().tempfile_in("/tmp").unwrap();
    let mut probe = Command::new("python3");
    probe
        .args(["-c", PROBE])
        .arg(setup.dir.path())
        .arg(state)
        .arg(setup.bpffs.parent().unwrap())
        .arg(marker.path())
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin");
    sandbox.apply(&mut probe);
    let out = probe.output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(
        (out.status.signal(), stdout.trim()),
        (Some(libc::SIGSYS), "refused as the unit says"),
        "the probe in the sandbox: {}\n{stdout}{stderr}",
        out.status
    );
}

/// The agent really runs with `caps` capabilities and nothing more, no
/// new privileges, a seccomp filter and a read-only root.
fn assert_confined(agent: &Agent, caps: usize) {
    let pid = agent.child.id();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_else(|| panic!("{name} in {status}"))
            .trim()
            .to_owned()
    };
    let (bnd, eff) = (field("CapBnd:"), field("CapEff:"));
    assert_eq!(bnd, eff, "{status}");
    let held = u64::from_str_radix(&bnd, 16).unwrap().count_ones() as usize;
    assert_eq!(held, caps, "{status}");
    let confined = (field("NoNewPrivs:"), field("Seccomp:"));
    assert_eq!(confined, ("1".into(), "2".into()), "{status}");
    let mounts = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap();
    let root = mounts
        .lines()
        .find(|l| l.split(' ').nth(4) == Some("/"))
        .unwrap();
    let options = root.split(' ').nth(5).unwrap();
    assert!(options.split(',').any(|o| o == "ro"), "{root}");
}

/// The Kafka-protocol broker's loopback port (scripts/real-cloud).
const KAFKA_PORT: u16 = 19092;

/// An unbound VM (no Neutron port has its MAC): its bytes are the leak.
const MAC_STRAY: &str = "fa:16:3e:cc:00:03";

#[test]
fn a_real_prometheus_scraping_a_real_agent_evaluates_every_rule_panel_and_variable() {
    // Kafka notifications, so the node dashboard's notification panels
    // (connected, lag) have series.
    let _kafka = lachesis_lab::Services::kafka();
    let world = World::new(&[(MAC_STRAY, Ipv4Addr::new(10, 77, 0, 3))], &[KAFKA_PORT]);
    let (a, b, stray, setup) = (&world.vms[0], &world.vms[1], &world.vms[2], &world.setup);
    // The stray VM's rows wait one second for a binding, then go to
    // `unknown`.
    let text = std::fs::read_to_string(&setup.config).unwrap();
    let text =
        text.replace(
            "  ghost_grace: 1s\n",
            "  ghost_grace: 1s\n  unresolved_ttl: 1s\n",
        ) + &format!("notifications:\n  kafka:\n    brokers: [\"127.0.0.1:{KAFKA_PORT}\"]\n");
    assert!(text.contains("unresolved_ttl"));
    std::fs::write(&setup.config, text).unwrap();
    let mut agent = setup.start(0);
    agent.wait_ready(setup.metrics);
    let prometheus = Prometheus::start(setup.metrics);
    // The billing rules rate a series from zero only when its node was
    // already scraped before it appeared (two evaluations earlier): what a
    // series held when Prometheus first saw it is history, not rated
    // (docs/cloudkitty.md). No tap has counted a byte yet.
    prometheus.wait_for("up{job=\"lachesis\"} offset 2s == 1", |r| r.len() == 1);
    let before = get(setup.metrics, "/metrics").unwrap().1;
    assert!(
        live::samples(&before, "lachesis_server_bytes_total").is_empty(),
        "server-tier bytes before any traffic:\n{before}"
    );

    traffic(a, b, 0);
    traffic(a, stray, 1);
    // Internet-bound packets (zone `external`): A's default route points
    // at the stray VM, which drops them; the taps count them all the same.
    a.exec(&["ip", "route", "add", "default", "via", "10.77.0.3"])
        .unwrap();
    let _ = a.exec(&[
        "ping",
        "-q",
        "-c",
        "5",
        "-i",
        "0.01",
        "-W",
        "1",
        "198.51.100.7",
    ]);
    // The export settles (series show the last flush, the stray rows have
    // gone to `unknown`): two equal reads with a leak.
    let until = Instant::now() + Duration::from_secs(30);
    let mut body = get(setup.metrics, "/metrics").unwrap().1;
    loop {
        std::thread::sleep(Duration::from_secs(1));
        let now = get(setup.metrics, "/metrics").unwrap().1;
        let stable = live::samples(&now, "lachesis_bytes_total")
            == live::samples(&body, "lachesis_bytes_total");
        body = now;
        if stable && live::leak_ratio(&body).0 > 0.0 {
            break;
        }
        assert!(Instant::now() < until, "never settled with a leak:\n{body}");
    }

    // The leak ratio, computed by Prometheus' recording rule and from
    // /metrics, agree, and the stray VM makes it non-zero.
    let (leak, total) = live::leak_ratio(&body);
    assert!(
        leak > 0.0 && total > leak,
        "leak {leak} of {total}:\n{body}"
    );
    let want = leak / total;
    prometheus.wait_for("lachesis:leak_ratio:cumulative", |r| {
        r.len() == 1 && (value(&r[0]) - want).abs() < 1e-12
    });

    let rules =
        std::fs::read_to_string(repo().join("deploy/prometheus/lachesis-rules.yml")).unwrap();
    for record in rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- record: "))
    {
        prometheus.wait_for(record, |r| !r.is_empty());
    }
    // The fleet dashboard needs a relay: the fleet test holds it.
    Dashboards::Node.hold(&prometheus);

    live::check_cloudkitty(&prometheus, &body, TENANT_A);
    drop(prometheus);
    agent.stop();
}
