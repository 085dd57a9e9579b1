//! `lachesis plan --from-dir` against the reviewed fixture, run through the
//! built binary.

mod common;

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

#[test]
fn hop_limit_flag_reaches_the_resolver() {
    let dir = fixtures().join("two-tenants");
    let out = lachesis(&[
        "plan",
        "--from-dir",
        dir.to_str().unwrap(),
        "--hop-limit",
        "0",
    ]);
    assert!(out.status.success());
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // tenant-a's route to tenant-b's subnet needs one router hop.
    assert_eq!(plan["route_fallbacks"]["max_hops"], 1);
    assert_eq!(plan["anomalies"][0]["class"], "max_hops");
    let row = plan["trie"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["tenant"] == "3f2a9c1e5b7d4e08a1c6f0b2d4e6a8c0" && r["prefix"] == "10.2.0.0/24")
        .expect("the route's row");
    assert_eq!(row["zone"], "external");
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
