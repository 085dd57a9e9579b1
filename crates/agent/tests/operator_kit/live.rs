//! A real Prometheus (Debian's) scraping a real agent that counts namespace
//! traffic against the simulator: every recording rule, every dashboard
//! panel query and every dashboard variable evaluated through Prometheus'
//! HTTP API returns data; the leak ratio it computes equals the one computed
//! from the agent's own /metrics; the `CloudKitty` `metrics.yml` names only
//! series and labels the agent exports, and its query yields exactly the
//! server tier's counters.

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::agent::{free_port, get};
use crate::common::repo;

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
            .replace("interval: 1m", "interval: 1s");
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

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// One API GET (HTTP/1.0: the answer is never chunked), its `data`.
    fn api(&self, path_and_query: &str) -> Value {
        let mut s = TcpStream::connect(self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        write!(
            s,
            "GET {path_and_query} HTTP/1.0\r\nHost: {}\r\n\r\n",
            self.addr
        )
        .unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        let v: Value = serde_json::from_str(body)
            .unwrap_or_else(|e| panic!("{path_and_query}: {e}: {answer}"));
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
    body.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix(family)?.strip_prefix('{')?;
            let (labels, value) = rest.rsplit_once("} ")?;
            let labels = labels
                .split("\",")
                .filter(|kv| !kv.is_empty())
                .map(|kv| {
                    let (k, v) = kv.split_once("=\"").unwrap();
                    (k.to_owned(), v.trim_end_matches('"').to_owned())
                })
                .collect();
            Some((labels, value.trim().parse().unwrap()))
        })
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

/// One metric of `CloudKitty`'s `metrics.yml`: (metric as named, family, groupby + metadata,
/// aggregation method, query suffix).
pub struct RatedMetric {
    pub key: String,
    pub family: String,
    pub labels: Vec<String>,
    pub method: String,
    pub suffix: String,
}

pub fn cloudkitty_metrics(path: &Path) -> Vec<RatedMetric> {
    let text = std::fs::read_to_string(path).unwrap();
    let doc: Value = serde_saphyr::from_str(&text).unwrap();
    let metrics = doc["metrics"].as_object().expect("a `metrics` mapping");
    assert!(!metrics.is_empty());
    metrics
        .iter()
        .map(|(key, m)| {
            let list = |k: &str| -> Vec<String> {
                m[k].as_array()
                    .map(|a| a.iter().map(|v| v.as_str().unwrap().to_owned()).collect())
                    .unwrap_or_default()
            };
            let mut labels = list("groupby");
            labels.extend(list("metadata"));
            RatedMetric {
                key: key.clone(),
                family: key.split("@#").next().unwrap().to_owned(),
                labels,
                method: m["extra_args"]["aggregation_method"]
                    .as_str()
                    .unwrap_or("max")
                    .to_owned(),
                suffix: m["extra_args"]["query_suffix"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned(),
            }
        })
        .collect()
}

/// The instant query `CloudKitty`'s Prometheus collector sends for `m`,
/// project `scope` and a period of `period_s` seconds (its documented
/// form: the aggregation over the period, grouped, then the suffix).
pub fn cloudkitty_query(m: &RatedMetric, scope: &str, period_s: u32) -> String {
    format!(
        "{method}({method}_over_time({family}{{tenant_id=\"{scope}\"}}[{period_s}s])) by ({labels}) {suffix}",
        method = m.method,
        family = m.family,
        labels = m.labels.join(", "),
        suffix = m.suffix,
    )
}

/// `CloudKitty`: every metric and label `metrics.yml` names is in `body` (a
/// /metrics scrape), and its query for project `scope` is exactly that
/// project's server-tier counters (Prometheus is younger than the period:
/// nothing to subtract yet).
pub fn check_cloudkitty(prometheus: &Prometheus, body: &str, scope: &str) {
    let rated = cloudkitty_metrics(&repo().join("deploy/cloudkitty/metrics.yml"));
    for m in &rated {
        let series = samples(body, &m.family);
        assert!(!series.is_empty(), "{}: no {} series", m.key, m.family);
        for label in m.labels.iter().chain(["tenant_id".to_owned()].iter()) {
            assert!(
                series.iter().all(|(l, _)| l.contains_key(label)),
                "{}: {} lacks label {label}",
                m.key,
                m.family
            );
        }
        let mut want: BTreeMap<Vec<String>, f64> = BTreeMap::new();
        for (l, v) in &series {
            if l["tenant_id"] == scope {
                let key = m.labels.iter().map(|k| l[k].clone()).collect();
                *want.entry(key).or_default() += v;
            }
        }
        assert!(!want.is_empty());
        let query = cloudkitty_query(m, scope, 3600);
        prometheus.wait_for(&query, |r| {
            let got: BTreeMap<Vec<String>, f64> = r
                .iter()
                .map(|s| {
                    let key = m
                        .labels
                        .iter()
                        .map(|k| s["metric"][k].as_str().unwrap_or("").to_owned())
                        .collect();
                    (key, value(s))
                })
                .collect();
            got == want
        });
    }
}
