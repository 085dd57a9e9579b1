//! Reading `flows` and `stats` (DESIGN §4.6): batched, read-don't-clear.
//! Deleting is `lookup_delete`'s: an entry is only ever removed together
//! with its last reading.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::path::{Path, PathBuf};

use bytemuck::Pod;
use lachesis_abi::{
    EntryKey, FlowCounters, FlowKey, FlowValue, StatReason, ENTRY_KEY_SIZE, FLOW_COUNTERS_SIZE,
    FLOW_KEY_SIZE, FLOW_VALUE_SIZE,
};
use libbpf_rs::{MapCore, MapFlags, MapHandle, MapType};

use crate::error::{Error, Result};

/// Entries asked for per batch call; grown when a hash bucket holds more.
const DEFAULT_BATCH: u32 = 4096;
// Per-CPU values are laid out at 8-byte strides by the kernel; the typed
// buffer below relies on FlowCounters needing no padding to get there.
const _: () = assert!(FLOW_COUNTERS_SIZE.is_multiple_of(8));

/// How a `flows` map is keyed and valued: the loaded variant's, or a
/// pinned map's, told from what the kernel fixed at its creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowsLayout {
    /// A hash keyed by (flow key, CPU) (DESIGN §4.7): one [`FlowValue`]
    /// per sub-entry. Readings name their sub-entry.
    ByCpu,
    /// The previous layout: a per-CPU hash keyed by the flow key, one
    /// [`FlowCounters`] per possible CPU per entry. Readings fold the slots
    /// (bytes and packets summed, stamps maxed) and name the folded entry
    /// ([`EntryKey::folded`]).
    PerCpu {
        /// Possible CPUs: the values each entry carries.
        slots: usize,
    },
    /// A shared hash keyed by the flow key, one [`FlowCounters`] per entry
    /// (benchmark variant); readings name the folded entry.
    Shared,
}

impl FlowsLayout {
    /// The layout of a map of this type and key and value sizes; `None`
    /// when it is none of ours (its keys could not be attributed, and
    /// misreading them would bill garbage).
    pub(crate) fn of(
        map_type: MapType,
        key_size: u32,
        value_size: u32,
        possible_cpus: usize,
    ) -> Option<FlowsLayout> {
        let (key, value) = (key_size as usize, value_size as usize);
        match map_type {
            MapType::Hash if key == ENTRY_KEY_SIZE && value == FLOW_VALUE_SIZE => {
                Some(FlowsLayout::ByCpu)
            }
            MapType::Hash if key == FLOW_KEY_SIZE && value == FLOW_COUNTERS_SIZE => {
                Some(FlowsLayout::Shared)
            }
            MapType::PercpuHash if key == FLOW_KEY_SIZE && value == FLOW_COUNTERS_SIZE => {
                Some(FlowsLayout::PerCpu {
                    slots: possible_cpus,
                })
            }
            _ => None,
        }
    }

    /// The layout of an open map handle.
    pub(crate) fn of_handle(handle: &MapHandle, possible_cpus: usize) -> Option<FlowsLayout> {
        FlowsLayout::of(
            handle.map_type(),
            handle.key_size(),
            handle.value_size(),
            possible_cpus,
        )
    }

    /// Values the kernel copies per entry.
    #[must_use]
    pub fn slots(self) -> usize {
        match self {
            FlowsLayout::PerCpu { slots } => slots,
            FlowsLayout::ByCpu | FlowsLayout::Shared => 1,
        }
    }

    /// Bytes a batch lookup copies to userspace per entry.
    #[must_use]
    pub fn bytes_per_entry(self) -> usize {
        match self {
            FlowsLayout::ByCpu => ENTRY_KEY_SIZE + FLOW_VALUE_SIZE,
            FlowsLayout::PerCpu { slots } => FLOW_KEY_SIZE + slots * FLOW_COUNTERS_SIZE,
            FlowsLayout::Shared => FLOW_KEY_SIZE + FLOW_COUNTERS_SIZE,
        }
    }
}

/// Reusable buffers for draining `flows`: allocation happens once, later
/// drains reuse the capacity.
#[derive(Debug, Default)]
pub struct DrainBuffer {
    /// Keys of a map keyed by the flow key alone.
    flow_keys: Vec<FlowKey>,
    /// `count × slots` values of such a map (slots: possible CPUs for a
    /// per-CPU map, 1 for a shared one); `FlowCounters` is 32 bytes, already
    /// the kernel's 8-byte per-CPU stride, so the buffer is typed and
    /// aligned.
    pub(crate) values: Vec<FlowCounters>,
    /// Keys and values of the (flow key, CPU) map.
    entry_keys: Vec<EntryKey>,
    pub(crate) entry_values: Vec<FlowValue>,
    /// The last drain's readings (or a lookup-and-delete's final
    /// readings), one per kernel entry: a CPU's sub-entry of the (flow
    /// key, CPU) map, or a per-CPU map's entry with its slots folded.
    pub entries: Vec<(EntryKey, FlowCounters)>,
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

    /// Distinct flow keys among [`DrainBuffer::entries`] and the mean
    /// sub-entries per key (the fan-out, DESIGN §4.7), `0.0` when empty.
    #[must_use]
    pub fn fan_out(&self) -> (usize, f64) {
        let mut keys: Vec<&FlowKey> = self.entries.iter().map(|(e, _)| &e.key).collect();
        keys.sort_unstable();
        keys.dedup();
        if keys.is_empty() {
            return (0, 0.0);
        }
        #[expect(clippy::cast_precision_loss, reason = "map sizes are far below 2^52")]
        let mean = self.entries.len() as f64 / keys.len() as f64;
        (keys.len(), mean)
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

/// Reads every entry of a map with the kernel's batch lookup into `keys`
/// and `values` (`per_key` values per key), handing each key and its
/// values to `emit`; returns the syscalls made.
///
/// libbpf-rs refuses batch lookups on per-CPU maps, so this calls
/// `bpf_map_lookup_batch` directly. Contract of the call (kernel htab):
/// `count` in/out; the last call returns ENOENT with a valid `count`; ENOSPC
/// with nothing copied means one bucket holds more entries than `count`.
fn batched<K: Pod + Default, V: Pod + Default>(
    map: BorrowedFd<'_>,
    keys: &mut Vec<K>,
    values: &mut Vec<V>,
    per_key: usize,
    mut emit: impl FnMut(&K, &[V]),
) -> Result<u32> {
    let mut calls = 0;
    let mut batch = DEFAULT_BATCH;
    // The hash map's batch token is a u32 bucket index; give it room anyway.
    let mut in_token = [0u8; 8];
    let mut out_token = [0u8; 8];
    let mut first = true;
    loop {
        let want = batch as usize;
        keys.resize(want, K::default());
        values.resize(want * per_key, V::default());
        let mut count = batch;
        // SAFETY: `opts` is zeroed then sized as libbpf requires.
        let mut opts: libbpf_sys::bpf_map_batch_opts = unsafe { std::mem::zeroed() };
        opts.sz = size_of::<libbpf_sys::bpf_map_batch_opts>() as _;
        // SAFETY: keys holds `count` keys of the map's key size and values
        // `count × per_key` values of its value size (8-byte aligned
        // strides: one per possible CPU for a per-CPU map, one otherwise),
        // exactly what the kernel writes; tokens are 8 bytes, more than the
        // 4 the hash map uses.
        let ret = unsafe {
            libbpf_sys::bpf_map_lookup_batch(
                map.as_raw_fd(),
                if first {
                    std::ptr::null_mut()
                } else {
                    in_token.as_mut_ptr().cast()
                },
                out_token.as_mut_ptr().cast(),
                keys.as_mut_ptr().cast(),
                values.as_mut_ptr().cast(),
                &raw mut count,
                &raw const opts,
            )
        };
        calls += 1;
        let errno = if ret < 0 { -ret } else { 0 };
        if errno == libc::ENOSPC && count == 0 {
            batch = batch.saturating_mul(2);
            continue;
        }
        if errno != 0 && errno != libc::ENOENT {
            return Err(Error::errno("batch lookup of flows", ret));
        }
        let got = (count as usize).min(want);
        for (k, v) in keys[..got].iter().zip(values.chunks_exact(per_key)) {
            emit(k, v);
        }
        if errno == libc::ENOENT {
            return Ok(calls);
        }
        in_token = out_token;
        first = false;
    }
}

/// Reads every entry of a `flows` map of `layout` into `buf.entries`.
pub(crate) fn drain_batched(
    map: BorrowedFd<'_>,
    layout: FlowsLayout,
    buf: &mut DrainBuffer,
) -> Result<()> {
    buf.entries.clear();
    buf.calls = 0;
    let entries = &mut buf.entries;
    buf.calls = match layout {
        FlowsLayout::ByCpu => batched(
            map,
            &mut buf.entry_keys,
            &mut buf.entry_values,
            1,
            |k, v| entries.push((*k, v[0].counters)),
        )?,
        FlowsLayout::PerCpu { slots } => {
            batched(map, &mut buf.flow_keys, &mut buf.values, slots, |k, v| {
                entries.push((EntryKey::folded(*k), fold_cpus(v)));
            })?
        }
        FlowsLayout::Shared => batched(map, &mut buf.flow_keys, &mut buf.values, 1, |k, v| {
            entries.push((EntryKey::folded(*k), v[0]));
        })?,
    };
    Ok(())
}

/// The same read one key at a time (`get_next_key` + lookup per entry); kept
/// for the drain benchmark's contrast and as a cross-check in tests.
#[cfg(feature = "testing")]
pub(crate) fn drain_iterated(
    map: &MapHandle,
    layout: FlowsLayout,
    buf: &mut DrainBuffer,
) -> Result<()> {
    buf.entries.clear();
    buf.calls = 0;
    for key in map.keys() {
        buf.calls += 2;
        let found = if layout.slots() == 1 {
            map.lookup(&key, MapFlags::ANY).map(|v| v.map(|v| vec![v]))
        } else {
            map.lookup_percpu(&key, MapFlags::ANY)
        };
        let Some(slots) = found.map_err(Error::bpf("lookup flows entry"))? else {
            continue; // deleted between the two calls
        };
        let reading = if layout == FlowsLayout::ByCpu {
            let key: EntryKey = bytemuck::pod_read_unaligned(&key[..ENTRY_KEY_SIZE]);
            let value: FlowValue = bytemuck::pod_read_unaligned(&slots[0][..FLOW_VALUE_SIZE]);
            (key, value.counters)
        } else {
            let mut total = FlowCounters::default();
            for slot in &slots {
                total.fold(&bytemuck::pod_read_unaligned(&slot[..FLOW_COUNTERS_SIZE]));
            }
            let key: FlowKey = bytemuck::pod_read_unaligned(&key[..FLOW_KEY_SIZE]);
            (EntryKey::folded(key), total)
        };
        buf.entries.push(reading);
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
/// It may be of another layout than the live map (the per-CPU hash of the
/// previous layout, retired by the (flow key, CPU) one): it is read by its
/// own, a per-CPU map's entries folded.
#[derive(Debug)]
pub struct RetiredFlows {
    handle: MapHandle,
    path: PathBuf,
    layout: Option<FlowsLayout>,
}

impl RetiredFlows {
    pub(crate) fn new(handle: MapHandle, path: PathBuf) -> Result<Self> {
        let cpus = libbpf_rs::num_possible_cpus().map_err(Error::bpf("count possible CPUs"))?;
        let layout = FlowsLayout::of_handle(&handle, cpus);
        Ok(RetiredFlows {
            handle,
            path,
            layout,
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

    /// Its layout; `None` when it is none of ours.
    #[must_use]
    pub fn layout(&self) -> Option<FlowsLayout> {
        self.layout
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
        let Some(layout) = self.layout else {
            buf.entries.clear();
            return Ok(());
        };
        drain_batched(self.handle.as_fd(), layout, buf)
    }

    /// Unpins it; the kernel frees it once no program references it.
    pub fn remove(self) -> Result<()> {
        std::fs::remove_file(&self.path)
            .map_err(Error::io(format!("unpin {}", self.path.display())))
    }
}
