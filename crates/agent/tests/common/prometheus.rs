//! A real Prometheus (Debian's) as a child process, and deploy/grafana's
//! dashboards as the queries Grafana would send it: the operator kit's
//! live test holds the node dashboards to a direct-mode agent, the fleet
//! test the fleet dashboard to a relay and relay-mode agents.

use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::repo;
use lachesis_lab::http::{free_port, get, Request};

/// Where a panel's Grafana macros and variables stand in a plain query:
/// every variable selects everything.
const MACROS: &[(&str, &str)] = &[
    ("$__rate_interval", "1m"),
    ("$__range", "10m"),
    ("$instance", ".*"),
    ("$relay", ".*"),
    ("$tenant", ".*"),
    ("$zone", ".*"),
    ("$direction", ".*"),
];

/// Prometheus as a child process on a free loopback port of the calling
/// thread's network namespace, with its own data directory; killed (by
/// PID) on drop.
pub struct Prometheus {
    child: Child,
    addr: SocketAddr,
    dir: tempfile::TempDir,
}

impl Prometheus {
    /// Scrapes `target` as job `lachesis` every second and evaluates the
    /// project's rule file every second (its groups' own intervals
    /// shortened to 1s).
    pub fn start(target: SocketAddr) -> Prometheus {
        Prometheus::start_jobs(&[("lachesis", &[target])])
    }

    /// [`Prometheus::start`] with scrape jobs of their own (the job names
    /// the rules and dashboards select on: `lachesis`, `lachesis-relay`).
    pub fn start_jobs(jobs: &[(&str, &[SocketAddr])]) -> Prometheus {
        Prometheus::start_scraping(jobs, "")
    }

    /// [`Prometheus::start_jobs`] with `scrape` (YAML keys of a scrape
    /// job, e.g. `scheme: https`, `tls_config`, `basic_auth`, indented as
    /// a job's keys are) added to every job.
    pub fn start_scraping(jobs: &[(&str, &[SocketAddr])], scrape: &str) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let rules = std::fs::read_to_string(repo().join("deploy/prometheus/lachesis-rules.yml"))
            .unwrap()
            .replace("interval: 1m", "interval: 1s")
            // The billing rules' "two evaluation intervals".
            .replace("offset 2m", "offset 2s");
        let rules_path = dir.path().join("rules.yml");
        std::fs::write(&rules_path, rules).unwrap();
        let mut scrapes = String::new();
        for (job, targets) in jobs {
            let targets: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
            let _ = write!(
                scrapes,
                "  - job_name: {job}\n    static_configs:\n      - targets: [{}]\n{scrape}",
                targets.join(", ")
            );
        }
        let config = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             rule_files: [{rules}]\n\
             scrape_configs:\n{scrapes}",
            rules = rules_path.display()
        );
        let config_path = dir.path().join("prometheus.yml");
        std::fs::write(&config_path, config).unwrap();
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, free_port()));
        let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("prometheus not runnable ({e}): install Debian's prometheus (scripts/setup does)")
            });
        let p = Prometheus { child, addr, dir };
        let until = Instant::now() + Duration::from_secs(30);
        while get(addr, "/-/ready").is_none_or(|(code, _)| code != 200) {
            assert!(
                Instant::now() < until,
                "prometheus never ready:\n{}",
                p.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        p
    }

    /// The API root, as `CloudKitty`'s `prometheus_url` names it.
    pub fn api_root(&self) -> String {
        format!("http://{}/api/v1", self.addr)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// One API GET, its `data`.
    fn api(&self, path_and_query: &str) -> Value {
        let answer = Request::get(path_and_query)
            .timeout(Duration::from_secs(30))
            .send(self.addr)
            .unwrap_or_else(|e| panic!("{path_and_query}: {e}"));
        let v: Value = serde_json::from_str(&answer.body)
            .unwrap_or_else(|e| panic!("{path_and_query}: {e}: {answer:?}"));
        assert_eq!(v["status"], "success", "{path_and_query}: {v}");
        v["data"].clone()
    }

    /// An instant query's result vector.
    pub fn query(&self, expr: &str) -> Vec<Value> {
        let data = self.api(&format!("/api/v1/query?query={}", encode(expr)));
        data["result"].as_array().cloned().unwrap_or_default()
    }

    /// Values of `label` on the series of `metric`.
    pub fn label_values(&self, metric: &str, label: &str) -> Vec<String> {
        let data = self.api(&format!(
            "/api/v1/label/{label}/values?match[]={}",
            encode(metric)
        ));
        data.as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect()
    }

    /// Polls `expr` until `ok` holds for its result, which it returns.
    pub fn wait_for(&self, expr: &str, ok: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let until = Instant::now() + Duration::from_secs(45);
        loop {
            let result = self.query(expr);
            if ok(&result) {
                return result;
            }
            assert!(
                Instant::now() < until,
                "{expr} never held: last {result:?}\nprometheus log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn encode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// A sample's value.
pub fn value(sample: &Value) -> f64 {
    sample["value"][1].as_str().unwrap().parse().unwrap()
}

/// Which dashboards of deploy/grafana a test holds: those tagged `fleet`
/// need a relay and relay-mode agents, the others a direct-mode agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dashboards {
    Node,
    Fleet,
}

impl Dashboards {
    /// The dashboards of this kind, parsed.
    fn parsed(self) -> Vec<Value> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(repo().join("deploy/grafana")).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "json") {
                let text = std::fs::read_to_string(&path).unwrap();
                let dash: Value = serde_json::from_str(&text)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                let fleet = dash["tags"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|t| t == "fleet");
                if fleet == (self == Dashboards::Fleet) {
                    out.push(dash);
                }
            }
        }
        let least = match self {
            Dashboards::Node => 4,
            Dashboards::Fleet => 1,
        };
        assert!(out.len() >= least, "{self:?} dashboards: {}", out.len());
        out
    }

    /// Every panel query, with its dashboard and panel title.
    pub fn queries(self) -> Vec<(String, String, String)> {
        let mut out = Vec::new();
        for dash in self.parsed() {
            let name = dash["title"].as_str().unwrap().to_owned();
            for panel in dash["panels"].as_array().unwrap() {
                for target in panel["targets"].as_array().unwrap() {
                    let mut expr = target["expr"].as_str().unwrap().to_owned();
                    for (from, to) in MACROS {
                        expr = expr.replace(from, to);
                    }
                    assert!(!expr.contains('$'), "{name}: unknown variable in {expr}");
                    out.push((
                        name.clone(),
                        panel["title"].as_str().unwrap().to_owned(),
                        expr,
                    ));
                }
            }
        }
        assert!(out.len() >= 15, "{out:?}");
        out
    }

    /// Every `label_values(metric, label)` variable: name, metric, label.
    pub fn variables(self) -> Vec<(String, String, String)> {
        let mut out = Vec::new();
        for dash in self.parsed() {
            for var in dash["templating"]["list"].as_array().unwrap() {
                if var["type"] == "datasource" {
                    assert_eq!(var["query"], "prometheus");
                    continue;
                }
                let def = var["definition"].as_str().unwrap();
                let inner = def
                    .strip_prefix("label_values(")
                    .and_then(|d| d.strip_suffix(')'))
                    .unwrap_or_else(|| panic!("unexpected variable query {def}"));
                let (metric, label) = inner.split_once(", ").unwrap();
                out.push((
                    var["name"].as_str().unwrap().to_owned(),
                    metric.to_owned(),
                    label.to_owned(),
                ));
            }
        }
        out
    }

    /// Every panel query returns data through `prometheus` (within its
    /// [`Prometheus::wait_for`] bound) and every variable has values.
    pub fn hold(self, prometheus: &Prometheus) {
        for (dashboard, panel, expr) in self.queries() {
            let got = prometheus.wait_for(&expr, |r| !r.is_empty());
            assert!(!got.is_empty(), "{dashboard} / {panel}: {expr}");
        }
        for (name, metric, label) in self.variables() {
            let values = prometheus.label_values(&metric, &label);
            assert!(
                !values.is_empty(),
                "variable {name}: label_values({metric}, {label})"
            );
        }
    }
}
