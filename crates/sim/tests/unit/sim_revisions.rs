//! Every change raises `revision_number` and stamps `updated_at` with the
//! simulator's clock, on the resource and on those Neutron raises with it
//! (a subnet's network, a router on an interface change), as checked on
//! Neutron 21 (docs/openstack.md "Revisions and time").

use lachesis_planner::Resource;
use lachesis_sim::store::InterfaceRequest;
use lachesis_sim::topology::Route;
use lachesis_sim::{Clock, SettingsError, SettingsPatch, Stamp, Store, Topology};
use serde_json::json;

fn store() -> Store {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/topology.yaml");
    let t = Topology::from_yaml(&std::fs::read_to_string(path).unwrap()).unwrap();
    Store::from_topology(&t).unwrap()
}

fn step(s: &mut Store, secs: u64) -> Stamp {
    s.apply_settings(SettingsPatch {
        clock_step_secs: Some(secs),
        ..SettingsPatch::default()
    })
    .unwrap();
    s.now()
}

/// (`revision_number`, `updated_at`) of one resource.
fn rev(s: &Store, kind: Resource, id: &str) -> (u64, Stamp) {
    let m = s.meta(kind, id);
    (m.revision_number, m.updated_at)
}

const T0: Stamp = Stamp(1_767_225_600);

#[test]
fn loaded_resources_show_neutrons_creation_revisions_at_the_load_instant() {
    let s = store();
    assert_eq!(s.now(), T0, "the clock stands at 2026-01-01T00:00:00Z");
    for (kind, id, revision) in [
        (Resource::Networks, "net-a", 1),
        (Resource::Subnets, "sub-a4", 0),
        (Resource::Ports, "p-vm-a1", 1),
        (Resource::Routers, "router-a", 1),
        (Resource::FloatingIps, "fip-1", 0),
    ] {
        let m = s.meta(kind, id);
        assert_eq!(
            (m.revision_number, m.created_at, m.updated_at),
            (revision, T0, T0),
            "{id}"
        );
    }
}

#[test]
fn an_update_raises_the_revision_and_stamps_the_clocks_now() {
    let mut s = store();
    let t1 = step(&mut s, 5);
    s.update("ports", "p-vm-a2", json!({"name": "renamed"}))
        .unwrap();
    assert_eq!(rev(&s, Resource::Ports, "p-vm-a2"), (2, t1));
    assert_eq!(s.meta(Resource::Ports, "p-vm-a2").created_at, T0);
    let t2 = step(&mut s, 7);
    let mut whole = serde_json::to_value(&s.ports["p-vm-a2"]).unwrap();
    whole["name"] = json!("again");
    s.replace("ports", "p-vm-a2", whole).unwrap();
    assert_eq!(rev(&s, Resource::Ports, "p-vm-a2"), (3, t2));
    // A port change leaves its network alone (Neutron 21 does too).
    assert_eq!(rev(&s, Resource::Networks, "net-a"), (1, T0));

    // Every kind stamps: Nova's and Octavia's `updated` move too.
    s.update("servers", "vm-a1", json!({"name": "web-2"}))
        .unwrap();
    s.update("loadbalancers", "lb1", json!({"name": "lb-2"}))
        .unwrap();
    assert_eq!(s.meta(Resource::Servers, "vm-a1").updated_at, t2);
    assert_eq!(s.meta(Resource::LoadBalancers, "lb1").updated_at, t2);
    // A refused change changes nothing, revision included.
    assert!(s
        .update("ports", "p-vm-a2", json!({"network_id": "nope"}))
        .is_err());
    assert_eq!(rev(&s, Resource::Ports, "p-vm-a2"), (3, t2));
}

#[test]
fn a_subnet_change_raises_its_network_as_neutron_does() {
    let mut s = store();
    let t1 = step(&mut s, 1);
    s.create(
        "subnets",
        json!({"id": "sub-a9", "network_id": "net-a", "project_id": "0b0000000000000000000000000000aa",
            "cidr": "10.9.0.0/24"}),
    )
    .unwrap();
    assert_eq!(rev(&s, Resource::Subnets, "sub-a9"), (0, t1));
    assert_eq!(s.meta(Resource::Subnets, "sub-a9").created_at, t1);
    assert_eq!(rev(&s, Resource::Networks, "net-a"), (2, t1));
    let t2 = step(&mut s, 1);
    s.update("subnets", "sub-a9", json!({"name": "nine"}))
        .unwrap();
    assert_eq!(rev(&s, Resource::Subnets, "sub-a9"), (1, t2));
    assert_eq!(rev(&s, Resource::Networks, "net-a"), (3, t2));
    // Moved to another network: both networks change.
    s.update("subnets", "sub-a9", json!({"network_id": "net-b"}))
        .unwrap();
    assert_eq!(rev(&s, Resource::Networks, "net-a").0, 4);
    assert_eq!(rev(&s, Resource::Networks, "net-b").0, 2);
    let t3 = step(&mut s, 1);
    s.delete("subnets", "sub-a9").unwrap();
    assert_eq!(rev(&s, Resource::Networks, "net-b"), (3, t3));
}

#[test]
fn router_changes_raise_the_router_and_an_interface_port_shows_two() {
    let mut s = store();
    let t1 = step(&mut s, 3);
    s.add_interface(
        "router-admin",
        &InterfaceRequest {
            subnet_id: "sub-shared".into(),
            mac_address: "fa:16:3e:00:ad:01".into(),
            port_id: None,
            ip_address: Some("10.50.0.1".into()),
        },
    )
    .unwrap();
    assert_eq!(rev(&s, Resource::Routers, "router-admin"), (2, t1));
    // Created, then bound to the router: 2, as Neutron 21 shows it.
    assert_eq!(
        rev(&s, Resource::Ports, "rif-router-admin-sub-shared"),
        (2, t1)
    );
    let route = Route {
        destination: "10.9.0.0/16".into(),
        nexthop: "10.50.0.1".into(),
    };
    s.add_route("router-admin", route.clone()).unwrap();
    assert_eq!(rev(&s, Resource::Routers, "router-admin").0, 3);
    s.add_route("router-admin", route.clone()).unwrap();
    assert_eq!(
        rev(&s, Resource::Routers, "router-admin").0,
        3,
        "a route it already has changes nothing"
    );
    s.remove_route("router-admin", &route).unwrap();
    s.set_gateway(
        "router-admin",
        Some(serde_json::from_value(json!({"network_id": "net-public"})).unwrap()),
    )
    .unwrap();
    assert_eq!(rev(&s, Resource::Routers, "router-admin").0, 5);
    let t2 = step(&mut s, 3);
    s.remove_interface("router-admin", "sub-shared").unwrap();
    assert_eq!(rev(&s, Resource::Routers, "router-admin"), (6, t2));
}

#[test]
fn a_floating_ip_association_raises_only_the_floating_ip() {
    let mut s = store();
    s.update(
        "floatingips",
        "fip-3",
        json!({"port_id": "p-vm-b1", "fixed_ip_address": "10.2.0.5"}),
    )
    .unwrap();
    assert_eq!(rev(&s, Resource::FloatingIps, "fip-3").0, 1);
    assert_eq!(rev(&s, Resource::Ports, "p-vm-b1").0, 1);
}

#[test]
fn a_recreated_resource_starts_over_and_the_clock_can_be_set_but_a_wall_clock_not_stepped() {
    let mut s = store();
    s.update("ports", "p-vm-b1", json!({"name": "x"})).unwrap();
    let port = serde_json::to_value(&s.ports["p-vm-b1"]).unwrap();
    s.delete("ports", "p-vm-b1").unwrap();
    s.create("ports", port).unwrap();
    assert_eq!(rev(&s, Resource::Ports, "p-vm-b1").0, 1);

    s.apply_settings(SettingsPatch {
        clock: Some(Clock::Fixed(Stamp(T0.0 + 3600))),
        clock_step_secs: Some(60),
        ..SettingsPatch::default()
    })
    .unwrap();
    assert_eq!(s.now().rfc3339(), "2026-01-01T01:01:00Z");
    let err = s
        .apply_settings(SettingsPatch {
            clock: Some(Clock::Wall),
            clock_step_secs: Some(1),
            page_size: Some(7),
            ..SettingsPatch::default()
        })
        .unwrap_err();
    assert!(matches!(err, SettingsError::Clock(_)), "{err}");
    assert_eq!(
        (s.settings.clock, s.settings.page_size),
        (Clock::Fixed(Stamp(T0.0 + 3660)), Some(3)),
        "a refused change changes nothing"
    );
}
