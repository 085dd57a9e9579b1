//! `LiveSnapshot`: a snapshot changed entry by entry (relay mode) — what
//! each change does, case by case. The properties in `properties.rs` hold
//! it equal to a whole parse after any sequence.

use lachesis_planner::snapshot::SkipReason;
use lachesis_planner::{LiveSnapshot, Resource, SourceStatus, Sources};
use serde_json::json;

const ALL_FETCHED: Sources = Sources {
    servers: SourceStatus::Ok,
    loadbalancers: SourceStatus::Ok,
    amphorae: SourceStatus::Ok,
};

fn network(id: &str, name: &str) -> serde_json::Value {
    json!({"id": id, "name": name, "project_id": "t1", "shared": false, "router:external": false})
}

fn names(live: &LiveSnapshot) -> Vec<(String, Option<String>)> {
    live.snapshot()
        .networks
        .iter()
        .map(|n| (n.id.clone(), n.name.clone()))
        .collect()
}

#[test]
fn upserts_file_each_id_once_in_id_order_and_the_newest_body_wins() {
    let mut live = LiveSnapshot::new(ALL_FETCHED);
    for (id, name) in [("n3", "c"), ("n1", "a"), ("n2", "b"), ("n1", "a2")] {
        live.upsert(Resource::Networks, &network(id, name)).unwrap();
    }
    assert_eq!(
        names(&live),
        [
            ("n1".to_owned(), Some("a2".to_owned())),
            ("n2".to_owned(), Some("b".to_owned())),
            ("n3".to_owned(), Some("c".to_owned())),
        ]
    );
    live.remove(Resource::Networks, "n2");
    live.remove(Resource::Networks, "n9");
    assert_eq!(names(&live).len(), 2);
    assert_eq!(live.skipped(), 0);
}

#[test]
fn a_body_dropped_whole_takes_out_what_its_id_held_and_a_good_one_clears_its_lines() {
    let subnet = |cidr: &str| json!({"id": "s1", "network_id": "n1", "cidr": cidr});
    let mut live = LiveSnapshot::new(ALL_FETCHED);
    live.upsert(Resource::Subnets, &subnet("10.0.0.0/24"))
        .unwrap();
    assert_eq!(live.snapshot().subnets.len(), 1);
    // A subnet whose cidr does not parse is dropped whole.
    live.upsert(Resource::Subnets, &subnet("10.0.0.0/99"))
        .unwrap();
    assert!(live.snapshot().subnets.is_empty());
    let report = live.report();
    assert_eq!(live.skipped(), 1);
    assert_eq!(report.skipped.len(), 1);
    assert_eq!(report.skipped[0].id.as_deref(), Some("s1"));
    assert!(report.skipped[0].whole_entry);

    live.upsert(Resource::Subnets, &subnet("10.0.1.0/24"))
        .unwrap();
    assert_eq!(live.snapshot().subnets.len(), 1);
    assert_eq!(live.skipped(), 0);
    assert!(live.report().is_empty());

    live.upsert(Resource::Subnets, &subnet("nonsense")).unwrap();
    live.remove(Resource::Subnets, "s1");
    assert_eq!(live.skipped(), 0, "a removed id leaves no line");
}

#[test]
fn an_element_without_an_id_is_refused_and_changes_nothing() {
    let mut live = LiveSnapshot::new(ALL_FETCHED);
    live.upsert(Resource::Networks, &network("n1", "a"))
        .unwrap();
    let refused = live
        .upsert(Resource::Networks, &json!({"name": "no id"}))
        .unwrap_err();
    assert_eq!(refused.reason, SkipReason::MissingId);
    assert_eq!(refused.list, "networks");
    assert_eq!(refused.index, None);
    let refused = live
        .upsert(Resource::Ports, &json!("a string"))
        .unwrap_err();
    assert_eq!(refused.reason, SkipReason::NotAnObject);
    assert_eq!(names(&live).len(), 1);
    assert_eq!(live.skipped(), 0);
}

#[test]
fn a_list_that_was_not_fetched_stays_out_whatever_is_upserted_into_it() {
    let mut live = LiveSnapshot::new(Sources {
        servers: SourceStatus::Failed,
        loadbalancers: SourceStatus::Absent,
        amphorae: SourceStatus::Ok,
    });
    live.upsert(Resource::Servers, &json!({"id": "s1", "name": "vm"}))
        .unwrap();
    live.upsert(Resource::LoadBalancers, &json!({"id": "lb1"}))
        .unwrap();
    assert_eq!(live.snapshot().servers, None);
    assert_eq!(live.snapshot().load_balancers, None);
    assert_eq!(live.snapshot().amphorae, Some(Vec::new()));
    assert_eq!(live.skipped(), 0, "a list left out leaves no line");
}
