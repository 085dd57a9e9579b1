//! The periodic drivers of the ledger owner (DESIGN §9, §12, §13): each
//! waits for boot phase `state_restored`, reads its interval from the live
//! tunables at each wait, and stops when cancelled.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::kernel::FlowKernel;
use super::owner::{LedgerOwner, Relief};
use crate::boot::{BootFailed, BootWaiter, Phase};
use crate::config::{SharedTunables, Tunables};
use crate::reconcile::SharedTable;

/// Waits for `state_restored`, then runs `step` every `interval(tunables)`
/// (read afresh before each wait) until `cancel`.
async fn every<F, Fut>(
    tunables: Arc<SharedTunables>,
    mut waiter: BootWaiter,
    cancel: CancellationToken,
    interval: fn(&Tunables) -> Duration,
    mut step: F,
) -> Result<(), BootFailed>
where
    F: FnMut(Tunables) -> Fut,
    Fut: Future<Output = ()>,
{
    tokio::select! {
        () = cancel.cancelled() => return Ok(()),
        reached = waiter.reached(Phase::StateRestored) => reached?,
    }
    loop {
        let t = tunables.get();
        tokio::select! {
            () = cancel.cancelled() => return Ok(()),
            () = tokio::time::sleep(interval(&t)) => {}
        }
        step(tunables.get()).await;
    }
}

/// Drains every `scrape_interval` (with pressure relief on the live
/// watermarks).
///
/// # Errors
/// Boot failed before `state_restored`.
pub async fn run_scraper<K: FlowKernel>(
    owner: LedgerOwner<K>,
    tunables: Arc<SharedTunables>,
    waiter: BootWaiter,
    cancel: CancellationToken,
) -> Result<(), BootFailed> {
    every(
        tunables,
        waiter,
        cancel,
        |t| t.scrape_interval,
        |t| {
            let owner = owner.clone();
            async move {
                if let Err(e) = owner.scrape_async(Relief::from_tunables(&t)).await {
                    tracing::warn!(error = %e, "scrape failed; the next one retries");
                }
            }
        },
    )
    .await
}

/// Flushes the state file every `state_flush_interval`.
///
/// # Errors
/// Boot failed before `state_restored`.
pub async fn run_flusher<K: FlowKernel>(
    owner: LedgerOwner<K>,
    tunables: Arc<SharedTunables>,
    waiter: BootWaiter,
    cancel: CancellationToken,
) -> Result<(), BootFailed> {
    every(
        tunables,
        waiter,
        cancel,
        |t| t.state_flush_interval,
        |_| {
            let owner = owner.clone();
            async move {
                if let Err(e) = owner.flush_async().await {
                    tracing::warn!(error = %e, "state flush failed; drains wait for the next one");
                }
            }
        },
    )
    .await
}

/// Sweeps ghosts past `ghost_grace` every `ghost_sweep_interval` (§9).
///
/// # Errors
/// Boot failed before `state_restored`.
pub async fn run_sweeper<K: FlowKernel>(
    owner: LedgerOwner<K>,
    table: SharedTable,
    tunables: Arc<SharedTunables>,
    waiter: BootWaiter,
    cancel: CancellationToken,
) -> Result<(), BootFailed> {
    every(
        tunables,
        waiter,
        cancel,
        |t| t.ghost_sweep_interval,
        |t| {
            let (owner, table) = (owner.clone(), table.clone());
            async move {
                match owner.sweep(table, t.ghost_grace).await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(evicted = n, "ghost sweep"),
                    Err(e) => {
                        tracing::warn!(error = %e, "ghost sweep failed; the next one retries");
                    }
                }
            }
        },
    )
    .await
}
