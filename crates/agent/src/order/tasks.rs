//! The periodic drivers of the ledger owner (DESIGN §9, §12, §13): each
//! waits for boot phase `state_restored`, reads its interval from the live
//! tunables at each wait, and stops when cancelled.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::kernel::FlowKernel;
use super::owner::{LedgerOwner, OrderError, Relief};
use crate::boot::{BootFailed, BootWaiter, Phase};
use crate::config::{SharedTunables, Tunables};
use crate::reconcile::SharedTable;

/// Waits for `state_restored`, then runs `step` every `interval(tunables)`
/// (read afresh before each wait) until `cancel`; a failed step is logged
/// as `what` and retried at the next interval.
async fn every<K, F, Fut>(
    owner: &LedgerOwner<K>,
    tunables: &SharedTunables,
    mut waiter: BootWaiter,
    cancel: CancellationToken,
    interval: fn(&Tunables) -> Duration,
    what: &'static str,
    step: F,
) -> Result<(), BootFailed>
where
    K: FlowKernel,
    F: Fn(LedgerOwner<K>, Tunables) -> Fut,
    Fut: Future<Output = Result<(), OrderError>>,
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
        if let Err(e) = step(owner.clone(), tunables.get()).await {
            tracing::warn!(error = %e, "{what} failed; retried at the next interval");
        }
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
    let interval = |t: &Tunables| t.scrape_interval;
    every(
        &owner,
        &tunables,
        waiter,
        cancel,
        interval,
        "scrape",
        |o, t| async move { o.scrape_async(Relief::from_tunables(&t)).await.map(drop) },
    )
    .await
}

/// Flushes the state file every `state_flush_interval` (a failure leaves
/// drains refused until the next flush succeeds).
///
/// # Errors
/// Boot failed before `state_restored`.
pub async fn run_flusher<K: FlowKernel>(
    owner: LedgerOwner<K>,
    tunables: Arc<SharedTunables>,
    waiter: BootWaiter,
    cancel: CancellationToken,
) -> Result<(), BootFailed> {
    let interval = |t: &Tunables| t.state_flush_interval;
    every(
        &owner,
        &tunables,
        waiter,
        cancel,
        interval,
        "state flush",
        |o, _| async move { o.flush_async().await },
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
    let interval = |t: &Tunables| t.ghost_sweep_interval;
    every(
        &owner,
        &tunables,
        waiter,
        cancel,
        interval,
        "ghost sweep",
        |o, t| {
            let table = table.clone();
            async move {
                let evicted = o.sweep_async(table, t.ghost_grace).await?;
                if evicted > 0 {
                    tracing::info!(evicted, "ghost sweep");
                }
                let retention = t.port_series_retention;
                let ended = o.blocking(move |o| o.expire_port_series(retention)).await;
                if ended > 0 {
                    tracing::info!(ended, "retained port series ended");
                }
                Ok(())
            }
        },
    )
    .await
}
