//! `make bench-reconcile` (root): reconcile passes at 20 000 ports / 5 000
//! subnets / 2 000 routers (`lachesis_sim::generate`) against the simulator
//! on loopback, through the agent's real [`Reconciler`] with its
//! [`OpenStackSource`] and its ledger owner, timed by phase: sync (the
//! fetch, each page parsed as it arrives), plan (sorting the parsed lists,
//! planning, freeing the snapshot), diff, apply (the rest:
//! bindings, the settle batch with its drain and flushes, kernel writes,
//! commit, prunes), with the kernel writes counted and their time shown
//! apart.
//!
//! Cases: a first pass (cold: every row, binding and address written); an
//! unchanged cloud (must write nothing); one router changed — an extra
//! route added or removed, and a re-gateway there and back (must write
//! only that router's rows). Each once with a kernel writer that only
//! counts, once with the real `Datapath` (apply time then includes the
//! `bpf()` writes). Medians of several passes; a table, then one JSON
//! line. Nothing timed is asserted; the exit status is 1 when an unchanged
//! pass wrote anything or a pass failed (correctness, not timing).

mod common;

use std::collections::BTreeSet;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use common::{median, ms, rig, Nowhere, Rig, Writes, PAGE};
use lachesis_abi::Prefix;
use lachesis_agent::reconcile::{KernelWriter, PassResult, Trigger, Write};
use lachesis_datapath::Datapath;
use lachesis_planner::diff;
use lachesis_sim::generate;
use lachesis_sim::SimHandle;

/// Cold passes (each on fresh maps and a fresh ledger).
const COLD: usize = 3;
/// Passes of each of the other cases.
const RUNS: usize = 6;
/// The router every one-router change touches.
const ROUTER: usize = 7;

/// One pass, split by phase (milliseconds).
#[derive(Debug, Clone, Default)]
struct Sample {
    total: f64,
    fetch: f64,
    plan: f64,
    diff: f64,
    writes: Writes,
    ok: bool,
}

impl Sample {
    fn apply(&self) -> f64 {
        (self.total - self.fetch - self.plan - self.diff).max(0.0)
    }

    fn after_sync(&self) -> f64 {
        self.total - self.fetch
    }
}

async fn pass<K: KernelWriter>(rig: &mut Rig<K>) -> Sample {
    let old = rig.reconciler.committed().borrow().plan.clone();
    rig.writer.take();
    let started = Instant::now();
    let result = rig.reconciler.pass(Trigger::Kick).await;
    let total = ms(started.elapsed());
    let writes = rig.writer.take();
    let new = rig.reconciler.committed().borrow().plan.clone();
    // The pass's own diff, timed apart on the same two plans.
    let started = Instant::now();
    let delta = std::hint::black_box(diff(&old, &new));
    let diff_ms = ms(started.elapsed());
    drop(delta);
    let timings = rig.source.last_timings().unwrap_or_default();
    Sample {
        total,
        fetch: ms(timings.fetch),
        plan: ms(timings.plan),
        diff: diff_ms,
        writes,
        ok: result == PassResult::Ok,
    }
}

/// Every prefix router `r` accounts for: its gateway address on either
/// external network, its routes' destinations and the extra route's.
fn router_prefixes(r: usize) -> BTreeSet<Prefix> {
    let mut out = BTreeSet::new();
    for e in 0..generate::EXTERNALS {
        let (router, gateway) = generate::router(r, e);
        for ip in &gateway.fixed_ips {
            out.insert(format!("{}/32", ip.ip_address).parse().unwrap());
        }
        for route in &router.routes {
            out.insert(route.destination.parse().unwrap());
        }
    }
    out.insert(generate::extra_route(r).destination.parse().unwrap());
    out
}

/// Writes that are not trie rows of router `r`.
fn foreign(writes: &[Write], r: usize) -> usize {
    let own = router_prefixes(r);
    writes
        .iter()
        .filter(|w| match w {
            Write::UpsertZone { prefix, .. } | Write::DeleteZone { prefix, .. } => {
                !own.contains(prefix)
            }
            _ => true,
        })
        .count()
}

/// The results of one case.
struct Case {
    writer: &'static str,
    name: &'static str,
    samples: Vec<Sample>,
    /// Writes outside the changed router's rows (one-router cases only).
    foreign: Option<usize>,
}

impl Case {
    fn med(&self, f: impl Fn(&Sample) -> f64) -> f64 {
        median(&self.samples.iter().map(f).collect::<Vec<_>>())
    }

    #[expect(
        clippy::cast_precision_loss,
        reason = "write counts are far below 2^52"
    )]
    fn writes(&self) -> f64 {
        self.med(|s| s.writes.log.len() as f64)
    }

    fn failed(&self) -> bool {
        self.samples.iter().any(|s| !s.ok)
    }
}

async fn cases<K: KernelWriter>(
    writer: &'static str,
    sim: &SimHandle,
    kernel: impl Fn(&Arc<Datapath>) -> K,
) -> Vec<Case> {
    let mut cold = Vec::new();
    let mut last = None;
    for _ in 0..COLD {
        let mut fresh = rig(sim, &kernel);
        cold.push(pass(&mut fresh).await);
        last = Some(fresh);
    }
    let mut rig = last.expect("COLD > 0");
    let mut unchanged = Vec::new();
    for _ in 0..RUNS {
        unchanged.push(pass(&mut rig).await);
    }
    let id = generate::router_id(ROUTER);
    let extra = generate::extra_route(ROUTER);
    let mut route = Vec::new();
    for i in 0..RUNS {
        sim.with_store(|s| {
            if i % 2 == 0 {
                s.add_route(&id, extra.clone())
            } else {
                s.remove_route(&id, &extra)
            }
        })
        .expect("route mutation");
        route.push(pass(&mut rig).await);
    }
    let mut regateway = Vec::new();
    for i in 0..RUNS {
        sim.with_store(|s| generate::regateway(s, ROUTER, (i + 1) % 2))
            .expect("re-gateway");
        regateway.push(pass(&mut rig).await);
    }
    let foreign_of =
        |samples: &[Sample]| Some(samples.iter().map(|s| foreign(&s.writes.log, ROUTER)).sum());
    vec![
        Case {
            writer,
            name: "cold",
            samples: cold,
            foreign: None,
        },
        Case {
            writer,
            name: "unchanged",
            samples: unchanged,
            foreign: None,
        },
        Case {
            writer,
            name: "one route",
            foreign: foreign_of(&route),
            samples: route,
        },
        Case {
            writer,
            name: "re-gateway",
            foreign: foreign_of(&regateway),
            samples: regateway,
        },
    ]
}

fn print_table(cases: &[Case]) {
    println!(
        "{:<9} {:<10} {:>4} {:>9} {:>8} {:>8} {:>9} {:>11} {:>11} {:>9} {:>7}  only router {ROUTER}'s rows",
        "writer", "case", "n", "sync ms", "plan ms", "diff ms", "apply ms", "(kernel ms)", "after sync", "total ms", "writes"
    );
    for c in cases {
        let only = match c.foreign {
            None => "-".to_owned(),
            Some(0) => "yes".to_owned(),
            Some(n) => format!("NO ({n} other writes)"),
        };
        println!(
            "{:<9} {:<10} {:>4} {:>9.1} {:>8.1} {:>8.2} {:>9.1} {:>11.1} {:>11.1} {:>9.1} {:>7}  {only}",
            c.writer,
            c.name,
            c.samples.len(),
            c.med(|s| s.fetch),
            c.med(|s| s.plan),
            c.med(|s| s.diff),
            c.med(Sample::apply),
            c.med(|s| ms(s.writes.time)),
            c.med(Sample::after_sync),
            c.med(|s| s.total),
            c.writes(),
        );
    }
}

fn key(c: &Case) -> String {
    format!("{}_{}", c.writer, c.name.replace([' ', '-'], "_"))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    lachesis_lab::require_root_for(
        "loading the classifier for the ledger owner and the kernel writes",
    );
    let mut topology = generate::large();
    topology.settings.page_size = Some(PAGE);
    let sim = common::serve(&topology).await;
    let mut all = cases("counting", &sim, |_| Nowhere).await;
    all.extend(cases("kernel", &sim, Arc::clone).await);

    let plan = all[0].samples[0].writes.log.len();
    println!(
        "cloud: {} ports, {} subnets, {} routers, {} servers (lachesis_sim::generate), Neutron page {PAGE}; \
         a cold pass writes {plan} rows, bindings and addresses",
        topology.ports.len(),
        topology.subnets.len(),
        topology.routers.len(),
        topology.servers.len(),
    );
    println!(
        "medians; sync = fetch over HTTP with each page parsed, plan = sort + plan + freeing the lists, apply = the rest \
         of the pass (bindings, settle batch, kernel writes, commit, prunes), after sync = plan + diff + apply"
    );
    print_table(&all);

    let mut json = Vec::new();
    for c in &all {
        json.push((format!("{}_pass_ms", key(c)), c.med(|s| s.total)));
        json.push((
            format!("{}_after_sync_ms", key(c)),
            c.med(Sample::after_sync),
        ));
        json.push((format!("{}_writes", key(c)), c.writes()));
    }
    println!("{}", common::json_line(&json));

    let mut status = ExitCode::SUCCESS;
    for c in &all {
        if c.failed() {
            eprintln!(
                "bench_reconcile: a {} {} pass did not end ok",
                c.writer, c.name
            );
            status = ExitCode::FAILURE;
        }
        if c.name == "unchanged" && c.samples.iter().any(|s| !s.writes.log.is_empty()) {
            eprintln!(
                "bench_reconcile: an unchanged {} pass wrote to the kernel: {:?}",
                c.writer,
                c.samples
                    .iter()
                    .flat_map(|s| s.writes.log.iter())
                    .take(5)
                    .collect::<Vec<_>>()
            );
            status = ExitCode::FAILURE;
        }
    }
    status
}
