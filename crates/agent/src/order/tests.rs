//! The owner's order, recorded on the fake kernel, and its outcomes read
//! back from the ledger's export (the durable view a scrape shows).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use lachesis_abi::{Direction, EntryKey, FlowCounters, FlowKey, L4Class, Mac, Zone};
use lachesis_ledger::state::{self, StatePaths};
use lachesis_ledger::{CommittedPlan, Exporter, Format, UnresolvedLimits};
use lachesis_planner::{Binding, Plan};
use prometheus_client::metrics::gauge::Gauge;
use tokio::time::Instant;

use super::fake::{Call, FakeKernel, FakeRetired};
use super::*;
use crate::reconcile::{
    AttributionSnapshot, BindingTable, Ghost, LedgerOrder, Settle, SettleBatch,
};

fn mac(n: u8) -> Mac {
    Mac([2, 0, 0, 0, 0, n])
}

/// A tx key of `vm` towards a same-tenant peer.
fn key(vm: Mac, peer: u8) -> FlowKey {
    FlowKey {
        src_mac: vm.0,
        dst_mac: mac(200 + peer).0,
        eth_proto: 0x0800,
        direction: Direction::Tx.code(),
        zone: Zone::SameTenant.code(),
        l4: L4Class::Tcp.code(),
        pad: 0,
    }
}

fn bind(m: Mac, tenant: &str) -> Binding {
    Binding {
        mac: m,
        tenant: tenant.to_owned(),
        server: format!("server-{}", m.0[5]),
        port: format!("port-{}", m.0[5]),
        external_network: None,
        amphora: false,
    }
}

fn snap(bindings: &[Binding]) -> AttributionSnapshot {
    AttributionSnapshot {
        live: bindings.iter().map(|b| (b.mac, b.clone())).collect(),
        ..AttributionSnapshot::default()
    }
}

fn planned(s: AttributionSnapshot) -> PlannedAttribution {
    PlannedAttribution {
        snapshot: Arc::new(s),
        plan: CommittedPlan::encode(&Plan::default()).unwrap(),
        tree: Arc::new(Plan::default()),
    }
}

fn batch(settles: Vec<Settle>, next: AttributionSnapshot) -> SettleBatch {
    SettleBatch {
        settles,
        attribution: Arc::new(next),
        plan: Arc::new(Plan::default()),
        ghosted_at: BTreeMap::new(),
    }
}

fn rebase(m: Mac, from: &str, to: &str) -> Settle {
    Settle::RebaseMac {
        mac: m,
        from: bind(m, from),
        to: bind(m, to),
    }
}

/// The batch that re-points MAC 1 from project A to project B.
fn a_to_b() -> SettleBatch {
    batch(
        vec![rebase(mac(1), "t-a", "t-b")],
        snap(&[bind(mac(1), "t-b")]),
    )
}

/// What [`a_to_b`] does, one entry counting: drain → flush → settle and
/// swap → flush.
fn a_to_b_steps() -> Vec<Call> {
    vec![
        Call::Drain,
        Call::Ledger(Step::Applied { entries: 1 }),
        Call::Ledger(Step::Flushed { released: 0 }),
        Call::Ledger(Step::Settled("rebase")),
        Call::Ledger(Step::Swapped),
        Call::Ledger(Step::Flushed { released: 0 }),
    ]
}

struct Rig {
    kernel: FakeKernel,
    owner: LedgerOwner<FakeKernel>,
    paths: StatePaths,
    _dir: tempfile::TempDir,
}

fn rig(capacity: u32, initial: AttributionSnapshot) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let paths = StatePaths::new(dir.path().join("state.json"));
    let kernel = FakeKernel::new(capacity);
    let owner = LedgerOwner::new(
        kernel.clone(),
        UnresolvedLimits::default(),
        planned(initial),
        paths.clone(),
        OrderMetrics::unregistered(),
    );
    Rig {
        kernel,
        owner,
        paths,
        _dir: dir,
    }
}

/// Sum of the samples of `family` whose labels contain `filter`.
fn exported(owner: &LedgerOwner<FakeKernel>, family: &str, filter: &str) -> u64 {
    let mut body = String::new();
    Exporter::new(owner.ledger().clone(), owner.state_file().clone())
        .render(Format::PrometheusText, &mut body)
        .unwrap();
    body.lines()
        .filter(|l| l.starts_with(&format!("{family}{{")) && l.contains(filter))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum()
}

fn tenant_bytes(owner: &LedgerOwner<FakeKernel>, tenant: &str) -> u64 {
    exported(
        owner,
        "lachesis_tenant_bytes_total",
        &format!("tenant_id=\"{tenant}\""),
    )
}

fn all_bytes(owner: &LedgerOwner<FakeKernel>) -> u64 {
    exported(owner, "lachesis_bytes_total", "")
}

const RELIEF_OFF: Relief = Relief {
    high: 0.99,
    low: 0.98,
    max_evictions: 1000,
};

#[test]
fn a_settle_batch_drains_then_flushes_before_and_after_its_settles() {
    let r = rig(100, snap(&[bind(mac(1), "t-a")]));
    r.kernel.count(key(mac(1), 1), 1000);
    r.owner.scrape(RELIEF_OFF).unwrap();
    r.owner.flush().unwrap();
    // Counted under project A since the last scrape: must stay with A.
    r.kernel.count(key(mac(1), 1), 500);
    r.kernel.clear_log();

    r.owner.settle_batch_now(a_to_b()).unwrap();

    assert_eq!(r.kernel.log(), a_to_b_steps());
    r.kernel.count(key(mac(1), 1), 200);
    r.owner.scrape(RELIEF_OFF).unwrap();
    r.owner.flush().unwrap();
    assert_eq!(tenant_bytes(&r.owner, "t-a"), 1500);
    assert_eq!(tenant_bytes(&r.owner, "t-b"), 200);
    // The second flush wrote the swapped attribution's plan.
    assert_eq!(
        state::load(&r.paths).unwrap().plan,
        CommittedPlan::encode(&Plan::default()).unwrap()
    );
}

#[tokio::test]
async fn the_reconciler_seam_runs_the_same_batch_and_a_settle_free_one_only_swaps() {
    let r = rig(100, snap(&[bind(mac(1), "t-a")]));
    r.kernel.count(key(mac(1), 1), 300);
    r.owner.scrape(RELIEF_OFF).unwrap();
    r.kernel.clear_log();
    // A batch that only learns a binding moves no bytes: swap, then flush.
    LedgerOrder::settle_batch(
        &r.owner,
        batch(vec![], snap(&[bind(mac(1), "t-a"), bind(mac(2), "t-c")])),
    )
    .await
    .unwrap();
    assert_eq!(
        r.kernel.log(),
        vec![
            Call::Ledger(Step::Swapped),
            Call::Ledger(Step::Flushed { released: 0 }),
        ]
    );
    assert!(r.owner.attribution().snapshot.live.contains_key(&mac(2)));
    r.kernel.clear_log();
    LedgerOrder::settle_batch(&r.owner, a_to_b()).await.unwrap();
    let log = r.kernel.log();
    let flushes: Vec<usize> = log
        .iter()
        .enumerate()
        .filter(|(_, c)| matches!(c, Call::Ledger(Step::Flushed { .. })))
        .map(|(i, _)| i)
        .collect();
    let settle = log
        .iter()
        .position(|c| *c == Call::Ledger(Step::Settled("rebase")))
        .unwrap();
    assert_eq!(flushes.len(), 2, "{log:?}");
    assert!(flushes[0] < settle && settle < flushes[1], "{log:?}");
    assert_eq!(log[0], Call::Drain);
    assert_eq!(tenant_bytes(&r.owner, "t-a"), 300);
    assert_eq!(
        r.owner.tenant_id("t-a").unwrap(),
        r.owner.tenant_id("t-a").unwrap()
    );
}

/// A table holding `live` and the ghost `ghost`, ghosted at `since`.
fn table_with_ghost(live: &[Binding], ghost: &Binding, since: Instant) -> BindingTable {
    let plan = Plan {
        bindings: live.to_vec(),
        ..Plan::default()
    };
    let mut table = BindingTable::from_plan(&plan, &[], &[], Gauge::default());
    let mut attr = snap(live);
    attr.ghosts.insert(ghost.mac, ghost.clone());
    let ghosts = BTreeMap::from([(
        ghost.mac,
        Ghost {
            binding: ghost.clone(),
            since,
        },
    )]);
    table.install(Arc::new(attr), ghosts);
    table
}

#[test]
fn the_sweep_runs_the_section_9_order_and_reads_the_last_bytes_of_a_counting_entry() {
    let since = Instant::now();
    let live = bind(mac(1), "t-a");
    let gone = bind(mac(2), "t-a");
    let mut table = table_with_ghost(&[live], &gone, since);
    let r = rig(100, (*table.attribution()).clone());
    r.kernel.count(key(mac(2), 1), 300);
    r.owner.scrape(RELIEF_OFF).unwrap();
    r.owner.flush().unwrap();
    r.kernel.count(key(mac(2), 1), 100); // not yet drained
    r.kernel.state().count_during_evict = Some((key(mac(2), 1), 40));
    r.kernel.clear_log();

    let mut sweep_at = |secs: u64| {
        let now = since + Duration::from_secs(secs);
        r.owner
            .sweep(&mut table, now, Duration::from_mins(1))
            .unwrap()
    };
    // Inside the grace: nothing happens.
    assert_eq!(sweep_at(59), 0);
    assert!(r.kernel.log().is_empty());
    assert_eq!(sweep_at(61), 1);
    assert_eq!(
        r.kernel.log(),
        vec![
            Call::DeleteBinding(mac(2)),
            Call::Drain,
            Call::Ledger(Step::Applied { entries: 1 }),
            Call::Ledger(Step::Flushed { released: 0 }),
            Call::Ledger(Step::Settled("evict")),
            Call::Ledger(Step::Swapped),
            Call::Ledger(Step::GhostsForgotten(1)),
            Call::Ledger(Step::Flushed { released: 1 }),
            Call::LookupDelete(vec![key(mac(2), 1)]),
            Call::Ledger(Step::AppliedFinal { entries: 1 }),
            Call::Ledger(Step::Flushed { released: 0 }),
        ]
    );
    assert!(table.ghosts().is_empty());
    assert!(r.owner.attribution().snapshot.ghosts.is_empty());
    assert!(r.kernel.state().flows.is_empty());
    // A kept what was drained under it; the 40 counted after the final
    // drain, with no binding left, went to `unknown`; nothing was lost.
    assert_eq!(tenant_bytes(&r.owner, "t-a"), 400);
    assert_eq!(tenant_bytes(&r.owner, "unknown"), 40);
    assert_eq!(all_bytes(&r.owner), r.kernel.state().counted);
    assert_eq!(r.owner.ledger().health().lost_final_readings, 0);
    assert_eq!(r.owner.metrics().gc_count(Gc::GhostSweep), 1);
}

#[test]
fn boot_drains_the_retired_maps_before_the_live_one_then_settles_to_the_fresh_plan() {
    let r = rig(100, snap(&[bind(mac(1), "t-a")]));
    let k = key(mac(1), 1);
    let retired = vec![
        r.kernel.retired(1, k, 700),
        r.kernel.retired(2, key(mac(1), 2), 50),
    ];
    r.kernel.count(k, 100);
    let loaded = state::load(&r.paths).unwrap();
    r.owner.boot(loaded, retired, a_to_b()).unwrap();
    assert_eq!(
        r.kernel.log(),
        vec![
            Call::RetiredDrain(1),
            Call::Ledger(Step::AppliedRetired),
            Call::RetiredDrain(2),
            Call::Ledger(Step::AppliedRetired),
            Call::Ledger(Step::Flushed { released: 0 }),
            Call::RetiredRemoved(1),
            Call::RetiredRemoved(2),
        ]
        .into_iter()
        .chain(a_to_b_steps())
        .collect::<Vec<_>>()
    );
    assert_eq!(tenant_bytes(&r.owner, "t-a"), 850);
    assert_eq!(all_bytes(&r.owner), r.kernel.state().counted);
}

#[test]
fn boot_restores_under_the_file_plan_then_settles_to_the_fresh_one() {
    let first = rig(100, snap(&[bind(mac(1), "t-a")]));
    let k = key(mac(1), 1);
    first.kernel.count(k, 1000);
    first.owner.shutdown().unwrap();
    first.kernel.count(k, 500); // counted while the agent restarts

    // The next life: same kernel map, same state file, the file's plan.
    let owner = LedgerOwner::new(
        first.kernel.clone(),
        UnresolvedLimits::default(),
        planned(snap(&[bind(mac(1), "t-a")])),
        first.paths.clone(),
        OrderMetrics::unregistered(),
    );
    let loaded = state::load(&first.paths).unwrap();
    owner
        .boot(loaded, Vec::<FakeRetired>::new(), a_to_b())
        .unwrap();
    first.kernel.count(k, 200);
    owner.shutdown().unwrap();
    assert_eq!(tenant_bytes(&owner, "t-a"), 1500);
    assert_eq!(tenant_bytes(&owner, "t-b"), 200);
    assert_eq!(all_bytes(&owner), first.kernel.state().counted);
}

fn reading(last_seen_ns: u64) -> FlowCounters {
    FlowCounters {
        bytes: 1,
        packets: 1,
        last_seen_ns,
        created_ns: 1,
    }
}

#[test]
fn least_recent_picks_the_oldest_down_to_below_the_low_watermark() {
    // Ten entries in a ten-entry map, last seen in a shuffled order.
    let seen = [7u64, 3, 9, 0, 5, 1, 8, 2, 6, 4];
    let entries: Vec<(EntryKey, FlowCounters)> = seen
        .iter()
        .map(|s| {
            let k = key(mac(u8::try_from(*s).unwrap() + 1), 1);
            (EntryKey::new(k, 0), reading(*s))
        })
        .collect();
    let relief = Relief {
        high: 0.8,
        low: 0.75,
        max_evictions: 1000,
    };
    let oldest = |n: u64| -> Vec<EntryKey> {
        (0..n)
            .map(|s| EntryKey::new(key(mac(u8::try_from(s).unwrap() + 1), 1), 0))
            .collect()
    };
    // Fill 1.0: 7 may stay (7/10 < 0.75, 8/10 is not): the 3 oldest go.
    assert_eq!(least_recent(&entries, 10, relief), oldest(3));
    // The cap bounds one pass.
    let capped = Relief {
        max_evictions: 2,
        ..relief
    };
    assert_eq!(least_recent(&entries, 10, capped), oldest(2));
    // At the high watermark exactly: no pass.
    assert!(least_recent(&entries[..8], 10, relief).is_empty());
    // Just above it: down to strictly below the low watermark.
    assert_eq!(least_recent(&entries, 12, relief).len(), 10 - 8);
}

/// Relief picks sub-entries, not flows (DESIGN §4.7): the idle CPU of a
/// live flow falls out before any flow's active sub-entry.
#[test]
fn least_recent_evicts_the_idle_cpus_of_live_flows_first() {
    // Fill 1.0 in a 4-entry map: down to 2 (strictly below 0.75).
    let relief = Relief {
        high: 0.8,
        low: 0.75,
        max_evictions: 1000,
    };
    let (busy, quiet) = (key(mac(1), 1), key(mac(2), 1));
    let entries = vec![
        (EntryKey::new(busy, 0), reading(100)),
        (EntryKey::new(busy, 5), reading(3)),
        (EntryKey::new(quiet, 2), reading(50)),
        (EntryKey::new(busy, 7), reading(90)),
    ];
    assert_eq!(
        least_recent(&entries, 4, relief),
        vec![EntryKey::new(busy, 5), EntryKey::new(quiet, 2)]
    );
}

#[test]
fn pressure_relief_after_the_drain_deletes_the_oldest_and_keeps_their_bytes() {
    let bindings: Vec<Binding> = (1..=9).map(|n| bind(mac(n), "t-a")).collect();
    let r = rig(10, snap(&bindings));
    for n in 1..=9 {
        r.kernel.count(key(mac(n), 1), 100);
    }
    r.kernel.clear_log();
    let report = r
        .owner
        .scrape(Relief {
            high: 0.8,
            low: 0.75,
            max_evictions: 1000,
        })
        .unwrap();
    assert_eq!(
        report,
        ScrapeReport {
            entries: 9,
            relieved: 2
        }
    );
    let log = r.kernel.log();
    assert_eq!(log[0], Call::Drain);
    assert_eq!(log[1], Call::Ledger(Step::Applied { entries: 9 }));
    assert_eq!(log[2], Call::Ledger(Step::Flushed { released: 2 }));
    let Call::LookupDelete(deleted) = &log[3] else {
        panic!("{log:?}")
    };
    let mut deleted = deleted.clone();
    deleted.sort();
    assert_eq!(deleted, vec![key(mac(1), 1), key(mac(2), 1)]);
    assert_eq!(log[4], Call::Ledger(Step::AppliedFinal { entries: 2 }));
    assert_eq!(log[5], Call::Ledger(Step::Flushed { released: 0 }));
    assert_eq!(r.kernel.state().flows.len(), 7);
    assert_eq!(r.owner.metrics().relief_count(), 1);
    assert_eq!(r.owner.metrics().gc_count(Gc::Pressure), 2);
    // The rows stay: a relieved entry counting again is a new entry.
    r.kernel.count(key(mac(1), 1), 50);
    r.owner.shutdown().unwrap();
    assert_eq!(tenant_bytes(&r.owner, "t-a"), 950);
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[usize::try_from(self.next(items.len() as u64)).unwrap()]
    }
}

/// One random sequence; returns the ghost-sweep and pressure deletes it made.
fn random_sequence(seed: u64) -> (u64, u64) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let tenants = ["t-a", "t-b", "t-c"];
    let macs: Vec<Mac> = (1..=6).map(mac).collect();
    let mut attr = snap(&macs.iter().map(|m| bind(*m, "t-a")).collect::<Vec<_>>());
    let plan = Plan {
        bindings: attr.live.values().cloned().collect(),
        ..Plan::default()
    };
    let mut table = BindingTable::from_plan(&plan, &[], &[], Gauge::default());
    let r = rig(16, attr.clone());
    let epoch = Instant::now();
    let relief = Relief {
        high: 0.8,
        low: 0.5,
        max_evictions: 3,
    };
    for step in 0..150u64 {
        let m = rng.pick(&macs);
        match rng.next(10) {
            0..=3 => r
                .kernel
                .count(key(m, rng.pick(&[0, 1, 2, 3])), 1 + rng.next(900)),
            4 => drop(r.owner.scrape(relief).unwrap()),
            5 => r.owner.flush().unwrap(),
            6 => {
                // Re-point a live binding to another project.
                let Some(old) = attr.live.get(&m).cloned() else {
                    continue;
                };
                let to = rng.pick(&tenants);
                if to == old.tenant {
                    continue;
                }
                attr.live.insert(m, bind(m, to));
                r.owner
                    .settle_batch_now(batch(vec![rebase(m, &old.tenant, to)], attr.clone()))
                    .unwrap();
                table.install(Arc::new(attr.clone()), table.ghosts().clone());
            }
            7 => {
                // The port goes: ghost it (a settle-free batch).
                let Some(old) = attr.live.remove(&m) else {
                    continue;
                };
                attr.ghosts.insert(m, old.clone());
                r.owner
                    .settle_batch_now(batch(vec![], attr.clone()))
                    .unwrap();
                let mut ghosts = table.ghosts().clone();
                ghosts.insert(
                    m,
                    Ghost {
                        binding: old,
                        since: epoch,
                    },
                );
                table.install(Arc::new(attr.clone()), ghosts);
            }
            8 => {
                r.owner
                    .sweep(
                        &mut table,
                        epoch + Duration::from_secs(step),
                        Duration::ZERO,
                    )
                    .unwrap();
                attr = (*table.attribution()).clone();
            }
            _ => {
                // A MAC comes back (a new port): learned without a settle.
                if attr.binding(m).is_some() {
                    continue;
                }
                attr.live.insert(m, bind(m, rng.pick(&tenants)));
                r.owner
                    .settle_batch_now(batch(vec![], attr.clone()))
                    .unwrap();
                table.install(Arc::new(attr.clone()), table.ghosts().clone());
            }
        }
    }
    // Every MAC bound again, so nothing waits unresolved; then shutdown.
    for m in &macs {
        if attr.binding(*m).is_none() {
            attr.live.insert(*m, bind(*m, "t-a"));
        }
    }
    r.owner
        .settle_batch_now(batch(vec![], attr.clone()))
        .unwrap();
    r.owner.shutdown().unwrap();
    assert_eq!(
        all_bytes(&r.owner),
        r.kernel.state().counted,
        "seed {seed}: exported bytes differ from the bytes the kernel counted"
    );
    assert_eq!(
        r.owner.ledger().health().lost_final_readings,
        0,
        "seed {seed}"
    );
    let m = r.owner.metrics();
    (m.gc_count(Gc::GhostSweep), m.gc_count(Gc::Pressure))
}

#[test]
fn random_scrapes_settles_sweeps_and_reliefs_conserve_every_counted_byte() {
    let (mut swept, mut relieved) = (0, 0);
    for seed in 1..=12u64 {
        let (s, r) = random_sequence(seed);
        swept += s;
        relieved += r;
    }
    // The sequences did exercise both kinds of kernel flow delete.
    assert!(
        swept > 10 && relieved > 10,
        "swept {swept}, relieved {relieved}"
    );
}

fn tunables(scrape: Duration) -> Arc<crate::config::SharedTunables> {
    let mut t = crate::config::Config::default().tunables;
    t.scrape_interval = scrape;
    t.state_flush_interval = Duration::from_hours(1);
    t.ghost_sweep_interval = Duration::from_hours(1);
    Arc::new(crate::config::SharedTunables::new(t))
}

fn drains(kernel: &FakeKernel) -> usize {
    kernel.log().iter().filter(|c| **c == Call::Drain).count()
}

#[tokio::test(start_paused = true)]
async fn the_scraper_waits_for_state_restored_and_reads_its_interval_live() {
    use crate::boot::{BootGate, Phase};
    let r = rig(100, snap(&[bind(mac(1), "t-a")]));
    let gate = BootGate::new();
    let tunables = tunables(Duration::from_secs(1));
    let cancel = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(run_scraper(
        r.owner.clone(),
        tunables.clone(),
        gate.waiter(),
        cancel.clone(),
    ));
    gate.advance(Phase::BpfLoaded).unwrap();
    gate.advance(Phase::MetadataReady).unwrap();
    gate.advance(Phase::Attached).unwrap();
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(drains(&r.kernel), 0, "no drain before state_restored");

    gate.advance(Phase::StateRestored).unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(drains(&r.kernel), 1);

    // A reload to 10 s applies from the next wait on.
    let mut t = tunables.get();
    t.scrape_interval = Duration::from_secs(10);
    tunables.set(t);
    tokio::time::sleep(Duration::from_secs(1)).await; // the wait begun at 1 s ends
    let before = drains(&r.kernel);
    tokio::time::sleep(Duration::from_secs(9)).await;
    assert_eq!(drains(&r.kernel), before, "the 10 s interval is in force");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(drains(&r.kernel), before + 1);

    cancel.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn flusher_and_sweeper_wait_for_state_restored_and_a_failed_boot_releases_them() {
    use crate::boot::{BootGate, Phase};
    let r = rig(100, snap(&[bind(mac(1), "t-a")]));
    let gate = BootGate::new();
    let mut t = crate::config::Config::default().tunables;
    t.state_flush_interval = Duration::from_secs(1);
    t.ghost_sweep_interval = Duration::from_secs(1);
    t.ghost_grace = Duration::ZERO;
    let tunables = Arc::new(crate::config::SharedTunables::new(t));
    let cancel = tokio_util::sync::CancellationToken::new();
    let since = Instant::now();
    let table: crate::reconcile::SharedTable = Arc::new(tokio::sync::Mutex::new(table_with_ghost(
        &[bind(mac(1), "t-a")],
        &bind(mac(2), "t-a"),
        since,
    )));
    let flusher = tokio::spawn(run_flusher(
        r.owner.clone(),
        tunables.clone(),
        gate.waiter(),
        cancel.clone(),
    ));
    let sweeper = tokio::spawn(run_sweeper(
        r.owner.clone(),
        table.clone(),
        tunables.clone(),
        gate.waiter(),
        cancel.clone(),
    ));
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(r.kernel.log().is_empty(), "{:?}", r.kernel.log());
    assert!(!r.paths.current.exists());

    for p in [
        Phase::BpfLoaded,
        Phase::MetadataReady,
        Phase::Attached,
        Phase::StateRestored,
    ] {
        gate.advance(p).unwrap();
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(r.paths.current.exists(), "the flusher wrote the state file");
    assert!(r.kernel.log().contains(&Call::DeleteBinding(mac(2))));
    assert!(table.lock().await.ghosts().is_empty());
    cancel.cancel();
    flusher.await.unwrap().unwrap();
    sweeper.await.unwrap().unwrap();

    // A boot that fails releases a waiting task with the reason.
    let failed = BootGate::new();
    let waiting = tokio::spawn(run_flusher(
        r.owner.clone(),
        tunables,
        failed.waiter(),
        tokio_util::sync::CancellationToken::new(),
    ));
    failed.fail("no state directory");
    let err = waiting.await.unwrap().unwrap_err();
    assert_eq!(&*err.reason, "no state directory");
}

/// Every family the owner registers is in docs/metrics.md with the type
/// and labels it renders (the datapath's under owner `datapath`).
#[test]
fn the_owner_families_match_the_catalogue() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/metrics.md");
    let doc = std::fs::read_to_string(path).unwrap();
    let rows: BTreeMap<String, (String, String, String)> = doc
        .lines()
        .filter_map(|l| {
            let c: Vec<&str> = l.split('|').map(str::trim).collect();
            (c.len() >= 6 && c[1].starts_with("`lachesis_")).then(|| {
                let labels = c[3].replace(['`', '—'], "");
                (
                    c[1].trim_matches('`').to_owned(),
                    (c[2].to_owned(), labels, c[4].to_owned()),
                )
            })
        })
        .collect();
    let mut registry = prometheus_client::registry::Registry::default();
    let _m = OrderMetrics::register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    let mut seen = 0;
    for decl in text.lines().filter_map(|l| l.strip_prefix("# TYPE ")) {
        let (family, kind) = decl.split_once(' ').unwrap();
        let sample = text
            .lines()
            .find(|l| !l.starts_with('#') && l.starts_with(family))
            .unwrap();
        let labels: Vec<&str> = sample
            .split_once('{')
            .map_or("", |(_, rest)| rest.split_once('}').unwrap().0)
            .split(',')
            .filter_map(|kv| kv.split_once('=').map(|(k, _)| k))
            .filter(|k| *k != "le")
            .collect();
        let name = if kind == "counter" {
            format!("{family}_total")
        } else {
            family.to_owned()
        };
        let (doc_kind, doc_labels, owner) = rows
            .get(&name)
            .unwrap_or_else(|| panic!("{name} is not in docs/metrics.md"));
        assert_eq!(doc_kind, kind, "{name}");
        assert_eq!(*doc_labels, labels.join(", "), "{name}");
        let expected = if name.starts_with("lachesis_bpf_") {
            "datapath"
        } else {
            "agent"
        };
        assert_eq!(owner, expected, "{name}");
        seen += 1;
    }
    assert_eq!(seen, 10);
}

/// The plan of `bindings` (nothing else in it).
fn plan_of(bindings: &[Binding]) -> Arc<Plan> {
    Arc::new(Plan {
        bindings: bindings.to_vec(),
        ..Plan::default()
    })
}

/// Issue 20, model sequence 1: VM 1 (project A, external network `pub-a`)
/// counts bytes, a scrape reads them, its port is deleted (a ghost), the
/// next flush writes the state file, the agent crashes before the sweep.
/// The file's plan had no ghosts, so the restart brought the rows back
/// unbound: A's series lost those bytes to `unknown` / `none` (measured in
/// the model: A 5 000 → 1 000, unknown 0 → 4 000), the ghost was never
/// swept, and MAC 1 learned later for project B inherited them. The
/// ghosts ride in the file's plan now and are swept on schedule.
#[test]
fn a_ghost_survives_a_restart_and_is_swept_on_schedule() {
    let mut vm1 = bind(mac(1), "t-a");
    vm1.external_network = Some("pub-a".into());
    let vm2 = bind(mac(2), "t-a");
    let grace = Duration::from_mins(1);
    let r = rig(100, snap(&[vm1.clone(), vm2.clone()]));
    let mut table = BindingTable::from_plan(
        &plan_of(&[vm1.clone(), vm2.clone()]),
        &[],
        &[],
        Gauge::default(),
    );
    let mut k1 = key(mac(1), 1);
    k1.zone = Zone::External.code();
    r.kernel.count(k1, 4000);
    r.kernel.count(key(mac(1), 2), 1000);
    r.kernel.count(key(mac(2), 1), 300);
    r.owner.scrape(RELIEF_OFF).unwrap();
    // The port of VM 1 is deleted: the pass ghosts it, its flush writes the file.
    let gone = plan_of(std::slice::from_ref(&vm2));
    let (batch, ghosts) = table.boot_batch(&gone, &[], None, Instant::now());
    assert!(ghosts.contains_key(&mac(1)));
    r.owner.settle_batch_now(batch.clone()).unwrap();
    table.install(batch.attribution.clone(), ghosts);
    let before = (
        tenant_bytes(&r.owner, "t-a"),
        tenant_bytes(&r.owner, "unknown"),
    );
    assert_eq!(before, (5300, 0));
    // Crash 20 s after the ghosting: no shutdown, no sweep.

    let loaded = state::load(&r.paths).unwrap();
    let wall = std::time::SystemTime::now() + Duration::from_secs(20);
    let (previous, file_table) = crate::reconcile::committed::file_table(
        &loaded.plan,
        (Instant::now(), wall),
        Gauge::default(),
    )
    .unwrap();
    assert_eq!(previous.as_ref().map(|p| p.bindings.len()), Some(1));
    assert!(
        file_table.ghosts().contains_key(&mac(1)),
        "the ghost is in the file"
    );
    let owner = LedgerOwner::new(
        r.kernel.clone(),
        UnresolvedLimits::default(),
        PlannedAttribution {
            snapshot: file_table.attribution(),
            plan: loaded.plan.clone(),
            tree: Arc::new(previous.unwrap()),
        },
        r.paths.clone(),
        OrderMetrics::unregistered(),
    );
    // Neutron still says the port is gone.
    let (batch, ghosts) = file_table.boot_batch(&gone, &[], None, Instant::now());
    owner
        .boot(loaded, Vec::<FakeRetired>::new(), batch.clone())
        .unwrap();
    let mut table = file_table;
    table.install(batch.attribution.clone(), ghosts);
    owner.scrape(RELIEF_OFF).unwrap();
    owner.flush().unwrap();
    assert_eq!(tenant_bytes(&owner, "t-a"), 5300, "A keeps its bytes");
    assert_eq!(tenant_bytes(&owner, "unknown"), 0);
    assert_eq!(
        exported(
            &owner,
            "lachesis_tenant_bytes_total",
            "external_network=\"pub-a\""
        ),
        4000
    );
    // Swept on schedule: the 20 s before the crash count against the grace.
    let now = Instant::now();
    assert_eq!(
        owner
            .sweep(&mut table, now + Duration::from_secs(30), grace)
            .unwrap(),
        0
    );
    assert_eq!(
        owner
            .sweep(&mut table, now + Duration::from_secs(41), grace)
            .unwrap(),
        1
    );
    assert!(table.ghosts().is_empty());
    // The swept ghost is gone from the file too.
    let (_, again) = crate::reconcile::committed::file_table(
        &state::load(&r.paths).unwrap().plan,
        (Instant::now(), std::time::SystemTime::now()),
        Gauge::default(),
    )
    .unwrap();
    assert!(again.ghosts().is_empty());
    // MAC 1 learned later for project B inherits nothing.
    let vm1b = bind(mac(1), "t-b");
    let (batch, _) = table.boot_batch(&plan_of(&[vm1b, vm2]), &[], None, Instant::now());
    owner.settle_batch_now(batch).unwrap();
    r.kernel.count(key(mac(1), 1), 70);
    owner.scrape(RELIEF_OFF).unwrap();
    owner.flush().unwrap();
    assert_eq!(tenant_bytes(&owner, "t-a"), 5300);
    assert_eq!(tenant_bytes(&owner, "t-b"), 70);
    assert_eq!(all_bytes(&owner), r.kernel.state().counted);
}

/// Issue 20, model sequence 2, the owner's part: a scrape queues an
/// unresolved eviction, a prune folds a server bucket and its flush fails,
/// a new flow of project A counts 2 000 B, the settle batch's drain is
/// refused. The owner flushed (applying the evicted entry's final reading)
/// and applied the *old* readings again — outdated by then, so the new
/// flow's bytes went unread — and the settle moved them to project B
/// (model: A 1 300 / B 2 000 instead of A 3 300 / B 0). It reads the map
/// again now.
#[test]
fn a_refused_drain_is_answered_by_reading_the_map_again() {
    let dir = tempfile::tempdir().unwrap();
    let state_dir = dir.path().join("state");
    std::fs::create_dir(&state_dir).unwrap();
    let paths = StatePaths::new(state_dir.join("state.json"));
    let kernel = FakeKernel::new(100);
    let vm1 = bind(mac(1), "t-a");
    let vm2 = bind(mac(2), "t-a");
    let limits = UnresolvedLimits {
        capacity: 100,
        ttl_ns: 5,
    };
    let owner = LedgerOwner::new(
        kernel.clone(),
        limits,
        planned(snap(&[vm1.clone(), vm2.clone()])),
        paths.clone(),
        OrderMetrics::unregistered(),
    );
    // A server bucket to prune: VM 2's port swept, its retention over.
    kernel.count(key(mac(2), 1), 50);
    kernel.count(key(mac(1), 1), 1000);
    owner.scrape(RELIEF_OFF).unwrap();
    let since = Instant::now();
    let mut table = table_with_ghost(std::slice::from_ref(&vm1), &vm2, since);
    owner.flush().unwrap();
    assert_eq!(
        owner
            .sweep(
                &mut table,
                since + Duration::from_mins(2),
                Duration::from_mins(1)
            )
            .unwrap(),
        1
    );
    owner.ledger().expire_retained_ports(1, 0);
    owner.flush().unwrap();
    // An unbound MAC waits, then its TTL ends at the next scrape.
    kernel.count(key(mac(9), 1), 70);
    owner.scrape(RELIEF_OFF).unwrap();
    kernel.count(key(mac(1), 1), 300);
    owner.scrape(RELIEF_OFF).unwrap();
    // The prune's flush fails (the state directory is away).
    let away = dir.path().join("away");
    std::fs::rename(&state_dir, &away).unwrap();
    futures_lite_block_on(LedgerOrder::prune_servers(
        &owner,
        ["server-1".to_owned()].into(),
    ))
    .unwrap();
    std::fs::rename(&away, &state_dir).unwrap();
    // A new flow of VM 1, then the batch that moves VM 1 to project B.
    kernel.count(key(mac(1), 2), 2000);
    owner.settle_batch_now(a_to_b()).unwrap();
    kernel.count(key(mac(1), 2), 5);
    owner.scrape(RELIEF_OFF).unwrap();
    owner.flush().unwrap();
    assert_eq!(
        tenant_bytes(&owner, "t-a"),
        3350,
        "1 300 + 2 000 + VM 2's 50"
    );
    assert_eq!(tenant_bytes(&owner, "t-b"), 5);
    assert_eq!(all_bytes(&owner), kernel.state().counted);
}

/// Runs a future to completion on a current-thread runtime (the owner's
/// async seams from a plain test).
fn futures_lite_block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}
