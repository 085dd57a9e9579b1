//! One full metadata sync (DESIGN §5): every list, all pages, with the
//! all-or-nothing / best-effort split.

use lachesis_planner::{ApiBodies, OptionalBody, Resource};
use serde_json::Value;
use url::Url;

use super::catalog::CatalogError;
use super::metrics::ApiMetrics;
use super::session::{ApiError, ListCall, Session};
use crate::config::CloudConfig;

/// Outcome of a best-effort service's lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServiceStatus {
    /// Every list of the service was fetched completely.
    Ok,
    /// A list failed: its body is `OptionalBody::Failed`, never "empty"
    /// (the reconcile must not prune servers or load balancers on it).
    Failed {
        /// The failure's message (endpoint selection or the list call).
        error: String,
    },
    /// The service type is absent from the catalog: a normal cloud shape.
    NotInCatalog,
}

/// A successful sync: Neutron and Keystone complete, Nova/Octavia as marked.
#[derive(Debug, Clone)]
pub struct SyncResult {
    /// Every list, one merged body per collection; the Nova and Octavia
    /// bodies say whether they were fetched, failed or are not deployed.
    pub bodies: ApiBodies,
    /// The outcome of `servers`.
    pub nova: ServiceStatus,
    /// The outcome of `loadbalancers` and `amphorae` together: one failing
    /// fails both, since either alone would attribute amphora ports wrongly.
    pub octavia: ServiceStatus,
}

impl SyncResult {
    /// True when a best-effort service failed (not when it is absent).
    #[must_use]
    pub fn is_partial(&self) -> bool {
        matches!(self.nova, ServiceStatus::Failed { .. })
            || matches!(self.octavia, ServiceStatus::Failed { .. })
    }
}

/// A sync that must not be used (Neutron or Keystone incomplete).
///
/// Like every client and config error, its text already contains the text of
/// the error it wraps, so it exposes no `source()`: a printer that walks
/// the chain (`anyhow`'s `{:#}`) then prints each cause once.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// A Neutron or Keystone list failed, their endpoint could not be
    /// chosen, no token could be had (every call needs one), or (in
    /// [`fetch`]) the HTTP client could not be built: the whole sync is
    /// discarded, since a partial Neutron snapshot would plan wrong rows.
    #[error("OpenStack sync failed (no partial Neutron/Keystone snapshot is used): {0}")]
    Api(ApiError),
    /// A catalog endpoint joined with a list path is not a valid URL: the
    /// endpoint is registered wrongly in Keystone.
    #[error("{url}: not a URL: {message}")]
    Url {
        /// The joined text that failed to parse.
        url: String,
        /// The URL parser's message.
        message: String,
    },
}

impl From<ApiError> for SyncError {
    fn from(e: ApiError) -> Self {
        Self::Api(e)
    }
}

/// A cloud client that keeps its token across syncs.
#[derive(Debug)]
pub struct Client {
    session: Session,
}

fn join(base: &str, path: &str) -> Result<Url, SyncError> {
    let joined = format!(
        "{}/{}",
        base.trim_end_matches('/'),
        path.trim_start_matches('/')
    );
    Url::parse(&joined).map_err(|e| SyncError::Url {
        url: joined,
        message: e.to_string(),
    })
}

fn last_segment_is(base: &str, version: &str) -> bool {
    base.trim_end_matches('/').rsplit('/').next() == Some(version)
}

/// Neutron's catalog URL carries no version.
fn neutron_base(url: &str) -> String {
    if last_segment_is(url, "v2.0") {
        url.to_owned()
    } else {
        format!("{}/v2.0", url.trim_end_matches('/'))
    }
}

/// Nova's usually ends in `/v2.1/` or `/v2.1/<project>`; both are usable roots.
fn nova_base(url: &str) -> String {
    let has_version = url.split('/').any(|seg| seg == "v2.1" || seg == "v2");
    if has_version {
        url.to_owned()
    } else {
        format!("{}/v2.1", url.trim_end_matches('/'))
    }
}

/// Octavia's is the service root.
fn octavia_base(url: &str) -> String {
    if last_segment_is(url, "v2") {
        url.to_owned()
    } else {
        format!("{}/v2", url.trim_end_matches('/'))
    }
}

/// The planner's best-effort body: a failed fetch must never read as "not
/// deployed" (a failed Octavia keeps the previous amphora attribution).
fn optional_body(body: Option<Value>, status: &ServiceStatus) -> OptionalBody {
    match (body, status) {
        (Some(v), ServiceStatus::Ok) => OptionalBody::Fetched(v),
        (_, ServiceStatus::NotInCatalog) => OptionalBody::NotDeployed,
        _ => OptionalBody::Failed,
    }
}

fn keystone_base(url: &str) -> String {
    if last_segment_is(url, "v3") {
        url.to_owned()
    } else {
        format!("{}/v3", url.trim_end_matches('/'))
    }
}

impl Client {
    /// A client for one cloud; it authenticates on the first sync. Fails
    /// only as [`Session::new`] does.
    pub fn new(cfg: CloudConfig, metrics: ApiMetrics) -> Result<Self, ApiError> {
        Ok(Self {
            session: Session::new(cfg, metrics)?,
        })
    }

    /// The session behind the client: its cached token and its count of
    /// token requests.
    #[must_use]
    pub fn session(&self) -> &Session {
        &self.session
    }

    async fn list(&self, resource: Resource, url: Url) -> Result<Value, ApiError> {
        self.session
            .list(&ListCall {
                service: resource.service(),
                collection: resource.collection(),
                url,
            })
            .await
    }

    /// Fetches every list of DESIGN §5.
    pub async fn sync(&self) -> Result<SyncResult, SyncError> {
        let network = neutron_base(&self.session.endpoint(Resource::Networks.service()).await?);
        let identity = keystone_base(&self.session.endpoint(Resource::Projects.service()).await?);
        let (networks, subnets, ports, routers, floatingips, projects) = tokio::try_join!(
            self.list(
                Resource::Networks,
                join(&network, Resource::Networks.path())?
            ),
            self.list(Resource::Subnets, join(&network, Resource::Subnets.path())?),
            self.list(Resource::Ports, join(&network, Resource::Ports.path())?),
            self.list(Resource::Routers, join(&network, Resource::Routers.path())?),
            self.list(
                Resource::FloatingIps,
                join(&network, Resource::FloatingIps.path())?
            ),
            self.list(
                Resource::Projects,
                join(&identity, Resource::Projects.path())?
            ),
        )?;
        let (nova, octavia) = tokio::join!(self.nova(), self.octavia());
        let (servers, nova) = nova?;
        let ((loadbalancers, amphorae), octavia) = octavia?;
        let servers = optional_body(servers, &nova);
        let loadbalancers = optional_body(loadbalancers, &octavia);
        let amphorae = optional_body(amphorae, &octavia);
        Ok(SyncResult {
            bodies: ApiBodies {
                networks,
                subnets,
                ports,
                routers,
                floatingips,
                projects,
                servers,
                loadbalancers,
                amphorae,
            },
            nova,
            octavia,
        })
    }

    async fn best_effort_endpoint(
        &self,
        service_type: &str,
    ) -> Result<Result<String, ServiceStatus>, SyncError> {
        match self.session.endpoint(service_type).await {
            Ok(url) => Ok(Ok(url)),
            Err(ApiError::Catalog(CatalogError::NotInCatalog { .. })) => {
                Ok(Err(ServiceStatus::NotInCatalog))
            }
            Err(e @ ApiError::Catalog(_)) => Ok(Err(ServiceStatus::Failed {
                error: e.to_string(),
            })),
            // A token failure here is a Keystone failure: all-or-nothing.
            Err(e) => Err(e.into()),
        }
    }

    async fn nova(&self) -> Result<(Option<Value>, ServiceStatus), SyncError> {
        let base = match self
            .best_effort_endpoint(Resource::Servers.service())
            .await?
        {
            Ok(url) => nova_base(&url),
            Err(status) => return Ok((None, status)),
        };
        Ok(
            match self
                .list(Resource::Servers, join(&base, Resource::Servers.path())?)
                .await
            {
                Ok(body) => (Some(body), ServiceStatus::Ok),
                Err(e) => {
                    tracing::warn!(error = %e, "Nova server list failed; servers marked failed for this sync");
                    (
                        None,
                        ServiceStatus::Failed {
                            error: e.to_string(),
                        },
                    )
                }
            },
        )
    }

    async fn octavia(&self) -> Result<((Option<Value>, Option<Value>), ServiceStatus), SyncError> {
        let base = match self
            .best_effort_endpoint(Resource::LoadBalancers.service())
            .await?
        {
            Ok(url) => octavia_base(&url),
            Err(status) => return Ok(((None, None), status)),
        };
        let (lbs, amps) = tokio::join!(
            self.list(
                Resource::LoadBalancers,
                join(&base, Resource::LoadBalancers.path())?
            ),
            self.list(Resource::Amphorae, join(&base, Resource::Amphorae.path())?)
        );
        // Amphorae without their load balancers (or the reverse) would
        // attribute amphora ports wrongly: the service is one unit.
        Ok(match (lbs, amps) {
            (Ok(l), Ok(a)) => ((Some(l), Some(a)), ServiceStatus::Ok),
            (Err(e), _) | (_, Err(e)) => {
                tracing::warn!(error = %e, "Octavia list failed; load balancers marked failed for this sync");
                (
                    (None, None),
                    ServiceStatus::Failed {
                        error: e.to_string(),
                    },
                )
            }
        })
    }
}

/// One sync with a fresh client (for `lachesis plan --cloud`).
pub async fn fetch(cfg: &CloudConfig) -> Result<SyncResult, SyncError> {
    Client::new(cfg.clone(), ApiMetrics::default())?
        .sync()
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::auth::TokenError;
    use crate::client::paginate::PageError;

    /// Each link of an error's `source()` chain says something the links
    /// before it did not: a chain printer never repeats a cause.
    fn assert_each_cause_once(e: &dyn std::error::Error) {
        let mut texts = vec![e.to_string()];
        let mut cur = e.source();
        while let Some(src) = cur {
            let text = src.to_string();
            for earlier in &texts {
                assert!(!earlier.contains(&text), "{earlier:?} repeats {text:?}");
            }
            texts.push(text);
            cur = src.source();
        }
    }

    #[test]
    fn wrapped_errors_are_printed_once() {
        let page = ApiError::Page {
            service: "network".into(),
            endpoint: "ports".into(),
            url: "http://n/v2.0/ports".into(),
            error: PageError::Truncated,
        };
        let token = ApiError::from(TokenError::Body("no token".into()));
        for e in [SyncError::from(page), SyncError::from(token)] {
            assert_each_cause_once(&e);
        }
        let io = || std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        assert_each_cause_once(&crate::client::SaveError {
            path: "/x".into(),
            error: io(),
        });
        assert_each_cause_once(&crate::client::LoadError::Read {
            path: "/x".into(),
            error: io(),
        });
        assert_each_cause_once(&crate::config::ConfigError::Read {
            path: "/x".into(),
            error: io(),
        });
    }

    #[test]
    fn service_roots_from_catalog_urls() {
        assert_eq!(neutron_base("http://n:9696/"), "http://n:9696/v2.0");
        assert_eq!(neutron_base("http://n:9696/v2.0/"), "http://n:9696/v2.0/");
        assert_eq!(nova_base("http://c:8774/v2.1/"), "http://c:8774/v2.1/");
        assert_eq!(
            nova_base("http://c:8774/v2.1/abc"),
            "http://c:8774/v2.1/abc"
        );
        assert_eq!(nova_base("http://c/compute"), "http://c/compute/v2.1");
        assert_eq!(octavia_base("http://o:9876"), "http://o:9876/v2");
        assert_eq!(keystone_base("http://k:5000/v3/"), "http://k:5000/v3/");
        assert_eq!(keystone_base("http://k:5000"), "http://k:5000/v3");
    }
}
