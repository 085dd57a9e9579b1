//! What the metrics listener's `/readyz` and `/healthz` answer
//! (docs/agent-http.md): readiness is the boot phase; health is whether the
//! running agent still drains the kernel into the ledger.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::boot::{BootGate, BootState, Phase};
use crate::config::SharedTunables;
use crate::http::Readiness;
use crate::order::OrderMetrics;

/// The shortest stall `/healthz` reports: below it, a slow drain of a full
/// map or a flush on a busy disk would read as a dead agent.
const MIN_STALL: Duration = Duration::from_secs(30);
/// Scrape intervals without a successful drain that make a stall.
const STALLED_INTERVALS: u32 = 3;

/// `Err` when no drain has succeeded for `STALLED_INTERVALS` scrape
/// intervals (at least [`MIN_STALL`]) since `since`: the later of the last
/// successful drain and the moment the agent was first seen running, all
/// in unix seconds. A drain that cannot be applied stalls every billing
/// series of the node while the kernel keeps counting; a restart (the
/// next instance drains against the pinned map) is the remedy a liveness
/// probe or a watchdog applies.
pub(crate) fn drain_stall(now: f64, since: f64, scrape: Duration) -> Result<(), String> {
    let limit = (scrape * STALLED_INTERVALS).max(MIN_STALL).as_secs_f64();
    let age = now - since;
    if age > limit {
        return Err(format!(
            "no successful drain for {age:.0}s (limit {limit:.0}s: {STALLED_INTERVALS} × tunables.scrape_interval, at least {}s)",
            MIN_STALL.as_secs()
        ));
    }
    Ok(())
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs_f64()
}

/// The boot gate, the drains and the live scrape interval.
pub(crate) struct Health {
    pub gate: Arc<BootGate>,
    pub order: OrderMetrics,
    pub tunables: Arc<SharedTunables>,
    /// When `/healthz` first saw the agent running (drains start then).
    pub running_since: OnceLock<f64>,
}

impl Readiness for Health {
    fn ready(&self) -> Result<(), String> {
        match self.gate.state() {
            BootState::At(Phase::Running) => Ok(()),
            BootState::At(p) => Err(p.label().to_owned()),
            BootState::Starting => Err("starting".to_owned()),
            BootState::Failed(reason) => Err(format!("boot failed: {reason}")),
        }
    }

    fn alive(&self) -> Result<(), String> {
        // Boot may wait for Neutron for as long as it is down: a restart
        // would not help, so booting is healthy.
        if !matches!(self.gate.state(), BootState::At(Phase::Running)) {
            return Ok(());
        }
        let now = unix_now();
        let running = *self.running_since.get_or_init(|| now);
        let since = self.order.last_drain_success().unwrap_or(0.0).max(running);
        drain_stall(now, since, self.tunables.get().scrape_interval)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stall_is_three_scrape_intervals_and_at_least_thirty_seconds() {
        let s10 = Duration::from_secs(10);
        assert!(drain_stall(1030.0, 1000.0, s10).is_ok());
        let e = drain_stall(1031.0, 1000.0, s10).unwrap_err();
        assert!(e.contains("no successful drain for 31s (limit 30s"), "{e}");
        // A short interval still allows 30 s; a long one three of them.
        assert!(drain_stall(1029.0, 1000.0, Duration::from_secs(1)).is_ok());
        assert!(drain_stall(1031.0, 1000.0, Duration::from_secs(1)).is_err());
        assert!(drain_stall(1179.0, 1000.0, Duration::from_mins(1)).is_ok());
        assert!(drain_stall(1181.0, 1000.0, Duration::from_mins(1)).is_err());
        // A clock that went back is no stall.
        assert!(drain_stall(900.0, 1000.0, s10).is_ok());
    }
}
