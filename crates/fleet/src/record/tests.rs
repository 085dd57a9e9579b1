use lachesis_planner::Resource;
use serde_json::{json, Value};

use super::*;

fn port() -> Value {
    json!({"id": "p1", "network_id": "n1", "project_id": "t1", "mac_address": "fa:16:3e:00:00:01",
        "device_id": "vm1", "device_owner": "compute:nova", "fixed_ips": [{"ip_address": "10.0.0.5"}],
        "allowed_address_pairs": [], "revision_number": 7,
        "name": "dropped", "status": "ACTIVE", "binding:host_id": "cn1"})
}

fn heartbeat() -> Heartbeat {
    Heartbeat {
        relay: "r1".into(),
        at_ms: 1_700_000_010_000,
        checked_ms: 1_700_000_000_000,
        digest: "cbf29ce484222325".into(),
        records: 3,
        snapshot: None,
    }
}

#[test]
fn lean_keeps_the_lists_fields_or_everything() {
    let lean_port = lean(Resource::Ports, &port());
    let keys: Vec<&str> = lean_port
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert!(!keys.contains(&"name") && !keys.contains(&"status"));
    assert!(keys.contains(&"revision_number") && keys.contains(&"fixed_ips"));
    // Every list is cut to what its parser reads, whole objects of the
    // lists a sync takes whole included.
    for kind in Resource::ALL {
        let cut = lean(kind, &port());
        let whole = port();
        for (k, v) in whole.as_object().unwrap() {
            let kept = kind.kept_fields().contains(&k.as_str());
            assert_eq!(cut.get(k), kept.then_some(v), "{kind} {k}");
        }
    }
    let server = json!({"id": "s1", "name": "vm", "tenant_id": "t1", "addresses": {"n": []},
        "flavor": {"id": "f"}, "links": [], "metadata": {"k": "v"}});
    assert_eq!(
        lean(Resource::Servers, &server),
        json!({"id": "s1", "name": "vm", "tenant_id": "t1"})
    );
    assert_eq!(lean(Resource::Ports, &json!("x")), json!("x"));
}

#[test]
fn revisions_come_from_neutron_or_from_the_observation() {
    let at = 1_700_000_000_123;
    let cases: [(Resource, Value, Option<u64>); 7] = [
        (Resource::Ports, json!({"revision_number": 7}), Some(7)),
        (Resource::Networks, json!({"revision_number": 0}), Some(0)),
        (Resource::Routers, json!({}), None),
        (Resource::Subnets, json!({"revision_number": "7"}), None),
        (Resource::FloatingIps, json!({"revision_number": -1}), None),
        (Resource::Projects, json!({"revision_number": 7}), Some(at)),
        (Resource::Servers, json!({}), Some(at)),
    ];
    for (kind, body, want) in cases {
        assert_eq!(revision_of(kind, &body, at), want, "{kind} {body}");
    }
}

#[test]
fn every_record_encodes_to_its_key_and_decodes_back() {
    let live = Entry::live(Resource::Ports, "p1", 7, &port());
    let cases: Vec<(Record, &str, Value)> = vec![
        (
            Record::Entry(live.clone()),
            "ports/p1",
            json!({"v": 1, "kind": "ports", "id": "p1", "rev": 7,
                "resource": lean(Resource::Ports, &port())}),
        ),
        (
            Record::Entry(live.in_snapshot("s9")),
            "ports/p1",
            json!({"v": 1, "kind": "ports", "id": "p1", "rev": 7, "snapshot": "s9",
                "resource": lean(Resource::Ports, &port())}),
        ),
        (
            Record::Entry(Entry::tombstone(Resource::FloatingIps, "f1", 3)),
            "floatingips/f1",
            json!({"v": 1, "kind": "floatingips", "id": "f1", "rev": 3, "deleted": true}),
        ),
        (
            Record::Marker(Marker {
                relay: "r1".into(),
                snapshot: "s9".into(),
                phase: Phase::Start,
            }),
            "snapshot/r1",
            json!({"v": 1, "snapshot": "s9", "relay": "r1", "phase": "start"}),
        ),
        (
            Record::Marker(Marker {
                relay: "r1".into(),
                snapshot: "s9".into(),
                phase: Phase::End { records: 20_000 },
            }),
            "snapshot/r1",
            json!({"v": 1, "snapshot": "s9", "relay": "r1", "phase": "end", "records": 20_000}),
        ),
        (
            Record::Heartbeat(heartbeat()),
            "heartbeat/r1",
            json!({"v": 1, "heartbeat": {"relay": "r1", "at_ms": 1_700_000_010_000_u64,
                "checked_ms": 1_700_000_000_000_u64, "digest": "cbf29ce484222325", "records": 3}}),
        ),
        (
            Record::Heartbeat(Heartbeat {
                snapshot: Some(SnapshotRef {
                    id: "s9".into(),
                    at_ms: 1_700_000_005_000,
                }),
                ..heartbeat()
            }),
            "heartbeat/r1",
            json!({"v": 1, "heartbeat": {"relay": "r1", "at_ms": 1_700_000_010_000_u64,
                "checked_ms": 1_700_000_000_000_u64, "digest": "cbf29ce484222325", "records": 3,
                "snapshot": {"id": "s9", "at_ms": 1_700_000_005_000_u64}}}),
        ),
    ];
    for (record, want_key, want_body) in cases {
        let (key, bytes) = encode(&record);
        assert_eq!(key, want_key);
        let body: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(body, want_body, "{key}");
        assert_eq!(decode(&bytes).unwrap(), record, "{key}");
    }
}

/// What a decode error is, for the table.
fn class(e: &DecodeError) -> &'static str {
    match e {
        DecodeError::Json(_) => "json",
        DecodeError::Version(_) => "version",
        DecodeError::Kind(_) => "kind",
        DecodeError::Shape(_) => "shape",
    }
}

/// Text that is JSON, and which error (if any) it decodes to.
#[rustfmt::skip]
const TEXT: &[(&str, &str, Option<&str>)] = &[
    ("array", "[1,2]", Some("shape")),
    ("double-encoded", r#""{\"v\":1}""#, Some("shape")),
    ("no v", r#"{"kind":"ports","id":"p","rev":1,"deleted":true}"#, Some("shape")),
    ("v 2", r#"{"v":2,"kind":"ports","id":"p","rev":1,"deleted":true}"#, Some("version")),
    ("v 2, another shape", r#"{"v":2,"whatever":[]}"#, Some("version")),
    ("v as a string", r#"{"v":"1","kind":"ports"}"#, Some("version")),
    ("v 1.5", r#"{"v":1.5,"kind":"ports"}"#, Some("version")),
    ("a key twice, the last wins", r#"{"v":1,"v":2,"kind":"ports"}"#, Some("version")),
    ("unknown kind", r#"{"v":1,"kind":"trunks","id":"t","rev":1,"deleted":true}"#, Some("kind")),
    ("kind singular", r#"{"v":1,"kind":"port","id":"p","rev":1,"deleted":true}"#, Some("kind")),
    ("kind not a string", r#"{"v":1,"kind":3,"id":"p","rev":1,"deleted":true}"#, Some("shape")),
    ("no id", r#"{"v":1,"kind":"ports","rev":1,"deleted":true}"#, Some("shape")),
    ("empty id", r#"{"v":1,"kind":"ports","id":"","rev":1,"deleted":true}"#, Some("shape")),
    ("negative rev", r#"{"v":1,"kind":"ports","id":"p","rev":-1,"deleted":true}"#, Some("shape")),
    ("rev past u64", r#"{"v":1,"kind":"ports","id":"p","rev":18446744073709551616,"deleted":true}"#, Some("shape")),
    ("neither body nor deleted", r#"{"v":1,"kind":"ports","id":"p","rev":1}"#, Some("shape")),
    ("both", r#"{"v":1,"kind":"ports","id":"p","rev":1,"deleted":true,"resource":{"id":"p"}}"#, Some("shape")),
    ("deleted false", r#"{"v":1,"kind":"ports","id":"p","rev":1,"deleted":false}"#, Some("shape")),
    ("body of another id", r#"{"v":1,"kind":"ports","id":"p","rev":1,"resource":{"id":"q"}}"#, Some("shape")),
    ("body not an object", r#"{"v":1,"kind":"ports","id":"p","rev":1,"resource":[]}"#, Some("shape")),
    ("snapshot not a string", r#"{"v":1,"kind":"ports","id":"p","rev":1,"deleted":true,"snapshot":1}"#, Some("shape")),
    ("phase unknown", r#"{"v":1,"snapshot":"s","relay":"r","phase":"middle"}"#, Some("shape")),
    ("end without records", r#"{"v":1,"snapshot":"s","relay":"r","phase":"end"}"#, Some("shape")),
    ("marker without relay", r#"{"v":1,"snapshot":"s","phase":"start"}"#, Some("shape")),
    ("heartbeat not an object", r#"{"v":1,"heartbeat":"now"}"#, Some("shape")),
    ("heartbeat without digest", r#"{"v":1,"heartbeat":{"relay":"r","at_ms":1,"checked_ms":1,"records":0}}"#, Some("shape")),
    ("heartbeat's snapshot not an object", r#"{"v":1,"heartbeat":{"relay":"r","at_ms":1,"checked_ms":1,"digest":"0","records":0,"snapshot":"s"}}"#, Some("shape")),
    ("heartbeat's snapshot without at_ms", r#"{"v":1,"heartbeat":{"relay":"r","at_ms":1,"checked_ms":1,"digest":"0","records":0,"snapshot":{"id":"s"}}}"#, Some("shape")),
    ("heartbeat's snapshot with an empty id", r#"{"v":1,"heartbeat":{"relay":"r","at_ms":1,"checked_ms":1,"digest":"0","records":0,"snapshot":{"id":"","at_ms":1}}}"#, Some("shape")),
    ("nothing we know", r#"{"v":1}"#, Some("shape")),
    ("a tombstone", r#"{"v":1,"kind":"ports","id":"p","rev":1,"deleted":true}"#, None),
    ("unknown fields are skipped", r#"{"v":1,"kind":"ports","id":"p","rev":1,"deleted":true,"x":[]}"#, None),
];

#[test]
fn bad_bytes_are_errors_of_their_own_kind_never_panics() {
    let (_, good) = encode(&Record::Entry(Entry::live(
        Resource::Ports,
        "p1",
        7,
        &port(),
    )));
    let nest = |depth: usize, inner: &str| {
        format!(
            r#"{{"v":1,"kind":"ports","id":"p1","rev":1,"resource":{}{inner}{}}}"#,
            "[".repeat(depth),
            "]".repeat(depth)
        )
    };
    let huge_id = format!(
        r#"{{"v":1,"kind":"ports","id":"{}","rev":1,"deleted":true}}"#,
        "x".repeat(1 << 20)
    );
    let mut cases: Vec<(&str, Vec<u8>, Option<&str>)> = vec![
        ("empty", vec![], Some("json")),
        ("truncated", good[..good.len() / 2].to_vec(), Some("json")),
        ("garbage", vec![0xff, 0xfe, 0x00, 0x13], Some("json")),
        (
            "not UTF-8",
            b"{\"v\":1,\"kind\":\"\xff\"}".to_vec(),
            Some("json"),
        ),
        (
            "nested past the limit",
            nest(100_000, "1").into_bytes(),
            Some("json"),
        ),
        (
            "nested, within the limit",
            nest(100, "1").into_bytes(),
            Some("shape"),
        ),
        ("huge but sound", huge_id.into_bytes(), None),
    ];
    cases.extend(TEXT.iter().map(|(w, t, c)| (*w, t.as_bytes().to_vec(), *c)));
    for (what, bytes, want) in cases {
        let got = decode(&bytes);
        assert_eq!(got.as_ref().err().map(class), want, "{what}: {got:?}");
    }
    // Every strict prefix of a good record is an error, never a panic.
    for n in 0..good.len() {
        assert!(decode(&good[..n]).is_err(), "prefix {n}");
    }
}
