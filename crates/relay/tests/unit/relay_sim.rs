//! The relay against the simulator (DESIGN §17, docs/fleet.md "Running a
//! relay"): its first snapshot is the cloud, a notification's payload is
//! one record within a second, stale payloads are dropped, ids-only events
//! are GETs, and the digest heals what notifications missed.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use lachesis_fleet::{lean, Assembler, Fed, Key, Record};
use lachesis_openstack::{ApiMetrics, Client};
use lachesis_planner::Resource;
use lachesis_relay::Schedule;
use reqwest::Method;
use serde_json::{json, Value};

use super::harness::{cloud, schedule, topology, Harness};

/// A port the control API creates in tenant b's network.
fn new_port(id: &str, last_octet: u8) -> Value {
    json!({"id": id, "network_id": "net-b", "project_id": "0b0000000000000000000000000000bb",
        "mac_address": format!("fa:16:3e:b1:01:{last_octet:02x}"), "device_id": "vm-b2",
        "device_owner": "compute:nova",
        "fixed_ips": [{"subnet_id": "sub-b4", "ip_address": format!("10.2.0.{last_octet}")}]})
}

fn port(id: &str) -> Key {
    Key::new(Resource::Ports, id)
}

#[tokio::test]
async fn the_first_snapshot_is_the_whole_cloud() {
    let relay = Harness::start(schedule()).await;
    // An agent's reading of the stream: ready at the snapshot's end.
    let mut agent = Assembler::new();
    let mut complete = false;
    for (offset, record) in relay.stream.decoded().into_iter().enumerate() {
        if matches!(agent.feed(offset as u64, &record, 0), Fed::Complete { .. }) {
            complete = true;
        }
    }
    assert!(complete && agent.ready(), "{:?}", agent.counts());
    let pages = agent.state().pages();

    // Independent truth for the ids: the topology file the simulator serves.
    let t = topology();
    let ids = |v: Vec<&String>| v.into_iter().cloned().collect::<BTreeSet<String>>();
    let expected: BTreeMap<Resource, BTreeSet<String>> = [
        (
            Resource::Networks,
            ids(t.networks.iter().map(|x| &x.id).collect()),
        ),
        (
            Resource::Subnets,
            ids(t.subnets.iter().map(|x| &x.id).collect()),
        ),
        (
            Resource::Ports,
            ids(t.ports.iter().map(|x| &x.id).collect()),
        ),
        (
            Resource::Routers,
            ids(t.routers.iter().map(|x| &x.id).collect()),
        ),
        (
            Resource::FloatingIps,
            ids(t.floatingips.iter().map(|x| &x.id).collect()),
        ),
        (
            Resource::Projects,
            ids(t.projects.iter().map(|x| &x.id).collect()),
        ),
        (
            Resource::Servers,
            ids(t.servers.iter().map(|x| &x.id).collect()),
        ),
    ]
    .into();
    for (kind, want) in &expected {
        let got: BTreeSet<String> = pages[kind]
            .iter()
            .map(|b| b["id"].as_str().unwrap().to_owned())
            .collect();
        assert!(!want.is_empty(), "{kind:?}");
        assert_eq!(&got, want, "{kind:?}");
    }
    // The bodies: what a sync lists, cut to each list's fields.
    let synced = Client::new(cloud(&relay.sim), ApiMetrics::default())
        .unwrap()
        .sync()
        .await
        .unwrap()
        .bodies;
    for kind in Resource::ALL {
        let listed: Vec<Value> = synced
            .body(kind)
            .map(|b| {
                let mut items: Vec<Value> = b[kind.collection()]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|i| lean(kind, i))
                    .collect();
                items.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
                items
            })
            .unwrap_or_default();
        assert_eq!(pages[&kind], listed, "{kind:?}");
    }
    // Neutron's records carry their revision.
    for record in relay.stream.decoded() {
        if let Record::Entry(e) = record {
            if e.key.kind.service() == "network" {
                assert_eq!(Some(e.rev), e.body.unwrap()["revision_number"].as_u64());
            }
        }
    }
    assert_eq!(relay.metrics.value("syncs", "ok"), 1);
    assert_eq!(relay.metrics.value("snapshots", ""), 1);
    relay.stop().await;
}

/// The first sync is not written before its snapshot (a young stream
/// would hold the cloud twice), and the heartbeats that follow name that
/// snapshot, where a booting agent starts reading.
#[tokio::test]
async fn the_first_sync_is_written_once_and_heartbeats_name_its_snapshot() {
    let relay = Harness::start(Schedule {
        heartbeat_interval: Duration::from_millis(100),
        ..schedule()
    })
    .await;
    // The first sync is not written before its snapshot: apart from
    // heartbeats, the stream begins with the start marker and holds each
    // key once.
    let records: Vec<Record> = relay
        .stream
        .decoded()
        .into_iter()
        .filter(|r| !matches!(r, Record::Heartbeat(_)))
        .collect();
    let Some(Record::Marker(start)) = records.first() else {
        panic!("the stream begins with {:?}", records.first());
    };
    let mut keys = BTreeSet::new();
    for record in &records {
        if let Record::Entry(e) = record {
            assert_eq!(e.snapshot.as_deref(), Some(start.snapshot.as_str()));
            assert!(keys.insert(e.key.clone()), "{} written twice", e.key);
        }
    }
    // A heartbeat after it names that snapshot, as written.
    let named = |records: &[Record]| {
        records.iter().find_map(|r| match r {
            Record::Heartbeat(hb) => hb.snapshot.clone(),
            _ => None,
        })
    };
    relay
        .wait_for("a heartbeat naming the snapshot", |records| {
            named(records).is_some()
        })
        .await;
    let named = named(&relay.stream.decoded()).unwrap();
    assert_eq!(named.id, start.snapshot);
    assert!(start.snapshot.starts_with(&format!("{}-", named.at_ms)));
    relay.stop().await;
}

/// OpenStack refusing the first sync for longer than the snapshot
/// interval: no snapshot is written (an agent's heal rule would remove
/// everything it lacks), nor any record; once the sync succeeds, the
/// first snapshot is the whole cloud.
#[tokio::test]
async fn no_snapshot_is_written_before_the_first_full_sync() {
    let mut store = lachesis_sim::Store::from_topology(&topology()).unwrap();
    store.add_fault(lachesis_sim::Fault {
        endpoint: "ports".into(),
        status: Some(500),
        delay_ms: 0,
        drop: false,
        times: None,
    });
    let relay = Harness::spawn(
        Schedule {
            snapshot_interval: Duration::from_millis(100),
            ..schedule()
        },
        store,
    )
    .await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while relay.metrics.value("syncs", "error") < 2 {
        assert!(tokio::time::Instant::now() < deadline, "two failed syncs");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(relay.metrics.value("snapshots", ""), 0);
    assert_eq!(relay.stream.decoded(), vec![], "nothing written");
    relay.sim.with_store(lachesis_sim::Store::clear_faults);
    relay
        .wait_for("the first snapshot", |records| {
            records
                .iter()
                .any(|r| matches!(r, Record::Marker(m) if m.phase != lachesis_fleet::Phase::Start))
        })
        .await;
    let ports = relay
        .stream
        .decoded()
        .into_iter()
        .filter(|r| matches!(r, Record::Entry(e) if e.key.kind == Resource::Ports))
        .count();
    assert_eq!(ports, topology().ports.len());
    relay.stop().await;
}

#[tokio::test]
async fn a_notification_is_one_record_within_a_second_and_stale_payloads_are_dropped() {
    let mut relay = Harness::start(schedule()).await;
    relay
        .ctl(Method::POST, "ports", &new_port("p-new", 9))
        .await;
    let created = relay.next_event().await;
    let at = tokio::time::Instant::now();
    relay.deliver(&created);
    let api = relay.api(&port("p-new")).await.unwrap();
    let rev = api["revision_number"].as_u64().unwrap();
    let record = relay.wait_entry(&port("p-new"), |_| true).await;
    assert!(at.elapsed() < Duration::from_secs(1), "{:?}", at.elapsed());
    assert_eq!(record.rev, rev);
    assert_eq!(record.body, Some(lean(Resource::Ports, &api)));
    assert_eq!(relay.entries(&port("p-new")).len(), 1, "one record");
    assert_eq!(
        relay.metrics.value("gets", "ports"),
        0,
        "the payload sufficed"
    );

    // An update, then the create again (older) and the update again.
    relay
        .ctl(Method::PATCH, "ports/p-new", &json!({"device_id": "vm-b3"}))
        .await;
    let updated = relay.next_event().await;
    relay.deliver(&updated);
    relay.wait_entry(&port("p-new"), |e| e.rev > rev).await;
    relay.deliver(&created);
    relay.deliver(&updated);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while relay.metrics.value("payloads_dropped", "duplicate") == 0 {
        assert!(tokio::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(relay.metrics.value("payloads_dropped", "stale"), 1);
    assert_eq!(relay.metrics.value("payloads_dropped", "duplicate"), 1);
    assert_eq!(
        relay.entries(&port("p-new")).len(),
        2,
        "nothing more written"
    );
    relay.stop().await;
}

#[tokio::test]
async fn an_ids_only_router_interface_event_fetches_the_router_and_its_port() {
    let mut relay = Harness::start(schedule()).await;
    let router = Key::new(Resource::Routers, "router-admin");
    let before = relay.entries(&router)[0].rev;
    let added = relay
        .ctl(
            Method::POST,
            "routers/router-admin/interfaces",
            &json!({"subnet_id": "sub-b4", "mac_address": "fa:16:3e:00:ad:01", "ip_address": "10.2.0.77"}),
        )
        .await;
    let port_id = added["id"].as_str().unwrap().to_owned();
    loop {
        if relay.deliver_next().await == "router.interface.create" {
            break;
        }
    }
    let now = relay.api(&router).await.unwrap()["revision_number"]
        .as_u64()
        .unwrap();
    assert!(now > before);
    relay.wait_entry(&router, |e| e.rev == now).await;
    let interface = relay.wait_entry(&port(&port_id), |_| true).await;
    assert_eq!(
        interface.body.unwrap()["device_owner"],
        "network:router_interface"
    );
    assert_eq!(relay.metrics.value("gets", "routers"), 1);
    assert_eq!(relay.metrics.value("gets", "ports"), 1);
    relay.stop().await;
}

#[tokio::test]
async fn the_digest_heals_a_lost_notification_and_a_delete_without_one() {
    let mut relay = Harness::start(Schedule {
        digest_interval: Duration::from_secs(1),
        ..schedule()
    })
    .await;
    relay
        .ctl(Method::POST, "ports", &new_port("p-lost", 10))
        .await;
    // Lost on the way: never delivered.
    let _ = relay.next_event().await;
    let rev = relay.api(&port("p-lost")).await.unwrap()["revision_number"]
        .as_u64()
        .unwrap();
    relay.wait_entry(&port("p-lost"), |e| e.rev == rev).await;
    assert!(relay.metrics.value("repaired", "get") >= 1);

    // Deleted behind the relay's back: nothing notifies.
    relay
        .sim
        .with_store(|s| s.delete("ports", "p-lost"))
        .unwrap();
    let tombstone = relay
        .wait_entry(&port("p-lost"), lachesis_fleet::Entry::is_tombstone)
        .await;
    assert_eq!(tombstone.rev, rev, "at the revision held");
    assert!(relay.metrics.value("repaired", "tombstone") >= 1);
    assert!(relay.metrics.value("digests", "ok") >= 1);
    relay.stop().await;
}

/// The newest heartbeat's `checked_ms`.
fn last_checked(relay: &Harness) -> Option<u64> {
    relay
        .stream
        .decoded()
        .into_iter()
        .rev()
        .find_map(|r| match r {
            Record::Heartbeat(h) => Some(h.checked_ms),
            _ => None,
        })
}

fn heartbeats(relay: &Harness) -> usize {
    relay
        .stream
        .decoded()
        .iter()
        .filter(|r| matches!(r, Record::Heartbeat(_)))
        .count()
}

#[tokio::test]
async fn failures_of_openstack_or_the_stream_stop_nothing_and_lose_nothing() {
    let relay = Harness::start(Schedule {
        digest_interval: Duration::from_millis(200),
        heartbeat_interval: Duration::from_millis(100),
        ..schedule()
    })
    .await;
    relay
        .wait_for("a heartbeat", |_| last_checked(&relay).is_some())
        .await;
    relay.sim.with_store(|s| {
        s.add_fault(lachesis_sim::Fault {
            endpoint: "ports".into(),
            status: Some(500),
            delay_ms: 0,
            drop: false,
            times: None,
        });
    });
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while relay.metrics.value("digests", "error") == 0 {
        assert!(tokio::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Heartbeats go on, with the last good check's time.
    let stuck = last_checked(&relay).unwrap();
    let beats = heartbeats(&relay);
    relay
        .wait_for("three more heartbeats", |_| heartbeats(&relay) >= beats + 3)
        .await;
    assert_eq!(last_checked(&relay), Some(stuck));
    assert!(relay.metrics.value("openstack_errors", "") >= 1);

    // The stream refuses two batches: the records wait, none is lost.
    relay.stream.fail_next(2);
    relay.sim.with_store(lachesis_sim::Store::clear_faults);
    relay
        .wait_for("a heartbeat after a good check", |_| {
            last_checked(&relay).is_some_and(|c| c > stuck)
        })
        .await;
    assert_eq!(relay.metrics.value("publish_errors", ""), 2);
    relay.stop().await;
}

/// A stream down across several snapshot intervals: each new snapshot
/// supersedes what still waits (the relay holds at most one copy of the
/// cloud, not one more per interval), the heartbeat and snapshot counters
/// count only what the stream took, the heartbeat age rises; once the
/// stream is back, an agent reading it holds what OpenStack holds,
/// changes made during the outage included.
#[tokio::test]
async fn a_stream_down_for_many_snapshots_queues_one_and_loses_nothing() {
    let mut relay = Harness::start(Schedule {
        snapshot_interval: Duration::from_millis(200),
        heartbeat_interval: Duration::from_millis(50),
        ..schedule()
    })
    .await;
    relay
        .wait_for("a heartbeat", |records| {
            records.iter().any(|r| matches!(r, Record::Heartbeat(_)))
        })
        .await;
    relay.stream.fail_next(usize::MAX);
    let written = relay.stream.decoded().len();
    relay
        .ctl(Method::POST, "ports", &new_port("p-outage", 11))
        .await;
    assert_eq!(relay.deliver_next().await, "port.create.end");
    // Ten snapshot intervals, each queueing the whole cloud again.
    let live = cloud_records(&relay);
    let mut most = 0;
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        most = most.max(relay.metrics.value("pending_records", ""));
    }
    assert_eq!(
        relay.stream.decoded().len(),
        written,
        "the stream took nothing"
    );
    // One snapshot (its two markers and every live record) and what came
    // after it: heartbeats, at most one interval's.
    assert!(
        most <= live + 2 + 10,
        "at most one snapshot waits: {most} pending for {live} live records"
    );
    assert!(relay.metrics.value("publish_errors", "") >= 2);
    let age = heartbeat_age(&relay);
    assert!(
        age >= 1.0,
        "the heartbeat age rises while nothing is written: {age}"
    );

    relay.stream.fail_next(0);
    relay
        .wait_for("a snapshot written after the outage", |records| {
            records[written..]
                .iter()
                .any(|r| matches!(r, Record::Marker(m) if m.phase != lachesis_fleet::Phase::Start))
        })
        .await;
    let records = relay.stream.decoded();
    let mut agent = Assembler::new();
    for (offset, record) in records.iter().enumerate() {
        agent.feed(offset as u64, record, 0);
    }
    assert!(agent.ready());
    let pages = agent.state().pages();
    let held: BTreeSet<&str> = pages[&Resource::Ports]
        .iter()
        .filter_map(|p| p["id"].as_str())
        .collect();
    assert!(
        held.contains("p-outage"),
        "the change made during the outage"
    );
    assert_eq!(held.len(), topology().ports.len() + 1);
    // The counters count what the stream took.
    let beats = records
        .iter()
        .filter(|r| matches!(r, Record::Heartbeat(_)))
        .count();
    let ends = records
        .iter()
        .filter(|r| matches!(r, Record::Marker(m) if m.phase != lachesis_fleet::Phase::Start))
        .count();
    assert_eq!(relay.metrics.value("heartbeats", "") as usize, beats);
    assert_eq!(relay.metrics.value("snapshots", "") as usize, ends);
    relay
        .wait_for("a heartbeat after the outage", |r| {
            r[written..]
                .iter()
                .any(|r| matches!(r, Record::Heartbeat(_)))
        })
        .await;
    assert!(
        heartbeat_age(&relay) < age,
        "the age fell once heartbeats were written"
    );
    relay.stop().await;
}

/// Live resources in the relay's first snapshot (its end marker's count).
fn cloud_records(relay: &Harness) -> u64 {
    relay
        .stream
        .decoded()
        .iter()
        .find_map(|r| match r {
            Record::Marker(m) => match m.phase {
                lachesis_fleet::Phase::End { records } => Some(records),
                lachesis_fleet::Phase::Start => None,
            },
            _ => None,
        })
        .expect("the first snapshot was written")
}

/// `lachesis_relay_heartbeat_age_seconds` as the relay serves it.
fn heartbeat_age(relay: &Harness) -> f64 {
    let text = lachesis_relay::serve::render(&relay.metrics);
    text.lines()
        .find_map(|l| l.strip_prefix("lachesis_relay_heartbeat_age_seconds "))
        .expect("the family is rendered")
        .parse()
        .expect("a number")
}

/// What the relay serves on /metrics is docs/metrics.md's "Relay" section,
/// family for family: type, labels, owner; nothing more, nothing less.
#[test]
fn the_relay_s_families_are_the_documented_ones() {
    use lachesis_lab::catalogue;
    let text = lachesis_relay::serve::render(&lachesis_relay::RelayMetrics::default());
    let rendered = catalogue::rendered(&text, "relay");
    catalogue::assert_documented(&rendered);
    for (name, family) in catalogue::documented() {
        if family.owner == "relay" {
            assert!(
                rendered.contains_key(&name),
                "{name} is documented, not rendered"
            );
        }
    }
    assert_eq!(rendered.len(), 13);
}
