//! Deleting `flows` entries together with their last reading (DESIGN §9).
//!
//! A drain reads an entry, and a delete issued later removes it: whatever
//! the entry counted in between would never be read. The kernel's
//! `BPF_MAP_LOOKUP_AND_DELETE_ELEM` (hash maps, per-CPU ones included, since
//! Linux 5.14) copies the value and unlinks the entry under the bucket lock
//! in one command, so the reading it returns is the entry's last.

use std::os::fd::{AsRawFd, BorrowedFd};

use lachesis_abi::{FlowCounters, FlowKey};

use crate::drain::{fold_cpus, DrainBuffer};
use crate::error::Error;

/// A key whose lookup-and-delete failed for another reason than "no such
/// entry". The entry was neither read nor deleted (the command is atomic):
/// it keeps counting and a later drain or delete reads it.
#[derive(Debug)]
pub struct FailedDelete {
    /// The key asked for.
    pub key: FlowKey,
    /// Why the kernel refused.
    pub error: Error,
}

/// Deletes the entries of `keys` from a `flows` map (`slots` values per
/// entry: possible CPUs for a per-CPU map, 1 for a shared one), leaving in
/// `buf.entries` the final reading of each one that existed (per-CPU slots
/// folded like a drain: bytes and packets summed, stamps maxed). A key with
/// no entry yields nothing. A failure on one key does not stop the others:
/// every reading taken is returned, since its entry no longer exists.
pub(crate) fn lookup_and_delete(
    map: BorrowedFd<'_>,
    slots: usize,
    keys: &[FlowKey],
    buf: &mut DrainBuffer,
) -> Vec<FailedDelete> {
    buf.entries.clear();
    buf.calls = 0;
    let mut failed = Vec::new();
    // The drain's value scratch, `slots` values of it (taken out so the
    // readings can be pushed meanwhile).
    let mut values = std::mem::take(&mut buf.values);
    values.resize(slots, FlowCounters::default());
    for key in keys {
        // SAFETY: `key` points at one 18-byte FlowKey (the map's key size)
        // and `values` at `slots` 32-byte FlowCounters: the value size
        // (rounded to 8) times the possible CPUs for a per-CPU map, once
        // for a shared one — what the kernel copies out. Both outlive the
        // call.
        let ret = unsafe {
            libbpf_sys::bpf_map_lookup_and_delete_elem(
                map.as_raw_fd(),
                std::ptr::from_ref(key).cast(),
                values.as_mut_ptr().cast(),
            )
        };
        buf.calls += 1;
        if ret == 0 {
            buf.entries.push((*key, fold_cpus(&values)));
        } else if ret != -libc::ENOENT {
            failed.push(FailedDelete {
                key: *key,
                error: Error::errno("lookup-and-delete of a flows entry", ret),
            });
        }
    }
    buf.values = values;
    failed
}
