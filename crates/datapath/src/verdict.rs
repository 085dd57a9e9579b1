//! The verdict cache's generations (DESIGN §4.2, decision record 0011):
//! the one place that invalidates every CPU's cached zone verdicts after a
//! write to a map a verdict reads.
//!
//! `verdict_gen` is an mmapable array with one 64-byte line per possible
//! CPU. The classifier fills a slot under its CPU's generation + 1 and
//! trusts it only while that generation holds; [`VerdictGen::bump`] stores
//! a new generation into every line with release ordering, after the
//! metadata write (a `bpf()` call that has returned), so a program that
//! reads the new generation also reads the new metadata (its load of the
//! generation is ordered: bpf/lachesis.bpf.c, `load_gen`).

use std::os::fd::{AsFd, AsRawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use lachesis_abi::VerdictGenLine;
use libbpf_rs::{MapCore, MapHandle};

use crate::error::{Error, Result};

/// Name of the generations map in the object.
pub(crate) const GEN_MAP: &str = "verdict_gen";
/// Name of the per-CPU slots map (absent from a build without the cache).
#[cfg(feature = "testing")]
pub(crate) const SLOTS_MAP: &str = "verdicts";

const LINE: usize = size_of::<VerdictGenLine>();

/// The mapped generation lines.
#[derive(Debug)]
pub(crate) struct VerdictGen {
    /// The mapping's first word (page-aligned).
    base: NonNull<u64>,
    len: usize,
    lines: usize,
    /// The last generation stored; held while storing, so concurrent bumps
    /// never store a lower one after a higher one.
    last: Mutex<u64>,
}

// SAFETY: the mapping is shared memory that lives until `drop`; every access
// after construction is an atomic on an 8-byte-aligned word inside it.
unsafe impl Send for VerdictGen {}
// SAFETY: as above; `bump` serialises writers with the mutex.
unsafe impl Sync for VerdictGen {}

impl VerdictGen {
    /// Maps `map` (the object's `verdict_gen`, sized to `cpus` lines).
    pub(crate) fn map(map: &MapHandle, cpus: usize) -> Result<VerdictGen> {
        let invalid = |detail: String| Error::Invalid {
            what: "verdict_gen map",
            detail,
        };
        if map.value_size() as usize != LINE || (map.max_entries() as usize) < cpus {
            return Err(invalid(format!(
                "{} lines of {} B, expected at least {cpus} of {LINE} B",
                map.max_entries(),
                map.value_size()
            )));
        }
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .map_err(|_| invalid("the page size is unknown".into()))?;
        let len = (map.max_entries() as usize * LINE).div_ceil(page) * page;
        // SAFETY: a fresh shared mapping of the map's fd, which the kernel
        // backs with the array's own pages (BPF_F_MMAPABLE); nothing else
        // in this process aliases it.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                map.as_fd().as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(Error::io("mmap verdict_gen")(
                std::io::Error::last_os_error(),
            ));
        }
        // mmap returns a page-aligned address, so every line is aligned.
        let base =
            NonNull::new(ptr.cast::<u64>()).ok_or_else(|| invalid("mmap gave null".into()))?;
        let gen = VerdictGen {
            base,
            len,
            lines: map.max_entries() as usize,
            last: Mutex::new(0),
        };
        let start = gen.line(0).load(Ordering::Acquire);
        *gen.last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = start;
        Ok(gen)
    }

    fn line(&self, i: usize) -> &AtomicU64 {
        assert!(i < self.lines, "line {i} of {}", self.lines);
        // SAFETY: line `i` starts `i * 64` bytes into the page-aligned
        // mapping, inside it (checked above), so 8-byte aligned; it is only
        // ever accessed atomically, here and by the programs.
        unsafe { AtomicU64::from_ptr(self.base.as_ptr().add(i * (LINE / 8))) }
    }

    /// Invalidates every CPU's cached verdicts: call after each write to
    /// `endpoints`, `zones_v4`, `zones_v6` or `amphora_ips` has returned.
    pub(crate) fn bump(&self) {
        let mut last = self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *last += 1;
        for i in 0..self.lines {
            self.line(i).store(*last, Ordering::Release);
        }
    }

    /// The generation every line holds (tests).
    #[cfg(feature = "testing")]
    pub(crate) fn current(&self) -> u64 {
        *self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Drop for VerdictGen {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, unmapped once; no reference
        // into it outlives `self`.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}
