//! Relay mode's source (DESIGN §17): the example cloud, published as a
//! relay publishes it (one record per resource, cut with `lean`, its
//! revision from `revision_of`, between snapshot markers), plans exactly
//! as a direct sync of the same cloud does; before a complete snapshot it
//! refuses with `NotReady`, which boot treats as a failed first sync.

use std::collections::BTreeSet;

use lachesis_fleet::{revision_of, Entry, Marker, Phase, Record};
use lachesis_planner::{PlanOptions, Resource};
use serde_json::Value;

use super::super::{MetadataSource, RelaySource, SharedAssembler, SyncError};
use super::source::{client, source};

/// When the relay observed the lists without `revision_number`.
const OBSERVED_MS: u64 = 1_700_000_000_000;

fn marker(phase: Phase) -> Record {
    Record::Marker(Marker {
        relay: "relay-1".into(),
        snapshot: "snap-1".into(),
        phase,
    })
}

/// The records of one snapshot of the simulator's cloud, as a relay
/// writes them: start, every resource of every list, end.
async fn snapshot_records() -> Vec<Record> {
    let (_sim, client) = client().await;
    let bodies = client.sync().await.unwrap().bodies;
    let mut entries = Vec::new();
    for kind in Resource::ALL {
        let items = bodies
            .body(kind)
            .and_then(|b| b.get(kind.collection()))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for item in items {
            let id = item["id"].as_str().expect("every resource has an id");
            let rev = revision_of(kind, &item, OBSERVED_MS).expect("Neutron's carry one");
            entries.push(Record::Entry(
                Entry::live(kind, id, rev, &item).in_snapshot("snap-1"),
            ));
        }
    }
    let records = entries.len() as u64;
    let mut out = vec![marker(Phase::Start)];
    out.extend(entries);
    out.push(marker(Phase::End { records }));
    out
}

fn feed(shared: &SharedAssembler, records: &[Record]) {
    shared.with(|a| {
        let from = a.offset().map_or(0, |o| o + 1);
        for (offset, record) in (from..).zip(records) {
            a.feed(offset, record, OBSERVED_MS);
        }
    });
}

#[tokio::test]
async fn the_relayed_cloud_plans_as_the_direct_sync_does() {
    let records = snapshot_records().await;
    let shared = SharedAssembler::new();
    feed(&shared, &records);
    assert!(shared.is_ready());
    let relayed = RelaySource::new(shared)
        .sync(None, PlanOptions::default())
        .await
        .unwrap();
    let (_sim, direct) = source().await;
    let direct = direct.sync(None, PlanOptions::default()).await.unwrap();
    assert!(!direct.plan.bindings.is_empty(), "the example binds VMs");
    assert_eq!(*relayed.plan, *direct.plan);
    let set = |v: &[super::super::Named]| v.iter().cloned().collect::<BTreeSet<_>>();
    assert_eq!(set(&relayed.projects), set(&direct.projects));
    assert_eq!(
        set(relayed.servers.as_deref().unwrap()),
        set(direct.servers.as_deref().unwrap())
    );
    assert_eq!(relayed.skipped, direct.skipped);
    assert_eq!(*relayed.topology, *direct.topology);
}

#[tokio::test]
async fn not_ready_until_a_snapshot_is_complete() {
    let records = snapshot_records().await;
    let source = RelaySource::new(SharedAssembler::new());
    let not_ready = |r: Result<_, SyncError>| matches!(r, Err(SyncError::NotReady(_)));
    // Nothing read; then everything but the end marker.
    assert!(not_ready(source.sync(None, PlanOptions::default()).await));
    let (body, end) = records.split_at(records.len() - 1);
    feed(source.shared(), body);
    assert!(!source.shared().is_ready());
    assert!(not_ready(source.sync(None, PlanOptions::default()).await));
    // An end that counts one record more than were read: incomplete.
    let Record::Marker(Marker {
        phase: Phase::End { records: n },
        ..
    }) = &end[0]
    else {
        panic!("the last record is the end marker")
    };
    feed(source.shared(), &[marker(Phase::End { records: n + 1 })]);
    assert!(not_ready(source.sync(None, PlanOptions::default()).await));
    // The next snapshot, whole, makes it ready; the wait ends.
    let ready = source.shared().clone();
    let waiter = tokio::spawn(async move { ready.ready().await });
    feed(source.shared(), &records);
    waiter.await.unwrap();
    let synced = source.sync(None, PlanOptions::default()).await.unwrap();
    assert!(!synced.plan.bindings.is_empty());
}
