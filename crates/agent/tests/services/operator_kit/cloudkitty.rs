//! `CloudKitty`'s own Prometheus collector run on deploy/cloudkitty/metrics.yml
//! (docs/cloudkitty.md "Checked"): Debian's python3-cloudkitty (17.0.0) and
//! the newest release's wheel (24.0.0) load and validate the file and build
//! the query of every project and period deploy/prometheus/tests/billing.test.yml
//! evaluates; each must be that file's query character for character, and
//! promtool must then rate every period of its scenarios (a live migration
//! over two nodes, resets, a node down, a series that ends, one that starts)
//! as the hand-computed bytes. The live tier (`live::check_cloudkitty`) runs
//! the same collectors against a real Prometheus scraping a real agent.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use super::run_tool;
use crate::common::repo;

/// Debian's interpreter: its dist-packages hold python3-cloudkitty and the
/// libraries both releases import (the `python3` on PATH may be another).
const PYTHON: &str = "/usr/bin/python3";

/// Where scripts/setup-operator puts the newest release's wheel.
const WHEEL_24: &str = "/var/cache/lachesis-test/cloudkitty-24.0.0-py3-none-any.whl";

const BILLING_TESTS: &str = "deploy/prometheus/tests/billing.test.yml";

/// A `CloudKitty` release the kit supports and the tests run.
#[derive(Clone, Copy, Debug)]
pub struct Release {
    pub version: &'static str,
    /// A wheel put first on `PYTHONPATH`; `None`: Debian's package.
    wheel: Option<&'static str>,
}

/// The oldest supported release (Debian 12's) and the newest.
pub const RELEASES: &[Release] = &[
    Release {
        version: "17.0.0",
        wheel: None,
    },
    Release {
        version: "24.0.0",
        wheel: Some(WHEEL_24),
    },
];

/// Runs `cloudkitty_driver.py` (beside this file): `release`'s
/// collector on `metrics` for each `(scope, start, end)`, against
/// `prometheus` (an API root, `http://HOST:PORT/api/v1`) or, without it, a
/// stand-in that records each query. Its JSON answer, checked to come from
/// `release`.
pub fn collect(
    release: Release,
    metrics: &Path,
    requests: &[(&str, u64, u64)],
    prometheus: Option<&str>,
) -> Value {
    let driver = repo().join("crates/agent/tests/services/operator_kit/cloudkitty_driver.py");
    let mut cmd = Command::new(PYTHON);
    cmd.arg(&driver).arg(metrics);
    if let Some(url) = prometheus {
        cmd.args(["--prometheus", url]);
    }
    cmd.env_remove("PYTHONPATH")
        .env("PYTHONDONTWRITEBYTECODE", "1");
    if let Some(wheel) = release.wheel {
        assert!(
            Path::new(wheel).is_file(),
            "{wheel} missing: run scripts/setup-operator as root (it downloads CloudKitty {})",
            release.version
        );
        cmd.env("PYTHONPATH", wheel);
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("{PYTHON} not runnable ({e}): install Debian's python3 (scripts/setup-operator does)")
        });
    let input: Vec<Value> = requests
        .iter()
        .map(|(scope, start, end)| serde_json::json!({"scope": scope, "start": start, "end": end}))
        .collect();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(serde_json::to_string(&input).unwrap().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "CloudKitty {} on {}: {}\n{}",
        release.version,
        metrics.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["version"], release.version, "{answer}");
    let module = answer["module"].as_str().unwrap();
    match release.wheel {
        Some(wheel) => assert!(module.starts_with(wheel), "{module}"),
        None => assert!(
            module.starts_with("/usr/lib/python3/dist-packages/"),
            "{module}"
        ),
    }
    answer
}

/// The shipped metrics.yml.
pub fn shipped() -> PathBuf {
    repo().join("deploy/cloudkitty/metrics.yml")
}

/// "2h", "90m", "30s" → seconds.
fn seconds(duration: &str) -> u64 {
    let (n, unit) = duration.split_at(duration.len() - 1);
    let n: u64 = n.parse().unwrap_or_else(|_| panic!("duration {duration}"));
    n * match unit {
        "h" => 3600,
        "m" => 60,
        "s" => 1,
        _ => panic!("duration {duration}"),
    }
}

/// Every `(scope, period end, expr)` of billing.test.yml that rates a
/// period: an expression over the rule `CloudKitty` reads.
fn rated_periods() -> Vec<(String, u64, String)> {
    let text = std::fs::read_to_string(repo().join(BILLING_TESTS)).unwrap();
    let doc: Value = serde_saphyr::from_str(&text).unwrap();
    let mut out = Vec::new();
    for group in doc["tests"].as_array().unwrap() {
        for t in group["promql_expr_test"].as_array().unwrap() {
            let expr = t["expr"].as_str().unwrap();
            let Some(rest) = expr.split_once("{tenant_id=\"").map(|(_, r)| r) else {
                continue;
            };
            let scope = rest.split_once('"').unwrap().0.to_owned();
            out.push((
                scope,
                seconds(t["eval_time"].as_str().unwrap()),
                expr.to_owned(),
            ));
        }
    }
    out
}

#[test]
fn cloudkitty_builds_exactly_the_queries_promtool_rates_right_on_migrations_and_resets() {
    let periods = rated_periods();
    // Two projects, the four hours of the scenarios.
    assert!(periods.len() >= 5, "{periods:?}");
    let requests: Vec<(&str, u64, u64)> = periods
        .iter()
        .map(|(scope, end, _)| (scope.as_str(), end - 3600, *end))
        .collect();
    for release in RELEASES {
        let answer = collect(*release, &shipped(), &requests, None);
        let metrics = answer["metrics"].as_object().unwrap();
        assert_eq!(metrics.len(), 1, "{answer}");
        let (name, m) = metrics.iter().next().unwrap();
        // The validated configuration: what the hashmap module prices.
        assert_eq!(m["alt_name"], "network.bytes", "{name}: {m}");
        assert_eq!(m["unit"], "GiB");
        assert_eq!(m["factor"], "1/1073741824");
        assert_eq!(m["groupby"], serde_json::json!(["server_id", "tenant_id"]));
        assert_eq!(
            m["metadata"],
            serde_json::json!(["zone", "direction", "external_network"])
        );
        let collected = answer["collected"].as_array().unwrap();
        assert_eq!(collected.len(), periods.len());
        for (got, (scope, end, expr)) in collected.iter().zip(&periods) {
            assert_eq!(got["scope"], scope.as_str());
            assert_eq!(
                got["query"].as_str().unwrap(),
                expr,
                "CloudKitty {} builds another query for {scope}, period ending at {end} s \
                 than {BILLING_TESTS} rates",
                release.version
            );
            // The instant it asks for: the period's end.
            let hours = end / 3600;
            assert_eq!(
                got["time"].as_str().unwrap(),
                format!("1970-01-01T{hours:02}:00:00+00:00")
            );
        }
    }
    // The same expressions, evaluated over the scenarios by Prometheus'
    // engine with the shipped rules.
    let text = run_tool("promtool", "prometheus", &["test", "rules", BILLING_TESTS]);
    assert!(
        text.contains("SUCCESS") && !text.contains("FAILED"),
        "{text}"
    );
}

#[test]
fn the_rated_metric_is_a_recording_rule_of_the_shipped_rules() {
    let answer = collect(RELEASES[0], &shipped(), &[], None);
    let rules =
        std::fs::read_to_string(repo().join("deploy/prometheus/lachesis-rules.yml")).unwrap();
    let records: Vec<&str> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- record: "))
        .collect();
    let names: BTreeMap<&String, &Value> = answer["metrics"].as_object().unwrap().iter().collect();
    assert!(!names.is_empty());
    for name in names.keys() {
        // 17.0.0 queries the key as written: it must be a plain series name.
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "{name}"
        );
        assert!(
            records.contains(&name.as_str()),
            "{name} not in {records:?}"
        );
    }
}
