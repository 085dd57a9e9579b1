//! The state file (DESIGN §11): round trips, every crash point of a flush,
//! corruption, schema refusal and migration.

use crate::common;

use std::fs;
use std::path::Path;
use std::sync::Arc;

use common::{key, mac, parse, reading, render, scrape, value, world, Rig};
use lachesis_abi::{Direction::*, EntryKey, L4Class::*, Zone::*, FOLDED_CPU};
use lachesis_ledger::memory::OwnedBinding;
use lachesis_ledger::state::{
    self, FlushPhase, LoadFallback, LoadSource, StateError, StateFile, StatePaths, SCHEMA,
};
use lachesis_ledger::{
    Book, CommittedPlan, DrainError, Exporter, Format, InternerConflict, Ledger, Selector,
    SettleError, SettleMode, UnresolvedLimits,
};
use serde_json::json;

const SEC: u64 = 1_000_000_000;
const BIG: u64 = (1 << 63) + 12_345;

/// A ledger with something in every section of the file.
fn busy() -> Rig {
    let mut attr = world();
    let l = Rig::new(UnresolvedLimits {
        capacity: 1,
        ttl_ns: 100,
    });
    l.intern_tenant("t-a").unwrap();
    l.intern_tenant("t-b").unwrap();
    l.apply_drain(
        &attr,
        &[
            (
                key(mac(1), mac(100), Tx, External, Tcp),
                reading(BIG, 1 << 40, 7),
            ),
            (
                key(mac(2), mac(3), Rx, OtherTenant, Udp),
                reading(u64::MAX - 1, 5, 8),
            ),
            (
                key(mac(3), mac(1), Tx, OtherTenant, Icmp),
                reading(300, 3, 9),
            ),
            (key(mac(40), mac(100), Tx, Miss, Other), reading(10, 1, 10)),
            (key(mac(41), mac(100), Tx, Miss, Other), reading(20, 1, 11)),
        ],
        0,
    );
    l.settle(&attr, SettleMode::Rebase(Selector::VmMac(mac(1))), || {});
    l.settle(&attr, SettleMode::Evict { vm_mac: mac(3) }, || {});
    attr.bindings.remove(&mac(3));
    // s-3's port series past their retention: a server bucket, then pruned.
    l.use_attr(&attr);
    l.expire_retained_ports(0, 0);
    l.prune_servers(&attr, ["s-1", "s-2"]).unwrap();
    // mac(2)'s port series retained, stamped.
    l.settle(&attr, SettleMode::Evict { vm_mac: mac(2) }, || {});
    attr.bindings.remove(&mac(2));
    l.use_attr(&attr);
    l.expire_retained_ports(5_000, 86_400);
    attr.bindings
        .insert(mac(2), OwnedBinding::new("t-a", "s-2", "p-2"));
    l
}

/// The book as a load returns it: waiting rows carry no clock.
fn normalized(mut b: Book) -> Book {
    for p in b.unresolved.values_mut() {
        p.first_seen_ns = 0;
        p.last_active_ns = 0;
    }
    b
}

fn paths(dir: &Path) -> StatePaths {
    StatePaths::new(dir.join("state.json"))
}

/// Flushes `l` to `p` through a state file of its own.
fn flush_to(l: &Ledger, p: &StatePaths) -> Result<state::FlushReport, StateError> {
    StateFile::new(p.clone()).flush(l)
}

/// `plan` encoded as the agent commits it.
fn committed(plan: &serde_json::Value) -> CommittedPlan {
    CommittedPlan::encode(plan).unwrap()
}

/// Flushes `l` to `p` with the source serving `world()` committed as `plan`.
fn flush_with_plan(l: &Rig, p: &StatePaths, plan: &serde_json::Value) {
    let mut attr = world();
    attr.plan = committed(plan);
    l.use_attr(&attr);
    flush_to(l, p).unwrap();
}

#[test]
fn round_trip_is_exact_including_2_pow_63_counters() {
    let dir = tempfile::tempdir().unwrap();
    let p = paths(dir.path());
    let l = busy();
    let before = l.snapshot();
    assert!(
        !before.rows.is_empty() && !before.unresolved.is_empty() && !before.tombstones.is_empty()
    );
    assert!(
        before
            .absorbers
            .bucket_counts()
            .iter()
            .filter(|n| **n > 0)
            .count()
            >= 4
    );
    let plan = json!({"bindings": [{"mac": "02:00:00:00:00:01"}], "n": 1});
    let mut attr = world();
    attr.plan = committed(&plan);
    l.use_attr(&attr);
    let report = flush_to(&l, &p).unwrap();
    assert!(report.bytes > 0);
    assert!(report.lock_held() <= report.total());

    // Readable with any JSON tool: the big counters are exact decimal strings.
    let text = fs::read_to_string(&p.current).unwrap();
    assert!(
        text.contains(&format!("\"{BIG}\"")),
        "2^63-scale value kept as a string"
    );
    assert!(text.contains(&format!("\"{}\"", u64::MAX - 1)));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["schema"], json!(SCHEMA));

    let loaded = state::load(&p).unwrap();
    assert_eq!(loaded.source, LoadSource::Current);
    assert_eq!(loaded.plan.decode::<serde_json::Value>().unwrap(), plan);
    assert_eq!(loaded.book, normalized(before.clone()));
    let row = &loaded.book.rows[&key(mac(1), mac(100), Tx, External, Tcp)];
    assert_eq!(row.subs.get(FOLDED_CPU).unwrap().base.last.bytes, BIG);

    // A second flush of the same state is byte-identical (sorted output).
    flush_to(&l, &p).unwrap();
    assert_eq!(fs::read_to_string(&p.current).unwrap(), text);
    assert_eq!(
        fs::read_to_string(&p.backup).unwrap(),
        text,
        "previous generation rotated to .bak"
    );
}

#[test]
fn restart_from_the_file_continues_without_loss_or_double_count() {
    let dir = tempfile::tempdir().unwrap();
    let p = paths(dir.path());
    let attr = world();
    let k = key(mac(1), mac(100), Tx, External, Tcp);
    let before = Rig::default();
    before.apply_drain(&attr, &[(k, reading(1000, 10, 5))], 0);
    flush_to(&before, &p).unwrap();
    // The kernel keeps counting while the agent restarts.
    let after = Rig::default();
    after.restore_loaded(state::load(&p).unwrap(), 0).unwrap();
    after.apply_drain(&attr, &[(k, reading(1600, 16, 5))], 1);
    let s = parse(&render(&after, &attr));
    assert_eq!(
        value(
            &s,
            "lachesis_bytes_total",
            &[
                ("zone", "external"),
                ("external_network", "public"),
                ("direction", "tx")
            ]
        ),
        Some(1600)
    );
}

#[test]
fn crash_between_temp_write_and_rename_keeps_the_current_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = paths(dir.path());
    let l = busy();
    flush_with_plan(&l, &p, &json!({"gen": 1}));
    let good = fs::read(&p.current).unwrap();
    // The next flush died after writing half its temp file.
    let next = state::encode(&l.snapshot(), &committed(&json!({"gen": 2}))).unwrap();
    fs::write(p.temp.with_extension("tmp.1.0"), &next[..next.len() / 2]).unwrap();
    let loaded = state::load(&p).unwrap();
    assert_eq!(loaded.source, LoadSource::Current);
    assert_eq!(loaded.plan, committed(&json!({"gen": 1})));
    assert!(loaded.quarantined.is_empty());
    assert_eq!(fs::read(&p.current).unwrap(), good);
    // The leftover temp file does not stop the next flush.
    flush_with_plan(&l, &p, &json!({"gen": 3}));
    assert_eq!(state::load(&p).unwrap().plan, committed(&json!({"gen": 3})));
}

#[test]
fn crash_between_rotate_and_rename_falls_back_to_bak() {
    let dir = tempfile::tempdir().unwrap();
    let p = paths(dir.path());
    let l = busy();
    flush_with_plan(&l, &p, &json!({"gen": 1}));
    // Rotated, not yet renamed: no current file, a complete temp file.
    fs::rename(&p.current, &p.backup).unwrap();
    fs::write(
        p.temp.with_extension("tmp.1.0"),
        state::encode(&l.snapshot(), &committed(&json!({"gen": 2}))).unwrap(),
    )
    .unwrap();
    let loaded = state::load(&p).unwrap();
    assert_eq!(loaded.source, LoadSource::Backup);
    assert_eq!(loaded.plan, committed(&json!({"gen": 1})));
    let fresh = Rig::default();
    fresh.restore_loaded(loaded, 0).unwrap();
    assert_eq!(fresh.state.load_stats().fallbacks(LoadFallback::Backup), 1);
}

#[test]
fn corrupt_current_with_good_bak_is_quarantined_and_bak_used() {
    let dir = tempfile::tempdir().unwrap();
    let p = paths(dir.path());
    let l = busy();
    flush_with_plan(&l, &p, &json!({"gen": 1}));
    flush_with_plan(&l, &p, &json!({"gen": 2}));
    fs::write(&p.current, b"{\"schema\": 2, \"rows\": [tru").unwrap();
    let loaded = state::load(&p).unwrap();
    assert_eq!(loaded.source, LoadSource::Backup);
    assert_eq!(loaded.plan, committed(&json!({"gen": 1})));
    assert_eq!(loaded.quarantined.len(), 1);
    let q = &loaded.quarantined[0];
    assert_eq!(q.from, p.current);
    assert_eq!(fs::read(&q.to).unwrap(), b"{\"schema\": 2, \"rows\": [tru");
    assert!(
        !p.current.exists(),
        "moved aside before anything can overwrite it"
    );
    let fresh = Rig::default();
    fresh.restore_loaded(loaded, 0).unwrap();
    assert_eq!(normalized(fresh.snapshot()), normalized(l.snapshot()));
    let h = fresh.state.load_stats();
    assert_eq!((h.fallbacks(LoadFallback::Backup), h.quarantined()), (1, 1));
}

#[test]
fn both_corrupt_quarantines_both_and_starts_empty() {
    let dir = tempfile::tempdir().unwrap();
    let p = paths(dir.path());
    fs::write(&p.current, b"not json").unwrap();
    // Valid JSON, invalid content: an unknown zone label.
    fs::write(&p.backup, br#"{"schema":2,"rows":[{"key":{"src_mac":"02:00:00:00:00:01","dst_mac":"02:00:00:00:00:02","eth_proto":2048,"direction":"tx","zone":"mars","l4":"tcp"},"total":{"bytes":"1","packets":"1"},"last":{"bytes":"1","packets":"1"},"stamp":"1"}]}"#).unwrap();
    // A quarantine from an earlier incident is not overwritten.
    fs::write(dir.path().join("state.json.quarantine"), b"older incident").unwrap();
    let loaded = state::load(&p).unwrap();
    assert_eq!(loaded.source, LoadSource::Empty);
    assert_eq!(loaded.book, Book::default());
    assert_eq!(loaded.quarantined.len(), 2);
    assert!(
        loaded.quarantined[1].reason.contains("mars"),
        "{}",
        loaded.quarantined[1].reason
    );
    assert_eq!(
        fs::read(dir.path().join("state.json.quarantine")).unwrap(),
        b"older incident"
    );
    assert_eq!(
        fs::read(dir.path().join("state.json.quarantine.1")).unwrap(),
        b"not json"
    );
    assert!(dir.path().join("state.json.bak.quarantine").exists());
    let fresh = Rig::default();
    fresh.restore_loaded(loaded, 0).unwrap();
    let h = fresh.state.load_stats();
    assert_eq!((h.fallbacks(LoadFallback::Empty), h.quarantined()), (1, 2));
}

#[test]
fn missing_files_start_empty_without_a_fallback() {
    let dir = tempfile::tempdir().unwrap();
    let loaded = state::load(&paths(dir.path())).unwrap();
    assert_eq!(loaded.source, LoadSource::Empty);
    let fresh = Rig::default();
    fresh.restore_loaded(loaded, 0).unwrap();
    assert_eq!(fresh.state.load_stats().fallbacks(LoadFallback::Empty), 0);
}

#[test]
fn newer_schema_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let p = paths(dir.path());
    let newer = format!(
        r#"{{"schema": {}, "rows": {{"a": "shape this build cannot read"}}}}"#,
        SCHEMA + 1
    );
    fs::write(&p.current, &newer).unwrap();
    fs::write(&p.backup, b"garbage").unwrap();
    match state::load(&p) {
        Err(StateError::NewerSchema {
            found, supported, ..
        }) => {
            assert_eq!((found, supported), (SCHEMA + 1, SCHEMA));
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(fs::read_to_string(&p.current).unwrap(), newer);
    assert_eq!(fs::read(&p.backup).unwrap(), b"garbage");
    assert_eq!(
        fs::read_dir(dir.path()).unwrap().count(),
        2,
        "nothing quarantined"
    );

    // A corrupt current in front of a newer .bak is a refusal too, with
    // nothing moved: the newer generation must survive a rollback.
    fs::write(&p.backup, &newer).unwrap();
    fs::write(&p.current, b"garbage").unwrap();
    assert!(matches!(
        state::load(&p),
        Err(StateError::NewerSchema { .. })
    ));
    assert_eq!(fs::read(&p.current).unwrap(), b"garbage");
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 2);
}

#[test]
fn schema_1_fixture_loads_and_its_rows_adopt_stamps_without_double_counting() {
    let dir = tempfile::tempdir().unwrap();
    let p = paths(dir.path());
    fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/state-v1.json"),
        &p.current,
    )
    .unwrap();
    let loaded = state::load(&p).unwrap();
    assert_eq!(loaded.schema, Some(1));
    assert_eq!(
        loaded.plan.decode::<serde_json::Value>().unwrap()["note"],
        json!("opaque to the ledger")
    );
    let k = key(mac(1), mac(100), Tx, External, Tcp);
    assert_eq!(
        loaded.book.rows[&k]
            .subs
            .get(FOLDED_CPU)
            .unwrap()
            .base
            .stamp,
        0,
        "older rows restore with an unknown stamp"
    );
    assert_eq!(loaded.book.interner.get("t-b"), Some(2));
    let l = Rig::default();
    l.restore_loaded(loaded, 0).unwrap();
    assert_eq!(l.intern_tenant("t-c"), Ok(3));
    // Same kernel entry grew by 250 since the old build's last read.
    let attr = world();
    l.apply_drain(&attr, &[(k, reading(5250, 52, 42))], 1);
    l.apply_drain(&attr, &[(k, reading(5300, 53, 42))], 2);
    let s = parse(&render(&l, &attr));
    let ext = [
        ("zone", "external"),
        ("external_network", "public"),
        ("direction", "tx"),
    ];
    assert_eq!(value(&s, "lachesis_bytes_total", &ext), Some(5300 + 700));
    assert_eq!(
        value(
            &s,
            "lachesis_tenant_bytes_total",
            &[
                &[("tenant_id", "unknown")][..],
                &[
                    ("zone", "miss"),
                    ("external_network", "none"),
                    ("direction", "rx")
                ]
            ]
            .concat()
        ),
        Some(33)
    );
    // Written back as the current schema.
    flush_to(&l, &p).unwrap();
    assert_eq!(state::load(&p).unwrap().schema, Some(SCHEMA));
}

/// Schema 2 had no `gone` flags: its tombstones' entries may still be in
/// the kernel. They load awaiting their final reading, are released again
/// by the first flush after the boot drain that still shows them, and their
/// final reading is applied like any other.
#[test]
fn schema_2_fixture_loads_and_its_tombstones_are_released_again() {
    let dir = tempfile::tempdir().unwrap();
    let file = paths(dir.path());
    fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/state-v2.json"),
        &file.current,
    )
    .unwrap();
    let loaded = state::load(&file).unwrap();
    assert_eq!(loaded.schema, Some(2));
    let ghost = key(mac(9), mac(100), Tx, Miss, Udp);
    assert!(!loaded.book.tombstones[&EntryKey::folded(ghost)].base.gone);
    let attr = world();
    let l = Rig::default();
    l.use_attr(&attr);
    l.restore_loaded(loaded, 0).unwrap();
    let k = key(mac(1), mac(100), Tx, External, Tcp);
    // Boot drain: both entries are still there, the evicted one grown by 50.
    l.apply_drain(
        &attr,
        &[(k, reading(5100, 51, 42)), (ghost, reading(450, 5, 77))],
        SEC,
    );
    l.commit();
    assert_eq!(l.take_released(), vec![ghost]);
    l.apply_final(&attr, &[(ghost, reading(460, 6, 77))], 2 * SEC);
    // What it counted after its eviction waited unresolved, then its TTL ends.
    l.apply_drain(&attr, &[(k, reading(5100, 51, 42))], 100 * SEC);
    l.commit();
    assert!(
        l.take_released().is_empty(),
        "a gone entry is not deleted again"
    );
    let s = parse(&render(&l, &attr));
    let unknown = [
        ("tenant_id", "unknown"),
        ("zone", "miss"),
        ("external_network", "none"),
        ("direction", "tx"),
    ];
    assert_eq!(
        value(&s, "lachesis_tenant_bytes_total", &unknown),
        Some(460)
    );
    assert_eq!(l.health().lost_final_readings, 0);
    assert_eq!(state::load(&l.paths()).unwrap().schema, Some(SCHEMA));
}

#[test]
fn failed_flush_is_counted_and_leaves_the_old_file() {
    let dir = tempfile::tempdir().unwrap();
    let l = busy();
    let p = StatePaths::new(dir.path().join("missing-dir").join("state.json"));
    let copies = |s: &common::Samples| {
        value(
            s,
            "lachesis_state_flush_phase_seconds_count",
            &[("phase", "copy")],
        )
    };
    // `busy` flushed after its settle, to the rig's own file.
    assert!(copies(&parse(&scrape(&l, &world()))).unwrap() > 0);
    let file = Arc::new(StateFile::new(p));
    match file.flush(&l) {
        Err(StateError::Flush { phase, .. }) => assert_eq!(phase, "write"),
        other => panic!("expected a write failure, got {other:?}"),
    }
    let mut text = String::new();
    Exporter::new(l.ledger.clone(), file)
        .render(Format::OpenMetrics, &mut text)
        .unwrap();
    let s = parse(&text);
    assert_eq!(
        value(
            &s,
            "lachesis_state_flush_failures_total",
            &[("phase", "write")]
        ),
        Some(1)
    );
    assert_eq!(copies(&s), Some(1), "the failed flush timed its copy");
    assert_eq!(FlushPhase::ALL.len(), 7);
}

#[test]
fn an_evicted_schema_1_row_s_surviving_entry_continues_from_its_tombstone() {
    let dir = tempfile::tempdir().unwrap();
    let p = paths(dir.path());
    fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/state-v1.json"),
        &p.current,
    )
    .unwrap();
    let l = Rig::default();
    l.restore_loaded(state::load(&p).unwrap(), 0).unwrap();
    let a0 = world();
    let mut a1 = a0.clone();
    // The port was deleted while the agent was down.
    a1.bindings.remove(&mac(1));
    // The boot drain: the stamp-0 row adopts its entry's stamp.
    let k = key(mac(1), mac(100), Tx, External, Tcp);
    l.apply_drain(&a0, &[(k, reading(5000, 50, 9))], 1);
    l.settle(&a0, SettleMode::Evict { vm_mac: mac(1) }, || {});
    // The kernel delete failed or raced: the entry is still there and grew
    // by 100.
    l.apply_drain(&a1, &[(k, reading(5100, 51, 9))], 1_000_000_000);
    let held: u64 = common::family(&parse(&render(&l, &a1)), "lachesis_bytes_total")
        .values()
        .sum::<u64>()
        + l.snapshot()
            .unresolved
            .values()
            .map(|p| p.acc.bytes)
            .sum::<u64>();
    // The fixture holds row 5000, server-settled 700, total-settled 11 and
    // unknown 33; only the 100 grown since are new.
    assert_eq!(held, 5000 + 700 + 11 + 33 + 100);
}

#[test]
fn overlapping_flushes_neither_fail_nor_leave_a_torn_or_missing_file() {
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    let dir = tempfile::tempdir().unwrap();
    let p = paths(dir.path());
    let l = Rig::default();
    // Big enough that one flush's write overlaps the other's rotate/rename.
    let readings: Vec<_> = (0..4_000u32)
        .map(|i| {
            let b = i.to_be_bytes();
            let k = lachesis_abi::FlowKey {
                dst_mac: [4, 0, b[0], b[1], b[2], b[3]],
                ..key(mac(1), mac(2), Tx, SameTenant, Tcp)
            };
            (k, reading(u64::from(i) + 1, 1, 1))
        })
        .collect();
    l.apply_drain(&world(), &readings, 0);
    let file = StateFile::new(p.clone());
    let (failed, bad) = (AtomicUsize::new(0), AtomicUsize::new(0));
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                for _ in 0..15 {
                    if file.flush(&l).is_err() {
                        failed.fetch_add(1, Relaxed);
                    }
                    // After our own successful flush a complete current
                    // file must exist, whatever the other thread is doing.
                    let ok = fs::read(&p.current)
                        .is_ok_and(|b| serde_json::from_slice::<serde_json::Value>(&b).is_ok());
                    if !ok {
                        bad.fetch_add(1, Relaxed);
                    }
                }
            });
        }
    });
    assert_eq!((failed.into_inner(), bad.into_inner()), (0, 0));
    let left: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains(".tmp"))
        .collect();
    assert!(left.is_empty(), "temp files left behind: {left:?}");
}

fn tenant_tx(s: &common::Samples, tenant: &str, zone: &str) -> Option<u64> {
    value(
        s,
        "lachesis_tenant_bytes_total",
        &[
            ("tenant_id", tenant),
            ("zone", zone),
            ("external_network", "none"),
            ("direction", "tx"),
        ],
    )
}

/// Host reboot: the kernel map is gone and the state comes from the last
/// flush. The export never showed more than that flush, so the series
/// continues from where the scrapes last saw it.
#[test]
fn host_reboot_never_lowers_a_series_a_scrape_saw() {
    let dir = tempfile::tempdir().unwrap();
    let file = paths(dir.path());
    let a = world();
    let k = key(mac(1), mac(2), Tx, SameTenant, Tcp);
    let l = Rig::default();
    l.apply_drain(&a, &[(k, reading(1000, 10, 5))], 0);
    flush_to(&l, &file).unwrap();
    l.apply_drain(&a, &[(k, reading(1500, 15, 5))], SEC);
    let seen = tenant_tx(&parse(&scrape(&l, &a)), "t-a", "same_tenant");
    assert_eq!(seen, Some(1000), "export runs ahead of the file");
    // Reboot: fresh kernel (new entry, new stamp), state from the file.
    let rebooted = Rig::default();
    rebooted.use_attr(&a);
    rebooted
        .restore_loaded(state::load(&file).unwrap(), 0)
        .unwrap();
    assert_eq!(
        tenant_tx(&parse(&scrape(&rebooted, &a)), "t-a", "same_tenant"),
        seen
    );
    rebooted.apply_drain(&a, &[(k, reading(10, 1, 3))], SEC);
    assert_eq!(
        tenant_tx(&parse(&render(&rebooted, &a)), "t-a", "same_tenant"),
        Some(1010)
    );
}

/// Agent crash (kernel alive) after an unresolved eviction, before the
/// flush: the kernel delete was never released, so the entry survives, the
/// restored row waits again and is evicted again with every byte.
#[test]
fn crash_after_an_unresolved_eviction_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let file = paths(dir.path());
    let a = world();
    let lim = UnresolvedLimits {
        capacity: 10,
        ttl_ns: SEC,
    };
    let k = key(mac(9), mac(100), Tx, Miss, Udp);
    let l = Rig::new(lim);
    l.apply_drain(&a, &[(k, reading(300, 3, 7))], 0);
    flush_to(&l, &file).unwrap();
    let rep = l.apply_drain(&a, &[(k, reading(500, 5, 7))], 2 * SEC);
    assert_eq!(rep.evicted, 1);
    let seen = tenant_tx(&parse(&scrape(&l, &a)), "unknown", "miss");
    assert_eq!(seen, None, "the eviction is not durable yet");
    // Crash. Nothing was released, so nothing was deleted from the kernel.
    let rebooted = Rig::new(lim);
    rebooted.use_attr(&a);
    rebooted
        .restore_loaded(state::load(&file).unwrap(), 3 * SEC)
        .unwrap();
    rebooted.apply_drain(&a, &[(k, reading(500, 5, 7))], 3 * SEC);
    rebooted.apply_drain(&a, &[(k, reading(500, 5, 7))], 5 * SEC); // TTL again
    assert_eq!(
        tenant_tx(&parse(&render(&rebooted, &a)), "unknown", "miss"),
        Some(500)
    );
    assert_eq!(rebooted.take_released(), vec![k]);
}

/// Agent crash (kernel alive) after a rebase, before the flush that must
/// follow it. The flush the ledger demanded before the settle holds the
/// baseline of the settle point; boot restores under the file's plan,
/// drains under it, flushes and only then settles to the fresh plan: the
/// bytes counted while the agent was down stay with the old project (§12).
#[test]
fn crash_between_a_rebase_and_its_flush_bills_the_old_project_until_the_boot_settle() {
    let dir = tempfile::tempdir().unwrap();
    let file = paths(dir.path());
    let a0 = world();
    let mut a1 = a0.clone();
    a1.bindings
        .insert(mac(1), OwnedBinding::new("t-b", "s-1", "p-1"));
    let k = key(mac(1), mac(2), Tx, SameTenant, Tcp);
    let rebase = SettleMode::Rebase(Selector::VmMac(mac(1)));
    let l = Rig::default();
    l.apply_drain(&a0, &[(k, reading(1000, 10, 5))], 0);
    flush_to(&l, &file).unwrap();
    l.apply_drain(&a0, &[(k, reading(1500, 15, 5))], SEC);
    let seen = tenant_tx(&parse(&scrape(&l, &a0)), "t-a", "same_tenant");
    // Settling on top of an unflushed drain is refused, swap not run.
    let mut swapped = false;
    assert!(matches!(
        l.ledger.settle(rebase, || swapped = true),
        Err(SettleError::DrainsNotDurable { unflushed: 1 })
    ));
    assert!(!swapped);
    flush_to(&l, &file).unwrap();
    let src = l.source.clone();
    l.ledger.settle(rebase, || src.store(a1.clone())).unwrap();
    // Draining on top of the unflushed settle is refused too.
    assert!(matches!(
        l.ledger.apply_drain(&[(k, reading(1700, 17, 5))], 2 * SEC),
        Err(DrainError::SettleNotDurable { unflushed: 1 })
    ));
    // Crash here. Boot: restore under the file's plan (a0), drain, flush,
    // settle to the fresh one (a1), flush.
    let rebooted = Rig::default();
    rebooted.use_attr(&a0);
    rebooted
        .restore_loaded(state::load(&file).unwrap(), 3 * SEC)
        .unwrap();
    let after_restore = tenant_tx(&parse(&scrape(&rebooted, &a0)), "t-a", "same_tenant");
    assert!(after_restore >= seen, "{after_restore:?} < {seen:?}");
    rebooted.apply_drain(&a0, &[(k, reading(1700, 17, 5))], 3 * SEC);
    rebooted.settle(&a0, rebase, || {});
    rebooted.apply_drain(&a1, &[(k, reading(1900, 19, 5))], 4 * SEC);
    let s = parse(&render(&rebooted, &a1));
    assert_eq!(
        (
            tenant_tx(&s, "t-a", "same_tenant"),
            tenant_tx(&s, "t-b", "same_tenant")
        ),
        (Some(1700), Some(200))
    );
}

/// Boot step 2 interns tenants (trie rows) before step 4 restores: an id
/// already handed out must keep its meaning. The file's interner is adopted
/// in step 1; an id interned without it that the file gives to another
/// project fails the restore loudly instead of silently changing meaning.
#[test]
fn tenant_ids_handed_out_before_the_restore_keep_their_meaning() {
    let dir = tempfile::tempdir().unwrap();
    let file = paths(dir.path());
    fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/state-v1.json"),
        &file.current,
    )
    .unwrap();

    // Step 1 adopts the file's ids; step 2 interns a new project.
    let booted = Rig::default();
    let loaded = state::load(&file).unwrap();
    booted.restore_interner(&loaded.book.interner).unwrap();
    let (a, x) = (
        booted.intern_tenant("t-a").unwrap(),
        booted.intern_tenant("t-x").unwrap(),
    );
    assert_eq!(a, 1, "the file's id");
    booted.restore_loaded(loaded, 0).unwrap();
    assert_eq!(
        (
            booted.tenant_id("t-a"),
            booted.tenant_id("t-b"),
            booted.tenant_id("t-x")
        ),
        (Some(1), Some(2), Some(x))
    );
    assert!(x > 2, "a new id, not one of the file's");

    // Without step 1: id 1 went to t-x, the file says 1 is t-a.
    let hasty = Rig::default();
    let id = hasty.intern_tenant("t-x").unwrap();
    let err = hasty
        .restore_loaded(state::load(&file).unwrap(), 0)
        .unwrap_err();
    assert_eq!(
        err,
        InternerConflict {
            project: "t-x".to_owned(),
            live_id: id,
            file_id: None,
            file_project: Some("t-a".to_owned()),
        }
    );
    assert_eq!(hasty.tenant_id("t-x"), Some(id));
    assert_eq!(hasty.sizes().rows, 0, "a failed restore changes nothing");
}

/// Issue 19 item 19: the state file names every project, server and MAC
/// with its traffic; it and its `.bak` were created 0644 (world-readable
/// under the usual umask 022). Both are owner-only now.
#[test]
fn the_state_file_and_its_backup_are_owner_only() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let p = paths(dir.path());
    let l = busy();
    flush_to(&l, &p).unwrap();
    flush_to(&l, &p).unwrap();
    for f in [&p.current, &p.backup] {
        let mode = fs::metadata(f).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{} is {mode:o}", f.display());
    }
}

/// Agent crash after a peer's eviction was flushed, before the kernel
/// deletes it released were done: the restored tombstone still knows its
/// row was folded for its peer, so the entry's last bytes, read by the
/// delete the next boot makes, go to the row's VM, not to `unknown`.
#[test]
fn a_peer_folded_row_s_last_bytes_go_to_its_vm_across_a_restart() {
    let a0 = world();
    let mut a1 = a0.clone();
    a1.bindings.remove(&mac(2));
    let to_x = key(mac(1), mac(2), Tx, SameTenant, Tcp);
    let l = Rig::default();
    l.apply_drain(&a0, &[(to_x, reading(1000, 10, 5))], 0);
    l.settle(&a0, SettleMode::Evict { vm_mac: mac(2) }, || {});
    assert_eq!(l.take_released(), vec![to_x]);
    // Crash before the delete.
    let rebooted = Rig::with_state(
        UnresolvedLimits::default(),
        Arc::new(StateFile::new(l.paths())),
        Arc::new(tempfile::tempdir().unwrap()),
    );
    rebooted.use_attr(&a1);
    rebooted
        .restore_loaded(StateFile::new(l.paths()).load().unwrap(), SEC)
        .unwrap();
    // The owed delete returns the entry's last reading, 30 bytes on.
    rebooted.apply_final(&a1, &[(to_x, reading(1030, 12, 5))], 2 * SEC);
    rebooted.apply_drain(&a1, common::NOTHING, 3 * SEC);
    let s = parse(&render(&rebooted, &a1));
    let port_tx = common::port_tx(&s, "s-1", "p-1", "t-a", "same_tenant");
    assert_eq!(port_tx, Some(1030));
    assert_eq!(tenant_tx(&s, "unknown", "same_tenant"), None);
    assert_eq!(rebooted.health().lost_final_readings, 0);
}
