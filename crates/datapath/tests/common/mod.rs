//! Shared helpers of the datapath integration tests (root required).

pub mod topology;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use lachesis_abi::{Direction, FlowCounters, FlowKey, Mac};
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
pub fn totals_for(entries: &[(FlowKey, FlowCounters)], mac: Mac) -> VmTraffic {
    let mut t = VmTraffic::default();
    for (k, v) in entries {
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

/// Drains `flows` into a sorted map.
pub fn snapshot(dp: &Datapath) -> BTreeMap<FlowKey, FlowCounters> {
    let mut buf = DrainBuffer::new();
    dp.drain(&mut buf).expect("drain");
    let map: BTreeMap<_, _> = buf.entries.iter().copied().collect();
    assert_eq!(map.len(), buf.entries.len(), "a drain returned a key twice");
    map
}
