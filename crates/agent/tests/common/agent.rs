//! The agent binary under test in a lab of network namespaces: its
//! per-run configuration, the lab's traffic and the independent truth
//! (tap counters) that /metrics must equal. The process, its typed
//! configuration, HTTP and the metrics reader are the lab crate's.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use lachesis_lab::agent::{metric, Agent, AgentConfig, Tunables};
use lachesis_lab::cpu;
use lachesis_lab::exposition::{self, Series};
use lachesis_lab::http::{get, get_as};
use lachesis_lab::netns::{Lab, Vm, VmTraffic};
use lachesis_lab::traffic::{counters, Exchange};

use super::{Sim, LACHESIS};

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
        let bpffs = PathBuf::from(format!(
            "/sys/fs/bpf/lachesis-e2e-{}-{}",
            std::process::id(),
            lab.id()
        ));
        let mut settings = AgentConfig::new(cloud, clouds, &bpffs, &dir.path().join("state.json"));
        // The lab's own taps by prefix; taps named otherwise (after their
        // ports, as Nova names them) by exact name.
        let prefix = format!("tap{}v", lab.id());
        settings.interfaces = Some(
            lab.vms()
                .iter()
                .map(|vm| vm.tap.clone())
                .filter(|tap| !tap.starts_with(&prefix))
                .collect(),
        );
        settings.interface_prefixes = vec![prefix];
        settings.flows_memory_budget_mib = Some(4);
        settings.tunables = Tunables::fast();
        let config = dir.path().join("lachesis.yaml");
        settings.write(&config);
        Setup {
            dir,
            config,
            metrics: settings.metrics,
            debug: settings.debug,
            bpffs,
        }
    }

    /// Agent instance `n` on this configuration, its log `agent-N.log`.
    pub fn start(&self, n: usize) -> Agent {
        Agent::start(Path::new(LACHESIS), &self.config, self.log(n))
    }

    /// [`Setup::start`] with `env` added to its environment.
    pub fn start_with_env(&self, n: usize, env: &[(&str, &str)]) -> Agent {
        Agent::spawn(Path::new(LACHESIS), &self.config, self.log(n), env, None)
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

/// Bytes and packets per direction of one VM, as the VM sees them.
pub type Totals = VmTraffic;

/// `lachesis_tenant_{bytes,packets}_total` summed per direction and the
/// values of `labels` (joined by `/`).
pub fn totals_by(body: &str, labels: &[&str]) -> BTreeMap<String, Totals> {
    let mut out: BTreeMap<String, Totals> = BTreeMap::new();
    for sample in exposition::parse(body).samples() {
        let family = sample.name.as_str();
        if family != "lachesis_tenant_bytes_total" && family != "lachesis_tenant_packets_total" {
            continue;
        }
        let value = sample.count();
        let label = |name: &str| sample.label(name).unwrap().to_owned();
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

/// Pings and a TCP exchange of known sizes, both directions, sent once
/// from each of two CPUs (the senders pinned: each flow is then counted in
/// two `flows` sub-entries, DESIGN §4.7); returns once the taps are quiet.
pub fn traffic(a: &Vm, b: &Vm, round: u16) {
    let cpus = cpu::cpus();
    assert!(cpus.len() >= 2, "the test needs two CPUs, has {cpus:?}");
    for (i, c) in cpus[..2].iter().enumerate() {
        let port = 41000 + round + 100 * u16::try_from(i).unwrap();
        cpu::on_cpu(*c, || {
            Exchange::between(a, b)
                .ping(5, 1000)
                .ping_back(3, 56)
                .tcp(port, 512 * 1024, 128 * 1024)
                .run();
        });
    }
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

/// Polls /metrics until both tenants' series equal their taps' counters
/// (tenant A's on `a`, tenant B's on `b`; series show the last flush); fails with both sides after `limit`.
pub fn assert_series_match(agent: &Agent, metrics: SocketAddr, a: &Vm, b: &Vm, limit: Duration) {
    assert_series_match_with(agent, metrics, a, b, limit, false);
}

/// [`assert_series_match`]; `zero_unknown`: an `unknown` tenant holding
/// no byte and no packet is tolerated (the ghost sweep's final readings
/// create one; see the sweep test).
pub fn assert_series_match_with(
    agent: &Agent,
    metrics: SocketAddr,
    a: &Vm,
    b: &Vm,
    limit: Duration,
    zero_unknown: bool,
) {
    let ignore = if zero_unknown {
        empty_unknown
    } else {
        |_: &str, _: &Totals| false
    };
    assert_tenants(agent, metrics, limit, ignore, &["tenant_id"], || {
        BTreeMap::from([
            (TENANT_A.to_owned(), Totals::from_tap(counters(a))),
            (TENANT_B.to_owned(), Totals::from_tap(counters(b))),
        ])
    });
}

/// Polls /metrics until it holds the sample `sample` (a line: series and
/// value as rendered).
pub fn wait_for_sample(agent: &Agent, metrics: SocketAddr, sample: &str) {
    let (series, value) = sample.rsplit_once(' ').expect("`series value`");
    let series: Series = series.parse().unwrap_or_else(|e| panic!("{e}"));
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let body = get(metrics, "/metrics").map(|(_, b)| b).unwrap_or_default();
        if exposition::parse(&body)
            .samples()
            .any(|s| s.is(&series) && s.text == value)
        {
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

/// Polls [`metric`] until `ok` holds for its value, which it returns.
pub fn wait_for_value(
    agent: &Agent,
    metrics: SocketAddr,
    series: &str,
    ok: impl Fn(f64) -> bool,
) -> f64 {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let value = metric(metrics, series);
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
    let out: BTreeMap<String, u64> = exposition::parse(&body)
        .samples()
        .filter(|s| {
            ["bytes_total", "packets_total"]
                .iter()
                .any(|f| s.name.starts_with("lachesis_") && s.name.ends_with(f))
        })
        .map(|s| (s.series(), s.count()))
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

/// The id of the `endpoints` map the programs pinned under `bpffs` use.
pub fn endpoints_map(bpffs: &std::path::Path) -> String {
    let link = pinned_links(bpffs)[0];
    let link = bpftool(&["link", "show", "id", &link.to_string()]).unwrap();
    let prog = link["prog_id"].as_u64().unwrap().to_string();
    let prog = bpftool(&["prog", "show", "id", &prog]).unwrap();
    prog["map_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_u64().unwrap().to_string())
        .find(|id| bpftool(&["map", "show", "id", id]).unwrap()["name"] == "endpoints")
        .expect("an endpoints map")
}

/// The `endpoints` key of one `bpftool -j map dump` entry: the MAC as a
/// number, shown as such when the map has BTF, else as its eight bytes in
/// host (little-endian) order.
fn key_of(entry: &serde_json::Value) -> Option<u64> {
    let key = entry.get("formatted").map_or(&entry["key"], |f| &f["key"]);
    if let Some(n) = key.as_u64() {
        return Some(n);
    }
    let bytes: Vec<u8> = key
        .as_array()?
        .iter()
        .map(|b| u8::from_str_radix(b.as_str()?.trim_start_matches("0x"), 16).ok())
        .collect::<Option<_>>()?;
    Some(u64::from_le_bytes(bytes.try_into().ok()?))
}

/// Whether the `endpoints` map `map` (an id) has an entry keyed by `mac`.
pub fn has_mac(map: &str, mac: &str) -> bool {
    let want = mac
        .split(':')
        .fold(0u64, |k, b| k << 8 | u64::from_str_radix(b, 16).unwrap());
    let dump = bpftool(&["map", "dump", "id", map]).unwrap();
    let entries = dump.as_array().unwrap();
    let keys: Vec<Option<u64>> = entries.iter().map(key_of).collect();
    assert!(keys.iter().all(Option::is_some), "unreadable keys: {dump}");
    keys.contains(&Some(want))
}
