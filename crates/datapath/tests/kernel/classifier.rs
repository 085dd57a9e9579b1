//! The classifier through the kernel's program test-run facility: crafted
//! frames against populated maps, asserting the exact key and counters each
//! frame produced (DESIGN §4.2, every branch, both directions).

use crate::common;

use std::collections::BTreeMap;

use lachesis_abi::{Direction, EntryKey, FlowCounters, FlowKey, L4Class, Mac, StatReason, Zone};
use lachesis_datapath::{Datapath, FlowsVariant, Stats};
use lachesis_lab::frame::{non_ip, proto, Frame};

use common::topology::{ip, mac, populate, Net};

/// What one frame must do.
enum Expect {
    /// Exactly this key grows by the frame's length and one packet.
    Key {
        zone: Zone,
        l4: L4Class,
        eth_proto: u16,
    },
    /// No flow changes.
    Nothing,
}

struct Case {
    name: &'static str,
    dir: Direction,
    frame: Vec<u8>,
    expect: Expect,
    stats: &'static [(StatReason, u64)],
}

const CONTINUE: u32 = u32::MAX; // -1: TC_ACT_UNSPEC / TCX_NEXT

fn key_of(frame: &[u8], dir: Direction, zone: Zone, l4: L4Class, eth_proto: u16) -> FlowKey {
    FlowKey {
        dst_mac: frame[0..6].try_into().unwrap(),
        src_mac: frame[6..12].try_into().unwrap(),
        eth_proto,
        direction: dir.code(),
        zone: zone.code(),
        l4: l4.code(),
        pad: 0,
    }
}

/// Whether the verdict cache must already hold the frame's verdict.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Cache {
    /// Any state: a cacheable frame is a hit or a miss, once.
    Any,
    /// The same frame ran on this CPU just before: a cacheable frame hits.
    Warm,
}

impl Case {
    /// Asks the verdict cache: an IP frame that is not a group frame and
    /// whose IP header was readable (DESIGN §4.2).
    fn cacheable(&self) -> bool {
        matches!(self.expect, Expect::Key { zone, .. } if zone != Zone::Multicast)
            && !self.stats.iter().any(|(r, _)| *r == StatReason::Truncated)
    }
}

/// Runs `case` once on CPU `cpu`: the one sub-entry that grows must be
/// that CPU's of the expected flow key (DESIGN §4.7). `Cache::Warm` runs
/// it once unmeasured first, so the measured run takes its verdict from the
/// cache (and must count a hit).
fn run_case(dp: &Datapath, case: &Case, cpu: usize, cache: Cache) {
    if cache == Cache::Warm {
        common::on_cpu(cpu, || dp.test_run(case.dir, &case.frame, 1))
            .unwrap_or_else(|e| panic!("{}: {e}", case.name));
    }
    let before = common::snapshot_entries(dp);
    let stats_before = dp.stats().unwrap();
    let out = common::on_cpu(cpu, || dp.test_run(case.dir, &case.frame, 1))
        .unwrap_or_else(|e| panic!("{}: {e}", case.name));
    assert_eq!(
        out.retval, CONTINUE,
        "{}: the program must pass the packet on",
        case.name
    );
    let after = common::snapshot_entries(dp);
    let stats_after = dp.stats().unwrap();

    let changed: BTreeMap<EntryKey, (u64, u64)> = after
        .iter()
        .filter_map(|(k, v)| {
            let old = before.get(k).copied().unwrap_or_default();
            (old.bytes != v.bytes || old.packets != v.packets)
                .then(|| (*k, (v.bytes - old.bytes, v.packets - old.packets)))
        })
        .collect();
    let len = case.frame.len() as u64;
    match case.expect {
        Expect::Key {
            zone,
            l4,
            eth_proto,
        } => {
            let want = EntryKey::new(
                key_of(&case.frame, case.dir, zone, l4, eth_proto),
                u16::try_from(cpu).unwrap(),
            );
            let got: Vec<_> = changed.iter().collect();
            assert_eq!(
                got,
                vec![(&want, &(len, 1))],
                "{}: exactly one sub-entry must grow by the frame: CPU {cpu}'s of the key ({cache:?} cache)",
                case.name
            );
        }
        Expect::Nothing => assert!(
            changed.is_empty(),
            "{}: no flow may change, got {changed:?}",
            case.name
        ),
    }
    let mut want_stats: Stats = [0; StatReason::COUNT as usize];
    for (r, n) in case.stats {
        want_stats[r.code() as usize] = *n;
    }
    let mut got_stats: Stats = [0; StatReason::COUNT as usize];
    for (i, (a, b)) in stats_after.iter().zip(stats_before.iter()).enumerate() {
        got_stats[i] = a - b;
    }
    let hit = usize::from(StatReason::VerdictHit.code());
    let miss = usize::from(StatReason::VerdictMiss.code());
    let asked = got_stats[hit] + got_stats[miss];
    if dp.verdict_generation().is_none() || !case.cacheable() {
        assert_eq!(asked, 0, "{}: the verdict cache is not asked", case.name);
    } else if cache == Cache::Warm {
        assert_eq!(
            (got_stats[hit], got_stats[miss]),
            (1, 0),
            "{}: the second run takes the cached verdict",
            case.name
        );
    } else {
        assert_eq!(asked, 1, "{}: the verdict cache is asked once", case.name);
    }
    (got_stats[hit], got_stats[miss]) = (0, 0);
    assert_eq!(got_stats, want_stats, "{}: stats deltas", case.name);
}

fn udp(src: Mac, dst: Mac, s: &str, d: &str) -> Frame {
    Frame::udp(src, dst, ip(s), ip(d))
}

fn with_proto(mut f: Frame, p: u8) -> Frame {
    f.proto = p;
    f
}

#[expect(clippy::too_many_lines, reason = "one table, read top to bottom")]
fn cases(n: &Net) -> Vec<Case> {
    use Direction::{Rx, Tx};
    use Expect::{Key, Nothing};
    use L4Class::{Icmp, Other, Tcp, Udp};
    use Zone::{External, Infra, Miss, Multicast, OtherTenant, SameTenant, Shared};
    const V4: u16 = 0x0800;
    const V6: u16 = 0x86dd;
    let k = |zone, l4, eth_proto| Key {
        zone,
        l4,
        eth_proto,
    };
    let c = |name, dir, frame: Vec<u8>, expect, stats| Case {
        name,
        dir,
        frame,
        expect,
        stats,
    };
    let vlan = |mut f: Frame, tpid| {
        f.vlan = Some((tpid, 42));
        f.bytes()
    };
    // The test-run facility refuses an untagged frame whose IP header is
    // short (it parses it itself), but not a tagged one: the classifier's
    // truncated path is reached through a VLAN tag.
    let mut truncated4 = vlan(udp(n.a, n.router, "10.1.0.10", "8.8.8.8"), 0x8100);
    truncated4.truncate(18 + 10);
    let mut truncated6 = vlan(udp(n.a, n.router, "2001:db8:1::10", "2001:4860::1"), 0x8100);
    truncated6.truncate(18 + 30);
    vec![
        c(
            "unknown VM tx",
            Tx,
            udp(n.unknown, n.router, "10.9.0.1", "8.8.8.8").bytes(),
            k(Miss, Udp, V4),
            &[],
        ),
        c(
            "unknown VM rx",
            Rx,
            udp(n.router, n.unknown, "8.8.8.8", "10.9.0.1").bytes(),
            k(Miss, Udp, V4),
            &[],
        ),
        c(
            "unknown VM talking to a known peer",
            Tx,
            udp(n.unknown, n.a, "10.9.0.1", "10.1.0.10").bytes(),
            k(Miss, Udp, V4),
            &[],
        ),
        c(
            "L2 same tenant tx",
            Tx,
            udp(n.a, n.a2, "10.1.0.10", "10.1.0.11").bytes(),
            k(SameTenant, Udp, V4),
            &[],
        ),
        c(
            "L2 same tenant rx",
            Rx,
            udp(n.a2, n.a, "10.1.0.11", "10.1.0.10").bytes(),
            k(SameTenant, Udp, V4),
            &[],
        ),
        // Direct L2 ignores the IP: even an address the trie calls external.
        c(
            "L2 same tenant beats trie",
            Tx,
            udp(n.a, n.a2, "10.1.0.10", "8.8.8.8").bytes(),
            k(SameTenant, Udp, V4),
            &[],
        ),
        c(
            "L2 other tenant tx",
            Tx,
            udp(n.a, n.b, "10.1.0.10", "10.2.0.10").bytes(),
            k(OtherTenant, Udp, V4),
            &[],
        ),
        c(
            "L2 other tenant rx",
            Rx,
            udp(n.b, n.a, "10.2.0.10", "10.1.0.10").bytes(),
            k(OtherTenant, Udp, V4),
            &[],
        ),
        c(
            "routed own subnet tx",
            Tx,
            udp(n.a, n.router, "10.1.0.10", "10.1.0.77").bytes(),
            k(SameTenant, Udp, V4),
            &[],
        ),
        c(
            "routed own subnet rx",
            Rx,
            udp(n.router, n.a, "10.1.0.77", "10.1.0.10").bytes(),
            k(SameTenant, Udp, V4),
            &[],
        ),
        c(
            "routed static-route row tx",
            Tx,
            udp(n.a, n.router, "10.1.0.10", "172.16.9.9").bytes(),
            k(OtherTenant, Udp, V4),
            &[],
        ),
        c(
            "routed static-route row rx",
            Rx,
            udp(n.router, n.a, "172.16.9.9", "10.1.0.10").bytes(),
            k(OtherTenant, Udp, V4),
            &[],
        ),
        c(
            "routed router neighbour",
            Tx,
            udp(n.a, n.router, "10.1.0.10", "10.2.0.10").bytes(),
            k(OtherTenant, Udp, V4),
            &[],
        ),
        c(
            "tenant gateway /32 beats owned /24",
            Tx,
            udp(n.a, n.router, "10.1.0.10", "10.1.0.1").bytes(),
            k(Infra, Udp, V4),
            &[],
        ),
        c(
            "fallback to global shared tx",
            Tx,
            udp(n.a, n.router, "10.1.0.10", "100.64.3.3").bytes(),
            k(Shared, Udp, V4),
            &[],
        ),
        c(
            "fallback to global shared rx",
            Rx,
            udp(n.router, n.b, "100.64.3.3", "10.2.0.10").bytes(),
            k(Shared, Udp, V4),
            &[],
        ),
        c(
            "fallback to global infra (other tenant's gateway)",
            Tx,
            udp(n.b, n.router, "10.2.0.10", "10.1.0.1").bytes(),
            k(Infra, Udp, V4),
            &[],
        ),
        c(
            "metadata address",
            Tx,
            with_proto(
                udp(n.b, n.router, "10.2.0.10", "169.254.169.254"),
                proto::TCP,
            )
            .bytes(),
            k(Infra, Tcp, V4),
            &[],
        ),
        c(
            "catch-all external tx",
            Tx,
            udp(n.a, n.router, "10.1.0.10", "8.8.8.8").bytes(),
            k(External, Udp, V4),
            &[],
        ),
        c(
            "catch-all external rx",
            Rx,
            udp(n.router, n.a, "8.8.8.8", "10.1.0.10").bytes(),
            k(External, Udp, V4),
            &[],
        ),
        c(
            "multicast v4 tx",
            Tx,
            udp(n.a, mac("01:00:5e:00:00:fb"), "10.1.0.10", "224.0.0.251").bytes(),
            k(Multicast, Udp, V4),
            &[],
        ),
        c(
            "multicast v4 rx (unknown sender)",
            Rx,
            udp(n.unknown, mac("01:00:5e:00:00:01"), "10.9.0.1", "224.0.0.1").bytes(),
            k(Multicast, Udp, V4),
            &[],
        ),
        c(
            "broadcast",
            Tx,
            udp(n.a, mac("ff:ff:ff:ff:ff:ff"), "10.1.0.10", "10.1.0.255").bytes(),
            k(Multicast, Udp, V4),
            &[],
        ),
        c(
            "multicast v6",
            Tx,
            with_proto(
                udp(n.a, mac("33:33:00:00:00:01"), "fe80::1", "ff02::1"),
                proto::ICMPV6,
            )
            .bytes(),
            k(Multicast, Icmp, V6),
            &[],
        ),
        c(
            "ipv6 own subnet",
            Tx,
            udp(n.a, n.router, "2001:db8:1::10", "2001:db8:1::99").bytes(),
            k(SameTenant, Udp, V6),
            &[],
        ),
        c(
            "ipv6 other tenant row",
            Rx,
            udp(n.router, n.a, "2001:db8:2::7", "2001:db8:1::10").bytes(),
            k(OtherTenant, Udp, V6),
            &[],
        ),
        c(
            "ipv6 global shared",
            Tx,
            udp(n.a, n.router, "2001:db8:1::10", "2001:db8:ffff:1::1").bytes(),
            k(Shared, Udp, V6),
            &[],
        ),
        c(
            "ipv6 catch-all",
            Tx,
            udp(n.a, n.router, "2001:db8:1::10", "2001:4860::8888").bytes(),
            k(External, Udp, V6),
            &[],
        ),
        c(
            "ipv6 L2 other tenant",
            Tx,
            udp(n.a, n.b, "2001:db8:1::10", "2001:db8:2::10").bytes(),
            k(OtherTenant, Udp, V6),
            &[],
        ),
        c(
            "vlan 802.1Q ipv4",
            Tx,
            vlan(udp(n.a, n.router, "10.1.0.10", "8.8.8.8"), 0x8100),
            k(External, Udp, V4),
            &[(StatReason::Vlan, 1)],
        ),
        c(
            "vlan 802.1ad ipv6",
            Rx,
            vlan(
                udp(n.router, n.a, "2001:db8:1::5", "2001:db8:1::10"),
                0x88a8,
            ),
            k(SameTenant, Udp, V6),
            &[(StatReason::Vlan, 1)],
        ),
        c(
            "vlan non-IP inside",
            Tx,
            {
                let mut f = non_ip(n.a, n.router, 0x8100, 60);
                f[16] = 0x08;
                f[17] = 0x06;
                f
            },
            Nothing,
            &[(StatReason::Vlan, 1), (StatReason::SkippedEthertype, 1)],
        ),
        c(
            "ARP skipped",
            Tx,
            non_ip(n.a, mac("ff:ff:ff:ff:ff:ff"), 0x0806, 42),
            Nothing,
            &[(StatReason::SkippedEthertype, 1)],
        ),
        c(
            "LLDP skipped",
            Rx,
            non_ip(n.router, n.a, 0x88cc, 60),
            Nothing,
            &[(StatReason::SkippedEthertype, 1)],
        ),
        c(
            "truncated ipv4",
            Tx,
            truncated4,
            k(Miss, Other, V4),
            &[(StatReason::Vlan, 1), (StatReason::Truncated, 1)],
        ),
        c(
            "truncated ipv6",
            Rx,
            truncated6,
            k(Miss, Other, V6),
            &[(StatReason::Vlan, 1), (StatReason::Truncated, 1)],
        ),
        c(
            "amphora segment 2 at the amphora (routed)",
            Tx,
            udp(n.amp, n.router, "10.3.0.5", "10.2.0.10").bytes(),
            k(Infra, Udp, V4),
            &[],
        ),
        c(
            "amphora segment 2 at the amphora (L2)",
            Tx,
            with_proto(udp(n.amp, n.member, "10.3.0.5", "10.3.0.20"), proto::TCP).bytes(),
            k(Infra, Tcp, V4),
            &[],
        ),
        c(
            "amphora segment 2 reply at the amphora",
            Rx,
            udp(n.member, n.amp, "10.3.0.20", "10.3.0.5").bytes(),
            k(Infra, Udp, V4),
            &[],
        ),
        c(
            "amphora segment 2 at the member rx",
            Rx,
            udp(n.amp, n.member, "10.3.0.5", "10.3.0.20").bytes(),
            k(Infra, Udp, V4),
            &[],
        ),
        c(
            "amphora segment 2 at the member tx",
            Tx,
            udp(n.member, n.amp, "10.3.0.20", "10.3.0.5").bytes(),
            k(Infra, Udp, V4),
            &[],
        ),
        c(
            "amphora segment 1 keeps the client's zone",
            Rx,
            udp(n.router, n.amp, "8.8.8.8", "10.3.0.100").bytes(),
            k(External, Udp, V4),
            &[],
        ),
        c(
            "amphora flag with an unlisted address",
            Tx,
            udp(n.amp, n.member, "10.3.0.6", "10.3.0.20").bytes(),
            k(SameTenant, Udp, V4),
            &[],
        ),
        c(
            "l4 tcp",
            Tx,
            with_proto(udp(n.a, n.router, "10.1.0.10", "8.8.4.4"), proto::TCP).bytes(),
            k(External, Tcp, V4),
            &[],
        ),
        c(
            "l4 icmp",
            Tx,
            with_proto(udp(n.a, n.router, "10.1.0.10", "8.8.4.4"), proto::ICMP).bytes(),
            k(External, Icmp, V4),
            &[],
        ),
        c(
            "l4 icmpv6",
            Rx,
            with_proto(
                udp(n.router, n.a, "2001:4860::1", "2001:db8:1::10"),
                proto::ICMPV6,
            )
            .bytes(),
            k(External, Icmp, V6),
            &[],
        ),
        c(
            "l4 other (gre)",
            Tx,
            with_proto(udp(n.a, n.router, "10.1.0.10", "8.8.4.4"), proto::GRE).bytes(),
            k(External, Other, V4),
            &[],
        ),
        c(
            "l4 other (ipv6 hop-by-hop header)",
            Tx,
            with_proto(
                udp(n.a, n.router, "2001:db8:1::10", "2001:4860::1"),
                proto::HOPOPTS,
            )
            .bytes(),
            k(External, Other, V6),
            &[],
        ),
    ]
}

/// Every frame of the table on every CPU of the machine, in every build
/// the agent loads (plain adds; the atomic adds and sequence-checked
/// verdict slots of `PREEMPT_RT`; the ordered generation load of other
/// architectures), with the verdict cache in any state and then warm: each
/// CPU counts into its own sub-entry of the same flow key, whether the
/// zone was computed or cached.
#[test]
fn every_branch_of_the_classifier() {
    let cpus = common::cpus();
    assert!(cpus.len() >= 2, "the test needs two CPUs, has {cpus:?}");
    for variant in [
        FlowsVariant::ByCpu,
        FlowsVariant::ByCpuAtomic,
        FlowsVariant::ByCpuGenFetch,
    ] {
        let pins = common::PinDir::new("cls");
        let (dp, _, _) = Datapath::load_variant(&pins.config(), variant).unwrap();
        assert_eq!(dp.variant(), variant);
        assert!(
            dp.verdict_generation().is_some(),
            "{variant:?} caches verdicts"
        );
        let net = populate(&dp);
        let cases = cases(&net);
        assert!(cases.len() >= 30, "the table must cover at least 30 frames");
        for cpu in &cpus {
            for case in &cases {
                run_case(&dp, case, *cpu, Cache::Any);
            }
            for case in &cases {
                run_case(&dp, case, *cpu, Cache::Warm);
            }
        }
    }
}

/// The ifindex the program test-run facility runs on (the namespace's
/// loopback device, as no other is given).
const TEST_RUN_IFINDEX: u32 = 1;

/// Runs `frame` once on `dir` on every CPU and returns the one flow key
/// that grew by it, each time in the sub-entry of the CPU it ran on.
fn grown_key(dp: &Datapath, dir: Direction, frame: &[u8]) -> FlowKey {
    let mut keys = Vec::new();
    for cpu in common::cpus() {
        keys.push(common::run_once_on(dp, cpu, dir, frame).key);
    }
    keys.dedup();
    assert_eq!(keys.len(), 1, "one flow key on every CPU: {keys:?}");
    keys[0]
}

#[test]
fn received_group_frames_are_keyed_by_the_receiving_port() {
    let pins = common::PinDir::new("tapport");
    let (dp, _, _) = pins.load();
    let net = populate(&dp);
    assert_eq!(dp.tap_port(TEST_RUN_IFINDEX).unwrap(), None);
    dp.set_tap_port(TEST_RUN_IFINDEX, net.a2).unwrap();
    assert_eq!(dp.tap_port(TEST_RUN_IFINDEX).unwrap(), Some(net.a2));

    let group = mac("01:00:5e:00:00:fb");
    let bcast = mac("ff:ff:ff:ff:ff:ff");
    let v6group = mac("33:33:00:00:00:01");
    for (name, frame, l4, eth_proto) in [
        (
            "multicast",
            udp(net.b, group, "10.2.0.10", "224.0.0.251").bytes(),
            L4Class::Udp,
            0x0800,
        ),
        (
            "broadcast",
            udp(net.unknown, bcast, "10.9.0.1", "10.1.0.255").bytes(),
            L4Class::Udp,
            0x0800,
        ),
        (
            "ipv6 multicast",
            with_proto(
                udp(net.router, v6group, "fe80::1", "ff02::1"),
                proto::ICMPV6,
            )
            .bytes(),
            L4Class::Icmp,
            0x86dd,
        ),
    ] {
        // Received: the port behind the tap stands where the group was.
        let mut want = key_of(&frame, Direction::Rx, Zone::Multicast, l4, eth_proto);
        want.dst_mac = net.a2.0;
        assert_eq!(grown_key(&dp, Direction::Rx, &frame), want, "{name} rx");
        assert_eq!(
            want.vm_mac().unwrap(),
            net.a2,
            "{name}: attributable to the port"
        );
        // Sent: the frame's own MACs (the VM is the source already).
        let sent = key_of(&frame, Direction::Tx, Zone::Multicast, l4, eth_proto);
        assert_eq!(grown_key(&dp, Direction::Tx, &frame), sent, "{name} tx");
    }

    // A unicast frame keeps its MACs whatever the tap's port.
    let unicast = udp(net.router, net.a, "8.8.8.8", "10.1.0.10").bytes();
    assert_eq!(
        grown_key(&dp, Direction::Rx, &unicast),
        key_of(
            &unicast,
            Direction::Rx,
            Zone::External,
            L4Class::Udp,
            0x0800
        )
    );

    // No port known for the tap: the group address stays (counted, not
    // attributable).
    assert!(dp.delete_tap_port(TEST_RUN_IFINDEX).unwrap());
    assert!(!dp.delete_tap_port(TEST_RUN_IFINDEX).unwrap());
    let frame = udp(net.b, group, "10.2.0.10", "224.0.0.251").bytes();
    assert_eq!(
        grown_key(&dp, Direction::Rx, &frame),
        key_of(&frame, Direction::Rx, Zone::Multicast, L4Class::Udp, 0x0800)
    );
}

#[test]
fn a_binding_reads_back_as_written_until_deleted() {
    let pins = common::PinDir::new("epread");
    let (dp, _, _) = pins.load();
    let net = populate(&dp);
    let amp = dp
        .endpoint(net.amp)
        .unwrap()
        .expect("the amphora port is bound");
    assert_eq!(amp.flags, lachesis_abi::ENDPOINT_FLAG_AMPHORA);
    let a = dp.endpoint(net.a).unwrap().expect("VM a is bound");
    assert_eq!(a.flags, 0);
    assert_ne!(a.tenant_id, amp.tenant_id, "two tenants, two ids");
    assert_eq!(
        dp.endpoint(net.router).unwrap(),
        None,
        "router MACs are never bound"
    );
    assert!(dp.delete_endpoint(net.a).unwrap());
    assert_eq!(dp.endpoint(net.a).unwrap(), None);
}

#[test]
fn missing_catch_all_is_miss() {
    let pins = common::PinDir::new("nocatch");
    let (dp, _, _) = pins.load();
    let net = populate(&dp);
    assert!(dp.delete_zone(0, "0.0.0.0/0".parse().unwrap()).unwrap());
    assert!(
        !dp.delete_zone(0, "0.0.0.0/0".parse().unwrap()).unwrap(),
        "a second delete finds nothing"
    );
    for (name, dir, frame) in [
        (
            "tx",
            Direction::Tx,
            udp(net.a, net.router, "10.1.0.10", "8.8.8.8").bytes(),
        ),
        (
            "rx",
            Direction::Rx,
            udp(net.router, net.b, "8.8.8.8", "10.2.0.10").bytes(),
        ),
    ] {
        run_case(
            &dp,
            &Case {
                name,
                dir,
                frame,
                expect: Expect::Key {
                    zone: Zone::Miss,
                    l4: L4Class::Udp,
                    eth_proto: 0x0800,
                },
                stats: &[],
            },
            0,
            Cache::Any,
        );
    }
    // IPv6 still has its catch-all.
    run_case(
        &dp,
        &Case {
            name: "v6 unaffected",
            dir: Direction::Tx,
            frame: udp(net.a, net.router, "2001:db8:1::10", "2001:4860::1").bytes(),
            expect: Expect::Key {
                zone: Zone::External,
                l4: L4Class::Udp,
                eth_proto: 0x86dd,
            },
            stats: &[],
        },
        0,
        Cache::Any,
    );
}

#[test]
fn created_stamp_is_set_once_and_renewed_after_delete() {
    let pins = common::PinDir::new("stamp");
    let (dp, _, _) = pins.load();
    let net = populate(&dp);
    let frame = udp(net.a, net.router, "10.1.0.10", "8.8.8.8").bytes();
    let key = key_of(&frame, Direction::Tx, Zone::External, L4Class::Udp, 0x0800);
    // One CPU: the identity is its sub-entry's.
    let entry = EntryKey::new(key, 0);
    let read = |dp: &Datapath| -> FlowCounters { common::snapshot_entries(dp)[&entry] };
    let run = |n| common::on_cpu(0, || dp.test_run(Direction::Tx, &frame, n)).unwrap();

    run(1);
    let first = read(&dp);
    assert_eq!((first.bytes, first.packets), (frame.len() as u64, 1));
    assert!(first.created_ns > 0);
    std::thread::sleep(std::time::Duration::from_millis(20));
    run(3);
    let second = read(&dp);
    assert_eq!((second.bytes, second.packets), (4 * frame.len() as u64, 4));
    assert_eq!(
        second.created_ns, first.created_ns,
        "created_ns is stamped only at creation"
    );
    assert!(second.last_seen_ns >= first.last_seen_ns);

    assert!(dp.delete_flow(&entry).unwrap());
    run(1);
    let third = read(&dp);
    assert_eq!((third.bytes, third.packets), (frame.len() as u64, 1));
    assert!(
        third.created_ns > first.created_ns,
        "a recreated entry carries a new identity"
    );
}

#[test]
fn full_map_counts_update_failure() {
    let pins = common::PinDir::new("full");
    let mut cfg = pins.config();
    cfg.flows_max_entries = Some(4);
    let (dp, _, _) = lachesis_datapath::Datapath::load(&cfg).unwrap();
    let net = populate(&dp);
    let dsts = ["8.8.8.1", "8.8.8.2", "8.8.8.3", "8.8.8.4"];
    // Four distinct keys fill the map (they differ by L4 class and zone).
    let frames: Vec<Vec<u8>> = [proto::UDP, proto::TCP, proto::ICMP, proto::GRE]
        .iter()
        .zip(dsts)
        .map(|(p, d)| with_proto(udp(net.a, net.router, "10.1.0.10", d), *p).bytes())
        .collect();
    // One CPU: four sub-entries of its own fill the map.
    let run = |dir, f: &[u8]| common::on_cpu(0, || dp.test_run(dir, f, 1)).unwrap();
    for f in &frames {
        run(Direction::Tx, f);
    }
    assert_eq!(common::snapshot_entries(&dp).len(), 4);
    let before = dp.stats().unwrap();
    // A fifth key cannot be inserted: the loss must be counted, not silent.
    run(Direction::Rx, &frames[0]);
    // Nor can another CPU's sub-entry of a counted key.
    let other = common::cpus()
        .into_iter()
        .find(|c| *c != 0)
        .expect("a second CPU");
    common::on_cpu(other, || dp.test_run(Direction::Tx, &frames[1], 1)).unwrap();
    let after = dp.stats().unwrap();
    assert_eq!(
        after[StatReason::UpdateFailure.code() as usize]
            - before[StatReason::UpdateFailure.code() as usize],
        2
    );
    // Existing sub-entries still count.
    run(Direction::Tx, &frames[0]);
    assert_eq!(
        common::snapshot(&dp)
            .values()
            .map(|v| v.packets)
            .sum::<u64>(),
        5
    );
}

#[test]
fn metadata_fill_counts_what_was_written_and_deleted() {
    let pins = common::PinDir::new("fill");
    let (dp, _, _) = pins.load();
    let entries = |dp: &Datapath| -> Vec<(&'static str, u64, u32)> {
        dp.metadata_fill()
            .iter()
            .map(|f| (f.name, f.entries, f.capacity))
            .collect()
    };
    assert_eq!(
        entries(&dp),
        [
            ("endpoints", 0, 16384),
            ("zones_v4", 0, 65536),
            ("zones_v6", 0, 65536),
            ("amphora_ips", 0, 8192),
            ("tap_ports", 0, 16384),
        ]
    );
    for i in 0..300u64 {
        let value = lachesis_abi::EndpointValue {
            tenant_id: 7,
            ..lachesis_abi::EndpointValue::default()
        };
        dp.upsert_endpoint(Mac::from_u64(0x02_00_00_00_00_00 + i), value)
            .unwrap();
    }
    for i in 0..200u8 {
        let p4: lachesis_abi::Prefix = format!("10.{i}.0.0/16").parse().unwrap();
        dp.upsert_zone(7, p4, Zone::SameTenant).unwrap();
    }
    for i in 0..50u16 {
        let p6: lachesis_abi::Prefix = format!("2001:db8:{i:x}::/48").parse().unwrap();
        dp.upsert_zone(0, p6, Zone::External).unwrap();
    }
    dp.upsert_amphora(7, ip("10.9.0.4")).unwrap();
    for ifindex in 10..13 {
        dp.set_tap_port(
            ifindex,
            Mac::from_u64(0x02_00_00_00_00_00 + u64::from(ifindex)),
        )
        .unwrap();
    }
    assert!(dp.delete_tap_port(12).unwrap());
    // An overwrite is not a second entry; a delete removes one.
    dp.upsert_zone(7, "10.0.0.0/16".parse().unwrap(), Zone::Shared)
        .unwrap();
    assert!(dp
        .delete_endpoint(Mac::from_u64(0x02_00_00_00_00_00))
        .unwrap());
    assert_eq!(
        entries(&dp),
        [
            ("endpoints", 299, 16384),
            ("zones_v4", 200, 65536),
            ("zones_v6", 50, 65536),
            ("amphora_ips", 1, 8192),
            ("tap_ports", 2, 16384),
        ]
    );
}
