//! Shared helpers of the datapath integration tests (root required).

pub mod topology;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use lachesis_abi::{FlowCounters, FlowKey};
use lachesis_datapath::{
    AttachMode, Datapath, DatapathConfig, DrainBuffer, FlowsPin, RetiredFlows,
};

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

/// Drains `flows` into a sorted map.
pub fn snapshot(dp: &Datapath) -> BTreeMap<FlowKey, FlowCounters> {
    let mut buf = DrainBuffer::new();
    dp.drain(&mut buf).expect("drain");
    let map: BTreeMap<_, _> = buf.entries.iter().copied().collect();
    assert_eq!(map.len(), buf.entries.len(), "a drain returned a key twice");
    map
}
