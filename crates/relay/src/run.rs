//! The relay's loop (DESIGN §17, docs/fleet.md "Running a relay"): a full
//! sync, a snapshot, then notifications, digests, resyncs, snapshots and
//! heartbeats as they fall due, until cancelled.
//!
//! OpenStack failing never stops it: the failure is counted, logged when
//! the relay's health changes, retried with [`lachesis_notify::backoff`],
//! and heartbeats go on with the old `checked_ms`, so agents see the age of
//! their metadata rise. The stream failing never loses a record: they stay
//! pending and are offered again with the same backoff.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lachesis_fleet::{follow, lean, repair, vanished, Action, Entry, Ignored, Key, Outcome};
use lachesis_notify::backoff;
use lachesis_openstack::client::catalog::CatalogError;
use lachesis_openstack::client::ApiError;
use lachesis_openstack::{Client, PageSink, Revisions, ServiceStatus, SyncError};
use lachesis_planner::Resource;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::{sleep_until, Instant};
use tokio_util::sync::CancellationToken;

use crate::held::Held;
use crate::metrics::{Dropped, RelayMetrics};
use crate::publish::Publisher;
use crate::sink::Input;

/// How often the relay writes a heartbeat (DESIGN §17: every 10 s).
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(10);

/// How soon after a notification gap the digest runs: long enough for a
/// consumer's reconnection to settle, short enough that what the gap lost
/// is back within seconds.
pub const GAP_DIGEST_DELAY: Duration = Duration::from_secs(1);

/// When the relay does what (from `relay.*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// The relay's name in its records (unique in a fleet).
    pub name: String,
    /// Id + revision lists of every collection, then repairs.
    pub digest_interval: Duration,
    /// A full sync.
    pub resync_interval: Duration,
    /// A full snapshot onto the stream.
    pub snapshot_interval: Duration,
    /// A heartbeat ([`HEARTBEAT_INTERVAL`]; shorter in tests).
    pub heartbeat_interval: Duration,
}

/// The relay: OpenStack through `client`, the stream through `publisher`.
#[derive(Debug)]
pub struct Relay<P> {
    schedule: Schedule,
    client: Client,
    publisher: P,
    held: Held,
    /// The last successful full sync or digest (ms since the epoch; 0:
    /// none yet).
    checked_ms: u64,
    /// Whether a full sync has succeeded (digests need one).
    synced: bool,
    /// OpenStack calls failed in a row (0: healthy).
    failures: u32,
    /// Stream writes failed in a row (0: healthy).
    publish_failures: u32,
    next: Deadlines,
}

/// When each periodic step is next due.
#[derive(Debug, Clone, Copy)]
struct Deadlines {
    resync: Instant,
    digest: Instant,
    snapshot: Instant,
    heartbeat: Instant,
    /// The next attempt to write pending records after a failure.
    publish: Instant,
}

/// What the loop does next.
#[derive(Debug)]
enum Due {
    Input(Input),
    Resync,
    Digest,
    Snapshot,
    Heartbeat,
    Publish,
}

/// Milliseconds since the epoch, now.
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A sync's lists, each item cut to its list's fields as it arrives.
#[derive(Debug, Default)]
struct Listed(BTreeMap<Resource, Vec<Value>>);

impl PageSink for Listed {
    fn page(&mut self, resource: Resource, items: Vec<Value>) {
        let list = self.0.entry(resource).or_default();
        list.extend(items.iter().map(|item| lean(resource, item)));
    }
}

/// Whether `e` is a best-effort service missing from the catalog: a normal
/// cloud shape, not a failure.
fn not_in_catalog(e: &SyncError) -> bool {
    matches!(
        e,
        SyncError::Api(ApiError::Catalog(CatalogError::NotInCatalog { .. }))
    )
}

/// Nova and Octavia are best-effort (DESIGN §5): their failure does not
/// fail a digest.
fn best_effort(kind: Resource) -> bool {
    !kind.is_required()
}

impl<P: Publisher> Relay<P> {
    /// A relay that has done nothing yet; [`Relay::run`] starts it.
    #[must_use]
    pub fn new(schedule: Schedule, client: Client, publisher: P, metrics: RelayMetrics) -> Self {
        let now = Instant::now();
        let held = Held::new(schedule.name.clone(), metrics);
        Relay {
            next: Deadlines {
                resync: now,
                digest: now + schedule.digest_interval,
                // The first snapshot follows the first sync.
                snapshot: now + schedule.snapshot_interval,
                heartbeat: now + schedule.heartbeat_interval,
                publish: now,
            },
            schedule,
            client,
            publisher,
            held,
            checked_ms: 0,
            synced: false,
            failures: 0,
            publish_failures: 0,
        }
    }

    /// Runs until `cancel`: the full sync first (retried until it
    /// succeeds), a snapshot, then whatever falls due. `inputs` is the
    /// receiver of [`crate::channel`]; when every sender is gone the
    /// relay goes on with its digests.
    pub async fn run(
        mut self,
        mut inputs: mpsc::UnboundedReceiver<Input>,
        cancel: CancellationToken,
    ) {
        let mut open = true;
        loop {
            let next = self.next;
            let pending = self.held.has_pending();
            let due = tokio::select! {
                biased;
                () = cancel.cancelled() => break,
                input = inputs.recv(), if open => {
                    let Some(input) = input else {
                        open = false;
                        continue;
                    };
                    Due::Input(input)
                }
                () = sleep_until(next.heartbeat) => Due::Heartbeat,
                () = sleep_until(next.resync) => Due::Resync,
                () = sleep_until(next.digest) => Due::Digest,
                () = sleep_until(next.snapshot) => Due::Snapshot,
                () = sleep_until(next.publish), if pending => Due::Publish,
            };
            // A step in flight (a sync of a large cloud takes seconds)
            // gives way to a stop: nothing it left half done outlives the
            // process.
            tokio::select! {
                biased;
                () = cancel.cancelled() => break,
                () = self.step(due) => {}
            }
        }
        tracing::info!(relay = %self.schedule.name, "relay stopped");
    }

    async fn step(&mut self, due: Due) {
        let now = Instant::now();
        match due {
            Due::Input(Input::Notification {
                event_type,
                payload,
            }) => self.notification(&event_type, &payload).await,
            Due::Input(Input::Gap) => {
                self.next.digest = self.next.digest.min(now + GAP_DIGEST_DELAY);
            }
            Due::Resync => self.resync().await,
            Due::Digest => self.digest().await,
            Due::Snapshot => {
                self.next.snapshot = now + self.schedule.snapshot_interval;
                // Before the first full sync the state is partial (or
                // empty): a complete snapshot of it would make every
                // agent's heal rule remove what it lacks. The first sync
                // writes the first snapshot.
                if self.synced {
                    self.snapshot();
                }
            }
            Due::Heartbeat => {
                self.next.heartbeat = now + self.schedule.heartbeat_interval;
                self.held.heartbeat(now_ms(), self.checked_ms);
            }
            Due::Publish => {}
        }
        self.flush().await;
    }

    /// A snapshot, and the tombstones it supersedes pruned: an agent's
    /// heal rule removes what a complete snapshot lacks, so a tombstone
    /// older than one snapshot only costs memory.
    fn snapshot(&mut self) {
        let now = now_ms();
        let interval = u64::try_from(self.schedule.snapshot_interval.as_millis()).unwrap_or(0);
        self.held
            .state
            .prune_tombstones(now.saturating_sub(interval));
        self.held.snapshot(now);
    }

    /// Writes what is pending, unless a failed write's backoff runs.
    async fn flush(&mut self) {
        if !self.held.has_pending() || Instant::now() < self.next.publish {
            return;
        }
        match self.held.flush(&mut self.publisher).await {
            Ok(()) => {
                if self.publish_failures > 0 {
                    tracing::info!(
                        failures = self.publish_failures,
                        "the state stream takes records again"
                    );
                }
                self.publish_failures = 0;
            }
            Err(e) => {
                self.held.metrics.publish_error();
                if self.publish_failures == 0 {
                    tracing::warn!(error = %e, "the state stream refused records; they stay pending and are offered again with backoff");
                } else {
                    tracing::debug!(error = %e, "the state stream refused records again");
                }
                self.next.publish = Instant::now() + backoff(self.publish_failures);
                self.publish_failures = self.publish_failures.saturating_add(1);
            }
        }
    }

    /// OpenStack answered a sync or digest: the state is checked as of now.
    fn checked(&mut self, at_ms: u64) {
        if self.failures > 0 {
            tracing::info!(
                failures = self.failures,
                "OpenStack answers again; the relay's state is checked"
            );
        }
        self.failures = 0;
        self.checked_ms = at_ms;
        self.held.metrics.checked(at_ms);
    }

    /// An OpenStack call failed: counted, logged when the health changes,
    /// and the step that heals it (the sync until one succeeded, then a
    /// digest) is due after the backoff.
    fn failed(&mut self, what: &str, e: &SyncError) {
        self.held.metrics.openstack_error();
        if self.failures == 0 {
            tracing::warn!(error = %e, "{what} failed; retrying with backoff, heartbeats keep the last check's time");
        } else {
            tracing::debug!(error = %e, failures = self.failures, "{what} failed again");
        }
        let retry = Instant::now() + backoff(self.failures);
        self.failures = self.failures.saturating_add(1);
        if self.synced {
            self.next.digest = self.next.digest.min(retry);
        } else {
            self.next.resync = retry;
        }
    }

    async fn resync(&mut self) {
        let from = now_ms();
        let mut listed = Listed::default();
        match self.client.sync_into(&mut listed).await {
            Ok(services) => {
                let mut result = Ok(());
                for kind in Resource::ALL {
                    let status = match kind.service() {
                        "compute" => &services.nova,
                        "load-balancer" => &services.octavia,
                        _ => &ServiceStatus::Ok,
                    };
                    // A failed best-effort list is not "empty": nothing of
                    // it is tombstoned.
                    let complete = !matches!(status, ServiceStatus::Failed { .. });
                    let items = listed.0.remove(&kind).unwrap_or_default();
                    if complete || !items.is_empty() {
                        result = result.and(self.observe_list(kind, &items, from, complete).await);
                    }
                }
                self.held.metrics.sync(result.is_ok());
                if let Err(e) = result {
                    self.failed("a GET of the full sync", &e);
                    return;
                }
                self.next.resync = Instant::now() + self.schedule.resync_interval;
                self.checked(from);
                if !self.synced {
                    self.synced = true;
                    tracing::info!(relay = %self.schedule.name, records = self.held.state.live(), "first full sync done; writing a snapshot");
                    self.next.snapshot = Instant::now() + self.schedule.snapshot_interval;
                    self.snapshot();
                }
            }
            Err(e) => {
                self.held.metrics.sync(false);
                self.failed("the full sync", &e);
            }
        }
    }

    /// Every item of a list observed at `from_ms`; with `complete`, what
    /// the state holds of `kind` that the list lacks is tombstoned. A
    /// Neutron item without `revision_number` is fetched by id.
    async fn observe_list(
        &mut self,
        kind: Resource,
        items: &[Value],
        from_ms: u64,
        complete: bool,
    ) -> Result<(), SyncError> {
        let now = now_ms();
        let mut unnumbered = Vec::new();
        for item in items {
            if self.held.observed(kind, item, now).is_none() {
                if let Some(id) = item.get("id").and_then(Value::as_str) {
                    unnumbered.push(id.to_owned());
                }
            }
        }
        for id in unnumbered {
            self.held.metrics.repaired_get();
            self.fetch(&Key::new(kind, id)).await?;
        }
        if complete {
            let ids = items
                .iter()
                .filter_map(|i| i.get("id").and_then(Value::as_str));
            let gone = vanished(kind, ids, &self.held.state, from_ms);
            self.tombstone(gone);
        }
        Ok(())
    }

    fn tombstone(&mut self, entries: Vec<Entry>) {
        let now = now_ms();
        for entry in entries {
            if self.held.put(entry, now) == Outcome::Applied {
                self.held.metrics.repaired_tombstone();
            }
        }
    }

    /// GETs `key` and publishes the answer under the guard; a 404 is a
    /// delete.
    async fn fetch(&mut self, key: &Key) -> Result<(), SyncError> {
        self.held.metrics.get(key.kind);
        let answer = self.client.get_one(key.kind, &key.id).await?;
        let now = now_ms();
        match answer {
            Some(resource) => {
                if self.held.observed(key.kind, &resource, now).is_none() {
                    tracing::warn!(%key, "OpenStack answered a Neutron resource without revision_number: not published");
                }
            }
            None => {
                self.held.gone(key.kind, &key.id, None, now);
            }
        }
        Ok(())
    }

    /// Every collection's digest list against the state: GETs for what
    /// differs, tombstones for what vanished.
    async fn digest(&mut self) {
        self.next.digest = Instant::now() + self.schedule.digest_interval;
        if !self.synced {
            // The full sync that is retried checks everything anyway.
            return;
        }
        let from = now_ms();
        let mut result = Ok(());
        for kind in Resource::ALL {
            let outcome = self.digest_one(kind, from).await;
            match outcome {
                Err(e) if not_in_catalog(&e) => {}
                Err(e) if best_effort(kind) => {
                    self.held.metrics.openstack_error();
                    tracing::debug!(error = %e, list = kind.collection(), "a best-effort list's digest failed");
                }
                Err(e) => {
                    result = Err(e);
                    break;
                }
                Ok(()) => {}
            }
        }
        self.held.metrics.digest(result.is_ok());
        match result {
            Ok(()) => self.checked(from),
            Err(e) => self.failed("a digest", &e),
        }
    }

    async fn digest_one(&mut self, kind: Resource, from_ms: u64) -> Result<(), SyncError> {
        match self.client.list_revisions(kind).await? {
            Revisions::Numbers(listed) => {
                let mut numbered = Vec::with_capacity(listed.len());
                let mut unnumbered = Vec::new();
                for (id, rev) in listed {
                    match rev {
                        Some(rev) => numbered.push((id, rev)),
                        None => unnumbered.push(id),
                    }
                }
                let plan = repair(kind, &numbered, &self.held.state, from_ms);
                for id in plan.get.into_iter().chain(unnumbered) {
                    self.held.metrics.repaired_get();
                    self.fetch(&Key::new(kind, id)).await?;
                }
                self.tombstone(plan.tombstones);
                Ok(())
            }
            Revisions::Bodies(items) => {
                let items: Vec<Value> = items.iter().map(|i| lean(kind, i)).collect();
                self.observe_list(kind, &items, from_ms, true).await
            }
        }
    }

    /// One notification, through `follow()`.
    async fn notification(&mut self, event_type: &str, payload: &Value) {
        let now = now_ms();
        match follow(event_type, payload) {
            Action::Publish(entry) => {
                let outcome = self.held.put(entry, now);
                self.count(outcome);
            }
            Action::Delete { kind, id, rev } => {
                if let Some(outcome) = self.held.gone(kind, &id, rev, now) {
                    self.count(outcome);
                }
            }
            Action::Fetch(keys) => {
                for key in keys {
                    if let Err(e) = self.fetch(&key).await {
                        // What was not fetched, the digest the failure
                        // brings forward fetches.
                        self.failed(&format!("GET {key}"), &e);
                        break;
                    }
                }
            }
            Action::Ignore(Ignored::NoId) => self.held.metrics.dropped(Dropped::Undecodable),
            Action::Ignore(Ignored::Start | Ignored::Unrelated) => {}
        }
    }

    fn count(&self, outcome: Outcome) {
        match outcome {
            Outcome::Applied => {}
            Outcome::Stale => self.held.metrics.dropped(Dropped::Stale),
            Outcome::Duplicate => self.held.metrics.dropped(Dropped::Duplicate),
        }
    }
}
