//! A real Prometheus (Debian's) scraping a real agent that counts namespace
//! traffic against the simulator: every recording rule, every dashboard
//! panel query and every dashboard variable evaluated through Prometheus'
//! HTTP API returns data; the leak ratio it computes equals the one computed
//! from the agent's own /metrics; the `CloudKitty` `metrics.yml` names only
//! series and labels the agent exports, and `CloudKitty`'s own collector
//! (each supported release) rates exactly the server tier's counters.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::cloudkitty;
use crate::common::repo;
use lachesis_lab::exposition;
use lachesis_lab::http::{free_port, get, Request};

/// Where a panel's Grafana macros and variables stand in a plain query:
/// every variable selects everything.
const MACROS: &[(&str, &str)] = &[
    ("$__rate_interval", "1m"),
    ("$__range", "10m"),
    ("$instance", ".*"),
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
    /// Scrapes `target` every second and evaluates the project's rule file
    /// every second (its groups' own intervals shortened to 1s).
    pub fn start(target: SocketAddr) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let rules = std::fs::read_to_string(repo().join("deploy/prometheus/lachesis-rules.yml"))
            .unwrap()
            .replace("interval: 1m", "interval: 1s")
            // The billing rules' "two evaluation intervals".
            .replace("offset 2m", "offset 2s");
        let rules_path = dir.path().join("rules.yml");
        std::fs::write(&rules_path, rules).unwrap();
        let config = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             rule_files: [{rules}]\n\
             scrape_configs:\n  - job_name: lachesis\n    static_configs:\n      - targets: ['{target}']\n",
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

    fn log(&self) -> String {
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

/// Every `(family{labels}, value)` sample line of a /metrics body whose
/// family is `family`, its labels parsed.
pub fn samples(body: &str, family: &str) -> Vec<(BTreeMap<String, String>, f64)> {
    exposition::parse(body)
        .named(family)
        .filter(|s| !s.labels.is_empty())
        .map(|s| (s.labels.iter().cloned().collect(), s.value))
        .collect()
}

/// The leak ratio of deploy/prometheus's rules, from a /metrics body:
/// zone `miss` plus tenant `unknown` outside `miss` and `multicast`, over
/// all bytes.
pub fn leak_ratio(body: &str) -> (f64, f64) {
    let total_tier = samples(body, "lachesis_bytes_total");
    let total: f64 = total_tier.iter().map(|(_, v)| v).sum();
    let miss: f64 = total_tier
        .iter()
        .filter(|(l, _)| l["zone"] == "miss")
        .map(|(_, v)| v)
        .sum();
    let unknown: f64 = samples(body, "lachesis_tenant_bytes_total")
        .iter()
        .filter(|(l, _)| {
            l["tenant_id"] == "unknown" && l["zone"] != "miss" && l["zone"] != "multicast"
        })
        .map(|(_, v)| v)
        .sum();
    (miss + unknown, total)
}

/// Every dashboard of deploy/grafana, parsed.
fn dashboards() -> Vec<Value> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(repo().join("deploy/grafana")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            let text = std::fs::read_to_string(&path).unwrap();
            out.push(
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
            );
        }
    }
    assert!(out.len() >= 4, "dashboards: {}", out.len());
    out
}

/// Every panel query of every dashboard, with its dashboard and title.
pub fn dashboard_queries() -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for dash in dashboards() {
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
    assert!(out.len() >= 20, "{out:?}");
    out
}

/// Every `label_values(metric, label)` variable of every dashboard.
pub fn dashboard_variables() -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for dash in dashboards() {
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

/// `CloudKitty`: every metric `metrics.yml` rates is a recording rule over
/// the server tier, whose series in `body` (a /metrics scrape) carry every
/// label the file groups by or keeps; and each supported release's own
/// collector, asking this Prometheus for project `scope` and the hour up to
/// now, rates exactly that project's server-tier counters: every series
/// started after Prometheus was scraping, so all its bytes are in the
/// period (docs/cloudkitty.md).
pub fn check_cloudkitty(prometheus: &Prometheus, body: &str, scope: &str) {
    let series = samples(body, "lachesis_server_bytes_total");
    assert!(!series.is_empty(), "no server-tier series:\n{body}");
    for release in cloudkitty::RELEASES {
        let metrics = cloudkitty::collect(*release, &cloudkitty::shipped(), &[], None);
        for (name, m) in metrics["metrics"].as_object().unwrap() {
            assert!(name.starts_with("lachesis:server_bytes:counted"), "{name}");
            let list = |k: &str| -> Vec<String> {
                m[k].as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap().to_owned())
                    .collect()
            };
            let (groupby, metadata) = (list("groupby"), list("metadata"));
            for label in groupby.iter().chain(&metadata) {
                assert!(
                    series.iter().all(|(l, _)| l.contains_key(label)),
                    "{name}: lachesis_server_bytes_total lacks label {label}"
                );
            }
            let key_of = |get: &dyn Fn(&str) -> String| -> Vec<String> {
                groupby.iter().chain(&metadata).map(|k| get(k)).collect()
            };
            let mut want: BTreeMap<Vec<String>, f64> = BTreeMap::new();
            for (l, v) in &series {
                if l["tenant_id"] == scope {
                    *want.entry(key_of(&|k| l[k].clone())).or_default() += v;
                }
            }
            assert!(!want.is_empty());
            let until = Instant::now() + Duration::from_secs(45);
            loop {
                let end = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_secs();
                let answer = cloudkitty::collect(
                    *release,
                    &cloudkitty::shipped(),
                    &[(scope, end - 3600, end)],
                    Some(&prometheus.api_root()),
                );
                let points = answer["collected"][0]["points"].as_array().unwrap().clone();
                for p in &points {
                    assert_eq!(p["unit"], "GiB", "{p}");
                    assert_eq!(p["groupby"]["tenant_id"], scope, "{p}");
                }
                // CloudKitty rounds to 9 significant digits.
                let got: BTreeMap<Vec<String>, f64> = points
                    .iter()
                    .map(|p| {
                        let field = |k: &str| {
                            let v = if groupby.iter().any(|g| g == k) {
                                &p["groupby"][k]
                            } else {
                                &p["metadata"][k]
                            };
                            v.as_str().unwrap().to_owned()
                        };
                        let qty: f64 = p["qty"].as_str().unwrap().parse().unwrap();
                        (key_of(&field), qty * 1_073_741_824.0)
                    })
                    .collect();
                let same = got.len() == want.len()
                    && want
                        .iter()
                        .all(|(k, w)| got.get(k).is_some_and(|g| (g - w).abs() <= w * 1e-8));
                if same {
                    break;
                }
                assert!(
                    Instant::now() < until,
                    "CloudKitty {} rates {got:?}, the agent counted {want:?}\nprometheus log:\n{}",
                    release.version,
                    prometheus.log()
                );
                std::thread::sleep(Duration::from_millis(500));
            }
        }
    }
}
