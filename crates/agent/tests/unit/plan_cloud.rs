//! `lachesis plan --cloud` against the simulator: both auth kinds print the
//! same plan, and `--save-dir` writes a folder that `--from-dir` replays to
//! the identical plan, byte for byte.

use crate::common;

use common::{code, lachesis, plan_cloud, repo, stderr, stdout, Sim};

#[test]
fn cloud_plan_matches_its_saved_replay_with_both_auth_kinds() {
    let sim = Sim::start(&["--page-size", "2"]);
    let dir = tempfile::tempdir().unwrap();
    let clouds = sim.clouds_yaml(dir.path(), |t| t);
    let saved = dir.path().join("saved");

    let password = plan_cloud("sim", &clouds, &["--save-dir", saved.to_str().unwrap()]);
    assert!(
        password.status.success(),
        "{}",
        String::from_utf8_lossy(&password.stderr)
    );
    let appcred = plan_cloud("sim-appcred", &clouds, &[]);
    assert!(
        appcred.status.success(),
        "{}",
        String::from_utf8_lossy(&appcred.stderr)
    );
    let replay = lachesis(&["plan", "--from-dir", saved.to_str().unwrap()]);
    assert!(
        replay.status.success(),
        "{}",
        String::from_utf8_lossy(&replay.stderr)
    );

    assert_eq!(
        password.stdout, appcred.stdout,
        "both auth kinds see the same cloud"
    );
    assert_eq!(
        password.stdout, replay.stdout,
        "the saved folder reproduces the plan"
    );
    let plan: serde_json::Value = serde_json::from_slice(&password.stdout).unwrap();
    assert!(
        plan["bindings"].as_array().is_some_and(|b| !b.is_empty()),
        "{plan}"
    );
    assert_eq!(
        plan["sources"],
        serde_json::json!({"servers": "ok", "loadbalancers": "ok", "amphorae": "ok"})
    );
    for file in [
        "networks",
        "subnets",
        "ports",
        "routers",
        "floatingips",
        "projects",
        "servers",
        "loadbalancers",
        "amphorae",
        "sources",
    ] {
        assert!(
            saved.join(format!("{file}.json")).exists(),
            "{file}.json saved"
        );
    }
}

#[test]
fn unknown_cloud_names_the_entry() {
    let dir = tempfile::tempdir().unwrap();
    let clouds = dir.path().join("clouds.yaml");
    std::fs::copy(repo().join("examples/clouds.yaml"), &clouds).unwrap();
    let out = plan_cloud("nope", &clouds, &[]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("nope"), "{stderr}");
}

/// `examples/topology.yaml` with a route two router hops long: tenant a's
/// router sends 10.9.0.0/24 to tenant b's, which sends it on to the admin
/// router that holds the subnet. Hop limit 1 reports it (`max_hops`), the
/// default 16 resolves it.
fn two_hop_topology(dir: &std::path::Path) -> std::path::PathBuf {
    let text = std::fs::read_to_string(repo().join("examples/topology.yaml")).unwrap();
    let text = text
        .replacen(
            "      - {destination: 10.2.0.0/24, nexthop: 10.50.0.20}\n",
            "      - {destination: 10.2.0.0/24, nexthop: 10.50.0.20}\n      \
             - {destination: 10.9.0.0/24, nexthop: 10.50.0.20}\n",
            1,
        )
        .replacen(
            "    external_gateway_info: {network_id: net-public, external_fixed_ips: \
             [{subnet_id: sub-public4, ip_address: 203.0.113.11}]}\n",
            "    external_gateway_info: {network_id: net-public, external_fixed_ips: \
             [{subnet_id: sub-public4, ip_address: 203.0.113.11}]}\n    \
             routes: [{destination: 10.9.0.0/24, nexthop: 10.50.0.30}]\n",
            1,
        )
        .replacen(
            "  - {id: net-lbmgmt,",
            "  - {id: net-c, name: c-private, project_id: 0a000000000000000000000000000001}\n  \
             - {id: net-lbmgmt,",
            1,
        )
        .replacen(
            "  - {id: sub-lbmgmt,",
            "  - {id: sub-c4, network_id: net-c, project_id: 0a000000000000000000000000000001, \
             cidr: 10.9.0.0/24, gateway_ip: 10.9.0.1}\n  - {id: sub-lbmgmt,",
            1,
        )
        .replacen(
            "  # DHCP\n",
            "  - {id: p-radm-shared, network_id: net-shared, project_id: \
             0a000000000000000000000000000001, mac_address: \"fa:16:3e:00:0c:01\", device_id: \
             router-admin, device_owner: network:router_interface, fixed_ips: [{subnet_id: \
             sub-shared, ip_address: 10.50.0.30}]}\n  - {id: p-radm-c4, network_id: net-c, \
             project_id: 0a000000000000000000000000000001, mac_address: \"fa:16:3e:00:0c:02\", \
             device_id: router-admin, device_owner: network:router_interface, fixed_ips: \
             [{subnet_id: sub-c4, ip_address: 10.9.0.1}]}\n  # DHCP\n",
            1,
        );
    assert_eq!(text.matches("10.9.0.0/24").count(), 3, "every edit applied");
    let path = dir.join("topology.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Issue 19 item 20: `lachesis plan` could not read the agent's
/// configuration, so an operator retyped the cloud, the clouds file and the
/// hop limit (and the plan could differ from what the agent programs).
/// `--config` takes all three from the file; a flag still wins.
#[test]
fn plan_reads_the_cloud_and_the_hop_limit_from_the_agent_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let sim = Sim::start_topology(&two_hop_topology(dir.path()), &[]);
    let clouds = sim.clouds_yaml(dir.path(), |t| t);
    let config = dir.path().join("lachesis.yaml");
    std::fs::write(
        &config,
        format!(
            "openstack:\n  cloud: sim\n  clouds_file: {}\ntunables:\n  route_hop_limit: 1\n",
            clouds.display()
        ),
    )
    .unwrap();
    let config = config.to_str().unwrap();

    let configured = lachesis(&["plan", "--config", config]);
    assert_eq!(code(&configured), 0, "{}", stderr(&configured));
    let by_flags = plan_cloud("sim", &clouds, &["--hop-limit", "1"]);
    assert_eq!(code(&by_flags), 0, "{}", stderr(&by_flags));
    assert_eq!(
        stdout(&configured),
        stdout(&by_flags),
        "the configuration's cloud, clouds file and hop limit"
    );
    let plan: serde_json::Value = serde_json::from_slice(&configured.stdout).unwrap();
    assert_eq!(plan["route_fallbacks"]["max_hops"], 1, "{plan}");

    // A flag wins over the file: the default hop limit resolves the route.
    let flagged = lachesis(&["plan", "--config", config, "--hop-limit", "16"]);
    assert_eq!(code(&flagged), 0, "{}", stderr(&flagged));
    let plan: serde_json::Value = serde_json::from_slice(&flagged.stdout).unwrap();
    assert_eq!(plan["route_fallbacks"]["max_hops"], 0, "{plan}");
    let other = lachesis(&["plan", "--config", config, "--cloud", "nope"]);
    assert_eq!(code(&other), 1);
    assert!(stderr(&other).contains("nope"), "{}", stderr(&other));

    // A configuration the agent would refuse is refused here too, naming
    // the file and the key.
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "tunables:\n  route_hop_limt: 1\n").unwrap();
    let out = lachesis(&["plan", "--config", bad.to_str().unwrap()]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("bad.yaml") && err.contains("route_hop_limt"),
        "{err}"
    );

    // A configuration without a cloud and no environment: a usage error.
    let empty = dir.path().join("empty.yaml");
    std::fs::write(&empty, "tunables:\n  route_hop_limit: 3\n").unwrap();
    let out = lachesis(&["plan", "--config", empty.to_str().unwrap()]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("the configuration sets no openstack.cloud"),
        "{}",
        stderr(&out)
    );
}
