//! The kernel seam of the ledger owner: what it reads from and deletes in
//! the `flows` map, the binding it deletes for the ghost sweep, and the
//! retired maps boot drains once (DESIGN §4.4, §4.6, §9).

use std::error::Error as StdError;
use std::sync::Arc;

use lachesis_abi::{EntryKey, FlowCounters, Mac};
use lachesis_datapath::{Datapath, DrainBuffer, RetiredFlows, Stats};

/// A kernel call failed.
pub type KernelError = Box<dyn StdError + Send + Sync>;

/// One reading per entry, per-CPU slots folded.
pub type Readings = Vec<(EntryKey, FlowCounters)>;

/// Where the owner's ledger steps stand, reported to
/// [`FlowKernel::observe`] (tests record them beside the kernel calls).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A drain was applied (`entries` readings).
    Applied {
        /// Readings applied.
        entries: usize,
    },
    /// A retired map's last drain was applied.
    AppliedRetired,
    /// Final readings of deleted entries were applied.
    AppliedFinal {
        /// Readings applied.
        entries: usize,
    },
    /// A state flush succeeded, releasing `released` kernel entries.
    Flushed {
        /// Entries the flush handed out for deletion.
        released: usize,
    },
    /// One settle ran (`evict` or `rebase`).
    Settled(&'static str),
    /// The attribution was swapped (inside the last settle, or alone).
    Swapped,
    /// Userspace ghost bindings dropped (with the evict's swap).
    GhostsForgotten(usize),
}

/// The `flows` side of the datapath, as the ledger owner uses it.
/// Consumer-owned: the shared [`Datapath`] is the real one, tests use a fake that
/// counts between reads.
pub trait FlowKernel: Send + 'static {
    /// Reads every live `flows` entry into `buf.entries` (never clears).
    fn drain(&mut self, buf: &mut DrainBuffer) -> Result<(), KernelError>;
    /// The kernel `stats` slots (cumulative).
    fn stats(&mut self) -> Result<Stats, KernelError>;
    /// Deletes the sub-entries `keys` with lookup-and-delete, leaving their
    /// final readings in `buf.entries`; returns how many the kernel refused
    /// (those entries are untouched and keep counting).
    fn lookup_and_delete(&mut self, keys: &[EntryKey], buf: &mut DrainBuffer) -> usize;
    /// Deletes the `endpoints` entry of `mac` (the ghost sweep's first step).
    fn delete_binding(&mut self, mac: Mac) -> Result<(), KernelError>;
    /// `max_entries` of `flows`.
    fn flows_capacity(&self) -> u32;
    /// The clock the kernel stamps entries with, in nanoseconds.
    fn now_ns(&self) -> u64;
    /// Told each ledger step the owner takes, in order. The real kernel
    /// ignores it; the test kernel records it beside its own calls.
    fn observe(&mut self, _step: Step) {}
}

/// A retired `flows` map from an earlier instance (DESIGN §4.4): drained
/// once at boot, before the live map, then removed once that drain is in
/// the state file.
pub trait RetiredMap: Send + 'static {
    /// Reads every entry.
    fn drain(&mut self, buf: &mut DrainBuffer) -> Result<(), KernelError>;
    /// Unpins it.
    fn remove(self) -> Result<(), KernelError>;
}

impl RetiredMap for RetiredFlows {
    fn drain(&mut self, buf: &mut DrainBuffer) -> Result<(), KernelError> {
        RetiredFlows::drain(self, buf).map_err(Into::into)
    }

    fn remove(self) -> Result<(), KernelError> {
        RetiredFlows::remove(self).map_err(Into::into)
    }
}

impl FlowKernel for Arc<Datapath> {
    fn drain(&mut self, buf: &mut DrainBuffer) -> Result<(), KernelError> {
        Datapath::drain(self.as_ref(), buf).map_err(Into::into)
    }

    fn stats(&mut self) -> Result<Stats, KernelError> {
        Datapath::stats(self.as_ref()).map_err(Into::into)
    }

    fn lookup_and_delete(&mut self, keys: &[EntryKey], buf: &mut DrainBuffer) -> usize {
        let failed = self.lookup_and_delete_flows(keys, buf);
        for f in &failed {
            tracing::warn!(key = ?f.key, error = %f.error, "flows lookup-and-delete refused; the entry keeps counting");
        }
        failed.len()
    }

    fn delete_binding(&mut self, mac: Mac) -> Result<(), KernelError> {
        self.delete_endpoint(mac).map(drop).map_err(Into::into)
    }

    fn flows_capacity(&self) -> u32 {
        self.flows_max_entries()
    }

    fn now_ns(&self) -> u64 {
        monotonic_ns()
    }
}

/// `CLOCK_MONOTONIC`, the clock `bpf_ktime_get_ns` stamps entries with.
#[must_use]
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &raw mut ts) };
    u64::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(ts.tv_nsec).unwrap_or(0)
}
