//! The metrics listener (DESIGN §10, §13): `/metrics`, `/healthz`, `/readyz`.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use hyper::header::{HeaderValue, ACCEPT, ACCEPT_ENCODING, CONTENT_ENCODING, VARY};
use hyper::{Request, StatusCode};
use lachesis_ledger::export::render_registry_sorted;
use lachesis_ledger::{Exporter, Format};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::encoding::{accepts_gzip, gzip};
use super::negotiate::negotiate;
use super::reply::{not_found, reply, text, Reply, Verb};
use super::server::{Page, Routes};
use super::source::Readiness;

/// The pages of the metrics listener.
pub const PATHS: &[&str] = &["/metrics", "/healthz", "/readyz"];

/// `lachesis_collect_duration_seconds` (docs/metrics.md).
pub const COLLECT_DURATION: &str = "lachesis_collect_duration_seconds";
/// Its bucket bounds: 1 ms to 10 s, the range from a handful of series to
/// the largest ledgers.
const COLLECT_BUCKETS: [f64; 10] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 2.5, 10.0];

/// The `OpenMetrics` terminator that only the last registry may write.
const EOF: &str = "# EOF\n";

/// `/metrics` could not be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// A collector failed while encoding.
    #[error("encoding the {0} families failed")]
    Encode(&'static str),
    /// The ledger's `OpenMetrics` document did not end with `# EOF`, so
    /// the agent's families cannot be joined to it as one document.
    #[error("the ledger's OpenMetrics exposition does not end with `# EOF`")]
    NoEof,
}

/// `/metrics` (the ledger's billing and health families, then the
/// agent's own registry, as one document), `/healthz` and `/readyz`.
pub struct MetricsRoutes {
    exporter: Arc<Exporter>,
    registry: Registry,
    collect_duration: Histogram,
    readiness: Arc<dyn Readiness>,
    /// The last body's size, to allocate the next one at once.
    last_len: AtomicUsize,
}

impl fmt::Debug for MetricsRoutes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MetricsRoutes").finish_non_exhaustive()
    }
}

impl MetricsRoutes {
    /// Serves `exporter`'s families followed by `registry`'s (the agent's;
    /// it must not repeat a ledger family), after registering
    /// `lachesis_collect_duration_seconds` in it.
    #[must_use]
    pub fn new(
        exporter: Arc<Exporter>,
        mut registry: Registry,
        readiness: Arc<dyn Readiness>,
    ) -> Self {
        let collect_duration = Histogram::new(COLLECT_BUCKETS);
        registry.register(
            COLLECT_DURATION,
            "Time to render /metrics (each scrape shows the renders before it)",
            collect_duration.clone(),
        );
        MetricsRoutes {
            exporter,
            registry,
            collect_duration,
            readiness,
            last_len: AtomicUsize::new(0),
        }
    }

    /// One exposition document in `format`: ledger families, then the
    /// agent's, and (`OpenMetrics`) a single `# EOF`. The render's
    /// duration is observed after it, so it shows from the next scrape on.
    pub fn render(&self, format: Format) -> Result<String, RenderError> {
        let started = Instant::now();
        let result = self.render_uncounted(format);
        self.collect_duration
            .observe(started.elapsed().as_secs_f64());
        if let Ok(body) = &result {
            self.last_len.store(body.len(), Ordering::Relaxed);
        }
        result
    }

    fn render_uncounted(&self, format: Format) -> Result<String, RenderError> {
        let hint = self.last_len.load(Ordering::Relaxed);
        let mut out = String::with_capacity(hint + hint / 8);
        self.exporter
            .render(format, &mut out)
            .map_err(|fmt::Error| RenderError::Encode("ledger"))?;
        if format == Format::OpenMetrics {
            // Two documents concatenated would end the scrape at the first
            // `# EOF`: drop the ledger's; the agent's registry writes the last.
            if !out.ends_with(EOF) {
                return Err(RenderError::NoEof);
            }
            out.truncate(out.len() - EOF.len());
        }
        render_registry_sorted(&self.registry, format, &mut out)
            .map_err(|fmt::Error| RenderError::Encode("agent"))?;
        Ok(out)
    }

    fn metrics(&self, req: &Request<Bytes>) -> Reply {
        let accept = req
            .headers()
            .get_all(ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok());
        let format = negotiate(accept);
        let compress = accepts_gzip(
            req.headers()
                .get_all(ACCEPT_ENCODING)
                .iter()
                .filter_map(|v| v.to_str().ok()),
        );
        match self.render(format) {
            Ok(body) => {
                let mut r = if compress {
                    let mut r = reply(StatusCode::OK, format.content_type(), gzip(body.as_bytes()));
                    r.headers_mut()
                        .insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
                    r
                } else {
                    reply(StatusCode::OK, format.content_type(), body)
                };
                // Both the format and the encoding follow the request: a
                // cache between scraper and agent must key on them.
                r.headers_mut()
                    .insert(VARY, HeaderValue::from_static("Accept, Accept-Encoding"));
                r
            }
            Err(e) => {
                tracing::error!(error = %e, "http: /metrics render failed");
                text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
            }
        }
    }

    fn readyz(&self) -> Reply {
        match self.readiness.ready() {
            Ok(()) => text(StatusCode::OK, "ready"),
            Err(phase) => text(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("not ready: {phase}"),
            ),
        }
    }
}

impl Routes for MetricsRoutes {
    const LISTENER: &'static str = "metrics";

    fn handle(&self, req: &Request<Bytes>) -> Reply {
        let path = req.uri().path();
        let page: Page<Self> = match path {
            "/metrics" => Self::metrics,
            "/healthz" => |s, _| match s.readiness.alive() {
                Ok(()) => text(StatusCode::OK, "ok"),
                Err(why) => text(StatusCode::SERVICE_UNAVAILABLE, format!("unhealthy: {why}")),
            },
            "/readyz" => |s, _| s.readyz(),
            _ => return not_found(path, PATHS),
        };
        Verb::Read
            .refuse(req.method())
            .unwrap_or_else(|| page(self, req))
    }
}

#[cfg(test)]
mod tests;
