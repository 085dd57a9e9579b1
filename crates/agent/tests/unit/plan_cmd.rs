//! `lachesis plan --from-dir` against the reviewed fixture, run through the
//! built binary.

use crate::common;

use common::{fixture_copy, fixtures, lachesis};

#[test]
fn plan_from_dir_matches_the_reviewed_json_byte_for_byte() {
    let dir = fixtures().join("two-tenants");
    let out = lachesis(&["plan", "--from-dir", dir.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want = std::fs::read(fixtures().join("two-tenants.expected.json")).unwrap();
    assert!(
        out.stdout == want,
        "plan output differs from two-tenants.expected.json:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // The fixture's one malformed port MAC is reported, not fatal.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("\"mac_address\" = \"not-a-mac\""),
        "{stderr}"
    );
}

#[test]
fn table_format_lists_every_section() {
    let dir = fixtures().join("two-tenants");
    let out = lachesis(&[
        "plan",
        "--from-dir",
        dir.to_str().unwrap(),
        "--format",
        "table",
    ]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for heading in [
        "trie rows (33)",
        "bindings (5)",
        "router MACs (5)",
        "amphora addresses (1)",
        "anomalies (0)",
        "route fallbacks (static routes that fell back to external: 0)",
        "best-effort sources (0 of 3 failed)",
        "skipped input (1)",
    ] {
        assert!(text.contains(heading), "missing {heading:?} in\n{text}");
    }
    assert!(text
        .lines()
        .any(|l| l.split_whitespace().eq(["*", "0.0.0.0/0", "external"])));
}

#[test]
fn missing_required_body_is_an_error_naming_the_file() {
    let dir = fixture_copy(|d| std::fs::remove_file(d.join("projects.json")).unwrap());
    let out = lachesis(&["plan", "--from-dir", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("projects.json is missing"), "{stderr}");
}

#[test]
fn a_source_is_required() {
    let out = lachesis(&["plan"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--from-dir"));
}

/// The fixture with tenant-b's subnet 10.2.0.0/24 moved behind a third
/// router (`router-c`, on the transit net at 100.64.0.3) that router-b
/// reaches by a static route: tenant-a's route to it now takes two hops
/// (router-b, then router-c).
fn two_hop_fixture() -> tempfile::TempDir {
    const ROUTER_C: &str = "00001017-0017-4017-8017-000000000017";
    let edit = |d: &std::path::Path, file: &str, f: &dyn Fn(&mut serde_json::Value)| {
        let path = d.join(file);
        let mut v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        f(&mut v);
        std::fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
    };
    fixture_copy(|d| {
        edit(d, "routers.json", &|v| {
            let routers = v["routers"].as_array_mut().unwrap();
            let b = &mut routers[1];
            assert_eq!(b["name"], "router-b");
            b["routes"] =
                serde_json::json!([{"destination": "10.2.0.0/24", "nexthop": "100.64.0.3"}]);
            let mut c = b.clone();
            c["id"] = ROUTER_C.into();
            c["name"] = "router-c".into();
            c["routes"] = serde_json::json!([]);
            c["external_gateway_info"] = serde_json::Value::Null;
            routers.push(c);
        });
        edit(d, "ports.json", &|v| {
            let ports = v["ports"].as_array_mut().unwrap();
            // router-b's interface on 10.2.0.0/24 becomes router-c's.
            let on_subnet = ports
                .iter_mut()
                .find(|p| p["fixed_ips"][0]["ip_address"] == "10.2.0.1")
                .unwrap();
            on_subnet["device_id"] = ROUTER_C.into();
            let mut transit = ports
                .iter()
                .find(|p| p["fixed_ips"][0]["ip_address"] == "100.64.0.2")
                .unwrap()
                .clone();
            transit["id"] = "00001075-0075-4075-8075-000000000075".into();
            transit["device_id"] = ROUTER_C.into();
            transit["mac_address"] = "fa:16:3e:c0:00:03".into();
            transit["fixed_ips"][0]["ip_address"] = "100.64.0.3".into();
            ports.push(transit);
        });
    })
}

/// tenant-a's row for tenant-b's subnet in the plan `args` print.
fn route_row_zone(args: &[&str]) -> (serde_json::Value, serde_json::Value) {
    let out = lachesis(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = plan["trie"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["tenant"] == "3f2a9c1e5b7d4e08a1c6f0b2d4e6a8c0" && r["prefix"] == "10.2.0.0/24")
        .expect("the route's row")
        .clone();
    (
        row["zone"].clone(),
        plan["route_fallbacks"]["max_hops"].clone(),
    )
}

#[test]
fn hop_limit_flag_reaches_the_resolver() {
    let dir = two_hop_fixture();
    let dir = dir.path().to_str().unwrap();
    // Two hops are within a limit of 2 (and the default, 16)...
    for limit in [&["--hop-limit", "2"][..], &[]] {
        let args = [&["plan", "--from-dir", dir][..], limit].concat();
        assert_eq!(
            route_row_zone(&args),
            ("other_tenant".into(), 0.into()),
            "{limit:?}"
        );
    }
    // ...and past a limit of 1: the route falls back to external.
    let args = ["plan", "--from-dir", dir, "--hop-limit", "1"];
    assert_eq!(route_row_zone(&args), ("external".into(), 1.into()));
}

#[test]
fn hop_limit_outside_the_configured_range_is_a_usage_error() {
    let dir = fixtures().join("two-tenants");
    for bad in ["0", "256", "-1", "many"] {
        let flag = format!("--hop-limit={bad}");
        let out = lachesis(&["plan", "--from-dir", dir.to_str().unwrap(), &flag]);
        assert_eq!(out.status.code(), Some(2), "--hop-limit {bad}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("--hop-limit"), "{stderr}");
        assert_eq!(out.stdout, b"", "--hop-limit {bad}");
    }
}

#[test]
fn missing_optional_bodies_are_recorded_as_absent() {
    let dir = fixture_copy(|d| {
        std::fs::remove_file(d.join("servers.json")).unwrap();
        std::fs::remove_file(d.join("amphorae.json")).unwrap();
    });
    let out = lachesis(&["plan", "--from-dir", dir.path().to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        plan["sources"],
        serde_json::json!({"servers": "absent", "loadbalancers": "ok", "amphorae": "absent"})
    );
    // Without the amphora list no port is re-attributed.
    assert_eq!(plan["amphora_ips"], serde_json::json!([]));
}

#[test]
fn empty_or_malformed_optional_body_is_an_error_naming_the_file() {
    for (tag, text, says) in [
        ("empty", "", "amphorae.json is empty"),
        ("blank", " \n", "amphorae.json is empty"),
        ("malformed", "{\"amphorae\": [", "amphorae.json is not JSON"),
    ] {
        let dir = fixture_copy(|d| {
            std::fs::write(d.join("amphorae.json"), text).unwrap();
        });
        let out = lachesis(&["plan", "--from-dir", dir.path().to_str().unwrap()]);
        assert!(!out.status.success(), "{tag}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{tag}: {stderr}");
    }
}
