//! `make bench-plan`: plan build for a generated cloud of 20 000 ports,
//! 5 000 subnets and 2 000 routers with extraroutes (DESIGN §16: < 200 ms),
//! and the diff of two plans differing by one router. Prints medians; the
//! last line is one JSON object.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Instant;

use lachesis_planner::{diff, parse_snapshot, plan, ApiBodies, OptionalBody, PlanOptions};
use serde_json::{json, Value};

const PROJECTS: usize = 500;
const SUBNETS: usize = 5_000;
const ROUTERS: usize = 2_000;
const TRANSITS: usize = 4;
const VMS: usize = 10_000;
const RUNS: usize = 9;

/// Tenant subnets are `0..TENANT_SUBNETS`; the rest are transit and external.
const TENANT_SUBNETS: usize = SUBNETS - TRANSITS - 1;

fn project(i: usize) -> String {
    format!("{:032x}", 0xa000_0000_u128 + (i % PROJECTS) as u128)
}

fn uuid(kind: u32, i: usize) -> String {
    format!("{kind:08x}-0000-4000-8000-{i:012x}")
}

fn mac(kind: u8, i: usize) -> String {
    format!(
        "fa:16:3e:{kind:02x}:{:02x}:{:02x}",
        (i >> 8) & 0xff,
        i & 0xff
    )
}

/// Tenant subnet k: IPv4 `10.x.y.0/24`, every fifth one IPv6 `2001:db8:k::/64`.
fn tenant_base(k: usize) -> (IpAddr, u8) {
    if k % 5 == 4 {
        (
            IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, k as u16, 0, 0, 0, 0, 0)),
            64,
        )
    } else {
        (
            IpAddr::V4(Ipv4Addr::new(10, (k / 256) as u8, (k % 256) as u8, 0)),
            24,
        )
    }
}

fn host(base: IpAddr, n: u32) -> IpAddr {
    match base {
        IpAddr::V4(a) => IpAddr::V4(Ipv4Addr::from(u32::from(a) + n)),
        IpAddr::V6(a) => IpAddr::V6(Ipv6Addr::from(u128::from(a) + u128::from(n))),
    }
}

fn transit_addr(r: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(
        u32::from(Ipv4Addr::new(100, 64 + (r % TRANSITS) as u8, 0, 0)) + 1 + r as u32,
    ))
}

// A generator helper: one positional argument per port field reads best here.
#[allow(clippy::too_many_arguments, clippy::needless_pass_by_value)]
fn port(
    id: String,
    net: &str,
    proj: &str,
    mac: String,
    owner: &str,
    device: &str,
    subnet: &str,
    ip: IpAddr,
) -> Value {
    json!({"id": id, "network_id": net, "project_id": proj, "tenant_id": proj, "mac_address": mac,
           "device_owner": owner, "device_id": device, "status": "ACTIVE", "admin_state_up": true,
           "fixed_ips": [{"subnet_id": subnet, "ip_address": ip.to_string()}], "allowed_address_pairs": []})
}

#[allow(clippy::too_many_lines)]
fn cloud(second_external_for: Option<usize>) -> ApiBodies {
    let mut networks = Vec::new();
    let mut subnets = Vec::new();
    let mut ports = Vec::new();
    let mut routers = Vec::new();
    let mut fips = Vec::new();
    let admin = project(0);
    for ext in 0..2 {
        let (net, sub) = (uuid(1, 900_000 + ext), uuid(2, 900_000 + ext));
        networks.push(json!({"id": net, "name": format!("public-{ext}"), "project_id": admin, "shared": false, "router:external": true}));
        if ext == 0 {
            subnets.push(
                json!({"id": sub, "network_id": net, "project_id": admin, "cidr": "203.0.112.0/22",
                                "gateway_ip": "203.0.112.1", "ip_version": 4}),
            );
        } else {
            subnets.push(
                json!({"id": sub, "network_id": net, "project_id": admin, "cidr": "198.18.0.0/15",
                                "gateway_ip": "198.18.0.1", "ip_version": 4}),
            );
        }
    }
    for t in 0..TRANSITS {
        let (net, sub) = (uuid(1, 800_000 + t), uuid(2, 800_000 + t));
        networks.push(json!({"id": net, "name": format!("transit-{t}"), "project_id": admin, "shared": true, "router:external": false}));
        subnets.push(json!({"id": sub, "network_id": net, "project_id": admin, "cidr": format!("100.{}.0.0/16", 64 + t),
                            "gateway_ip": null, "ip_version": 4}));
    }
    for k in 0..TENANT_SUBNETS {
        let (net, sub) = (uuid(1, k), uuid(2, k));
        let (base, len) = tenant_base(k);
        let v = if base.is_ipv4() { 4 } else { 6 };
        networks.push(json!({"id": net, "name": format!("net-{k}"), "project_id": project(k), "shared": false, "router:external": false}));
        subnets.push(json!({"id": sub, "network_id": net, "project_id": project(k), "cidr": format!("{base}/{len}"),
                            "gateway_ip": host(base, 1).to_string(), "ip_version": v}));
    }
    for r in 0..ROUTERS {
        let rid = uuid(3, r);
        let owner = project(2 * r);
        let ext = usize::from(second_external_for == Some(r));
        let gw_ip = if ext == 0 {
            IpAddr::V4(Ipv4Addr::from(
                u32::from(Ipv4Addr::new(203, 0, 112, 10)) + r as u32,
            ))
        } else {
            IpAddr::V4(Ipv4Addr::new(198, 18, 0, 10))
        };
        let (ext_net, ext_sub) = (uuid(1, 900_000 + ext), uuid(2, 900_000 + ext));
        // Route 1: to the router four places on (same transit) via its transit port.
        let peer = (r + TRANSITS) % ROUTERS;
        let (peer_base, peer_bits) = tenant_base(2 * peer);
        let mut extra_routes = vec![json!({"destination": format!("{peer_base}/{peer_bits}"), "nexthop": transit_addr(peer).to_string()})]
            .into_iter()
            .filter(|_| peer_base.is_ipv4())
            .collect::<Vec<_>>();
        // Route 2: a range behind a VM appliance on the router's first subnet.
        let (own_base, _) = tenant_base(2 * r);
        let appliance = host(own_base, 10);
        let dest = if own_base.is_ipv4() {
            format!("192.168.{}.0/24", r % 256)
        } else {
            format!("2001:db8:ffff:{r:x}::/64")
        };
        if second_external_for != Some(r) {
            extra_routes.push(json!({"destination": dest, "nexthop": appliance.to_string()}));
        }
        routers.push(json!({"id": rid, "project_id": owner, "external_gateway_info": {"network_id": ext_net,
            "enable_snat": true, "external_fixed_ips": [{"subnet_id": ext_sub, "ip_address": gw_ip.to_string()}]},
            "routes": extra_routes}));
        ports.push(port(
            uuid(4, 3 * ROUTERS + r),
            &ext_net,
            "",
            mac(0xe0, r),
            "network:router_gateway",
            &rid,
            &ext_sub,
            gw_ip,
        ));
        for (n, k) in [2 * r, 2 * r + 1].into_iter().enumerate() {
            let (base, _) = tenant_base(k);
            ports.push(port(
                uuid(4, 3 * r + n),
                &uuid(1, k),
                &owner,
                mac(0xa0 + n as u8, r),
                "network:router_interface",
                &rid,
                &uuid(2, k),
                host(base, 1),
            ));
        }
        let t = r % TRANSITS;
        ports.push(port(
            uuid(4, 3 * r + 2),
            &uuid(1, 800_000 + t),
            &owner,
            mac(0xa2, r),
            "network:router_interface",
            &rid,
            &uuid(2, 800_000 + t),
            transit_addr(r),
        ));
    }
    for d in 0..ROUTERS {
        let k = d * 2;
        let (base, _) = tenant_base(k);
        ports.push(port(
            uuid(5, d),
            &uuid(1, k),
            &project(k),
            mac(0xd0, d),
            "network:dhcp",
            "dhcp-agent",
            &uuid(2, k),
            host(base, 2),
        ));
    }
    for i in 0..VMS {
        let k = i % TENANT_SUBNETS;
        let (base, _) = tenant_base(k);
        let pid = uuid(6, i);
        ports.push(port(
            pid.clone(),
            &uuid(1, k),
            &project(k),
            mac(0x10 + (i >> 16) as u8, i),
            "compute:nova",
            &uuid(7, i),
            &uuid(2, k),
            host(base, 10 + (i / TENANT_SUBNETS) as u32),
        ));
        if i % 5 == 0 {
            fips.push(
                json!({"id": uuid(8, i), "floating_network_id": uuid(1, 900_000), "port_id": pid,
                             "fixed_ip_address": null, "floating_ip_address": "203.0.113.5"}),
            );
        }
    }
    let projects: Vec<Value> = (0..PROJECTS)
        .map(|i| json!({"id": project(i), "name": format!("p{i}")}))
        .collect();
    assert_eq!(
        subnets.len(),
        SUBNETS + 1,
        "5 000 subnets plus the second external one"
    );
    assert_eq!(ports.len(), 20_000);
    ApiBodies {
        networks: json!({ "networks": networks }),
        subnets: json!({ "subnets": subnets }),
        ports: json!({ "ports": ports }),
        routers: json!({ "routers": routers }),
        floatingips: json!({ "floatingips": fips }),
        projects: json!({ "projects": projects }),
        servers: OptionalBody::NotDeployed,
        loadbalancers: OptionalBody::NotDeployed,
        amphorae: OptionalBody::NotDeployed,
    }
}

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
    // Seconds and nanoseconds of a thread's CPU time fit f64 exactly.
    #[allow(clippy::cast_precision_loss)]
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
    let bodies = cloud(None);
    let changed = cloud(Some(7));

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
        "delta (router 7 re-gatewayed, one route dropped): {} trie upserts, {} trie deletes, {} bindings changed, {} router MACs changed",
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
