//! The small tasks that follow the reconciler's commits (docs/agent.md,
//! docs/operations.md "Degraded mode"): the link watcher's taps and ports,
//! the metadata maps' fill, and a degraded boot's way out.

use std::sync::Arc;
use std::time::Duration;

use lachesis_datapath::Datapath;
use lachesis_notify::backoff;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::info;

use super::metrics::DaemonMetrics;
use crate::links::TapPorts;
use crate::order::OrderMetrics;
use crate::reconcile::{Committed, Kicker};

/// How often the metadata maps' fill is re-counted without a commit (a
/// failed pass may have written part of its delta).
const FILL_RECOUNT: Duration = Duration::from_mins(1);

/// The link watcher's taps and ports follow the committed plan: a port
/// the plan learns after its tap was attached gets its MAC written then.
pub(super) async fn tap_ports(
    mut committed: watch::Receiver<Arc<Committed>>,
    ports: watch::Sender<TapPorts>,
    cancel: CancellationToken,
) {
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            changed = committed.changed() => {
                if changed.is_err() {
                    // The reconciler is gone; the supervisor is stopping.
                    cancel.cancelled().await;
                    return;
                }
                let next = TapPorts::from_plan(&committed.borrow_and_update().plan);
                ports.send_if_modified(|now| {
                    let changed = *now != next;
                    *now = next;
                    changed
                });
            }
        }
    }
}

/// Counts the metadata maps' entries (only the agent writes them) at
/// start, after every commit and every [`FILL_RECOUNT`]: a key walk, too
/// costly for every scrape at 100 000 trie rows.
pub(super) async fn metadata_fill(
    dp: Arc<Datapath>,
    metrics: OrderMetrics,
    mut committed: watch::Receiver<Arc<Committed>>,
    cancel: CancellationToken,
) {
    loop {
        let fills = tokio::task::block_in_place(|| dp.metadata_fill());
        metrics.metadata_fill(&fills);
        tokio::select! {
            () = cancel.cancelled() => return,
            changed = committed.changed() => if changed.is_err() {
                // The reconciler is gone; the supervisor is stopping.
                cancel.cancelled().await;
                return;
            },
            () = tokio::time::sleep(FILL_RECOUNT) => {}
        }
    }
}

/// While degraded, kicks the reconciler with the cold start's backoff
/// (1 s … 30 s) until a pass commits, then clears `lachesis_degraded`.
pub(super) async fn leave_degraded(
    mut committed: watch::Receiver<Arc<Committed>>,
    kicker: Kicker,
    metrics: DaemonMetrics,
    cancel: CancellationToken,
) -> Result<(), String> {
    let mut failures = 0;
    loop {
        tokio::select! {
            () = cancel.cancelled() => return Ok(()),
            changed = committed.changed() => {
                if changed.is_ok() {
                    metrics.degraded(false);
                    info!("first successful sync: no longer degraded");
                }
                // Stay alive: the supervisor treats a task ending as a failure.
                cancel.cancelled().await;
                return Ok(());
            }
            () = tokio::time::sleep(backoff(failures)) => {
                failures = failures.saturating_add(1);
                kicker.kick();
            }
        }
    }
}
