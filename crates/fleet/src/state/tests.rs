use lachesis_planner::Resource;
use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;
use crate::record::Entry;

fn port(id: &str, rev: u64, mac: &str) -> Entry {
    Entry::live(
        Resource::Ports,
        id,
        rev,
        &json!({"id": id, "mac_address": mac, "revision_number": rev}),
    )
}

fn tomb(id: &str, rev: u64) -> Entry {
    Entry::tombstone(Resource::Ports, id, rev)
}

#[test]
fn the_guard_keeps_the_newest_and_a_delete_beats_its_own_revision() {
    use Outcome::{Applied, Duplicate, Stale};
    // What is held first, the record, its outcome, what is held after
    // (rev, live?).
    type Case = (&'static str, Option<Entry>, Entry, Outcome, (u64, bool));
    #[rustfmt::skip]
    let cases: [Case; 13] = [
        ("new key", None, port("p", 3, "a"), Applied, (3, true)),
        ("newer", Some(port("p", 3, "a")), port("p", 4, "b"), Applied, (4, true)),
        ("older", Some(port("p", 3, "a")), port("p", 2, "b"), Stale, (3, true)),
        ("same", Some(port("p", 3, "a")), port("p", 3, "a"), Duplicate, (3, true)),
        ("same rev, other content", Some(port("p", 3, "a")), port("p", 3, "b"), Stale, (3, true)),
        ("tombstone, new key", None, tomb("p", 3), Applied, (3, false)),
        ("tombstone, same rev", Some(port("p", 3, "a")), tomb("p", 3), Applied, (3, false)),
        ("tombstone, newer", Some(port("p", 3, "a")), tomb("p", 9), Applied, (9, false)),
        ("tombstone, older", Some(port("p", 3, "a")), tomb("p", 2), Stale, (3, true)),
        ("tombstone twice", Some(tomb("p", 3)), tomb("p", 3), Duplicate, (3, false)),
        ("older tombstone", Some(tomb("p", 3)), tomb("p", 2), Stale, (3, false)),
        ("resource at the tombstone's rev", Some(tomb("p", 3)), port("p", 3, "a"), Stale, (3, false)),
        ("resource past the tombstone", Some(tomb("p", 3)), port("p", 4, "a"), Applied, (4, true)),
    ];
    for (what, first, record, want, (rev, live)) in cases {
        let mut state = State::new();
        if let Some(first) = first {
            assert_eq!(state.apply(&first, 1), Outcome::Applied, "{what}");
        }
        assert_eq!(state.apply(&record, 2), want, "{what}");
        let held = state.get(&record.key).unwrap();
        assert_eq!((held.rev, held.body.is_some()), (rev, live), "{what}");
        assert_eq!(held.at_ms, if want == Applied { 2 } else { 1 }, "{what}");
    }
}

#[test]
fn pages_are_sorted_by_id_per_list_and_leave_tombstones_out() {
    let mut state = State::new();
    for e in [
        port("p3", 1, "c"),
        port("p1", 1, "a"),
        tomb("p2", 5),
        Entry::live(
            Resource::Projects,
            "t1",
            10,
            &json!({"id": "t1", "name": "x"}),
        ),
    ] {
        state.apply(&e, 0);
    }
    let pages = state.pages();
    assert_eq!(pages.len(), Resource::ALL.len());
    let ids: Vec<&str> = pages[&Resource::Ports]
        .iter()
        .map(|b| b["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["p1", "p3"]);
    assert_eq!(
        pages[&Resource::Projects],
        [json!({"id": "t1", "name": "x"})]
    );
    assert!(pages[&Resource::Networks].is_empty());
    let counts = state.counts();
    assert_eq!(
        counts[&Resource::Ports],
        KindCount {
            live: 2,
            tombstones: 1
        }
    );
    assert_eq!(counts[&Resource::Projects].live, 1);
    assert_eq!(state.live(), 3);
}

#[test]
fn the_digest_is_fnv1a_over_live_keys_and_revisions() {
    let mut state = State::new();
    // FNV-1a's offset basis: the digest of nothing.
    assert_eq!(state.digest(), "cbf29ce484222325");
    // FNV-1a 64 of "ports/p1\n7\n", computed independently.
    state.apply(&port("p1", 7, "a"), 0);
    assert_eq!(state.digest(), fnv(b"ports/p1\n7\n"));
    let one = state.digest();
    // A tombstone is no part of it; a revision and a key are.
    state.apply(&tomb("p9", 1), 0);
    assert_eq!(state.digest(), one);
    state.apply(&port("p1", 8, "a"), 0);
    assert_ne!(state.digest(), one);
    // The body is not part of it: the revision stands for it.
    let mut other = State::new();
    other.apply(&port("p1", 8, "zzz"), 0);
    assert_eq!(other.digest(), state.digest());
}

/// A second, plain FNV-1a 64 for the test's expectation.
fn fnv(bytes: &[u8]) -> String {
    let mut h: u64 = 14_695_981_039_346_656_037;
    for b in bytes {
        h = (h ^ u64::from(*b)).wrapping_mul(1_099_511_628_211);
    }
    format!("{h:016x}")
}

#[test]
fn tombstones_are_pruned_by_age_resources_never() {
    let mut state = State::new();
    state.apply(&port("p1", 1, "a"), 10);
    state.apply(&tomb("p2", 1), 10);
    state.apply(&tomb("p3", 1), 20);
    assert_eq!(state.prune_tombstones(20), 1);
    assert!(state.get(&Key::new(Resource::Ports, "p2")).is_none());
    assert!(state.get(&Key::new(Resource::Ports, "p3")).is_some());
    assert_eq!(state.prune_tombstones(u64::MAX), 1);
    assert_eq!(state.live(), 1);
}

#[test]
fn differs_compares_lean_content_with_the_live_body() {
    let mut state = State::new();
    let key = Key::new(Resource::Servers, "s1");
    let body = json!({"id": "s1", "name": "vm"});
    assert!(state.differs(&key, &body));
    state.apply(&Entry::live(Resource::Servers, "s1", 100, &body), 0);
    assert!(!state.differs(&key, &body));
    assert!(state.differs(&key, &json!({"id": "s1", "name": "vm2"})));
    state.apply(&Entry::tombstone(Resource::Servers, "s1", 200), 0);
    assert!(state.differs(&key, &body));
}

/// One resource's history: its revisions (rising) and maybe a delete.
#[derive(Debug, Clone)]
struct History {
    kind: Resource,
    id: String,
    revs: Vec<u64>,
    /// Whether it ends deleted, and the delete's revision offset from the
    /// last one (0: the resource as it was; more: the held one is newer).
    delete: Option<u64>,
}

impl History {
    fn records(&self) -> Vec<Entry> {
        let mut out: Vec<Entry> = self
            .revs
            .iter()
            .map(|&rev| {
                let body = json!({"id": self.id, "revision_number": rev, "n": rev * 3});
                Entry::live(self.kind, self.id.clone(), rev, &body)
            })
            .collect();
        if let Some(extra) = self.delete {
            let last = self.revs.last().copied().unwrap_or(0);
            out.push(Entry::tombstone(self.kind, self.id.clone(), last + extra));
        }
        out
    }
}

fn history() -> impl Strategy<Value = History> {
    (
        prop::sample::select(&[Resource::Ports, Resource::Networks, Resource::Servers][..]),
        0u8..6,
        prop::collection::btree_set(1u64..50, 1..5),
        prop::option::of(0u64..3),
    )
        .prop_map(|(kind, id, revs, delete)| History {
            kind,
            id: format!("r{id}"),
            revs: revs.into_iter().collect(),
            delete,
        })
}

/// The histories' records in revision order, each once.
fn in_order(histories: &[History]) -> Vec<Entry> {
    histories.iter().flat_map(History::records).collect()
}

/// `histories` with one per key (two with one key would be one history).
fn distinct(mut histories: Vec<History>) -> Vec<History> {
    histories.sort_by(|a, b| (a.kind, &a.id).cmp(&(b.kind, &b.id)));
    histories.dedup_by(|a, b| (a.kind, &a.id) == (b.kind, &b.id));
    histories
}

fn result(records: &[Entry]) -> (BTreeMap<Resource, Vec<Value>>, String) {
    let mut state = State::new();
    for r in records {
        state.apply(r, 0);
    }
    (state.pages(), state.digest())
}

/// Records in revision order, and a stream of them: each at least once,
/// some several times, in any order.
fn ordered_and_stream() -> impl Strategy<Value = (Vec<Entry>, Vec<Entry>)> {
    prop::collection::vec(history(), 0..8)
        .prop_map(|h| in_order(&distinct(h)))
        .prop_flat_map(|ordered| {
            let extra = if ordered.is_empty() {
                Just(Vec::new()).boxed()
            } else {
                prop::collection::vec(prop::sample::select(ordered.clone()), 0..40).boxed()
            };
            let base = ordered.clone();
            let stream = extra
                .prop_map(move |mut more| {
                    more.extend(base.iter().cloned());
                    more
                })
                .prop_shuffle();
            (Just(ordered), stream)
        })
}

proptest! {
    /// Any interleaving, duplication and reordering of the records gives
    /// what applying them once in revision order gives.
    #[test]
    fn order_and_duplicates_do_not_matter((ordered, stream) in ordered_and_stream()) {
        prop_assert_eq!(result(&stream), result(&ordered));
    }
}

#[test]
fn pages_feed_the_planners_parser() {
    let mut state = State::new();
    let net = json!({"id": "n1", "name": "n", "project_id": "t1", "revision_number": 1});
    let port = json!({"id": "p1", "network_id": "n1", "project_id": "t1",
        "mac_address": "fa:16:3e:00:00:01", "device_id": "vm1", "device_owner": "compute:nova",
        "fixed_ips": [], "revision_number": 2, "status": "ACTIVE"});
    state.apply(&Entry::live(Resource::Networks, "n1", 1, &net), 0);
    state.apply(&Entry::live(Resource::Ports, "p1", 2, &port), 0);
    let mut parser = lachesis_planner::SnapshotParser::new();
    for (resource, bodies) in state.pages() {
        parser.page(resource, &bodies);
    }
    let (snapshot, _) = parser.finish(lachesis_planner::Sources::default());
    assert_eq!(snapshot.networks.len(), 1);
    assert_eq!(snapshot.ports.len(), 1);
    assert_eq!(snapshot.ports[0].id, "p1");
}
