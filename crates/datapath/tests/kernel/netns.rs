//! Real traffic between network namespaces through taps the crate attached
//! to. Truth is independent: the bytes and packets the drain attributes to
//! each tap must equal the kernel's own interface counters, exactly.

use crate::common;

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::Duration;

use lachesis_abi::{Direction, EndpointValue, EntryKey, FlowCounters, Zone};
use lachesis_datapath::{
    AttachMode, AttachOutcome, Datapath, DrainBuffer, FlowsLayout, FlowsPin, FlowsVariant,
};
use lachesis_lab::netns::{IfCounters, Lab, Vm, VmTraffic};
use lachesis_lab::traffic::Exchange;

/// Per-direction totals of one VM (from the drain, or from its tap).
type Totals = VmTraffic;

fn drain(dp: &Datapath) -> Vec<(EntryKey, FlowCounters)> {
    let mut buf = DrainBuffer::new();
    dp.drain(&mut buf).unwrap();
    buf.entries
}

fn two_vms() -> (Lab, Vm, Vm) {
    let mut lab = Lab::new();
    let a = lab.add_vm(
        "02:00:00:00:aa:01".parse().unwrap(),
        Ipv4Addr::new(10, 77, 0, 1),
    );
    let b = lab.add_vm(
        "02:00:00:00:bb:02".parse().unwrap(),
        Ipv4Addr::new(10, 77, 0, 2),
    );
    lab.static_neighbours();
    (lab, a, b)
}

fn program_metadata(dp: &Datapath, a: &Vm, b: &Vm) {
    // What the agent's link watcher writes before it attaches a tap: the
    // port behind it (here the VM's own MAC), so group frames the tap
    // delivers are keyed by it.
    for vm in [a, b] {
        let index = lachesis_datapath::ifindex(&vm.tap).unwrap();
        dp.set_tap_port(index, vm.mac).unwrap();
    }
    dp.upsert_endpoint(
        a.mac,
        EndpointValue {
            tenant_id: 1,
            flags: 0,
        },
    )
    .unwrap();
    dp.upsert_endpoint(
        b.mac,
        EndpointValue {
            tenant_id: 2,
            flags: 0,
        },
    )
    .unwrap();
    dp.upsert_zone(0, "0.0.0.0/0".parse().unwrap(), Zone::External)
        .unwrap();
}

/// Ping, a UDP burst, a TCP exchange of known sizes, and broadcast and
/// multicast datagrams, both directions, sent once from each of two CPUs
/// (the senders pinned: a flow is then counted in two sub-entries, DESIGN
/// §4.7); returns once the taps are quiet.
fn traffic(a: &Vm, b: &Vm, round: u16) {
    let cpus = common::cpus();
    assert!(cpus.len() >= 2, "the test needs two CPUs, has {cpus:?}");
    for (i, cpu) in cpus[..2].iter().enumerate() {
        let port = 40000 + round + 100 * u16::try_from(i).unwrap();
        common::on_cpu(*cpu, || {
            Exchange::between(a, b)
                .ping(5, 1000)
                .ping_back(3, 56)
                .udp(port, 20, 1200)
                .tcp(port, 1 << 20, 256 * 1024)
                .groups(Ipv4Addr::new(239, 77, 0, 1), 7, 300 + usize::from(round))
                .groups_back(Ipv4Addr::new(239, 77, 0, 2), 5, 700)
                .run();
        });
    }
}

fn attach_both(dp: &Datapath, a: &Vm, b: &Vm) -> Vec<[AttachOutcome; 2]> {
    vec![dp.attach(&a.tap).unwrap(), dp.attach(&b.tap).unwrap()]
}

/// Our attachments per (tap, direction): exactly one each, or this test fails.
fn assert_single_attachment(dp: &Datapath, vms: &[&Vm], mode: AttachMode) {
    let all = dp.attachments().unwrap();
    for vm in vms {
        let mut seen: BTreeMap<u8, usize> = BTreeMap::new();
        for at in all
            .iter()
            .filter(|at| at.ifname.as_deref() == Some(vm.tap.as_str()))
        {
            assert_eq!(at.mode, mode, "{at:?}");
            *seen.entry(at.direction.code()).or_default() += 1;
        }
        assert_eq!(
            seen,
            BTreeMap::from([(0, 1), (1, 1)]),
            "one program per hook on {}: {all:?}",
            vm.tap
        );
    }
}

/// Interface counters that did not move while `read` ran, with its result:
/// a straggler packet between the two readings would compare unequal
/// windows, so wait for a quiet window instead.
fn quiet_reading<T>(vms: &[&Vm], mut read: impl FnMut() -> T) -> (Vec<IfCounters>, T) {
    for _ in 0..50 {
        let c1: Vec<_> = vms.iter().map(|v| v.tap_counters()).collect();
        let got = read();
        let c2: Vec<_> = vms.iter().map(|v| v.tap_counters()).collect();
        if c1 == c2 {
            return (c2, got);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("interface counters never settled");
}

fn check_against_counters(
    label: &str,
    vms: &[&Vm],
    before_if: &[IfCounters],
    before: &[Totals],
    read: impl FnMut() -> Vec<(EntryKey, FlowCounters)>,
) {
    let (now, entries) = quiet_reading(vms, read);
    let entries = &entries;
    let mut cpus: Vec<u16> = entries
        .iter()
        .filter(|(e, _)| !e.is_folded())
        .map(|(e, _)| e.cpu)
        .collect();
    cpus.sort_unstable();
    cpus.dedup();
    assert!(
        cpus.len() >= 2 || entries.iter().all(|(e, _)| e.is_folded()),
        "{label}: traffic from two pinned senders was counted on CPUs {cpus:?} only"
    );
    for (i, vm) in vms.iter().enumerate() {
        let want = Totals::from_tap(now[i].since(&before_if[i]));
        let got = common::totals_for(entries, vm.mac).since(before[i]);
        assert!(
            want.tx_packets > 0 && want.rx_packets > 0,
            "{label}: no traffic crossed {}",
            vm.tap
        );
        assert_eq!(
            got, want,
            "{label}: drain vs interface counters of {}; entries: {entries:?}",
            vm.tap
        );
    }
}

fn continuity(mode: AttachMode) {
    let (_lab, a, b) = two_vms();
    let pins = common::PinDir::new("netns");
    let mut cfg = pins.config();
    cfg.attach_mode = mode;
    let (dp1, first_pin, _) = Datapath::load(&cfg).unwrap();
    assert_eq!(first_pin, FlowsPin::Created);
    program_metadata(&dp1, &a, &b);
    // Counters before our programs exist: everything from here on is ours.
    let if0 = [a.tap_counters(), b.tap_counters()];
    assert_eq!(
        attach_both(&dp1, &a, &b),
        vec![[AttachOutcome::Attached; 2]; 2]
    );
    assert_single_attachment(&dp1, &[&a, &b], mode);

    traffic(&a, &b, 1);
    let mut e1 = Vec::new();
    check_against_counters(
        "first instance",
        &[&a, &b],
        &if0,
        &[Totals::default(); 2],
        || {
            e1 = drain(&dp1);
            e1.clone()
        },
    );
    // T1 ↔ T2 over direct L2: every unicast byte is other_tenant; the
    // group frames are multicast, each received one keyed by its port.
    assert!(
        e1.iter()
            .all(|(k, _)| [Zone::OtherTenant, Zone::Multicast].contains(&k.key.zone().unwrap())),
        "{e1:?}"
    );
    for vm in [&a, &b] {
        let received: u64 = e1
            .iter()
            .filter(|(k, _)| {
                k.key.zone().unwrap() == Zone::Multicast
                    && k.key.direction().unwrap() == Direction::Rx
                    && k.key.vm_mac().unwrap() == vm.mac
            })
            .map(|(_, v)| v.packets)
            .sum();
        // The other VM's broadcasts and multicasts (7 + 7 or 5 + 5), sent
        // once from each of two CPUs.
        let want = 2 * if vm.mac == a.mac { 10 } else { 14 };
        assert_eq!(received, want, "group frames received by {}", vm.tap);
    }

    // A second instance: same pins, fresh metadata maps, replaces in place.
    let (dp2, second_pin, retired) = Datapath::load(&cfg).unwrap();
    assert_eq!(second_pin, FlowsPin::Reused);
    assert!(retired.is_empty());
    program_metadata(&dp2, &a, &b);
    assert_eq!(
        attach_both(&dp2, &a, &b),
        vec![[AttachOutcome::Replaced; 2]; 2]
    );
    assert_single_attachment(&dp2, &[&a, &b], mode);
    drop(dp1); // the old agent exits; its attachments must not go with it

    traffic(&a, &b, 2);
    check_against_counters(
        "after restart",
        &[&a, &b],
        &if0,
        &[Totals::default(); 2],
        || drain(&dp2),
    );

    assert!(dp2.detach(&a.tap).unwrap());
    assert!(dp2.detach(&b.tap).unwrap());
    assert!(dp2
        .attachments()
        .unwrap()
        .iter()
        .all(|at| at.ifname.as_deref() != Some(a.tap.as_str())));
    assert!(!dp2.detach(&a.tap).unwrap(), "nothing left to detach");
}

#[test]
fn drain_equals_interface_counters_across_restart_tcx() {
    continuity(AttachMode::Tcx);
}

#[test]
fn drain_equals_interface_counters_across_restart_cls_bpf() {
    continuity(AttachMode::Tc);
}

#[test]
fn attach_mode_change_leaves_one_copy() {
    let (_lab, a, b) = two_vms();
    let pins = common::PinDir::new("mode");
    let mut cfg = pins.config();
    cfg.attach_mode = AttachMode::Tc;
    let (tc, _, _) = Datapath::load(&cfg).unwrap();
    program_metadata(&tc, &a, &b);
    let if0 = [a.tap_counters(), b.tap_counters()];
    attach_both(&tc, &a, &b);
    cfg.attach_mode = AttachMode::Tcx;
    let (tcx, _, _) = Datapath::load(&cfg).unwrap();
    program_metadata(&tcx, &a, &b);
    attach_both(&tcx, &a, &b);
    assert_single_attachment(&tcx, &[&a, &b], AttachMode::Tcx);
    traffic(&a, &b, 3);
    check_against_counters(
        "tcx after tc",
        &[&a, &b],
        &if0,
        &[Totals::default(); 2],
        || drain(&tcx),
    );
}

#[test]
fn incompatible_pin_is_replaced_after_its_last_drain() {
    let (_lab, a, b) = two_vms();
    let pins = common::PinDir::new("resize");
    let mut cfg = pins.config();
    cfg.flows_max_entries = Some(4096);
    let (old, _, _) = Datapath::load(&cfg).unwrap();
    program_metadata(&old, &a, &b);
    let if0 = [a.tap_counters(), b.tap_counters()];
    attach_both(&old, &a, &b);
    traffic(&a, &b, 4);

    // A new size makes the pin incompatible: it must be retired, not adopted.
    cfg.flows_max_entries = Some(8192);
    let (new, pin, mut retired) = Datapath::load(&cfg).unwrap();
    assert_eq!(pin, FlowsPin::Replaced);
    assert_eq!(new.flows_max_entries(), 8192);
    assert_eq!(retired.len(), 1);
    assert_eq!(retired[0].max_entries(), 4096);
    assert!(drain(&new).is_empty(), "the new map starts empty");
    program_metadata(&new, &a, &b);
    attach_both(&new, &a, &b);
    assert_single_attachment(&new, &[&a, &b], new.attach_mode());
    drop(old);
    traffic(&a, &b, 5);

    // Old map's last reading + new map = everything, nothing twice.
    retired_then_live(
        "across the swap",
        retired.pop().unwrap(),
        &new,
        &[&a, &b],
        &if0,
        &cfg,
    );
}

/// The retired map's last drain beside the live map's equals every byte
/// the taps' counters saw since `if0`, none twice; then the retired pin
/// is removed and a later load finds nothing retired.
fn retired_then_live(
    label: &str,
    r: lachesis_datapath::RetiredFlows,
    live: &Datapath,
    vms: &[&Vm],
    if0: &[IfCounters],
    cfg: &lachesis_datapath::DatapathConfig,
) {
    check_against_counters(label, vms, if0, &[Totals::default(); 2], || {
        let mut buf = DrainBuffer::new();
        r.drain(&mut buf).unwrap();
        let mut all = buf.entries.clone();
        all.extend(drain(live));
        all
    });
    let path = r.path().to_path_buf();
    r.remove().unwrap();
    assert!(!path.exists(), "{label}: the old pin is gone");
    let (_again, pin, retired) = Datapath::load(cfg).unwrap();
    assert_eq!(pin, FlowsPin::Reused);
    assert!(retired.is_empty());
}

/// The upgrade (DESIGN §4.4, §4.7): the previous layout's per-CPU hash,
/// counting under traffic from two CPUs, is never adopted by the (flow key,
/// CPU) build. It is retired, its programs replaced on every tap while
/// traffic flows, and drained once (folded); with the new map's sub-entries
/// that is every byte the taps' interface counters saw, none twice, and
/// the old pin is gone.
#[test]
fn the_previous_per_cpu_layout_is_retired_and_drained_once_under_traffic() {
    let (_lab, a, b) = two_vms();
    let pins = common::PinDir::new("upgrade");
    let cfg = pins.config();
    let (old, first, _) = Datapath::load_variant(&cfg, FlowsVariant::PerCpu).unwrap();
    assert_eq!(first, FlowsPin::Created);
    assert!(matches!(old.flows_layout(), FlowsLayout::PerCpu { .. }));
    program_metadata(&old, &a, &b);
    let if0 = [a.tap_counters(), b.tap_counters()];
    attach_both(&old, &a, &b);
    traffic(&a, &b, 6);

    // The new build loads and swaps while both VMs keep sending.
    let (new, pin, mut retired) = std::thread::scope(|s| {
        let busy = s.spawn(|| traffic(&a, &b, 7));
        let (new, pin, retired) = Datapath::load(&cfg).unwrap();
        program_metadata(&new, &a, &b);
        attach_both(&new, &a, &b);
        busy.join().unwrap();
        (new, pin, retired)
    });
    assert_eq!(pin, FlowsPin::Replaced, "a per-CPU pin is never adopted");
    assert_eq!(new.flows_layout(), FlowsLayout::ByCpu);
    assert_eq!(retired.len(), 1);
    assert!(matches!(
        retired[0].layout(),
        Some(FlowsLayout::PerCpu { .. })
    ));
    assert_single_attachment(&new, &[&a, &b], new.attach_mode());
    drop(old);
    traffic(&a, &b, 8);

    let r = retired.pop().unwrap();
    let mut buf = DrainBuffer::new();
    r.drain(&mut buf).unwrap();
    assert!(
        !buf.entries.is_empty() && buf.entries.iter().all(|(e, _)| e.is_folded()),
        "the old map is read folded"
    );
    retired_then_live("across the upgrade", r, &new, &[&a, &b], &if0, &cfg);
}

#[test]
fn attachments_on_unqualified_or_vanished_interfaces_are_removed() {
    let (mut lab, a, b) = two_vms();
    let c = lab.add_vm(
        "02:00:00:00:cc:03".parse().unwrap(),
        Ipv4Addr::new(10, 77, 0, 3),
    );
    let pins = common::PinDir::new("prune");
    let (dp, _, _) = pins.load();
    for vm in [&a, &b, &c] {
        dp.attach(&vm.tap).unwrap();
    }
    let links = pins.0.join("links");
    let pin_count = || std::fs::read_dir(&links).map_or(0, Iterator::count);
    assert_eq!(pin_count(), 6, "one pinned link per tap and hook");

    // c's interface disappears (the VM is deleted): its pins must go too.
    let c_index = lachesis_datapath::ifindex(&c.tap).unwrap();
    c.exec(&["ip", "link", "del", "eth0"]).unwrap();
    assert!(lachesis_datapath::ifindex(&c.tap).is_err());

    // Only a's tap still qualifies among this lab's taps. Other tests'
    // taps on the machine carry other bpffs dirs' programs, which are not
    // ours and stay (tests/ownership.rs); they are declared qualifying all
    // the same, so even a regression could not reach them.
    let ours = [a.tap.clone(), b.tap.clone(), c.tap.clone()];
    let removed = dp
        .remove_unqualified(|name| name == a.tap || !ours.iter().any(|t| t == name))
        .unwrap();
    let mut removed_taps: Vec<_> = removed.iter().map(|r| r.ifname.clone().unwrap()).collect();
    removed_taps.sort();
    removed_taps.dedup();
    assert_eq!(removed_taps, vec![b.tap.clone()]);
    let left: Vec<_> = dp
        .attachments()
        .unwrap()
        .into_iter()
        .filter(|at| [&a.tap, &b.tap].contains(&&at.ifname.clone().unwrap_or_default()))
        .collect();
    assert_eq!(left.len(), 2, "a keeps both hooks, b has none: {left:?}");
    assert!(left
        .iter()
        .all(|at| at.ifname.as_deref() == Some(a.tap.as_str())));
    assert_eq!(pin_count(), 2, "pins of b and of the vanished c are gone");
    assert!(!links.join(format!("{c_index}-tx")).exists());
}
