//! Real-cloud tier: Debian's own Keystone + Neutron on loopback, brought up by
//! `scripts/real-cloud` (`MariaDB`, `RabbitMQ`, uwsgi), a topology built through
//! the real API, the client's fetched bodies checked against it with both
//! auth kinds, and `lachesis plan --cloud` (both auth kinds, from a
//! clouds.yaml) checked row by row against the plan that topology implies,
//! the agent's field-selected sync planned like the whole lists, then
//! `lachesis agent` run against it (cold start, SIGKILL restart) with
//! namespace traffic counted exactly; and the simulator's notifications
//! and answers held to the real services' shapes (`shapes.rs`).
//! Runs in `cargo test` as root; it fails loudly (never skips) when the
//! services cannot be brought up.

mod agent;
mod bodies;
mod expected;
mod fields;
mod harness;
mod notify;
mod relay;
mod shapes;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use lachesis_openstack::config::{AppCredRef, DomainRef, ProjectRef, UserRef};
use lachesis_openstack::{
    save_bodies, ApiMetrics, Client, CloudConfig, Credentials, ServiceStatus,
};
use serde_json::{json, Value};

use bodies::check;
use harness::{build, Admin, Built, ADMIN_PASSWORD, KEYSTONE};

fn password_cfg() -> CloudConfig {
    let mut cfg = CloudConfig::new(
        KEYSTONE,
        Credentials::Password {
            user: UserRef::Name {
                name: "admin".into(),
                domain: DomainRef::Name("Default".into()),
            },
            password: ADMIN_PASSWORD.into(),
            project: ProjectRef::Name {
                name: "admin".into(),
                domain: DomainRef::Name("Default".into()),
            },
        },
    );
    cfg.region = Some("RegionOne".into());
    cfg.page_size = Some(2);
    cfg.timeout = Duration::from_mins(1);
    cfg
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_keystone_and_neutron_yield_exactly_the_built_topology() {
    let _cloud = lachesis_lab::Services::cloud();
    let started = Instant::now();
    let admin = Admin::login().await;
    admin.clean().await;
    let built = build(&admin).await;
    eprintln!("topology built in {:.1}s", started.elapsed().as_secs_f64());
    let bootstrap: BTreeSet<String> = admin.get(&format!("{KEYSTONE}/projects")).await["projects"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| !p["name"].as_str().unwrap().starts_with("lt-"))
        .map(|p| p["id"].as_str().unwrap().to_owned())
        .collect();

    let by_password = Client::new(password_cfg(), ApiMetrics::default())
        .unwrap()
        .sync()
        .await
        .unwrap();
    check(&built, &by_password.bodies, &bootstrap);
    // This cloud has no Nova or Octavia: normal, not a failure.
    assert_eq!(by_password.nova, ServiceStatus::NotInCatalog);
    assert_eq!(by_password.octavia, ServiceStatus::NotInCatalog);
    assert!(!by_password.is_partial());

    let cred = admin
        .post(
            &format!("{KEYSTONE}/users/{}/application_credentials", admin.user_id),
            json!({"application_credential": {"name": "lt-lachesis", "roles": [{"name": "admin"}]}}),
        )
        .await;
    let mut cfg = password_cfg();
    cfg.credentials = Credentials::ApplicationCredential {
        credential: AppCredRef::Id(
            cred["application_credential"]["id"]
                .as_str()
                .unwrap()
                .into(),
        ),
        secret: cred["application_credential"]["secret"]
            .as_str()
            .unwrap()
            .into(),
    };
    let by_appcred = Client::new(cfg, ApiMetrics::default())
        .unwrap()
        .sync()
        .await
        .unwrap();
    check(&built, &by_appcred.bodies, &bootstrap);
    assert_eq!(by_appcred.bodies, by_password.bodies);

    // The saved bodies replay as the same snapshot (`plan --from-dir`).
    let dir = tempfile::tempdir().unwrap();
    save_bodies(&by_password.bodies, dir.path()).unwrap();
    let ports: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("ports.json")).unwrap())
            .unwrap();
    assert_eq!(ports, by_password.bodies.ports);
    assert!(!dir.path().join("servers.json").exists());
    eprintln!(
        "real-cloud tier bodies checked after {:.1}s",
        started.elapsed().as_secs_f64()
    );

    let plan_started = Instant::now();
    check_plan(&admin, &built, &cred["application_credential"]).await;
    eprintln!(
        "plan --cloud (both auth kinds) and --from-dir replay checked in {:.1}s; tier body {:.1}s",
        plan_started.elapsed().as_secs_f64(),
        started.elapsed().as_secs_f64()
    );

    let fields_started = Instant::now();
    fields::field_selected_sync_plans_like_whole_lists(&admin, password_cfg()).await;
    eprintln!(
        "the agent's field-selected sync planned like the whole lists in {:.1}s",
        fields_started.elapsed().as_secs_f64()
    );

    let agent_started = Instant::now();
    let tenants = agent_tenants(&admin, &built).await;
    let dir = tempfile::tempdir().unwrap();
    let clouds = dir.path().join("clouds.yaml");
    write_clouds_yaml(&clouds, &cred["application_credential"]);
    // On a thread of its own: it moves into a network namespace.
    let run = std::thread::spawn(move || agent::cold_start_and_sigkill_restart(&tenants, &clouds));
    if let Err(panic) = run.join() {
        std::panic::resume_unwind(panic);
    }
    eprintln!(
        "agent cold start and SIGKILL restart against the real cloud checked in {:.1}s",
        agent_started.elapsed().as_secs_f64()
    );

    let relay_started = Instant::now();
    let clouds = dir.path().join("clouds.yaml");
    relay::follows_a_port_through_the_real_api(&admin, &built, &clouds).await;
    eprintln!(
        "the relay against the real cloud checked in {:.1}s",
        relay_started.elapsed().as_secs_f64()
    );
}

/// Tenant A's VM port on the shared network, and a new port of tenant B's
/// on the same subnet: two VMs the lab can put on one bridge.
async fn agent_tenants(admin: &Admin, built: &Built) -> agent::Tenants {
    const MAC_B: &str = "fa:16:3e:b1:00:03";
    let created = admin
        .post(
            &format!("{}/ports", harness::NEUTRON),
            json!({"port": {"name": "lt-vm-b1-shared", "network_id": built.shared,
                "project_id": built.project_b, "mac_address": MAC_B,
                "device_id": "5e7a1c1e-0000-4000-8000-0000000000b1",
                "device_owner": "compute:nova", "fixed_ips": [{"ip_address": "10.50.0.32"}]}}),
        )
        .await;
    let port_b = harness::id(&created, "port");
    let port_a = admin
        .list("ports")
        .await
        .into_iter()
        .find(|p| p["name"] == "lt-vm-a1-shared")
        .expect("tenant A's shared port");
    agent::Tenants {
        project_a: built.project_a.clone(),
        project_b: built.project_b.clone(),
        mac_a: s(&port_a, "mac_address"),
        mac_b: MAC_B.to_owned(),
        ip_a: port_a["fixed_ips"][0]["ip_address"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap(),
        ip_b: "10.50.0.32".parse().unwrap(),
        port_ids: [s(&port_a, "id"), port_b],
    }
}

fn lachesis(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_lachesis"))
        .args(args)
        .output()
        .expect("run lachesis");
    assert!(
        out.status.success(),
        "lachesis {args:?} failed\n--- stderr\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// One password entry and one application-credential entry for the real
/// Keystone, as an operator would write them.
fn write_clouds_yaml(path: &Path, cred: &Value) {
    let text = format!(
        "clouds:
  lt-password:
    auth:
      auth_url: {KEYSTONE}
      username: admin
      password: {ADMIN_PASSWORD}
      project_name: admin
      user_domain_name: Default
      project_domain_name: Default
    region_name: RegionOne
    api_timeout: 60
  lt-appcred:
    auth_type: v3applicationcredential
    auth:
      auth_url: {KEYSTONE}
      application_credential_id: {id}
      application_credential_secret: {secret}
    region_name: RegionOne
    api_timeout: 60
",
        id = cred["id"].as_str().unwrap(),
        secret = cred["secret"].as_str().unwrap(),
    );
    std::fs::write(path, text).unwrap();
}

/// Collects one plan array as a set, failing on a repeated element (the
/// schema allows one row per key, so a duplicate is a defect, not noise).
fn set_of<T: Ord + std::fmt::Debug>(
    plan: &Value,
    key: &str,
    f: impl Fn(&Value) -> T,
) -> BTreeSet<T> {
    let items: Vec<T> = plan[key]
        .as_array()
        .unwrap_or_else(|| panic!("plan has no {key} array"))
        .iter()
        .map(f)
        .collect();
    let n = items.len();
    let set: BTreeSet<T> = items.into_iter().collect();
    assert_eq!(set.len(), n, "duplicate {key} entries");
    set
}

fn s(v: &Value, key: &str) -> String {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} is not a string in {v}"))
        .to_owned()
}

/// Prints the difference both ways, so a failure names the exact rows.
fn assert_same<T: Ord + std::fmt::Debug>(what: &str, got: &BTreeSet<T>, want: &BTreeSet<T>) {
    let extra: Vec<&T> = got.difference(want).collect();
    let missing: Vec<&T> = want.difference(got).collect();
    assert!(
        extra.is_empty() && missing.is_empty(),
        "{what}: plan has unexpected {extra:#?}\nplan lacks {missing:#?}"
    );
}

async fn check_plan(admin: &Admin, built: &Built, cred: &Value) {
    let dir = tempfile::tempdir().unwrap();
    let clouds = dir.path().join("clouds.yaml");
    write_clouds_yaml(&clouds, cred);
    let clouds = clouds.to_str().unwrap();
    let saved = dir.path().join("saved");
    let saved = saved.to_str().unwrap();

    let password = lachesis(&[
        "plan",
        "--cloud",
        "lt-password",
        "--clouds-file",
        clouds,
        "--save-dir",
        saved,
    ]);
    let appcred = lachesis(&["plan", "--cloud", "lt-appcred", "--clouds-file", clouds]);
    let replay = lachesis(&["plan", "--from-dir", saved]);
    assert_eq!(
        String::from_utf8_lossy(&password.stdout),
        String::from_utf8_lossy(&appcred.stdout),
        "both auth kinds plan the same cloud"
    );
    assert_eq!(
        String::from_utf8_lossy(&password.stdout),
        String::from_utf8_lossy(&replay.stdout),
        "the saved folder replays to the identical plan"
    );

    let plan: Value = serde_json::from_slice(&password.stdout).unwrap();
    let ports = admin.list("ports").await;
    let trie = set_of(&plan, "trie", |r| {
        (s(r, "tenant"), s(r, "prefix"), s(r, "zone"))
    });
    assert_same("trie", &trie, &expected::trie(built, &ports));
    let bindings = set_of(&plan, "bindings", |b| {
        (
            s(b, "mac"),
            s(b, "tenant"),
            s(b, "server"),
            s(b, "port"),
            s(b, "external_network"),
            b["amphora"].as_bool().unwrap(),
        )
    });
    assert_same("bindings", &bindings, &expected::bindings(built, &ports));
    let router_macs = set_of(&plan, "router_macs", |m| {
        (s(m, "mac"), s(m, "router"), s(m, "external_network"))
    });
    assert_same(
        "router_macs",
        &router_macs,
        &expected::router_macs(built, &ports),
    );
    assert_eq!(plan["amphora_ips"], json!([]), "no Octavia, no amphorae");
    // No Nova or Octavia in this catalog: absent, not failed.
    assert_eq!(
        plan["sources"],
        json!({"servers": "absent", "loadbalancers": "absent", "amphorae": "absent"})
    );
    // Both routes resolve (§6.2 C and B), every VM has at most one external
    // candidate, no MAC is claimed twice: nothing to report.
    assert_eq!(plan["anomalies"], json!([]));
    let fallbacks = plan["route_fallbacks"].as_object().unwrap();
    assert!(!fallbacks.is_empty());
    assert!(
        fallbacks.values().all(|n| n == 0),
        "no route fell back: {fallbacks:?}"
    );
}
