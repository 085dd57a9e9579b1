use lachesis_planner::Resource;
use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::record::{Entry, Heartbeat, Marker, Phase, Record};

fn port(id: &str, rev: u64) -> Record {
    Record::Entry(Entry::live(
        Resource::Ports,
        id,
        rev,
        &json!({"id": id, "revision_number": rev}),
    ))
}

fn snap(id: &str, rev: u64, snapshot: &str) -> Record {
    let Record::Entry(e) = port(id, rev) else {
        unreachable!()
    };
    Record::Entry(e.in_snapshot(snapshot))
}

fn tomb(id: &str, rev: u64) -> Record {
    Record::Entry(Entry::tombstone(Resource::Ports, id, rev))
}

fn start(relay: &str, snapshot: &str) -> Record {
    Record::Marker(Marker {
        relay: relay.into(),
        snapshot: snapshot.into(),
        phase: Phase::Start,
    })
}

fn end(relay: &str, snapshot: &str, records: u64) -> Record {
    Record::Marker(Marker {
        relay: relay.into(),
        snapshot: snapshot.into(),
        phase: Phase::End { records },
    })
}

fn heartbeat(relay: &str, at_ms: u64) -> Record {
    Record::Heartbeat(Heartbeat {
        relay: relay.into(),
        at_ms,
        checked_ms: at_ms - 5,
        digest: "0".into(),
        records: 0,
        snapshot: None,
    })
}

/// Feeds `records` at offsets 0, 1, …; returns what each gave.
fn feed(a: &mut Assembler, records: &[Record]) -> Vec<Fed> {
    let first = a.offset().map_or(0, |o| o + 1);
    (first..)
        .zip(records)
        .map(|(offset, r)| a.feed(offset, r, 1_000))
        .collect()
}

/// The live port ids and their revisions.
fn ports(a: &Assembler) -> Vec<(String, u64)> {
    a.state()
        .iter()
        .filter(|(_, h)| h.body.is_some())
        .map(|(k, h)| (k.id.clone(), h.rev))
        .collect()
}

fn ids(list: &[(&str, u64)]) -> Vec<(String, u64)> {
    list.iter().map(|(i, r)| ((*i).to_owned(), *r)).collect()
}

#[test]
fn nothing_before_the_first_start_and_ready_on_a_matching_end() {
    use Fed::{Complete, Entry, Heartbeat, Ignored, Started};
    let mut a = Assembler::new();
    let fed = feed(
        &mut a,
        &[
            port("p0", 1),
            end("r1", "s0", 1),
            heartbeat("r1", 100),
            start("r1", "s1"),
            snap("p1", 1, "s1"),
            port("p2", 4),
            snap("p2", 3, "s1"),
            end("r1", "s1", 2),
        ],
    );
    assert_eq!(
        fed,
        [
            Ignored,
            Ignored,
            Heartbeat,
            Started,
            Entry(Outcome::Applied),
            Entry(Outcome::Applied),
            Entry(Outcome::Stale),
            Complete { removed: 0 },
        ]
    );
    assert!(a.ready());
    assert_eq!(ports(&a), ids(&[("p1", 1), ("p2", 4)]));
    let c = a.counts();
    assert_eq!((c.ignored, c.stale, c.complete, c.incomplete), (2, 1, 1, 0));
    assert_eq!(a.heartbeats()["r1"].checked_ms, 95);
}

#[test]
fn a_snapshot_whose_count_does_not_match_is_incomplete_and_the_next_one_counts() {
    let mut a = Assembler::new();
    let fed = feed(
        &mut a,
        &[
            start("r1", "s1"),
            snap("p1", 1, "s1"),
            end("r1", "s1", 2),
            start("r1", "s2"),
            snap("p1", 1, "s2"),
            // A publisher's retry: the same record twice is one record.
            snap("p2", 1, "s2"),
            snap("p2", 1, "s2"),
        ],
    );
    assert_eq!(fed[2], Fed::Incomplete);
    assert!(!a.ready());
    assert_eq!(
        feed(&mut a, &[end("r1", "s2", 2)]),
        [Fed::Complete { removed: 0 }]
    );
    assert!(a.ready());
    let c = a.counts();
    assert_eq!((c.incomplete, c.complete, c.duplicate), (1, 1, 2));
}

#[test]
fn a_start_replacing_an_unfinished_snapshot_and_a_foreign_end() {
    let mut a = Assembler::new();
    let fed = feed(
        &mut a,
        &[
            start("r1", "s1"),
            snap("p1", 1, "s1"),
            // The relay restarted: s1 never ends.
            start("r1", "s2"),
            end("r1", "s1", 1),
            snap("p1", 1, "s2"),
            end("r1", "s2", 1),
        ],
    );
    assert_eq!(fed[3], Fed::Ignored);
    assert_eq!(fed[5], Fed::Complete { removed: 0 });
    assert_eq!(a.counts().incomplete, 1);
}

#[test]
fn a_later_complete_snapshot_removes_what_it_does_not_hold_and_nothing_written_since() {
    let mut a = Assembler::new();
    feed(
        &mut a,
        &[
            start("r1", "s1"),
            snap("gone", 1, "s1"),
            snap("kept", 1, "s1"),
            snap("tombstoned", 1, "s1"),
            end("r1", "s1", 3),
            tomb("tombstoned", 1),
            // The relay's next snapshot no longer holds `gone`: its
            // tombstone was lost.
            start("r1", "s2"),
            snap("kept", 1, "s2"),
            // Created after s2 started: not in it, written after.
            port("new", 1),
            // Deleted after s2 started: the tombstone stays.
            tomb("kept2", 1),
        ],
    );
    assert_eq!(ports(&a), ids(&[("gone", 1), ("kept", 1), ("new", 1)]));
    // Two go: `gone` (a lost tombstone healed) and the tombstone of
    // `tombstoned`, which the snapshot supersedes.
    assert_eq!(
        feed(&mut a, &[end("r1", "s2", 1)]),
        [Fed::Complete { removed: 2 }]
    );
    assert_eq!(ports(&a), ids(&[("kept", 1), ("new", 1)]));
    assert!(a
        .state()
        .get(&Key::new(Resource::Ports, "tombstoned"))
        .is_none());
    assert!(a
        .state()
        .get(&Key::new(Resource::Ports, "kept2"))
        .is_some_and(|h| h.body.is_none()));
}

#[test]
fn an_incomplete_snapshot_removes_nothing() {
    let mut a = Assembler::new();
    feed(
        &mut a,
        &[
            start("r1", "s1"),
            snap("p1", 1, "s1"),
            end("r1", "s1", 1),
            start("r1", "s2"),
            end("r1", "s2", 1),
        ],
    );
    assert_eq!(ports(&a), ids(&[("p1", 1)]));
}

#[test]
fn offsets_already_read_are_replays() {
    let mut a = Assembler::new();
    feed(&mut a, &[start("r1", "s1"), port("p1", 1)]);
    assert_eq!(a.feed(1, &port("p1", 1), 0), Fed::Replayed);
    assert_eq!(a.feed(0, &start("r1", "s1"), 0), Fed::Replayed);
    assert_eq!(a.counts().replayed, 2);
    assert_eq!(a.offset(), Some(1));
}

#[test]
fn the_newest_heartbeat_of_each_relay_is_kept() {
    let mut a = Assembler::new();
    feed(
        &mut a,
        &[
            heartbeat("r1", 200),
            heartbeat("r2", 50),
            heartbeat("r1", 100),
        ],
    );
    let at: Vec<(&str, u64)> = a
        .heartbeats()
        .iter()
        .map(|(r, h)| (r.as_str(), h.at_ms))
        .collect();
    assert_eq!(at, [("r1", 200), ("r2", 50)]);
}

/// One relay's writes over a scenario both relays observe alike: a
/// snapshot of the cloud as it was, the live changes, a second snapshot of
/// the cloud as it became.
fn relay(name: &str) -> Vec<Record> {
    let s1 = format!("{name}-1");
    let s2 = format!("{name}-2");
    vec![
        start(name, &s1),
        snap("a", 1, &s1),
        snap("b", 1, &s1),
        snap("c", 2, &s1),
        end(name, &s1, 3),
        port("a", 2),
        tomb("b", 1),
        port("d", 1),
        port("c", 3),
        heartbeat(name, 10),
        start(name, &s2),
        snap("a", 2, &s2),
        snap("c", 3, &s2),
        snap("d", 1, &s2),
        end(name, &s2, 3),
        // After its last snapshot.
        port("e", 1),
    ]
}

/// The cloud at the end: what either relay alone gives.
fn truth() -> Vec<(String, u64)> {
    ids(&[("a", 2), ("c", 3), ("d", 1), ("e", 1)])
}

#[test]
fn two_relays_in_turn_or_interleaved_give_the_cloud() {
    let (r1, r2) = (relay("r1"), relay("r2"));
    let merges: [Vec<Record>; 3] = [
        r1.iter().chain(&r2).cloned().collect(),
        r2.iter().chain(&r1).cloned().collect(),
        r1.iter()
            .zip(&r2)
            .flat_map(|(x, y)| [x.clone(), y.clone()])
            .collect(),
    ];
    for (n, stream) in merges.iter().enumerate() {
        let mut a = Assembler::new();
        feed(&mut a, stream);
        assert!(a.ready(), "merge {n}");
        assert_eq!(ports(&a), truth(), "merge {n}");
        assert_eq!(a.counts().incomplete, 0, "merge {n}");
    }
}

/// A merge of two sequences that keeps each one's order: `left[i]` says
/// whether the next record comes from the first.
fn merge(first: &[Record], second: &[Record], left: &[bool]) -> Vec<Record> {
    let mut first = first.iter().peekable();
    let mut second = second.iter().peekable();
    let mut out = Vec::new();
    for &from_first in left.iter().chain(std::iter::repeat(&true)) {
        let next = match (first.peek(), second.peek()) {
            (None, None) => break,
            (Some(_), Some(_)) if from_first => first.next(),
            (_, Some(_)) => second.next(),
            (Some(_), None) => first.next(),
        };
        out.extend(next.cloned());
    }
    out
}

proptest! {
    /// However the two relays' writes interleave, and from whichever
    /// record an agent starts reading up to the first relay's first
    /// snapshot, the state at the end is the cloud's.
    #[test]
    fn any_interleaving_of_two_relays_gives_the_cloud(
        left in prop::collection::vec(any::<bool>(), 0..40),
        skip in 0usize..2,
    ) {
        let stream = merge(&relay("r1"), &relay("r2"), &left);
        let mut a = Assembler::new();
        feed(&mut a, &stream[skip..]);
        prop_assert!(a.ready());
        prop_assert_eq!(ports(&a), truth());
    }
}
