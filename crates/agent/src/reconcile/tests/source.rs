//! The real metadata source against the simulator on a loopback port the
//! system picks: the lists come out as the topology holds them, a failed
//! Nova is "unknown" (never "no servers"), a failed Neutron list fails the
//! sync.

use std::collections::BTreeSet;
use std::time::Duration;

use lachesis_openstack::config::{resolve, SearchPaths, Selection};
use lachesis_openstack::{ApiMetrics, Client};
use lachesis_planner::{PlanOptions, SourceStatus, Sources};
use lachesis_sim::{self as sim, Fault, SettingsPatch, SimHandle, Store, Topology};
use prometheus_client::registry::Registry;

use super::super::{MetadataSource, Named, OpenStackSource, ReconcileMetrics, SyncError};

pub(super) fn topology() -> Topology {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/topology.yaml");
    Topology::from_yaml(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The example topology served by the simulator on a loopback port, and a
/// client configured for it.
pub(super) async fn client() -> (SimHandle, Client) {
    let handle = sim::start(
        Store::from_topology(&topology()).unwrap(),
        "127.0.0.1:0".parse().unwrap(),
        None,
    )
    .await
    .unwrap();
    // Configured as an operator would: the example clouds.yaml's `sim`
    // entry, pointed at this simulator's port.
    let examples = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
    let selection = Selection {
        cloud: Some("sim".to_owned()),
        clouds_file: Some(format!("{examples}/clouds.yaml").into()),
    };
    let mut cfg = resolve(&selection, &SearchPaths::in_dirs(&[]), &|_| None).unwrap();
    cfg.auth_url = handle.auth_url();
    cfg.timeout = Duration::from_secs(5);
    (handle, Client::new(cfg, ApiMetrics::default()).unwrap())
}

pub(super) async fn source() -> (SimHandle, OpenStackSource) {
    let (handle, client) = client().await;
    (handle, OpenStackSource::new(client))
}

fn fault(endpoint: &str) -> Fault {
    Fault {
        endpoint: endpoint.into(),
        status: Some(500),
        delay_ms: 0,
        drop: false,
        times: None,
    }
}

#[tokio::test]
async fn a_sync_is_planned_with_the_project_and_server_lists() {
    let (_sim, source) = source().await;
    let synced = source.sync(None, PlanOptions::default()).await.unwrap();
    let t = topology();
    let projects: BTreeSet<Named> = t
        .projects
        .iter()
        .map(|p| Named::new(&p.id, &p.name))
        .collect();
    let servers: BTreeSet<Named> = t
        .servers
        .iter()
        .map(|s| Named::new(&s.id, &s.name))
        .collect();
    assert_eq!(
        synced.projects.iter().cloned().collect::<BTreeSet<_>>(),
        projects
    );
    let got: BTreeSet<Named> = synced.servers.clone().unwrap().into_iter().collect();
    assert_eq!(got, servers);
    assert_eq!(synced.sources().servers, SourceStatus::Ok);
    let bound: BTreeSet<&str> = synced
        .plan
        .bindings
        .iter()
        .map(|b| b.port.as_str())
        .collect();
    assert!(!bound.is_empty(), "the example topology binds VM ports");
    assert!(bound
        .iter()
        .all(|port| t.ports.iter().any(|p| p.id == *port)));
}

#[tokio::test]
async fn a_failed_nova_is_unknown_not_empty() {
    let (sim, source) = source().await;
    sim.with_store(|s| s.add_fault(fault("servers")));
    let synced = source.sync(None, PlanOptions::default()).await.unwrap();
    assert_eq!(synced.servers, None);
    assert_eq!(synced.sources().servers, SourceStatus::Failed);
}

/// Pages are parsed as they arrive, so a best-effort list that fails on a
/// later page has had its first pages parsed already: they must be
/// dropped, the list unknown (DESIGN §5), never a partial one.
#[tokio::test]
async fn a_best_effort_list_failing_after_its_first_page_is_unknown_not_partial() {
    let (sim, source) = source().await;
    let healthy = source.sync(None, PlanOptions::default()).await.unwrap();
    assert!(
        !healthy.plan.amphora_ips.is_empty(),
        "the example's amp-1 (the first amphora by id) has data ports"
    );
    let pass_once = |endpoint: &str| Fault {
        status: None,
        times: Some(1),
        ..fault(endpoint)
    };
    sim.with_store(|s| {
        s.apply_settings(SettingsPatch {
            page_size: Some(1),
            ..SettingsPatch::default()
        })
        .expect("valid settings");
        for endpoint in ["servers", "amphorae"] {
            s.add_fault(pass_once(endpoint));
            s.add_fault(fault(endpoint));
        }
    });
    let synced = source.sync(None, PlanOptions::default()).await.unwrap();
    assert_eq!(synced.servers, None);
    assert_eq!(
        synced.sources(),
        Sources {
            servers: SourceStatus::Failed,
            loadbalancers: SourceStatus::Failed,
            amphorae: SourceStatus::Failed,
        }
    );
    // amp-1 came in the first amphorae page; with no previous plan a
    // failed Octavia attributes no amphora at all.
    assert!(
        synced.plan.amphora_ips.is_empty(),
        "{:?}",
        synced.plan.amphora_ips
    );
    assert!(synced.plan.bindings.iter().all(|b| !b.amphora));
}

#[tokio::test]
async fn a_failed_neutron_list_fails_the_sync() {
    let (sim, source) = source().await;
    sim.with_store(|s| s.add_fault(fault("ports")));
    let err = source.sync(None, PlanOptions::default()).await.unwrap_err();
    assert!(matches!(err, SyncError::Fetch(_)), "{err:?}");
}

#[tokio::test]
async fn timings_are_those_of_the_last_successful_sync() {
    let (sim, source) = source().await;
    assert_eq!(source.last_timings(), None, "nothing synced yet");
    // The ports list answers after 50 ms, once: the fetch takes at least that.
    let mut slow = fault("ports");
    slow.status = None;
    slow.delay_ms = 50;
    slow.times = Some(1);
    sim.with_store(|s| s.add_fault(slow));
    source.sync(None, PlanOptions::default()).await.unwrap();
    let first = source.last_timings().expect("a successful sync is timed");
    assert!(first.fetch >= Duration::from_millis(50), "{first:?}");
    assert!(first.plan > Duration::ZERO, "{first:?}");
    sim.with_store(|s| s.add_fault(fault("ports")));
    source.sync(None, PlanOptions::default()).await.unwrap_err();
    assert_eq!(
        source.last_timings(),
        Some(first),
        "a failed sync leaves the last successful one's timings"
    );
}

#[tokio::test]
async fn each_successful_sync_observes_its_fetch_and_plan_steps() {
    let (sim, source) = source().await;
    let mut registry = Registry::default();
    let metrics = ReconcileMetrics::register(&mut registry);
    let source = source.with_step_metrics(metrics.plan().clone());
    let count = |step: &str| {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        let series = format!("lachesis_plan_step_duration_seconds_count{{step=\"{step}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&series))
            .unwrap_or_else(|| panic!("no {series}in\n{text}"))
            .to_owned()
    };
    source.sync(None, PlanOptions::default()).await.unwrap();
    assert_eq!((count("fetch"), count("plan")), ("1".into(), "1".into()));
    sim.with_store(|s| s.add_fault(fault("ports")));
    source.sync(None, PlanOptions::default()).await.unwrap_err();
    assert_eq!(
        (count("fetch"), count("plan")),
        ("1".into(), "1".into()),
        "a failed sync observes nothing"
    );
    assert_eq!(count("diff"), "0", "a sync does not diff; a pass does");
}
