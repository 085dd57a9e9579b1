//! Relay mode's source (DESIGN §17): the example cloud, published as a
//! relay publishes it (one record per resource, cut with `lean`, its
//! revision from `revision_of`, between snapshot markers), plans exactly
//! as a direct sync of the same cloud does; before a complete snapshot it
//! refuses with `NotReady`, which boot treats as a failed first sync. A
//! source that parses only what changed since its last pass plans, after
//! any sequence of records, what a source parsing everything plans.

use std::collections::BTreeSet;

use lachesis_fleet::{revision_of, Entry, Marker, Phase, Record};
use lachesis_planner::{PlanOptions, Resource};
use proptest::prelude::*;
use serde_json::Value;

use super::super::{MetadataSource, RelaySource, SharedAssembler, SyncError};
use super::source::{client, source};

/// When the relay observed the lists without `revision_number`.
const OBSERVED_MS: u64 = 1_700_000_000_000;

fn marker(phase: Phase) -> Record {
    marker_of("snap-1", phase)
}

fn marker_of(snapshot: &str, phase: Phase) -> Record {
    Record::Marker(Marker {
        relay: "relay-1".into(),
        snapshot: snapshot.into(),
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
        for item in bodies.items(kind).unwrap_or_default() {
            let id = item["id"].as_str().expect("every resource has an id");
            let rev = revision_of(kind, item, OBSERVED_MS).expect("Neutron's carry one");
            entries.push(Record::Entry(
                Entry::live(kind, id, rev, item).in_snapshot("snap-1"),
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

/// One step of the property below.
#[derive(Debug, Clone)]
enum Step {
    /// Entry `at` of the cloud again, at its revision + `rev`, in one of a
    /// few forms.
    Put { at: usize, rev: u64, form: u8 },
    /// Entry `at` deleted at its revision + `rev`.
    Delete { at: usize, rev: u64 },
    /// A new snapshot holding the entries `keep` says yes to, as they first
    /// were, at their revision + 3: the others go.
    Snapshot { keep: Vec<bool> },
    /// A pass.
    Sync,
}

fn step(entries: usize) -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..entries, 0u64..4, 0u8..4).prop_map(|(at, rev, form)| Step::Put { at, rev, form }),
        2 => (0..entries, 0u64..4).prop_map(|(at, rev)| Step::Delete { at, rev }),
        1 => prop::collection::vec(prop::bool::weighted(0.9), entries)
            .prop_map(|keep| Step::Snapshot { keep }),
        3 => Just(Step::Sync),
    ]
}

/// Entry `entry` in form `form`: as it was, renamed, without the fields a
/// port or a subnet cannot do without (dropped whole by the parser), or
/// without its addresses.
fn form(entry: &Entry, form: u8) -> Value {
    let mut body = entry.body.clone().expect("the snapshot's entries are live");
    let obj = body.as_object_mut().expect("an object");
    match form {
        0 => {}
        1 => {
            obj.insert(
                "name".into(),
                Value::String(format!("renamed-{}", entry.rev)),
            );
        }
        2 => {
            obj.remove("network_id");
            obj.remove("name");
        }
        _ => {
            obj.insert("fixed_ips".into(), Value::Array(Vec::new()));
        }
    }
    body
}

/// What a pass of `incremental` and one of a source that has parsed
/// nothing yet give, on the same state: equal.
async fn same_as_fresh(
    incremental: &RelaySource,
    previous: Option<std::sync::Arc<lachesis_planner::Plan>>,
) -> Result<std::sync::Arc<lachesis_planner::Plan>, TestCaseError> {
    let options = PlanOptions::default();
    let got = incremental.sync(previous.clone(), options).await.unwrap();
    let fresh = RelaySource::new(incremental.shared().clone())
        .sync(previous, options)
        .await
        .unwrap();
    prop_assert_eq!(&*got.plan, &*fresh.plan);
    prop_assert_eq!(&got.projects, &fresh.projects);
    prop_assert_eq!(&got.servers, &fresh.servers);
    prop_assert_eq!(got.skipped, fresh.skipped);
    prop_assert_eq!(&*got.topology, &*fresh.topology);
    Ok(got.plan)
}

#[test]
fn a_source_parsing_only_what_changed_plans_what_a_fresh_one_does() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let records = runtime.block_on(snapshot_records());
    let entries: Vec<Entry> = records
        .iter()
        .filter_map(|r| match r {
            Record::Entry(e) => Some(e.clone()),
            _ => None,
        })
        .collect();
    let n = entries.len();
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    proptest!(ProptestConfig::with_cases(cases), |(steps in prop::collection::vec(step(n), 1..30))| {
        runtime.block_on(async {
            let shared = SharedAssembler::new();
            feed(&shared, &records);
            let source = RelaySource::new(shared.clone());
            let mut previous = Some(same_as_fresh(&source, None).await?);
            for (i, step) in steps.into_iter().enumerate() {
                match step {
                    Step::Put { at, rev, form: f } => {
                        let e = &entries[at];
                        let body = form(e, f);
                        let put = Entry::live(e.key.kind, e.key.id.clone(), e.rev + rev, &body);
                        feed(&shared, &[Record::Entry(put)]);
                    }
                    Step::Delete { at, rev } => {
                        let e = &entries[at];
                        let gone = Entry::tombstone(e.key.kind, e.key.id.clone(), e.rev + rev);
                        feed(&shared, &[Record::Entry(gone)]);
                    }
                    Step::Snapshot { keep } => {
                        let name = format!("snap-{}", i + 2);
                        let kept: Vec<Record> = entries
                            .iter()
                            .zip(&keep)
                            .filter(|(_, k)| **k)
                            .map(|(e, _)| {
                                let again = Entry::live(e.key.kind, e.key.id.clone(), e.rev + 3, &form(e, 0));
                                Record::Entry(again.in_snapshot(name.clone()))
                            })
                            .collect();
                        let count = kept.len() as u64;
                        let mut all = vec![marker_of(&name, Phase::Start)];
                        all.extend(kept);
                        all.push(marker_of(&name, Phase::End { records: count }));
                        feed(&shared, &all);
                    }
                    Step::Sync => previous = Some(same_as_fresh(&source, previous.clone()).await?),
                }
            }
            same_as_fresh(&source, previous).await?;
            Ok::<(), TestCaseError>(())
        })?;
    });
}
