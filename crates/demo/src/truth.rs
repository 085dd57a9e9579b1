//! The independent truth (the taps' own interface counters) and what
//! `/metrics` must say given it (pure): per tenant and per port, bytes and
//! packets, each direction, across the scenario's ownership changes; and
//! the monotonicity of every billing series the agent showed.

use std::collections::BTreeMap;

use lachesis_lab::netns::{IfCounters, VmTraffic};

use crate::metrics::{self, Snapshot};

/// The tenant of a tap no port describes.
pub const UNKNOWN: &str = "unknown";

/// One tap's history.
#[derive(Debug, Clone)]
struct Tap {
    port_id: Option<String>,
    /// Counters when the agent started counting.
    baseline: IfCounters,
    /// Owners in order, each from the traffic total (since the baseline)
    /// at which it took over.
    owners: Vec<(String, VmTraffic)>,
    /// Last traffic of a tap that was deleted.
    frozen: Option<VmTraffic>,
}

fn add(a: VmTraffic, b: VmTraffic) -> VmTraffic {
    VmTraffic {
        tx_bytes: a.tx_bytes + b.tx_bytes,
        tx_packets: a.tx_packets + b.tx_packets,
        rx_bytes: a.rx_bytes + b.rx_bytes,
        rx_packets: a.rx_packets + b.rx_packets,
    }
}

/// Every tap's history.
#[derive(Debug, Clone, Default)]
pub struct Truth {
    taps: BTreeMap<String, Tap>,
}

/// What `/metrics` must show: per tenant, and per (port, tenant).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Expected {
    /// Summed over zones and external networks.
    pub tenants: BTreeMap<String, VmTraffic>,
    /// Live ports only (an evicted port's series end).
    pub ports: BTreeMap<(String, String), VmTraffic>,
}

impl Truth {
    /// Starts tracking `tap` (port `port_id`, owned by `tenant`) from its
    /// counters `baseline`.
    pub fn track(&mut self, tap: &str, port_id: Option<&str>, tenant: &str, baseline: IfCounters) {
        self.taps.insert(
            tap.to_owned(),
            Tap {
                port_id: port_id.map(str::to_owned),
                baseline,
                owners: vec![(tenant.to_owned(), VmTraffic::default())],
                frozen: None,
            },
        );
    }

    /// The tracked taps still present.
    #[must_use]
    pub fn live_taps(&self) -> Vec<String> {
        self.taps
            .iter()
            .filter(|(_, t)| t.frozen.is_none())
            .map(|(name, _)| name.clone())
            .collect()
    }

    fn traffic(&self, tap: &str, now: IfCounters) -> VmTraffic {
        let t = &self.taps[tap];
        t.frozen
            .unwrap_or_else(|| VmTraffic::from_tap(now).since(VmTraffic::from_tap(t.baseline)))
    }

    /// `tap` changes owner now (its counters are `now`, read while quiet).
    pub fn change_owner(&mut self, tap: &str, tenant: &str, now: IfCounters) {
        let at = self.traffic(tap, now);
        if let Some(t) = self.taps.get_mut(tap) {
            t.owners.push((tenant.to_owned(), at));
        }
    }

    /// `tap` is deleted; `last` are its final counters.
    pub fn delete(&mut self, tap: &str, last: IfCounters) {
        let at = self.traffic(tap, last);
        if let Some(t) = self.taps.get_mut(tap) {
            t.frozen = Some(at);
        }
    }

    /// What the series must say, given the live taps' counters `now`.
    #[must_use]
    pub fn expected(&self, now: &BTreeMap<String, IfCounters>) -> Expected {
        let mut out = Expected::default();
        for (name, t) in &self.taps {
            let total = match (t.frozen, now.get(name)) {
                (Some(f), _) => f,
                (None, Some(c)) => self.traffic(name, *c),
                (None, None) => continue,
            };
            for (i, (tenant, from)) in t.owners.iter().enumerate() {
                let to = t.owners.get(i + 1).map_or(total, |(_, at)| *at);
                let part = to.since(*from);
                let e = out.tenants.entry(tenant.clone()).or_default();
                *e = add(*e, part);
                if let (Some(port), None) = (&t.port_id, t.frozen) {
                    let e = out.ports.entry((port.clone(), tenant.clone())).or_default();
                    *e = add(*e, part);
                }
            }
        }
        out
    }
}

/// `lachesis_{tenant,port}_{bytes,packets}_total` summed the way
/// [`Expected`] is.
#[must_use]
pub fn observed(s: &Snapshot) -> Expected {
    let mut out = Expected::default();
    for sample in &s.samples {
        let (bytes, tier) = match sample.name.as_str() {
            "lachesis_tenant_bytes_total" => (true, false),
            "lachesis_tenant_packets_total" => (false, false),
            "lachesis_port_bytes_total" => (true, true),
            "lachesis_port_packets_total" => (false, true),
            _ => continue,
        };
        let tenant = metrics::label(sample, "tenant_id").to_owned();
        let t = if tier {
            out.ports
                .entry((metrics::label(sample, "port_id").to_owned(), tenant))
                .or_default()
        } else {
            out.tenants.entry(tenant).or_default()
        };
        let v = metrics::count(sample);
        match (metrics::label(sample, "direction"), bytes) {
            ("tx", true) => t.tx_bytes += v,
            ("tx", false) => t.tx_packets += v,
            (_, true) => t.rx_bytes += v,
            (_, false) => t.rx_packets += v,
        }
    }
    // A sweep's final reading can leave an `unknown` series at zero.
    out.tenants
        .retain(|k, v| k != UNKNOWN || *v != VmTraffic::default());
    out
}

/// Lines naming every difference between `want` and `got`, each with both
/// values ("taps" is the truth). Empty when they agree.
#[must_use]
pub fn diff(want: &Expected, got: &Expected, names: &BTreeMap<String, String>) -> Vec<String> {
    let name = |id: &str| match names.get(id) {
        Some(n) => format!("{n} ({id})"),
        None => id.to_owned(),
    };
    let mut out = Vec::new();
    let mut compare = |what: String, w: Option<&VmTraffic>, g: Option<&VmTraffic>| {
        let (w, g) = (
            w.copied().unwrap_or_default(),
            g.copied().unwrap_or_default(),
        );
        for (field, a, b) in [
            ("tx bytes", w.tx_bytes, g.tx_bytes),
            ("tx packets", w.tx_packets, g.tx_packets),
            ("rx bytes", w.rx_bytes, g.rx_bytes),
            ("rx packets", w.rx_packets, g.rx_packets),
        ] {
            if a != b {
                out.push(format!(
                    "{what} {field}: taps {a}, /metrics {b} ({:+})",
                    i128::from(b) - i128::from(a)
                ));
            }
        }
    };
    let tenants: std::collections::BTreeSet<&String> =
        want.tenants.keys().chain(got.tenants.keys()).collect();
    for t in tenants {
        compare(
            format!("tenant {}", name(t)),
            want.tenants.get(t),
            got.tenants.get(t),
        );
    }
    // Only live ports are expected; a port the truth does not know is a
    // deleted one whose series may still be ending.
    for (key, w) in &want.ports {
        compare(
            format!("port {} of {}", key.0, name(&key.1)),
            Some(w),
            got.ports.get(key),
        );
    }
    out
}

/// Every billing series' highest value seen, and each time one went lower.
#[derive(Debug, Clone, Default)]
pub struct Monotonic {
    high: BTreeMap<String, u64>,
    /// `series: was A, then B`.
    pub violations: Vec<String>,
}

impl Monotonic {
    /// Takes in one scrape.
    pub fn observe(&mut self, s: &Snapshot) {
        for (series, v) in s.counters() {
            let high = self.high.entry(series.clone()).or_insert(v);
            if v < *high {
                self.violations
                    .push(format!("{series} went down: was {high}, then {v}"));
            } else {
                *high = v;
            }
        }
    }

    /// How many series were seen.
    #[must_use]
    pub fn series(&self) -> usize {
        self.high.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(rx_bytes: u64, tx_bytes: u64) -> IfCounters {
        IfCounters {
            rx_bytes,
            rx_packets: rx_bytes / 100,
            tx_bytes,
            tx_packets: tx_bytes / 100,
        }
    }

    fn t(tx: u64, rx: u64) -> VmTraffic {
        VmTraffic {
            tx_bytes: tx,
            tx_packets: tx / 100,
            rx_bytes: rx,
            rx_packets: rx / 100,
        }
    }

    #[test]
    fn a_port_that_changes_project_splits_at_the_change_and_a_deleted_tap_stays_with_its_tenant() {
        let mut truth = Truth::default();
        truth.track("tapa", Some("pa"), "acme", c(1000, 500));
        truth.track("tapb", Some("pb"), "globex", c(0, 0));
        truth.track("taprogue", None, UNKNOWN, c(0, 0));
        // The tap's rx is the VM's tx.
        truth.change_owner("tapa", "globex", c(1300, 600));
        truth.delete("tapb", c(200, 100));
        let now = BTreeMap::from([
            ("tapa".to_owned(), c(1700, 900)),
            ("taprogue".to_owned(), c(100, 0)),
        ]);
        let e = truth.expected(&now);
        assert_eq!(e.tenants["acme"], t(300, 100));
        assert_eq!(e.tenants["globex"], t(400 + 200, 300 + 100));
        assert_eq!(e.tenants[UNKNOWN], t(100, 0));
        assert_eq!(e.ports[&("pa".into(), "acme".into())], t(300, 100));
        assert_eq!(e.ports[&("pa".into(), "globex".into())], t(400, 300));
        assert!(!e.ports.contains_key(&("pb".into(), "globex".into())));
        assert_eq!(truth.live_taps(), ["tapa", "taprogue"]);
    }

    fn snap(body: &str) -> Snapshot {
        Snapshot {
            at: std::time::Instant::now(),
            unix: 0.0,
            samples: crate::metrics::samples(body),
        }
    }

    #[test]
    fn observed_sums_zones_and_drops_an_empty_unknown_and_diff_names_both_sides() {
        let s = snap(
            r#"lachesis_tenant_bytes_total{tenant_id="t1",zone="external",external_network="public",direction="tx"} 300
lachesis_tenant_bytes_total{tenant_id="t1",zone="same_tenant",external_network="none",direction="tx"} 200
lachesis_tenant_packets_total{tenant_id="t1",zone="same_tenant",external_network="none",direction="tx"} 5
lachesis_tenant_bytes_total{tenant_id="unknown",zone="miss",external_network="none",direction="tx"} 0
lachesis_port_bytes_total{server_id="s",port_id="p",tenant_id="t1",zone="same_tenant",external_network="none",direction="rx"} 7
"#,
        );
        let got = observed(&s);
        assert_eq!(got.tenants.len(), 1);
        assert_eq!(got.tenants["t1"].tx_bytes, 500);
        assert_eq!(got.ports[&("p".into(), "t1".into())].rx_bytes, 7);
        let mut want = got.clone();
        want.tenants.get_mut("t1").unwrap().tx_bytes = 510;
        let names = BTreeMap::from([("t1".to_owned(), "acme".to_owned())]);
        assert_eq!(
            diff(&want, &got, &names),
            ["tenant acme (t1) tx bytes: taps 510, /metrics 500 (-10)"]
        );
        assert!(diff(&got, &got, &names).is_empty());
    }

    #[test]
    fn a_series_that_goes_down_is_a_violation_and_one_that_ends_is_not() {
        let mut m = Monotonic::default();
        m.observe(&snap(
            "lachesis_bytes_total{zone=\"x\"} 10\nlachesis_port_bytes_total{p=\"1\"} 4\n",
        ));
        m.observe(&snap("lachesis_bytes_total{zone=\"x\"} 12\n"));
        assert!(m.violations.is_empty());
        m.observe(&snap("lachesis_bytes_total{zone=\"x\"} 11\n"));
        assert_eq!(
            m.violations,
            ["lachesis_bytes_total{zone=\"x\"} went down: was 12, then 11"]
        );
        assert_eq!(m.series(), 2);
    }
}
