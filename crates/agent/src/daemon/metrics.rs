//! The daemon's own families: the boot phase, degraded mode, SIGHUP
//! reloads and the OpenStack sync age (docs/metrics.md); and [`Families`],
//! every family of the process in one registry.

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use tokio::sync::watch;

use lachesis_listen::{Endpoint, ListenMetrics, Web};

use super::notify::Notifications;
use super::stream::StreamMetrics;
use crate::boot::Phase;
use crate::config::{Config, ReloadResult};
use crate::http::{DebugRoutes, MetricsRoutes, Routes};
use crate::links::LinkMetrics;
use crate::order::OrderMetrics;
use crate::reconcile::{Committed, ReconcileMetrics, SharedAssembler};

type Labels = Vec<(&'static str, &'static str)>;

/// `lachesis_boot_phase`, `lachesis_degraded`, `lachesis_config_reloads_total`,
/// `lachesis_openstack_sync_age_seconds`.
#[derive(Debug, Clone, Default)]
pub struct DaemonMetrics {
    phase: Family<Labels, Gauge>,
    degraded: Gauge,
    reloads: Family<Labels, Counter>,
    sync_age: SyncAge,
}

/// The sync age, computed at scrape time from the reconciler's committed
/// plan (so it never goes stale between passes); -1 until the daemon hands
/// over that plan's watch (before cold start's sync succeeds).
#[derive(Debug, Clone, Default)]
pub struct SyncAge(Arc<OnceLock<watch::Receiver<Arc<Committed>>>>);

impl SyncAge {
    /// Follows `committed` from now on (the first call wins: there is one
    /// reconciler per process).
    pub fn follow(&self, committed: watch::Receiver<Arc<Committed>>) {
        let _first = self.0.set(committed);
    }

    /// Seconds from the committed plan's sync to `now` (0 if the clock went
    /// back), -1 before any.
    #[must_use]
    pub fn seconds(&self, now: SystemTime) -> f64 {
        self.0.get().map_or(-1.0, |rx| {
            now.duration_since(rx.borrow().synced_at)
                .map_or(0.0, |d| d.as_secs_f64())
        })
    }
}

impl Collector for SyncAge {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        let m = enc.encode_descriptor(
            "lachesis_openstack_sync_age_seconds",
            // A collector's HELP is written as given (`Registry::register`
            // appends the final period to the others).
            "Seconds since the OpenStack sync of the last committed plan, computed at scrape time; \
             -1 before the first sync (cold start still retrying). After a degraded boot it counts \
             from the state file's last write, a lower bound of the plan's age.",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(self.seconds(SystemTime::now())).encode(m)
    }
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
        registry.register_collector(Box::new(m.sync_age.clone()));
        registry.register(
            "lachesis_build",
            "The running build",
            prometheus_client::metrics::info::Info::new(vec![
                ("version", env!("CARGO_PKG_VERSION")),
                ("revision", env!("LACHESIS_REVISION")),
            ]),
        );
        m
    }

    /// Computes the sync age from `committed` from now on.
    pub fn follow_sync(&self, committed: watch::Receiver<Arc<Committed>>) {
        self.sync_age.follow(committed);
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

/// Every metric family of the process, registered once at start.
pub(super) struct Families {
    pub(super) registry: Registry,
    pub(super) daemon: DaemonMetrics,
    pub(super) order: OrderMetrics,
    pub(super) reconcile: ReconcileMetrics,
    pub(super) links: LinkMetrics,
    pub(super) api: lachesis_openstack::ApiMetrics,
    /// Relay mode: the assembler the stream task feeds and the source
    /// plans from, and the stream's families.
    pub(super) stream: Option<(SharedAssembler, StreamMetrics)>,
    /// The two listeners, sharing `listen.web_config_file`; their
    /// counters are in `registry` (`lachesis_listen::ListenMetrics`).
    pub(super) listeners: Listeners,
}

/// The metrics and debug listeners as served.
#[derive(Debug, Clone)]
pub(super) struct Listeners {
    pub(super) metrics: Endpoint,
    pub(super) debug: Endpoint,
}

impl Listeners {
    fn new(web: &Arc<Web>) -> Listeners {
        let endpoint = |name| Endpoint {
            web: web.clone(),
            ..Endpoint::plain(name)
        };
        Listeners {
            metrics: endpoint(<MetricsRoutes as Routes>::LISTENER),
            debug: endpoint(<DebugRoutes as Routes>::LISTENER),
        }
    }
}

impl Families {
    /// Every family, and the notification consumers whose families are
    /// among them (started after boot).
    pub(super) fn register(config: &Config, web: &Arc<Web>) -> (Families, Notifications) {
        let mut registry = Registry::default();
        let listeners = Listeners::new(web);
        registry.register_collector(Box::new(ListenMetrics::new(
            web.clone(),
            vec![
                (listeners.metrics.name, listeners.metrics.stats.clone()),
                (listeners.debug.name, listeners.debug.stats.clone()),
            ],
        )));
        let daemon = DaemonMetrics::register(&mut registry);
        let order = OrderMetrics::register(&mut registry);
        let reconcile = ReconcileMetrics::register(&mut registry);
        let links = LinkMetrics::new(&mut registry);
        let api = lachesis_openstack::ApiMetrics::default();
        api.register(&mut registry);
        let notifications = Notifications::register(&mut registry, &config.notifications);
        let stream = config.relay().map(|_| {
            let shared = SharedAssembler::new();
            let metrics = StreamMetrics::register(&mut registry, &shared);
            (shared, metrics)
        });
        let families = Families {
            registry,
            daemon,
            order,
            reconcile,
            links,
            api,
            stream,
            listeners,
        };
        (families, notifications)
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

    fn render(reg: &Registry) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, reg).unwrap();
        text
    }

    fn sync_age(text: &str) -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix("lachesis_openstack_sync_age_seconds "))
            .unwrap_or_else(|| panic!("no sync age in {text}"))
            .parse()
            .unwrap()
    }

    #[test]
    fn sync_age_is_minus_one_before_a_plan_then_counts_from_each_commit() {
        use std::time::Duration;
        let mut reg = Registry::default();
        let m = DaemonMetrics::register(&mut reg);
        assert!((sync_age(&render(&reg)) + 1.0).abs() < f64::EPSILON);
        let at = |ago: u64| {
            Arc::new(Committed {
                plan: Arc::default(),
                synced_at: SystemTime::now() - Duration::from_secs(ago),
                topology: None,
            })
        };
        let (tx, rx) = watch::channel(at(120));
        m.follow_sync(rx);
        let age = sync_age(&render(&reg));
        assert!((120.0..125.0).contains(&age), "{age}");
        // Computed at scrape time: a later scrape is older, with no commit.
        tx.send_replace(at(7200));
        let age = sync_age(&render(&reg));
        assert!((7200.0..7205.0).contains(&age), "{age}");
        tx.send_replace(at(0));
        let age = sync_age(&render(&reg));
        assert!((0.0..5.0).contains(&age), "{age}");
    }

    /// Issue 19 item 12: the sync age's HELP read "…; -1 before the first",
    /// cut short and without the period every other HELP ends with (a
    /// collector's HELP is written as given).
    #[test]
    fn every_help_is_a_whole_sentence() {
        let mut reg = Registry::default();
        let _m = DaemonMetrics::register(&mut reg);
        let text = render(&reg);
        for help in text.lines().filter(|l| l.starts_with("# HELP ")) {
            assert!(help.ends_with('.'), "{help}");
        }
        let age = text
            .lines()
            .find(|l| l.starts_with("# HELP lachesis_openstack_sync_age_seconds "))
            .unwrap();
        assert!(age.contains("-1 before the first sync"), "{age}");
        assert!(age.contains("degraded boot"), "{age}");
    }

    #[test]
    fn the_daemon_families_match_the_catalogue() {
        use lachesis_lab::catalogue;
        let mut reg = Registry::default();
        let _m = DaemonMetrics::register(&mut reg);
        let rendered = catalogue::rendered(&render(&reg), "agent");
        assert_eq!(
            rendered.keys().collect::<Vec<_>>(),
            [
                "lachesis_boot_phase",
                "lachesis_build_info",
                "lachesis_config_reloads_total",
                "lachesis_degraded",
                "lachesis_openstack_sync_age_seconds",
            ]
        );
        catalogue::assert_documented(&rendered);
    }
}
