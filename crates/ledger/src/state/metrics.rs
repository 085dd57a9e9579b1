//! The state file's health (DESIGN §10 "WAL flush phases and failures and
//! load fallbacks"): flush-phase timings, failure counts, load fallbacks and
//! quarantines. Atomic, so recording them never takes the ledger lock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};

/// The phases of a flush, in the order they run (§11).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushPhase {
    /// Copying the book under the ledger lock (the only lock-held phase).
    Copy,
    /// JSON encoding.
    Serialize,
    /// Writing the temp file.
    Write,
    /// fsync of the temp file.
    Fsync,
    /// Renaming the current file to `.bak`.
    Rotate,
    /// Renaming the temp file to the current name.
    Rename,
    /// fsync of the directory, making both renames durable.
    DirFsync,
}

impl FlushPhase {
    /// Every phase, in order.
    pub const ALL: [FlushPhase; 7] = [
        FlushPhase::Copy,
        FlushPhase::Serialize,
        FlushPhase::Write,
        FlushPhase::Fsync,
        FlushPhase::Rotate,
        FlushPhase::Rename,
        FlushPhase::DirFsync,
    ];

    /// Metric label.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            FlushPhase::Copy => "copy",
            FlushPhase::Serialize => "serialize",
            FlushPhase::Write => "write",
            FlushPhase::Fsync => "fsync",
            FlushPhase::Rotate => "rotate",
            FlushPhase::Rename => "rename",
            FlushPhase::DirFsync => "dir_fsync",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Why a load did not use the current file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadFallback {
    /// The `.bak` file was used.
    Backup,
    /// Nothing readable: started empty (after quarantining what was unreadable).
    Empty,
}

impl LoadFallback {
    /// Metric label.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            LoadFallback::Backup => "backup",
            LoadFallback::Empty => "empty",
        }
    }
}

/// Histograms and failure counters per phase.
#[derive(Debug)]
pub struct FlushMetrics {
    phases: [Histogram; 7],
    failures: [AtomicU64; 7],
}

impl Default for FlushMetrics {
    fn default() -> Self {
        // 100 µs … ~1.6 s: a healthy flush phase is well under 100 ms.
        let h = || Histogram::new(exponential_buckets(0.000_1, 2.0, 15));
        FlushMetrics {
            phases: [h(), h(), h(), h(), h(), h(), h()],
            failures: Default::default(),
        }
    }
}

impl FlushMetrics {
    pub(crate) fn observe(&self, phase: FlushPhase, d: Duration) {
        self.phases[phase.index()].observe(d.as_secs_f64());
    }

    pub(crate) fn fail(&self, phase: FlushPhase) {
        self.failures[phase.index()].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn histogram(&self, phase: FlushPhase) -> &Histogram {
        &self.phases[phase.index()]
    }

    /// Failures recorded for `phase`.
    #[must_use]
    pub fn failures(&self, phase: FlushPhase) -> u64 {
        self.failures[phase.index()].load(Ordering::Relaxed)
    }
}

/// How the loads went: fallbacks and files moved to quarantine.
#[derive(Debug, Default)]
pub struct LoadStats {
    backup: AtomicU64,
    empty: AtomicU64,
    quarantined: AtomicU64,
}

impl LoadStats {
    pub(crate) fn record(&self, fallback: Option<LoadFallback>, quarantined: u64) {
        match fallback {
            Some(LoadFallback::Backup) => self.backup.fetch_add(1, Ordering::Relaxed),
            Some(LoadFallback::Empty) => self.empty.fetch_add(1, Ordering::Relaxed),
            None => 0,
        };
        self.quarantined.fetch_add(quarantined, Ordering::Relaxed);
    }

    /// Restores that used the given fallback.
    #[must_use]
    pub fn fallbacks(&self, reason: LoadFallback) -> u64 {
        match reason {
            LoadFallback::Backup => self.backup.load(Ordering::Relaxed),
            LoadFallback::Empty => self.empty.load(Ordering::Relaxed),
        }
    }

    /// Files moved to quarantine.
    #[must_use]
    pub fn quarantined(&self) -> u64 {
        self.quarantined.load(Ordering::Relaxed)
    }
}
