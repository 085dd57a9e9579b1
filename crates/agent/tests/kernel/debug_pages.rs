//! The debug pages in a real browser (root; docs/agent-http.md, "The
//! browser test"): the simulator serves `tests/fixtures/debug-pages.yaml`,
//! a real agent syncs it and meters tenant A's two VMs (network
//! namespaces behind taps named as Nova names them), and Debian's
//! `chromium` loads every page headless from inside the test's own
//! network namespace (the agent's debug listener is on that namespace's
//! loopback). What a page shows is held against independent truth: the
//! fixture itself, the agent's `/metrics`, the taps' own counters.
//!
//! Console errors: Chromium's log (`--enable-logging=stderr --v=0`) carries
//! one line tagged `CONSOLE` per console message of a page — `console.*`,
//! uncaught exceptions, Content-Security-Policy refusals. The pages have no
//! script and forbid every load, so any such line fails the test; a page
//! logging on purpose proves first that such lines are seen.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::agent::{traffic, wait_until, Setup, Totals};
use common::{repo, Sim};
use lachesis_agent::links::tap_name;
use lachesis_lab::agent::Agent;
use lachesis_lab::exposition;
use lachesis_lab::http::get;
use lachesis_lab::netns::{isolate, Lab, Vm};
use lachesis_lab::page::{number, numbers, row};
use lachesis_lab::traffic::counters;

const FIXTURE: &str = "crates/agent/tests/fixtures/debug-pages.yaml";
/// What `lachesis demo` serves.
const DEMO_TOPOLOGY: &str = "examples/demo-topology.yaml";
/// Tenant A's VM a-web (10.1.0.5).
const VM_A: &str = "fa:16:3e:a1:00:01";
/// Router A's interface on tenant A's network: a-web's next hop.
const ROUTER_A: &str = "fa:16:3e:00:0a:02";
const TENANT_A: &str = "0b0000000000000000000000000000aa";
/// Tenant A's VMs a-web and a-db: their ports, MACs and addresses.
const PORT_A1: &str = "p-vm-a1";
const PORT_A2: &str = "p-vm-a2";
const VM_A2: &str = "fa:16:3e:a1:00:02";
/// A VM no port describes, behind a tap of the lab's own prefix.
const STRAY: &str = "02:00:00:00:99:01";
/// The longest a page may take to load or be photographed.
const BROWSER_LIMIT: Duration = Duration::from_mins(1);

/// Where the screenshots and Chromium's logs go: `target/test-output/debug-pages`.
fn output_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target directory")
        .join("test-output/debug-pages")
}

/// Debian's Chromium, run headless as root with a throwaway profile.
struct Chromium {
    binary: PathBuf,
    profile: tempfile::TempDir,
    logs: PathBuf,
    runs: usize,
}

impl Chromium {
    /// Fails, never skips, when the package is missing.
    fn find(logs: PathBuf) -> Chromium {
        let binary = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.exists())
            .unwrap_or_else(|| {
                panic!(
                    "chromium is not installed: run scripts/setup-operator as root \
                     (it installs Debian's chromium package)"
                )
            });
        Chromium {
            binary,
            profile: tempfile::tempdir().unwrap(),
            logs,
            runs: 0,
        }
    }

    /// Runs Chromium on `url` with `extra` flags; its stdout and log.
    fn run(&mut self, extra: &[&str], url: &str) -> (String, String) {
        self.runs += 1;
        let out_path = self.logs.join(format!("run-{:02}.out", self.runs));
        let log_path = self.logs.join(format!("run-{:02}.log", self.runs));
        let mut child = Command::new(&self.binary)
            .args([
                "--headless=new",
                // Root cannot use Chromium's sandbox.
                "--no-sandbox",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-gpu",
                "--disable-background-networking",
                "--enable-logging=stderr",
                "--v=0",
            ])
            .arg(format!("--user-data-dir={}", self.profile.path().display()))
            .args(extra)
            .arg(url)
            .stdin(Stdio::null())
            .stdout(File::create(&out_path).unwrap())
            .stderr(File::create(&log_path).unwrap())
            // Its own process group: a hung browser is ended whole.
            .process_group(0)
            .spawn()
            .expect("start chromium");
        let status = wait_or_kill(&mut child, BROWSER_LIMIT, url);
        let out = std::fs::read_to_string(&out_path).unwrap_or_default();
        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
        assert!(
            status.success(),
            "chromium {extra:?} {url}: {status}\n{log}"
        );
        (out, log)
    }

    /// The page's DOM after load; fails on any console message.
    fn dom(&mut self, url: &str) -> String {
        let (dom, log) = self.run(&["--dump-dom"], url);
        let console = console_lines(&log);
        assert!(
            console.is_empty(),
            "{url} logged to the console:\n{}",
            console.join("\n")
        );
        assert!(dom.contains("</html>"), "{url}: no document in\n{dom}");
        dom
    }

    /// A screenshot of `url` at `width`×`height`; fails on any console
    /// message.
    fn screenshot(&mut self, url: &str, path: &Path, width: u32, height: u32) {
        let (_, log) = self.run(
            &[
                &format!("--screenshot={}", path.display()),
                &format!("--window-size={width},{height}"),
                "--hide-scrollbars",
            ],
            url,
        );
        let console = console_lines(&log);
        assert!(
            console.is_empty(),
            "{url} logged to the console:\n{}",
            console.join("\n")
        );
        let png = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}\n{log}", path.display()));
        assert!(
            png.starts_with(b"\x89PNG\r\n\x1a\n"),
            "{} is not a PNG",
            path.display()
        );
        assert!(png.len() > 10_000, "{} is nearly empty", path.display());
    }
}

fn wait_or_kill(child: &mut std::process::Child, limit: Duration, what: &str) -> ExitStatus {
    let until = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > until {
            let group = i32::try_from(child.id()).unwrap();
            // SAFETY: signals the process group of our own child.
            unsafe { libc::kill(-group, libc::SIGKILL) };
            let _ = child.wait();
            panic!("chromium did not finish {what} within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Chromium's log lines that report a console message of the page.
fn console_lines(log: &str) -> Vec<&str> {
    log.lines().filter(|l| l.contains(":CONSOLE")).collect()
}

/// The ids of the fixture's `kind` (`networks`, `routers`, …), read from
/// the YAML itself: the truth the drawing is held against.
fn fixture_ids(kind: &str) -> BTreeSet<String> {
    yaml_ids(FIXTURE, kind)
}

/// The ids of `kind` in the simulator topology at `path` (repo-relative).
fn yaml_ids(path: &str, kind: &str) -> BTreeSet<String> {
    let text = std::fs::read_to_string(repo().join(path)).unwrap();
    let doc: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
    doc[kind]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap().to_owned())
        .collect()
}

/// The `data-id`s of the SVG nodes of `kind` in a DOM.
fn node_ids(dom: &str, kind: &str) -> Vec<String> {
    let marker = format!("data-kind=\"{kind}\" data-id=\"");
    dom.match_indices(&marker)
        .map(|(i, _)| {
            let rest = &dom[i + marker.len()..];
            rest[..rest.find('"').unwrap()].to_owned()
        })
        .collect()
}

/// The lookup page's verdict box.
fn verdict(dom: &str) -> &str {
    let start = dom.find("id=\"verdict\"").expect("a verdict");
    let end = start + dom[start..].find("</div>").unwrap();
    &dom[start..end]
}

/// `lachesis_port_{bytes,packets}_total` of `/metrics` summed per port and
/// direction: what the node page must show beside each tap.
fn port_totals(metrics: SocketAddr) -> BTreeMap<String, Totals> {
    let (_, body) = get(metrics, "/metrics").unwrap();
    let mut out: BTreeMap<String, Totals> = BTreeMap::new();
    for sample in exposition::parse(&body).samples() {
        let family = sample.name.as_str();
        if family != "lachesis_port_bytes_total" && family != "lachesis_port_packets_total" {
            continue;
        }
        let value = sample.count();
        let t = out
            .entry(sample.label("port_id").unwrap().to_owned())
            .or_default();
        match (family, sample.label("direction").unwrap()) {
            ("lachesis_port_bytes_total", "tx") => t.tx_bytes += value,
            ("lachesis_port_bytes_total", "rx") => t.rx_bytes += value,
            ("lachesis_port_packets_total", "tx") => t.tx_packets += value,
            (_, _) => t.rx_packets += value,
        }
    }
    out
}

/// The agent's debug listener, as the browser reaches it.
struct Pages {
    debug: SocketAddr,
    metrics: SocketAddr,
}

impl Pages {
    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.debug)
    }

    /// Every page answers 200, loads in the browser with nothing on the
    /// console, and holds no script element.
    fn all_load(&self, chromium: &mut Chromium) {
        let pages = [
            ("/debug/ui/".to_owned(), "Index"),
            ("/debug/ui/plan".to_owned(), "Plan"),
            (format!("/debug/ui/plan?tenant={TENANT_A}"), "Plan"),
            (format!("/debug/ui/plan?mac={VM_A}"), "Plan"),
            ("/debug/ui/plan?address=10.2.0.5".to_owned(), "Plan"),
            ("/debug/ui/anomalies".to_owned(), "Anomalies"),
            ("/debug/ui/lookup".to_owned(), "Lookup"),
            ("/debug/ui/topology".to_owned(), "Topology"),
            ("/debug/ui/topology?tenant=*".to_owned(), "Topology"),
            (format!("/debug/ui/topology?tenant={TENANT_A}"), "Topology"),
            ("/debug/ui/node".to_owned(), "This node"),
            ("/debug/ui/flows".to_owned(), "Flows"),
            ("/debug/ui/flows?limit=2".to_owned(), "Flows"),
            // A person typing /debug/ lands on the index.
            ("/debug/".to_owned(), "Index"),
        ];
        for (path, title) in pages {
            if path != "/debug/" {
                let (code, _) = get(self.debug, &path).unwrap();
                assert_eq!(code, 200, "{path}");
            }
            let dom = chromium.dom(&self.url(&path));
            assert!(dom.contains(&format!("<h1>{title}</h1>")), "{path}");
            assert!(!dom.contains("<script"), "{path}: a script element");
            assert_eq!(dom.matches("<div id=\"health\"").count(), 1, "{path}");
        }
    }

    /// The health strip against the agent's own families: running, not
    /// degraded, the build of `lachesis_build_info`; and the log level
    /// `GET /debug/log-level` reports.
    fn health(&self, chromium: &mut Chromium) {
        let dom = chromium.dom(&self.url("/debug/ui/"));
        let start = dom.find("<div id=\"health\"").unwrap();
        let strip = &dom[start..start + dom[start..].find("</div>").unwrap()];
        let (_, metrics) = get(self.metrics, "/metrics").unwrap();
        assert!(metrics.contains("\nlachesis_boot_phase{phase=\"running\"} 1\n"));
        assert!(metrics.contains("\nlachesis_degraded 0\n"));
        assert!(
            strip.contains("data-phase=\"running\" data-degraded=\"false\""),
            "{strip}"
        );
        let exposition = exposition::parse(&metrics);
        let build = exposition
            .named("lachesis_build_info")
            .next()
            .expect("lachesis_build_info");
        let (version, revision) = (
            build.label("version").unwrap(),
            build.label("revision").unwrap(),
        );
        assert!(
            strip.contains(&format!("<b>{version}</b> <code>{revision}</code>")),
            "{build:?} in {strip}"
        );
        assert!(
            strip.contains("<span class=\"k\">last sync</span> <b title="),
            "{strip}"
        );
        let (code, level) = get(self.debug, "/debug/log-level").unwrap();
        assert_eq!((code, level.as_str()), (200, "log level is info\n"));
    }

    /// One row per tap of the lab, each with the port Nova's name gives
    /// it, tenant A and the server, attached; the bytes of each port equal
    /// `/metrics` and the tap's own counters; the stray tap names no port.
    fn node(&self, chromium: &mut Chromium, vms: &[(&str, &Vm)], stray: &Vm) {
        let dom = chromium.dom(&self.url("/debug/ui/node"));
        let metrics = port_totals(self.metrics);
        for (port, vm) in vms {
            let r = row(&dom, "data-tap", &vm.tap);
            assert!(r.contains(&format!("data-port=\"{port}\"")), "{r}");
            assert!(
                r.contains(&format!("tenant-a<br><code class=\"id\">{TENANT_A}</code>")),
                "{r}"
            );
            assert!(r.contains("data-state=\"attached\""), "{r}");
            assert_eq!(number(r, "data-heals"), 0, "{r}");
            let shown = (number(r, "data-tx-bytes"), number(r, "data-rx-bytes"));
            let exported = &metrics[*port];
            let kernel = Totals::from_tap(counters(vm));
            assert_eq!(
                shown,
                (exported.tx_bytes, exported.rx_bytes),
                "{port}: the page and /metrics"
            );
            assert_eq!(
                shown,
                (kernel.tx_bytes, kernel.rx_bytes),
                "{port}: the page and the tap"
            );
            // 512 KiB one way and 128 KiB back, and the pings.
            assert!(shown.0 + shown.1 > 640 * 1024, "{port}: {shown:?}");
        }
        assert!(row(&dom, "data-tap", &vms[0].1.tap).contains("a-web<br>"));
        assert!(row(&dom, "data-tap", &vms[1].1.tap).contains("a-db<br>"));
        let r = row(&dom, "data-tap", &stray.tap);
        assert!(!r.contains("data-port="), "{r}");
        assert!(
            r.contains("no port of the plan is named by this tap"),
            "{r}"
        );
        assert!(r.contains("data-state=\"attached\""), "{r}");
        assert!(dom.contains("the ledger's durable view"));
    }

    /// The flows table is `/debug/flows`' listing, row for row.
    fn flows(&self, chromium: &mut Chromium) {
        let (_, json) = get(self.debug, "/debug/flows").unwrap();
        let json: serde_json::Value = serde_json::from_str(&json).unwrap();
        let want: Vec<u64> = json["flows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["bytes"].as_u64().unwrap())
            .collect();
        assert!(!want.is_empty());
        let dom = chromium.dom(&self.url("/debug/ui/flows"));
        let start = dom.find("<table id=\"flows\"").expect("the flows table");
        let table = &dom[start..start + dom[start..].find("</table>").unwrap()];
        assert_eq!(numbers(table, "data-bytes"), want);
        assert!(table.contains("<span class=\"zone z-same_tenant\">same_tenant</span>"));
        assert!(table.contains(&format!("href=\"/debug/ui/plan?mac={VM_A}\"")));
    }

    /// The project named like a script tag shows as text (had it run, it
    /// would have logged); one zone per trie row; the fixture's anomalies.
    fn plan_and_anomalies(&self, chromium: &mut Chromium) {
        let plan = chromium.dom(&self.url("/debug/ui/plan"));
        assert!(plan.contains("&lt;script&gt;console.error('xss')&lt;/script&gt;"));
        let (_, json) = get(self.debug, "/debug/plan").unwrap();
        let json: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(
            plan.matches("class=\"zone z-").count(),
            json["trie"].as_array().unwrap().len(),
            "one zone per trie row of /debug/plan"
        );
        let anomalies = chromium.dom(&self.url("/debug/ui/anomalies"));
        assert!(anomalies.contains("<h2><code>dangling_route</code>"));
        assert!(anomalies.contains("<h2><code>unknown_device_owner</code>"));
    }

    /// The lookup form's fields, and its answers for three remote
    /// addresses of tenant A's a-web.
    fn lookups(&self, chromium: &mut Chromium) {
        // The form submits GET /debug/ui/lookup with these fields: the URLs
        // below are what it sends.
        let form = chromium.dom(&self.url("/debug/ui/lookup"));
        assert!(form.contains("method=\"get\" action=\"/debug/ui/lookup\""));
        for field in ["mac", "ip", "peer", "local", "direction"] {
            assert!(form.contains(&format!("name=\"{field}\"")), "{field}");
        }
        // (remote address, zone, matched row, external network)
        for (ip, zone, row, external) in [
            // Same tenant: a-db, on A's own network.
            ("10.1.0.6", "same_tenant", "10.1.0.0/24", "none"),
            // Another tenant through a router: b-app, behind router B,
            // reached by router A's extra route.
            ("10.2.0.5", "other_tenant", "10.2.0.0/24", "none"),
            // The internet through router A: the global catch-all, labelled
            // with router A's gateway network (rule 1).
            ("198.51.100.7", "external", "0.0.0.0/0", "public"),
        ] {
            let query = format!("mac={VM_A}&ip={ip}&peer={ROUTER_A}");
            let dom = chromium.dom(&self.url(&format!("/debug/ui/lookup?{query}")));
            let v = verdict(&dom);
            assert!(v.contains(&format!("class=\"zone z-{zone}\"")), "{ip}: {v}");
            assert!(
                v.contains(&format!(
                    "<strong id=\"external-network\">{external}</strong>"
                )),
                "{ip}: {v}"
            );
            assert!(dom.contains("LPM trie <code>zones_v4</code>"), "{ip}");
            assert!(
                dom.contains(&format!("Matched <code>{row}</code>")),
                "{ip}: {dom}"
            );
            // The same answer as the JSON page's.
            let (_, json) = get(self.debug, &format!("/debug/lookup?{query}")).unwrap();
            let json: serde_json::Value = serde_json::from_str(&json).unwrap();
            assert_eq!(json["zone"], zone, "{ip}");
        }
        let dom = chromium.dom(&self.url(&format!(
            "/debug/ui/lookup?mac={VM_A}&ip=198.51.100.7&peer={ROUTER_A}"
        )));
        assert!(verdict(&dom).contains("rule 1"));
    }

    /// By default the tenants with VMs on this node: tenant A's router and
    /// the networks it touches. With `*`, one node per router and per
    /// network of the fixture, each once; its floating IPs and VM ports.
    fn topology(&self, chromium: &mut Chromium) {
        let dom = chromium.dom(&self.url("/debug/ui/topology"));
        assert_eq!(node_ids(&dom, "router"), ["router-a"]);
        let networks: BTreeSet<String> = node_ids(&dom, "network").into_iter().collect();
        // a-private (its own), shared (router A's other interface), public
        // (router A's gateway, floating IP fip-1).
        assert_eq!(
            networks,
            ["net-a", "net-public", "net-shared"]
                .map(str::to_owned)
                .into()
        );
        let mut vms = node_ids(&dom, "vm");
        vms.sort();
        assert_eq!(vms, [PORT_A1, PORT_A2]);
        assert!(dom.contains("The tenants with VMs on this node: tenant-a."));
        let dom = chromium.dom(&self.url("/debug/ui/topology?tenant=*"));
        for (kind, list) in [("router", "routers"), ("network", "networks")] {
            let drawn = node_ids(&dom, kind);
            let unique: BTreeSet<String> = drawn.iter().cloned().collect();
            assert_eq!(drawn.len(), unique.len(), "{kind}: {drawn:?}");
            assert_eq!(unique, fixture_ids(list), "{kind}");
        }
        assert_eq!(
            node_ids(&dom, "fip").into_iter().collect::<BTreeSet<_>>(),
            fixture_ids("floatingips")
        );
        assert_eq!(node_ids(&dom, "vm").len(), 5, "the five VM ports");
        assert!(dom.contains("&lt;script&gt;console.error('xss')&lt;/script&gt;"));
    }

    /// Screenshots of each page into `out`, for people and for
    /// docs/screenshots/.
    fn screenshots(&self, chromium: &mut Chromium, out: &Path) {
        for (name, path, height) in [
            ("debug-index", "/debug/ui/".to_owned(), 720),
            (
                "debug-plan",
                format!("/debug/ui/plan?tenant={TENANT_A}"),
                900,
            ),
            ("debug-anomalies", "/debug/ui/anomalies".to_owned(), 900),
            (
                "debug-lookup",
                format!("/debug/ui/lookup?mac={VM_A}&ip=10.2.0.5&peer={ROUTER_A}"),
                760,
            ),
            (
                "debug-topology",
                "/debug/ui/topology?tenant=*".to_owned(),
                820,
            ),
            ("debug-topology-node", "/debug/ui/topology".to_owned(), 820),
            ("debug-node", "/debug/ui/node".to_owned(), 620),
            ("debug-flows", "/debug/ui/flows".to_owned(), 760),
        ] {
            let png = out.join(format!("{name}.png"));
            chromium.screenshot(&self.url(&path), &png, 1280, height);
        }
    }
}

/// Polls `/metrics` until each port's series equal its tap's counters.
fn wait_for_ports(agent: &Agent, metrics: SocketAddr, vms: &[(&str, &Vm)]) {
    wait_until(agent, "each port's series equal its tap's counters", || {
        let got = port_totals(metrics);
        vms.iter()
            .all(|(port, vm)| got.get(*port) == Some(&Totals::from_tap(counters(vm))))
    });
}

#[test]
fn the_debug_pages_in_headless_chromium() {
    let started = Instant::now();
    lachesis_lab::require_root();
    let out = output_dir();
    let _ = std::fs::remove_dir_all(&out);
    let logs = out.join("chromium-logs");
    std::fs::create_dir_all(&logs).unwrap();
    let mut chromium = Chromium::find(logs);

    // Everything from here, Chromium included, runs in this thread's own
    // network namespace: loopback only.
    isolate();
    // The detector sees a console message when there is one.
    let (_, log) = chromium.run(
        &["--dump-dom"],
        "data:text/html,<title>canary</title><script>console.error('lachesis-canary')</script>",
    );
    assert!(
        console_lines(&log)
            .iter()
            .any(|l| l.contains("lachesis-canary")),
        "chromium's log does not report console messages as expected:\n{log}"
    );

    let mut lab = Lab::new();
    // Tenant A's VMs behind taps named as Nova names them after their
    // ports, and a VM no port describes behind one of the lab's prefix.
    let a1 = lab.add_vm_with_tap(
        &tap_name(PORT_A1),
        VM_A.parse().unwrap(),
        Ipv4Addr::new(10, 1, 0, 5),
    );
    let a2 = lab.add_vm_with_tap(
        &tap_name(PORT_A2),
        VM_A2.parse().unwrap(),
        Ipv4Addr::new(10, 1, 0, 6),
    );
    let stray = lab.add_vm(STRAY.parse().unwrap(), Ipv4Addr::new(10, 1, 0, 99));
    lab.static_neighbours();
    let sim = Sim::start_topology(&repo().join(FIXTURE), &[]);
    let setup = Setup::new(&lab, &sim);
    let mut agent = setup.start(0);
    agent.wait_ready(setup.metrics);
    let pages = Pages {
        debug: setup.debug,
        metrics: setup.metrics,
    };
    // Known traffic between the two, counted until /metrics (the durable
    // view, flushed every 300 ms here) equals the taps' own counters: the
    // numbers the node page must show.
    traffic(&a1, &a2, 0);
    wait_for_ports(&agent, setup.metrics, &[(PORT_A1, &a1), (PORT_A2, &a2)]);
    pages.all_load(&mut chromium);
    pages.health(&mut chromium);
    pages.node(&mut chromium, &[(PORT_A1, &a1), (PORT_A2, &a2)], &stray);
    pages.flows(&mut chromium);
    pages.plan_and_anomalies(&mut chromium);
    pages.lookups(&mut chromium);
    pages.topology(&mut chromium);
    pages.screenshots(&mut chromium, &out);

    drop(agent);
    drop(setup);
    drop(sim);

    // The demo's bundled topology: one node per router and per network.
    let sim = Sim::start_topology(&repo().join(DEMO_TOPOLOGY), &[]);
    let setup = Setup::new(&lab, &sim);
    let mut agent = setup.start(1);
    agent.wait_ready(setup.metrics);
    let demo = Pages {
        debug: setup.debug,
        metrics: setup.metrics,
    };
    let dom = chromium.dom(&demo.url("/debug/ui/topology?tenant=*"));
    for (kind, list) in [("router", "routers"), ("network", "networks")] {
        let drawn = node_ids(&dom, kind);
        let unique: BTreeSet<String> = drawn.iter().cloned().collect();
        assert_eq!(drawn.len(), unique.len(), "demo {kind}: {drawn:?}");
        assert_eq!(unique, yaml_ids(DEMO_TOPOLOGY, list), "demo {kind}");
    }
    drop(agent);
    eprintln!(
        "debug pages: {} chromium runs, screenshots in {}, {:.1} s",
        chromium.runs,
        out.display(),
        started.elapsed().as_secs_f64()
    );
}
