//! Property tests of the monotonicity contract (DESIGN §9): random sequences
//! of kernel traffic, drains (with counter resets, new stamps, deleted
//! entries), unresolved arrivals/resolutions/evictions, rebases with random
//! new attributions, router re-gatewaying, ghost evictions, prunes, state-file
//! round trips, restarts from the last flush and crashes between a settle
//! and its flush. The model follows the agent's call order (flush, settle,
//! flush, drain; deletes released by a flush carried out after the next
//! drain). After every step:
//!
//! - every billing series a scrape showed before the step (a restart
//!   included) is not smaller in the scrape after it;
//! - the export is the state of the last flush, never the live one;
//! - each tier equals the sum of the tier below plus its absorber (read from
//!   the ledger's own buckets, not recomputed from the same code path);
//! - what the ledger holds never exceeds what the simulated kernel counted,
//!   and equals it after every drain, minus only what a crash provably lost.

mod common;

use std::collections::BTreeMap;

use common::{family, mac, parse, scrape, Rig, Samples};
use lachesis_abi::{Direction, FlowCounters, FlowKey, L4Class, Zone};
use lachesis_ledger::memory::{MemoryAttribution, OwnedBinding};
use lachesis_ledger::state::{self, StatePaths};
use lachesis_ledger::{Book, Selector, SettleMode, UnresolvedLimits, NONE, UNKNOWN_TENANT};
use proptest::prelude::*;

const SEC: u64 = 1_000_000_000;
const VMS: u8 = 5;
const ROUTERS: [u8; 2] = [100, 101];
const NETS: [&str; 3] = ["pub-a", "pub-b", "pub-c"];
const LIMITS: UnresolvedLimits = UnresolvedLimits {
    capacity: 3,
    ttl_ns: 30 * SEC,
};

#[derive(Debug, Clone)]
enum Action {
    Traffic {
        key: usize,
        bytes: u64,
        packets: u64,
    },
    Drain {
        dt_s: u64,
        honour_deletes: bool,
    },
    Relieve {
        key: usize,
    },
    Rebind {
        vm: u8,
        binding: usize,
    },
    Ghost {
        vm: u8,
        delete_kernel: bool,
    },
    Regateway {
        router: usize,
        net: Option<usize>,
    },
    PruneServers {
        alive_mask: u8,
    },
    PruneTenants {
        alive_mask: u8,
    },
    Flush,
    RoundTrip,
    Restart,
    /// A rebind whose settle is applied but the agent dies before the
    /// flush that must follow it (the crash window of a settle).
    RebindThenCrash {
        vm: u8,
        binding: usize,
    },
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        6 => (0..240usize, prop_oneof![1..5_000u64, Just(1u64 << 40)], 1..50u64)
            .prop_map(|(key, bytes, packets)| Action::Traffic { key, bytes, packets }),
        4 => (0..20u64, any::<bool>()).prop_map(|(dt_s, honour_deletes)| Action::Drain { dt_s, honour_deletes }),
        1 => (0..240usize).prop_map(|key| Action::Relieve { key }),
        2 => (1..=VMS, 0..7usize).prop_map(|(vm, binding)| Action::Rebind { vm, binding }),
        2 => (1..=VMS, any::<bool>()).prop_map(|(vm, delete_kernel)| Action::Ghost { vm, delete_kernel }),
        1 => (0..2usize, proptest::option::of(0..3usize)).prop_map(|(router, net)| Action::Regateway { router, net }),
        2 => (1..8u8).prop_map(|alive_mask| Action::PruneServers { alive_mask }),
        2 => (1..8u8).prop_map(|alive_mask| Action::PruneTenants { alive_mask }),
        1 => Just(Action::Flush),
        1 => Just(Action::RoundTrip),
        1 => Just(Action::Restart),
        1 => (1..=VMS, 0..7usize).prop_map(|(vm, binding)| Action::RebindThenCrash { vm, binding }),
    ]
}

/// Key number `i` of a fixed pool covering VMs, routers, VM peers, both
/// directions, four zones and two L4 classes.
fn pool_key(i: usize) -> FlowKey {
    let vm = (i % 5) as u8 + 1;
    let peer = match (i / 5) % 3 {
        0 => ROUTERS[0],
        1 => ROUTERS[1],
        _ => vm % VMS + 1,
    };
    let dir = Direction::ALL[(i / 15) % 2];
    let zone = [
        Zone::External,
        Zone::SameTenant,
        Zone::OtherTenant,
        Zone::Miss,
    ][(i / 30) % 4];
    let l4 = [L4Class::Tcp, L4Class::Udp][(i / 120) % 2];
    common::key(mac(vm), mac(peer), dir, zone, l4)
}

/// Servers belong to one tenant, and several MACs share a server, so that
/// prunes meet servers and tenants that still have live rows.
fn binding(vm: u8, choice: usize) -> OwnedBinding {
    if choice == 6 {
        // Several MACs on one port (§6.3 allowed-address pairs).
        return OwnedBinding::new("t0", "s0", "p-shared");
    }
    let server = choice % 3;
    let b = OwnedBinding::new(
        &format!("t{}", server % 2),
        &format!("s{server}"),
        &format!("p{vm}"),
    );
    if (choice / 3).is_multiple_of(2) {
        b.with_fallback("fip-a")
    } else {
        b
    }
}

fn initial_attr() -> MemoryAttribution {
    let mut a = MemoryAttribution::default();
    for vm in 1..=3 {
        a.bindings.insert(mac(vm), binding(vm, usize::from(vm)));
    }
    a.routers.insert(mac(ROUTERS[0]), NETS[0].to_owned());
    a
}

struct Model {
    dir: tempfile::TempDir,
    ledger: Rig,
    attr: MemoryAttribution,
    kernel: BTreeMap<FlowKey, FlowCounters>,
    next_stamp: u64,
    now: u64,
    added: (u64, u64),
    lost: (u64, u64),
    /// The attribution the state file was last written under.
    flushed_attr: Option<MemoryAttribution>,
    /// The book as of the last flush or restore: what the export must show.
    durable: Book,
    /// Kernel deletes released by flushes, not yet carried out.
    released: Vec<FlowKey>,
}

impl Model {
    fn new() -> Model {
        Model {
            dir: tempfile::tempdir().unwrap(),
            ledger: Rig::new(LIMITS),
            attr: initial_attr(),
            kernel: BTreeMap::new(),
            next_stamp: 1,
            now: 0,
            added: (0, 0),
            lost: (0, 0),
            flushed_attr: None,
            durable: Book::default(),
            released: Vec::new(),
        }
    }

    /// The agent's flusher: write the file, then the released deletes are
    /// the caller's to carry out.
    fn flush(&mut self) {
        self.durable = self.ledger.snapshot();
        self.ledger.use_attr(&self.attr);
        let report = state::flush(
            &self.ledger,
            &self.paths(),
            serde_json::json!({"plan": "opaque"}),
        )
        .unwrap();
        self.released.extend(report.delete);
        self.flushed_attr = Some(self.attr.clone());
    }

    /// Carries out (or, when the kernel refuses, drops) the released deletes.
    fn carry_out_deletes(&mut self, honour: bool) {
        for k in std::mem::take(&mut self.released) {
            if honour {
                self.kernel.remove(&k);
            }
        }
    }

    fn paths(&self) -> StatePaths {
        StatePaths::new(self.dir.path().join("state.json"))
    }

    fn readings(&self) -> Vec<(FlowKey, FlowCounters)> {
        self.kernel.iter().map(|(k, v)| (*k, *v)).collect()
    }

    /// The scraper task: a full-map drain, then the deletes flushes
    /// released, right after that final read so no byte falls between.
    fn drain(&mut self, dt_s: u64, honour_deletes: bool) {
        self.now += dt_s * SEC;
        self.ledger
            .apply_drain(&self.attr, &self.readings(), self.now);
        self.carry_out_deletes(honour_deletes);
    }

    /// Flushes, settles under the current attribution and swaps the source
    /// to `next` inside the ledger lock, as the reconciler does; no flush
    /// after it yet.
    fn settle_only(&mut self, mode: SettleMode, next: MemoryAttribution) {
        // The drains before the settle point go to the file first.
        self.flush();
        let source = self.ledger.source.clone();
        let swap_to = next.clone();
        self.ledger
            .ledger
            .settle(mode, || source.store(swap_to))
            .unwrap();
        self.attr = next;
    }

    /// Settle, then the flush the agent must do before its next drain.
    fn settle_to(&mut self, mode: SettleMode, next: MemoryAttribution) {
        self.settle_only(mode, next);
        self.flush();
    }

    /// Walks the attribution from `self.attr` to `target` one change at a
    /// time, settling each (the reconcile pass after a restart).
    fn reconcile_to(&mut self, target: &MemoryAttribution) {
        for r in ROUTERS {
            let (old, new) = (self.attr.routers.get(&mac(r)), target.routers.get(&mac(r)));
            if old != new {
                let mut next = self.attr.clone();
                match new {
                    Some(n) => next.routers.insert(mac(r), n.clone()),
                    None => next.routers.remove(&mac(r)),
                };
                self.settle_to(SettleMode::Rebase(Selector::RouterPeer(mac(r))), next);
            }
        }
        for vm in 1..=VMS {
            let m = mac(vm);
            let (old, new) = (
                self.attr.bindings.get(&m).cloned(),
                target.bindings.get(&m).cloned(),
            );
            let mut next = self.attr.clone();
            match (old, new) {
                (Some(o), Some(n)) if o != n => {
                    next.bindings.insert(m, n);
                    self.settle_to(SettleMode::Rebase(Selector::VmMac(m)), next);
                }
                (Some(_), None) => {
                    next.bindings.remove(&m);
                    self.settle_to(SettleMode::Evict { vm_mac: m }, next);
                }
                (None, Some(n)) => {
                    next.bindings.insert(m, n);
                    self.attr = next;
                    self.ledger.use_attr(&self.attr);
                }
                _ => {}
            }
        }
        assert_eq!(&self.attr, target);
    }

    /// A new process restores the file; its source serves `attr` (the plan
    /// the file was written with) while it does.
    fn restore_from_file(&mut self, attr: &MemoryAttribution) {
        let loaded = state::load(&self.paths()).unwrap();
        let fresh = Rig::new(LIMITS);
        fresh.use_attr(attr);
        fresh.restore_loaded(loaded, self.now).unwrap();
        self.ledger = fresh;
        self.durable = self.ledger.snapshot();
    }

    fn round_trip(&mut self) {
        self.flush();
        let before = normalized(self.ledger.snapshot());
        let text = scrape(&self.ledger, &self.attr);
        let attr = self.attr.clone();
        self.restore_from_file(&attr);
        assert_eq!(normalized(self.ledger.snapshot()), before);
        // Billing and info families render identically; health
        // counters are per process and start again, like any counter.
        let billing = |t: &str| t[..t.find("# HELP lachesis_ledger_rows").unwrap()].to_owned();
        assert_eq!(billing(&scrape(&self.ledger, &self.attr)), billing(&text));
    }

    fn restart(&mut self) {
        // Crash: everything since the last flush is gone from userspace,
        // released deletes not yet carried out are forgotten; the kernel
        // (pinned map) kept counting. Boot restores the file under the
        // attribution it was written with, reconciles to the current one
        // (settle, flush), then drains.
        self.released.clear();
        let current = self.attr.clone();
        let old_attr = self.flushed_attr.clone().unwrap_or_else(|| current.clone());
        self.restore_from_file(&old_attr);
        self.attr = old_attr;
        self.reconcile_to(&current);
        self.drain(0, true);
        let held = held(&self.ledger);
        assert!(
            held.0 <= self.added.0 - self.lost.0,
            "restart double counted bytes"
        );
        self.lost = (self.added.0 - held.0, self.added.1 - held.1);
    }

    /// A new binding for `vm`; `crash`: the agent dies between the settle
    /// and the flush that must follow it.
    fn rebind(&mut self, vm: u8, choice: usize, crash: bool) {
        let mut next = self.attr.clone();
        next.bindings.insert(mac(vm), binding(vm, choice));
        if !self.attr.bindings.contains_key(&mac(vm)) {
            self.attr = next;
        } else if crash {
            self.settle_only(SettleMode::Rebase(Selector::VmMac(mac(vm))), next);
            // The ledger itself refuses to drain on top of it.
            assert!(self.ledger.ledger.apply_drain(&[], self.now).is_err());
        } else {
            self.settle_to(SettleMode::Rebase(Selector::VmMac(mac(vm))), next);
        }
        if crash {
            self.restart();
        }
    }

    /// Applies one action.
    fn step(&mut self, a: &Action) {
        match *a {
            Action::Traffic {
                key,
                bytes,
                packets,
            } => {
                let k = pool_key(key);
                let stamp = &mut self.next_stamp;
                let e = self.kernel.entry(k).or_insert_with(|| {
                    *stamp += 1;
                    FlowCounters {
                        created_ns: *stamp,
                        ..FlowCounters::default()
                    }
                });
                e.bytes += bytes;
                e.packets += packets;
                e.last_seen_ns = e.created_ns + 1;
                self.added.0 += bytes;
                self.added.1 += packets;
            }
            Action::Drain {
                dt_s,
                honour_deletes,
            } => self.drain(dt_s, honour_deletes),
            Action::Relieve { key } => {
                // Pressure relief deletes only after a drain read the entry.
                self.drain(0, true);
                self.kernel.remove(&pool_key(key));
            }
            Action::Rebind { vm, binding } => self.rebind(vm, binding, false),
            Action::RebindThenCrash { vm, binding } => self.rebind(vm, binding, true),
            Action::Ghost { vm, delete_kernel } => {
                if self.attr.bindings.contains_key(&mac(vm)) {
                    // §9 ghost sweep: final read, evict-settle and unbind,
                    // flush, then delete the kernel entries the flush released.
                    self.drain(0, true);
                    let mut next = self.attr.clone();
                    next.bindings.remove(&mac(vm));
                    self.settle_to(SettleMode::Evict { vm_mac: mac(vm) }, next);
                    self.carry_out_deletes(delete_kernel);
                }
            }
            Action::Regateway { router, net } => {
                let r = mac(ROUTERS[router]);
                let mut next = self.attr.clone();
                match net {
                    Some(n) => next.routers.insert(r, NETS[n].to_owned()),
                    None => next.routers.remove(&r),
                };
                self.settle_to(SettleMode::Rebase(Selector::RouterPeer(r)), next);
            }
            Action::PruneServers { alive_mask } => {
                let alive: Vec<String> = (0..3)
                    .filter(|i| alive_mask & (1 << i) != 0)
                    .map(|i| format!("s{i}"))
                    .collect();
                self.ledger.use_attr(&self.attr);
                self.ledger
                    .ledger
                    .prune_servers(alive.iter().map(String::as_str))
                    .unwrap();
                self.flush();
            }
            Action::PruneTenants { alive_mask } => {
                let alive: Vec<String> = (0..3)
                    .filter(|i| alive_mask & (1 << i) != 0)
                    .map(|i| format!("t{i}"))
                    .collect();
                self.ledger.use_attr(&self.attr);
                self.ledger
                    .ledger
                    .prune_tenants(alive.iter().map(String::as_str))
                    .unwrap();
                self.flush();
            }
            Action::Flush => self.flush(),
            Action::RoundTrip => self.round_trip(),
            Action::Restart => self.restart(),
        }
    }
}

fn normalized(mut b: Book) -> Book {
    for p in b.unresolved.values_mut() {
        p.first_seen_ns = 0;
        p.last_active_ns = 0;
    }
    b
}

/// Exported total plus what waits in the unresolved buffer.
fn held(l: &Rig) -> (u64, u64) {
    let b = l.snapshot();
    let g = b.grand_total();
    (g.bytes, g.packets)
}

type Tier = BTreeMap<Vec<String>, u64>;

fn tier(s: &Samples, fam: &str) -> Tier {
    family(s, fam)
        .into_iter()
        .map(|(l, v)| (l.into_iter().map(|(_, v)| v).collect(), v))
        .collect()
}

fn sum_into(out: &mut Tier, k: Vec<String>, v: u64) {
    *out.entry(k).or_default() += v;
}

fn check_tiers(s: &Samples, book: &Book, unit: &str, pick: fn(lachesis_ledger::Counts) -> u64) {
    let a = &book.absorbers;
    let fam = |t: &str| format!("lachesis_{t}{unit}_total");
    let (port, port_proto) = (tier(s, &fam("port_")), tier(s, &fam("port_proto_")));
    let (server, tenant, total) = (
        tier(s, &fam("server_")),
        tier(s, &fam("tenant_")),
        tier(s, &fam("")),
    );

    let mut want = Tier::new();
    for (k, v) in &port {
        sum_into(
            &mut want,
            vec![
                k[0].clone(),
                k[2].clone(),
                k[3].clone(),
                k[4].clone(),
                k[5].clone(),
            ],
            *v,
        );
    }
    for (b, c) in &a.server {
        sum_into(
            &mut want,
            vec![
                b.server_id.to_string(),
                b.tenant_id.to_string(),
                b.zone.label().into(),
                b.external_network.to_string(),
                b.direction.label().into(),
            ],
            pick(*c),
        );
    }
    assert_eq!(
        server, want,
        "server tier = Σ port + server-settled ({unit})"
    );

    let mut want = Tier::new();
    for (k, v) in &server {
        sum_into(&mut want, k[1..].to_vec(), *v);
    }
    for (b, c) in &a.tenant {
        sum_into(
            &mut want,
            vec![
                b.tenant_id.to_string(),
                b.zone.label().into(),
                b.external_network.to_string(),
                b.direction.label().into(),
            ],
            pick(*c),
        );
    }
    for (k, c) in &a.unknown {
        sum_into(
            &mut want,
            vec![
                UNKNOWN_TENANT.into(),
                k.zone().unwrap().label().into(),
                NONE.into(),
                k.direction().unwrap().label().into(),
            ],
            pick(*c),
        );
    }
    assert_eq!(
        tenant, want,
        "tenant tier = Σ server + tenant-settled + unknown ({unit})"
    );

    let mut want = Tier::new();
    for (k, v) in &tenant {
        sum_into(&mut want, k[1..].to_vec(), *v);
    }
    for (b, c) in &a.total {
        sum_into(
            &mut want,
            vec![
                b.zone.label().into(),
                b.external_network.to_string(),
                b.direction.label().into(),
            ],
            pick(*c),
        );
    }
    assert_eq!(
        total, want,
        "total tier = Σ tenant + total-settled ({unit})"
    );

    check_proto_split(&port, &port_proto, unit);
}

/// The proto split is a parallel view of the port tier.
fn check_proto_split(port: &Tier, port_proto: &Tier, unit: &str) {
    let (mut by_port, mut by_proto) = (Tier::new(), Tier::new());
    for (k, v) in port {
        sum_into(
            &mut by_port,
            vec![k[0].clone(), k[1].clone(), k[2].clone(), k[5].clone()],
            *v,
        );
    }
    for (k, v) in port_proto {
        sum_into(
            &mut by_proto,
            vec![k[0].clone(), k[1].clone(), k[2].clone(), k[4].clone()],
            *v,
        );
    }
    assert_eq!(
        by_port, by_proto,
        "Σ proto = Σ zone of the port tier ({unit})"
    );
}

const BILLING: [&str; 10] = [
    "lachesis_bytes_total",
    "lachesis_packets_total",
    "lachesis_tenant_bytes_total",
    "lachesis_tenant_packets_total",
    "lachesis_server_bytes_total",
    "lachesis_server_packets_total",
    "lachesis_port_bytes_total",
    "lachesis_port_packets_total",
    "lachesis_port_proto_bytes_total",
    "lachesis_port_proto_packets_total",
];

fn check_monotone(prev: &Samples, cur: &Samples, step: &Action) {
    for fam in BILLING {
        let (p, c) = (family(prev, fam), family(cur, fam));
        for (labels, before) in &p {
            if let Some(after) = c.get(labels) {
                assert!(
                    after >= before,
                    "{fam}{labels:?} went down {before} → {after} at {step:?}"
                );
            }
        }
    }
}

fn run(actions: &[Action]) {
    let mut m = Model::new();
    let mut prev = parse(&scrape(&m.ledger, &m.attr));
    for a in actions {
        m.step(a);
        // Every step is held against what the previous scrape exported,
        // restarts included: a crash or reboot must never take back a byte
        // a scrape already showed.
        let cur = parse(&scrape(&m.ledger, &m.attr));
        check_monotone(&prev, &cur, a);
        // The export is the durable state, not the live one.
        let book = &m.durable;
        check_tiers(&cur, book, "bytes", |c| c.bytes);
        check_tiers(&cur, book, "packets", |c| c.packets);
        let held = held(&m.ledger);
        let expect = (m.added.0 - m.lost.0, m.added.1 - m.lost.1);
        assert!(
            held.0 <= expect.0 && held.1 <= expect.1,
            "ledger holds more than the kernel counted"
        );
        if matches!(
            a,
            Action::Drain { .. } | Action::Relieve { .. } | Action::Restart
        ) {
            assert_eq!(
                held, expect,
                "after a drain every counted byte is held, once"
            );
        }
        let exported: u64 = family(&cur, "lachesis_bytes_total").values().sum();
        let pending: u64 = book.unresolved.values().map(|p| p.acc.bytes).sum();
        assert_eq!(exported + pending, book.grand_total().bytes);
        assert!(
            book.grand_total().bytes <= held.0,
            "export ran ahead of the ledger"
        );
        prev = cur;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    #[test]
    fn billing_series_never_decrease_and_tiers_always_add_up(actions in proptest::collection::vec(action(), 1..60)) {
        run(&actions);
    }
}

#[test]
fn a_known_tricky_sequence_holds() {
    // Rebase, re-gateway and ghost on one MAC with prunes in between.
    run(&[
        Action::Traffic {
            key: 0,
            bytes: 100,
            packets: 1,
        },
        Action::Traffic {
            key: 45,
            bytes: 70,
            packets: 1,
        },
        Action::Drain {
            dt_s: 1,
            honour_deletes: true,
        },
        Action::Rebind { vm: 1, binding: 5 },
        Action::Traffic {
            key: 0,
            bytes: 10,
            packets: 1,
        },
        Action::Regateway {
            router: 0,
            net: Some(2),
        },
        Action::Drain {
            dt_s: 1,
            honour_deletes: true,
        },
        Action::Flush,
        Action::Ghost {
            vm: 1,
            delete_kernel: false,
        },
        Action::PruneServers { alive_mask: 1 },
        Action::PruneTenants { alive_mask: 1 },
        Action::Traffic {
            key: 0,
            bytes: 5,
            packets: 1,
        },
        Action::Restart,
        Action::Drain {
            dt_s: 40,
            honour_deletes: false,
        },
        Action::RoundTrip,
    ]);
}
