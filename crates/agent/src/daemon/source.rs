//! The metadata source `metadata.source` chose (DESIGN §17): the agent's
//! own OpenStack syncs, or relay mode's assembled stream. One reconciler
//! type over either, and what cold start waits for between attempts.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use lachesis_planner::{Plan, PlanOptions};

use crate::preflight::Resolved;
use crate::reconcile::{
    MetadataSource, OpenStackSource, ReconcileMetrics, RelaySource, SharedAssembler, SyncError,
    Synced,
};

/// How long cold start gives the state stream to deliver a complete
/// snapshot before it counts as a failed first sync (and, with a state
/// file, boots degraded from its plan): a 20 000-record snapshot reads in
/// about 1 s (decision 0008), so a healthy stream is whole well within
/// this and a restart does not boot degraded for nothing.
pub(super) const RELAY_BOOT_WAIT: Duration = Duration::from_secs(5);

/// The configured source.
#[derive(Debug)]
pub(super) enum ConfiguredSource {
    /// `metadata.source: openstack` (boxed: the client is large, and one
    /// source lives per process).
    OpenStack(Box<OpenStackSource>),
    /// `metadata.source: relay`.
    Relay(RelaySource),
}

impl ConfiguredSource {
    /// The source of `resolved`: relay mode when `relay` holds the stream
    /// task's assembler, else the cloud's client.
    pub(super) fn new(
        resolved: &Resolved,
        relay: Option<SharedAssembler>,
        api: lachesis_openstack::ApiMetrics,
        reconcile: &ReconcileMetrics,
    ) -> anyhow::Result<ConfiguredSource> {
        let steps = reconcile.plan().clone();
        if let Some(shared) = relay {
            return Ok(ConfiguredSource::Relay(
                RelaySource::new(shared).with_step_metrics(steps),
            ));
        }
        let cloud = resolved
            .cloud
            .clone()
            .context("metadata.source is openstack but no cloud was resolved")?;
        let client =
            lachesis_openstack::Client::new(cloud, api).context("building the OpenStack client")?;
        Ok(ConfiguredSource::OpenStack(Box::new(
            OpenStackSource::new(client)
                .with_origin(resolved.origin.clone())
                .with_step_metrics(steps),
        )))
    }

    /// Cold start's attempt: relay mode first gives the stream
    /// [`RELAY_BOOT_WAIT`] to become whole.
    pub(super) async fn first_sync(
        &self,
        previous: Option<Arc<Plan>>,
        options: PlanOptions,
    ) -> Result<Synced, SyncError> {
        if let ConfiguredSource::Relay(relay) = self {
            let _in_time = tokio::time::timeout(RELAY_BOOT_WAIT, relay.shared().ready()).await;
        }
        self.sync(previous, options).await
    }

    /// Between cold start's attempts: the backoff, or in relay mode until
    /// the stream is whole, whichever comes first (its sync is local, so
    /// there is nothing to spare by waiting longer).
    pub(super) async fn retry_wait(&self, backoff: Duration) {
        match self {
            ConfiguredSource::OpenStack(_) => tokio::time::sleep(backoff).await,
            ConfiguredSource::Relay(relay) => {
                let _ready = tokio::time::timeout(backoff, relay.shared().ready()).await;
            }
        }
    }
}

impl MetadataSource for ConfiguredSource {
    async fn sync(
        &self,
        previous: Option<Arc<Plan>>,
        options: PlanOptions,
    ) -> Result<Synced, SyncError> {
        match self {
            ConfiguredSource::OpenStack(s) => s.sync(previous, options).await,
            ConfiguredSource::Relay(s) => s.sync(previous, options).await,
        }
    }
}
