//! Event sequences → the exact calls the watcher makes on a recording fake.

use prometheus_client::registry::Registry;

use lachesis_abi::Mac;

use super::{PresenceReport, Watcher};
use crate::links::fake::{Call, Fake, Host};
use crate::links::matcher::Matcher;
use crate::links::message::LinkEvent;
use crate::links::metrics::{Failure, LinkMetrics};
use crate::links::ports::TapPorts;

use Call::{Attach, Detach, Interfaces, RemoveUnmatched};

/// The calls of one presence check that attaches nothing.
const QUIET_CHECK: [Call; 3] = [Interfaces, Call::Attached, RemoveUnmatched];

struct Rig {
    w: Watcher<Fake>,
}

impl Rig {
    fn new() -> Rig {
        let metrics = LinkMetrics::new(&mut Registry::default());
        Rig {
            w: Watcher::new(
                Fake::default(),
                Matcher::new(["tap"], ["vm-exact"]),
                metrics,
            ),
        }
    }

    fn host(&self) -> std::cell::RefMut<'_, Host> {
        self.w.attacher().host.borrow_mut()
    }

    /// The link exists on the host and its event reaches the watcher.
    fn appear(&mut self, index: u32, name: &str) {
        self.host().interfaces.insert(index, name.into());
        self.w.apply(&present(index, name));
    }

    fn rename(&mut self, index: u32, name: &str) {
        self.appear(index, name);
    }

    fn vanish(&mut self, index: u32) {
        let name = self.host().interfaces.remove(&index).unwrap();
        self.host().ours.remove(&name);
        self.w.apply(&LinkEvent::Gone { index });
    }

    /// The calls since the last `take`.
    fn take(&self) -> Vec<Call> {
        std::mem::take(&mut *self.w.attacher().calls.borrow_mut())
    }

    fn attached(&self) -> i64 {
        self.w.metrics().attached()
    }

    fn failures(&self, f: Failure) -> u64 {
        self.w.metrics().failures(f)
    }

    /// The `tap_ports` map as the fake kernel holds it.
    fn ports(&self) -> Vec<(u32, Mac)> {
        self.host().ports.iter().map(|(i, m)| (*i, *m)).collect()
    }
}

fn mac(last: u8) -> Mac {
    Mac([0xfa, 0x16, 0x3e, 0, 0, last])
}

/// Ports whose ids make the tap names `tap<id>`.
fn ports(taps: &[(&str, u8)]) -> TapPorts {
    TapPorts::from_ports(taps.iter().map(|(id, m)| (*id, mac(*m))))
}

fn present(index: u32, name: &str) -> LinkEvent {
    LinkEvent::Present {
        index,
        name: name.into(),
    }
}

fn attach(name: &str) -> Call {
    Attach(name.into())
}

#[test]
fn a_matching_link_is_attached_once_and_state_changes_call_nothing() {
    let mut r = Rig::new();
    r.appear(5, "tap5");
    assert_eq!(r.take(), [attach("tap5")]);
    assert_eq!(r.attached(), 1);
    // Up, carrier, master: the same RTM_NEWLINK again.
    r.w.apply(&present(5, "tap5"));
    r.w.apply(&present(5, "tap5"));
    assert_eq!(r.take(), []);
    assert_eq!(r.attached(), 1);
}

#[test]
fn exact_names_match_and_other_links_are_left_alone() {
    let mut r = Rig::new();
    r.appear(1, "lo");
    r.appear(2, "eth0");
    r.appear(3, "vm-exact");
    r.appear(4, "vm-exact2");
    assert_eq!(r.take(), [attach("vm-exact")]);
    assert_eq!(r.attached(), 1);
}

#[test]
fn a_vanished_tap_is_forgotten_without_a_call_an_error_or_a_retry() {
    let mut r = Rig::new();
    r.appear(5, "tap5");
    r.take();
    r.vanish(5);
    assert_eq!(r.take(), []);
    assert_eq!(r.attached(), 0);
    // The next presence check neither retries nor heals it.
    let report = r.w.presence_check();
    assert_eq!(r.take(), QUIET_CHECK);
    assert_eq!(report, PresenceReport::default());
    assert_eq!(r.w.metrics().heals(), 0);
    for f in Failure::ALL {
        assert_eq!(r.failures(f), 0, "{f:?}");
    }
    // A DELLINK for a link never seen is a no-op too.
    r.w.apply(&LinkEvent::Gone { index: 99 });
    assert_eq!(r.take(), []);
}

#[test]
fn a_tap_that_vanishes_before_its_attach_is_not_a_failure() {
    let mut r = Rig::new();
    // The event arrives after the interface is already gone.
    r.w.apply(&present(8, "tap8"));
    assert_eq!(r.take(), [attach("tap8")]);
    assert_eq!(r.failures(Failure::Attach), 0);
    assert_eq!(r.attached(), 0);
    r.w.apply(&LinkEvent::Gone { index: 8 });
    assert_eq!(r.take(), []);
}

#[test]
fn a_rename_within_the_rule_keeps_the_attachment() {
    let mut r = Rig::new();
    r.appear(5, "tap5");
    r.take();
    r.rename(5, "tap5-new");
    assert_eq!(r.take(), []);
    assert_eq!(r.attached(), 1);
}

#[test]
fn a_tap_renamed_out_of_the_rule_is_detached_under_its_new_name() {
    let mut r = Rig::new();
    r.appear(5, "tap5");
    r.host().ours.remove("tap5");
    r.host().ours.insert("eth5".into()); // the kernel keeps ours on the index
    r.take();
    r.rename(5, "eth5");
    assert_eq!(r.take(), [Detach("eth5".into())]);
    assert_eq!(r.attached(), 0);
    assert!(r.host().ours.is_empty());
    // Renamed back: a new attach.
    r.rename(5, "tap5");
    assert_eq!(r.take(), [attach("tap5")]);
    assert_eq!(r.attached(), 1);
}

#[test]
fn a_failed_detach_is_counted_and_left_to_the_presence_check() {
    let mut r = Rig::new();
    r.appear(5, "tap5");
    r.host().refuse.insert("eth5".into());
    r.take();
    r.rename(5, "eth5");
    assert_eq!(r.take(), [Detach("eth5".into())]);
    assert_eq!(r.failures(Failure::Detach), 1);
    assert_eq!(r.attached(), 0);
}

#[test]
fn a_link_renamed_into_the_rule_is_attached() {
    let mut r = Rig::new();
    r.appear(6, "eth6");
    r.rename(6, "tap6");
    assert_eq!(r.take(), [attach("tap6")]);
}

#[test]
fn a_failed_attach_is_counted_and_retried_only_at_the_presence_check() {
    let mut r = Rig::new();
    r.host().refuse.insert("tap5".into());
    r.appear(5, "tap5");
    assert_eq!(r.take(), [attach("tap5")]);
    assert_eq!(r.failures(Failure::Attach), 1);
    assert_eq!(r.attached(), 0);
    // Another event for it does not hammer the kernel.
    r.w.apply(&present(5, "tap5"));
    assert_eq!(r.take(), []);
    // Still refused at the first check: counted again, reported.
    let report = r.w.presence_check();
    assert_eq!(
        r.take(),
        [Interfaces, Call::Attached, attach("tap5"), RemoveUnmatched]
    );
    assert_eq!(report.failed, ["tap5"]);
    assert_eq!(r.failures(Failure::Attach), 2);
    // Accepted at the next: a retry, not a heal (the failure was counted).
    r.host().refuse.clear();
    let report = r.w.presence_check();
    assert_eq!(
        r.take(),
        [Interfaces, Call::Attached, attach("tap5"), RemoveUnmatched]
    );
    assert_eq!(report.retried, ["tap5"]);
    assert!(report.healed.is_empty());
    assert_eq!(r.w.metrics().heals(), 0);
    assert_eq!(r.attached(), 1);
    // And then it is quiet.
    r.w.presence_check();
    assert_eq!(r.take(), QUIET_CHECK);
}

#[test]
fn the_presence_check_heals_a_tap_detached_behind_the_watchers_back() {
    let mut r = Rig::new();
    r.appear(5, "tap5");
    r.appear(6, "tap6");
    r.take();
    r.host().ours.remove("tap6");
    let report = r.w.presence_check();
    assert_eq!(
        r.take(),
        [Interfaces, Call::Attached, attach("tap6"), RemoveUnmatched]
    );
    assert_eq!(report.healed, ["tap6"]);
    assert_eq!(r.w.metrics().heals(), 1);
    assert_eq!(r.w.metrics().presence_checks(), 1);
    assert_eq!(r.attached(), 2);
}

#[test]
fn the_presence_check_heals_a_tap_whose_event_was_missed() {
    let mut r = Rig::new();
    r.host().interfaces.insert(7, "tap7".into()); // no event
    r.host().interfaces.insert(8, "eth8".into());
    let report = r.w.presence_check();
    assert_eq!(
        r.take(),
        [Interfaces, Call::Attached, attach("tap7"), RemoveUnmatched]
    );
    assert_eq!(report.healed, ["tap7"]);
    assert_eq!(r.w.metrics().heals(), 1);
    assert_eq!(r.attached(), 1);
}

#[test]
fn the_presence_check_forgets_links_whose_removal_or_rename_was_missed() {
    let mut r = Rig::new();
    r.appear(5, "tap5");
    r.appear(6, "tap6");
    r.take();
    // tap5 deleted and tap6 renamed away, both events lost; the kernel
    // took tap5's programs, tap6 keeps ours under its new name.
    r.host().interfaces.remove(&5);
    r.host().ours.remove("tap5");
    r.host().interfaces.insert(6, "eth6".into());
    r.host().ours.remove("tap6");
    r.host().ours.insert("eth6".into());
    let report = r.w.presence_check();
    assert_eq!(r.take(), QUIET_CHECK);
    assert_eq!(report.removed, ["eth6"]);
    assert!(report.healed.is_empty());
    assert_eq!(r.attached(), 0);
    assert!(r.host().ours.is_empty());
}

#[test]
fn a_failed_listing_is_counted_and_changes_nothing() {
    let mut r = Rig::new();
    r.appear(5, "tap5");
    r.take();
    r.host().listing_fails = true;
    r.host().ours.clear();
    let report = r.w.presence_check();
    assert!(report.skipped);
    assert_eq!(r.take(), [Interfaces]);
    assert_eq!(r.failures(Failure::PresenceCheck), 1);
    assert_eq!(r.w.metrics().presence_checks(), 0);
    assert_eq!(r.w.metrics().heals(), 0);
    // Recovered: the missing programs are healed.
    r.host().listing_fails = false;
    assert_eq!(r.w.presence_check().healed, ["tap5"]);
}

#[test]
fn a_replay_attaches_what_matches_forgets_what_is_gone_and_is_idempotent() {
    let mut r = Rig::new();
    r.appear(3, "tap3");
    r.take();
    {
        let mut h = r.host();
        h.interfaces.remove(&3);
        h.ours.remove("tap3");
        h.interfaces.insert(1, "lo".into());
        h.interfaces.insert(4, "tap4".into());
        h.interfaces.insert(5, "vm-exact".into());
    }
    let listing: Vec<(u32, String)> = r
        .host()
        .interfaces
        .iter()
        .map(|(i, n)| (*i, n.clone()))
        .collect();
    r.w.replay(&listing);
    assert_eq!(r.take(), [attach("tap4"), attach("vm-exact")]);
    assert_eq!(r.attached(), 2);
    // A second replay of the same links (after an overrun) calls nothing.
    r.w.replay(&listing);
    assert_eq!(r.take(), []);
    assert_eq!(r.attached(), 2);
}

#[test]
fn buffered_events_older_than_the_replay_converge() {
    // Subscribe, then dump: events queued before the dump was read are
    // applied after it. tap9 was created, renamed to eth9 and the dump
    // shows eth9; the stale "tap9" event must not leave it attached.
    let mut r = Rig::new();
    r.host().interfaces.insert(9, "eth9".into());
    r.w.replay(&[(9, "eth9".into())]);
    r.w.apply(&present(9, "tap9")); // stale: the name no longer exists
    r.w.apply(&present(9, "eth9"));
    assert_eq!(r.take(), [attach("tap9")]);
    assert_eq!(r.attached(), 0);
    assert_eq!(r.failures(Failure::Attach), 0);
    assert!(r.host().ours.is_empty());
}

#[test]
fn a_taps_port_mac_is_written_before_its_attach() {
    let mut r = Rig::new();
    r.w.set_ports(ports(&[("5", 5)]));
    r.appear(5, "tap5");
    r.appear(6, "tap6"); // no binding names it
    assert_eq!(r.take(), [attach("tap5"), attach("tap6")]);
    assert_eq!(
        r.host().port_at_attach,
        [("tap5".to_owned(), Some(mac(5))), ("tap6".to_owned(), None)]
    );
    assert_eq!(r.ports(), [(5, mac(5))]);
    assert_eq!(r.attached(), 2);
    assert_eq!(r.w.metrics().without_port(), 1);
}

#[test]
fn port_macs_follow_the_plan_renames_and_vanished_taps() {
    let mut r = Rig::new();
    r.appear(5, "tap5");
    r.appear(6, "tap6");
    r.take();
    assert_eq!(r.ports(), []);
    assert_eq!(r.w.metrics().without_port(), 2);

    // A commit learns both ports: written, nothing re-attached.
    r.w.set_ports(ports(&[("5", 5), ("6", 6)]));
    assert_eq!(r.take(), []);
    assert_eq!(r.ports(), [(5, mac(5)), (6, mac(6))]);
    assert_eq!(r.w.metrics().without_port(), 0);

    // Renamed within the rule to another port's name: that port's MAC.
    r.w.set_ports(ports(&[("5", 5), ("6", 6), ("7", 7)]));
    r.rename(5, "tap7");
    assert_eq!(r.ports(), [(5, mac(7)), (6, mac(6))]);

    // Its port leaves the plan: forgotten.
    r.w.set_ports(ports(&[("6", 6)]));
    assert_eq!(r.ports(), [(6, mac(6))]);
    assert_eq!(r.w.metrics().without_port(), 1);

    // Renamed out of the rule, or gone: forgotten too.
    r.host().ours.insert("tap6".into());
    r.rename(6, "eth6");
    assert_eq!(r.ports(), []);
    r.w.set_ports(ports(&[("5", 5)]));
    r.rename(5, "tap5");
    assert_eq!(r.ports(), [(5, mac(5))]);
    r.vanish(5);
    assert_eq!(r.ports(), []);
    assert_eq!(r.w.metrics().without_port(), 0);
    for f in Failure::ALL {
        assert_eq!(r.failures(f), 0, "{f:?}");
    }
}

#[test]
fn a_refused_port_write_still_attaches_and_the_presence_check_retries_it() {
    let mut r = Rig::new();
    r.w.set_ports(ports(&[("5", 5)]));
    r.host().ports_fail = true;
    r.appear(5, "tap5");
    assert_eq!(r.take(), [attach("tap5")], "counting comes first");
    assert_eq!(r.failures(Failure::TapPort), 1);
    assert_eq!(r.w.metrics().without_port(), 1);

    r.host().ports_fail = false;
    let report = r.w.presence_check();
    assert_eq!(report, PresenceReport::default(), "nothing to heal");
    assert_eq!(r.ports(), [(5, mac(5))]);
    assert_eq!(r.w.metrics().without_port(), 0);
    assert_eq!(r.failures(Failure::TapPort), 1);
}

#[test]
fn the_presence_check_forgets_ports_of_interfaces_that_are_gone() {
    let mut r = Rig::new();
    r.w.set_ports(ports(&[("5", 5)]));
    r.appear(5, "tap5");
    assert_eq!(r.ports(), [(5, mac(5))]);
    // Gone without an event.
    r.host().interfaces.remove(&5);
    r.host().ours.remove("tap5");
    r.w.presence_check();
    assert_eq!(r.ports(), []);
}

/// The board the node page reads: every tracked tap with its state (the
/// kernel's words when refused), the port MAC written for it, its own
/// heals — and the board handle taken before stays current.
#[test]
fn the_board_follows_each_taps_state_port_and_heals() {
    let mut r = Rig::new();
    let board = r.w.board();
    assert_eq!(*board.get(), super::TapBoard::default());
    r.w.set_ports(ports(&[("5", 5)]));
    r.host().refuse.insert("tap6".into());
    r.appear(5, "tap5");
    r.appear(6, "tap6");
    let now = board.get();
    assert_eq!(now.taps.len(), 2);
    let (five, six) = (&now.taps[0], &now.taps[1]);
    assert_eq!((five.index, five.name.as_str()), (5, "tap5"));
    assert_eq!(five.state, super::TapState::Attached);
    assert_eq!(five.port_mac, Some(mac(5)));
    assert_eq!(
        six.state,
        super::TapState::Failed("attach tap6: EBUSY".into())
    );
    assert_eq!(six.port_mac, None, "no port named tap6");
    assert!(now.last_check.is_none());

    // Recovered at a check (a retry, no heal); tap5 loses its programs
    // behind our back and is healed.
    r.host().refuse.clear();
    r.host().ours.remove("tap5");
    let attached_at = five.since;
    r.w.presence_check();
    let now = board.get();
    assert!(now.last_check.is_some());
    let (five, six) = (&now.taps[0], &now.taps[1]);
    assert_eq!(six.state, super::TapState::Attached);
    assert_eq!((six.heals, six.last_heal), (0, None));
    assert_eq!(five.heals, 1);
    assert_eq!(five.last_heal, Some(five.since));
    assert!(five.since >= attached_at);
    // A quiet check changes nothing but its own time.
    r.w.presence_check();
    assert_eq!(board.get().taps, now.taps);
    r.vanish(6);
    assert_eq!(board.get().taps.len(), 1);
}
