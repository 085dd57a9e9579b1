//! Benchmark: one full sync of a large cloud (20 000 ports, 5 000 subnets,
//! 2 000 routers, 5 000 servers) from the simulator over loopback, with the
//! page size a real deployment would use. Prints the median of several runs.
//!
//! `cargo run --release -p lachesis-openstack --example bench_sync [RUNS] [PAGE]`

use std::time::{Duration, Instant};

use lachesis_openstack::config::AppCredRef;
use lachesis_openstack::{ApiMetrics, Client, CloudConfig, Credentials};
use lachesis_sim::topology::{
    AppCredential, FixedIp, Network, Port, Project, Router, Server, Subnet, User,
};
use lachesis_sim::{self as sim, Store, Topology};

fn topology(page: usize) -> Topology {
    let mut t = Topology::default();
    t.settings.page_size = Some(page);
    t.projects = (0..200)
        .map(|i| Project {
            id: format!("p{i:04}"),
            name: format!("project-{i}"),
            domain_id: "default".into(),
            description: String::new(),
        })
        .collect();
    t.users = vec![User {
        id: "u".into(),
        name: "admin".into(),
        domain_id: "default".into(),
        password: "x".into(),
    }];
    t.application_credentials = vec![AppCredential {
        id: "ac".into(),
        name: "bench".into(),
        user_id: "u".into(),
        project_id: "p0000".into(),
        secret: "s".into(),
    }];
    t.networks = (0..1000)
        .map(|i| Network {
            id: format!("n{i:05}"),
            name: format!("net-{i}"),
            project_id: format!("p{:04}", i % 200),
            shared: false,
            external: i == 0,
        })
        .collect();
    t.subnets = (0..5000)
        .map(|i| Subnet {
            id: format!("s{i:05}"),
            name: String::new(),
            network_id: format!("n{:05}", i % 1000),
            project_id: format!("p{:04}", (i % 1000) % 200),
            cidr: format!("10.{}.{}.0/24", i / 256, i % 256),
            gateway_ip: Some(format!("10.{}.{}.1", i / 256, i % 256)),
            enable_dhcp: true,
        })
        .collect();
    t.ports = (0..20_000)
        .map(|i| {
            let s = i % 5000;
            Port {
                id: format!("port{i:06}"),
                name: String::new(),
                network_id: format!("n{:05}", s % 1000),
                project_id: format!("p{:04}", (s % 1000) % 200),
                mac_address: format!(
                    "fa:16:3e:{:02x}:{:02x}:{:02x}",
                    i >> 16,
                    (i >> 8) & 0xff,
                    i & 0xff
                ),
                device_id: format!("vm{:05}", i % 5000),
                device_owner: "compute:nova".into(),
                fixed_ips: vec![FixedIp {
                    subnet_id: format!("s{s:05}"),
                    ip_address: format!("10.{}.{}.{}", s / 256, s % 256, 10 + i / 5000),
                }],
                allowed_address_pairs: vec![],
            }
        })
        .collect();
    t.routers = (0..2000)
        .map(|i| Router {
            id: format!("r{i:05}"),
            name: String::new(),
            project_id: format!("p{:04}", i % 200),
            external_gateway_info: None,
            routes: vec![],
        })
        .collect();
    t.servers = (0..5000)
        .map(|i| Server {
            id: format!("vm{i:05}"),
            name: format!("vm-{i}"),
            tenant_id: format!("p{:04}", i % 200),
            status: "ACTIVE".into(),
            availability_zone: "nova".into(),
        })
        .collect();
    t
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = std::env::args().skip(1);
    let runs: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let page: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let store = Store::from_topology(&topology(page)).expect("valid topology");
    let handle = sim::start(store, "127.0.0.1:0".parse().unwrap(), None)
        .await
        .expect("listen");
    let cfg = CloudConfig::new(
        handle.auth_url(),
        Credentials::ApplicationCredential {
            credential: AppCredRef::Id("ac".into()),
            secret: "s".into(),
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
        "sync (20000 ports, 5000 subnets, 1000 networks, 2000 routers, 5000 servers, 200 projects; page {page}): \
         median {:.1} ms over {runs} runs (min {:.1}, max {:.1}); {ports} ports in {pages} pages",
        median(times.clone()).as_secs_f64() * 1e3,
        times.iter().min().unwrap().as_secs_f64() * 1e3,
        times.iter().max().unwrap().as_secs_f64() * 1e3,
    );
}
