//! Deleting `flows` entries together with their last reading (DESIGN §9).
//!
//! A drain reads an entry, and a delete issued later removes it: whatever
//! the entry counted in between would never be read. The kernel's
//! `BPF_MAP_LOOKUP_AND_DELETE_ELEM` (hash maps, per-CPU ones included, since
//! Linux 5.14) copies the value and unlinks the entry under the bucket lock
//! in one command, so the reading it returns is the entry's last.

use std::os::fd::{AsRawFd, BorrowedFd};

use lachesis_abi::{EntryKey, FlowCounters, FlowValue};

use crate::drain::{fold_cpus, DrainBuffer, FlowsLayout};
use crate::error::Error;

/// An entry whose lookup-and-delete failed for another reason than "no
/// such entry". The entry was neither read nor deleted (the command is
/// atomic): it keeps counting and a later drain or delete reads it.
#[derive(Debug)]
pub struct FailedDelete {
    /// The entry asked for.
    pub key: EntryKey,
    /// Why the kernel refused.
    pub error: Error,
}

/// Deletes the entries `keys` from a `flows` map of `layout`, leaving in
/// `buf.entries` the final reading of each one that existed (a per-CPU
/// map's slots folded like a drain's). An entry that does not exist yields
/// nothing — a CPU's sub-entry asked of a map keyed by the flow key alone
/// included. A failure on one entry does not stop the others: every reading
/// taken is returned, since its entry no longer exists.
pub(crate) fn lookup_and_delete(
    map: BorrowedFd<'_>,
    layout: FlowsLayout,
    keys: &[EntryKey],
    buf: &mut DrainBuffer,
) -> Vec<FailedDelete> {
    buf.entries.clear();
    buf.calls = 0;
    let mut failed = Vec::new();
    // The drain's value scratch (taken out so the readings can be pushed
    // meanwhile): `slots` counters, or one (flow key, CPU) value.
    let mut values = std::mem::take(&mut buf.values);
    values.resize(layout.slots(), FlowCounters::default());
    let mut value = FlowValue::default();
    for entry in keys {
        let (key_ptr, value_ptr): (*const std::ffi::c_void, *mut std::ffi::c_void) = match layout {
            FlowsLayout::ByCpu => (
                std::ptr::from_ref(entry).cast(),
                std::ptr::from_mut(&mut value).cast(),
            ),
            FlowsLayout::PerCpu { .. } | FlowsLayout::Shared => {
                if !entry.is_folded() {
                    continue;
                }
                (
                    std::ptr::from_ref(&entry.key).cast(),
                    values.as_mut_ptr().cast(),
                )
            }
        };
        // SAFETY: the key points at one key of the map's key size (a
        // 20-byte EntryKey for the (flow key, CPU) map, its 18-byte FlowKey
        // otherwise) and the value at what the kernel copies out: one
        // 56-byte FlowValue, or `slots` 32-byte FlowCounters (the value
        // size, rounded to 8, times the possible CPUs for a per-CPU map,
        // once for a shared one). Both outlive the call.
        let ret = unsafe {
            libbpf_sys::bpf_map_lookup_and_delete_elem(map.as_raw_fd(), key_ptr, value_ptr)
        };
        buf.calls += 1;
        if ret == 0 {
            let reading = match layout {
                FlowsLayout::ByCpu => value.counters,
                FlowsLayout::PerCpu { .. } | FlowsLayout::Shared => fold_cpus(&values),
            };
            buf.entries.push((*entry, reading));
        } else if ret != -libc::ENOENT {
            failed.push(FailedDelete {
                key: *entry,
                error: Error::errno("lookup-and-delete of a flows entry", ret),
            });
        }
    }
    buf.values = values;
    failed
}
