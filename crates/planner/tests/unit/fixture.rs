//! The `two-tenants` fixture (real API body shapes) states, in plain
//! assertions, what its reviewed expected plan must say.

use crate::common;

use std::path::PathBuf;

use common::lpm;
use lachesis_planner::{parse_snapshot, plan, ApiBodies, OptionalBody, PlanOptions};
use serde_json::Value;

const A: &str = "3f2a9c1e5b7d4e08a1c6f0b2d4e6a8c0";
const B: &str = "7c41e2d09a3b4f56b8e1c2d3a4f5e6b7";
const SVC: &str = "5a6b7c8d9e0f41a2b3c4d5e6f7a8b9c0";

fn body(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/two-tenants")
        .join(format!("{name}.json"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn fixture_plan_says_what_the_topology_means() {
    let bodies = ApiBodies {
        networks: body("networks"),
        subnets: body("subnets"),
        ports: body("ports"),
        routers: body("routers"),
        floatingips: body("floatingips"),
        projects: body("projects"),
        servers: OptionalBody::Fetched(body("servers")),
        loadbalancers: OptionalBody::Fetched(body("loadbalancers")),
        amphorae: OptionalBody::Fetched(body("amphorae")),
    };
    let (snap, report) = parse_snapshot(&bodies).unwrap();
    assert_eq!(
        report.skipped.len(),
        1,
        "only the deliberately broken MAC: {:?}",
        report.skipped
    );
    assert_eq!(snap.servers.as_ref().map(Vec::len), Some(4));
    let p = plan(&snap, &PlanOptions::default());

    // tenant-a: its extraroute through router-b's transit port reaches
    // tenant-b; the NAT box's range is its own; the internet is external.
    assert_eq!(lpm(&p, A, "10.2.0.10").as_deref(), Some("other_tenant"));
    // ... but router-b's port and tenant-b's DHCP server under that route
    // are platform addresses.
    assert_eq!(lpm(&p, A, "10.2.0.1").as_deref(), Some("infra"));
    assert_eq!(lpm(&p, A, "10.2.0.2").as_deref(), Some("infra"));
    assert_eq!(lpm(&p, A, "192.168.50.7").as_deref(), Some("same_tenant"));
    assert_eq!(lpm(&p, A, "8.8.8.8").as_deref(), Some("external"));
    assert_eq!(lpm(&p, A, "2001:db8:a::1").as_deref(), Some("infra"));
    assert_eq!(lpm(&p, A, "2001:db8:a::99").as_deref(), Some("same_tenant"));
    assert_eq!(lpm(&p, A, "100.64.0.9").as_deref(), Some("shared"));
    // tenant-b has no route to tenant-a.
    assert_eq!(lpm(&p, B, "10.1.0.10").as_deref(), Some("external"));
    // The amphora's VIP-network port bills to tenant-b and its address is infra there.
    assert_eq!(lpm(&p, B, "10.2.0.21").as_deref(), Some("infra"));
    let vrrp = p
        .bindings
        .iter()
        .find(|b| b.mac.to_string() == "fa:16:3e:0c:00:02")
        .unwrap();
    assert_eq!((vrrp.tenant.as_str(), vrrp.amphora), (B, true));
    let mgmt = p
        .bindings
        .iter()
        .find(|b| b.mac.to_string() == "fa:16:3e:0c:00:01")
        .unwrap();
    assert_eq!((mgmt.tenant.as_str(), mgmt.amphora), (SVC, false));
    // Every VM behind a gatewayed router, or with a floating IP, is on "public".
    for b in p.bindings.iter().filter(|b| b.tenant != SVC) {
        assert_eq!(b.external_network.as_deref(), Some("public"), "{b:?}");
    }
    assert!(p.anomalies.is_empty(), "{:?}", p.anomalies);
}
