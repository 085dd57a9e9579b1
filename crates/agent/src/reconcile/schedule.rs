//! Kicks and ticks (DESIGN §7, §17): when a pass runs.
//!
//! One task serves both, so passes never overlap. A kick waits for the
//! debounce window to go quiet, but never longer than
//! [`KICK_DEBOUNCE_CAP`] from the first waiting kick; a deferred kick (a
//! notification gap, spread over `tunables.resync_spread` so a broker
//! restart does not make a whole fleet sync in one second) becomes a kick
//! when its time comes. A pass, whatever started it, covers every kick
//! waiting when it starts, deferred ones included.
//!
//! Ticks fall on a grid of this agent's own: `origin + (k + phase) ×
//! reconcile_interval`, with a phase in [0, 1) the daemon draws at random,
//! so the agents of a fleet booted together, or kicked together by one
//! notification, do not tick together. After a pass the next tick is the
//! first grid point at least half an interval later: no tick right behind
//! a kick's pass, and with no kicks (the bus down) exactly one interval
//! between syncs. The interval is read at each scheduling (a reload applies
//! from the next tick on).

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

/// The tick that follows a pass ending at `after`: the first point of the
/// grid `origin + (k + phase) × interval` (k ≥ 0) at least half an
/// interval after it. `phase` is clamped into [0, 1).
pub(crate) fn next_tick(
    origin: Instant,
    phase: f64,
    interval: Duration,
    after: Instant,
) -> Instant {
    let interval = interval.max(Duration::from_millis(1));
    let phase = if phase.is_finite() {
        phase.clamp(0.0, 0.999_999)
    } else {
        0.0
    };
    let offset = interval.mul_f64(phase);
    let earliest = after + interval / 2;
    let first = origin + offset;
    if earliest <= first {
        return first;
    }
    let past = (earliest - first).as_nanos();
    let step = interval.as_nanos();
    // Whole intervals past the first point, rounded up.
    let k = past.div_ceil(step);
    let k = u32::try_from(k).unwrap_or(u32::MAX);
    first + interval * k
}

#[derive(Debug)]
struct KickState {
    pending: Mutex<Option<Pending>>,
    /// The earliest deferred kick's time.
    deferred: Mutex<Option<Instant>>,
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
    /// A kicker that holds its kicks until a reconciler takes it
    /// ([`super::Reconciler::with_kicker`]): what a task started before the
    /// reconciler exists kicks (relay mode's stream task, in the daemon
    /// and in `make bench-fleet`'s agents). `metrics` are the reconciler's.
    #[must_use]
    pub fn new(metrics: ReconcileMetrics) -> Self {
        Kicker {
            state: Arc::new(KickState {
                pending: Mutex::new(None),
                deferred: Mutex::new(None),
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

    /// Asks for a pass `delay` from now (the earliest of several such
    /// requests stands); a pass that starts before then covers it. For
    /// notification gaps: every agent of a fleet sees a broker come back
    /// at once, and each waits its own random share of
    /// `tunables.resync_spread` before it syncs.
    pub fn kick_after(&self, delay: Duration) {
        let at = Instant::now() + delay;
        {
            let mut deferred = self
                .state
                .deferred
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            *deferred = Some(deferred.map_or(at, |d| d.min(at)));
        }
        self.state.wake.notify_one();
    }

    /// When the earliest deferred kick is due.
    pub(crate) fn deferred(&self) -> Option<Instant> {
        *self
            .state
            .deferred
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// A deferred kick whose time came becomes a kick like any.
    pub(crate) fn promote_deferred(&self) {
        *self
            .state
            .deferred
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
        self.kick();
    }

    /// The kicks waiting now.
    pub(crate) fn pending(&self) -> Option<Pending> {
        *self
            .state
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Clears the waiting kicks, deferred ones too: the pass starting now
    /// covers them.
    pub(crate) fn take(&self) {
        *self
            .state
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
        *self
            .state
            .deferred
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
    fn ticks_stay_on_the_agents_grid_at_least_half_an_interval_after_a_pass() {
        let o = Instant::now();
        let s = Duration::from_secs;
        let i = s(100);
        // Phase 0: the old rhythm, one interval after each tick.
        assert_eq!(next_tick(o, 0.0, i, o), o + s(100));
        assert_eq!(next_tick(o, 0.0, i, o + s(100)), o + s(200));
        // A pass kicked at 130 s: the tick at 200 s stays; at 160 s it
        // would be 40 s behind it, so the next is 300 s.
        assert_eq!(next_tick(o, 0.0, i, o + s(130)), o + s(200));
        assert_eq!(next_tick(o, 0.0, i, o + s(160)), o + s(300));
        // Phase 0.25: every tick at 25 s past a multiple of the interval.
        assert_eq!(next_tick(o, 0.25, i, o), o + s(125));
        assert_eq!(next_tick(o, 0.25, i, o + s(125)), o + s(225));
        assert_eq!(next_tick(o, 0.25, i, o + s(10)), o + s(125));
        // Out-of-range phases are clamped, never panic.
        assert!(next_tick(o, f64::NAN, i, o) >= o + s(50));
        assert!(next_tick(o, 7.0, i, o) < o + s(200));
        // Whatever the pass and phase: on the grid, at least half an
        // interval after the pass and at most one and a half.
        for phase in [0.0, 0.1, 0.5, 0.99] {
            for after in [0u64, 1, 49, 50, 51, 99, 100, 101, 1_000, 12_345] {
                let after = o + s(after);
                let t = next_tick(o, phase, i, after);
                assert!(
                    t >= after + i / 2 && t <= after + i * 3 / 2,
                    "{phase} {after:?}"
                );
                let on_grid = (t - o).as_secs_f64() / 100.0 - phase;
                assert!(
                    (on_grid - on_grid.round()).abs() < 1e-6,
                    "{phase} {after:?}"
                );
            }
        }
    }

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
