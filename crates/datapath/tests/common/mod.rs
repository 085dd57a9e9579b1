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

/// `capget`/`capset`'s header (`_LINUX_CAPABILITY_VERSION_3`).
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

/// One of `capget`/`capset`'s two 32-bit capability words.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const CAP_VERSION_3: u32 = 0x2008_0522;
/// `CAP_SYS_ADMIN`'s bit (in the first word).
const CAP_SYS_ADMIN: u32 = 21;

fn capget() -> [CapData; 2] {
    let mut header = CapHeader {
        version: CAP_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: a valid header and two data words, as version 3 wants.
    let rc = unsafe { libc::syscall(libc::SYS_capget, &raw mut header, data.as_mut_ptr()) };
    assert_eq!(rc, 0, "capget: {}", std::io::Error::last_os_error());
    data
}

fn capset(data: &[CapData; 2]) {
    let mut header = CapHeader {
        version: CAP_VERSION_3,
        pid: 0,
    };
    // SAFETY: a valid header and two data words, as version 3 wants.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &raw mut header, data.as_ptr()) };
    assert_eq!(rc, 0, "capset: {}", std::io::Error::last_os_error());
}

/// The calling thread without `CAP_SYS_ADMIN` in its effective set until
/// dropped (capabilities are per thread; it stays permitted, so it comes
/// back): what the agent's unit runs with, where the kernel refuses to
/// open a program or link by id.
#[derive(Debug)]
pub struct NoSysAdmin {
    saved: [CapData; 2],
}

impl NoSysAdmin {
    #[must_use]
    pub fn new() -> NoSysAdmin {
        let saved = capget();
        let mut less = saved;
        less[0].effective &= !(1 << CAP_SYS_ADMIN);
        capset(&less);
        NoSysAdmin { saved }
    }

    /// Runs `f` with `CAP_SYS_ADMIN` back (a test's own inspection).
    pub fn with_admin<T>(&self, f: impl FnOnce() -> T) -> T {
        let now = capget();
        capset(&self.saved);
        let out = f();
        capset(&now);
        out
    }
}

impl Drop for NoSysAdmin {
    fn drop(&mut self) {
        capset(&self.saved);
    }
}
