//! `lachesis demo --check`: the script at a fast pace, then every tenant
//! and port series against the taps' own counters, no series gone down,
//! and every zone row that must have bytes; a report for a log.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::session::Demo;
use crate::{metrics, net, scenario, truth, view};

/// The pause before each scenario step.
pub(crate) const STEP_EVERY: Duration = Duration::from_secs(2);

/// Which (tenant, zone row) must have bytes after the scripted scenario.
const EXPECTED_ROWS: &[(&str, &str)] = &[
    ("acme", "same_tenant"),
    ("acme", "other_tenant"),
    ("acme", "external (public)"),
    ("acme", "shared"),
    ("acme", "infra"),
    ("acme", "multicast"),
    ("globex", "same_tenant"),
    ("globex", "other_tenant"),
    ("globex", "external (public)"),
    ("globex", "external (public-2)"),
    ("globex", "shared"),
    ("globex", "infra"),
    ("platform", "other_tenant"),
    ("unknown", "miss"),
];

/// Runs the check; its exit code.
pub(crate) fn run(demo: &Demo) -> ExitCode {
    let deadline = Instant::now() + Duration::from_secs(150);
    let mut failures = Vec::new();
    for step in scenario::SCRIPT {
        std::thread::sleep(STEP_EVERY);
        if demo.stop.load(Ordering::SeqCst) {
            failures.push("interrupted".to_owned());
            break;
        }
        demo.mark_done(step);
        if let Err(e) = scenario::run(demo, step) {
            failures.push(format!("step {step:?}: {e:#}"));
            break;
        }
    }
    std::thread::sleep(Duration::from_secs(2));
    demo.traffic.pause_all();
    let live = demo.scene().truth.live_taps();
    let settled = demo.traffic.wait_idle(Duration::from_secs(10))
        && net::wait_quiet(&live, 3, Duration::from_secs(15)).is_ok();
    if !settled {
        failures.push("the traffic never stopped".into());
    }
    // /metrics shows the last flush: poll until it agrees or time is up.
    let mut last_diff = Vec::new();
    let mut compared = 0;
    while failures.is_empty() {
        let counters = match demo.live_counters() {
            Ok(c) => c,
            Err(e) => {
                failures.push(format!("reading the taps: {e:#}"));
                break;
            }
        };
        let want = demo.scene().truth.expected(&counters);
        let (got, names) = {
            let o = demo.observed();
            match o.latest() {
                Some(s) => (truth::observed(s), s.tenant_names()),
                None => (truth::Expected::default(), BTreeMap::new()),
            }
        };
        last_diff = truth::diff(&want, &got, &names);
        compared = want.tenants.len() + want.ports.len();
        if last_diff.is_empty() || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    failures.extend(last_diff);
    let o = demo.observed();
    failures.extend(o.monotonic.violations.iter().cloned());
    if let Some(s) = o.latest() {
        let rows = metrics::rows(s, None);
        for (tenant, zone) in EXPECTED_ROWS {
            if !rows.iter().any(|r| r.tenant == *tenant && r.zone == *zone) {
                failures.push(format!("no bytes for {tenant} in zone {zone}"));
            }
        }
        println!("{}", view::totals_table(&rows));
    }
    let gone = demo.scene().gone.clone();
    failures.extend(demo.traffic.problems(&gone));
    if failures.is_empty() {
        println!(
            "lachesis demo --check: OK — {compared} tenant and port totals equal the taps' own \
             counters (bytes and packets, both directions); {} series never went down; \
             {} steps run in {:.0} s",
            o.monotonic.series(),
            scenario::SCRIPT.len(),
            demo.uptime().as_secs_f64()
        );
        ExitCode::SUCCESS
    } else {
        println!("lachesis demo --check: FAILED");
        for f in &failures {
            println!("  {f}");
        }
        if let Some(agent) = demo.agent().as_ref() {
            println!("agent log ends:\n{}", agent.log_tail(40));
        }
        ExitCode::FAILURE
    }
}
