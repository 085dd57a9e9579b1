//! Reading `flows` and `stats` (DESIGN §4.6): batched, read-don't-clear.
//! Deleting is `lookup_delete`'s: an entry is only ever removed together
//! with its last reading.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::path::{Path, PathBuf};

use lachesis_abi::{FlowCounters, FlowKey, StatReason, FLOW_COUNTERS_SIZE, FLOW_KEY_SIZE};
use libbpf_rs::{MapCore, MapFlags, MapHandle, MapType};

use crate::error::{Error, Result};
use crate::sizing::slots_per_entry;

/// Entries asked for per batch call; grown when a hash bucket holds more.
const DEFAULT_BATCH: u32 = 4096;
// Per-CPU values are laid out at 8-byte strides by the kernel; the typed
// buffer below relies on FlowCounters needing no padding to get there.
const _: () = assert!(FLOW_COUNTERS_SIZE.is_multiple_of(8));

/// Reusable buffers for draining `flows`: allocation happens once, later
/// drains reuse the capacity.
#[derive(Debug, Default)]
pub struct DrainBuffer {
    keys: Vec<FlowKey>,
    /// `count × slots` values (slots: possible CPUs for a per-CPU map, 1 for
    /// a shared one); `FlowCounters` is 32 bytes, already the kernel's
    /// 8-byte per-CPU stride, so the buffer is typed and aligned.
    pub(crate) values: Vec<FlowCounters>,
    /// The last drain's entries (or a lookup-and-delete's final readings),
    /// per-CPU slots folded (sum counters, max stamps).
    pub entries: Vec<(FlowKey, FlowCounters)>,
    /// Syscalls made by the last drain or lookup-and-delete.
    pub calls: u32,
    /// Raw records of the iterator drain (benchmark variant).
    #[cfg(feature = "testing")]
    pub(crate) records: Vec<u8>,
}

impl DrainBuffer {
    /// An empty buffer.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }
}

/// Folds one entry's per-CPU slots: bytes and packets summed, stamps maxed.
pub(crate) fn fold_cpus(slots: &[FlowCounters]) -> FlowCounters {
    let mut total = slots[0];
    for slot in &slots[1..] {
        total.fold(slot);
    }
    total
}

/// Reads every entry of a `flows` map with the kernel's batch lookup;
/// `slots` values per entry (possible CPUs for a per-CPU map, 1 otherwise).
///
/// libbpf-rs refuses batch lookups on per-CPU maps, so this calls
/// `bpf_map_lookup_batch` directly. Contract of the call (kernel htab):
/// `count` in/out; the last call returns ENOENT with a valid `count`; ENOSPC
/// with nothing copied means one bucket holds more entries than `count`.
pub(crate) fn drain_batched(
    map: BorrowedFd<'_>,
    slots: usize,
    buf: &mut DrainBuffer,
) -> Result<()> {
    buf.entries.clear();
    buf.calls = 0;
    let mut batch = DEFAULT_BATCH;
    // The hash map's batch token is a u32 bucket index; give it room anyway.
    let mut in_token = [0u8; 8];
    let mut out_token = [0u8; 8];
    let mut first = true;
    loop {
        let want = batch as usize;
        buf.keys.resize(want, FlowKey::default());
        buf.values.resize(want * slots, FlowCounters::default());
        let mut count = batch;
        // SAFETY: `opts` is zeroed then sized as libbpf requires.
        let mut opts: libbpf_sys::bpf_map_batch_opts = unsafe { std::mem::zeroed() };
        opts.sz = size_of::<libbpf_sys::bpf_map_batch_opts>() as _;
        // SAFETY: keys holds `count` FlowKeys (18 bytes each, the map's key
        // size) and values holds `count × slots` 32-byte values, exactly
        // what the kernel writes (one per possible CPU for a per-CPU map,
        // one otherwise); tokens are 8 bytes, more than the 4 the hash map
        // uses.
        let ret = unsafe {
            libbpf_sys::bpf_map_lookup_batch(
                map.as_raw_fd(),
                if first {
                    std::ptr::null_mut()
                } else {
                    in_token.as_mut_ptr().cast()
                },
                out_token.as_mut_ptr().cast(),
                buf.keys.as_mut_ptr().cast(),
                buf.values.as_mut_ptr().cast(),
                &raw mut count,
                &raw const opts,
            )
        };
        buf.calls += 1;
        let errno = if ret < 0 { -ret } else { 0 };
        if errno == libc::ENOSPC && count == 0 {
            batch = batch.saturating_mul(2);
            continue;
        }
        if errno != 0 && errno != libc::ENOENT {
            return Err(Error::errno("batch lookup of flows", ret));
        }
        let got = (count as usize).min(want);
        buf.entries.extend(
            buf.keys[..got]
                .iter()
                .zip(buf.values.chunks_exact(slots))
                .map(|(k, slots)| (*k, fold_cpus(slots))),
        );
        if errno == libc::ENOENT {
            return Ok(());
        }
        in_token = out_token;
        first = false;
    }
}

/// The same read one key at a time (`get_next_key` + lookup per entry); kept
/// for the drain benchmark's contrast and as a cross-check in tests.
#[cfg(feature = "testing")]
pub(crate) fn drain_iterated(map: &MapHandle, slots: usize, buf: &mut DrainBuffer) -> Result<()> {
    buf.entries.clear();
    buf.calls = 0;
    for key in map.keys() {
        buf.calls += 2;
        let found = if slots == 1 {
            map.lookup(&key, MapFlags::ANY).map(|v| v.map(|v| vec![v]))
        } else {
            map.lookup_percpu(&key, MapFlags::ANY)
        };
        let Some(slots) = found.map_err(Error::bpf("lookup flows entry"))? else {
            continue; // deleted between the two calls
        };
        let mut total = FlowCounters::default();
        for slot in &slots {
            total.fold(&bytemuck::pod_read_unaligned(&slot[..FLOW_COUNTERS_SIZE]));
        }
        let key: FlowKey = bytemuck::pod_read_unaligned(&key[..FLOW_KEY_SIZE]);
        buf.entries.push((key, total));
    }
    Ok(())
}

/// Sums the per-CPU `stats` slots, indexed by [`StatReason`] code.
pub(crate) fn read_stats(map: &MapHandle) -> Result<[u64; StatReason::COUNT as usize]> {
    let mut out = [0u64; StatReason::COUNT as usize];
    for (i, slot) in out.iter_mut().enumerate() {
        let key = (i as u32).to_ne_bytes();
        if let Some(per_cpu) = map
            .lookup_percpu(&key, MapFlags::ANY)
            .map_err(Error::bpf("read stats"))?
        {
            *slot = per_cpu
                .iter()
                .map(|v| u64::from_ne_bytes(v[..8].try_into().expect("u64 slot")))
                .fold(0u64, u64::wrapping_add);
        }
    }
    Ok(out)
}

/// An incompatible `flows` map from an earlier instance, retired at load
/// (DESIGN §4.4). Its programs keep counting into it until ours replace
/// them; drain it once more after that, then [`RetiredFlows::remove`] it.
///
/// It may be of another `flows` type than the live map (a per-CPU map
/// retired by a shared one, or the reverse): it is read by its own type.
#[derive(Debug)]
pub struct RetiredFlows {
    handle: MapHandle,
    path: PathBuf,
    slots: usize,
}

impl RetiredFlows {
    pub(crate) fn new(handle: MapHandle, path: PathBuf) -> Result<Self> {
        let cpus = libbpf_rs::num_possible_cpus().map_err(Error::bpf("count possible CPUs"))?;
        let slots = slots_per_entry(handle.map_type(), cpus);
        Ok(RetiredFlows {
            handle,
            path,
            slots,
        })
    }

    /// Where it is pinned until removed.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its `max_entries`.
    #[must_use]
    pub fn max_entries(&self) -> u32 {
        self.handle.max_entries()
    }

    /// Its kernel id (programs of a predecessor still count into it).
    pub(crate) fn map_id(&self) -> Result<u32> {
        Ok(self
            .handle
            .info()
            .map_err(Error::bpf("read the retired flows map's info"))?
            .info
            .id)
    }

    /// Reads every entry. A map whose layout is not ours yields nothing: its
    /// keys could not be attributed anyway, and misreading them would bill
    /// garbage.
    pub fn drain(&self, buf: &mut DrainBuffer) -> Result<()> {
        let ours = matches!(self.handle.map_type(), MapType::PercpuHash | MapType::Hash);
        if !ours
            || self.handle.key_size() as usize != FLOW_KEY_SIZE
            || self.handle.value_size() as usize != FLOW_COUNTERS_SIZE
        {
            buf.entries.clear();
            return Ok(());
        }
        drain_batched(self.handle.as_fd(), self.slots, buf)
    }

    /// Unpins it; the kernel frees it once no program references it.
    pub fn remove(self) -> Result<()> {
        std::fs::remove_file(&self.path)
            .map_err(Error::io(format!("unpin {}", self.path.display())))
    }
}
