//! The fetched bodies checked against what the harness built.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use super::harness::Built;

pub fn ids(body: &Value, coll: &str) -> BTreeSet<String> {
    body[coll]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["id"].as_str().unwrap().to_owned())
        .collect()
}

pub fn find<'a>(body: &'a Value, coll: &str, id: &str) -> &'a Value {
    body[coll]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["id"] == id)
        .unwrap_or_else(|| panic!("{coll} {id} missing"))
}

pub fn check(
    built: &Built,
    bodies: &lachesis_planner::ApiBodies,
    admin_projects: &BTreeSet<String>,
) {
    assert_eq!(ids(&bodies.networks, "networks"), built.networks);
    assert_eq!(ids(&bodies.subnets, "subnets"), built.subnets);
    assert_eq!(ids(&bodies.routers, "routers"), built.routers);
    assert_eq!(ids(&bodies.floatingips, "floatingips"), built.floatingips);
    let mut projects = built.projects.clone();
    projects.extend(admin_projects.iter().cloned());
    assert_eq!(ids(&bodies.projects, "projects"), projects);

    // Ports: the ones built, plus exactly the ones Neutron made itself —
    // one gateway port per router and one port per floating IP.
    let ports = bodies.ports["ports"].as_array().unwrap();
    let owned = |owner: &str| -> BTreeSet<String> {
        ports
            .iter()
            .filter(|p| p["device_owner"] == owner)
            .map(|p| p["device_id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(owned("network:router_gateway"), built.routers);
    assert_eq!(owned("network:floatingip"), built.floatingips);
    let implicit = ports
        .iter()
        .filter(|p| {
            p["device_owner"] == "network:router_gateway"
                || p["device_owner"] == "network:floatingip"
        })
        .count();
    assert_eq!(
        ports.len(),
        built.ports.len() + implicit,
        "no port missing, none extra"
    );
    assert!(built.ports.is_subset(&ids(&bodies.ports, "ports")));
    assert!(ports.len() >= 6, "several pages at page size 2");

    let public = find(&bodies.networks, "networks", &built.public);
    assert_eq!(public["router:external"], true);
    assert_eq!(
        find(&bodies.networks, "networks", &built.shared)["shared"],
        true
    );
    assert!(bodies.subnets["subnets"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["ip_version"] == 6));
    let ra = find(&bodies.routers, "routers", &built.router_a);
    assert_eq!(
        ra["external_gateway_info"]["network_id"],
        json!(built.public)
    );
    let mut routes: Vec<(String, String)> = ra["routes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["destination"].as_str().unwrap().into(),
                r["nexthop"].as_str().unwrap().into(),
            )
        })
        .collect();
    routes.sort();
    assert_eq!(
        routes,
        vec![
            ("10.2.0.0/24".into(), "10.50.0.20".into()),
            ("192.168.77.0/24".into(), "10.1.0.5".into())
        ]
    );
    let vm = find(&bodies.ports, "ports", &built.vm_a1);
    assert_eq!(vm["mac_address"], "fa:16:3e:a1:00:01");
    assert_eq!(vm["device_owner"], "compute:nova");
    assert_eq!(vm["project_id"], json!(built.project_a));
    assert_eq!(
        vm["allowed_address_pairs"],
        json!([{"ip_address": "10.1.0.100", "mac_address": "fa:16:3e:a1:0f:0f"}])
    );
    let fip = find(&bodies.floatingips, "floatingips", &built.fip_bound);
    assert_eq!(fip["port_id"], json!(built.vm_a1));
    assert_eq!(fip["fixed_ip_address"], "10.1.0.5");
    assert_eq!(fip["floating_network_id"], json!(built.public));
}
