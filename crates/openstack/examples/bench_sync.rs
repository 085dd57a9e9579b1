//! Benchmark: one full sync of the benchmarks' generated cloud
//! (`lachesis_sim::generate`: 20 000 ports, 5 000 subnets, 2 000 routers,
//! 10 000 servers) from the simulator over loopback, with the page size a
//! real deployment would use. Prints the median of several runs.
//!
//! `cargo run --release -p lachesis-openstack --example bench_sync [RUNS] [PAGE]`

use std::time::{Duration, Instant};

use lachesis_openstack::config::AppCredRef;
use lachesis_openstack::{ApiMetrics, Client, CloudConfig, Credentials};
use lachesis_sim::generate::{self, APP_CREDENTIAL_ID, APP_CREDENTIAL_SECRET};
use lachesis_sim::{self as sim, Store};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
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
    let cfg = CloudConfig::new(
        handle.auth_url(),
        Credentials::ApplicationCredential {
            credential: AppCredRef::Id(APP_CREDENTIAL_ID.into()),
            secret: APP_CREDENTIAL_SECRET.into(),
        },
    );
    let client = Client::new(cfg, ApiMetrics::default()).expect("client");
    client.sync().await.expect("warm-up sync");
    let mut times = Vec::new();
    let mut ports = 0;
    for _ in 0..runs {
        let start = Instant::now();
        let r = client.sync().await.expect("sync");
        times.push(start.elapsed());
        ports = r.bodies.ports["ports"].as_array().map_or(0, Vec::len);
    }
    let pages = handle.with_store(|s| s.stats()).requests_for("ports") / (runs as u64 + 1);
    println!(
        "sync ({size}; page {page}): \
         median {:.1} ms over {runs} runs (min {:.1}, max {:.1}); {ports} ports in {pages} pages",
        median(times.clone()).as_secs_f64() * 1e3,
        times.iter().min().unwrap().as_secs_f64() * 1e3,
        times.iter().max().unwrap().as_secs_f64() * 1e3,
    );
}
