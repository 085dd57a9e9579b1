use lachesis_planner::Resource;
use serde_json::{json, Value};

use super::*;
use crate::record::{lean, Key};

/// A port as Neutron's `port.create.end` carries it (the keys of
/// `shapes.rs`'s required list, plus some DESIGN §5 does not read).
fn port(rev: Option<u64>) -> Value {
    json!({"id": "p1", "network_id": "n1", "project_id": "t1", "tenant_id": "t1",
        "mac_address": "fa:16:3e:a1:00:88", "device_id": "vm1", "device_owner": "compute:nova",
        "fixed_ips": [{"subnet_id": "s1", "ip_address": "10.1.0.88"}], "allowed_address_pairs": [],
        "revision_number": rev, "updated_at": "2026-01-01T00:00:00Z", "name": "lt-shape",
        "status": "DOWN", "binding:vif_type": "unbound"})
}

fn keys(list: &[(Resource, &str)]) -> Action {
    Action::Fetch(list.iter().map(|(k, i)| Key::new(*k, *i)).collect())
}

#[test]
#[expect(clippy::too_many_lines, reason = "one table of events")]
fn each_event_becomes_its_action() {
    let cases: Vec<(&str, Value, Action)> = vec![
        (
            "port.create.end",
            json!({"port": port(Some(1))}),
            Action::Publish(Entry::live(Resource::Ports, "p1", 1, &port(Some(1)))),
        ),
        (
            "port.update.end",
            json!({"port": port(Some(2))}),
            Action::Publish(Entry::live(Resource::Ports, "p1", 2, &port(Some(2)))),
        ),
        (
            "port.update.end",
            json!({"port": port(None)}),
            keys(&[(Resource::Ports, "p1")]),
        ),
        (
            "network.create.end",
            json!({"network": {"id": "n1", "name": "x", "shared": false, "revision_number": 1}}),
            Action::Publish(Entry::live(
                Resource::Networks,
                "n1",
                1,
                &json!({"id": "n1", "name": "x", "shared": false, "revision_number": 1}),
            )),
        ),
        (
            "floatingip.update.end",
            json!({"floatingip": {"id": "f1", "port_id": null, "revision_number": 4}}),
            Action::Publish(Entry::live(
                Resource::FloatingIps,
                "f1",
                4,
                &json!({"id": "f1", "port_id": null, "revision_number": 4}),
            )),
        ),
        (
            "port.delete.end",
            json!({"port_id": "p1", "port": port(Some(3))}),
            Action::Delete {
                kind: Resource::Ports,
                id: "p1".into(),
                rev: Some(3),
            },
        ),
        (
            "subnet.delete.end",
            json!({"subnet_id": "s1"}),
            Action::Delete {
                kind: Resource::Subnets,
                id: "s1".into(),
                rev: None,
            },
        ),
        (
            "router.delete.end",
            json!({"router": {"id": "r1", "revision_number": 9}}),
            Action::Delete {
                kind: Resource::Routers,
                id: "r1".into(),
                rev: Some(9),
            },
        ),
        (
            "router.interface.create",
            json!({"router_interface": {"id": "r1", "tenant_id": "t1", "port_id": "p9",
                "network_id": "n1", "subnet_id": "s1", "subnet_ids": ["s1"]}}),
            keys(&[(Resource::Routers, "r1"), (Resource::Ports, "p9")]),
        ),
        (
            "router.interface.delete",
            json!({"router_interface": {"id": "r1", "port_id": "p9"}}),
            keys(&[(Resource::Routers, "r1"), (Resource::Ports, "p9")]),
        ),
        (
            "rbac_policy.create.end",
            json!({"rbac_policy": {"id": "rb1", "object_type": "network", "object_id": "n1",
                "action": "access_as_shared", "target_tenant": "*"}}),
            keys(&[(Resource::Networks, "n1")]),
        ),
        (
            "rbac_policy.delete.end",
            json!({"rbac_policy_id": "rb1", "rbac_policy": {"object_type": "network", "object_id": "n1"}}),
            keys(&[(Resource::Networks, "n1")]),
        ),
        (
            "rbac_policy.create.end",
            json!({"rbac_policy": {"object_type": "qos_policy", "object_id": "q1"}}),
            Action::Ignore(Ignored::Unrelated),
        ),
        (
            "identity.project.created",
            json!({"target": {"id": "t9", "typeURI": "data/security/project"}, "resource_info": "t9"}),
            keys(&[(Resource::Projects, "t9")]),
        ),
        (
            "identity.project.deleted",
            json!({"resource_info": "t9"}),
            keys(&[(Resource::Projects, "t9")]),
        ),
        (
            "compute.instance.delete.end",
            json!({"instance_id": "vm1", "tenant_id": "t1", "state": "deleted"}),
            keys(&[(Resource::Servers, "vm1")]),
        ),
        (
            "compute.instance.update",
            json!({"instance_id": "vm1"}),
            keys(&[(Resource::Servers, "vm1")]),
        ),
        (
            "instance.delete.end",
            json!({"nova_object.name": "InstanceActionPayload", "nova_object.data": {"uuid": "vm1"}}),
            keys(&[(Resource::Servers, "vm1")]),
        ),
        (
            "octavia.loadbalancer.create.end",
            json!({"loadbalancer_id": "lb1", "project_id": "t1"}),
            keys(&[(Resource::LoadBalancers, "lb1")]),
        ),
        (
            "octavia.loadbalancer.delete.end",
            json!({"id": "lb1", "project_id": "t1", "provider": "amphora"}),
            keys(&[(Resource::LoadBalancers, "lb1")]),
        ),
        (
            "port.create.start",
            json!({"port": port(Some(1))}),
            Action::Ignore(Ignored::Start),
        ),
        (
            "compute.instance.exists",
            json!({"instance_id": "vm1"}),
            Action::Ignore(Ignored::Unrelated),
        ),
        (
            "volume.create.end",
            json!({"volume_id": "v1"}),
            Action::Ignore(Ignored::Unrelated),
        ),
        (
            "port.bind.end",
            json!({"port": port(Some(1))}),
            Action::Ignore(Ignored::Unrelated),
        ),
        (
            "security_group.create.end",
            json!({}),
            Action::Ignore(Ignored::Unrelated),
        ),
        (
            "port.create.end",
            json!({"port": {"revision_number": 1}}),
            Action::Ignore(Ignored::NoId),
        ),
        ("port.delete.end", json!({}), Action::Ignore(Ignored::NoId)),
        (
            "router.interface.create",
            json!({}),
            Action::Ignore(Ignored::NoId),
        ),
        (
            "identity.project.deleted",
            json!({"target": {}}),
            Action::Ignore(Ignored::NoId),
        ),
        (
            "octavia.loadbalancer.update.end",
            json!([1]),
            Action::Ignore(Ignored::NoId),
        ),
        (
            "port.update.end",
            Value::Null,
            Action::Ignore(Ignored::NoId),
        ),
    ];
    for (event, payload, want) in cases {
        assert_eq!(follow(event, &payload), want, "{event} {payload}");
    }
}

#[test]
fn a_published_record_holds_the_lean_resource() {
    let Action::Publish(entry) = follow("port.create.end", &json!({"port": port(Some(5))})) else {
        panic!("not a publish");
    };
    assert_eq!(entry.body, Some(lean(Resource::Ports, &port(Some(5)))));
    assert!(entry.body.unwrap().get("status").is_none());
}
