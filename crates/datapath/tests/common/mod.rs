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

/// The CPUs this process may run on.
pub fn cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity
    // fills it for the calling thread; CPU_ISSET reads inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        let rc = libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &raw mut set);
        assert_eq!(
            rc,
            0,
            "sched_getaffinity: {}",
            std::io::Error::last_os_error()
        );
        (0..libc::CPU_SETSIZE as usize)
            .filter(|c| libc::CPU_ISSET(*c, &set))
            .collect()
    }
}

/// Pins the calling thread to `cpu` (a program test-run counts on the CPU
/// it runs on: the (flow key, CPU) sub-entry it writes is that CPU's).
pub fn pin_to_cpu(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes
    // inside it; pid 0 affects only the calling thread.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &raw const set)
    };
    assert_eq!(
        rc,
        0,
        "pin to CPU {cpu}: {} (the test needs two online CPUs)",
        std::io::Error::last_os_error()
    );
}

/// Runs `f` on the calling thread pinned to `cpu` ([`pin_to_cpu`]), then
/// restores the thread's affinity.
pub fn on_cpu<T>(cpu: usize, f: impl FnOnce() -> T) -> T {
    // SAFETY: a zeroed cpu_set_t is a valid empty set.
    let mut old: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `old` is a cpu_set_t of the size passed, written by the call
    // for the calling thread (pid 0).
    let rc = unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &raw mut old) };
    assert_eq!(
        rc,
        0,
        "sched_getaffinity: {}",
        std::io::Error::last_os_error()
    );
    pin_to_cpu(cpu);
    let out = f();
    // SAFETY: `old` is the mask read above, passed with its size.
    let rc = unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &raw const old) };
    assert_eq!(
        rc,
        0,
        "restore affinity: {}",
        std::io::Error::last_os_error()
    );
    out
}
