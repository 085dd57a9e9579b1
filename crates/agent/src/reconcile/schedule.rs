//! Kicks and ticks (DESIGN §7): when a pass runs.
//!
//! One task serves both, so passes never overlap. A kick waits for the
//! debounce window to go quiet, but never longer than
//! [`KICK_DEBOUNCE_CAP`] from the first waiting kick; a pass, whatever
//! started it, covers every kick waiting when it starts, and the next tick
//! is scheduled one `reconcile_interval` (read then: a reload applies from
//! the next tick on) after each pass.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::metrics::ReconcileMetrics;
use crate::config::KICK_DEBOUNCE_CAP;

/// Kicks waiting for a pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pending {
    /// The first kick since the last pass started.
    pub first: Instant,
    /// The latest one.
    pub last: Instant,
}

impl Pending {
    /// When the waiting kicks become a pass: the quiet window after the
    /// last, capped from the first.
    pub fn due(self, debounce: Duration) -> Instant {
        (self.last + debounce).min(self.first + KICK_DEBOUNCE_CAP)
    }
}

#[derive(Debug)]
struct KickState {
    pending: Mutex<Option<Pending>>,
    wake: Notify,
    metrics: ReconcileMetrics,
}

/// Requests a pass out of band. Cheap to clone; every clone kicks the same
/// reconciler.
#[derive(Debug, Clone)]
pub struct Kicker {
    state: Arc<KickState>,
}

impl Kicker {
    pub(crate) fn new(metrics: ReconcileMetrics) -> Self {
        Kicker {
            state: Arc::new(KickState {
                pending: Mutex::new(None),
                wake: Notify::new(),
                metrics,
            }),
        }
    }

    /// Asks for a pass soon. Never blocks (a short lock, no await) and is
    /// callable from any task or thread; kicks arriving before the pass
    /// starts are coalesced into one.
    pub fn kick(&self) {
        let now = Instant::now();
        let coalesced = {
            let mut pending = self
                .state
                .pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if let Some(p) = pending.as_mut() {
                p.last = now;
                true
            } else {
                *pending = Some(Pending {
                    first: now,
                    last: now,
                });
                false
            }
        };
        self.state.metrics.count_kick(coalesced);
        // At most one stored wake-up: the runner re-reads the pending state.
        self.state.wake.notify_one();
    }

    /// The kicks waiting now.
    pub(crate) fn pending(&self) -> Option<Pending> {
        *self
            .state
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Clears the waiting kicks: the pass starting now covers them.
    pub(crate) fn take(&self) {
        *self
            .state
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// Resolves at the next kick (or at once if one arrived unseen).
    pub(crate) async fn kicked(&self) {
        self.state.wake.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_is_the_quiet_window_capped_from_the_first_kick() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let p = |first, last| Pending {
            first: t0 + s(first),
            last: t0 + s(last),
        };
        assert_eq!(p(0, 0).due(s(1)), t0 + s(1));
        assert_eq!(p(0, 3).due(s(1)), t0 + s(4));
        assert_eq!(p(0, 4).due(s(2)), t0 + s(5), "capped");
        assert_eq!(p(2, 9).due(s(1)), t0 + s(7), "capped from the first");
    }
}
