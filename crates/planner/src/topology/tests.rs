use serde_json::json;

use super::*;
use crate::{parse_snapshot, ApiBodies, OptionalBody};

/// Two tenants, a router each on a shared network, an external network
/// with a bound and a free floating IP, the lists given out of order.
fn bodies() -> ApiBodies {
    ApiBodies {
        networks: json!({"networks": [
            {"id": "net-b", "name": "b-private", "project_id": "pb"},
            {"id": "net-a", "name": "a-private", "project_id": "pa"},
            {"id": "net-pub", "name": "public", "project_id": "admin", "router:external": true},
            {"id": "net-sh", "name": "", "project_id": "admin", "shared": true}
        ]}),
        subnets: json!({"subnets": [
            {"id": "s-a6", "network_id": "net-a", "cidr": "2001:db8:a::/64"},
            {"id": "s-a4", "network_id": "net-a", "cidr": "10.1.0.0/24"},
            {"id": "s-b", "network_id": "net-b", "cidr": "10.2.0.0/24"},
            {"id": "s-sh", "network_id": "net-sh", "cidr": "10.50.0.0/24"},
            {"id": "s-pub", "network_id": "net-pub", "cidr": "203.0.113.0/24"}
        ]}),
        ports: json!({"ports": [
            {"id": "ra-a4", "network_id": "net-a", "project_id": "pa", "device_id": "r-a",
             "device_owner": "network:router_interface", "mac_address": "fa:16:3e:00:0a:01",
             "fixed_ips": [{"subnet_id": "s-a4", "ip_address": "10.1.0.1"}]},
            {"id": "ra-a6", "network_id": "net-a", "project_id": "pa", "device_id": "r-a",
             "device_owner": "network:router_interface", "mac_address": "fa:16:3e:00:0a:02",
             "fixed_ips": [{"subnet_id": "s-a6", "ip_address": "2001:db8:a::1"}]},
            {"id": "ra-sh", "network_id": "net-sh", "project_id": "pa", "device_id": "r-a",
             "device_owner": "network:router_interface_distributed", "mac_address": "fa:16:3e:00:0a:03",
             "fixed_ips": [{"subnet_id": "s-sh", "ip_address": "10.50.0.10"}]},
            {"id": "rb-b", "network_id": "net-b", "project_id": "pb", "device_id": "r-b",
             "device_owner": "network:router_interface", "mac_address": "fa:16:3e:00:0b:01",
             "fixed_ips": [{"subnet_id": "s-b", "ip_address": "10.2.0.1"}]},
            {"id": "ra-gw", "network_id": "net-pub", "project_id": "", "device_id": "r-a",
             "device_owner": "network:router_gateway", "mac_address": "fa:16:3e:00:0a:09",
             "fixed_ips": [{"subnet_id": "s-pub", "ip_address": "203.0.113.10"}]},
            {"id": "vm-a1", "network_id": "net-a", "project_id": "pa", "device_id": "srv-a1",
             "device_owner": "compute:nova", "mac_address": "fa:16:3e:a1:00:01",
             "fixed_ips": [{"subnet_id": "s-a4", "ip_address": "10.1.0.5"},
                           {"subnet_id": "s-a6", "ip_address": "2001:db8:a::5"}]},
            {"id": "dhcp-a", "network_id": "net-a", "project_id": "pa", "device_id": "dhcp",
             "device_owner": "network:dhcp", "mac_address": "fa:16:3e:00:0d:01", "fixed_ips": []}
        ]}),
        routers: json!({"routers": [
            {"id": "r-b", "name": "b-router", "project_id": "pb"},
            {"id": "r-a", "name": "a-router", "project_id": "pa",
             "external_gateway_info": {"network_id": "net-pub"},
             "routes": [{"destination": "10.2.0.0/24", "nexthop": "10.50.0.20"}]}
        ]}),
        floatingips: json!({"floatingips": [
            {"id": "fip-2", "project_id": "pb", "floating_network_id": "net-pub",
             "floating_ip_address": "203.0.113.22"},
            {"id": "fip-1", "project_id": "pa", "floating_network_id": "net-pub",
             "floating_ip_address": "203.0.113.21", "port_id": "vm-a1", "fixed_ip_address": "10.1.0.5"}
        ]}),
        projects: json!({"projects": [
            {"id": "pb", "name": "tenant-b"}, {"id": "pa", "name": "tenant-a"}, {"id": "admin", "name": ""}
        ]}),
        servers: OptionalBody::Fetched(json!({"servers": [
            {"id": "srv-a1", "name": "a-web", "tenant_id": "pa"}
        ]})),
        loadbalancers: OptionalBody::NotDeployed,
        amphorae: OptionalBody::NotDeployed,
    }
}

fn topology() -> Topology {
    let (snapshot, report) = parse_snapshot(&bodies()).unwrap();
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    summarize(&snapshot)
}

fn prefixes(list: &[&str]) -> Vec<Prefix> {
    list.iter().map(|p| p.parse().unwrap()).collect()
}

#[test]
fn networks_carry_their_subnets_cidrs_and_flags() {
    let t = topology();
    let ids: Vec<&str> = t.networks.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(ids, ["net-a", "net-b", "net-pub", "net-sh"]);
    let a = t.network("net-a").unwrap();
    assert_eq!(a.cidrs, prefixes(&["10.1.0.0/24", "2001:db8:a::/64"]));
    assert_eq!(
        (a.project.as_str(), a.shared, a.external),
        ("pa", false, false)
    );
    let public = t.network("net-pub").unwrap();
    assert!(public.external && !public.shared);
    let shared = t.network("net-sh").unwrap();
    assert!(shared.shared && !shared.external);
    // Nameless: labelled by id, as the external_network label is.
    assert_eq!(shared.label(), "net-sh");
    assert_eq!(public.label(), "public");
    assert!(t.network("net-zz").is_none());
}

#[test]
fn routers_join_their_gateway_and_interface_networks() {
    let t = topology();
    let a = t.router("r-a").unwrap();
    assert_eq!(a.label(), "a-router");
    assert_eq!(a.gateways, ["net-pub"]);
    // Two interface ports on net-a count once; the gateway port is not an
    // interface; a distributed interface is.
    assert_eq!(a.interfaces, ["net-a", "net-sh"]);
    assert_eq!(a.routes.len(), 1);
    assert_eq!(a.routes[0].nexthop, "10.50.0.20".parse::<IpAddr>().unwrap());
    let b = t.router("r-b").unwrap();
    assert!(b.gateways.is_empty());
    assert_eq!(b.interfaces, ["net-b"]);
    assert_eq!(b.project, "pb");
}

#[test]
fn floating_ips_keep_address_network_project_and_binding() {
    let t = topology();
    let ids: Vec<&str> = t.floating_ips.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(ids, ["fip-1", "fip-2"]);
    let bound = &t.floating_ips[0];
    assert_eq!(bound.address, Some("203.0.113.21".parse().unwrap()));
    assert_eq!(
        (
            bound.network.as_str(),
            bound.project.as_str(),
            bound.port.as_deref()
        ),
        ("net-pub", "pa", Some("vm-a1"))
    );
    assert_eq!(bound.fixed_ip, Some("10.1.0.5".parse().unwrap()));
    let free = &t.floating_ips[1];
    assert_eq!((free.port.as_deref(), free.fixed_ip), (None, None));
}

#[test]
fn vm_ports_are_the_compute_ports_only() {
    let t = topology();
    assert_eq!(t.vm_ports.len(), 1, "{:?}", t.vm_ports);
    let vm = &t.vm_ports[0];
    assert_eq!(
        (
            vm.id.as_str(),
            vm.network.as_str(),
            vm.server.as_str(),
            vm.project.as_str()
        ),
        ("vm-a1", "net-a", "srv-a1", "pa")
    );
    assert_eq!(vm.mac, Some("fa:16:3e:a1:00:01".parse().unwrap()));
    assert_eq!(vm.addresses.len(), 2);
}

#[test]
fn names_fall_back_to_ids() {
    let t = topology();
    assert_eq!(t.project_label("pa"), "tenant-a");
    assert_eq!(t.project_label("admin"), "admin", "empty name");
    assert_eq!(t.project_label("gone"), "gone", "unknown project");
    assert_eq!(t.server_label("srv-a1"), "a-web");
    assert_eq!(t.server_label("srv-x"), "srv-x");
}

#[test]
fn a_malformed_floating_address_is_reported_and_read_as_absent() {
    let mut b = bodies();
    b.floatingips = json!({"floatingips": [
        {"id": "fip-9", "floating_network_id": "net-pub", "floating_ip_address": "203.0.113.x"}
    ]});
    let (snapshot, report) = parse_snapshot(&b).unwrap();
    assert_eq!(report.skipped.len(), 1, "{:?}", report.skipped);
    let t = summarize(&snapshot);
    assert_eq!(t.floating_ips[0].address, None);
    assert_eq!(t.floating_ips[0].project, "");
}

#[test]
fn an_empty_snapshot_is_an_empty_topology() {
    assert_eq!(summarize(&Snapshot::default()), Topology::default());
}
