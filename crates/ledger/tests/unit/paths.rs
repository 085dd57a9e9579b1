//! Table tests for the drain, unresolved, settle and prune paths, each
//! asserted on what the export shows.

use crate::common;

use std::sync::Arc;

use common::{key, mac, parse, reading, render, value, world, Rig};
use lachesis_abi::{Direction::*, FlowCounters, FlowKey, L4Class::*, Zone::*};
use lachesis_ledger::memory::OwnedBinding;
use lachesis_ledger::state::{StateFile, StatePaths};
use lachesis_ledger::{PruneError, Selector, SettleMode, UnresolvedLimits};

const SEC: u64 = 1_000_000_000;

fn ledger() -> Rig {
    Rig::new(UnresolvedLimits {
        capacity: 3,
        ttl_ns: 60 * SEC,
    })
}

fn tenant_bytes(
    l: &Rig,
    attr: &lachesis_ledger::memory::MemoryAttribution,
    t: &str,
    zone: &str,
    ext: &str,
    dir: &str,
) -> Option<u64> {
    let s = parse(&render(l, attr));
    value(
        &s,
        "lachesis_tenant_bytes_total",
        &[
            ("tenant_id", t),
            ("zone", zone),
            ("external_network", ext),
            ("direction", dir),
        ],
    )
}

#[test]
fn drains_follow_the_delta_rule_through_to_the_export() {
    let attr = world();
    let l = ledger();
    let k = key(mac(1), mac(2), Tx, SameTenant, Tcp);
    // (reading, expected cumulative tenant bytes afterwards)
    let steps = [
        (reading(1000, 10, 5), 1000), // first sight: everything is new
        (reading(1500, 12, 5), 1500), // same stamp: +500
        (reading(1500, 12, 5), 1500), // idle
        (reading(300, 2, 9), 1800),   // new stamp (entry recreated): +300
        (reading(200, 2, 9), 1800),   // older reading of that entry: stale, +0
        (reading(260, 3, 9), 1800),   // still below the newest (bytes): stale
        (reading(350, 4, 9), 1850),   // continues from the newest, not the stale
    ];
    for (i, (r, want)) in steps.iter().enumerate() {
        l.apply_drain(&attr, &[(k, *r)], i as u64 * SEC);
        assert_eq!(
            tenant_bytes(&l, &attr, "t-a", "same_tenant", "none", "tx"),
            Some(*want),
            "step {i}"
        );
    }
    assert_eq!(l.health().anomalies_stale, 2);
}

#[test]
fn unresolved_rows_wait_then_resolve_without_double_counting() {
    let mut attr = world();
    let l = ledger();
    let stranger = mac(9);
    let k = key(stranger, mac(100), Tx, External, Udp);
    l.apply_drain(&attr, &[(k, reading(700, 7, 1))], 0);
    assert_eq!(l.sizes().unresolved, 1);
    assert_eq!(l.sizes().rows, 0);
    // Not exported anywhere while it waits (it may belong to anyone).
    let s = parse(&render(&l, &attr));
    assert!(common::family(&s, "lachesis_bytes_total")
        .values()
        .all(|v| *v == 0));
    l.apply_drain(&attr, &[(k, reading(1000, 9, 1))], SEC);
    // Bound: the next drain moves the 1000 accumulated bytes and keeps the
    // raw baseline, so the same reading adds nothing more.
    attr.bindings
        .insert(stranger, OwnedBinding::new("t-b", "s-9", "p-9"));
    let report = l.apply_drain(&attr, &[(k, reading(1000, 9, 1))], 2 * SEC);
    assert_eq!(report.resolved, 1);
    assert_eq!(
        tenant_bytes(&l, &attr, "t-b", "external", "public", "tx"),
        Some(1000)
    );
    l.apply_drain(&attr, &[(k, reading(1100, 10, 1))], 3 * SEC);
    assert_eq!(
        tenant_bytes(&l, &attr, "t-b", "external", "public", "tx"),
        Some(1100)
    );
    assert_eq!(l.health().resolutions, 1);
}

#[test]
fn unresolved_rows_evict_on_ttl_and_capacity_into_unknown() {
    let attr = world();
    let l = ledger();
    let ks: Vec<_> = (10..15)
        .map(|n| key(mac(n), mac(100), Rx, Miss, Tcp))
        .collect();
    // t=0: one row; t=10s: four more, over capacity 3 by two → the two least
    // recently active (the t=0 row and then one of the t=10s rows) go.
    let r0 = l.apply_drain(&attr, &[(ks[0], reading(100, 1, 1))], 0);
    l.commit();
    assert_eq!((r0.evicted, l.take_released()), (0, vec![]));
    let readings: Vec<_> = ks
        .iter()
        .enumerate()
        .map(|(i, k)| (*k, reading(100 * (i as u64 + 1), 1, 1)))
        .collect();
    // ks[0] gains nothing in this drain (same reading), so it is the LRU one.
    let mut rd = readings.clone();
    rd[0].1 = reading(100, 1, 1);
    let r1 = l.apply_drain(&attr, &rd, 10 * SEC);
    assert_eq!(r1.evicted, 2);
    // Kernel deletes wait for the flush that makes the eviction durable.
    assert!(l.take_released().is_empty());
    l.commit();
    let released = l.take_released();
    assert_eq!(released.len(), 2);
    assert!(released.contains(&ks[0]));
    assert_eq!(l.sizes().unresolved, 3);
    let unknown = |l: &Rig| tenant_bytes(l, &attr, "unknown", "miss", "none", "rx");
    let evicted_bytes: u64 = released
        .iter()
        .map(|k| rd.iter().find(|(x, _)| x == k).unwrap().1.bytes)
        .sum();
    assert_eq!(unknown(&l), Some(evicted_bytes));
    // TTL: at t=70s the rows that entered at t=10s have waited 60 s.
    let r2 = l.apply_drain(&attr, common::NOTHING, 70 * SEC);
    assert_eq!(r2.evicted, 3);
    assert_eq!(l.sizes().unresolved, 0);
    let all: u64 = rd.iter().map(|(_, r)| r.bytes).sum();
    assert_eq!(unknown(&l), Some(all));
    let h = l.health();
    assert_eq!((h.evictions_capacity, h.evictions_ttl), (2, 3));
}

#[test]
fn an_evicted_entry_the_caller_failed_to_delete_is_not_counted_twice() {
    let attr = world();
    let l = Rig::new(UnresolvedLimits {
        capacity: 10,
        ttl_ns: SEC,
    });
    let k = key(mac(20), mac(100), Tx, Miss, Udp);
    l.apply_drain(&attr, &[(k, reading(500, 5, 3))], 0);
    let r = l.apply_drain(&attr, &[(k, reading(800, 8, 3))], 2 * SEC);
    assert_eq!(r.evicted, 1);
    l.commit();
    assert_eq!(l.take_released(), vec![k]);
    // The delete did not happen: the same entry shows up again, grown by 50.
    l.apply_drain(&attr, &[(k, reading(850, 9, 3))], 3 * SEC);
    l.apply_drain(&attr, &[(k, reading(850, 9, 3))], 5 * SEC);
    assert_eq!(
        tenant_bytes(&l, &attr, "unknown", "miss", "none", "tx"),
        Some(850)
    );
    // Deleted for real now and recreated: its fresh bytes are all new.
    l.apply_drain(&attr, common::NOTHING, 6 * SEC);
    l.apply_drain(&attr, &[(k, reading(40, 1, 77))], 7 * SEC);
    l.apply_drain(&attr, common::NOTHING, 9 * SEC);
    assert_eq!(
        tenant_bytes(&l, &attr, "unknown", "miss", "none", "tx"),
        Some(890)
    );
}

#[test]
fn rebase_keeps_every_series_and_starts_the_new_attribution_at_zero() {
    let attr = world();
    let l = ledger();
    let k = key(mac(1), mac(100), Tx, External, Tcp);
    l.apply_drain(&attr, &[(k, reading(1000, 10, 1))], 0);
    // The port moves to tenant t-b: settle under the old attribution.
    let mut moved = attr.clone();
    moved
        .bindings
        .insert(mac(1), OwnedBinding::new("t-b", "s-1", "p-1"));
    let report = l.settle(&attr, SettleMode::Rebase(Selector::VmMac(mac(1))), || {});
    assert_eq!((report.rows, report.moved.bytes), (1, 1000));
    l.apply_drain(&moved, &[(k, reading(1300, 13, 1))], SEC);
    let s = parse(&render(&l, &moved));
    let ext = [
        ("zone", "external"),
        ("external_network", "public"),
        ("direction", "tx"),
    ];
    let t = |t: &str| {
        value(
            &s,
            "lachesis_tenant_bytes_total",
            &[&[("tenant_id", t)][..], &ext[..]].concat(),
        )
    };
    assert_eq!(t("t-a"), Some(1000), "old tenant keeps what it earned");
    assert_eq!(
        t("t-b"),
        Some(300),
        "new tenant starts from the raw baseline"
    );
    assert_eq!(value(&s, "lachesis_bytes_total", &ext), Some(1300));
    let pp = |t: &str| {
        value(
            &s,
            "lachesis_port_proto_bytes_total",
            &[
                ("server_id", "s-1"),
                ("port_id", "p-1"),
                ("tenant_id", t),
                ("proto", "tcp"),
                ("direction", "tx"),
            ],
        )
    };
    assert_eq!((pp("t-a"), pp("t-b")), (Some(1000), Some(300)));
}

#[test]
fn router_regateway_rebases_only_that_routers_external_rows() {
    let attr = world();
    let l = ledger();
    let via_router = key(mac(1), mac(100), Tx, External, Tcp);
    let direct = key(mac(1), mac(2), Tx, SameTenant, Tcp);
    l.apply_drain(
        &attr,
        &[
            (via_router, reading(1000, 1, 1)),
            (direct, reading(50, 1, 1)),
        ],
        0,
    );
    let mut moved = attr.clone();
    moved.routers.insert(mac(100), "public-2".to_owned());
    let r = l.settle(
        &attr,
        SettleMode::Rebase(Selector::RouterPeer(mac(100))),
        || {},
    );
    assert_eq!(r.rows, 1);
    l.apply_drain(
        &moved,
        &[
            (via_router, reading(1200, 2, 1)),
            (direct, reading(60, 2, 1)),
        ],
        SEC,
    );
    let s = parse(&render(&l, &moved));
    let g = |net: &str| {
        value(
            &s,
            "lachesis_bytes_total",
            &[
                ("zone", "external"),
                ("external_network", net),
                ("direction", "tx"),
            ],
        )
    };
    assert_eq!((g("public"), g("public-2")), (Some(1000), Some(200)));
    // The port's proto series has no zone label: it must not have gone down.
    let pp = value(
        &s,
        "lachesis_port_proto_bytes_total",
        &[
            ("server_id", "s-1"),
            ("port_id", "p-1"),
            ("tenant_id", "t-a"),
            ("proto", "tcp"),
            ("direction", "tx"),
        ],
    );
    assert_eq!(pp, Some(1260));
}

/// An eviction keeps the port series, flat, for the retention window (so a
/// port bound again continues it); past the window it ends, and the server
/// and tenant series keep every byte.
#[test]
fn evict_retains_then_ends_the_port_series_and_keeps_server_and_tenant() {
    let attr = world();
    let l = ledger();
    let k = key(mac(2), mac(1), Rx, SameTenant, Udp);
    l.apply_drain(&attr, &[(k, reading(400, 4, 1))], 0);
    // A rebase first, so the MAC has port-settled bytes too.
    l.settle(&attr, SettleMode::Rebase(Selector::VmMac(mac(2))), || {});
    l.apply_drain(&attr, &[(k, reading(500, 5, 1))], SEC);
    let mut gone = attr.clone();
    gone.bindings.remove(&mac(2));
    let r = l.settle(&attr, SettleMode::Evict { vm_mac: mac(2) }, || {});
    assert_eq!(r.rows, 1);
    assert_eq!(l.sizes().rows, 0);
    let s = parse(&render(&l, &gone));
    let port: u64 = common::family(&s, "lachesis_port_bytes_total")
        .values()
        .sum();
    assert_eq!(port, 500, "retained, flat");
    l.use_attr(&gone);
    assert_eq!(l.expire_retained_ports(7_200, 3_600), 0, "stamped");
    assert_eq!(
        l.expire_retained_ports(10_799, 3_600),
        0,
        "inside the window"
    );
    assert_eq!(l.expire_retained_ports(10_800, 3_600), 1);
    let s = parse(&render(&l, &gone));
    assert!(common::family(&s, "lachesis_port_bytes_total").is_empty());
    assert!(common::family(&s, "lachesis_port_proto_bytes_total").is_empty());
    let srv = value(
        &s,
        "lachesis_server_bytes_total",
        &[
            ("server_id", "s-2"),
            ("tenant_id", "t-a"),
            ("zone", "same_tenant"),
            ("external_network", "none"),
            ("direction", "rx"),
        ],
    );
    assert_eq!(srv, Some(500));
    assert_eq!(
        tenant_bytes(&l, &gone, "t-a", "same_tenant", "none", "rx"),
        Some(500)
    );
}

#[test]
fn prune_servers_folds_into_tenant_and_defers_live_ones() {
    let attr = world();
    let l = ledger();
    for n in [1, 2] {
        l.apply_drain(
            &attr,
            &[(
                key(mac(n), mac(3), Tx, OtherTenant, Tcp),
                reading(100 * u64::from(n), 1, 1),
            )],
            0,
        );
    }
    let mut gone = attr.clone();
    gone.bindings.remove(&mac(2));
    l.settle(&attr, SettleMode::Evict { vm_mac: mac(2) }, || {});
    // The evicted port's series is retained, but its server is gone from
    // Nova (ids never return): the prune ends the retention and folds it.
    let port = |l: &common::Rig| {
        common::family(&parse(&render(l, &gone)), "lachesis_port_bytes_total")
            .keys()
            .any(|k| k[0].1 == "s-2")
    };
    assert!(port(&l), "retained while the server lives");
    assert_eq!(
        l.prune_servers(&gone, ["s-1", "s-2", "s-3"])
            .unwrap()
            .folded,
        0
    );
    assert!(port(&l), "still retained: s-2 is alive");
    assert_eq!(
        l.prune_servers(&gone, []),
        Err(PruneError::EmptyAliveList {
            tier: "server",
            what: "server"
        })
    );
    // s-2 is gone from Nova and has no live rows: its bucket folds up.
    let r = l.prune_servers(&gone, ["s-1", "s-3"]).unwrap();
    assert_eq!((r.folded, r.deferred), (1, 0));
    let s = parse(&render(&l, &gone));
    assert!(common::family(&s, "lachesis_server_bytes_total")
        .keys()
        .all(|k| k[0].1 != "s-2"));
    assert_eq!(
        tenant_bytes(&l, &gone, "t-a", "other_tenant", "none", "tx"),
        Some(300)
    );
    // A server still carrying live rows is deferred, never released early:
    // s-1 gets a second port whose MAC is evicted, while mac(1) lives on.
    let mut two_ports = gone.clone();
    two_ports
        .bindings
        .insert(mac(4), OwnedBinding::new("t-a", "s-1", "p-4"));
    l.apply_drain(
        &two_ports,
        &[(key(mac(4), mac(3), Tx, OtherTenant, Tcp), reading(40, 1, 1))],
        SEC,
    );
    l.settle(&two_ports, SettleMode::Evict { vm_mac: mac(4) }, || {});
    l.use_attr(&gone);
    l.expire_retained_ports(0, 0);
    let r = l.prune_servers(&gone, ["s-3"]).unwrap();
    assert_eq!((r.folded, r.deferred), (0, 1));
    let s = parse(&render(&l, &gone));
    let s1 = value(
        &s,
        "lachesis_server_bytes_total",
        &[
            ("server_id", "s-1"),
            ("tenant_id", "t-a"),
            ("zone", "other_tenant"),
            ("external_network", "none"),
            ("direction", "tx"),
        ],
    );
    assert_eq!(s1, Some(140));
}

#[test]
fn prune_tenants_folds_into_total_only_when_nothing_else_holds_the_tenant() {
    let attr = world();
    let l = ledger();
    let k = key(mac(3), mac(100), Tx, External, Tcp);
    l.apply_drain(&attr, &[(k, reading(900, 9, 1))], 0);
    let mut gone = attr.clone();
    gone.bindings.remove(&mac(3));
    l.settle(&attr, SettleMode::Evict { vm_mac: mac(3) }, || {});
    l.use_attr(&gone);
    l.expire_retained_ports(0, 0);
    // Server bucket still there: the tenant is referenced, nothing to fold yet.
    assert_eq!(l.prune_tenants(&gone, ["t-a"]).unwrap().folded, 0);
    l.prune_servers(&gone, ["s-1"]).unwrap();
    let r = l.prune_tenants(&gone, ["t-a"]).unwrap();
    assert_eq!((r.folded, r.deferred), (1, 0));
    let s = parse(&render(&l, &gone));
    assert!(common::family(&s, "lachesis_tenant_bytes_total")
        .keys()
        .all(|k| k[0].1 != "t-b"));
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
        Some(900)
    );
    assert!(l.prune_tenants(&gone, []).is_err());
}

#[test]
fn unknown_is_terminal_and_never_pruned() {
    let attr = world();
    let l = Rig::new(UnresolvedLimits {
        capacity: 10,
        ttl_ns: 0,
    });
    l.apply_drain(
        &attr,
        &[(key(mac(50), mac(100), Tx, Miss, Other), reading(77, 1, 1))],
        0,
    );
    l.prune_tenants(&attr, ["t-a"]).unwrap();
    assert_eq!(
        tenant_bytes(&l, &attr, "unknown", "miss", "none", "tx"),
        Some(77)
    );
}

#[test]
fn interner_is_part_of_the_ledger() {
    let l = ledger();
    assert_eq!(l.intern_tenant("t-a"), Ok(1));
    assert_eq!(l.intern_tenant("t-b"), Ok(2));
    assert_eq!(l.tenant_id("t-a"), Some(1));
    assert_eq!(l.snapshot().interner.len(), 2);
}

/// A scraper that read the attribution before a settle-and-swap and drained
/// after it must not resurrect the evicted MAC's row: the ledger loads the
/// attribution itself, inside the lock the settle swapped under.
#[test]
fn a_drain_after_an_evict_and_swap_sees_the_new_attribution() {
    use lachesis_ledger::memory::SwapSource;
    use lachesis_ledger::Ledger;
    let a0 = world();
    let mut a1 = a0.clone();
    a1.bindings.remove(&mac(1));
    let source = Arc::new(SwapSource::new(a0.clone()));
    let l = Arc::new(Ledger::new(
        UnresolvedLimits {
            capacity: 10,
            ttl_ns: 60 * SEC,
        },
        source.clone(),
    ));
    let dir = tempfile::tempdir().unwrap();
    let file = Arc::new(StateFile::new(StatePaths::new(
        dir.path().join("state.json"),
    )));
    let flush = || {
        file.flush(&l).unwrap();
    };
    let k = key(mac(1), mac(2), Tx, SameTenant, Tcp);
    l.apply_drain(&[(k, reading(1000, 10, 5))], 0).unwrap();
    // The sweeper evicts mac(1), swaps to a1 and flushes between the
    // scraper's map read and its drain.
    flush();
    l.settle(SettleMode::Evict { vm_mac: mac(1) }, || {
        source.store(a1.clone());
    })
    .unwrap();
    flush();
    l.apply_drain(&[(k, reading(1100, 11, 5))], SEC).unwrap();
    assert_eq!(l.sizes().rows, 0, "evicted MAC got a row back");
    assert_eq!(l.sizes().unresolved, 1, "its new bytes wait as unresolved");
    l.apply_drain::<(FlowKey, FlowCounters)>(&[], 200 * SEC)
        .unwrap();
    flush();
    // Whoever gets the MAC next starts from nothing.
    let mut a2 = a1.clone();
    a2.bindings
        .insert(mac(1), OwnedBinding::new("t-c", "s-9", "p-9"));
    source.store(a2);
    let mut text = String::new();
    lachesis_ledger::Exporter::new(l.clone(), file.clone())
        .render(lachesis_ledger::Format::OpenMetrics, &mut text)
        .unwrap();
    assert!(!text.contains("t-c"), "new owner billed old bytes:\n{text}");
}

/// Two MACs on one port (§6.3 allowed-address-pair, e.g. VRRP): ending one
/// keeps the live port's series; ending the last moves it to the server tier.
#[test]
fn evicting_one_of_two_macs_of_a_port_keeps_the_port_series() {
    let a0 = {
        let mut a = world();
        a.bindings
            .insert(mac(7), OwnedBinding::new("t-a", "s-1", "p-1"));
        a
    };
    let mut a1 = a0.clone();
    a1.bindings.remove(&mac(7));
    let l = ledger();
    let (k1, k7) = (
        key(mac(1), mac(2), Tx, SameTenant, Tcp),
        key(mac(7), mac(2), Tx, SameTenant, Udp),
    );
    l.apply_drain(
        &a0,
        &[(k1, reading(1000, 1, 1)), (k7, reading(500, 1, 2))],
        0,
    );
    let port_labels = [
        ("server_id", "s-1"),
        ("port_id", "p-1"),
        ("tenant_id", "t-a"),
        ("zone", "same_tenant"),
        ("external_network", "none"),
        ("direction", "tx"),
    ];
    let proto = |p| {
        [
            ("server_id", "s-1"),
            ("port_id", "p-1"),
            ("tenant_id", "t-a"),
            ("proto", p),
            ("direction", "tx"),
        ]
    };
    let server = [
        ("server_id", "s-1"),
        ("tenant_id", "t-a"),
        ("zone", "same_tenant"),
        ("external_network", "none"),
        ("direction", "tx"),
    ];
    let s = parse(&render(&l, &a0));
    assert_eq!(
        value(&s, "lachesis_port_bytes_total", &port_labels),
        Some(1500)
    );
    l.settle(&a0, SettleMode::Evict { vm_mac: mac(7) }, || {});
    let s = parse(&render(&l, &a1));
    assert_eq!(
        value(&s, "lachesis_port_bytes_total", &port_labels),
        Some(1500)
    );
    assert_eq!(
        value(&s, "lachesis_port_proto_bytes_total", &proto("udp")),
        Some(500)
    );
    assert_eq!(
        value(&s, "lachesis_server_bytes_total", &server),
        Some(1500)
    );
    // The port's last MAC goes: past the retention its series end, the
    // server keeps every byte.
    let mut a2 = a1.clone();
    a2.bindings.remove(&mac(1));
    l.settle(&a1, SettleMode::Evict { vm_mac: mac(1) }, || {});
    let s = parse(&render(&l, &a2));
    assert_eq!(
        value(&s, "lachesis_port_bytes_total", &port_labels),
        Some(1500)
    );
    l.use_attr(&a2);
    assert_eq!(l.expire_retained_ports(0, 0), 1);
    let s = parse(&render(&l, &a2));
    assert_eq!(value(&s, "lachesis_port_bytes_total", &port_labels), None);
    assert_eq!(
        value(&s, "lachesis_port_proto_bytes_total", &proto("tcp")),
        None
    );
    assert_eq!(
        value(&s, "lachesis_server_bytes_total", &server),
        Some(1500)
    );
}

/// §9 pressure relief: the row stays, the entry is released for deletion
/// by the next flush, and its final reading (it kept counting after the
/// drain that chose it) is applied; its next entry is a new one.
#[test]
fn pressure_relief_keeps_the_row_and_reads_the_entry_to_its_last_byte() {
    let attr = world();
    let l = ledger();
    let k = key(mac(1), mac(2), Tx, SameTenant, Tcp);
    let never_drained = key(mac(2), mac(1), Rx, SameTenant, Udp);
    l.apply_drain(&attr, &[(k, reading(1000, 10, 5))], 0);
    l.ledger.relieve(&[k, never_drained]);
    assert!(l.take_released().is_empty(), "released only by a flush");
    l.commit();
    assert_eq!(l.take_released(), vec![k], "nothing it does not track");
    l.apply_final(&attr, &[(k, reading(1300, 13, 5))], SEC);
    assert_eq!(l.sizes().rows, 1);
    l.apply_drain(&attr, &[(k, reading(50, 1, 9))], 2 * SEC);
    assert_eq!(
        tenant_bytes(&l, &attr, "t-a", "same_tenant", "none", "tx"),
        Some(1350)
    );
    assert_eq!(l.health().lost_final_readings, 0);
}

/// §4.4, §12: a retired map's entries continue from the restored baselines
/// only if it is drained (and that drain flushed) before the live map, whose
/// entries of the same keys are new ones. The ledger holds the order.
#[test]
fn the_retired_map_is_drained_and_flushed_before_the_live_one() {
    use lachesis_ledger::DrainError;
    let attr = world();
    let k = key(mac(1), mac(2), Tx, SameTenant, Tcp);
    let before = ledger();
    before.apply_drain(&attr, &[(k, reading(1000, 10, 5))], 0);
    before.commit();
    let l = ledger();
    l.use_attr(&attr);
    l.restore_loaded(lachesis_ledger::state::load(&before.paths()).unwrap(), SEC)
        .unwrap();
    l.expect_retired(1);
    let live = [(k, reading(30, 1, 9))];
    let retired = [(k, reading(1200, 12, 5))];
    assert_eq!(
        l.ledger.apply_drain(&live, SEC),
        Err(DrainError::RetiredNotDrained { left: 1 })
    );
    l.ledger.apply_retired(&retired, SEC).unwrap();
    assert_eq!(
        l.ledger.apply_drain(&live, SEC),
        Err(DrainError::RetiredNotDurable)
    );
    l.commit();
    l.ledger.apply_drain(&live, 2 * SEC).unwrap();
    assert_eq!(
        l.ledger.apply_retired(&retired, 2 * SEC),
        Err(DrainError::RetiredAfterLive)
    );
    assert_eq!(
        tenant_bytes(&l, &attr, "t-a", "same_tenant", "none", "tx"),
        Some(1230)
    );
}

/// Issue 8: the ghost sweep (§9) evicts the row, flushes, deletes the
/// kernel entry and applies its final reading. When that reading adds
/// nothing, nothing is unknown: no `unknown` series may appear. When it
/// does add bytes, they still end in `unknown` (no row may take them).
#[test]
fn a_final_reading_after_a_ghost_eviction_adds_to_unknown_only_what_it_carries() {
    for (last, packets, unknown_bytes) in [(400, 4, None), (450, 5, Some(50))] {
        let attr = world();
        let l = ledger();
        let k = key(mac(2), mac(1), Rx, SameTenant, Udp);
        l.apply_drain(&attr, &[(k, reading(400, 4, 1))], 0);
        l.settle(&attr, SettleMode::Evict { vm_mac: mac(2) }, || {});
        assert_eq!(l.take_released(), vec![k]);
        let mut gone = attr.clone();
        gone.bindings.remove(&mac(2));
        l.apply_final(&gone, &[(k, reading(last, packets, 1))], SEC);
        l.commit();
        let s = parse(&render(&l, &gone));
        let unknown: Vec<_> = common::family(&s, "lachesis_tenant_bytes_total")
            .into_iter()
            .filter(|(labels, _)| {
                labels
                    .iter()
                    .any(|(n, v)| n == "tenant_id" && v == "unknown")
            })
            .map(|(_, v)| v)
            .collect();
        assert_eq!(
            unknown.iter().copied().reduce(|a, b| a + b),
            unknown_bytes,
            "last={last}"
        );
        assert_eq!(
            tenant_bytes(&l, &gone, "t-a", "same_tenant", "none", "rx"),
            Some(400),
            "last={last}"
        );
        assert_eq!(l.health().lost_final_readings, 0);
    }
}

/// A's series (server `s-1`, its port `p-1`) of every billing family.
fn series_of_a(s: &common::Samples) -> Vec<(String, common::Labels, u64)> {
    let mut out = Vec::new();
    for name in [
        "lachesis_port_bytes_total",
        "lachesis_port_packets_total",
        "lachesis_port_proto_bytes_total",
        "lachesis_server_bytes_total",
    ] {
        for (labels, v) in common::family(s, name) {
            if labels.iter().any(|(k, v)| k == "server_id" && v == "s-1") {
                out.push((name.to_owned(), labels, v));
            }
        }
    }
    out
}

#[test]
fn evicting_a_peer_folds_the_rows_naming_it_and_every_series_goes_on() {
    // A (mac 1) talks to X (mac 2) and through the router; X talks back.
    let attr = world();
    let l = ledger();
    let to_x = key(mac(1), mac(2), Tx, SameTenant, Tcp);
    let from_x = key(mac(1), mac(2), Rx, SameTenant, Tcp);
    let out = key(mac(1), mac(100), Tx, External, Udp);
    let xs = key(mac(2), mac(1), Tx, SameTenant, Tcp);
    l.apply_drain(
        &attr,
        &[
            (to_x, reading(1000, 10, 1)),
            (from_x, reading(300, 3, 2)),
            (out, reading(50, 1, 3)),
            (xs, reading(300, 3, 4)),
        ],
        0,
    );
    let before = parse(&render(&l, &attr));
    assert_eq!(l.sizes().rows, 4);
    // X's port is deleted and swept: its own row and the two of A that
    // name it leave the book; only A's row through the router stays.
    let report = l.settle(&attr, SettleMode::Evict { vm_mac: mac(2) }, || {});
    assert_eq!((report.rows, report.moved.bytes), (3, 1600));
    assert_eq!(l.sizes().rows, 1);
    let mut released = l.take_released();
    released.sort();
    let mut want = vec![to_x, from_x, xs];
    want.sort();
    assert_eq!(released, want, "every sub-entry of the folded rows");
    let mut gone = attr.clone();
    gone.bindings.remove(&mac(2));
    let after = parse(&render(&l, &gone));
    assert_eq!(
        series_of_a(&after),
        series_of_a(&before),
        "A's series go on"
    );
    for family in ["lachesis_bytes_total", "lachesis_tenant_bytes_total"] {
        assert_eq!(
            common::family(&after, family),
            common::family(&before, family),
            "{family}"
        );
    }
    // The deletes' final readings: A's entry to X carries 40 bytes more,
    // counted once, under A; the others nothing new.
    l.apply_final(
        &gone,
        &[
            (to_x, reading(1040, 11, 1)),
            (from_x, reading(300, 3, 2)),
            (xs, reading(300, 3, 4)),
        ],
        SEC,
    );
    let port_tx = |s: &common::Samples| common::port_tx(s, "s-1", "p-1", "t-a", "same_tenant");
    assert_eq!(port_tx(&parse(&render(&l, &gone))), Some(1040));
    // A talks to that MAC again (a new entry): only its own bytes add.
    l.apply_drain(
        &gone,
        &[(out, reading(50, 1, 3)), (to_x, reading(60, 1, 9))],
        2 * SEC,
    );
    assert_eq!(port_tx(&parse(&render(&l, &gone))), Some(1100));
    assert_eq!(l.health().lost_final_readings, 0);
}
