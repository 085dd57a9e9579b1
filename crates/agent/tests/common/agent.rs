//! The agent binary under test in a lab of network namespaces: its
//! per-run configuration, the child process, the lab's traffic and the
//! independent truth (tap counters) that /metrics must equal.

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use lachesis_lab::netns::{IfCounters, Lab, Vm, VmTraffic};

use super::Sim;

/// Tenant A's project id in [`topology`].
pub const TENANT_A: &str = "0b0000000000000000000000000000aa";
/// Tenant B's project id.
pub const TENANT_B: &str = "0b0000000000000000000000000000bb";
/// VM A's port MAC (at 10.77.0.1).
pub const MAC_A: &str = "fa:16:3e:aa:00:01";
/// VM B's port MAC (at 10.77.0.2).
pub const MAC_B: &str = "fa:16:3e:bb:00:02";

/// The simulator's settings, the admin user, the admin project and both
/// tenants' projects.
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

/// Two tenants, one shared network in the lab's /24, one VM port each.
pub fn topology() -> String {
    topology_head()
        + &format!(
            r#"networks:
  - {{id: net-lab, name: lab, project_id: 0a000000000000000000000000000001, shared: true}}
subnets:
  - {{id: sub-lab, network_id: net-lab, project_id: 0a000000000000000000000000000001, cidr: 10.77.0.0/24, gateway_ip: null}}
ports:
  - {{id: p-a, network_id: net-lab, project_id: {TENANT_A}, mac_address: "{MAC_A}", device_id: vm-a, device_owner: compute:nova, fixed_ips: [{{subnet_id: sub-lab, ip_address: 10.77.0.1}}]}}
  - {{id: p-b, network_id: net-lab, project_id: {TENANT_B}, mac_address: "{MAC_B}", device_id: vm-b, device_owner: compute:nova, fixed_ips: [{{subnet_id: sub-lab, ip_address: 10.77.0.2}}]}}
servers:
  - {{id: vm-a, name: a-web, tenant_id: {TENANT_A}}}
  - {{id: vm-b, name: b-app, tenant_id: {TENANT_B}}}
"#
        )
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Everything one agent instance needs, all names unique to this run.
pub struct Setup {
    pub dir: tempfile::TempDir,
    pub config: PathBuf,
    pub metrics: SocketAddr,
    pub debug: SocketAddr,
    pub bpffs: PathBuf,
}

impl Setup {
    /// The agent configured for the simulator's `sim` cloud.
    pub fn new(lab: &Lab, sim: &Sim) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let clouds = sim.clouds_yaml(dir.path(), |t| t);
        Setup::in_dir(dir, lab, &clouds, "sim")
    }

    /// The agent configured for `cloud` of the clouds.yaml `clouds`, with
    /// its files in `dir`.
    pub fn in_dir(dir: tempfile::TempDir, lab: &Lab, clouds: &Path, cloud: &str) -> Setup {
        let metrics = SocketAddr::from((Ipv4Addr::LOCALHOST, free_port()));
        let debug = SocketAddr::from((Ipv4Addr::LOCALHOST, free_port()));
        let bpffs = PathBuf::from(format!(
            "/sys/fs/bpf/lachesis-e2e-{}-{}",
            std::process::id(),
            lab.id()
        ));
        // The lab's own taps by prefix; taps named otherwise (after their
        // ports, as Nova names them) by exact name.
        let prefix = format!("tap{}v", lab.id());
        let exact: Vec<&str> = lab
            .vms()
            .iter()
            .map(|vm| vm.tap.as_str())
            .filter(|tap| !tap.starts_with(&prefix))
            .collect();
        let text = format!(
            "openstack:\n  cloud: {cloud}\n  clouds_file: {clouds}\n\
             listen:\n  metrics: {metrics}\n  debug: {debug}\n\
             datapath:\n  interface_prefixes: [{prefix}]\n  interfaces: [{exact}]\n  bpffs_dir: {bpffs}\n  flows_memory_budget: 4MiB\n\
             state:\n  path: {state}\n\
             tunables:\n  scrape_interval: 200ms\n  state_flush_interval: 300ms\n  reconcile_interval: 5m\n  ghost_grace: 1s\n  ghost_sweep_interval: 500ms\n",
            clouds = clouds.display(),
            exact = exact.join(", "),
            bpffs = bpffs.display(),
            state = dir.path().join("state.json").display(),
        );
        let config = dir.path().join("lachesis.yaml");
        std::fs::write(&config, text).unwrap();
        Setup {
            dir,
            config,
            metrics,
            debug,
            bpffs,
        }
    }

    pub fn log(&self, n: usize) -> PathBuf {
        self.dir.path().join(format!("agent-{n}.log"))
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        // Only this run's pins (the agent leaves `flows` pinned by design).
        let _ = std::fs::remove_dir_all(&self.bpffs);
    }
}

/// The agent as a child process; killed on drop if still running.
pub struct Agent {
    pub child: Child,
    pub log: PathBuf,
}

impl Agent {
    pub fn start(setup: &Setup, n: usize) -> Agent {
        Agent::start_under(setup, n, &[])
    }

    /// The agent on `config`, its stderr in `log`.
    pub fn start_config(config: &Path, log: PathBuf) -> Agent {
        Agent::spawn(config, log, &[])
    }

    /// [`Agent::start`] through `wrapper` (a program and its arguments that
    /// execs the rest, e.g. `setpriv …`); none when empty.
    pub fn start_under(setup: &Setup, n: usize, wrapper: &[&str]) -> Agent {
        Agent::spawn(&setup.config, setup.log(n), wrapper)
    }

    /// [`Agent::start`] with `env` added to its environment.
    pub fn start_with_env(setup: &Setup, n: usize, env: &[(&str, &str)]) -> Agent {
        Agent::spawn_env(&setup.config, setup.log(n), &[], env)
    }

    fn spawn(config: &Path, log: PathBuf, wrapper: &[&str]) -> Agent {
        Agent::spawn_env(config, log, wrapper, &[])
    }

    fn spawn_env(config: &Path, log: PathBuf, wrapper: &[&str], env: &[(&str, &str)]) -> Agent {
        let binary = env!("CARGO_BIN_EXE_lachesis");
        let mut cmd = match wrapper.split_first() {
            None => Command::new(binary),
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg(binary);
                c
            }
        };
        for (key, _) in std::env::vars() {
            // Nor systemd's notification socket, were the tests run under
            // systemd: the agent would report to the test runner's unit.
            if key.starts_with("OS_")
                || key.starts_with("LACHESIS_")
                || key == "RUST_LOG"
                || key == "NOTIFY_SOCKET"
                || key.starts_with("WATCHDOG_")
            {
                cmd.env_remove(key);
            }
        }
        let child = cmd
            .envs(env.iter().copied())
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

/// A tap's counters from this thread's namespace (`/proc/thread-self`;
/// sysfs shows the namespace it was mounted in).
pub fn counters(vm: &Vm) -> IfCounters {
    IfCounters::read_here(&vm.tap).unwrap_or_else(|e| panic!("{e}"))
}

/// Bytes and packets per direction of one VM, as the VM sees them.
pub type Totals = VmTraffic;

/// `lachesis_tenant_{bytes,packets}_total` summed per direction and the
/// values of `labels` (joined by `/`).
pub fn totals_by(body: &str, labels: &[&str]) -> BTreeMap<String, Totals> {
    let mut out: BTreeMap<String, Totals> = BTreeMap::new();
    for line in body.lines() {
        let (family, rest) = match line.split_once('{') {
            Some((f, r))
                if f == "lachesis_tenant_bytes_total" || f == "lachesis_tenant_packets_total" =>
            {
                (f, r)
            }
            _ => continue,
        };
        let (series, value) = rest.rsplit_once("} ").unwrap();
        let value: u64 = value.trim().parse().unwrap();
        let label = |name: &str| {
            series
                .split(',')
                .find_map(|kv| kv.strip_prefix(&format!("{name}=\"")))
                .map(|v| v.trim_end_matches('"').to_owned())
                .unwrap()
        };
        let key: Vec<String> = labels.iter().map(|l| label(l)).collect();
        let t = out.entry(key.join("/")).or_default();
        match (family, label("direction").as_str()) {
            ("lachesis_tenant_bytes_total", "tx") => t.tx_bytes += value,
            ("lachesis_tenant_bytes_total", "rx") => t.rx_bytes += value,
            ("lachesis_tenant_packets_total", "tx") => t.tx_packets += value,
            ("lachesis_tenant_packets_total", "rx") => t.rx_packets += value,
            other => panic!("unexpected series {other:?}"),
        }
    }
    out
}

/// Pings and a TCP exchange of known sizes, both directions.
pub fn traffic(a: &Vm, b: &Vm, round: u16) {
    a.exec(&[
        "ping",
        "-q",
        "-c",
        "5",
        "-i",
        "0.01",
        "-s",
        "1000",
        &b.ip.to_string(),
    ])
    .unwrap();
    b.exec(&["ping", "-q", "-c", "3", "-i", "0.01", &a.ip.to_string()])
        .unwrap();
    let addr = SocketAddr::from((b.ip, 41000 + round));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let server = b.run(move || {
        let l = TcpListener::bind(addr).unwrap();
        ready_tx.send(()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        let mut data = Vec::new();
        s.read_to_end(&mut data).unwrap();
        s.write_all(&vec![7u8; 128 * 1024]).unwrap();
        data.len()
    });
    ready_rx.recv().unwrap();
    let client = a.run(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(&vec![9u8; 512 * 1024]).unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let mut back = Vec::new();
        s.read_to_end(&mut back).unwrap();
        back.len()
    });
    assert_eq!(client.join().unwrap(), 128 * 1024);
    assert_eq!(server.join().unwrap(), 512 * 1024);
    wait_quiet(&[a, b]);
}

/// Returns once the taps' counters stopped moving (three still polls).
pub fn wait_quiet(vms: &[&Vm]) {
    let mut last: Vec<IfCounters> = vms.iter().map(|v| counters(v)).collect();
    let mut still = 0;
    for _ in 0..200 {
        std::thread::sleep(Duration::from_millis(50));
        let now: Vec<IfCounters> = vms.iter().map(|v| counters(v)).collect();
        still = if now == last { still + 1 } else { 0 };
        if still == 3 {
            return;
        }
        last = now;
    }
    panic!("interface counters never stopped moving");
}

/// An `unknown` tenant series holding no byte and no packet.
pub fn empty_unknown(key: &str, totals: &Totals) -> bool {
    key.starts_with("unknown") && *totals == Totals::default()
}

/// Polls /metrics until the tenant series, summed by `labels` (see
/// [`totals_by`]) less those `ignore` drops, equal `want()` (read afresh
/// at each poll); fails with both sides after `limit`.
pub fn assert_tenants(
    agent: &Agent,
    metrics: SocketAddr,
    limit: Duration,
    ignore: fn(&str, &Totals) -> bool,
    labels: &[&str],
    want: impl Fn() -> BTreeMap<String, Totals>,
) {
    let until = Instant::now() + limit;
    loop {
        let want = want();
        let mut got = get(metrics, "/metrics").map(|(_, body)| totals_by(&body, labels));
        if let Some(g) = got.as_mut() {
            g.retain(|k, v| !ignore(k, v));
        }
        if got.as_ref() == Some(&want) {
            return;
        }
        assert!(
            Instant::now() < until,
            "tenant series never equalled the tap counters:\n got {got:?}\nwant {want:?}\nlog:\n{}",
            agent.log_text()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Polls /metrics until it holds the line `sample` (value included).
pub fn wait_for_sample(agent: &Agent, metrics: SocketAddr, sample: &str) {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let body = get(metrics, "/metrics").map(|(_, b)| b).unwrap_or_default();
        if body.lines().any(|l| l == sample) {
            return;
        }
        assert!(
            Instant::now() < until,
            "never saw {sample:?} on /metrics:\n{body}\nlog:\n{}",
            agent.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
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

/// Polls [`sample`] until `ok` holds for its value, which it returns.
pub fn wait_for_value(
    agent: &Agent,
    metrics: SocketAddr,
    series: &str,
    ok: impl Fn(f64) -> bool,
) -> f64 {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let value = sample(metrics, series);
        if let Some(v) = value.filter(|v| ok(*v)) {
            return v;
        }
        assert!(
            Instant::now() < until,
            "{series} never reached the expected value (last {value:?}); log:\n{}",
            agent.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Every sample of the ledger's byte and packet counters (all four
/// levels), by series.
pub fn counter_series(metrics: SocketAddr) -> BTreeMap<String, u64> {
    let (_, body) = get(metrics, "/metrics").unwrap();
    let out: BTreeMap<String, u64> = body
        .lines()
        .filter(|l| {
            let family = l.split('{').next().unwrap_or("");
            ["bytes_total", "packets_total"]
                .iter()
                .any(|f| family.starts_with("lachesis_") && family.ends_with(f))
        })
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').unwrap();
            (series.to_owned(), value.parse().unwrap())
        })
        .collect();
    assert!(
        out.keys()
            .any(|k| k.starts_with("lachesis_port_bytes_total{")),
        "{body}"
    );
    out
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

/// Polls `done` for up to 20 s; fails naming `what`.
pub fn wait_until(agent: &Agent, what: &str, done: impl Fn() -> bool) {
    let until = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(
            Instant::now() < until,
            "never: {what}; log:\n{}",
            agent.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// SIGTERM, then exit status 0.
pub fn stop(mut agent: Agent) -> Agent {
    agent.signal(libc::SIGTERM);
    let status = agent.wait(Duration::from_secs(20));
    assert_eq!(status.code(), Some(0), "log:\n{}", agent.log_text());
    agent
}

/// The daemon's own families in an OpenMetrics body must render as
/// docs/metrics.md documents them.
pub fn assert_own_families_documented(metrics: SocketAddr) {
    let ours = [
        "lachesis_boot_phase",
        "lachesis_degraded",
        "lachesis_config_reloads",
        "lachesis_build",
        "lachesis_build_info",
    ];
    let family_of = |l: &str| -> String {
        let l = ["# TYPE ", "# HELP "]
            .iter()
            .find_map(|p| l.strip_prefix(p))
            .unwrap_or(l);
        let name = l.split([' ', '{']).next().unwrap_or("");
        name.strip_suffix("_total").unwrap_or(name).to_owned()
    };
    let (_, body) = get_as(metrics, "/metrics", "application/openmetrics-text").unwrap();
    let own: String = body
        .lines()
        .filter(|l| ours.contains(&family_of(l).as_str()))
        .flat_map(|l| [l, "\n"])
        .collect();
    let rendered = lachesis_lab::catalogue::rendered(&own, "agent");
    let documented = lachesis_lab::catalogue::documented();
    for name in [
        "lachesis_boot_phase",
        "lachesis_degraded",
        "lachesis_config_reloads_total",
        "lachesis_build_info",
    ] {
        assert_eq!(rendered.get(name), documented.get(name), "{name}");
    }
}

/// Forwards a loopback port of the test's network namespace to the same
/// port in the namespace the forwarder was started in (where a service of
/// the host listens: a broker, Keystone, Neutron). Connections made while
/// the service is down are accepted and closed.
pub struct Forwarder {
    listener: std::sync::mpsc::Sender<TcpListener>,
    port: u16,
}

impl Forwarder {
    /// Call before [`isolate`]: the thread stays in this namespace.
    pub fn start(port: u16) -> Forwarder {
        let (tx, rx) = std::sync::mpsc::channel::<TcpListener>();
        std::thread::spawn(move || {
            let Ok(listener) = rx.recv() else { return };
            for inbound in listener.incoming() {
                let Ok(inbound) = inbound else { continue };
                let Ok(outbound) = TcpStream::connect((Ipv4Addr::LOCALHOST, port)) else {
                    let _ = inbound.shutdown(std::net::Shutdown::Both);
                    continue;
                };
                pipe(&inbound, &outbound);
                pipe(&outbound, &inbound);
            }
        });
        Forwarder { listener: tx, port }
    }

    /// Call after [`isolate`]: listens on the port in the new namespace.
    pub fn listen(&self) {
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, self.port)).unwrap_or_else(|e| {
            panic!(
                "forwarding port {} into the test's namespace: {e}",
                self.port
            )
        });
        self.listener.send(l).unwrap();
    }
}

/// Copies `from` into `to` on a thread until either side closes.
fn pipe(from: &TcpStream, to: &TcpStream) {
    let (mut from, mut to) = (from.try_clone().unwrap(), to.try_clone().unwrap());
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut from, &mut to);
        let _ = to.shutdown(std::net::Shutdown::Write);
        let _ = from.shutdown(std::net::Shutdown::Read);
    });
}
