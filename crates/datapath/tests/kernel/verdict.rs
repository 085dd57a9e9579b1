//! The verdict cache (DESIGN §4.2, decision record 0011) through the
//! kernel's program test-run facility: every write to a map a verdict reads
//! changes the next packet's zone on every CPU; the cache key separates
//! everything a zone depends on; the `PREEMPT_RT` build refuses a slot a
//! fill left half-written. Each build the agent can load is run.

use crate::common;

use lachesis_abi::{Direction, EndpointValue, StatReason, VerdictSlot, Zone};
use lachesis_datapath::{Datapath, FlowsVariant};
use lachesis_lab::frame::Frame;

use common::topology::{ip, populate, Net, T1, T2, T3};

const BUILDS: [FlowsVariant; 3] = [
    FlowsVariant::ByCpu,
    FlowsVariant::ByCpuAtomic,
    FlowsVariant::ByCpuGenFetch,
];

/// Where a run's zone came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Cache,
    Computed,
}

fn udp(src: lachesis_abi::Mac, dst: lachesis_abi::Mac, s: &str, d: &str) -> Vec<u8> {
    Frame::udp(src, dst, ip(s), ip(d)).bytes()
}

/// Runs `frame` once on `cpu`; the zone of the one sub-entry that grew
/// (that CPU's) and whether the verdict cache answered.
fn classify(dp: &Datapath, cpu: usize, dir: Direction, frame: &[u8]) -> (Zone, Answer) {
    let stats = dp.stats().unwrap();
    let grown = common::run_once_on(dp, cpu, dir, frame);
    let after = dp.stats().unwrap();
    let delta = |r: StatReason| after[usize::from(r.code())] - stats[usize::from(r.code())];
    let answer = match (
        delta(StatReason::VerdictHit),
        delta(StatReason::VerdictMiss),
    ) {
        (1, 0) => Answer::Cache,
        (0, 1) => Answer::Computed,
        other => panic!("one verdict lookup per frame, got (hits, misses) {other:?}"),
    };
    (grown.key.zone().unwrap(), answer)
}

/// A write to the metadata maps, its zone effect on one frame, and the
/// write that undoes it.
struct Change {
    name: &'static str,
    dir: Direction,
    frame: Vec<u8>,
    before: Zone,
    apply: Box<dyn Fn(&Datapath)>,
    after: Zone,
    revert: Box<dyn Fn(&Datapath)>,
}

fn endpoint(dp: &Datapath, mac: lachesis_abi::Mac, tenant_id: u32, flags: u32) {
    dp.upsert_endpoint(mac, EndpointValue { tenant_id, flags })
        .unwrap();
}

fn changes(n: &Net) -> Vec<Change> {
    use Direction::Tx;
    let (unknown, a, a2) = (n.unknown, n.a, n.a2);
    vec![
        Change {
            name: "an unknown VM's port is bound",
            dir: Tx,
            frame: udp(n.unknown, n.router, "10.9.0.1", "8.8.8.8"),
            before: Zone::Miss,
            apply: Box::new(move |dp| endpoint(dp, unknown, T1, 0)),
            after: Zone::External,
            revert: Box::new(move |dp| assert!(dp.delete_endpoint(unknown).unwrap())),
        },
        Change {
            name: "a bound port is unbound",
            dir: Tx,
            frame: udp(n.a, n.router, "10.1.0.10", "8.8.8.8"),
            before: Zone::External,
            apply: Box::new(move |dp| assert!(dp.delete_endpoint(a).unwrap())),
            after: Zone::Miss,
            revert: Box::new(move |dp| endpoint(dp, a, T1, 0)),
        },
        Change {
            name: "the peer's port changes tenant",
            dir: Tx,
            frame: udp(n.a, n.a2, "10.1.0.10", "10.1.0.11"),
            before: Zone::SameTenant,
            apply: Box::new(move |dp| endpoint(dp, a2, T2, 0)),
            after: Zone::OtherTenant,
            revert: Box::new(move |dp| endpoint(dp, a2, T1, 0)),
        },
        Change {
            name: "a tenant row is added over a global one",
            dir: Tx,
            frame: udp(n.a, n.router, "10.1.0.10", "100.64.3.3"),
            before: Zone::Shared,
            apply: Box::new(|dp| {
                dp.upsert_zone(T1, "100.64.3.0/24".parse().unwrap(), Zone::OtherTenant)
                    .unwrap();
            }),
            after: Zone::OtherTenant,
            revert: Box::new(|dp| {
                assert!(dp
                    .delete_zone(T1, "100.64.3.0/24".parse().unwrap())
                    .unwrap());
            }),
        },
        Change {
            name: "the catch-all row changes zone",
            dir: Direction::Rx,
            frame: udp(n.router, n.a, "8.8.8.8", "10.1.0.10"),
            before: Zone::External,
            apply: Box::new(|dp| {
                dp.upsert_zone(0, "0.0.0.0/0".parse().unwrap(), Zone::Shared)
                    .unwrap();
            }),
            after: Zone::Shared,
            revert: Box::new(|dp| {
                dp.upsert_zone(0, "0.0.0.0/0".parse().unwrap(), Zone::External)
                    .unwrap();
            }),
        },
        Change {
            name: "an IPv6 tenant row is added",
            dir: Tx,
            frame: udp(n.a, n.router, "2001:db8:1::10", "2001:db8:ffff::5"),
            before: Zone::Shared,
            apply: Box::new(|dp| {
                dp.upsert_zone(T1, "2001:db8:ffff::/64".parse().unwrap(), Zone::SameTenant)
                    .unwrap();
            }),
            after: Zone::SameTenant,
            revert: Box::new(|dp| {
                assert!(dp
                    .delete_zone(T1, "2001:db8:ffff::/64".parse().unwrap())
                    .unwrap());
            }),
        },
        Change {
            name: "an amphora address is listed",
            dir: Tx,
            frame: udp(n.amp, n.member, "10.3.0.6", "10.3.0.20"),
            before: Zone::SameTenant,
            apply: Box::new(|dp| dp.upsert_amphora(T3, ip("10.3.0.6")).unwrap()),
            after: Zone::Infra,
            revert: Box::new(|dp| assert!(dp.delete_amphora(T3, ip("10.3.0.6")).unwrap())),
        },
    ]
}

/// Each CPU's cache holds the frame's verdict (a hit, `zone`).
fn warm_everywhere(dp: &Datapath, c: &Change, zone: Zone) {
    for cpu in common::cpus() {
        classify(dp, cpu, c.dir, &c.frame);
        assert_eq!(
            classify(dp, cpu, c.dir, &c.frame),
            (zone, Answer::Cache),
            "{}: CPU {cpu} answers from its cache before the write",
            c.name
        );
    }
}

/// After a write, every CPU computes the frame's zone anew (its cached
/// verdict no longer matches) and then caches the new one.
fn changed_everywhere(dp: &Datapath, c: &Change, zone: Zone, what: &str) {
    for cpu in common::cpus() {
        assert_eq!(
            classify(dp, cpu, c.dir, &c.frame),
            (zone, Answer::Computed),
            "{}: CPU {cpu}'s first packet after the {what}",
            c.name
        );
        assert_eq!(
            classify(dp, cpu, c.dir, &c.frame),
            (zone, Answer::Cache),
            "{}: CPU {cpu} caches the new verdict",
            c.name
        );
    }
}

#[test]
fn every_metadata_write_changes_the_next_packets_zone_on_every_cpu() {
    assert!(common::cpus().len() >= 2, "the test needs two CPUs");
    for variant in BUILDS {
        let pins = common::PinDir::new("vwrite");
        let (dp, _, _) = Datapath::load_variant(&pins.config(), variant).unwrap();
        let net = populate(&dp);
        for c in changes(&net) {
            warm_everywhere(&dp, &c, c.before);
            (c.apply)(&dp);
            changed_everywhere(&dp, &c, c.after, "write");
            (c.revert)(&dp);
            changed_everywhere(&dp, &c, c.before, "write undone");
        }
    }
}

#[test]
fn one_write_is_one_generation_and_tap_ports_are_not_a_verdict_input() {
    let pins = common::PinDir::new("vgen");
    let (dp, _, _) = pins.load();
    let start = dp
        .verdict_generation()
        .expect("the agent's build caches verdicts");
    let net = populate(&dp);
    let gen = dp.verdict_generation().unwrap();
    assert!(gen > start, "populating wrote the maps");
    dp.upsert_zone(T1, "10.7.0.0/16".parse().unwrap(), Zone::Shared)
        .unwrap();
    assert_eq!(dp.verdict_generation(), Some(gen + 1));
    // A delete that finds nothing still ends a write: one more.
    assert!(!dp.delete_zone(T2, "10.7.0.0/16".parse().unwrap()).unwrap());
    assert_eq!(dp.verdict_generation(), Some(gen + 2));
    // A refused write (tenant id 0) never reached the kernel: none.
    assert!(dp
        .upsert_endpoint(
            net.b,
            EndpointValue {
                tenant_id: 0,
                flags: 0
            }
        )
        .is_err());
    assert_eq!(dp.verdict_generation(), Some(gen + 2));
    dp.set_tap_port(7, net.a).unwrap();
    assert_eq!(
        dp.verdict_generation(),
        Some(gen + 2),
        "group frames bypass the cache: a tap port write invalidates nothing"
    );
    let without = common::PinDir::new("vnone");
    let (plain, _, _) =
        Datapath::load_variant(&without.config(), FlowsVariant::ByCpuNoCache).unwrap();
    assert_eq!(plain.verdict_generation(), None);
}

/// The cache key holds everything the zone depends on: two frames that
/// differ only in the local address (the amphora rule), only in direction,
/// or only in ethertype get their own verdicts however warm the other's.
#[test]
fn frames_differing_in_one_verdict_input_never_share_a_verdict() {
    for variant in BUILDS {
        let pins = common::PinDir::new("vkey");
        let (dp, _, _) = Datapath::load_variant(&pins.config(), variant).unwrap();
        let n = populate(&dp);
        let pairs = [
            (
                "local address",
                (
                    Direction::Tx,
                    udp(n.amp, n.member, "10.3.0.5", "10.3.0.20"),
                    Zone::Infra,
                ),
                (
                    Direction::Tx,
                    udp(n.amp, n.member, "10.3.0.6", "10.3.0.20"),
                    Zone::SameTenant,
                ),
            ),
            (
                "direction",
                (
                    Direction::Rx,
                    udp(n.router, n.a, "10.1.0.10", "10.1.0.10"),
                    Zone::SameTenant,
                ),
                (
                    Direction::Tx,
                    udp(n.router, n.a, "10.1.0.10", "10.1.0.10"),
                    Zone::Miss,
                ),
            ),
            (
                "ethertype",
                (
                    Direction::Tx,
                    udp(n.a, n.router, "10.1.0.10", "10.1.0.77"),
                    Zone::SameTenant,
                ),
                (
                    Direction::Tx,
                    udp(n.a, n.router, "::ffff:10.1.0.10", "::ffff:10.1.0.77"),
                    Zone::External,
                ),
            ),
        ];
        for (what, (dx, x, zx), (dy, y, zy)) in pairs {
            for cpu in common::cpus() {
                classify(&dp, cpu, dx, &x);
                assert_eq!(
                    classify(&dp, cpu, dx, &x),
                    (zx, Answer::Cache),
                    "{what}: warm"
                );
                assert_eq!(
                    classify(&dp, cpu, dy, &y),
                    (zy, Answer::Computed),
                    "{variant:?} {what}: the other frame is not answered from the first's verdict"
                );
                assert_eq!(classify(&dp, cpu, dy, &y), (zy, Answer::Cache), "{what}");
            }
        }
    }
}

/// The slot of CPU `cpu` holding the verdict of `frame` sent (tx) by its
/// source MAC.
fn slot_of(dp: &Datapath, cpu: usize, frame: &[u8]) -> (u32, VerdictSlot) {
    let slots = dp.verdict_slots().unwrap().expect("a build with the cache");
    let found: Vec<(u32, VerdictSlot)> = slots[cpu]
        .iter()
        .enumerate()
        .filter(|(_, s)| {
            s.gen != 0 && s.key.src_mac == frame[6..12] && s.key.dst_mac == frame[0..6]
        })
        .map(|(i, s)| (u32::try_from(i).unwrap(), *s))
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one slot holds the frame's verdict: {found:?}"
    );
    found[0]
}

/// `PREEMPT_RT`: a task preempted half-way through a fill leaves the slot's
/// sequence odd. Another task on that CPU must neither trust the slot nor
/// fill it over the first; once the sequence is even again the slot is
/// read (which is why a slot forged with a wrong zone and an even sequence
/// is believed: the sequence is all that refused it before). The plain
/// build, where nothing preempts a TC program on its CPU, has no sequence
/// to check.
#[test]
fn the_realtime_build_never_reads_or_refills_a_slot_mid_fill() {
    let cpu = 0;
    for variant in [FlowsVariant::ByCpuAtomic, FlowsVariant::ByCpu] {
        let pins = common::PinDir::new("vseq");
        let (dp, _, _) = Datapath::load_variant(&pins.config(), variant).unwrap();
        let n = populate(&dp);
        let frame = udp(n.a, n.router, "10.1.0.10", "8.8.8.8");
        let dir = Direction::Tx;
        classify(&dp, cpu, dir, &frame);
        assert_eq!(
            classify(&dp, cpu, dir, &frame),
            (Zone::External, Answer::Cache)
        );
        let (index, good) = slot_of(&dp, cpu, &frame);
        assert_eq!(good.zone, Zone::External.code());
        assert_eq!(good.seq % 2, 0, "a finished fill leaves the sequence even");

        // A fill preempted after writing the zone, before its last store.
        let torn = VerdictSlot {
            zone: Zone::Shared.code(),
            seq: good.seq + 1,
            ..good
        };
        dp.write_verdict_slot(cpu, index, torn).unwrap();
        let got = classify(&dp, cpu, dir, &frame);
        if variant == FlowsVariant::ByCpuAtomic {
            assert_eq!(
                got,
                (Zone::External, Answer::Computed),
                "a slot mid-fill is not read"
            );
            assert_eq!(
                slot_of(&dp, cpu, &frame),
                (index, torn),
                "nor filled over: the first filler owns it"
            );
        } else {
            assert_eq!(
                got,
                (Zone::Shared, Answer::Cache),
                "the plain build reads no sequence"
            );
        }

        // The same forged slot with an even sequence is read as it stands.
        let forged = VerdictSlot {
            seq: good.seq + 2,
            ..torn
        };
        dp.write_verdict_slot(cpu, index, forged).unwrap();
        assert_eq!(
            classify(&dp, cpu, dir, &frame),
            (Zone::Shared, Answer::Cache),
            "{variant:?}: an even sequence is a finished fill"
        );
        // Any metadata write ends it.
        dp.upsert_zone(T2, "10.8.0.0/16".parse().unwrap(), Zone::Shared)
            .unwrap();
        assert_eq!(
            classify(&dp, cpu, dir, &frame),
            (Zone::External, Answer::Computed),
            "{variant:?}"
        );
        let (_, refilled) = slot_of(&dp, cpu, &frame);
        assert_eq!(refilled.zone, Zone::External.code());
        if variant == FlowsVariant::ByCpuAtomic {
            assert_eq!(
                refilled.seq,
                forged.seq + 2,
                "one fill: the sequence moves by two"
            );
        }
    }
}
