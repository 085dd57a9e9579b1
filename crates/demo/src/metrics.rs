//! The agent's `/metrics` (Prometheus text) read back: a scrape's samples
//! (read by the lab's one exposition parser), the per-tenant table the
//! live view shows, the agent's health (pure).

use std::collections::BTreeMap;
use std::time::Instant;

use lachesis_lab::exposition::{parse_sample, Sample};

/// A sample's value as a count (counters are rendered as integers); unlike
/// [`Sample::count`] a value that is not one reads as its whole part (a
/// negative one as 0) rather than panicking the view.
#[must_use]
pub fn count(s: &Sample) -> u64 {
    whole(s.value)
}

/// The value of label `name`, `""` when the sample has none.
#[must_use]
pub fn label<'a>(s: &'a Sample, name: &str) -> &'a str {
    s.label(name).unwrap_or("")
}

/// A non-negative whole number read from a sample (negative reads as 0).
#[expect(
    clippy::cast_sign_loss,
    clippy::cast_possible_truncation,
    reason = "counters and gauges of counts are rendered as integers below 2^53; negative reads as 0"
)]
fn whole(v: f64) -> u64 {
    v.max(0.0) as u64
}

/// A byte count as a float, for rates and human units (exact below 2^53).
#[expect(
    clippy::cast_precision_loss,
    reason = "byte counts are exact below 2^53; rates and human units need no more"
)]
#[must_use]
pub fn approx(n: u64) -> f64 {
    n as f64
}

/// The samples of a scrape, each line read by
/// [`parse_sample`]; comment lines and lines it
/// refuses are skipped, so one bad line costs the view that line, not the
/// scrape.
#[must_use]
pub fn samples(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| parse_sample(l).ok())
        .collect()
}

/// One scrape.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// When it was read.
    pub at: Instant,
    /// Unix time it was read at (for the drain timestamp's age).
    pub unix: f64,
    /// Every sample.
    pub samples: Vec<Sample>,
}

impl Snapshot {
    /// Samples of `family`.
    pub fn family<'a>(&'a self, family: &'a str) -> impl Iterator<Item = &'a Sample> + 'a {
        self.samples.iter().filter(move |s| s.name == family)
    }

    /// The value of an unlabelled gauge.
    #[must_use]
    pub fn gauge(&self, family: &str) -> Option<f64> {
        self.family(family).next().map(|s| s.value)
    }

    /// Project names from `lachesis_tenant_info`.
    #[must_use]
    pub fn tenant_names(&self) -> BTreeMap<String, String> {
        self.family("lachesis_tenant_info")
            .map(|s| {
                (
                    label(s, "tenant_id").to_owned(),
                    label(s, "name").to_owned(),
                )
            })
            .collect()
    }

    /// Every billing counter (bytes and packets, all tiers) by series.
    #[must_use]
    pub fn counters(&self) -> BTreeMap<String, u64> {
        self.samples
            .iter()
            .filter(|s| {
                s.name.starts_with("lachesis_")
                    && (s.name.ends_with("_bytes_total") || s.name.ends_with("_packets_total"))
            })
            .map(|s| (s.series(), count(s)))
            .collect()
    }
}

/// Zones in code order (DESIGN §3), for sorting rows.
pub(crate) const ZONES: [&str; 7] = [
    "external",
    "same_tenant",
    "other_tenant",
    "infra",
    "miss",
    "shared",
    "multicast",
];

/// One line of the live table: a tenant's bytes in one zone (external
/// traffic split by external network), both directions.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The project's name (its id when the agent knows no name).
    pub tenant: String,
    /// The zone, `external (NETWORK)` for external traffic.
    pub zone: String,
    /// Bytes the tenant's VMs sent.
    pub tx: u64,
    /// Bytes they received.
    pub rx: u64,
    /// Bytes per second sent over the rate window; `None` before a second
    /// snapshot (shown as `—`, not as a rate of 0).
    pub tx_rate: Option<f64>,
    /// Bytes per second received.
    pub rx_rate: Option<f64>,
}

type RowKey = (bool, String, usize, String);

fn tenant_rows(s: &Snapshot) -> BTreeMap<RowKey, (u64, u64)> {
    let names = s.tenant_names();
    let mut out: BTreeMap<RowKey, (u64, u64)> = BTreeMap::new();
    for sample in s.family("lachesis_tenant_bytes_total") {
        let id = label(sample, "tenant_id");
        let tenant = names.get(id).cloned().unwrap_or_else(|| id.to_owned());
        let zone = label(sample, "zone");
        let order = ZONES.iter().position(|z| *z == zone).unwrap_or(ZONES.len());
        let shown = match label(sample, "external_network") {
            "none" | "" => zone.to_owned(),
            net => format!("{zone} ({net})"),
        };
        let cell = out
            .entry((id == "unknown", tenant, order, shown))
            .or_default();
        match label(sample, "direction") {
            "tx" => cell.0 += count(sample),
            _ => cell.1 += count(sample),
        }
    }
    out
}

/// The table: one row per tenant and zone with bytes, rates against
/// `before` (when given), sorted by tenant name (`unknown` last) and zone
/// code. Rows whose bytes are all zero are left out.
#[must_use]
pub fn rows(now: &Snapshot, before: Option<&Snapshot>) -> Vec<Row> {
    let prev = before.map(tenant_rows).unwrap_or_default();
    let secs = before.map_or(0.0, |b| now.at.duration_since(b.at).as_secs_f64());
    let rate = |now: u64, then: Option<u64>| {
        (before.is_some() && secs > 0.0)
            .then(|| approx(now.saturating_sub(then.unwrap_or(0))) / secs)
    };
    tenant_rows(now)
        .into_iter()
        .filter(|(_, (tx, rx))| tx + rx > 0)
        .map(|(key, (tx, rx))| {
            let then = prev.get(&key);
            let (_, tenant, _, zone) = key;
            Row {
                tenant,
                zone,
                tx,
                rx,
                tx_rate: rate(tx, then.map(|t| t.0)),
                rx_rate: rate(rx, then.map(|t| t.1)),
            }
        })
        .collect()
}

/// The agent's health as the view shows it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Health {
    /// The current boot phase.
    pub phase: Option<String>,
    /// `lachesis_attached_interfaces`.
    pub attached: Option<u64>,
    /// Seconds since the last successful drain.
    pub drain_age: Option<f64>,
    /// `lachesis_openstack_sync_age_seconds` (-1: never synced).
    pub sync_age: Option<f64>,
    /// `lachesis_degraded`.
    pub degraded: bool,
    /// Bytes of zone `miss` (both directions): traffic nobody can bill.
    pub miss_bytes: u64,
    /// Bytes of tenant `unknown`: VM MACs no port describes.
    pub unknown_bytes: u64,
    /// Rows waiting for their MAC to be bound.
    pub unresolved_rows: u64,
    /// `lachesis_ghost_bindings`.
    pub ghosts: u64,
}

/// Reads the health families of `s`.
#[must_use]
pub fn health(s: &Snapshot) -> Health {
    let phase = s
        .family("lachesis_boot_phase")
        .find(|x| x.value >= 1.0)
        .map(|x| label(x, "phase").to_owned());
    Health {
        phase,
        attached: s.gauge("lachesis_attached_interfaces").map(whole),
        drain_age: s
            .gauge("lachesis_drain_last_success_timestamp_seconds")
            .filter(|t| *t > 0.0)
            .map(|t| (s.unix - t).max(0.0)),
        sync_age: s.gauge("lachesis_openstack_sync_age_seconds"),
        degraded: s.gauge("lachesis_degraded").is_some_and(|v| v >= 1.0),
        miss_bytes: s
            .family("lachesis_bytes_total")
            .filter(|x| label(x, "zone") == "miss")
            .map(count)
            .sum(),
        unknown_bytes: s
            .family("lachesis_tenant_bytes_total")
            .filter(|x| label(x, "tenant_id") == "unknown")
            .map(count)
            .sum(),
        unresolved_rows: s.gauge("lachesis_ledger_unresolved_rows").map_or(0, whole),
        ghosts: s.gauge("lachesis_ghost_bindings").map_or(0, whole),
    }
}

/// Bytes in binary units (`1.5 MiB`).
#[must_use]
pub fn human_bytes(n: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{v:.0} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// A rate in binary units per second; `—` when there is none yet.
#[must_use]
pub fn human_rate(bytes_per_sec: Option<f64>) -> String {
    bytes_per_sec.map_or_else(|| "—".to_owned(), |r| format!("{}/s", human_bytes(r)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &str = r#"# HELP lachesis_tenant_bytes_total Bytes per Keystone project.
# TYPE lachesis_tenant_bytes_total counter
lachesis_tenant_bytes_total{tenant_id="t1",zone="same_tenant",external_network="none",direction="tx"} 3072
lachesis_tenant_bytes_total{tenant_id="t1",zone="same_tenant",external_network="none",direction="rx"} 1024
lachesis_tenant_bytes_total{tenant_id="t1",zone="external",external_network="public",direction="tx"} 2048
lachesis_tenant_bytes_total{tenant_id="unknown",zone="miss",external_network="none",direction="tx"} 100
lachesis_tenant_bytes_total{tenant_id="t2",zone="infra",external_network="none",direction="rx"} 0
lachesis_tenant_info{tenant_id="t1",name="acme \"the\" corp"} 1
lachesis_bytes_total{zone="miss",external_network="none",direction="tx"} 100
lachesis_boot_phase{phase="attached"} 0
lachesis_boot_phase{phase="running"} 1
lachesis_attached_interfaces 11
lachesis_drain_last_success_timestamp_seconds 1000.5
lachesis_openstack_sync_age_seconds 1.25
lachesis_degraded 0
"#;

    fn snap(body: &str, unix: f64) -> Snapshot {
        Snapshot {
            at: Instant::now(),
            unix,
            samples: samples(body),
        }
    }

    #[test]
    fn labels_with_escapes_and_values_are_read() {
        let s = snap(BODY, 0.0);
        assert_eq!(s.tenant_names()["t1"], "acme \"the\" corp");
        assert_eq!(s.gauge("lachesis_attached_interfaces"), Some(11.0));
        assert_eq!(s.samples.len(), 13);
    }

    #[test]
    fn rows_are_per_tenant_name_and_zone_with_unknown_last_and_empty_rows_dropped() {
        let before = snap(&BODY.replace("} 3072", "} 1024"), 0.0);
        let mut now = snap(BODY, 0.0);
        now.at = before.at + std::time::Duration::from_secs(2);
        let rows = rows(&now, Some(&before));
        let shown: Vec<(&str, &str, u64, u64)> = rows
            .iter()
            .map(|r| (r.tenant.as_str(), r.zone.as_str(), r.tx, r.rx))
            .collect();
        assert_eq!(
            shown,
            [
                ("acme \"the\" corp", "external (public)", 2048, 0),
                ("acme \"the\" corp", "same_tenant", 3072, 1024),
                ("unknown", "miss", 100, 0),
            ]
        );
        assert!((rows[1].tx_rate.unwrap() - 1024.0).abs() < 1e-9, "{rows:?}");
        assert!(rows[0].tx_rate.unwrap().abs() < 1e-9);
        // Before a second snapshot there is no rate, not a rate of 0.
        assert!(crate::metrics::rows(&now, None)
            .iter()
            .all(|r| r.tx_rate.is_none() && r.rx_rate.is_none()));
        assert_eq!(human_rate(None), "—");
    }

    #[test]
    fn health_reads_the_phase_taps_ages_and_the_leak() {
        let h = health(&snap(BODY, 1002.0));
        assert_eq!(h.phase.as_deref(), Some("running"));
        assert_eq!(h.attached, Some(11));
        assert_eq!(h.drain_age, Some(1.5));
        assert_eq!(h.sync_age, Some(1.25));
        assert!(!h.degraded);
        assert_eq!((h.miss_bytes, h.unknown_bytes), (100, 100));
    }

    #[test]
    fn human_units() {
        assert_eq!(human_bytes(512.0), "512 B");
        assert_eq!(human_bytes(1536.0), "1.5 KiB");
        assert_eq!(human_bytes(3.0 * 1024.0 * 1024.0), "3.0 MiB");
        assert_eq!(human_rate(Some(2048.0)), "2.0 KiB/s");
    }
}
