//! The daemon's own families: the boot phase, degraded mode and SIGHUP
//! reloads (docs/metrics.md).

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::boot::Phase;
use crate::config::ReloadResult;

type Labels = Vec<(&'static str, &'static str)>;

/// `lachesis_boot_phase`, `lachesis_degraded`, `lachesis_config_reloads_total`.
#[derive(Debug, Clone, Default)]
pub struct DaemonMetrics {
    phase: Family<Labels, Gauge>,
    degraded: Gauge,
    reloads: Family<Labels, Counter>,
}

impl DaemonMetrics {
    /// Seeded instruments registered into `registry`.
    #[must_use]
    pub fn register(registry: &mut Registry) -> Self {
        let m = DaemonMetrics::default();
        for p in Phase::ALL {
            m.phase.get_or_create(&vec![("phase", p.label())]).set(0);
        }
        for r in ReloadResult::ALL {
            let _seeded = m.reloads.get_or_create(&vec![("result", r.label())]);
        }
        registry.register(
            "lachesis_boot_phase",
            "1 for the current boot phase (bpf_loaded, metadata_ready, attached, state_restored, running)",
            m.phase.clone(),
        );
        registry.register(
            "lachesis_degraded",
            "1 while running from the state file's last committed plan without a successful sync",
            m.degraded.clone(),
        );
        registry.register(
            "lachesis_config_reloads",
            "SIGHUP reloads by result: ok, invalid, unreadable",
            m.reloads.clone(),
        );
        m
    }

    /// Shows `current` as the phase boot is at.
    pub fn phase(&self, current: Phase) {
        for p in Phase::ALL {
            let v = i64::from(p == current);
            self.phase.get_or_create(&vec![("phase", p.label())]).set(v);
        }
    }

    /// The phase the gauge shows, if any.
    #[must_use]
    pub fn current_phase(&self) -> Option<Phase> {
        Phase::ALL
            .into_iter()
            .find(|p| self.phase.get_or_create(&vec![("phase", p.label())]).get() == 1)
    }

    /// Sets degraded mode on or off.
    pub fn degraded(&self, on: bool) {
        self.degraded.set(i64::from(on));
    }

    /// Whether degraded mode is on.
    #[must_use]
    pub fn is_degraded(&self) -> bool {
        self.degraded.get() == 1
    }

    /// Counts one reload.
    pub fn reload(&self, result: ReloadResult) {
        self.reloads
            .get_or_create(&vec![("result", result.label())])
            .inc();
    }

    /// Reloads counted with `result`.
    #[must_use]
    pub fn reloads(&self, result: ReloadResult) -> u64 {
        self.reloads
            .get_or_create(&vec![("result", result.label())])
            .get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exactly_one_phase_is_current_and_reload_results_are_seeded() {
        let mut reg = Registry::default();
        let m = DaemonMetrics::register(&mut reg);
        assert_eq!(m.current_phase(), None);
        m.phase(Phase::Attached);
        m.phase(Phase::StateRestored);
        assert_eq!(m.current_phase(), Some(Phase::StateRestored));
        m.reload(ReloadResult::Invalid);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &reg).unwrap();
        assert!(
            text.contains("lachesis_boot_phase{phase=\"state_restored\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("lachesis_boot_phase{phase=\"attached\"} 0\n"),
            "{text}"
        );
        assert!(
            text.contains("lachesis_config_reloads_total{result=\"ok\"} 0\n"),
            "{text}"
        );
        assert!(
            text.contains("lachesis_config_reloads_total{result=\"invalid\"} 1\n"),
            "{text}"
        );
        assert!(text.contains("lachesis_degraded 0\n"), "{text}");
    }
}
