//! The custom collector (DESIGN §10): billing families computed at scrape
//! time from the ledger, never from resettable counter objects, plus the
//! ledger's health and info families — all from one lock.

use std::fmt;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use super::families::{self as f, Family, Kind, ABSORBER_TIERS};
use super::text;
use crate::attribution::{Attribution, UNKNOWN_TENANT};
use crate::counts::Counts;
use crate::health::Health;
use crate::ledger::{Ledger, LedgerSizes};
use crate::state::{FlushMetrics, FlushPhase, LoadFallback, LoadStats, StateFile};
use crate::tiers::{direction_label, proto_label, zone_label, Tiers};

/// Exposition format; choosing one from `Accept` is the HTTP layer's job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `OpenMetrics` 1.0 text (ends with `# EOF`).
    OpenMetrics,
    /// Prometheus text format 0.0.4.
    PrometheusText,
}

impl Format {
    /// The `Content-Type` of a response in this format.
    #[must_use]
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::PrometheusText => "text/plain; version=0.0.4; charset=utf-8",
        }
    }
}

/// Renders a registry in `format` into `out` (appending), each histogram
/// bucket's `le` after the series' own labels in both formats.
pub fn render_registry(registry: &Registry, format: Format, out: &mut String) -> fmt::Result {
    let from = out.len();
    match format {
        Format::OpenMetrics => prometheus_client::encoding::text::encode(out, registry)?,
        Format::PrometheusText => {
            prometheus_client::encoding::prometheus_text::encode(out, registry)?;
        }
    }
    text::le_last(out, from);
    Ok(())
}

/// [`render_registry`] for a registry of `prometheus-client` families,
/// whose series come out in hash order: each family's series sorted by
/// their labels, the same order on every start and every scrape.
pub fn render_registry_sorted(
    registry: &Registry,
    format: Format,
    out: &mut String,
) -> fmt::Result {
    let mut own = String::new();
    render_registry(registry, format, &mut own)?;
    out.push_str(&text::sort_series(&own));
    Ok(())
}

/// Registers with a `prometheus-client` registry; see [`crate::Exporter`] for
/// a ready-made registry holding only the ledger.
#[derive(Debug, Clone)]
pub struct LedgerCollector {
    ledger: Arc<Ledger>,
    state: Arc<StateFile>,
}

impl LedgerCollector {
    /// A collector over `ledger` (labelled through the ledger's own source)
    /// and the health of the state file it is flushed to.
    #[must_use]
    pub fn new(ledger: Arc<Ledger>, state: Arc<StateFile>) -> Self {
        LedgerCollector { ledger, state }
    }
}

impl Collector for LedgerCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        // Billing families render the durable view (the tiers of the last
        // successful flush, labelled when they were computed): a continuing
        // series can then never go down across a crash or a host reboot
        // (§9, §11). The lock is held only to take it and the live sizes.
        let (tiers, sizes, health) = self.ledger.scrape_view();
        // Names are live: an info series is not a counter.
        let attr = self.ledger.attribution();
        encode_billing(&mut enc, &tiers)?;
        encode_info(&mut enc, &tiers, attr.as_ref())?;
        encode_health(&mut enc, &sizes, &health)?;
        encode_state(
            &mut enc,
            self.state.flush_metrics(),
            self.state.load_stats(),
        )
    }
}

/// A registry holding just the ledger's collector, rendered on demand.
#[derive(Debug)]
pub struct Exporter {
    registry: Registry,
}

impl Exporter {
    /// Registers a [`LedgerCollector`] in a fresh registry.
    #[must_use]
    pub fn new(ledger: Arc<Ledger>, state: Arc<StateFile>) -> Self {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(LedgerCollector::new(ledger, state)));
        Exporter { registry }
    }

    /// Appends the exposition in `format` to `out` (reuse `out` across scrapes).
    pub fn render(&self, format: Format, out: &mut String) -> fmt::Result {
        render_registry(&self.registry, format, out)
    }
}

fn descriptor<'s>(
    enc: &'s mut DescriptorEncoder,
    fam: &'s Family,
) -> Result<prometheus_client::encoding::MetricEncoder<'s>, fmt::Error> {
    let t = match fam.kind {
        Kind::Counter => MetricType::Counter,
        Kind::Gauge => MetricType::Gauge,
        Kind::Info => MetricType::Info,
        Kind::Histogram => MetricType::Histogram,
    };
    enc.encode_descriptor(fam.descriptor_name(), fam.help, None, t)
}

type Pick = fn(Counts) -> u64;
const BYTES: Pick = |c| c.bytes;
const PACKETS: Pick = |c| c.packets;

fn encode_billing(enc: &mut DescriptorEncoder, t: &Tiers) -> fmt::Result {
    let s = &t.strings;
    for (fam, pick) in [(&f::BYTES, BYTES), (&f::PACKETS, PACKETS)] {
        let mut m = descriptor(enc, fam)?;
        for (k, c) in &t.total {
            let l = [
                ("zone", zone_label(k[0])),
                ("external_network", s.get(k[1])),
                ("direction", direction_label(k[2])),
            ];
            ConstCounter::new(pick(*c)).encode(m.encode_family(&l)?)?;
        }
    }
    for (fam, pick) in [(&f::TENANT_BYTES, BYTES), (&f::TENANT_PACKETS, PACKETS)] {
        let mut m = descriptor(enc, fam)?;
        for (k, c) in &t.tenant {
            let l = [
                ("tenant_id", s.get(k[0])),
                ("zone", zone_label(k[1])),
                ("external_network", s.get(k[2])),
                ("direction", direction_label(k[3])),
            ];
            ConstCounter::new(pick(*c)).encode(m.encode_family(&l)?)?;
        }
    }
    for (fam, pick) in [(&f::SERVER_BYTES, BYTES), (&f::SERVER_PACKETS, PACKETS)] {
        let mut m = descriptor(enc, fam)?;
        for (k, c) in &t.server {
            let l = [
                ("server_id", s.get(k[0])),
                ("tenant_id", s.get(k[1])),
                ("zone", zone_label(k[2])),
                ("external_network", s.get(k[3])),
                ("direction", direction_label(k[4])),
            ];
            ConstCounter::new(pick(*c)).encode(m.encode_family(&l)?)?;
        }
    }
    for (fam, pick) in [(&f::PORT_BYTES, BYTES), (&f::PORT_PACKETS, PACKETS)] {
        let mut m = descriptor(enc, fam)?;
        for (k, c) in &t.port {
            let l = [
                ("server_id", s.get(k[0])),
                ("port_id", s.get(k[1])),
                ("tenant_id", s.get(k[2])),
                ("zone", zone_label(k[3])),
                ("external_network", s.get(k[4])),
                ("direction", direction_label(k[5])),
            ];
            ConstCounter::new(pick(*c)).encode(m.encode_family(&l)?)?;
        }
    }
    for (fam, pick) in [
        (&f::PORT_PROTO_BYTES, BYTES),
        (&f::PORT_PROTO_PACKETS, PACKETS),
    ] {
        let mut m = descriptor(enc, fam)?;
        for (k, c) in &t.port_proto {
            let l = [
                ("server_id", s.get(k[0])),
                ("port_id", s.get(k[1])),
                ("tenant_id", s.get(k[2])),
                ("proto", proto_label(k[3])),
                ("direction", direction_label(k[4])),
            ];
            ConstCounter::new(pick(*c)).encode(m.encode_family(&l)?)?;
        }
    }
    Ok(())
}

fn encode_info(enc: &mut DescriptorEncoder, t: &Tiers, attr: &dyn Attribution) -> fmt::Result {
    let s = &t.strings;
    {
        let mut m = descriptor(enc, &f::TENANT_INFO)?;
        let mut last = None;
        // The tenant tier is sorted by tenant rank first: one pass, no set.
        for (k, _) in &t.tenant {
            if last == Some(k[0]) {
                continue;
            }
            last = Some(k[0]);
            let tenant = s.get(k[0]);
            if tenant == UNKNOWN_TENANT {
                continue;
            }
            if let Some(name) = attr.tenant_name(tenant) {
                m.encode_info(&[("tenant_id", tenant), ("name", name)])?;
            }
        }
    }
    let mut m = descriptor(enc, &f::SERVER_INFO)?;
    let mut last = None;
    for (k, _) in &t.server {
        if last == Some((k[0], k[1])) {
            continue;
        }
        last = Some((k[0], k[1]));
        let (server, tenant) = (s.get(k[0]), s.get(k[1]));
        if let Some(name) = attr.server_name(server) {
            m.encode_info(&[("server_id", server), ("name", name), ("tenant_id", tenant)])?;
        }
    }
    Ok(())
}

fn counter(enc: &mut DescriptorEncoder, fam: &Family, v: u64) -> fmt::Result {
    ConstCounter::new(v).encode(descriptor(enc, fam)?)
}

fn labelled(enc: &mut DescriptorEncoder, fam: &Family, series: &[(&str, u64)]) -> fmt::Result {
    let mut m = descriptor(enc, fam)?;
    let key = fam.labels[0];
    for (value, v) in series {
        let l = [(key, *value)];
        match fam.kind {
            Kind::Gauge => ConstGauge::new(i64::try_from(*v).unwrap_or(i64::MAX))
                .encode(m.encode_family(&l)?)?,
            _ => ConstCounter::new(*v).encode(m.encode_family(&l)?)?,
        }
    }
    Ok(())
}

fn gauge(enc: &mut DescriptorEncoder, fam: &Family, v: usize) -> fmt::Result {
    ConstGauge::new(i64::try_from(v).unwrap_or(i64::MAX)).encode(descriptor(enc, fam)?)
}

fn encode_health(enc: &mut DescriptorEncoder, sizes: &LedgerSizes, h: &Health) -> fmt::Result {
    gauge(enc, &f::LEDGER_ROWS, sizes.rows)?;
    gauge(enc, &f::UNRESOLVED_ROWS, sizes.unresolved)?;
    let buckets: Vec<(&str, u64)> = ABSORBER_TIERS
        .iter()
        .zip(sizes.absorber_buckets)
        .map(|(t, n)| (*t, n as u64))
        .collect();
    labelled(enc, &f::ABSORBER_BUCKETS, &buckets)?;
    counter(enc, &f::RESOLUTIONS, h.resolutions)?;
    labelled(
        enc,
        &f::EVICTIONS,
        &[("capacity", h.evictions_capacity), ("ttl", h.evictions_ttl)],
    )?;
    labelled(
        enc,
        &f::ANOMALIES,
        &[
            ("invalid_key", h.anomalies_invalid_key),
            ("nonzero_pad", h.anomalies_nonzero_pad),
            ("stale", h.anomalies_stale),
        ],
    )?;
    counter(enc, &f::LOST_FINAL_READINGS, h.lost_final_readings)?;
    labelled(
        enc,
        &f::SETTLED,
        &[("evict", h.settled_evict), ("rebase", h.settled_rebase)],
    )?;
    labelled(
        enc,
        &f::PRUNED,
        &[("server", h.pruned_server), ("tenant", h.pruned_tenant)],
    )?;
    counter(enc, &f::PRUNES_DEFERRED, h.prunes_deferred)
}

/// The state file's own health: flush phases and failures, load fallbacks.
fn encode_state(
    enc: &mut DescriptorEncoder,
    flush: &FlushMetrics,
    loads: &LoadStats,
) -> fmt::Result {
    {
        let mut m = descriptor(enc, &f::FLUSH_PHASE)?;
        for phase in FlushPhase::ALL {
            let l = [("phase", phase.label())];
            flush.histogram(phase).encode(m.encode_family(&l)?)?;
        }
    }
    let failures: Vec<(&str, u64)> = FlushPhase::ALL
        .iter()
        .map(|p| (p.label(), flush.failures(*p)))
        .collect();
    labelled(enc, &f::FLUSH_FAILURES, &failures)?;
    labelled(
        enc,
        &f::LOAD_FALLBACKS,
        &[
            (
                LoadFallback::Backup.label(),
                loads.fallbacks(LoadFallback::Backup),
            ),
            (
                LoadFallback::Empty.label(),
                loads.fallbacks(LoadFallback::Empty),
            ),
        ],
    )?;
    counter(enc, &f::QUARANTINED, loads.quarantined())
}
