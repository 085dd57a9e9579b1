//! `make bench-plan`: plan build for the benchmarks' generated cloud
//! (`lachesis_sim::generate`: 20 000 ports, 5 000 subnets, 2 000 routers
//! with extraroutes; DESIGN §16: < 200 ms), and the diff of two plans
//! differing by one router. Prints medians; the last line is one JSON
//! object. It measures the planner but lives here, beside the generator
//! of its cloud: the simulator depends on the planner, and the planner
//! depends on nothing of ours, not even for its tests.

use std::time::Instant;

use lachesis_planner::{diff, parse_snapshot, plan, PlanOptions};
use lachesis_sim::{generate, Store};

const RUNS: usize = 9;
/// The router re-gatewayed (and one of its routes dropped) in the second cloud.
const CHANGED_ROUTER: usize = 7;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// CPU time of this thread in ms: on a machine shared with other builds the
/// wall clock also counts time spent waiting for a core, so both are shown.
fn thread_cpu_ms() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &raw mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    #[expect(
        clippy::cast_precision_loss,
        reason = "seconds and nanoseconds of a thread's CPU time fit f64 exactly"
    )]
    let ms = ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 / 1e6;
    ms
}

/// Runs `f`, returning its output, wall ms and CPU ms.
fn time<T>(f: impl FnOnce() -> T) -> (T, f64, f64) {
    let cpu = thread_cpu_ms();
    let start = Instant::now();
    let out = f();
    (
        out,
        start.elapsed().as_secs_f64() * 1e3,
        thread_cpu_ms() - cpu,
    )
}

fn main() {
    let mut store = Store::from_topology(&generate::large()).expect("the generated cloud is valid");
    let bodies = generate::bodies(&store);
    let r = CHANGED_ROUTER;
    generate::regateway(&mut store, r, 1).expect("re-gateway");
    store
        .remove_route(&generate::router_id(r), &generate::appliance_route(r))
        .expect("the appliance route exists");
    let changed = generate::bodies(&store);

    let mut parse_ms = Vec::new();
    let mut snap = None;
    for _ in 0..RUNS {
        let (parsed, ms, _) = time(|| parse_snapshot(&bodies).expect("generated bodies parse"));
        parse_ms.push(ms);
        snap = Some(parsed);
    }
    let (snap, report) = snap.expect("RUNS > 0");
    assert!(
        report.is_empty(),
        "generator produced malformed entries: {:?}",
        &report.skipped[..report.skipped.len().min(3)]
    );
    let (snap2, _) = parse_snapshot(&changed).expect("generated bodies parse");
    let routes: usize = snap.routers.iter().map(|r| r.routes.len()).sum();

    let opts = PlanOptions::default();
    let mut plan_ms = Vec::new();
    let mut plan_cpu = Vec::new();
    let mut old = None;
    for _ in 0..RUNS {
        let (p, ms, cpu) = time(|| plan(&snap, &opts));
        plan_ms.push(ms);
        plan_cpu.push(cpu);
        old = Some(p);
    }
    let old = old.expect("RUNS > 0");
    let new = plan(&snap2, &opts);
    let mut diff_ms = Vec::new();
    let mut delta = None;
    for _ in 0..RUNS {
        let (d, ms, _) = time(|| diff(&old, &new));
        diff_ms.push(ms);
        delta = Some(d);
    }
    let delta = delta.expect("RUNS > 0");

    println!(
        "cloud: {} ports, {} subnets, {} routers, {} extraroutes, {} floating IPs",
        snap.ports.len(),
        snap.subnets.len(),
        snap.routers.len(),
        routes,
        snap.floating_ips.len()
    );
    println!(
        "plan: {} trie rows, {} bindings, {} router MACs, {} anomalies, fallbacks {:?}",
        old.trie.len(),
        old.bindings.len(),
        old.router_macs.len(),
        old.anomalies.len(),
        old.route_fallbacks
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(r, n)| (r.label(), *n))
            .collect::<Vec<_>>()
    );
    println!(
        "delta (router {CHANGED_ROUTER} re-gatewayed, one route dropped): {} trie upserts, {} trie deletes, {} bindings changed, {} router MACs changed",
        delta.trie_upsert.len(),
        delta.trie_delete.len(),
        delta.bindings_changed.len(),
        delta.router_macs_changed.len()
    );
    let (p, pl, d) = (
        median(parse_ms.clone()),
        median(plan_ms.clone()),
        median(diff_ms.clone()),
    );
    println!(
        "parse bodies → snapshot: median {p:.2} ms over {RUNS} runs (min {:.2}, max {:.2})",
        min(&parse_ms),
        max(&parse_ms)
    );
    println!(
        "plan build: median {pl:.2} ms wall over {RUNS} runs (min {:.2}, max {:.2}; target < 200), median {:.2} ms CPU",
        min(&plan_ms),
        max(&plan_ms),
        median(plan_cpu)
    );
    println!(
        "diff of two plans: median {d:.3} ms over {RUNS} runs (min {:.3}, max {:.3})",
        min(&diff_ms),
        max(&diff_ms)
    );
    // Written by hand so the keys keep the documented order.
    println!(
        "{{\"plan_20000_ports_ms\": {}, \"diff_one_router_ms\": {}}}",
        round(pl),
        round(d)
    );
}

fn min(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::INFINITY, f64::min)
}

fn max(v: &[f64]) -> f64 {
    v.iter().copied().fold(0.0, f64::max)
}

fn round(ms: f64) -> f64 {
    (ms * 1000.0).round() / 1000.0
}
