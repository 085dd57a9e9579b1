//! Lookup-and-delete of `flows` entries against the real classifier and
//! map (root): the final reading is the entry's last, including what it
//! counted after the drain that chose it for deletion (DESIGN §9). Entries
//! are one CPU's sub-entry of a flow key (§4.7): each is deleted alone.

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use lachesis_abi::{Direction, EntryKey, FlowCounters, FlowKey, L4Class, Zone};
use lachesis_datapath::{Datapath, DatapathConfig, DrainBuffer, FlowsVariant};
use lachesis_lab::frame::Frame;

use common::pin_to_cpu;
use common::topology::{ip, populate};

/// The key the classifier gives `frame` sent by a T1 VM to the internet.
fn external_tx_key(frame: &[u8]) -> FlowKey {
    FlowKey {
        dst_mac: frame[0..6].try_into().unwrap(),
        src_mac: frame[6..12].try_into().unwrap(),
        eth_proto: 0x0800,
        direction: Direction::Tx.code(),
        zone: Zone::External.code(),
        l4: L4Class::Udp.code(),
        pad: 0,
    }
}

fn setup(tag: &str) -> (common::PinDir, Datapath, Vec<u8>, FlowKey) {
    setup_variant(tag, None)
}

/// [`setup`] with another `flows` variant than the production one.
fn setup_variant(
    tag: &str,
    variant: Option<FlowsVariant>,
) -> (common::PinDir, Datapath, Vec<u8>, FlowKey) {
    let pins = common::PinDir::new(tag);
    let config: DatapathConfig = pins.config();
    let (dp, _, _) = match variant {
        Some(v) => Datapath::load_variant(&config, v).unwrap(),
        None => pins.load(),
    };
    let net = populate(&dp);
    let frame = Frame::udp(net.a, net.router, ip("10.1.0.10"), ip("8.8.8.8")).bytes();
    let key = external_tx_key(&frame);
    (pins, dp, frame, key)
}

/// Runs the tx program `packets` times over `frame` on the calling thread's CPU.
fn send(dp: &Datapath, frame: &[u8], packets: u32) {
    let out = dp.test_run(Direction::Tx, frame, packets).unwrap();
    assert_eq!(out.retval, u32::MAX, "the program passes every packet on");
}

#[test]
fn the_final_reading_includes_what_was_counted_after_the_drain() {
    let (_pins, dp, frame, key) = setup("lnd-final");
    let len = frame.len() as u64;
    pin_to_cpu(0);
    let key = EntryKey::new(key, 0);
    send(&dp, &frame, 3);
    let drained = common::snapshot_entries(&dp)[&key];
    assert_eq!((drained.bytes, drained.packets), (3 * len, 3));

    // The entry keeps counting after the drain that chose it for deletion.
    send(&dp, &frame, 4);
    let mut buf = DrainBuffer::new();
    let failed = dp.lookup_and_delete_flows(&[key], &mut buf);
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(buf.entries.len(), 1);
    let (k, last) = buf.entries[0];
    assert_eq!(k, key);
    assert_eq!(
        (last.bytes, last.packets),
        (7 * len, 7),
        "every packet up to the delete is in the final reading"
    );
    assert_eq!(last.created_ns, drained.created_ns, "the same entry");
    assert!(
        !common::snapshot_entries(&dp).contains_key(&key),
        "the entry is gone"
    );

    // Nothing left to read or delete; the next packet starts a new entry.
    dp.lookup_and_delete_flows(&[key], &mut buf);
    assert!(buf.entries.is_empty());
    send(&dp, &frame, 1);
    let fresh = common::snapshot_entries(&dp)[&key];
    assert_eq!((fresh.bytes, fresh.packets), (len, 1));
    assert!(fresh.created_ns > last.created_ns, "a new identity (§4.3)");
}

#[test]
fn each_cpu_sub_entry_is_deleted_alone() {
    let (_pins, dp, frame, key) = setup("lnd-bycpu");
    let len = frame.len() as u64;
    pin_to_cpu(0);
    send(&dp, &frame, 2);
    pin_to_cpu(1);
    send(&dp, &frame, 5);
    let before = common::snapshot_entries(&dp);
    assert_eq!(before.len(), 2, "one sub-entry per CPU: {before:?}");
    let mut buf = DrainBuffer::new();
    let one = EntryKey::new(key, 1);
    assert!(dp.lookup_and_delete_flows(&[one], &mut buf).is_empty());
    assert_eq!(buf.entries, vec![(one, before[&one])]);
    assert_eq!(buf.entries[0].1.packets, 5);
    let left = common::snapshot_entries(&dp);
    let zero = EntryKey::new(key, 0);
    assert_eq!(left.keys().copied().collect::<Vec<_>>(), vec![zero]);
    assert_eq!(left[&zero], before[&zero], "CPU 0's sub-entry untouched");
    // The previous layout's folded entry is no key of this map.
    dp.lookup_and_delete_flows(&[EntryKey::folded(key)], &mut buf);
    assert!(buf.entries.is_empty());
    assert_eq!(common::snapshot_entries(&dp).len(), 1);
    let _ = len;
}

/// The previous layout (a per-CPU hash, retired at the upgrade and read by
/// the same code): its entry's CPU slots are folded like a drain's.
#[test]
fn per_cpu_slots_are_folded_like_a_drain() {
    let (_pins, dp, frame, key) = setup_variant("lnd-percpu", Some(FlowsVariant::PerCpu));
    let len = frame.len() as u64;
    pin_to_cpu(0);
    send(&dp, &frame, 2);
    pin_to_cpu(1);
    std::thread::sleep(std::time::Duration::from_millis(5));
    send(&dp, &frame, 5);
    let key = EntryKey::folded(key);
    let drained: FlowCounters = common::snapshot_entries(&dp)[&key];
    let mut buf = DrainBuffer::new();
    assert!(dp.lookup_and_delete_flows(&[key], &mut buf).is_empty());
    let last = buf.entries[0].1;
    assert_eq!((last.bytes, last.packets), (7 * len, 7), "slots summed");
    assert_eq!(
        last, drained,
        "stamps maxed exactly as the drain folds them"
    );
}

#[test]
fn only_the_given_keys_are_deleted_and_absent_keys_yield_nothing() {
    let (_pins, dp, frame, key) = setup("lnd-keys");
    let net_b = Frame::udp(
        common::topology::mac("02:00:00:00:01:0b"),
        common::topology::mac("fa:16:3e:00:00:01"),
        ip("10.1.0.11"),
        ip("8.8.8.8"),
    )
    .bytes();
    let other = EntryKey::new(external_tx_key(&net_b), 0);
    pin_to_cpu(0);
    send(&dp, &frame, 1);
    send(&dp, &net_b, 2);
    let absent = EntryKey::new(
        FlowKey {
            l4: L4Class::Tcp.code(),
            ..key
        },
        0,
    );
    let elsewhere = EntryKey::new(key, 1);
    let key = EntryKey::new(key, 0);
    let mut buf = DrainBuffer::new();
    assert!(dp
        .lookup_and_delete_flows(&[absent, elsewhere, key], &mut buf)
        .is_empty());
    assert_eq!(buf.calls, 3);
    assert_eq!(
        buf.entries.iter().map(|(k, _)| *k).collect::<Vec<_>>(),
        vec![key]
    );
    let left = common::snapshot_entries(&dp);
    assert_eq!(left.keys().copied().collect::<Vec<_>>(), vec![other]);
    assert_eq!(left[&other].packets, 2);
}

/// A sender keeps counting into its sub-entry on another CPU while it is
/// deleted again and again. The program updates the value in place
/// through the pointer its lookup returned; a delete that lands between
/// that lookup and the add takes the value before the add, and the add goes
/// to the unlinked element. The add is two plain stores (bytes and
/// packets, in whichever order the compiler chose), so a delete may also copy
/// a slot between them: that reading holds one of the packet's two counts and
/// the other goes to the unlinked element. So the bound is: at most one
/// packet per delete (one sending CPU here) is missing from the bytes, bytes
/// go missing in whole packets only, a reading is torn by at most one packet
/// per delete, and every other packet is in exactly one final reading or in
/// the entry left at the end.
#[test]
fn deleting_an_entry_that_keeps_counting_misses_at_most_the_packet_in_flight() {
    const DELETES: u64 = 300;
    const PER_BURST: u32 = 50;
    let (_pins, dp, frame, key) = setup("lnd-busy");
    // The sender's sub-entry: it counts on CPU 1.
    let key = EntryKey::new(key, 1);
    let dp = Arc::new(dp);
    let len = frame.len() as u64;
    let (started, stop) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let sender = {
        let (dp, frame) = (dp.clone(), frame.clone());
        let (started, stop) = (started.clone(), stop.clone());
        std::thread::spawn(move || {
            pin_to_cpu(1);
            let mut bursts = 0u64;
            while !stop.load(Ordering::SeqCst) {
                send(&dp, &frame, PER_BURST);
                bursts += 1;
                started.store(true, Ordering::SeqCst);
            }
            bursts * u64::from(PER_BURST)
        })
    };
    pin_to_cpu(0);
    while !started.load(Ordering::SeqCst) {
        std::hint::spin_loop();
    }
    let mut buf = DrainBuffer::new();
    let (mut read, mut deletes) = ((0u64, 0u64), 0u64);
    let mut stamps = Vec::new();
    while deletes < DELETES {
        assert!(dp.lookup_and_delete_flows(&[key], &mut buf).is_empty());
        for (_, c) in &buf.entries {
            read.0 += c.bytes;
            read.1 += c.packets;
            stamps.push(c.created_ns);
            deletes += 1;
        }
    }
    stop.store(true, Ordering::SeqCst);
    let sent = sender.join().unwrap();
    dp.lookup_and_delete_flows(&[key], &mut buf);
    for (_, c) in &buf.entries {
        read.0 += c.bytes;
        read.1 += c.packets;
    }
    stamps.dedup();
    assert_eq!(
        stamps.len() as u64,
        deletes,
        "each delete took a different entry"
    );
    assert_eq!(read.0 % len, 0, "bytes go missing in whole packets only");
    let (missing_bytes, torn) = (sent * len - read.0, (read.0 / len).abs_diff(read.1));
    eprintln!(
        "{sent} packets sent, {deletes} deletes of the busy entry, {} packet(s) of bytes \
         in flight at a delete, {torn} reading(s) torn between bytes and packets",
        missing_bytes / len
    );
    assert!(
        missing_bytes <= deletes * len,
        "more than one packet's bytes per delete went missing"
    );
    assert!(
        torn <= deletes,
        "a reading was torn by more than the one packet in flight"
    );
}
