//! The metadata seam: one sync, parsed and planned (DESIGN §5, §6, §7).

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use lachesis_planner::{
    plan_with_previous, summarize, Plan, PlanOptions, SnapshotParser, Sources, Topology,
};

use super::plan_metrics::{PlanMetrics, PlanStep};

/// A project or a server: its id (what prunes compare) and its name (what
/// the info series show).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Named {
    /// Keystone project id or Nova server id.
    pub id: String,
    /// Its name (`""` when the API gave none).
    pub name: String,
}

impl Named {
    /// A pair from borrowed parts.
    #[must_use]
    pub fn new(id: &str, name: &str) -> Self {
        Named {
            id: id.to_owned(),
            name: name.to_owned(),
        }
    }
}

/// One successful sync: the desired state and the lists the pass needs
/// beyond it.
#[derive(Debug, Clone)]
pub struct Synced {
    /// The plan of this snapshot (planned with the last committed plan, so a
    /// failed Octavia list keeps the amphora attribution, docs/planner.md).
    pub plan: Arc<Plan>,
    /// The Keystone project list (always fetched: a sync without it fails).
    pub projects: Vec<Named>,
    /// The Nova server list; `None` when Nova failed or is not deployed —
    /// unknown, never "no servers" (`plan.sources.servers` says which).
    pub servers: Option<Vec<Named>>,
    /// Entries or parts the parser dropped (malformed input).
    pub skipped: usize,
    /// The snapshot summarised for the debug pages (never planned).
    pub topology: Arc<Topology>,
}

impl Synced {
    /// Which best-effort lists were fetched, failed or absent.
    #[must_use]
    pub fn sources(&self) -> Sources {
        self.plan.sources
    }
}

/// A sync that must not be used: nothing of it is applied.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// Neutron or Keystone did not answer completely.
    #[error("fetching the OpenStack lists")]
    Fetch(#[source] lachesis_openstack::SyncError),
    /// Keystone or Neutron refused this agent's credentials: a token
    /// request answered 401 or 403, or a list still answered 401 after a
    /// fresh token, or 403. No retry fixes it: the clouds file's entry (or
    /// the role the cloud gives its user) must change, so it is logged as
    /// an error naming both, not as a passing warning.
    #[error("OpenStack refused the credentials of {origin} (HTTP {status}); correct that entry, or the user's role (docs/openstack-access.md)")]
    Refused {
        /// Where the credentials came from (`cloud "prod" in /etc/openstack/clouds.yaml`).
        origin: String,
        /// 401 or 403.
        status: u16,
        /// The refused call.
        #[source]
        source: Box<lachesis_openstack::SyncError>,
    },
    /// The planning task stopped without a plan (it panicked).
    #[error("planning the snapshot: {0}")]
    Plan(String),
    /// Relay mode: no complete snapshot has been read from the state
    /// stream yet, so the state is not whole (boot treats it as a failed
    /// first sync: degraded from the state file's plan, or waiting).
    #[error("no complete snapshot read from the state stream yet ({0})")]
    NotReady(String),
}

impl SyncError {
    /// Whether OpenStack refused the credentials ([`SyncError::Refused`]).
    #[must_use]
    pub fn is_refusal(&self) -> bool {
        matches!(self, SyncError::Refused { .. })
    }
}

/// Where a pass gets the desired state from. Consumer-owned: the real one is
/// [`OpenStackSource`]; tests script one.
pub trait MetadataSource: Send + Sync {
    /// Fetches a full snapshot and plans it. `previous` is the last committed
    /// plan (the reconcile contract of docs/planner.md); nothing is retained
    /// between calls.
    fn sync(
        &self,
        previous: Option<Arc<Plan>>,
        options: PlanOptions,
    ) -> impl Future<Output = Result<Synced, SyncError>> + Send;
}

impl<T: MetadataSource> MetadataSource for Arc<T> {
    fn sync(
        &self,
        previous: Option<Arc<Plan>>,
        options: PlanOptions,
    ) -> impl Future<Output = Result<Synced, SyncError>> + Send {
        (**self).sync(previous, options)
    }
}

/// Where the last successful sync of an [`OpenStackSource`] spent its time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SyncTimings {
    /// Fetching every list (Keystone, Neutron, Nova, Octavia), each page
    /// parsed as it arrives.
    pub fetch: Duration,
    /// Sorting the parsed lists, planning the snapshot, freeing it.
    pub plan: Duration,
}

/// The real source: the OpenStack client (one token across syncs), the
/// parser and the planner.
#[derive(Debug)]
pub struct OpenStackSource {
    client: lachesis_openstack::Client,
    /// Where the client's credentials come from, for a refusal's message.
    origin: String,
    last: Mutex<Option<SyncTimings>>,
    steps: PlanMetrics,
}

impl OpenStackSource {
    /// Syncs with `client`.
    #[must_use]
    pub fn new(client: lachesis_openstack::Client) -> Self {
        OpenStackSource {
            client,
            origin: "the configured cloud".to_owned(),
            last: Mutex::new(None),
            steps: PlanMetrics::default(),
        }
    }

    /// Names where the credentials come from in a refusal's message
    /// (`crate::preflight::Resolved::origin`).
    #[must_use]
    pub fn with_origin(mut self, origin: String) -> Self {
        self.origin = origin;
        self
    }

    /// Observes each successful sync's `fetch` and `plan` steps in
    /// `metrics` (cold start's and every pass's alike), instead of in
    /// unregistered ones.
    #[must_use]
    pub fn with_step_metrics(mut self, metrics: PlanMetrics) -> Self {
        self.steps = metrics;
        self
    }

    /// The last successful sync's timings (`None` before the first): what a
    /// pass spent before its diff (the reconcile benchmark splits passes
    /// with it; debug logs carry the same figures).
    #[must_use]
    pub fn last_timings(&self) -> Option<SyncTimings> {
        *self.last.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The status of a refused call: 401 (after one fresh token, the session's
/// rule) or 403 from any service a sync cannot do without.
fn refused(e: &lachesis_openstack::SyncError) -> Option<u16> {
    match e {
        lachesis_openstack::SyncError::Api(api) => api.status().filter(|s| matches!(s, 401 | 403)),
        lachesis_openstack::SyncError::Url { .. } => None,
    }
}

/// Hands the memory a sync freed back to the kernel. glibc keeps freed
/// heap for reuse, so without this the agent's resident set stays at a
/// sync's peak between syncs (measured with `make bench-agent` when a sync
/// held every list as JSON: ~290 MiB resident for ~45 MiB live). Other
/// allocators return memory on their own.
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory at the allocator's
    // discretion; it has no preconditions and touches no live allocation.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The sync of `snapshot`, whose parse dropped `skipped` entries or parts:
/// its plan with `previous`, its projects' and servers' names, its
/// topology.
pub(super) fn synced(
    snapshot: &lachesis_planner::Snapshot,
    skipped: usize,
    options: PlanOptions,
    previous: Option<&Plan>,
) -> Synced {
    let plan = plan_with_previous(snapshot, &options, previous);
    let named = |id: &str, name: &str| Named::new(id, name);
    Synced {
        plan: Arc::new(plan),
        projects: snapshot
            .projects
            .iter()
            .map(|p| named(&p.id, &p.name))
            .collect(),
        servers: snapshot
            .servers
            .as_ref()
            .map(|list| list.iter().map(|s| named(&s.id, &s.name)).collect()),
        skipped,
        topology: Arc::new(summarize(snapshot)),
    }
}

/// Runs `work` (a parse and a plan, [`synced`]) on a blocking thread:
/// planning a large cloud takes a CPU for a while, off the async workers,
/// which serve the scraper and HTTP meanwhile. Returns its output and how
/// long it took, freeing included: what `work` drops is freed there, timed
/// and off the async workers, and handed back to the kernel.
pub(super) async fn off_workers<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<(T, Duration), SyncError> {
    tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let out = work();
        release_freed_memory();
        (out, started.elapsed())
    })
    .await
    .map_err(|e| SyncError::Plan(e.to_string()))
}

impl MetadataSource for OpenStackSource {
    async fn sync(
        &self,
        previous: Option<Arc<Plan>>,
        options: PlanOptions,
    ) -> Result<Synced, SyncError> {
        let started = Instant::now();
        // Each page is parsed as it arrives and dropped (DESIGN §17: a
        // sync on a diet): no list is ever held whole as JSON.
        let mut parser = SnapshotParser::new();
        let services = self
            .client
            .sync_into(&mut parser)
            .await
            .map_err(|e| match refused(&e) {
                Some(status) => SyncError::Refused {
                    origin: self.origin.clone(),
                    status,
                    source: Box::new(e),
                },
                None => SyncError::Fetch(e),
            })?;
        let fetch = started.elapsed();
        let sources = services.sources();
        let (synced, plan) = off_workers(move || {
            let (snapshot, report) = parser.finish(sources);
            synced(
                &snapshot,
                report.skipped.len(),
                options,
                previous.as_deref(),
            )
        })
        .await?;
        let timings = SyncTimings { fetch, plan };
        tracing::debug!(fetch = ?timings.fetch, plan = ?timings.plan, "sync planned");
        self.steps.observe(PlanStep::Fetch, timings.fetch);
        self.steps.observe(PlanStep::Plan, timings.plan);
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Some(timings);
        Ok(synced)
    }
}
