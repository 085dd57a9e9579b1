//! The boot phases (DESIGN §12) as a gate the long-running tasks wait on.
//!
//! Boot advances `bpf_loaded → metadata_ready → attached → state_restored →
//! running`, one phase at a time. Every task that writes kernel or ledger
//! state waits for `state_restored` before its first write: a reconcile
//! delta computed before cold start committed its plan, or a drain before
//! the state file's baselines are restored, would be wrong. A failed boot
//! releases the waiters with the reason, so they exit instead of hanging;
//! so does a gate dropped without reaching the phase.
//!
//! ```
//! use lachesis_agent::boot::{BootGate, Phase};
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let gate = BootGate::new();
//! let mut waiter = gate.waiter();
//! for phase in Phase::ALL {
//!     gate.advance(phase).unwrap();
//! }
//! waiter.reached(Phase::StateRestored).await.unwrap();
//! # });
//! ```

#![deny(missing_docs)]

use std::fmt;
use std::sync::Arc;

use tokio::sync::watch;

/// One boot phase, in boot order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    /// The program and maps are loaded; `flows` reused or replaced.
    BpfLoaded,
    /// The trie, bindings and amphora addresses are written (cold start), or
    /// the state file's plan stands in for them (degraded).
    MetadataReady,
    /// Matching taps are attached.
    Attached,
    /// The state file is restored into the ledger: writers may start.
    StateRestored,
    /// Every task is started.
    Running,
}

impl Phase {
    /// Every phase, in boot order (the `lachesis_boot_phase` label values).
    pub const ALL: [Phase; 5] = [
        Phase::BpfLoaded,
        Phase::MetadataReady,
        Phase::Attached,
        Phase::StateRestored,
        Phase::Running,
    ];

    /// The label (`bpf_loaded`, …).
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            Phase::BpfLoaded => "bpf_loaded",
            Phase::MetadataReady => "metadata_ready",
            Phase::Attached => "attached",
            Phase::StateRestored => "state_restored",
            Phase::Running => "running",
        }
    }

    /// The phase before this one (`None` for the first).
    #[must_use]
    pub fn previous(self) -> Option<Phase> {
        let i = Phase::ALL.iter().position(|p| *p == self)?;
        i.checked_sub(1).map(|j| Phase::ALL[j])
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// Where boot stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BootState {
    /// No phase reached yet.
    Starting,
    /// The last phase reached.
    At(Phase),
    /// Boot failed: every waiter is released with this reason.
    Failed(Arc<str>),
}

/// A phase asked for out of order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("boot phase {next} cannot follow {current:?}: phases advance one at a time ({order})", order = order())]
pub struct PhaseOrderError {
    /// The state boot was in.
    pub current: BootState,
    /// The phase asked for.
    pub next: Phase,
}

fn order() -> String {
    Phase::ALL
        .iter()
        .map(|p| p.label())
        .collect::<Vec<_>>()
        .join(" → ")
}

/// Boot failed (or its gate was dropped) before the phase a task waits for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("boot failed before {waited_for}: {reason}")]
pub struct BootFailed {
    /// The phase the task was waiting for.
    pub waited_for: Phase,
    /// Why boot stopped.
    pub reason: Arc<str>,
}

/// The boot sequencer's side: advances the phases or fails.
#[derive(Debug)]
pub struct BootGate {
    tx: watch::Sender<BootState>,
}

impl Default for BootGate {
    fn default() -> Self {
        BootGate::new()
    }
}

impl BootGate {
    /// A gate with no phase reached.
    #[must_use]
    pub fn new() -> Self {
        BootGate {
            tx: watch::Sender::new(BootState::Starting),
        }
    }

    /// Moves to `next`, which must directly follow the current phase.
    pub fn advance(&self, next: Phase) -> Result<(), PhaseOrderError> {
        let mut result = Ok(());
        self.tx.send_if_modified(|state| {
            let follows = match state {
                BootState::Starting => next.previous().is_none(),
                BootState::At(p) => next.previous() == Some(*p),
                BootState::Failed(_) => false,
            };
            if follows {
                *state = BootState::At(next);
            } else {
                result = Err(PhaseOrderError {
                    current: state.clone(),
                    next,
                });
            }
            follows
        });
        result
    }

    /// Fails boot: every current and future waiter gets `reason`.
    pub fn fail(&self, reason: impl Into<Arc<str>>) {
        self.tx.send_replace(BootState::Failed(reason.into()));
    }

    /// Where boot stands now.
    #[must_use]
    pub fn state(&self) -> BootState {
        self.tx.borrow().clone()
    }

    /// A handle for a task that must wait for a phase.
    #[must_use]
    pub fn waiter(&self) -> BootWaiter {
        BootWaiter {
            rx: self.tx.subscribe(),
        }
    }
}

/// A task's side of the gate.
#[derive(Debug, Clone)]
pub struct BootWaiter {
    rx: watch::Receiver<BootState>,
}

impl BootWaiter {
    /// Returns once boot has reached `phase` (or a later one); fails when
    /// boot failed or the gate was dropped first.
    pub async fn reached(&mut self, phase: Phase) -> Result<(), BootFailed> {
        let failed = |reason: Arc<str>| BootFailed {
            waited_for: phase,
            reason,
        };
        let state = self
            .rx
            .wait_for(|s| match s {
                BootState::Starting => false,
                BootState::At(p) => *p >= phase,
                BootState::Failed(_) => true,
            })
            .await
            .map_err(|_| failed(Arc::from("the boot sequencer stopped before reaching it")))?;
        match &*state {
            BootState::Failed(reason) => Err(failed(reason.clone())),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_advance_one_at_a_time() {
        let gate = BootGate::new();
        let err = gate.advance(Phase::Attached).unwrap_err();
        assert_eq!(err.current, BootState::Starting);
        gate.advance(Phase::BpfLoaded).unwrap();
        assert!(gate.advance(Phase::BpfLoaded).is_err(), "no repeat");
        assert!(gate.advance(Phase::Attached).is_err(), "no skip");
        gate.advance(Phase::MetadataReady).unwrap();
        assert_eq!(gate.state(), BootState::At(Phase::MetadataReady));
        assert!(err
            .to_string()
            .contains("bpf_loaded → metadata_ready → attached → state_restored → running"));
    }

    #[tokio::test]
    async fn waiters_are_released_at_their_phase_and_not_before() {
        let gate = BootGate::new();
        let mut waiter = gate.waiter();
        let task = tokio::spawn(async move { waiter.reached(Phase::StateRestored).await });
        for phase in [Phase::BpfLoaded, Phase::MetadataReady, Phase::Attached] {
            gate.advance(phase).unwrap();
            tokio::task::yield_now().await;
            assert!(!task.is_finished(), "released at {phase}");
        }
        gate.advance(Phase::StateRestored).unwrap();
        assert_eq!(task.await.unwrap(), Ok(()));
        // A waiter that arrives after the phase passes straight through.
        gate.advance(Phase::Running).unwrap();
        gate.waiter().reached(Phase::StateRestored).await.unwrap();
    }

    #[tokio::test]
    async fn a_failed_or_dropped_boot_releases_the_waiters_with_the_reason() {
        let gate = BootGate::new();
        let mut waiter = gate.waiter();
        let task = tokio::spawn(async move { waiter.reached(Phase::StateRestored).await });
        gate.advance(Phase::BpfLoaded).unwrap();
        gate.fail("Keystone refused the credentials");
        let err = task.await.unwrap().unwrap_err();
        assert_eq!(&*err.reason, "Keystone refused the credentials");
        assert!(gate.advance(Phase::MetadataReady).is_err());

        let gate = BootGate::new();
        let mut waiter = gate.waiter();
        drop(gate);
        let err = waiter.reached(Phase::StateRestored).await.unwrap_err();
        assert!(err.reason.contains("stopped"), "{err}");
    }
}
