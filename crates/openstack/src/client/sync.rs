//! One full metadata sync (DESIGN §5): every list, all pages, with the
//! all-or-nothing / best-effort split. Pages go to a [`PageSink`] as they
//! arrive: the agent parses each one and drops it; `lachesis plan
//! --save-dir` merges them into bodies.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use lachesis_planner::{ApiBodies, OptionalBody, Resource, SnapshotParser, SourceStatus, Sources};
use serde_json::{Map, Value};
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

/// Where a sync delivers each list, page by page, as the pages arrive.
///
/// The client's seam: it calls `page`; the agent hands it the planner's
/// [`SnapshotParser`] (each page parsed, then dropped: no list is held
/// whole), [`Client::sync`] a collector that merges the pages into
/// [`ApiBodies`] (for `lachesis plan --save-dir` and tests).
pub trait PageSink: Send {
    /// The next page of `resource`'s list: its items, in order. The lists
    /// of a sync are fetched concurrently, so pages of different lists
    /// interleave. A best-effort list whose service then fails has had
    /// pages delivered too: the sync's [`Services`] says which best-effort
    /// lists are complete, and only those may be used.
    fn page(&mut self, resource: Resource, items: Vec<Value>);
}

impl PageSink for SnapshotParser {
    fn page(&mut self, resource: Resource, items: Vec<Value>) {
        SnapshotParser::page(self, resource, &items);
    }
}

/// How the best-effort services fared in a sync that succeeded (Neutron
/// and Keystone complete).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Services {
    /// The outcome of `servers`.
    pub nova: ServiceStatus,
    /// The outcome of `loadbalancers` and `amphorae` together: one failing
    /// fails both, since either alone would attribute amphora ports wrongly.
    pub octavia: ServiceStatus,
}

impl Services {
    /// True when a best-effort service failed (not when it is absent).
    #[must_use]
    pub fn is_partial(&self) -> bool {
        matches!(self.nova, ServiceStatus::Failed { .. })
            || matches!(self.octavia, ServiceStatus::Failed { .. })
    }

    /// Each best-effort list's status in the planner's terms (what
    /// [`SnapshotParser::finish`] keeps).
    #[must_use]
    pub fn sources(&self) -> Sources {
        let of = |status: &ServiceStatus| match status {
            ServiceStatus::Ok => SourceStatus::Ok,
            ServiceStatus::Failed { .. } => SourceStatus::Failed,
            ServiceStatus::NotInCatalog => SourceStatus::Absent,
        };
        Sources {
            servers: of(&self.nova),
            loadbalancers: of(&self.octavia),
            amphorae: of(&self.octavia),
        }
    }
}

/// Pages merged into one body per list, as [`ApiBodies`] holds them.
#[derive(Debug, Default)]
struct Merged {
    lists: BTreeMap<Resource, Vec<Value>>,
}

impl PageSink for Merged {
    fn page(&mut self, resource: Resource, items: Vec<Value>) {
        self.lists.entry(resource).or_default().extend(items);
    }
}

impl Merged {
    /// The bodies; a best-effort list is `Fetched` only when its service
    /// is `Ok` (a failed fetch must never read as "not deployed": a failed
    /// Octavia keeps the previous amphora attribution).
    fn into_bodies(mut self, services: &Services) -> ApiBodies {
        let mut body = |r: Resource| {
            let mut body = Map::new();
            let items = self.lists.remove(&r).unwrap_or_default();
            body.insert(r.collection().to_owned(), Value::Array(items));
            Value::Object(body)
        };
        let optional = |body: Value, status: &ServiceStatus| match status {
            ServiceStatus::Ok => OptionalBody::Fetched(body),
            ServiceStatus::NotInCatalog => OptionalBody::NotDeployed,
            ServiceStatus::Failed { .. } => OptionalBody::Failed,
        };
        ApiBodies {
            networks: body(Resource::Networks),
            subnets: body(Resource::Subnets),
            ports: body(Resource::Ports),
            routers: body(Resource::Routers),
            floatingips: body(Resource::FloatingIps),
            projects: body(Resource::Projects),
            servers: optional(body(Resource::Servers), &services.nova),
            loadbalancers: optional(body(Resource::LoadBalancers), &services.octavia),
            amphorae: optional(body(Resource::Amphorae), &services.octavia),
        }
    }
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

pub(super) fn join(base: &str, path: &str) -> Result<Url, SyncError> {
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

/// The first page of `resource`'s list under `base`: its path and, for a
/// list with field selection, one `fields=` per field (Neutron's form;
/// it then answers those fields only, about half the bytes, DESIGN §17).
pub(super) fn list_url(base: &str, resource: Resource) -> Result<Url, SyncError> {
    let mut url = join(base, resource.path())?;
    if let Some(fields) = resource.fields() {
        let mut query = url.query_pairs_mut();
        for field in fields {
            query.append_pair("fields", field);
        }
    }
    Ok(url)
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

    /// The versioned root of `resource`'s service, from the token's
    /// catalog.
    pub(super) async fn base(&self, resource: Resource) -> Result<String, ApiError> {
        let url = self.session.endpoint(resource.service()).await?;
        Ok(match resource.service() {
            "network" => neutron_base(&url),
            "identity" => keystone_base(&url),
            "compute" => nova_base(&url),
            _ => octavia_base(&url),
        })
    }

    /// Fetches one list into the shared sink. The sink is locked only while
    /// a page is handed over, never across a request.
    pub(super) async fn list<S: PageSink>(
        &self,
        resource: Resource,
        url: Url,
        sink: &Mutex<&mut S>,
    ) -> Result<(), ApiError> {
        let call = ListCall {
            service: resource.service(),
            collection: resource.collection(),
            url,
        };
        self.session
            .list(&call, |items| {
                sink.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .page(resource, items);
            })
            .await
    }

    /// Fetches every list of DESIGN §5, merged into one body per list.
    pub async fn sync(&self) -> Result<SyncResult, SyncError> {
        let mut merged = Merged::default();
        let services = self.sync_into(&mut merged).await?;
        Ok(SyncResult {
            bodies: merged.into_bodies(&services),
            nova: services.nova,
            octavia: services.octavia,
        })
    }

    /// Fetches every list of DESIGN §5, handing each page to `sink` as it
    /// arrives. On an error nothing `sink` got may be used (a Neutron or
    /// Keystone list is incomplete); on success, a best-effort list is
    /// complete only when [`Services`] says `Ok`.
    pub async fn sync_into<S: PageSink>(&self, sink: &mut S) -> Result<Services, SyncError> {
        let sink = Mutex::new(sink);
        let network = neutron_base(&self.session.endpoint(Resource::Networks.service()).await?);
        let identity = keystone_base(&self.session.endpoint(Resource::Projects.service()).await?);
        tokio::try_join!(
            self.list(
                Resource::Networks,
                list_url(&network, Resource::Networks)?,
                &sink
            ),
            self.list(
                Resource::Subnets,
                list_url(&network, Resource::Subnets)?,
                &sink
            ),
            self.list(Resource::Ports, list_url(&network, Resource::Ports)?, &sink),
            self.list(
                Resource::Routers,
                list_url(&network, Resource::Routers)?,
                &sink
            ),
            self.list(
                Resource::FloatingIps,
                list_url(&network, Resource::FloatingIps)?,
                &sink
            ),
            self.list(
                Resource::Projects,
                list_url(&identity, Resource::Projects)?,
                &sink
            ),
        )?;
        let (nova, octavia) = tokio::join!(self.nova(&sink), self.octavia(&sink));
        Ok(Services {
            nova: nova?,
            octavia: octavia?,
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

    async fn nova<S: PageSink>(&self, sink: &Mutex<&mut S>) -> Result<ServiceStatus, SyncError> {
        let base = match self
            .best_effort_endpoint(Resource::Servers.service())
            .await?
        {
            Ok(url) => nova_base(&url),
            Err(status) => return Ok(status),
        };
        let url = list_url(&base, Resource::Servers)?;
        Ok(match self.list(Resource::Servers, url, sink).await {
            Ok(()) => ServiceStatus::Ok,
            Err(e) => {
                tracing::warn!(error = %e, "Nova server list failed; servers marked failed for this sync");
                ServiceStatus::Failed {
                    error: e.to_string(),
                }
            }
        })
    }

    async fn octavia<S: PageSink>(&self, sink: &Mutex<&mut S>) -> Result<ServiceStatus, SyncError> {
        let base = match self
            .best_effort_endpoint(Resource::LoadBalancers.service())
            .await?
        {
            Ok(url) => octavia_base(&url),
            Err(status) => return Ok(status),
        };
        let (lbs, amps) = tokio::join!(
            self.list(
                Resource::LoadBalancers,
                list_url(&base, Resource::LoadBalancers)?,
                sink
            ),
            self.list(
                Resource::Amphorae,
                list_url(&base, Resource::Amphorae)?,
                sink
            )
        );
        // Amphorae without their load balancers (or the reverse) would
        // attribute amphora ports wrongly: the service is one unit.
        Ok(match (lbs, amps) {
            (Ok(()), Ok(())) => ServiceStatus::Ok,
            (Err(e), _) | (_, Err(e)) => {
                tracing::warn!(error = %e, "Octavia list failed; load balancers marked failed for this sync");
                ServiceStatus::Failed {
                    error: e.to_string(),
                }
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
