//! Benchmark: one full sync of the benchmarks' generated cloud
//! (`lachesis_sim::generate`: 20 000 ports, 5 000 subnets, 2 000 routers,
//! 10 000 servers) from the simulator over loopback, with the page size a
//! real deployment would use. Three figures:
//!
//! - time: the median of several syncs by one client (token reused);
//! - traffic: the list requests and body bytes of one sync, as received,
//!   and each list's bytes as whole objects and as the fields a sync asks
//!   Neutron for (computed: the simulator answers whole objects);
//! - memory: the peak resident set (`VmHWM`) of a separate process that
//!   does one sync and plans it as the agent does (each page parsed as it
//!   arrives) — a pass's metadata work — median of several processes,
//!   beside one that merges the pages into bodies first (`lachesis plan
//!   --save-dir`) and one that only gets a token. The simulator stays in
//!   this process, so its own memory is not counted.
//!
//! `cargo run --release -p lachesis-openstack --example bench_sync [RUNS] [PAGE]`

use std::process::Command;
use std::time::{Duration, Instant};

use lachesis_openstack::client::Traffic;
use lachesis_openstack::config::AppCredRef;
use lachesis_openstack::{ApiMetrics, Client, CloudConfig, Credentials};
use lachesis_planner::{parse_snapshot, plan, ApiBodies, PlanOptions, Resource, SnapshotParser};
use lachesis_sim::generate::{self, APP_CREDENTIAL_ID, APP_CREDENTIAL_SECRET};
use lachesis_sim::{self as sim, Store};

/// Set (to the simulator's auth URL) in a child process: it measures itself.
const CHILD: &str = "LACHESIS_BENCH_SYNC_CHILD";
/// `pages` (one sync parsed page by page, as the agent does, and its
/// plan), `bodies` (one sync merged into bodies, parsed, planned) or
/// `token` (the baseline: a token only).
const CHILD_WORK: &str = "LACHESIS_BENCH_SYNC_WORK";

fn median<T: Ord + Copy>(mut v: Vec<T>) -> T {
    v.sort();
    v[v.len() / 2]
}

fn client(auth_url: String) -> Client {
    let cfg = CloudConfig::new(
        auth_url,
        Credentials::ApplicationCredential {
            credential: AppCredRef::Id(APP_CREDENTIAL_ID.into()),
            secret: APP_CREDENTIAL_SECRET.into(),
        },
    );
    Client::new(cfg, ApiMetrics::default()).expect("client")
}

/// `VmHWM` (the peak resident set) of this process, in KiB.
fn peak_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/self/status")
}

/// The measured process: the agent's runtime shape (multi-threaded, one
/// worker per core), one sync, its plan, then the peak on standard output.
fn child(auth_url: String) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let client = client(auth_url);
    let work = std::env::var(CHILD_WORK).unwrap_or_default();
    let (snapshot, bodies) = match work.as_str() {
        "token" => {
            runtime.block_on(client.session().token()).expect("token");
            println!("{}", peak_kib());
            return;
        }
        "bodies" => {
            let result = runtime.block_on(client.sync()).expect("sync");
            let (snapshot, _) = parse_snapshot(&result.bodies).expect("parse");
            (snapshot, Some(result))
        }
        _ => {
            let mut parser = SnapshotParser::new();
            let services = runtime
                .block_on(client.sync_into(&mut parser))
                .expect("sync");
            (parser.finish(services.sources()).0, None)
        }
    };
    let planned = plan(&snapshot, &PlanOptions::default());
    assert!(!planned.bindings.is_empty(), "the cloud has VMs");
    drop(bodies);
    println!("{}", peak_kib());
}

/// Peaks (KiB) of `runs` child processes doing `work`, one after another.
fn child_peaks(auth_url: &str, work: &str, runs: usize) -> Vec<u64> {
    let exe = std::env::current_exe().expect("current_exe");
    (0..runs)
        .map(|_| {
            let out = Command::new(&exe)
                .env(CHILD, auth_url)
                .env(CHILD_WORK, work)
                .output()
                .expect("run the measured process");
            assert!(
                out.status.success(),
                "measured process failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout)
                .trim()
                .parse()
                .expect("the child prints its VmHWM")
        })
        .collect()
}

/// `part` as a percentage of `whole`.
fn percent(part: usize, whole: usize) -> f64 {
    #[expect(clippy::cast_precision_loss, reason = "byte counts of one sync")]
    let (p, w) = (part as f64, whole as f64);
    100.0 * p / w
}

fn mib(kib: u64) -> f64 {
    // KiB counts of a process fit f64 exactly.
    #[expect(clippy::cast_precision_loss, reason = "KiB of one process")]
    let k = kib as f64;
    k / 1024.0
}

fn main() {
    if let Ok(url) = std::env::var(CHILD) {
        child(url);
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(parent());
}

/// One sync's traffic as received, then each list's bytes as whole objects
/// and as the fields a sync asks for, computed from `whole` (the simulator
/// answers whole objects whatever `fields=` asks; page wrappers and links,
/// ~0.2 kB a page, left out).
fn print_traffic(received: Traffic, fetched: &ApiBodies, whole: &ApiBodies) {
    println!(
        "traffic per sync: {} list requests, {} bytes of bodies received",
        received.requests, received.bytes
    );
    let selected = whole.field_selected();
    let size = |b: &ApiBodies, r: Resource| {
        b.body(r)
            .map_or(0, |body| serde_json::to_vec(body).expect("JSON").len())
    };
    let (mut all_whole, mut all_selected, mut neutron_whole, mut neutron_selected) = (0, 0, 0, 0);
    println!("  list             items  whole objects  fields a sync asks for");
    for r in Resource::ALL {
        let items = fetched.items(r).map_or(0, <[_]>::len);
        let (w, f) = (size(whole, r), size(&selected, r));
        all_whole += w;
        all_selected += f;
        let saved = if r.fields().is_some() {
            neutron_whole += w;
            neutron_selected += f;
            format!(" ({:+.0} %)", percent(f, w) - 100.0)
        } else {
            String::new()
        };
        println!(
            "  {:<14} {items:>6} {w:>14} {f:>14} bytes{saved}",
            r.collection()
        );
    }
    println!(
        "  lists with fields=    {neutron_whole:>14} {neutron_selected:>14} bytes ({:+.0} %)",
        percent(neutron_selected, neutron_whole) - 100.0
    );
    println!(
        "  all lists             {all_whole:>14} {all_selected:>14} bytes ({:+.0} %)",
        percent(all_selected, all_whole) - 100.0
    );
}

async fn parent() {
    let mut args = std::env::args().skip(1);
    let runs: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let page: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let mut topology = generate::large();
    topology.settings.page_size = Some(page);
    let store = Store::from_topology(&topology).expect("valid topology");
    let size = format!(
        "{} ports, {} subnets, {} networks, {} routers, {} servers, {} projects",
        topology.ports.len(),
        topology.subnets.len(),
        topology.networks.len(),
        topology.routers.len(),
        topology.servers.len(),
        topology.projects.len()
    );
    let handle = sim::start(store, "127.0.0.1:0".parse().unwrap(), None)
        .await
        .expect("listen");
    let client = client(handle.auth_url());
    client.sync().await.expect("warm-up sync");
    let mut times = Vec::new();
    let mut traffic = Vec::new();
    let mut last = None;
    for _ in 0..runs {
        let before = client.session().traffic();
        let start = Instant::now();
        let r = client.sync().await.expect("sync");
        times.push(start.elapsed());
        traffic.push(client.session().traffic() - before);
        last = Some(r);
    }
    let bodies = last.expect("RUNS > 0").bodies;
    let ports = bodies.ports["ports"].as_array().map_or(0, Vec::len);
    let pages = handle.with_store(|s| s.stats()).requests_for("ports") / (runs as u64 + 1);
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "sync ({size}; page {page}): \
         median {:.1} ms over {runs} runs (min {:.1}, max {:.1}); {ports} ports in {pages} pages",
        ms(median(times.clone())),
        ms(*times.iter().min().unwrap()),
        ms(*times.iter().max().unwrap()),
    );

    let one = traffic[0];
    assert!(
        traffic.iter().all(|t| *t == one),
        "every sync of an unchanged cloud receives the same: {traffic:?}"
    );
    // The same lists rendered in-process as the services answer them
    // unpaged: whole objects, for what field selection saves.
    let whole = handle.with_store(|s| generate::bodies(s));
    print_traffic(one, &bodies, &whole);
    drop(bodies);

    let baseline = child_peaks(&handle.auth_url(), "token", runs);
    println!(
        "memory: peak VmHWM of one sync + plan in its own process, median over {runs} processes \
         (a process that only gets a token: {:.1} MiB)",
        mib(median(baseline)),
    );
    for (work, what) in [
        ("pages", "each page parsed as it arrives (the agent)"),
        (
            "bodies",
            "pages merged into bodies, then parsed (plan --save-dir)",
        ),
    ] {
        let peaks = child_peaks(&handle.auth_url(), work, runs);
        println!(
            "  {:.1} MiB (min {:.1}, max {:.1}): {what}",
            mib(median(peaks.clone())),
            mib(*peaks.iter().min().unwrap()),
            mib(*peaks.iter().max().unwrap()),
        );
    }
}
