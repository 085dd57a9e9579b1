//! What the live test reads besides Prometheus (`common::prometheus`,
//! which also turns the dashboards into queries): the leak ratio computed
//! from the agent's own /metrics; the `CloudKitty` `metrics.yml` names only
//! series and labels the agent exports, and `CloudKitty`'s own collector
//! (each supported release) rates exactly the server tier's counters.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::cloudkitty;
use crate::common::prometheus::Prometheus;
use lachesis_lab::exposition;

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
