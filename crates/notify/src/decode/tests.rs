//! The §8 rules, one table row each, on messages in the shapes the
//! services really send; and garbage, which must be an error, never a panic.

use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;

/// A notification as oslo.messaging builds it for the AMQP drivers (the
/// `_context_…` keys flattened, `_unique_id` added).
fn amqp_inner(event_type: &str, publisher: Option<&str>, payload: &Value) -> Value {
    json!({
        "message_id": "1c6a2b8e-4a3f-4a53-9d1f-2b5b36c5e0aa",
        "publisher_id": publisher,
        "event_type": event_type,
        "priority": "INFO",
        "payload": payload,
        "timestamp": "2026-11-30 20:58:41.120376",
        "_unique_id": "5a0f8e3c12f54f0e8b8a0a51b1c0e7d2",
        "_context_request_id": "req-3e1c9a0e-6f1b-4b6e-9a7c-0d3f1c2b4a5e",
        "_context_user_id": "8a1b0e2f4c6d4e1f9a3b5c7d9e0f1a2b",
        "_context_project_id": "0b0000000000000000000000000000aa",
        "_context_tenant_id": "0b0000000000000000000000000000aa",
        "_context_is_admin": true,
        "_context_roles": ["admin", "member", "reader"],
        "_context_timestamp": "2026-11-30 20:58:40.984123",
        "_context_auth_token": null,
    })
}

/// The `oslo.version` 2.0 envelope around `inner`.
fn envelope(inner: &Value) -> Vec<u8> {
    json!({"oslo.version": "2.0", "oslo.message": inner.to_string()})
        .to_string()
        .into_bytes()
}

/// The Kafka driver's shape: the bare notification with one nested
/// `_context` object and no `_unique_id`.
fn kafka(event_type: &str, publisher: Option<&str>, payload: &Value) -> Vec<u8> {
    json!({
        "message_id": "8f0e4b0a-1d9c-4f7b-a3a1-9b6c2d1e0f55",
        "publisher_id": publisher,
        "event_type": event_type,
        "priority": "INFO",
        "payload": payload,
        "timestamp": "2026-11-30 20:58:41.120376",
        "_context": {
            "request_id": "req-0d9e2c7a-9b1f-4e2a-8c3d-5f6a7b8c9d0e",
            "project_id": "0b0000000000000000000000000000bb",
            "user_id": "8a1b0e2f4c6d4e1f9a3b5c7d9e0f1a2b",
            "is_admin": false,
            "roles": ["member"],
            "read_only": false,
        },
    })
    .to_string()
    .into_bytes()
}

fn port_payload() -> Value {
    json!({"port": {"id": "p1", "network_id": "n1", "mac_address": "fa:16:3e:00:00:01",
        "device_owner": "compute:nova", "fixed_ips": [{"subnet_id": "s1", "ip_address": "10.0.0.5"}]}})
}

/// Every shape a sender may use, for one notification.
fn shapes(event_type: &str, publisher: Option<&str>) -> [(&'static str, Vec<u8>); 3] {
    let payload = port_payload();
    let inner = amqp_inner(event_type, publisher, &payload);
    [
        ("envelope", envelope(&inner)),
        ("legacy", inner.to_string().into_bytes()),
        ("kafka", kafka(event_type, publisher, &payload)),
    ]
}

fn kick(event_type: &str, publisher: Option<&str>, rule: Rule) {
    for (shape, bytes) in shapes(event_type, publisher) {
        assert_eq!(
            decide(&bytes).unwrap(),
            Decision::Kick {
                event_type: event_type.into(),
                rule
            },
            "{event_type} from {publisher:?} ({shape})"
        );
    }
}

fn ignore(event_type: &str, publisher: Option<&str>, why: Ignored) {
    for (shape, bytes) in shapes(event_type, publisher) {
        assert_eq!(
            decide(&bytes).unwrap(),
            Decision::Ignore {
                event_type: event_type.into(),
                why
            },
            "{event_type} from {publisher:?} ({shape})"
        );
    }
}

const NEUTRON: Option<&str> = Some("network.controller-1");

#[test]
fn committed_neutron_changes_kick() {
    for resource in ["network", "subnet", "port", "router", "floatingip"] {
        for action in ["create", "update", "delete"] {
            kick(
                &format!("{resource}.{action}.end"),
                NEUTRON,
                Rule::NeutronCommitted,
            );
        }
    }
}

#[test]
fn router_interfaces_kick_with_no_end_suffix() {
    for et in ["router.interface.create", "router.interface.delete"] {
        kick(et, NEUTRON, Rule::NeutronRouterInterface);
        ignore(et, Some("compute.node-1"), Ignored::Publisher);
        ignore(et, None, Ignored::Publisher);
    }
    ignore("router.interface.update", NEUTRON, Ignored::Unrelated);
}

#[test]
fn start_events_never_kick() {
    for et in [
        "port.create.start",
        "router.update.start",
        "floatingip.update.start",
        "network.delete.start",
        "compute.instance.delete.start",
        "instance.delete.start",
        "octavia.loadbalancer.create.start",
    ] {
        ignore(et, NEUTRON, Ignored::Start);
    }
}

#[test]
fn other_services_rules() {
    kick(
        "identity.project.deleted",
        Some("identity.keystone-1"),
        Rule::KeystoneProjectDeleted,
    );
    kick(
        "compute.instance.delete.end",
        Some("compute.hv-07"),
        Rule::NovaInstanceDeletedLegacy,
    );
    kick(
        "instance.delete.end",
        Some("nova-compute:hv-07"),
        Rule::NovaInstanceDeleted,
    );
    for action in ["create", "update", "delete", "failover"] {
        let et = format!("octavia.loadbalancer.{action}.end");
        kick(&et, None, Rule::OctaviaLoadBalancer);
        kick(&et, Some("octavia.worker-1"), Rule::OctaviaLoadBalancer);
    }
}

#[test]
fn a_rule_s_event_from_another_publisher_is_ignored() {
    ignore("port.create.end", Some("compute.hv-07"), Ignored::Publisher);
    ignore("port.create.end", None, Ignored::Publisher);
    ignore("port.create.end", Some("network."), Ignored::Publisher);
    ignore(
        "identity.project.deleted",
        Some("network.x"),
        Ignored::Publisher,
    );
    ignore(
        "compute.instance.delete.end",
        Some("nova-compute:hv"),
        Ignored::Publisher,
    );
    ignore(
        "instance.delete.end",
        Some("compute.hv-07"),
        Ignored::Publisher,
    );
}

#[test]
fn everything_else_is_ignored() {
    for (et, publisher) in [
        ("identity.project.created", Some("identity.k")),
        ("identity.project.updated", Some("identity.k")),
        ("identity.authenticate", Some("identity.k")),
        ("compute.instance.create.end", Some("compute.hv")),
        ("compute.instance.update", Some("compute.hv")),
        ("instance.update", Some("nova-compute:hv")),
        ("security_group.create.end", NEUTRON),
        ("security_group_rule.create.end", NEUTRON),
        ("subnetpool.create.end", NEUTRON),
        ("network_segment_range.create.end", NEUTRON),
        ("port.create.error", NEUTRON),
        ("octavia.amphora.create.end", None),
        ("octavia.loadbalancer.create", None),
        ("image.upload", Some("image.glance")),
        ("", NEUTRON),
    ] {
        ignore(et, publisher, Ignored::Unrelated);
    }
}

#[test]
fn real_neutron_envelope_as_read_off_the_broker() {
    // Captured shape of Neutron 21 (messagingv2) for a router interface.
    let inner = r#"{"message_id": "b0d1f5f8-5a2b-4bd4-a0a9-38bc9d6a1e61", "publisher_id": "network.controller", "event_type": "router.interface.create", "priority": "INFO", "payload": {"router_interface": {"id": "8c1e", "tenant_id": "aa", "port_id": "p", "network_id": "n", "subnet_id": "s", "subnet_ids": ["s"]}}, "timestamp": "2026-11-30 20:58:41.120376", "_unique_id": "f6b2", "_context_domain": null, "_context_request_id": "req-1", "_context_global_request_id": null, "_context_show_deletion": false, "_context_read_only": false, "_context_user_identity": "u p - - -", "_context_tenant_name": "admin", "_context_project_name": "admin", "_context_user_name": "admin"}"#;
    let bytes = serde_json::to_vec(&json!({"oslo.version": "2.0", "oslo.message": inner})).unwrap();
    assert_eq!(
        decode(&bytes).unwrap(),
        Notification {
            event_type: "router.interface.create".into(),
            publisher_id: Some("network.controller".into())
        }
    );
}

/// `Err` of the given kind, never a panic.
fn err(bytes: &[u8]) -> DecodeError {
    decode(bytes).expect_err("garbage must not decode")
}

#[test]
fn garbage_is_an_error() {
    let good = envelope(&amqp_inner("port.create.end", NEUTRON, &port_payload()));
    // Every strict prefix of a good message: truncated, never decoded.
    for n in 0..good.len() {
        let _ = err(&good[..n]);
    }
    assert!(matches!(err(b""), DecodeError::Json(_)));
    assert!(matches!(err(b"\xff\xfe{}"), DecodeError::Json(_)));
    assert!(matches!(
        err(b"{\"event_type\": \"port.create.end\xff\"}"),
        DecodeError::Json(_)
    ));
    assert!(matches!(err(b"[1, 2]"), DecodeError::Shape(_)));
    assert!(matches!(err(b"42"), DecodeError::Shape(_)));
    assert!(matches!(err(b"null"), DecodeError::Shape(_)));
    assert!(matches!(
        err(br#"{"event_type": "a", "event_type": "b"}"#),
        DecodeError::Shape(_)
    ));
    assert!(matches!(err(b"{}"), DecodeError::MissingEventType));
    assert!(matches!(
        err(br#"{"event_type": null}"#),
        DecodeError::MissingEventType
    ));
    assert!(matches!(
        err(br#"{"event_type": 7}"#),
        DecodeError::NotAString {
            field: "event_type"
        }
    ));
    assert!(matches!(
        err(br#"{"event_type": "port.create.end", "publisher_id": ["network.x"]}"#),
        DecodeError::NotAString {
            field: "publisher_id"
        }
    ));
}

#[test]
fn malformed_envelopes_are_errors() {
    let inner = amqp_inner("port.create.end", NEUTRON, &port_payload()).to_string();
    let cases = [
        json!({"oslo.version": "2.0", "oslo.message": {"event_type": "port.create.end"}}),
        json!({"oslo.version": "2.0", "oslo.message": null}),
        json!({"oslo.version": "2.0"}),
        json!({"oslo.message": inner}),
        json!({"oslo.version": 2.0, "oslo.message": inner}),
        json!({"oslo.version": "1.0", "oslo.message": inner}),
    ];
    for c in cases {
        assert!(
            matches!(err(c.to_string().as_bytes()), DecodeError::Envelope(_)),
            "{c}"
        );
    }
    let truncated = json!({"oslo.version": "2.0", "oslo.message": &inner[..inner.len() / 2]});
    assert!(matches!(
        err(truncated.to_string().as_bytes()),
        DecodeError::InnerJson(_)
    ));
    let nested = json!({"oslo.version": "2.0", "oslo.message":
        json!({"oslo.version": "2.0", "oslo.message": inner}).to_string()});
    assert!(matches!(
        err(nested.to_string().as_bytes()),
        DecodeError::Envelope(_)
    ));
    let minor = json!({"oslo.version": "2.1", "oslo.message": inner}).to_string();
    assert!(
        decode(minor.as_bytes()).is_ok(),
        "a 2.x minor version is read"
    );
}

#[test]
fn double_encoded_twice_is_an_error() {
    let good = String::from_utf8(envelope(&amqp_inner(
        "port.create.end",
        NEUTRON,
        &port_payload(),
    )))
    .unwrap();
    let once = Value::String(good).to_string();
    let twice = Value::String(once.clone()).to_string();
    assert!(matches!(err(once.as_bytes()), DecodeError::Shape(_)));
    assert!(matches!(err(twice.as_bytes()), DecodeError::Shape(_)));
    // The inner message encoded once more than oslo does.
    let inner = amqp_inner("port.create.end", NEUTRON, &port_payload()).to_string();
    let doubled = json!({"oslo.version": "2.0", "oslo.message": Value::String(inner).to_string()});
    assert!(matches!(
        err(doubled.to_string().as_bytes()),
        DecodeError::Shape(_)
    ));
}

#[test]
fn a_huge_payload_is_skipped_not_kept_and_still_decides() {
    // 32 MiB of payload: decoded (the decision needs only two fields).
    let big = "x".repeat(32 << 20);
    let payload = json!({"port": {"id": "p1", "description": big}});
    let bytes = envelope(&amqp_inner("port.update.end", NEUTRON, &payload));
    assert!(decide(&bytes).unwrap().is_kick());
    let bytes = kafka("port.update.end", NEUTRON, &payload);
    assert!(decide(&bytes).unwrap().is_kick());
}

#[test]
fn deep_nesting_never_overflows_the_stack() {
    let nested = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    for depth in [200usize, 100_000] {
        // In the payload: skipped without recursion, the message still decides.
        let text = format!(
            r#"{{"event_type": "port.create.end", "publisher_id": "network.h", "payload": {}}}"#,
            nested(depth)
        );
        assert!(decide(text.as_bytes()).unwrap().is_kick(), "{depth}");
        // Where a field is read: an error.
        let text = format!(r#"{{"event_type": {}}}"#, nested(depth));
        let _ = err(text.as_bytes());
    }
}

/// The relay's reading keeps the payload in every shape, and decides the
/// same as the agent's.
#[test]
fn the_payload_is_kept_in_every_shape_when_asked_for() {
    for (shape, bytes) in shapes("port.create.end", Some("network.ctl")) {
        let (n, payload) = decode_with_payload(&bytes).unwrap();
        assert_eq!(n, decode(&bytes).unwrap(), "{shape}");
        assert_eq!(payload, port_payload(), "{shape}");
    }
    let bare = json!({"event_type": "port.create.end"}).to_string();
    assert_eq!(decode_with_payload(bare.as_bytes()).unwrap().1, Value::Null);
    for bytes in [&b"{"[..], b"[]", b"{\"payload\": {}}"] {
        assert!(decode_with_payload(bytes).is_err());
    }
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = decide(&bytes);
        let _ = decode_with_payload(&bytes);
    }

    #[test]
    fn arbitrary_text_in_either_shape_never_panics(
        event_type in ".{0,40}",
        publisher in proptest::option::of(".{0,40}"),
        cut in 0usize..400,
    ) {
        let inner = amqp_inner(&event_type, publisher.as_deref(), &json!({}));
        let whole = envelope(&inner);
        // Whole: it decodes to exactly its event type.
        let d = decide(&whole).unwrap();
        prop_assert_eq!(d.event_type(), event_type.as_str());
        let _ = decide(&whole[..cut.min(whole.len())]);
    }
}
