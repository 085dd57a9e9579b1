//! Flush and load of the state file (DESIGN §11).
//!
//! Flush: copy under the lock → serialize → write temp → fsync → rotate
//! current to `.bak` → rename temp → fsync the directory. A crash at any
//! point leaves either the current file or the `.bak` readable.
//! Load: current, else `.bak`, else empty; unreadable files are moved to
//! `.quarantine` before anything can overwrite them; a newer schema refuses.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::metrics::{FlushMetrics, FlushPhase, LoadFallback, LoadStats};
use super::rows::write_rows;
use super::schema::{FileDto, Probe, SCHEMA};
use crate::attribution::CommittedPlan;
use crate::book::Book;
use crate::interner::InternerConflict;
use crate::ledger::Ledger;
use crate::tiers::aggregate;

/// Errors of flushing or loading the state file.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The file was written by a newer build; it is left untouched.
    #[error("state file {path} has schema {found}, newer than schema {supported} that this build reads: refusing to start so a rollback does not destroy it")]
    NewerSchema {
        /// The file.
        path: PathBuf,
        /// Its schema.
        found: u32,
        /// The newest schema this build reads.
        supported: u32,
    },
    /// The file exists but could not be read for a reason other than its
    /// content (e.g. permissions): not quarantined, since it may be fine.
    #[error("cannot read state file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// Moving an unreadable file aside failed.
    #[error("cannot move unreadable state file {path} to {to}: {source}")]
    Quarantine {
        /// The unreadable file.
        path: PathBuf,
        /// Where it should have gone.
        to: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// A flush phase failed; the previous current (or `.bak`) file is intact.
    #[error("state flush of {path} failed in phase {phase}: {source}")]
    Flush {
        /// The state file.
        path: PathBuf,
        /// The phase that failed.
        phase: &'static str,
        /// The underlying error.
        source: io::Error,
    },
}

/// Where the state lives: the file and its siblings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatePaths {
    /// The current file.
    pub current: PathBuf,
    /// The previous generation.
    pub backup: PathBuf,
    /// Prefix of the files being written: each flush writes
    /// `<temp>.<pid>.<n>`, created exclusively.
    pub temp: PathBuf,
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s: OsString = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

impl StatePaths {
    /// Paths for a state file at `current`.
    #[must_use]
    pub fn new(current: impl Into<PathBuf>) -> Self {
        let current = current.into();
        StatePaths {
            backup: with_suffix(&current, ".bak"),
            temp: with_suffix(&current, ".tmp"),
            current,
        }
    }
}

/// Timings of one successful flush.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlushReport {
    /// Bytes written.
    pub bytes: usize,
    /// Duration of each phase, in [`FlushPhase::ALL`] order.
    pub phases: [Duration; 7],
    /// Kernel `flows` sub-entries the caller must now delete: those of evictions
    /// this flush made durable (unresolved TTL/capacity evictions, evict
    /// settles). Deleting them makes the next reading a new entry (§9); the
    /// ledger never deletes kernel state itself. A failed flush releases
    /// nothing: they stay pending for the next one.
    pub delete: Vec<lachesis_abi::EntryKey>,
}

impl FlushReport {
    /// How long the ledger lock was held.
    #[must_use]
    pub fn lock_held(&self) -> Duration {
        self.phases[0]
    }

    /// Whole flush.
    #[must_use]
    pub fn total(&self) -> Duration {
        self.phases.iter().sum()
    }
}

/// Encodes a book and plan to the file's bytes (exposed for tests and tools).
pub fn encode(book: &Book, plan: &CommittedPlan) -> Result<Vec<u8>, serde_json::Error> {
    let plan = plan.clone();
    let dto = FileDto::from_book(book, plan);
    let mut out = Vec::with_capacity(256 * (book.rows.len() + 16));
    serde_json::to_writer(&mut out, &dto)?;
    // A serialized struct always ends in `}`: the rows array is appended as
    // its last member.
    out.pop();
    out.extend_from_slice(b",\"rows\":");
    write_rows(&mut out, book);
    out.push(b'}');
    Ok(out)
}

/// A temp file name no other flush (of this or another process) uses,
/// removed again unless it was renamed into place.
struct TempFile {
    path: PathBuf,
    keep: std::cell::Cell<bool>,
}

impl TempFile {
    fn unique(prefix: &Path) -> TempFile {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        TempFile {
            path: with_suffix(prefix, &format!(".{}.{n}", std::process::id())),
            keep: std::cell::Cell::new(false),
        }
    }

    /// `create_new`: never truncates a file someone else is writing. Mode
    /// 0600: the file names every project and server with its traffic and
    /// MACs (billing data); the rename makes it the current file and, one
    /// flush later, the `.bak`, so both end up owner-only.
    fn create(&self) -> io::Result<File> {
        use std::os::unix::fs::OpenOptionsExt as _;
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&self.path)
    }

    fn renamed(&self) {
        self.keep.set(true);
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.keep.get() {
            // Best effort: a leftover temp file is never read by load.
            let _ = fs::remove_file(&self.path);
        }
    }
}

struct Phases<'a> {
    metrics: &'a FlushMetrics,
    path: &'a Path,
    times: [Duration; 7],
}

impl Phases<'_> {
    fn run<T>(
        &mut self,
        phase: FlushPhase,
        f: impl FnOnce() -> io::Result<T>,
    ) -> Result<T, StateError> {
        let start = Instant::now();
        let out = f();
        let took = start.elapsed();
        self.times[phase as usize] = took;
        self.metrics.observe(phase, took);
        out.map_err(|source| {
            self.metrics.fail(phase);
            StateError::Flush {
                path: self.path.to_owned(),
                phase: phase.label(),
                source,
            }
        })
    }
}

/// The state file of one agent: where it lives, and the health of its
/// flushes and loads (rendered beside the ledger's families, DESIGN §10).
/// Share one per file: it serialises the flushes to it.
#[derive(Debug)]
pub struct StateFile {
    paths: StatePaths,
    metrics: FlushMetrics,
    loads: LoadStats,
    /// Held for a whole flush, so flushes never interleave (§11).
    serial: Mutex<()>,
}

impl StateFile {
    /// The state file at `paths`.
    #[must_use]
    pub fn new(paths: StatePaths) -> StateFile {
        StateFile {
            paths,
            metrics: FlushMetrics::default(),
            loads: LoadStats::default(),
            serial: Mutex::new(()),
        }
    }

    /// Where it lives.
    #[must_use]
    pub fn paths(&self) -> &StatePaths {
        &self.paths
    }

    /// Flush-phase timings and failures.
    #[must_use]
    pub fn flush_metrics(&self) -> &FlushMetrics {
        &self.metrics
    }

    /// Load fallbacks and quarantines.
    #[must_use]
    pub fn load_stats(&self) -> &LoadStats {
        &self.loads
    }

    /// Flushes the ledger atomically, with the committed plan of the
    /// attribution in force when the book is copied (taken in the same
    /// critical section: a plan captured earlier could predate a settle).
    pub fn flush(&self, ledger: &Ledger) -> Result<FlushReport, StateError> {
        let paths = &self.paths;
        let mut ph = Phases {
            metrics: &self.metrics,
            path: &paths.current,
            times: [Duration::ZERO; 7],
        };
        // Two flushes interleaving their rotate and rename could leave no
        // current file, or put an older generation over a newer one: the whole
        // flush is one critical section (separate from the ledger lock, which
        // only the copy takes).
        let _serial = self.serial.lock().unwrap_or_else(PoisonError::into_inner);
        // The only lock-held phase: a clone of plain data and two `Arc`s.
        let copy = ph.run(FlushPhase::Copy, || Ok(ledger.copy_for_flush()))?;
        let bytes = ph.run(FlushPhase::Serialize, || {
            encode(&copy.book, copy.attr.plan()).map_err(io::Error::other)
        })?;
        // The exported view is computed from the very copy written, outside the
        // lock, and published only once the file holding it is in place.
        let tiers = aggregate(&copy.book, copy.attr.as_ref());
        let marks = copy.marks;
        drop(copy);
        let temp = TempFile::unique(&paths.temp);
        let file = ph.run(FlushPhase::Write, || {
            let mut f = temp.create()?;
            f.write_all(&bytes)?;
            Ok(f)
        })?;
        ph.run(FlushPhase::Fsync, || file.sync_all())?;
        drop(file);
        ph.run(FlushPhase::Rotate, || {
            match fs::rename(&paths.current, &paths.backup) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
                other => other,
            }
        })?;
        ph.run(FlushPhase::Rename, || {
            fs::rename(&temp.path, &paths.current)
        })?;
        temp.renamed();
        ph.run(FlushPhase::DirFsync, || {
            let dir = match paths.current.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            File::open(dir)?.sync_all()
        })?;
        let delete = ledger.publish_durable(tiers, &marks);
        Ok(FlushReport {
            bytes: bytes.len(),
            phases: ph.times,
            delete,
        })
    }

    /// Reads the state ([`load`]).
    pub fn load(&self) -> Result<Loaded, StateError> {
        load(&self.paths)
    }

    /// Restores a loaded state into `ledger` (boot step 4) and records how
    /// the load went (fallbacks, quarantines). Returns the file's committed
    /// plan: the source must serve its attribution until the boot has
    /// drained, flushed and settled to the fresh plan (§12).
    ///
    /// A load from `.bak` is logged at error level: that file is one flush
    /// older than what scrapes showed, so billing series go down (§11).
    ///
    /// # Errors
    /// [`InternerConflict`] when a tenant id handed out before the restore
    /// means another project in the file; nothing is restored then.
    pub fn restore(
        &self,
        ledger: &Ledger,
        loaded: Loaded,
        now_ns: u64,
    ) -> Result<CommittedPlan, InternerConflict> {
        let fallback = match loaded.source {
            LoadSource::Backup => Some(LoadFallback::Backup),
            LoadSource::Empty if !loaded.quarantined.is_empty() => Some(LoadFallback::Empty),
            LoadSource::Current | LoadSource::Empty => None,
        };
        if fallback == Some(LoadFallback::Backup) {
            tracing::error!(
                quarantined = ?loaded.quarantined,
                "state restored from the .bak file, one flush older than what scrapes \
                 showed: billing series go down by up to one flush interval \
                 (lachesis_state_load_fallbacks_total{{reason=\"backup\"}})"
            );
        }
        self.loads.record(fallback, loaded.quarantined.len() as u64);
        ledger.restore(loaded.book, now_ns)?;
        Ok(loaded.plan)
    }
}

/// Which file a load used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadSource {
    /// The current file.
    Current,
    /// The `.bak` file (the current one was missing or unreadable).
    Backup,
    /// Nothing usable: an empty ledger.
    Empty,
}

/// A loaded state.
#[derive(Debug)]
pub struct Loaded {
    /// The ledger state to restore.
    pub book: Book,
    /// The agent's last committed plan ([`CommittedPlan::none`] when absent):
    /// boot restores the ledger under it before reconciling to a fresh one.
    pub plan: CommittedPlan,
    /// Which file it came from.
    pub source: LoadSource,
    /// The schema of that file.
    pub schema: Option<u32>,
    /// Unreadable files moved aside.
    pub quarantined: Vec<Quarantined>,
}

/// An unreadable file moved aside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quarantined {
    /// Where it was.
    pub from: PathBuf,
    /// Where it is now.
    pub to: PathBuf,
    /// What was wrong with it.
    pub reason: String,
}

enum ReadOutcome {
    Missing,
    Unreadable(String),
    Ok(Box<Book>, CommittedPlan, u32),
}

fn read_one(path: &Path) -> Result<ReadOutcome, StateError> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(ReadOutcome::Missing),
        Err(source) => {
            return Err(StateError::Read {
                path: path.to_owned(),
                source,
            })
        }
    };
    decode_at(path, &bytes)
}

/// What [`load`] makes of one file's bytes (`path` names it in errors).
fn decode_at(path: &Path, bytes: &[u8]) -> Result<ReadOutcome, StateError> {
    let probe: Probe = match serde_json::from_slice(bytes) {
        Ok(p) => p,
        Err(e) => return Ok(ReadOutcome::Unreadable(e.to_string())),
    };
    if probe.schema > SCHEMA {
        return Err(StateError::NewerSchema {
            path: path.to_owned(),
            found: probe.schema,
            supported: SCHEMA,
        });
    }
    if probe.schema == 0 {
        return Ok(ReadOutcome::Unreadable(
            "schema 0 was never written".to_owned(),
        ));
    }
    let dto: FileDto = match serde_json::from_slice(bytes) {
        Ok(d) => d,
        Err(e) => return Ok(ReadOutcome::Unreadable(e.to_string())),
    };
    let schema = dto.schema();
    match dto.into_book() {
        Ok((book, plan)) => Ok(ReadOutcome::Ok(Box::new(book), plan, schema)),
        Err(e) => Ok(ReadOutcome::Unreadable(e.to_string())),
    }
}

/// What [`load`] reads from one state file's bytes, without the file: the
/// book, the committed plan and the file's schema; or why the file is
/// refused (a newer schema) or would be quarantined. For the fuzz targets
/// (`crates/fuzzing`), not for the agent.
#[doc(hidden)]
pub fn decode(bytes: &[u8]) -> Result<(Book, CommittedPlan, u32), String> {
    match decode_at(Path::new("(bytes)"), bytes) {
        Ok(ReadOutcome::Ok(book, plan, schema)) => Ok((*book, plan, schema)),
        Ok(ReadOutcome::Unreadable(reason)) => Err(reason),
        Ok(ReadOutcome::Missing) => Err("missing".to_owned()),
        Err(e) => Err(e.to_string()),
    }
}

/// Moves `path` to `<path>.quarantine` (or `.quarantine.N` if taken).
fn quarantine(path: &Path) -> Result<PathBuf, StateError> {
    let mut to = with_suffix(path, ".quarantine");
    let mut n = 1;
    while to.exists() {
        to = with_suffix(path, &format!(".quarantine.{n}"));
        n += 1;
    }
    fs::rename(path, &to).map_err(|source| StateError::Quarantine {
        path: path.to_owned(),
        to: to.clone(),
        source,
    })?;
    Ok(to)
}

/// Loads the state (§11): current, else `.bak`, else empty. A newer schema
/// in either file is an error and leaves every file as it was.
pub fn load(paths: &StatePaths) -> Result<Loaded, StateError> {
    let mut quarantined = Vec::new();
    for (path, source) in [
        (&paths.current, LoadSource::Current),
        (&paths.backup, LoadSource::Backup),
    ] {
        match read_one(path)? {
            ReadOutcome::Ok(book, plan, schema) => {
                return Ok(Loaded {
                    book: *book,
                    plan,
                    source,
                    schema: Some(schema),
                    quarantined,
                })
            }
            ReadOutcome::Missing => {}
            ReadOutcome::Unreadable(reason) => {
                // Check the other file for a newer schema before moving
                // anything: a refusal must leave every file untouched.
                if source == LoadSource::Current {
                    if let Err(e @ StateError::NewerSchema { .. }) = read_one(&paths.backup) {
                        return Err(e);
                    }
                }
                let to = quarantine(path)?;
                quarantined.push(Quarantined {
                    from: path.clone(),
                    to,
                    reason,
                });
            }
        }
    }
    Ok(Loaded {
        book: Book::default(),
        plan: CommittedPlan::none(),
        source: LoadSource::Empty,
        schema: None,
        quarantined,
    })
}
