//! When passes run (DESIGN §7), in paused tokio time: each test reads the
//! number of syncs the fake source served at chosen instants.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::registry::Registry;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::super::fakes::FakeSource;
use super::super::Kicker;
use super::{base, Rig, TestReconciler};
use crate::boot::{BootFailed, BootGate, Phase};
use crate::config::SharedTunables;

/// A reconciler running on its own task.
struct Running {
    source: Arc<FakeSource>,
    tunables: Arc<SharedTunables>,
    gate: BootGate,
    registry: Registry,
    kicker: Kicker,
    cancel: CancellationToken,
    task: JoinHandle<Result<(), BootFailed>>,
    t0: Instant,
}

impl Running {
    fn start(rig: Rig) -> Running {
        Running::start_with(rig, |r| r)
    }

    /// [`Running::start`] with `adjust` applied to the reconciler first.
    fn start_with(rig: Rig, adjust: impl FnOnce(TestReconciler) -> TestReconciler) -> Running {
        let Rig {
            source,
            tunables,
            gate,
            registry,
            reconciler,
            ..
        } = rig;
        let reconciler = adjust(reconciler);
        let kicker = reconciler.kicker();
        let cancel = CancellationToken::new();
        let task = tokio::spawn(reconciler.run(cancel.clone()));
        Running {
            source,
            tunables,
            gate,
            registry,
            kicker,
            cancel,
            task,
            t0: Instant::now(),
        }
    }

    /// Lets time run to `secs` after the start; returns the syncs so far.
    async fn passes_at(&self, secs: f64) -> usize {
        tokio::time::sleep_until(self.t0 + Duration::from_secs_f64(secs)).await;
        self.source.calls()
    }

    fn render(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry).unwrap();
        out
    }

    async fn stop(&mut self) {
        self.cancel.cancel();
        assert_eq!(ended(&mut self.task).await, Ok(()));
    }
}

/// The task's result, or a failure instead of a hang when it runs on (a
/// runaway reconciler ticks forever in paused time).
async fn ended(task: &mut JoinHandle<Result<(), BootFailed>>) -> Result<(), BootFailed> {
    tokio::time::timeout(Duration::from_hours(1), task)
        .await
        .expect("the reconciler task ended")
        .unwrap()
}

fn started() -> Running {
    let rig = Rig::new(&base());
    rig.restore();
    Running::start(rig)
}

#[tokio::test(start_paused = true)]
async fn a_hundred_kicks_make_one_pass() {
    let mut r = started();
    let kicks: Vec<_> = (0..100)
        .map(|_| {
            let k = r.kicker.clone();
            tokio::spawn(async move { k.kick() })
        })
        .collect();
    for k in kicks {
        k.await.unwrap();
    }
    assert_eq!(r.passes_at(0.5).await, 0, "inside the debounce window");
    assert_eq!(r.passes_at(1.5).await, 1);
    assert_eq!(r.passes_at(30.0).await, 1, "nothing else waits");
    let text = r.render();
    assert!(text.contains("lachesis_reconcile_kicks_total{outcome=\"received\"} 100"));
    assert!(text.contains("lachesis_reconcile_kicks_total{outcome=\"coalesced\"} 99"));
    assert!(text.contains("lachesis_reconcile_duration_seconds_count{trigger=\"kick\"} 1"));
    r.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_kick_waits_for_the_debounce_window_to_go_quiet() {
    let mut r = started();
    r.kicker.kick();
    assert_eq!(r.passes_at(0.9).await, 0);
    r.kicker.kick();
    assert_eq!(
        r.passes_at(1.8).await,
        0,
        "the second kick restarted the window"
    );
    assert_eq!(r.passes_at(2.0).await, 1);
    r.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_kick_never_waits_more_than_five_seconds_from_the_first() {
    let mut r = started();
    // A kick every 400 ms: the 1 s window never goes quiet.
    let mut seen = Vec::new();
    for i in 0..30_u32 {
        let t = f64::from(i) * 0.4;
        seen.push((i, r.passes_at(t).await));
        r.kicker.kick();
    }
    let at = |i: u32| seen.iter().find(|(j, _)| *j == i).unwrap().1;
    // Passes at 5.0 s (capped from the kick at 0) and 10.2 s (capped from
    // the first kick after the first pass started, at 5.2 s).
    assert_eq!(at(12), 0, "4.8 s");
    assert_eq!(at(13), 1, "5.2 s");
    assert_eq!(at(25), 1, "10.0 s");
    assert_eq!(at(26), 2, "10.4 s");
    r.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_tick_covers_the_kicks_waiting_for_it() {
    let rig = Rig::new(&base());
    let mut t = rig.tunables.get();
    t.reconcile_interval = Duration::from_secs(10);
    t.kick_debounce = Duration::from_secs(3);
    rig.tunables.set(t);
    rig.restore();
    let mut r = Running::start(rig);
    assert_eq!(r.passes_at(8.5).await, 0);
    r.kicker.kick();
    assert_eq!(r.passes_at(10.1).await, 1, "the tick at 10 s");
    assert_eq!(
        r.passes_at(13.0).await,
        1,
        "the kick due at 11.5 s was covered"
    );
    let text = r.render();
    assert!(text.contains("lachesis_reconcile_duration_seconds_count{trigger=\"tick\"} 1"));
    assert!(text.contains("lachesis_reconcile_duration_seconds_count{trigger=\"kick\"} 0"));
    r.stop().await;
}

#[tokio::test(start_paused = true)]
async fn no_pass_before_state_restored_and_none_at_start() {
    let mut r = Running::start(Rig::new(&base()));
    for phase in [Phase::BpfLoaded, Phase::MetadataReady, Phase::Attached] {
        r.gate.advance(phase).unwrap();
    }
    r.kicker.kick();
    assert_eq!(
        r.passes_at(200.0).await,
        0,
        "neither kicks nor ticks before the phase"
    );
    r.gate.advance(Phase::StateRestored).unwrap();
    // The kick that arrived during boot may carry a change cold start's sync
    // missed: it is served now, once.
    assert_eq!(r.passes_at(200.001).await, 1);
    assert_eq!(
        r.passes_at(259.0).await,
        1,
        "the first tick is one interval later"
    );
    assert_eq!(r.passes_at(261.0).await, 2);
    r.stop().await;

    let mut r = started();
    assert_eq!(r.passes_at(59.0).await, 0, "no pass at start");
    assert_eq!(r.passes_at(61.0).await, 1);
    r.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_failed_boot_releases_the_reconciler() {
    let mut r = Running::start(Rig::new(&base()));
    r.gate.advance(Phase::BpfLoaded).unwrap();
    r.gate
        .fail("no state file and Neutron unreachable for good");
    let err = ended(&mut r.task).await.unwrap_err();
    assert_eq!(err.waited_for, Phase::StateRestored);
    assert_eq!(r.source.calls(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_new_interval_applies_from_the_next_tick() {
    let mut r = started();
    assert_eq!(r.passes_at(10.0).await, 0);
    let mut t = r.tunables.get();
    t.reconcile_interval = Duration::from_secs(20);
    r.tunables.set(t);
    assert_eq!(
        r.passes_at(59.0).await,
        0,
        "the tick already scheduled stays"
    );
    assert_eq!(r.passes_at(61.0).await, 1);
    assert_eq!(r.passes_at(79.0).await, 1);
    assert_eq!(r.passes_at(81.0).await, 2, "then every 20 s");
    assert_eq!(r.passes_at(101.0).await, 3);
    r.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_kick_during_a_pass_makes_one_more_pass_after_it_never_alongside() {
    let mut r = started();
    r.source.set_delay(Duration::from_secs(2));
    r.kicker.kick();
    // Pass 1 syncs from 1 s to 3 s; a kick at 2 s arrives during it.
    assert_eq!(r.passes_at(2.0).await, 1);
    r.kicker.kick();
    r.kicker.kick();
    assert_eq!(r.passes_at(2.9).await, 1);
    assert_eq!(r.passes_at(3.5).await, 2, "served once pass 1 ended");
    assert_eq!(r.passes_at(30.0).await, 2);
    assert_eq!(r.source.most_concurrent(), 1);
    r.stop().await;
}

#[tokio::test(start_paused = true)]
async fn cancelling_stops_the_reconciler_even_during_a_sync() {
    let mut r = started();
    r.source.set_delay(Duration::from_hours(1));
    r.kicker.kick();
    assert_eq!(r.passes_at(2.0).await, 1);
    r.stop().await;
    let text = r.render();
    for result in ["ok", "sync_error", "apply_error"] {
        let line = format!("lachesis_reconcile_runs_total{{result=\"{result}\"}} 0");
        assert!(
            text.contains(&line),
            "an abandoned sync is no outcome: {text}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_gap_kick_waits_its_share_of_the_spread_and_an_earlier_pass_covers_it() {
    let mut r = started();
    // A gap 30 s out (the daemon draws it within tunables.resync_spread):
    // due then, and debounced like any kick from there (1 s).
    r.kicker.kick_after(Duration::from_secs(30));
    assert_eq!(r.passes_at(30.9).await, 0, "not before its time");
    assert_eq!(r.passes_at(31.1).await, 1);
    assert_eq!(r.passes_at(59.0).await, 1, "nothing else waits");

    // A second gap, then an ordinary kick before it is due: that kick's
    // pass covers the gap, which adds no pass of its own.
    r.kicker.kick_after(Duration::from_secs(20)); // due at 79 s
    tokio::time::sleep_until(r.t0 + Duration::from_secs(65)).await;
    r.kicker.kick();
    assert_eq!(r.passes_at(66.1).await, 2);
    assert_eq!(r.passes_at(85.0).await, 2, "the gap was covered at 66 s");
    // Two gaps: the earlier stands.
    r.kicker.kick_after(Duration::from_secs(10));
    r.kicker.kick_after(Duration::from_secs(3));
    assert_eq!(r.passes_at(88.9).await, 2);
    assert_eq!(r.passes_at(89.1).await, 3, "due at 88 s, debounced to 89 s");
    assert_eq!(r.passes_at(120.0).await, 3);
    r.stop().await;
}

#[tokio::test(start_paused = true)]
async fn ticks_fall_at_the_agents_own_phase_and_not_behind_a_kick() {
    let rig = Rig::new(&base());
    let mut t = rig.tunables.get();
    t.reconcile_interval = Duration::from_secs(100);
    rig.tunables.set(t);
    rig.restore();
    let mut r = Running::start_with(rig, |r| r.with_tick_phase(0.7));
    // Ticks at 70 s past each 100 s from state_restored.
    assert_eq!(r.passes_at(69.9).await, 0);
    assert_eq!(r.passes_at(70.1).await, 1);
    assert_eq!(r.passes_at(170.1).await, 2);
    // A kick at 200 s passes at 201 s; the tick at 270 s is more than half
    // an interval later and stays; one at 250 s would not have.
    tokio::time::sleep_until(r.t0 + Duration::from_secs(200)).await;
    r.kicker.kick();
    assert_eq!(r.passes_at(201.1).await, 3);
    assert_eq!(r.passes_at(269.9).await, 3);
    assert_eq!(r.passes_at(270.1).await, 4);
    // A kick at 340 s (pass at 341 s): the tick at 370 s would follow it
    // within half an interval, so the next is 470 s.
    tokio::time::sleep_until(r.t0 + Duration::from_secs(340)).await;
    r.kicker.kick();
    assert_eq!(r.passes_at(341.1).await, 5);
    assert_eq!(r.passes_at(469.9).await, 5);
    assert_eq!(r.passes_at(470.1).await, 6);
    r.stop().await;
}
