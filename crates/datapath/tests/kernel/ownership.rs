//! Root: two agents on one host, each with its own bpffs directory (issue
//! 19 item 3). "Ours" is what an agent of *this* bpffs directory attached;
//! another directory's programs on the same tap are never replaced,
//! detached or removed, whatever they are named.
//!
//! Each test runs on its own thread in a network namespace of its own
//! (`unshare`): a datapath that still removed every program named like ours
//! must not reach the taps of other tests on this machine. Truth is the
//! kernel: the programs and links on each hook as `BPF_PROG_QUERY` and
//! `tc -j filter show` list them, and the taps' own interface counters.

use crate::common;

use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Command;

use lachesis_abi::{EndpointValue, Mac, Zone};
use lachesis_datapath::{AttachMode, AttachOutcome, Datapath, DrainBuffer};
use lachesis_lab::netns::{isolate, Lab, Vm, VmTraffic};
use lachesis_lab::traffic::{counters, Exchange};

fn two_vms() -> (Lab, Vm, Vm) {
    let mut lab = Lab::new();
    let a = lab.add_vm(
        "02:00:00:00:aa:01".parse().unwrap(),
        Ipv4Addr::new(10, 78, 0, 1),
    );
    let b = lab.add_vm(
        "02:00:00:00:bb:02".parse().unwrap(),
        Ipv4Addr::new(10, 78, 0, 2),
    );
    lab.static_neighbours();
    (lab, a, b)
}

fn program_metadata(dp: &Datapath, vms: &[&Vm]) {
    for (tenant, vm) in (1..).zip(vms) {
        let index = lachesis_datapath::ifindex(&vm.tap).unwrap();
        dp.set_tap_port(index, vm.mac).unwrap();
        dp.upsert_endpoint(
            vm.mac,
            EndpointValue {
                tenant_id: tenant,
                flags: 0,
            },
        )
        .unwrap();
    }
    dp.upsert_zone(0, "0.0.0.0/0".parse().unwrap(), Zone::External)
        .unwrap();
}

/// Pings both ways, then waits for the taps' counters to stop moving.
fn traffic(a: &Vm, b: &Vm) {
    Exchange::between(a, b)
        .ping(20, 600)
        .ping_back(7, 600)
        .run();
}

/// What `dp` counted for `mac`, per direction.
fn counted(dp: &Datapath, mac: Mac) -> VmTraffic {
    let mut buf = DrainBuffer::new();
    dp.drain(&mut buf).unwrap();
    common::totals_for(&buf.entries, mac)
}

/// One program on a hook, as the kernel lists it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Hooked {
    /// A TCX program: (direction code, program id, link id).
    Tcx(u8, u32, u32),
    /// A cls_bpf filter: (direction code, handle, priority, program id).
    Tc(u8, u32, u32, u64),
}

/// Every BPF program on both hooks of `tap`: TCX from the kernel's
/// `BPF_PROG_QUERY`, cls_bpf filters from `tc -j filter show`.
fn hooked(tap: &str) -> Vec<Hooked> {
    let index = lachesis_datapath::ifindex(tap).unwrap();
    let mut out = Vec::new();
    for (code, attach, hook) in [
        (0, libbpf_sys::BPF_TCX_INGRESS, "ingress"),
        (1, libbpf_sys::BPF_TCX_EGRESS, "egress"),
    ] {
        let mut prog_ids = [0u32; 16];
        let mut link_ids = [0u32; 16];
        // SAFETY: zeroed, sized options pointing at two live arrays of 16
        // entries, as `count` says.
        let mut opts: libbpf_sys::bpf_prog_query_opts = unsafe { std::mem::zeroed() };
        opts.sz = size_of::<libbpf_sys::bpf_prog_query_opts>() as _;
        opts.prog_ids = prog_ids.as_mut_ptr();
        opts.link_ids = link_ids.as_mut_ptr();
        opts.__bindgen_anon_1.count = 16;
        // SAFETY: as above; the arrays outlive the call.
        let rc =
            unsafe { libbpf_sys::bpf_prog_query_opts(index.cast_signed(), attach, &raw mut opts) };
        if rc == 0 {
            // SAFETY: the kernel wrote the count.
            let n = unsafe { opts.__bindgen_anon_1.count } as usize;
            for i in 0..n.min(16) {
                out.push(Hooked::Tcx(code, prog_ids[i], link_ids[i]));
            }
        }
        let shown = Command::new("tc")
            .args(["-j", "filter", "show", "dev", tap, hook])
            .output()
            .unwrap();
        assert!(shown.status.success(), "{shown:?}");
        let text = String::from_utf8_lossy(&shown.stdout);
        if text.trim().is_empty() {
            continue;
        }
        let filters: serde_json::Value = serde_json::from_str(&text).unwrap();
        for f in filters.as_array().unwrap() {
            let Some(options) = f.get("options") else {
                continue;
            };
            let handle = options["handle"].as_str().unwrap();
            let handle = u32::from_str_radix(handle.trim_start_matches("0x"), 16).unwrap();
            let prio = u32::try_from(f["pref"].as_u64().unwrap()).unwrap();
            let prog = options["prog"]["id"].as_u64().unwrap();
            out.push(Hooked::Tc(code, handle, prio, prog));
        }
    }
    out.sort();
    out
}

/// The name of program `id` (`bpf_prog_info.name`).
fn prog_name(id: u32) -> String {
    // SAFETY: a plain system call; the fd is owned right after.
    let fd = unsafe { libbpf_sys::bpf_prog_get_fd_by_id(id) };
    assert!(fd >= 0, "open program {id}");
    // SAFETY: a fresh fd owned by no one else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: plain old data.
    let mut info: libbpf_sys::bpf_prog_info = unsafe { std::mem::zeroed() };
    let mut len = size_of::<libbpf_sys::bpf_prog_info>() as u32;
    // SAFETY: `info` is live and `len` is its size.
    let rc =
        unsafe { libbpf_sys::bpf_prog_get_info_by_fd(fd.as_raw_fd(), &raw mut info, &raw mut len) };
    assert_eq!(rc, 0);
    // SAFETY: NUL-terminated by the kernel.
    unsafe { std::ffi::CStr::from_ptr(info.name.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

fn prog_of(h: &Hooked) -> u32 {
    match *h {
        Hooked::Tcx(_, prog, _) => prog,
        Hooked::Tc(_, _, _, prog) => u32::try_from(prog).unwrap(),
    }
}

/// Agent A attaches both taps; agent B (another bpffs dir) lists, removes
/// from non-matching interfaces, detaches, attaches beside and detaches
/// again: A's programs never move and both count every frame exactly.
///
/// `without_admin`: both agents as the unit runs them, without
/// `CAP_SYS_ADMIN` (the kernel then refuses to open a program by id, so
/// neither can read which maps another's programs use).
fn another_dir_never_touches(mode: AttachMode, without_admin: bool) {
    isolate();
    let (_lab, a, b) = two_vms();
    let caps = without_admin.then(common::NoSysAdmin::new);
    let name = |id: u32| {
        caps.as_ref()
            .map_or_else(|| prog_name(id), |c| c.with_admin(|| prog_name(id)))
    };
    let pins_a = common::PinDir::new("own-a");
    let pins_b = common::PinDir::new("own-b");
    let mut cfg_a = pins_a.config();
    cfg_a.attach_mode = mode;
    let mut cfg_b = pins_b.config();
    cfg_b.attach_mode = mode;

    let (dp_a, _, _) = Datapath::load(&cfg_a).unwrap();
    program_metadata(&dp_a, &[&a, &b]);
    let if0 = [counters(&a), counters(&b)];
    for vm in [&a, &b] {
        assert_eq!(dp_a.attach(&vm.tap).unwrap(), [AttachOutcome::Attached; 2]);
    }
    let a_hooks = [hooked(&a.tap), hooked(&b.tap)];
    for hooks in &a_hooks {
        assert_eq!(hooks.len(), 2, "one program per hook: {hooks:?}");
    }
    if caps.is_some() {
        // The premise: no program can be opened by id here.
        // SAFETY: a plain system call; a success's fd is closed at once.
        let fd = unsafe { libbpf_sys::bpf_prog_get_fd_by_id(prog_of(&a_hooks[0][0])) };
        assert_eq!(
            fd,
            -libc::EPERM,
            "opened a program by id without CAP_SYS_ADMIN"
        );
    }

    // Agent B: another bpffs dir, nothing of its own attached anywhere.
    let (dp_b, _, _) = Datapath::load(&cfg_b).unwrap();
    program_metadata(&dp_b, &[&a, &b]);
    let b_sees = dp_b.attachments().unwrap();
    assert!(b_sees.is_empty(), "A's programs are not B's: {b_sees:?}");
    // Its presence check with a prefix that matches nothing.
    let removed = dp_b.remove_unqualified(|_| false).unwrap();
    assert!(removed.is_empty(), "B removed A's programs: {removed:?}");
    assert_eq!([hooked(&a.tap), hooked(&b.tap)], a_hooks);
    // A tap renamed away in B's view.
    assert!(!dp_b.detach(&a.tap).unwrap(), "nothing of B's on the tap");
    assert_eq!([hooked(&a.tap), hooked(&b.tap)], a_hooks);

    // B matches tap a too: it attaches beside A's programs, not over them.
    let if_b0 = counters(&a);
    assert_eq!(dp_b.attach(&a.tap).unwrap(), [AttachOutcome::Attached; 2]);
    let both = hooked(&a.tap);
    assert_eq!(both.len(), 4, "A's two and B's two: {both:?}");
    assert!(
        a_hooks[0].iter().all(|h| both.contains(h)),
        "A's programs moved: {:?} → {both:?}",
        a_hooks[0]
    );
    assert_eq!(hooked(&b.tap), a_hooks[1]);
    assert_eq!(dp_b.attachments().unwrap().len(), 2, "B's own two");
    let a_own = dp_a.attachments().unwrap();
    assert_eq!(a_own.len(), 4, "A's own four, not B's: {a_own:?}");
    assert!(a_own
        .iter()
        .all(|at| a_hooks.iter().flatten().any(|h| prog_of(h) == at.prog_id)));

    traffic(&a, &b);
    // Each counted every frame once, into its own map.
    for (i, vm) in [&a, &b].into_iter().enumerate() {
        let want = VmTraffic::from_tap(counters(vm).since(&if0[i]));
        assert!(want.tx_packets > 0 && want.rx_packets > 0);
        assert_eq!(counted(&dp_a, vm.mac), want, "A on {}", vm.tap);
    }
    let want_b = VmTraffic::from_tap(counters(&a).since(&if_b0));
    assert_eq!(counted(&dp_b, a.mac), want_b, "B on {}", a.tap);

    // B leaves (its interfaces stop matching): only B's programs go.
    let removed = dp_b.remove_unqualified(|_| false).unwrap();
    assert_eq!(removed.len(), 2, "B's two hooks on tap a: {removed:?}");
    assert_eq!([hooked(&a.tap), hooked(&b.tap)], a_hooks);
    for h in a_hooks.iter().flatten() {
        assert!(name(prog_of(h)).starts_with("lachesis_"), "{h:?}");
    }

    // A restart of A (same dir) still replaces A's programs in place.
    let (dp_a2, _, _) = Datapath::load(&cfg_a).unwrap();
    program_metadata(&dp_a2, &[&a, &b]);
    for vm in [&a, &b] {
        assert_eq!(dp_a2.attach(&vm.tap).unwrap(), [AttachOutcome::Replaced; 2]);
        assert_eq!(hooked(&vm.tap).len(), 2, "{:?}", hooked(&vm.tap));
    }
    drop(dp_a);
    traffic(&a, &b);
    for (i, vm) in [&a, &b].into_iter().enumerate() {
        let want = VmTraffic::from_tap(counters(vm).since(&if0[i]));
        assert_eq!(
            counted(&dp_a2, vm.mac),
            want,
            "A after restart on {}",
            vm.tap
        );
    }
}

#[test]
fn another_bpffs_dir_never_touches_our_tcx_links() {
    another_dir_never_touches(AttachMode::Tcx, false);
}

#[test]
fn another_bpffs_dir_never_touches_our_cls_bpf_filters() {
    another_dir_never_touches(AttachMode::Tc, false);
}

#[test]
fn without_cap_sys_admin_another_bpffs_dir_never_touches_our_tcx_links() {
    another_dir_never_touches(AttachMode::Tcx, true);
}

#[test]
fn without_cap_sys_admin_another_bpffs_dir_never_touches_our_cls_bpf_filters() {
    another_dir_never_touches(AttachMode::Tc, true);
}

/// Without `CAP_SYS_ADMIN`, a mode change removes ours of the other kind
/// (TCX links through their pins), a detach removes ours, and nothing of
/// ours is ever listed twice.
#[test]
fn without_cap_sys_admin_a_mode_change_and_a_detach_find_ours() {
    isolate();
    let (_lab, a, b) = two_vms();
    let _caps = common::NoSysAdmin::new();
    let pins = common::PinDir::new("own-caps");
    let mut cfg = pins.config();
    cfg.attach_mode = AttachMode::Tcx;
    let (dp, _, _) = Datapath::load(&cfg).unwrap();
    for vm in [&a, &b] {
        assert_eq!(dp.attach(&vm.tap).unwrap(), [AttachOutcome::Attached; 2]);
    }
    drop(dp);
    cfg.attach_mode = AttachMode::Tc;
    let (dp, _, _) = Datapath::load(&cfg).unwrap();
    for vm in [&a, &b] {
        // Nothing of ours was there as cls_bpf; the TCX links go.
        assert_eq!(dp.attach(&vm.tap).unwrap(), [AttachOutcome::Attached; 2]);
        let hooks = hooked(&vm.tap);
        assert!(
            hooks.len() == 2 && hooks.iter().all(|h| matches!(h, Hooked::Tc(..))),
            "{hooks:?}"
        );
    }
    assert_eq!(
        std::fs::read_dir(pins.0.join("links")).map_or(0, Iterator::count),
        0,
        "TCX pins left"
    );
    assert_eq!(dp.attachments().unwrap().len(), 4);
    drop(dp);
    // A restart in tc mode: its predecessor's filters, which it cannot
    // open, are replaced in place at its own handle.
    let (dp, _, _) = Datapath::load(&cfg).unwrap();
    let before = hooked(&a.tap);
    assert_eq!(dp.attach(&a.tap).unwrap(), [AttachOutcome::Replaced; 2]);
    let after = hooked(&a.tap);
    assert_eq!(after.len(), 2, "{after:?}");
    assert_ne!(before, after, "the new programs run");
    assert_eq!(dp.attachments().unwrap().len(), 4);
    // Back to TCX, then a detach: every hook empty.
    drop(dp);
    cfg.attach_mode = AttachMode::Tcx;
    let (dp, _, _) = Datapath::load(&cfg).unwrap();
    for vm in [&a, &b] {
        dp.attach(&vm.tap).unwrap();
        let hooks = hooked(&vm.tap);
        assert!(
            hooks.len() == 2 && hooks.iter().all(|h| matches!(h, Hooked::Tcx(..))),
            "{hooks:?}"
        );
        assert!(dp.detach(&vm.tap).unwrap());
        assert_eq!(hooked(&vm.tap), [], "{}", vm.tap);
    }
}

/// cls_bpf filters of ours at the one handle every directory used before
/// handles were per directory (an upgrade, tc mode, a bpffs dir other than
/// the default): replaced in place, never doubled.
#[test]
fn an_upgrade_replaces_our_filters_at_the_old_handle_in_place() {
    isolate();
    let (_lab, a, b) = two_vms();
    let pins = common::PinDir::new("legacy");
    let mut cfg = pins.config();
    cfg.attach_mode = AttachMode::Tc;
    let (old, _, _) = Datapath::load(&cfg).unwrap();
    assert_ne!(old.tc_handle(), lachesis_datapath::TC_HANDLE);
    program_metadata(&old, &[&a, &b]);
    let if0 = [counters(&a), counters(&b)];
    for vm in [&a, &b] {
        old.attach_at_legacy_tc_handle(&vm.tap).unwrap();
    }
    let legacy = lachesis_datapath::TC_HANDLE;
    let (new, _, _) = Datapath::load(&cfg).unwrap();
    program_metadata(&new, &[&a, &b]);
    for vm in [&a, &b] {
        assert_eq!(new.attach(&vm.tap).unwrap(), [AttachOutcome::Replaced; 2]);
        let hooks = hooked(&vm.tap);
        assert_eq!(hooks.len(), 2, "{hooks:?}");
        assert!(
            hooks
                .iter()
                .all(|h| matches!(h, Hooked::Tc(_, handle, _, _) if *handle == legacy)),
            "replaced where it was: {hooks:?}"
        );
    }
    drop(old);
    traffic(&a, &b);
    for (i, vm) in [&a, &b].into_iter().enumerate() {
        let want = VmTraffic::from_tap(counters(vm).since(&if0[i]));
        assert_eq!(counted(&new, vm.mac), want, "{}", vm.tap);
    }
    // Detached from where it sits.
    assert!(new.detach(&a.tap).unwrap());
    assert!(hooked(&a.tap).is_empty(), "{:?}", hooked(&a.tap));
}

/// Another agent's filters: at the old common handle (the default
/// directory's agent), ours go beside them; at our own handle (a leftover
/// of another directory, or another tool), the attach fails naming it and
/// leaves it in place.
#[test]
fn another_agents_cls_bpf_filters_are_never_replaced() {
    isolate();
    let (_lab, a, b) = two_vms();
    let pins_a = common::PinDir::new("tc-a");
    let pins_b = common::PinDir::new("tc-b");
    let mut cfg_a = pins_a.config();
    cfg_a.attach_mode = AttachMode::Tc;
    let mut cfg_b = pins_b.config();
    cfg_b.attach_mode = AttachMode::Tc;
    let (dp_a, _, _) = Datapath::load(&cfg_a).unwrap();
    let (dp_b, _, _) = Datapath::load(&cfg_b).unwrap();
    program_metadata(&dp_a, &[&a, &b]);
    program_metadata(&dp_b, &[&a, &b]);

    // B's filters at the common handle, as the default directory's agent
    // puts them: A attaches beside them, and lists them as another's.
    dp_b.attach_at_legacy_tc_handle(&a.tap).unwrap();
    let theirs = hooked(&a.tap);
    let if0 = counters(&a);
    assert_eq!(dp_a.attach(&a.tap).unwrap(), [AttachOutcome::Attached; 2]);
    let both = hooked(&a.tap);
    assert_eq!(both.len(), 4, "{both:?}");
    assert!(theirs.iter().all(|h| both.contains(h)), "{both:?}");
    let foreign = dp_a.foreign_attachments(&a.tap).unwrap();
    assert_eq!(foreign.len(), 2, "{foreign:?}");
    assert_eq!(dp_a.attachments().unwrap().len(), 2);
    traffic(&a, &b);
    let want = VmTraffic::from_tap(counters(&a).since(&if0));
    assert_eq!(counted(&dp_a, a.mac), want);
    assert_eq!(counted(&dp_b, a.mac), want);
    assert!(dp_a.detach(&a.tap).unwrap());
    assert_eq!(hooked(&a.tap), theirs, "only A's went");

    // B's program at A's own handle on tap b: A refuses to replace it.
    let prog = theirs
        .iter()
        .find_map(|h| match h {
            Hooked::Tc(0, _, _, prog) => Some(*prog),
            _ => None,
        })
        .unwrap();
    let pinned = pins_b.0.join("tx_prog");
    let shown = Command::new("bpftool")
        .args(["prog", "pin", "id", &prog.to_string()])
        .arg(&pinned)
        .output()
        .unwrap();
    assert!(shown.status.success(), "{shown:?}");
    let handle = format!("{:#x}", dp_a.tc_handle());
    let prio = lachesis_datapath::TC_PRIORITY.to_string();
    for args in [
        vec!["qdisc", "add", "dev", &b.tap, "clsact"],
        vec![
            "filter",
            "add",
            "dev",
            &b.tap,
            "ingress",
            "pref",
            &prio,
            "handle",
            &handle,
            "bpf",
            "object-pinned",
            pinned.to_str().unwrap(),
            "da",
        ],
    ] {
        let out = Command::new("tc").args(&args).output().unwrap();
        assert!(out.status.success(), "tc {args:?}: {out:?}");
    }
    let before = hooked(&b.tap);
    let err = dp_a.attach(&b.tap).unwrap_err().to_string();
    assert!(
        err.contains(&format!("program {prog}")) && err.contains(&handle),
        "{err}"
    );
    assert_eq!(hooked(&b.tap), before, "left in place");
}
