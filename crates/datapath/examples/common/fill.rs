//! A `flows` map filled for the drain benchmarks: entry `i` has a key of
//! its own, `i × 1500 + 1` bytes and `i + 1` packets, so a drain's result
//! can be checked entry by entry. In the (flow key, CPU) layout each entry
//! is CPU 0's sub-entry of its key.

use lachesis_abi::{EntryKey, FlowCounters, FlowKey};
use lachesis_datapath::Datapath;

/// Entry `i`'s key (the source MAC carries `i`).
pub fn key(i: u32) -> FlowKey {
    let b = i.to_be_bytes();
    FlowKey {
        src_mac: [2, 0, b[0], b[1], b[2], b[3]],
        dst_mac: [2, 0, 0, 0, 0, 1],
        eth_proto: 0x0800,
        direction: 0,
        zone: 0,
        l4: 2,
        pad: 0,
    }
}

/// The `i` a [`key`] was made from.
pub fn index(key: &FlowKey) -> u32 {
    let m = key.src_mac;
    u32::from_be_bytes([m[2], m[3], m[4], m[5]])
}

/// Entry `i`'s counters, last seen at `last_seen_ns`.
pub fn counters(i: u32, last_seen_ns: u64) -> FlowCounters {
    FlowCounters {
        bytes: u64::from(i) * 1500 + 1,
        packets: u64::from(i) + 1,
        last_seen_ns,
        created_ns: 1,
    }
}

/// Writes entries `0..entries`, entry `i` last seen at `stamp(i)`.
pub fn fill(dp: &Datapath, entries: u32, stamp: impl Fn(u32) -> u64) {
    for i in 0..entries {
        dp.write_flow_for_test(&EntryKey::new(key(i), 0), &counters(i, stamp(i)))
            .expect("fill");
    }
}
