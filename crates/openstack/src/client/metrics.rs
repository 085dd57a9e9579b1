//! `lachesis_openstack_api_errors_total{service,endpoint,code}` (DESIGN §5, §10).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// Labels of one error series. `code` is the HTTP status, `network` when no
/// response arrived (refused, reset, timeout), or `body` when a 2xx body was
/// not the documented shape — all bounded sets.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct ApiErrorLabels {
    /// The catalog service type: `identity`, `network`, `compute`,
    /// `load-balancer`.
    pub service: String,
    /// The list's collection (`ports`, `servers`, …), or `auth` for a token
    /// request.
    pub endpoint: String,
    pub code: String,
}

/// Cheap to clone; clones share the counters.
#[derive(Debug, Clone, Default)]
pub struct ApiMetrics {
    errors: Family<ApiErrorLabels, Counter>,
}

impl ApiMetrics {
    /// Registers the family (`_total` is appended by the registry).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "lachesis_openstack_api_errors",
            "Failed OpenStack API calls by service, endpoint and HTTP status (or network/body)",
            self.errors.clone(),
        );
    }

    pub(crate) fn count(&self, service: &str, endpoint: &str, code: &str) {
        self.errors
            .get_or_create(&ApiErrorLabels {
                service: service.to_owned(),
                endpoint: endpoint.to_owned(),
                code: code.to_owned(),
            })
            .inc();
    }

    /// Current value of one series (for tests and the debug endpoint).
    #[must_use]
    pub fn get(&self, service: &str, endpoint: &str, code: &str) -> u64 {
        let labels = ApiErrorLabels {
            service: service.to_owned(),
            endpoint: endpoint.to_owned(),
            code: code.to_owned(),
        };
        self.errors.get(&labels).map_or(0, |c| c.get())
    }
}
