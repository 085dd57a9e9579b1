//! cls_bpf beside an `ingress` qdisc (root): the qdisc Neutron's
//! bandwidth-limit rules put on a tap has one filter block for every
//! parent, so the two filters an agent attaches would share it and the rx
//! program would run on the tap's ingress hook. The attach is refused instead, and
//! any of ours an older agent left in that block is removed; an empty slot
//! or a `clsact` attaches as before. Runs here (attach mode `tc`) and on
//! Debian 12's 6.1 under qemu (`debian12_kernel/`), where `tc` is the
//! default.

use crate::common;

use std::sync::atomic::{AtomicU32, Ordering};

use lachesis_abi::Direction;
use lachesis_datapath::{AttachMode, AttachOutcome, Datapath, Error, TC_HANDLE, TC_PRIORITY};
use lachesis_lab::netns::run;
use libbpf_rs::{TcHookBuilder, TC_EGRESS, TC_INGRESS};

static SEQ: AtomicU32 = AtomicU32::new(0);

fn sh(args: &[&str]) -> String {
    run(args).unwrap_or_else(|e| panic!("{e}"))
}

/// A veth of this test (the kernel names its peer), deleted on drop.
struct Veth(String);

impl Veth {
    fn new() -> Veth {
        let name = format!(
            "lqd{}x{}",
            std::process::id() % 100_000,
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        sh(&["ip", "link", "add", &name, "type", "veth"]);
        sh(&["ip", "link", "set", &name, "up"]);
        Veth(name)
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = run(&["ip", "link", "del", &self.0]);
    }
}

fn ours(dp: &Datapath, name: &str) -> Vec<(Direction, AttachMode)> {
    let index = lachesis_datapath::ifindex(name).unwrap();
    dp.attachments()
        .unwrap()
        .into_iter()
        .filter(|a| a.ifindex == index)
        .map(|a| (a.direction, a.mode))
        .collect()
}

#[test]
fn an_ingress_qdisc_is_refused_and_ours_removed_from_its_block() {
    let pins = common::PinDir::new("ingressq");
    let mut cfg = pins.config();
    cfg.attach_mode = AttachMode::Tc;
    let (dp, _, _) = Datapath::load(&cfg).unwrap();
    let veth = Veth::new();
    let tap = veth.0.as_str();
    let index = lachesis_datapath::ifindex(tap).unwrap();
    sh(&["tc", "qdisc", "add", "dev", tap, "ingress"]);

    // What an agent without the check left there: both filters in the one
    // block at the same handle and priority, so the second replaced the
    // first and the rx program sits on the ingress hook.
    for (dir, hook) in [(Direction::Tx, TC_INGRESS), (Direction::Rx, TC_EGRESS)] {
        let mut h = TcHookBuilder::new(dp.program_fd(dir))
            .ifindex(index.cast_signed())
            .replace(true)
            .handle(TC_HANDLE)
            .priority(TC_PRIORITY)
            .hook(hook);
        h.create().unwrap();
        h.attach().unwrap();
    }
    let shown = sh(&["tc", "filter", "show", "dev", tap, "ingress"]);
    assert!(
        shown.contains("lachesis_rx") && !shown.contains("lachesis_tx"),
        "the rx program on the ingress hook:\n{shown}"
    );

    match dp.attach(tap) {
        Err(e @ Error::IngressQdisc { .. }) => {
            let text = e.to_string();
            assert!(
                text.contains("`ingress` qdisc") && text.contains("TCX"),
                "{text}"
            );
        }
        other => panic!("attach beside an ingress qdisc: {other:?}"),
    }
    let shown = sh(&["tc", "filter", "show", "dev", tap, "ingress"]);
    assert!(
        !shown.contains("lachesis"),
        "ours left in the block:\n{shown}"
    );
    assert!(ours(&dp, tap).is_empty());
    // The other tool's qdisc stays.
    assert!(sh(&["tc", "qdisc", "show", "dev", tap]).contains("qdisc ingress"));

    // Once the qdisc is gone (the slot holds only the kernel's placeholder),
    // the tap attaches, and again over a clsact that is already there.
    sh(&["tc", "qdisc", "del", "dev", tap, "ingress"]);
    assert_eq!(
        dp.attach(tap).unwrap(),
        [AttachOutcome::Attached, AttachOutcome::Attached]
    );
    assert_eq!(
        dp.attach(tap).unwrap(),
        [AttachOutcome::Replaced, AttachOutcome::Replaced]
    );
    assert_eq!(
        ours(&dp, tap),
        [
            (Direction::Tx, AttachMode::Tc),
            (Direction::Rx, AttachMode::Tc)
        ]
    );
}

#[test]
fn a_fresh_interface_attaches_through_clsact() {
    let pins = common::PinDir::new("freshq");
    let mut cfg = pins.config();
    cfg.attach_mode = AttachMode::Tc;
    let (dp, _, _) = Datapath::load(&cfg).unwrap();
    let veth = Veth::new();
    assert_eq!(
        dp.attach(&veth.0).unwrap(),
        [AttachOutcome::Attached, AttachOutcome::Attached]
    );
    assert!(sh(&["tc", "qdisc", "show", "dev", &veth.0]).contains("qdisc clsact"));
    assert!(dp.detach(&veth.0).unwrap());
}
