//! What a new user hits first with `lachesis plan` (issue 12, item 8), each
//! checked on the built binary: its exit status and what it prints.

use crate::common;

use common::{
    code, fixture_copy, fixtures, lachesis, lachesis_env, plan_cloud, repo, stderr, stdout, Sim,
};
use serde_json::Value;

fn json(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", stdout(out)))
}

#[test]
fn a_sync_error_prints_each_cause_once_and_the_region_plainly() {
    let sim = Sim::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let clouds = sim.clouds_yaml(dir.path(), |t| {
        t.replacen("region_name: RegionOne", "region_name: RegionTwo", 1)
    });
    let out = plan_cloud("sim", &clouds, &[]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "one error line:\n{err}");
    assert_eq!(
        err.matches("has no \"internal\" endpoint").count(),
        1,
        "{err}"
    );
    assert!(
        err.starts_with("lachesis: error: syncing cloud \"sim\": "),
        "{err}"
    );
    assert!(
        err.contains("endpoint in region RegionTwo (endpoints: public@RegionOne,"),
        "{err}"
    );
    assert!(!err.contains("Some("), "{err}");

    // A Neutron failure: the service's answer appears once.
    let clouds = sim.clouds_yaml(dir.path(), |t| t);
    sim.fail("ports");
    let out = plan_cloud("sim", &clouds, &[]);
    assert_eq!(code(&out), 1);
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "one error line:\n{err}");
    assert_eq!(err.matches("injected fault on ports").count(), 1, "{err}");
}

#[test]
fn disabled_tls_verification_is_logged_at_warn_in_text_and_json() {
    const WARNING: &str = "TLS CERTIFICATE VERIFICATION IS DISABLED";
    let sim = Sim::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    for setting in ["verify: false", "insecure: true"] {
        let clouds = sim.clouds_yaml(dir.path(), |t| {
            t.replacen(
                "    interface: internal\n",
                &format!("    interface: internal\n    {setting}\n"),
                1,
            )
        });
        let clouds = clouds.to_str().unwrap();
        let plan = ["plan", "--cloud", "sim", "--clouds-file", clouds];

        let out = lachesis(&plan);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let err = stderr(&out);
        let Some(line) = err.lines().find(|l| l.contains(WARNING)) else {
            panic!("{setting}: no warning in\n{err}")
        };
        assert!(line.contains(" WARN "), "{line}");
        assert!(
            line.contains(&format!("auth_url=http://{}", sim.addr)),
            "{line}"
        );

        // JSON lines: every stderr line is one object; the warning is one.
        let out = lachesis(&[&["--log-format", "json"][..], &plan].concat());
        assert_eq!(code(&out), 0);
        let lines: Vec<Value> = stderr(&out)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        assert!(
            lines.iter().any(|l| l["level"] == "WARN"
                && l["fields"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains(WARNING))),
            "{lines:#?}"
        );
    }
    let clouds = dir.path().join("clouds.yaml");
    let plan = [
        "plan",
        "--cloud",
        "sim",
        "--clouds-file",
        clouds.to_str().unwrap(),
    ];
    // RUST_LOG filters; the flag (before or after the subcommand) wins.
    let quiet = lachesis_env(&plan, &[("RUST_LOG", "error")]);
    assert!(!stderr(&quiet).contains(WARNING), "{}", stderr(&quiet));
    let loud = lachesis_env(
        &[&plan[..], &["--log-level", "warn"]].concat(),
        &[("RUST_LOG", "error")],
    );
    assert!(stderr(&loud).contains(WARNING), "{}", stderr(&loud));
    let quiet = lachesis(&[&["--log-level", "error"][..], &plan].concat());
    assert!(!stderr(&quiet).contains(WARNING), "{}", stderr(&quiet));
    assert_eq!(
        stdout(&quiet),
        stdout(&loud),
        "logging never changes the plan"
    );

    // Bad logging settings are usage errors.
    let out = lachesis_env(&plan, &[("RUST_LOG", "[[")]);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("RUST_LOG=\"[[\" is not a tracing filter"),
        "{}",
        stderr(&out)
    );
    let out = lachesis(&[&plan[..], &["--log-format", "xml"]].concat());
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("invalid value 'xml'"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_partial_sync_exits_3_and_its_saved_folder_replays_byte_for_byte() {
    let sim = Sim::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let clouds = sim.clouds_yaml(dir.path(), |t| t);
    for (endpoint, failed) in [
        ("amphorae", &["loadbalancers", "amphorae"][..]),
        ("servers", &["servers"][..]),
    ] {
        assert_eq!(sim.control("DELETE", "/sim/faults", ""), 204);
        sim.fail(endpoint);
        let saved = dir.path().join(endpoint);
        let live = plan_cloud("sim", &clouds, &["--save-dir", saved.to_str().unwrap()]);
        assert_eq!(code(&live), 3, "{endpoint}: {}", stderr(&live));
        let plan = json(&live);
        for list in ["servers", "loadbalancers", "amphorae"] {
            let want = if failed.contains(&list) {
                "failed"
            } else {
                "ok"
            };
            assert_eq!(plan["sources"][list], want, "{endpoint}: {list}");
        }
        assert!(
            stderr(&live).contains(&format!(
                "partial plan: could not fetch {}",
                failed.join(", ")
            )),
            "{}",
            stderr(&live)
        );
        // The folder says which lists failed, and holds no body for them.
        let recorded: Value =
            serde_json::from_str(&std::fs::read_to_string(saved.join("sources.json")).unwrap())
                .unwrap();
        assert_eq!(recorded, plan["sources"], "{endpoint}");
        for list in failed {
            assert!(!saved.join(format!("{list}.json")).exists(), "{list}");
        }

        let replay = lachesis(&["plan", "--from-dir", saved.to_str().unwrap()]);
        assert_eq!(code(&replay), 3, "{endpoint}: {}", stderr(&replay));
        assert!(
            replay.stdout == live.stdout,
            "{endpoint}: replay differs:\n{}",
            stdout(&replay)
        );
    }
    // With the faults cleared the same cloud gives a full plan: exit 0.
    assert_eq!(sim.control("DELETE", "/sim/faults", ""), 204);
    let full = plan_cloud("sim", &clouds, &[]);
    assert_eq!(code(&full), 0, "{}", stderr(&full));
}

/// Rewrites one port of the fixture by id.
fn edit_port(dir: &std::path::Path, id: &str, edit: impl FnOnce(&mut Value)) {
    let path = dir.join("ports.json");
    let mut body: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let port = body["ports"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|p| p["id"] == id)
        .unwrap_or_else(|| panic!("no port {id}"));
    edit(port);
    std::fs::write(&path, body.to_string()).unwrap();
}

#[test]
fn malformed_entries_are_reported_in_the_json_the_table_and_on_stderr() {
    // tenant-a's web-1 port (a bound VM) and its nat-box port.
    const WEB: &str = "0000106e-006e-406e-806e-00000000006e";
    const NAT: &str = "0000106f-006f-406f-806f-00000000006f";
    let dir = fixture_copy(|d| {
        edit_port(d, WEB, |p| p["fixed_ips"] = Value::from("10.1.0.10"));
        edit_port(d, NAT, |p| p["device_owner"] = Value::from(42));
        let path = d.join("ports.json");
        let mut body: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        body["ports"]
            .as_array_mut()
            .unwrap()
            .push(Value::from("not a port"));
        std::fs::write(&path, body.to_string()).unwrap();
    });
    let from = dir.path().to_str().unwrap();

    let out = lachesis(&["plan", "--from-dir", from]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let skipped = json(&out)["report"]["skipped"].clone();
    let find = |id: Value, field: Value| {
        skipped
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == id && s["field"] == field)
            .cloned()
            .unwrap_or_else(|| panic!("no {id} {field} in {skipped:#}"))
    };
    let web = find(WEB.into(), "fixed_ips".into());
    assert_eq!(web["reason"], "bad_value");
    assert_eq!(web["value"], "10.1.0.10");
    assert_eq!(web["dropped"], "part");
    let nat = find(NAT.into(), "device_owner".into());
    assert_eq!(nat["value"], "42");
    let not_object = find(Value::Null, Value::Null);
    assert_eq!(not_object["index"], 16);
    assert_eq!(not_object["reason"], "not_an_object");
    assert_eq!(not_object["dropped"], "entry");
    assert_eq!(
        skipped.as_array().unwrap().len(),
        4,
        "and the fixture's bad MAC"
    );

    let err = stderr(&out);
    for (entry, field) in [
        (WEB, "\"fixed_ips\""),
        (NAT, "\"device_owner\""),
        ("#16", "not an object"),
    ] {
        assert!(
            err.lines()
                .any(|l| l.contains(" WARN ") && l.contains(entry) && l.contains(field)),
            "{entry} {field} not on stderr:\n{err}"
        );
    }

    let out = lachesis(&["plan", "--from-dir", from, "--format", "table"]);
    assert_eq!(code(&out), 0);
    let table = stdout(&out);
    assert!(table.contains("skipped input (4)\n"), "{table}");
    for (entry, field, dropped) in [
        (WEB, "fixed_ips", "part"),
        (NAT, "device_owner", "part"),
        ("#16", "-", "entry"),
    ] {
        assert!(
            table.lines().any(|l| {
                let cells: Vec<&str> = l.split_whitespace().collect();
                cells.len() > 4
                    && cells[0] == "ports"
                    && cells[1] == entry
                    && cells[2] == field
                    && cells[3] == dropped
            }),
            "no row for {entry} {field} in\n{table}"
        );
    }
}

#[test]
fn the_table_names_ids_counts_what_it_says_and_puts_failed_sources_first() {
    const TENANT_A: &str = "3f2a9c1e5b7d4e08a1c6f0b2d4e6a8c0";
    // The fixture with one route whose nexthop is on no attached subnet:
    // a fallback to external.
    let two = fixture_copy(|d| {
        let path = d.join("routers.json");
        let mut v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        v["routers"][1]["routes"] =
            serde_json::json!([{"destination": "198.51.100.0/24", "nexthop": "192.0.2.99"}]);
        std::fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
    });
    let two = two.path();
    let out = lachesis(&[
        "plan",
        "--from-dir",
        two.to_str().unwrap(),
        "--format",
        "table",
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let table = stdout(&out);
    let plan = json(&lachesis(&["plan", "--from-dir", two.to_str().unwrap()]));
    let rows = |section: &str| -> Vec<String> {
        table
            .split("\n\n")
            .find(|s| s.starts_with(section))
            .unwrap_or_else(|| panic!("no section {section:?} in\n{table}"))
            .lines()
            .skip(2)
            .map(str::to_owned)
            .collect()
    };
    // Names beside ids: projects, servers, networks, routers.
    assert!(
        rows("trie rows").iter().any(|r| r
            .trim_start()
            .starts_with(&format!("{TENANT_A} (tenant-a)  10.1.0.0/24"))),
        "{table}"
    );
    let web = rows("bindings")
        .into_iter()
        .find(|r| r.contains("0000101f-001f-401f-801f-00000000001f (web-1)"))
        .unwrap_or_else(|| panic!("no web-1 binding in\n{table}"));
    assert!(web.contains(&format!("{TENANT_A} (tenant-a)")), "{web}");
    assert!(
        web.contains("00001001-0001-4001-8001-000000000001 (public)"),
        "{web}"
    );
    assert!(
        rows("router MACs")
            .iter()
            .any(|r| r.contains("00001015-0015-4015-8015-000000000015 (router-a)")),
        "{table}"
    );
    // Each header counts what its title names.
    let fell_back: u64 = plan["route_fallbacks"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(fell_back, 1, "the one dangling route");
    assert!(
        table.contains("\nroute fallbacks (static routes that fell back to external: 1)\n"),
        "{table}"
    );
    for (title, key) in [
        ("trie rows", "trie"),
        ("bindings", "bindings"),
        ("router MACs", "router_macs"),
    ] {
        let n = plan[key].as_array().unwrap().len();
        assert_eq!(rows(title).len(), n, "{title}");
        assert!(
            table.contains(&format!("{title} ({n})\n")),
            "{title}: {table}"
        );
    }

    // A failed source comes first, in the first section.
    let dir = fixture_copy(|d| {
        std::fs::remove_file(d.join("servers.json")).unwrap();
        std::fs::write(
            d.join("sources.json"),
            r#"{"servers": "failed", "loadbalancers": "ok", "amphorae": "ok"}"#,
        )
        .unwrap();
    });
    let out = lachesis(&[
        "plan",
        "--from-dir",
        dir.path().to_str().unwrap(),
        "--format",
        "table",
    ]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    let table = stdout(&out);
    let first: Vec<&str> = table.lines().take(3).collect();
    assert_eq!(first[0], "best-effort sources (1 of 3 failed)", "{table}");
    assert_eq!(
        first[2].split_whitespace().collect::<Vec<_>>(),
        ["servers", "failed"],
        "{table}"
    );
}

#[test]
fn from_dir_on_a_missing_folder_says_no_such_folder() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let out = lachesis(&["plan", "--from-dir", missing.to_str().unwrap()]);
    assert_eq!(code(&out), 1);
    assert_eq!(
        stderr(&out),
        format!(
            "lachesis: error: no such folder: {} (expected a folder written by `lachesis plan --save-dir`)\n",
            missing.display()
        )
    );
    let file = dir.path().join("file");
    std::fs::write(&file, "").unwrap();
    let out = lachesis(&["plan", "--from-dir", file.to_str().unwrap()]);
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("is not a folder"), "{}", stderr(&out));
}

#[test]
fn an_auth_url_that_is_not_a_url_fails_at_load_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let clouds = dir.path().join("clouds.yaml");
    let text = std::fs::read_to_string(repo().join("examples/clouds.yaml")).unwrap();
    std::fs::write(
        &clouds,
        text.replace("http://127.0.0.1:8780/identity/v3", "keystone.example:5000"),
    )
    .unwrap();
    let out = plan_cloud("sim", &clouds, &[]);
    assert_eq!(code(&out), 1);
    let err = stderr(&out);
    assert!(
        err.contains(
            "key `clouds.sim.auth.auth_url`: expected an http:// or https:// URL of Keystone"
        ) && err.contains("(found \"keystone.example:5000\")"),
        "{err}"
    );
    assert!(!err.contains("syncing"), "no request was made: {err}");

    // The same check for an openrc's variables.
    let out = lachesis_env(
        &["plan"],
        &[
            ("OS_AUTH_URL", "/identity/v3"),
            ("OS_USERNAME", "admin"),
            ("OS_PASSWORD", "x"),
            ("OS_PROJECT_NAME", "admin"),
        ],
    );
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains("key `OS_AUTH_URL`: expected an http:// or https:// URL"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn an_empty_clouds_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    for text in ["", "# written by hand, not yet filled in\n"] {
        let clouds = dir.path().join("clouds.yaml");
        std::fs::write(&clouds, text).unwrap();
        let out = plan_cloud("sim", &clouds, &[]);
        assert_eq!(code(&out), 1);
        assert!(
            stderr(&out).contains(&format!(
                "{} is empty: expected a `clouds:` mapping with one entry per cloud",
                clouds.display()
            )),
            "{text:?}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn os_cloud_selects_the_cloud_and_no_source_is_a_usage_error() {
    let sim = Sim::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let clouds = sim.clouds_yaml(dir.path(), |t| t);
    let named = plan_cloud("sim", &clouds, &[]);
    let clouds = clouds.to_str().unwrap();
    let from_env = lachesis_env(&["plan", "--clouds-file", clouds], &[("OS_CLOUD", "sim")]);
    assert_eq!(code(&from_env), 0, "{}", stderr(&from_env));
    assert!(
        from_env.stdout == named.stdout,
        "OS_CLOUD=sim plans what --cloud sim plans"
    );
    // --cloud wins over OS_CLOUD, --from-dir over a cloud merely in the environment.
    let out = lachesis_env(
        &["plan", "--cloud", "sim", "--clouds-file", clouds],
        &[("OS_CLOUD", "nope")],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let two = fixtures().join("two-tenants");
    let out = lachesis_env(
        &["plan", "--from-dir", two.to_str().unwrap()],
        &[("OS_CLOUD", "nope")],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));

    let out = lachesis(&["plan"]);
    assert_eq!(code(&out), 2);
    let err = stderr(&out);
    assert!(
        err.starts_with(
            "error: no snapshot source: pass --from-dir DIR, --cloud NAME or --config FILE, \
             or set OS_CLOUD\n"
        ),
        "{err}"
    );
    assert!(err.contains("Usage: lachesis plan"), "{err}");
    let out = lachesis(&[
        "plan",
        "--from-dir",
        two.to_str().unwrap(),
        "--cloud",
        "sim",
    ]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
}

/// The shipped binary is stripped and carries no debug info; profiling
/// builds keep line tables (README "Build profiles"). The size itself is
/// measured, not tested: a release build here takes minutes.
#[test]
fn the_release_profile_ships_a_stripped_binary() {
    let manifest = std::fs::read_to_string(repo().join("Cargo.toml")).unwrap();
    let section = |name: &str| -> Vec<String> {
        manifest
            .split("\n[")
            .find(|s| s.starts_with(&format!("{name}]")))
            .unwrap_or_else(|| panic!("no [{name}] in Cargo.toml"))
            .lines()
            .skip(1)
            .map(|l| l.split('#').next().unwrap().replace(' ', ""))
            .filter(|l| !l.is_empty())
            .collect()
    };
    let release = section("profile.release");
    assert!(release.contains(&"strip=true".to_owned()), "{release:?}");
    assert!(release.contains(&"debug=false".to_owned()), "{release:?}");
    let profiling = section("profile.profiling");
    for line in [
        "inherits=\"release\"",
        "debug=\"line-tables-only\"",
        "strip=\"none\"",
    ] {
        assert!(profiling.contains(&line.to_owned()), "{profiling:?}");
    }
    let makefile = std::fs::read_to_string(repo().join("Makefile")).unwrap();
    for bench in makefile.lines().filter(|l| l.contains("--example bench_")) {
        assert!(bench.contains("--profile $(BENCH_PROFILE)"), "{bench}");
    }
}
