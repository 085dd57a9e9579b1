//! Shared helpers of the datapath integration tests (root required).

pub mod topology;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use lachesis_abi::{Direction, EntryKey, FlowCounters, FlowKey, Mac};
use lachesis_datapath::{
    AttachMode, Datapath, DatapathConfig, DrainBuffer, FlowsPin, RetiredFlows,
};
use lachesis_lab::netns::VmTraffic;

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A bpffs directory unique to this test, removed on drop.
pub struct PinDir(pub PathBuf);

impl PinDir {
    pub fn new(tag: &str) -> PinDir {
        lachesis_lab::require_root();
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        PinDir(PathBuf::from(format!(
            "/sys/fs/bpf/lachesis-test-{tag}-{}-{n}",
            std::process::id()
        )))
    }

    pub fn config(&self) -> DatapathConfig {
        DatapathConfig {
            bpffs_dir: self.0.clone(),
            flows_max_entries: Some(4096),
            attach_mode: AttachMode::Auto,
            ..DatapathConfig::default()
        }
    }

    pub fn load(&self) -> (Datapath, FlowsPin, Vec<RetiredFlows>) {
        Datapath::load(&self.config()).expect("load the classifier")
    }
}

impl Drop for PinDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What `entries` (a drain) counted for the VM of `mac`, per direction
/// as the VM sees it: its tx where it is the source, its rx where it is
/// the destination.
pub fn totals_for(entries: &[(EntryKey, FlowCounters)], mac: Mac) -> VmTraffic {
    let mut t = VmTraffic::default();
    for (e, v) in entries {
        let k = &e.key;
        match k.direction().unwrap() {
            Direction::Tx if k.src_mac == mac.0 => {
                t.tx_bytes += v.bytes;
                t.tx_packets += v.packets;
            }
            Direction::Rx if k.dst_mac == mac.0 => {
                t.rx_bytes += v.bytes;
                t.rx_packets += v.packets;
            }
            _ => {}
        }
    }
    t
}

/// Drains `flows` into a sorted map of its sub-entries.
pub fn snapshot_entries(dp: &Datapath) -> BTreeMap<EntryKey, FlowCounters> {
    let mut buf = DrainBuffer::new();
    dp.drain(&mut buf).expect("drain");
    let map: BTreeMap<_, _> = buf.entries.iter().copied().collect();
    assert_eq!(
        map.len(),
        buf.entries.len(),
        "a drain returned an entry twice"
    );
    map
}

/// Drains `flows` into a sorted map by flow key, each key's sub-entries
/// (one per CPU that counted it) folded: bytes and packets summed.
pub fn snapshot(dp: &Datapath) -> BTreeMap<FlowKey, FlowCounters> {
    let mut map: BTreeMap<FlowKey, FlowCounters> = BTreeMap::new();
    for (e, v) in snapshot_entries(dp) {
        map.entry(e.key).and_modify(|f| f.fold(&v)).or_insert(v);
    }
    map
}

/// Runs `frame` once on `dir` pinned to `cpu` and returns the one
/// sub-entry that grew by one packet, asserted to be that CPU's.
pub fn run_once_on(dp: &Datapath, cpu: usize, dir: Direction, frame: &[u8]) -> EntryKey {
    let before = snapshot_entries(dp);
    on_cpu(cpu, || dp.test_run(dir, frame, 1)).expect("test-run");
    let grown: Vec<EntryKey> = snapshot_entries(dp)
        .into_iter()
        .filter(|(k, v)| before.get(k).map_or(0, |o| o.packets) + 1 == v.packets)
        .map(|(k, _)| k)
        .collect();
    assert_eq!(grown.len(), 1, "exactly one sub-entry grows: {grown:?}");
    assert_eq!(usize::from(grown[0].cpu), cpu, "the CPU it ran on");
    grown[0]
}

pub use lachesis_lab::cpu::{cpus, on_cpu, pin_to_cpu};
