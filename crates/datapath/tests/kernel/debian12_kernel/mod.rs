//! The classifier on Debian 12's own kernel (6.1: no TCX), booted under
//! qemu (docs/compatibility.md). The host test packs this very binary into
//! an initramfs with Debian's kernel modules and busybox, boots the kernel
//! that `scripts/setup-qemu` fetched from Debian's archive, and the guest
//! runs, through the cls_bpf fallback the datapath picks there:
//!
//! - every test of the `classifier` module (each §4.2 branch through
//!   `BPF_PROG_TEST_RUN`, exact keys and counters), of `ingress_qdisc`
//!   (cls_bpf refused beside an `ingress` qdisc), of `verdict` (the
//!   verdict cache's invalidation, key and `PREEMPT_RT` slots) and of
//!   `lookup_delete` but its delete race (they are in this binary, so the
//!   guest runs what the host runs; [`NOT_IN_GUEST`] says why the race is
//!   left out);
//! - `guest_*` here: the attach-type decision on a kernel without TCX, and
//!   real frames through clsact + cls_bpf on a veth, counted exactly like
//!   the interface's own counters, across a replacing second instance.
//!
//! The guest tests are `#[ignore]`d on the host (they need the guest's
//! kernel) and run with `--include-ignored` inside it, named one by one;
//! the host asserts that every test of those modules but itself printed
//! `ok` there. A missing qemu, busybox or kernel fails the test, naming
//! `scripts/setup-qemu`.

mod qemu;

use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Command;
use std::time::Duration;

use lachesis_abi::{Direction, FlowCounters, FlowKey, L4Class, StatReason, Zone};
use lachesis_datapath::{AttachMode, AttachOutcome, Datapath, Error, FlowsPin};
use lachesis_lab::frame::Frame;
use lachesis_lab::netns::{IfCounters, VmTraffic};

use crate::common;
use crate::common::topology::{ip, populate, Net};

/// Set by the guest's init to the kernel release the host booted.
const GUEST_ENV: &str = "LACHESIS_QEMU_GUEST";
/// The modules of this binary whose tests the guest runs.
const IN_GUEST: [&str; 5] = [
    "kernel::classifier::",
    "kernel::ingress_qdisc::",
    "kernel::lookup_delete::",
    "kernel::verdict::",
    "kernel::debian12_kernel::",
];
/// The host test's own name (the guest skips it).
const HOST_TEST: &str = "kernel::debian12_kernel::debian12_kernel_loads_and_classifies_through_tc";
/// Printed by the guest's init after the test binary exits.
const EXIT_MARK: &str = "LACHESIS-GUEST-EXIT";
/// Booting and the whole guest suite take 13–21 s under TCG here (2 cores,
/// load average 7–9); a slower machine gets ample slack before the run is
/// called hung.
const BOOT_TIMEOUT: Duration = Duration::from_mins(5);

/// Tests of [`IN_GUEST`] the guest does not run: the host test itself, and
/// the delete race, whose "whole packets only" does not hold under
/// emulation (a vCPU can stall between the classifier's two adds, so a
/// delete's copy reads a packet's bytes without its packet or the other
/// way round; docs/datapath.md "The packet in flight").
const NOT_IN_GUEST: [&str; 2] = [
    HOST_TEST,
    "kernel::lookup_delete::deleting_an_entry_that_keeps_counting_misses_at_most_the_packet_in_flight",
];

fn init_script(release: &str, tests: &[String]) -> String {
    // Named one by one and matched exactly: the guest runs these and
    // nothing else of the binary (its other tests need the host).
    let names = tests.iter().fold(String::new(), |mut s, t| {
        s.push(' ');
        s.push_str(t);
        s
    });
    format!(
        r#"#!/bin/busybox sh
# PID 1 of the Debian 12 kernel test's guest (tests/kernel/debian12_kernel/mod.rs).
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t tmpfs tmpfs /tmp
# /dev/null and friends (a spawned command's stdin is /dev/null).
/bin/busybox mount -t devtmpfs devtmpfs /dev
export PATH=/bin
# bpffs is left unmounted: the datapath mounts it itself (DESIGN §4.4).
for m in /modules/*.ko; do busybox insmod "$m" || echo "guest: insmod $m failed"; done
echo "guest: kernel $(busybox uname -r), $(busybox nproc) CPUs"
{GUEST_ENV}={release} /lachesis-test --include-ignored --exact --test-threads=1{names}
echo "{EXIT_MARK} $?"
busybox reboot -f
"#
    )
}

/// Names of every test of [`IN_GUEST`], from libtest's own list.
fn own_tests() -> Vec<String> {
    let exe = std::env::current_exe().expect("current exe");
    let out = Command::new(&exe)
        .args(["--list", "--format", "terse"])
        .output()
        .unwrap_or_else(|e| panic!("{} --list: {e}", exe.display()));
    assert!(out.status.success(), "{} --list failed", exe.display());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .filter(|t| IN_GUEST.iter().any(|m| t.starts_with(m)))
        .map(str::to_owned)
        .collect()
}

#[test]
fn debian12_kernel_loads_and_classifies_through_tc() {
    let kernel = qemu::Kernel::debian12();
    assert!(
        kernel.release.starts_with("6.1."),
        "the cached kernel is {} ({}), not Debian 12's 6.1",
        kernel.release,
        kernel.package
    );
    assert!(
        std::path::Path::new(qemu::BUSYBOX).is_file(),
        "{} is missing: install busybox-static (scripts/setup-qemu)",
        qemu::BUSYBOX
    );
    let run = qemu::RunDir::new("qemu-debian12");
    let mut cpio = qemu::Initramfs::default();
    for d in ["proc", "sys", "tmp", "dev"] {
        cpio.dir(d);
    }
    cpio.char_dev("dev/console", 5, 1);
    cpio.executable(std::path::Path::new(qemu::BUSYBOX), "bin/busybox");
    cpio.symlink("bin/ip", "busybox");
    cpio.executable(std::path::Path::new(qemu::TC), "bin/tc");
    cpio.executable(
        &std::env::current_exe().expect("current exe"),
        "lachesis-test",
    );
    for m in &kernel.modules {
        let name = m.file_name().unwrap().to_string_lossy();
        cpio.file(
            &format!("modules/{name}"),
            0o644,
            &std::fs::read(m).unwrap(),
        );
    }
    let tests = own_tests();
    let in_guest: Vec<String> = tests
        .iter()
        .filter(|t| !NOT_IN_GUEST.contains(&t.as_str()))
        .cloned()
        .collect();
    cpio.file(
        "init",
        0o755,
        init_script(&kernel.release, &in_guest).as_bytes(),
    );
    let initramfs = run.0.join("initramfs.cpio");
    std::fs::write(&initramfs, cpio.finish()).unwrap();

    // ipv6.disable=1: no router solicitations or MLD reports on the veth,
    // so its counters hold only the frames the guest test sends.
    let boot = qemu::boot(
        &kernel,
        &initramfs,
        "console=ttyS0 panic=-1 ipv6.disable=1 quiet",
        BOOT_TIMEOUT,
    );
    println!(
        "{} ({}) booted under TCG; guest suite done in {:.1} s",
        kernel.release,
        kernel.package,
        boot.elapsed.as_secs_f64()
    );
    let tail = boot.tail(60);
    assert!(
        boot.console
            .contains(&format!("guest: kernel {}", kernel.release)),
        "the guest did not run {}:\n{tail}",
        kernel.release
    );
    assert!(
        boot.console
            .lines()
            .any(|l| l.trim() == format!("{EXIT_MARK} 0")),
        "the guest suite failed on {}:\n{tail}",
        kernel.release
    );
    assert!(
        tests.len() >= 12,
        "this binary lists only {} tests: {tests:?}",
        tests.len()
    );
    for t in &in_guest {
        assert!(
            boot.console
                .lines()
                .any(|l| l.trim() == format!("test {t} ... ok")),
            "{t} did not pass in the guest:\n{tail}"
        );
    }
}

// ---- guest side ------------------------------------------------------------

/// The kernel release the host booted; panics outside the guest.
fn guest_release() -> String {
    let want = std::env::var(GUEST_ENV).unwrap_or_else(|_| {
        panic!("runs only inside the guest {HOST_TEST} boots ({GUEST_ENV} unset)")
    });
    let have = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert_eq!(have.trim(), want, "the guest runs another kernel");
    want
}

#[test]
#[ignore = "runs inside the Debian 12 guest (debian12_kernel_loads_and_classifies_through_tc)"]
fn guest_attach_type_is_decided_at_run_time() {
    let release = guest_release();
    let pins = common::PinDir::new("attachtype");

    // `auto` picks cls_bpf on a kernel without TCX, and loads.
    let (dp, pin, _) = pins.load();
    assert_eq!(dp.attach_mode(), AttachMode::Tc, "on {release}");
    assert_eq!(pin, FlowsPin::Created);
    drop(dp);

    // `tcx` is refused with an error that names the kernel and the fix.
    let mut cfg = pins.config();
    cfg.attach_mode = AttachMode::Tcx;
    match Datapath::load(&cfg) {
        Err(e @ Error::NoTcx { .. }) => {
            let text = e.to_string();
            assert!(text.contains(&release) && text.contains("'tc'"), "{text}");
        }
        other => panic!("attach mode tcx on {release}: {other:?}"),
    }
}

/// `count` copies of each frame, sent on `ifname` through a packet socket:
/// on the VM's end of the veth they reach the tap's ingress hook (tx), on
/// the tap itself they leave through its egress hook (rx).
fn send_raw(ifname: &str, frames: &[(Vec<u8>, u32)]) {
    let index = lachesis_datapath::ifindex(ifname).unwrap();
    // SAFETY: plain socket(2); the result is checked and owned right after.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0) };
    assert!(
        fd >= 0,
        "packet socket: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: `fd` is a fresh descriptor no one else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: sockaddr_ll is plain old data; all-zero is valid.
    let mut to: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    to.sll_family = libc::AF_PACKET as u16;
    to.sll_ifindex = index.cast_signed();
    to.sll_halen = 6;
    for (frame, count) in frames {
        for _ in 0..*count {
            // SAFETY: the buffer and the address are live for the call and
            // their lengths are theirs.
            let sent = unsafe {
                libc::sendto(
                    fd.as_raw_fd(),
                    frame.as_ptr().cast(),
                    frame.len(),
                    0,
                    (&raw const to).cast(),
                    size_of::<libc::sockaddr_ll>() as libc::socklen_t,
                )
            };
            assert_eq!(
                sent,
                frame.len().cast_signed(),
                "send on {ifname}: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

fn ip_cmd(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("busybox ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Everything `dp` counted, per direction, as the VM sees it.
fn counted(flows: &BTreeMap<FlowKey, FlowCounters>) -> VmTraffic {
    let mut t = VmTraffic::default();
    for (k, v) in flows {
        match k.direction().unwrap() {
            Direction::Tx => {
                t.tx_bytes += v.bytes;
                t.tx_packets += v.packets;
            }
            Direction::Rx => {
                t.rx_bytes += v.bytes;
                t.rx_packets += v.packets;
            }
        }
    }
    t
}

/// Frames of three zones each way, with the key each must land on.
fn traffic(n: &Net) -> Vec<(Direction, Vec<u8>, u32, Zone)> {
    let udp = |s, d, a: &str, b: &str| Frame::udp(s, d, ip(a), ip(b)).bytes();
    vec![
        (
            Direction::Tx,
            udp(n.a, n.router, "10.1.0.10", "8.8.8.8"),
            7,
            Zone::External,
        ),
        (
            Direction::Tx,
            udp(n.a, n.b, "10.1.0.10", "10.2.0.10"),
            5,
            Zone::OtherTenant,
        ),
        (
            Direction::Tx,
            udp(n.a, n.router, "2001:db8:1::10", "2001:db8:1::99"),
            3,
            Zone::SameTenant,
        ),
        (
            Direction::Rx,
            udp(n.router, n.a, "8.8.8.8", "10.1.0.10"),
            4,
            Zone::External,
        ),
        (
            Direction::Rx,
            udp(n.a2, n.a, "10.1.0.11", "10.1.0.10"),
            6,
            Zone::SameTenant,
        ),
        (
            Direction::Rx,
            udp(n.router, n.a, "100.64.3.3", "10.1.0.10"),
            2,
            Zone::Shared,
        ),
    ]
}

/// Sends `traffic` (each frame `times` × its count) and checks the keys.
fn send_and_check(dp: &Datapath, tap: &str, vm_end: &str, n: &Net, times: u32) {
    let before = common::snapshot(dp);
    let t = traffic(n);
    let pick = |dir| -> Vec<(Vec<u8>, u32)> {
        t.iter()
            .filter(|x| x.0 == dir)
            .map(|x| (x.1.clone(), x.2 * times))
            .collect()
    };
    send_raw(vm_end, &pick(Direction::Tx));
    send_raw(tap, &pick(Direction::Rx));
    let after = common::snapshot(dp);
    for (dir, frame, count, zone) in &t {
        let eth_proto = u16::from_be_bytes([frame[12], frame[13]]);
        let key = FlowKey {
            dst_mac: frame[0..6].try_into().unwrap(),
            src_mac: frame[6..12].try_into().unwrap(),
            eth_proto,
            direction: dir.code(),
            zone: zone.code(),
            l4: L4Class::Udp.code(),
            pad: 0,
        };
        let grown =
            after.get(&key).map_or(0, |v| v.packets) - before.get(&key).map_or(0, |v| v.packets);
        assert_eq!(grown, u64::from(count * times), "{dir} {zone:?}: {key:?}");
    }
}

/// Nothing was lost, skipped or cut short (stats live with each instance).
fn no_losses(dp: &Datapath) {
    let stats = dp.stats().unwrap();
    for r in [
        StatReason::UpdateFailure,
        StatReason::SkippedEthertype,
        StatReason::Truncated,
    ] {
        assert_eq!(stats[r.code() as usize], 0, "{r:?}");
    }
}

#[test]
#[ignore = "runs inside the Debian 12 guest (debian12_kernel_loads_and_classifies_through_tc)"]
fn guest_tc_fallback_counts_a_veth_like_its_counters() {
    let release = guest_release();
    // The kernel names the peer veth0 (busybox ip takes no peer name).
    let (tap, vm_end) = ("tap0", "veth0");
    ip_cmd(&["link", "add", tap, "type", "veth"]);
    ip_cmd(&["link", "set", vm_end, "up"]);
    ip_cmd(&["link", "set", tap, "up"]);

    let pins = common::PinDir::new("veth");
    let (dp, _, _) = pins.load();
    assert_eq!(dp.attach_mode(), AttachMode::Tc, "on {release}");
    let net = populate(&dp);
    let start = IfCounters::read(tap);
    assert_eq!(
        dp.attach(tap).unwrap(),
        [AttachOutcome::Attached, AttachOutcome::Attached]
    );
    let ours = |dp: &Datapath| -> Vec<(Direction, AttachMode)> {
        dp.attachments()
            .unwrap()
            .into_iter()
            .map(|a| (a.direction, a.mode))
            .collect()
    };
    assert_eq!(
        ours(&dp),
        [
            (Direction::Tx, AttachMode::Tc),
            (Direction::Rx, AttachMode::Tc)
        ]
    );
    send_and_check(&dp, tap, vm_end, &net, 1);
    no_losses(&dp);
    let truth = VmTraffic::from_tap(IfCounters::read(tap).since(&start));
    assert_eq!(
        counted(&common::snapshot(&dp)),
        truth,
        "against {tap}'s counters"
    );
    assert!(
        truth.tx_packets == 15 && truth.rx_packets == 12,
        "{truth:?}"
    );

    // A second instance (an agent restart): same pinned flows, fresh
    // metadata, and a replace at the same handle and priority — no second
    // copy counting, nothing lost.
    let (dp2, pin, retired) = pins.load();
    assert_eq!((pin, retired.len()), (FlowsPin::Reused, 0));
    populate(&dp2);
    assert_eq!(
        dp2.attach(tap).unwrap(),
        [AttachOutcome::Replaced, AttachOutcome::Replaced]
    );
    assert_eq!(
        ours(&dp2),
        [
            (Direction::Tx, AttachMode::Tc),
            (Direction::Rx, AttachMode::Tc)
        ]
    );
    send_and_check(&dp2, tap, vm_end, &net, 2);
    let truth = VmTraffic::from_tap(IfCounters::read(tap).since(&start));
    assert_eq!(counted(&common::snapshot(&dp2)), truth, "after the replace");
    assert_eq!(truth.tx_packets, 45);
    no_losses(&dp2);

    // Detached, the tap counts on and we no longer do.
    assert!(dp2.detach(tap).unwrap());
    assert!(ours(&dp2).is_empty());
    let frozen = common::snapshot(&dp2);
    send_raw(vm_end, &[(traffic(&net)[0].1.clone(), 3)]);
    assert_eq!(common::snapshot(&dp2), frozen);
    drop(dp);
}
