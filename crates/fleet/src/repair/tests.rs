use lachesis_planner::Resource;
use serde_json::json;

use super::*;
use crate::record::Entry;

fn port(id: &str, rev: u64) -> Entry {
    Entry::live(
        Resource::Ports,
        id,
        rev,
        &json!({"id": id, "revision_number": rev}),
    )
}

/// The relay's state: what it applied, and when.
fn state() -> State {
    let mut s = State::new();
    for (entry, at) in [
        (port("same", 3), 10),
        (port("older", 2), 10),
        (port("newer", 9), 10),
        (port("vanished", 4), 10),
        (port("created-while-listing", 1), 500),
        (Entry::tombstone(Resource::Ports, "deleted", 5), 10),
        (Entry::tombstone(Resource::Ports, "recreated", 1), 10),
        (
            Entry::live(Resource::Networks, "net", 1, &json!({"id": "net"})),
            10,
        ),
    ] {
        s.apply(&entry, at);
    }
    s
}

#[test]
fn a_digest_gets_what_differs_and_tombstones_what_vanished() {
    let listed: Vec<(String, u64)> = [
        ("same", 3),
        ("older", 5),
        ("newer", 8),
        ("deleted", 5),
        ("recreated", 2),
        ("unseen", 1),
    ]
    .iter()
    .map(|(i, r)| ((*i).to_owned(), *r))
    .collect();
    let got = repair(Resource::Ports, &listed, &state(), 100);
    assert_eq!(got.get, ["older", "recreated", "unseen"]);
    assert_eq!(
        got.tombstones,
        [Entry::tombstone(Resource::Ports, "vanished", 4)]
    );
}

#[test]
fn an_empty_list_tombstones_every_live_resource_of_its_kind_only() {
    let got = repair(Resource::Networks, &[], &state(), 100);
    assert!(got.get.is_empty());
    assert_eq!(
        got.tombstones,
        [Entry::tombstone(Resource::Networks, "net", 1)]
    );
    // Listed later than everything: the port applied at 500 goes too.
    let ports = vanished(Resource::Ports, ["same"], &state(), 1_000);
    let ids: Vec<&str> = ports.iter().map(|e| e.key.id.as_str()).collect();
    assert_eq!(ids, ["created-while-listing", "newer", "older", "vanished"]);
}
