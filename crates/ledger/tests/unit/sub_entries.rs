//! `flows` keyed by (flow key, CPU) (DESIGN §4.7): one row per flow key,
//! one baseline per kernel sub-entry, and the upgrade from the per-CPU
//! layout's folded entries and schema-3 state file.

use crate::common;

use std::fs;

use common::{key, mac, parse, reading, render, value, world, Rig};
use lachesis_abi::{Direction::*, EntryKey, FlowCounters, L4Class::*, Zone::*, FOLDED_CPU};
use lachesis_ledger::state::{self, StatePaths};

const SEC: u64 = 1_000_000_000;

fn tenant_tx(l: &Rig, attr: &lachesis_ledger::memory::MemoryAttribution) -> Option<u64> {
    value(
        &parse(&render(l, attr)),
        "lachesis_tenant_bytes_total",
        &[
            ("tenant_id", "t-a"),
            ("zone", "external"),
            ("external_network", "public"),
            ("direction", "tx"),
        ],
    )
}

fn at(k: lachesis_abi::FlowKey, cpu: u16, r: FlowCounters) -> (EntryKey, FlowCounters) {
    (EntryKey::new(k, cpu), r)
}

/// A CPU's first packet of a flow is a new sub-entry of the row: only its
/// own bytes are new. The per-CPU layout's rule (sum the slots, keep the
/// largest `created_ns`) would read it as a new entry of the whole key and
/// bill every other CPU's bytes again.
#[test]
fn a_new_cpu_adds_its_own_bytes_and_nothing_else() {
    let attr = world();
    let l = Rig::default();
    let k = key(mac(1), mac(100), Tx, External, Tcp);
    // (drain, expected tenant bytes afterwards)
    let steps: &[(&[(EntryKey, FlowCounters)], u64)] = &[
        (&[at(k, 0, reading(1000, 10, 50))], 1000),
        // CPU 1 counts the flow for the first time: +200, not +1200.
        (
            &[
                at(k, 0, reading(1000, 10, 50)),
                at(k, 1, reading(200, 2, 60)),
            ],
            1200,
        ),
        (
            &[
                at(k, 0, reading(1500, 15, 50)),
                at(k, 1, reading(300, 3, 60)),
            ],
            1800,
        ),
        // CPU 0's sub-entry deleted and recreated (pressure relief): its
        // new entry's bytes are new, CPU 1's continue.
        (
            &[at(k, 0, reading(40, 1, 90)), at(k, 1, reading(350, 4, 60))],
            1890,
        ),
        // CPU 7 appears, CPU 1's entry is gone from the map.
        (
            &[at(k, 0, reading(40, 1, 90)), at(k, 7, reading(5, 1, 95))],
            1895,
        ),
    ];
    for (i, (drain, want)) in steps.iter().enumerate() {
        let report = l.apply_drain(&attr, drain, i as u64 * SEC);
        assert_eq!(report.stale, 0, "step {i}");
        l.commit();
        assert_eq!(tenant_tx(&l, &attr), Some(*want), "step {i}");
    }
    let book = l.snapshot();
    let cpus: Vec<u16> = book.rows[&k].subs.iter().map(|s| s.cpu).collect();
    // CPU 1's baseline went with its entry: a row's baselines follow the
    // CPUs that count it now.
    assert_eq!(cpus, vec![0, 7]);
}

/// A stale reading of one sub-entry (an older read applied after a newer
/// one) adds nothing and keeps that sub-entry's baseline; the others are
/// untouched.
#[test]
fn a_stale_sub_entry_is_ignored_alone() {
    let attr = world();
    let l = Rig::default();
    let k = key(mac(1), mac(100), Tx, External, Tcp);
    l.apply_drain(
        &attr,
        &[at(k, 0, reading(500, 5, 1)), at(k, 1, reading(700, 7, 2))],
        SEC,
    );
    let r = l.apply_drain(
        &attr,
        &[at(k, 0, reading(400, 4, 1)), at(k, 1, reading(900, 9, 2))],
        2 * SEC,
    );
    assert_eq!(r.stale, 1);
    // Shown, even stale: its baseline stays (no recount at the next drain).
    let r = l.apply_drain(
        &attr,
        &[at(k, 0, reading(600, 6, 1)), at(k, 1, reading(900, 9, 2))],
        3 * SEC,
    );
    assert_eq!((r.stale, r.subs_dropped), (0, 0));
    l.commit();
    assert_eq!(tenant_tx(&l, &attr), Some(600 + 900));
}

/// A full drain that does not show a sub-entry drops its baseline and
/// counts how many; a final reading keeps it until then.
#[test]
fn baselines_of_gone_sub_entries_are_dropped_by_the_next_full_drain() {
    let attr = world();
    let l = Rig::default();
    let k = key(mac(1), mac(100), Tx, External, Tcp);
    let all: Vec<_> = (0..4u16)
        .map(|cpu| at(k, cpu, reading(100, 1, 10 + u64::from(cpu))))
        .collect();
    l.apply_drain(&attr, &all, SEC);
    assert_eq!(l.snapshot().rows[&k].subs.len(), 4);
    let r = l.apply_drain(&attr, &all[1..3], 2 * SEC);
    assert_eq!(r.subs_dropped, 2);
    let book = l.snapshot();
    let cpus: Vec<u16> = book.rows[&k].subs.iter().map(|s| s.cpu).collect();
    assert_eq!(cpus, vec![1, 2]);
    l.commit();
    assert_eq!(tenant_tx(&l, &attr), Some(400), "no byte dropped with them");
}

/// Pressure relief deletes sub-entries one by one: the relieved one's final
/// reading (counted on after the drain) is applied, its sibling on another
/// CPU keeps counting from its own baseline, and a later entry of the
/// relieved CPU counts whole.
#[test]
fn relief_deletes_one_sub_entry_and_leaves_its_siblings() {
    let attr = world();
    let l = Rig::default();
    let k = key(mac(1), mac(100), Tx, External, Tcp);
    l.apply_drain(
        &attr,
        &[at(k, 0, reading(1000, 10, 1)), at(k, 1, reading(50, 1, 2))],
        SEC,
    );
    l.commit();
    l.relieve(&[EntryKey::new(k, 1)]);
    l.commit();
    assert_eq!(l.take_released_entries(), vec![EntryKey::new(k, 1)]);
    // Its last reading, 30 bytes more than the drain saw.
    l.apply_final(&attr, &[at(k, 1, reading(80, 2, 2))], 2 * SEC);
    l.apply_drain(
        &attr,
        &[at(k, 0, reading(1100, 11, 1)), at(k, 1, reading(9, 1, 3))],
        3 * SEC,
    );
    l.commit();
    assert_eq!(tenant_tx(&l, &attr), Some(1100 + 80 + 9));
    assert_eq!(l.health().lost_final_readings, 0);
}

/// An evicted row tombstones every sub-entry; the flush releases each, and
/// every final reading lands in `unknown`, none in a row.
#[test]
fn an_eviction_releases_every_sub_entry_of_the_row() {
    let attr = world();
    let l = Rig::default();
    let k = key(mac(2), mac(100), Tx, External, Udp);
    l.apply_drain(
        &attr,
        &[at(k, 0, reading(10, 1, 1)), at(k, 3, reading(20, 1, 2))],
        SEC,
    );
    l.commit();
    let mut gone = attr.clone();
    gone.bindings.remove(&mac(2));
    l.settle(
        &attr,
        lachesis_ledger::SettleMode::Evict { vm_mac: mac(2) },
        || l.use_attr(&gone),
    );
    let mut released = l.take_released_entries();
    released.sort();
    assert_eq!(released, vec![EntryKey::new(k, 0), EntryKey::new(k, 3)]);
    l.apply_final(
        &gone,
        &[at(k, 0, reading(15, 2, 1)), at(k, 3, reading(20, 1, 2))],
        2 * SEC,
    );
    l.apply_drain(&gone, common::NOTHING, 3 * SEC);
    l.commit();
    let s = parse(&render(&l, &gone));
    let unknown = value(
        &s,
        "lachesis_tenant_bytes_total",
        &[
            ("tenant_id", "unknown"),
            ("zone", "external"),
            ("external_network", "none"),
            ("direction", "tx"),
        ],
    );
    assert_eq!(
        unknown,
        Some(5),
        "the 5 bytes counted after the sweep's drain"
    );
    assert_eq!(l.health().lost_final_readings, 0);
    assert!(l.snapshot().tombstones.is_empty());
}

/// The upgrade (§4.4, §12): a schema-3 file's per-key baselines restore as
/// folded entries, the retired per-CPU map's one final drain reads against
/// them exactly, and the new map's sub-entries count from their first byte.
/// Written back as schema 4 with one baseline per sub-entry.
#[test]
fn a_schema_3_file_and_the_retired_per_cpu_map_upgrade_without_loss_or_double_count() {
    let dir = tempfile::tempdir().unwrap();
    let paths = StatePaths::new(dir.path().join("state.json"));
    let k = key(mac(1), mac(100), Tx, External, Tcp);
    let waiting = key(mac(9), mac(100), Tx, Miss, Udp);
    let ghost = key(mac(8), mac(100), Tx, Miss, Udp);
    let schema3 = serde_json::json!({
        "schema": 3,
        "rows": [{
            "key": {"src_mac": "02:00:00:00:00:01", "dst_mac": "02:00:00:00:00:64",
                    "eth_proto": 2048, "direction": "tx", "zone": "external", "l4": "tcp"},
            "total": {"bytes": "5000", "packets": "50"},
            "last": {"bytes": "5000", "packets": "50"},
            "stamp": "42"
        }],
        "unresolved": [{
            "key": {"src_mac": "02:00:00:00:00:09", "dst_mac": "02:00:00:00:00:64",
                    "eth_proto": 2048, "direction": "tx", "zone": "miss", "l4": "udp"},
            "acc": {"bytes": "70", "packets": "7"},
            "last": {"bytes": "70", "packets": "7"},
            "stamp": "43"
        }],
        "tombstones": [{
            "key": {"src_mac": "02:00:00:00:00:08", "dst_mac": "02:00:00:00:00:64",
                    "eth_proto": 2048, "direction": "tx", "zone": "miss", "l4": "udp"},
            "last": {"bytes": "9", "packets": "1"},
            "stamp": "44"
        }],
        "absorbers": {},
        "tenants": {"next": 2, "projects": [{"project": "t-a", "id": 1}]}
    });
    fs::write(&paths.current, serde_json::to_vec(&schema3).unwrap()).unwrap();
    let loaded = state::load(&paths).unwrap();
    assert_eq!(loaded.schema, Some(3));
    let row = &loaded.book.rows[&k];
    assert_eq!(row.subs.len(), 1);
    assert_eq!(row.subs.get(FOLDED_CPU).unwrap().base.stamp, 42);
    assert!(loaded
        .book
        .tombstones
        .contains_key(&EntryKey::folded(ghost)));

    let attr = world();
    let l = Rig::default();
    l.use_attr(&attr);
    l.restore_loaded(loaded, 0).unwrap();
    // The retired per-CPU map: its folded entries, grown since the old
    // agent's last flush (its programs counted until ours replaced them).
    l.expect_retired(1);
    l.ledger
        .apply_retired(
            &[
                (k, reading(5600, 56, 42)),
                (waiting, reading(90, 9, 43)),
                (ghost, reading(12, 2, 44)),
            ],
            SEC,
        )
        .unwrap();
    l.commit();
    // The new map: two CPUs count the flow, one the waiting MAC.
    let live = [
        at(k, 0, reading(300, 3, 100)),
        at(k, 1, reading(20, 1, 101)),
        at(waiting, 1, reading(1, 1, 102)),
    ];
    let report = l.apply_drain(&attr, &live, 2 * SEC);
    // The folded baselines are spent: the live drain drops them.
    assert_eq!(report.subs_dropped, 2);
    l.commit();
    assert_eq!(tenant_tx(&l, &attr), Some(5600 + 300 + 20));
    let book = l.snapshot();
    assert_eq!(book.unresolved[&waiting].acc.bytes, 90 + 1);
    assert!(
        book.tombstones.is_empty(),
        "the ghost's last reading came in"
    );
    assert_eq!(l.health().lost_final_readings, 0);

    // Written back as schema 4: one baseline per sub-entry, each with its CPU.
    let paths = l.paths();
    let text = fs::read_to_string(&paths.current).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["schema"], 4);
    let subs = &v["rows"][0]["subs"];
    assert_eq!(subs[0]["cpu"], 0);
    assert_eq!(subs[1]["cpu"], 1);
    assert!(v["rows"][0].get("last").is_none());
    let reloaded = state::load(&paths).unwrap();
    assert_eq!(reloaded.book.rows[&k].subs, book.rows[&k].subs);
    assert_eq!(
        reloaded.book.unresolved[&waiting].subs,
        book.unresolved[&waiting].subs
    );
}
