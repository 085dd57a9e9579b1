//! The listeners' families, computed at scrape time from the counters
//! [`Web`] and [`ListenerStats`] keep (docs/metrics.md):
//! `lachesis_web_config_reloads_total{result}` and
//! `lachesis_http_rejected_total{listener, reason}`, every series present
//! from the start.

use std::fmt;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric as _};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::MetricType;

use crate::{ListenerStats, Web};

/// One process's listeners: the web configuration they share and each
/// one's counters.
#[derive(Debug, Clone)]
pub struct ListenMetrics {
    web: Arc<Web>,
    listeners: Vec<(&'static str, Arc<ListenerStats>)>,
}

impl ListenMetrics {
    /// The families of `listeners` (name, counters), which serve `web`.
    #[must_use]
    pub fn new(web: Arc<Web>, listeners: Vec<(&'static str, Arc<ListenerStats>)>) -> Self {
        ListenMetrics { web, listeners }
    }
}

impl Collector for ListenMetrics {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        let r = self.web.reloads();
        let mut m = enc.encode_descriptor(
            "lachesis_web_config_reloads",
            "Reloads of listen.web_config_file (SIGHUP or a change of the file or a file it names) \
             by result: ok, invalid, unreadable; on invalid and unreadable the previous \
             configuration stays in force.",
            None,
            MetricType::Counter,
        )?;
        for (result, v) in [
            ("ok", r.ok),
            ("invalid", r.invalid),
            ("unreadable", r.unreadable),
        ] {
            ConstCounter::new(v).encode(m.encode_family(&[("result", result)])?)?;
        }
        let mut m = enc.encode_descriptor(
            "lachesis_http_rejected",
            "Requests and connections a listener refused, by listener and reason: unauthorized \
             (no or wrong basic-auth credentials), rate_limited, tls_handshake (failed, too slow, \
             or a client certificate outside client_allowed_sans), evicted (closed to make room at \
             the connection limit), over_capacity (closed at once, every connection busy).",
            None,
            MetricType::Counter,
        )?;
        for (listener, stats) in &self.listeners {
            for (reason, v) in stats.rejections().by_reason() {
                ConstCounter::new(v)
                    .encode(m.encode_family(&[("listener", *listener), ("reason", reason)])?)?;
            }
        }
        Ok(())
    }
}
