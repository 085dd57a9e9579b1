//! One agent per bpffs dir and per state file (issue 19 item 3).
//!
//! Two agents on one bpffs dir would each replace the other's programs
//! (they are ours to both: the same pinned `flows`), and two on one state
//! file would each overwrite the other's flushes. So `lachesis agent` takes
//! an exclusive `flock(2)` on both before anything touches the kernel, and
//! holds them for the life of the process (the kernel releases them when
//! it exits, however it exits: a SIGKILL leaves no stale lock).
//!
//! - **The state file**: a lock file beside it, `<state.path>.lock`
//!   (created 0600, with its holder's pid written in it for whoever looks;
//!   emptied when the holder stops). Taken first: an agent refused here has
//!   touched neither the kernel nor the bpffs dir.
//! - **The bpffs dir** itself: bpffs holds no regular files, but its
//!   directories can be opened and locked like any (measured on 6.18). The
//!   directory is created first if missing (and bpffs mounted at
//!   `/sys/fs/bpf` when nothing is: `lachesis_datapath::ensure_bpffs_dir`,
//!   what the load does first anyway); no program, map or pin is touched
//!   before the lock is held.
//!
//! A lock held elsewhere is an error naming the holder's pid (from
//! `/proc/locks`, which lists every lock with its owner's pid and inode;
//! the lock file's content when that says nothing) and the path. The
//! daemon returns it before boot, so the process exits 1 (README "Exit
//! status": a failure) with one `lachesis: error: …` line.

use std::fs::File;
use std::io::{Read as _, Seek as _, Write as _};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use crate::config::Config;

/// Why the locks could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds one of them.
    #[error(
        "another lachesis agent{} holds {what} {}{}: one agent per bpffs dir and state file; \
         stop it, or give this one its own datapath.bpffs_dir and state.path",
        holder(*.pid),
        .path.display(),
        lock_file(.path, .lock)
    )]
    Held {
        /// "the state file" or "the bpffs dir".
        what: &'static str,
        /// The state file or the bpffs dir.
        path: PathBuf,
        /// The file locked (the lock file, or the bpffs dir itself).
        lock: PathBuf,
        /// The holder, when the kernel or the lock file says.
        pid: Option<u32>,
    },
    /// The lock could not be taken at all.
    #[error("locking {what} {}: {source}", .path.display())]
    Io {
        /// "the state file" or "the bpffs dir".
        what: &'static str,
        /// The file being locked.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The bpffs dir cannot be made ready to lock.
    #[error("preparing the bpffs dir {} to lock it: {source}", .path.display())]
    Bpffs {
        /// The configured bpffs dir.
        path: PathBuf,
        /// Why.
        source: lachesis_datapath::Error,
    },
}

fn lock_file(path: &Path, lock: &Path) -> String {
    if path == lock {
        String::new()
    } else {
        format!(" (lock file {})", lock.display())
    }
}

fn holder(pid: Option<u32>) -> String {
    pid.map_or_else(|| " (pid unknown)".to_owned(), |p| format!(" (pid {p})"))
}

/// Both locks, held until dropped (at the end of the process).
#[derive(Debug)]
pub struct InstanceLock {
    state: File,
    _bpffs: File,
}

impl InstanceLock {
    /// Takes the state file's lock, then the bpffs dir's, without waiting.
    ///
    /// # Errors
    /// [`LockError::Held`] when another process holds either (naming it);
    /// otherwise what made locking impossible.
    pub fn acquire(config: &Config) -> Result<InstanceLock, LockError> {
        let state_path = &config.state.path;
        let state_lock = lock_path(state_path);
        let state = lock_state_file(state_path, &state_lock)?;
        let dir = &config.datapath.bpffs_dir;
        lachesis_datapath::ensure_bpffs_dir(dir).map_err(|source| LockError::Bpffs {
            path: dir.clone(),
            source,
        })?;
        let bpffs = lock_dir(dir)?;
        tracing::info!(
            state_lock = %state_lock.display(),
            bpffs_dir = %dir.display(),
            "instance lock held: the only agent on this bpffs dir and state file"
        );
        Ok(InstanceLock {
            state,
            _bpffs: bpffs,
        })
    }
}

impl Drop for InstanceLock {
    fn drop(&mut self) {
        // Still locked here: no one reads an empty file as a live holder.
        let _ = self.state.set_len(0);
    }
}

/// `<state file>.lock`.
#[must_use]
pub fn lock_path(state: &Path) -> PathBuf {
    let mut name = state.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

const STATE: &str = "the state file";
const BPFFS: &str = "the bpffs dir";

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> LockError + 'a {
    move |source| LockError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

fn lock_state_file(state: &Path, lock: &Path) -> Result<File, LockError> {
    if let Some(parent) = lock.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(io(STATE, lock))?;
    }
    let mut file = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(lock)
        .map_err(io(STATE, lock))?;
    if !try_flock(&file).map_err(io(STATE, lock))? {
        let mut written = String::new();
        let _ = file.read_to_string(&mut written);
        let pid = holder_pid(&file).or_else(|| written.trim().parse().ok());
        return Err(LockError::Held {
            what: STATE,
            path: state.to_path_buf(),
            lock: lock.to_path_buf(),
            pid,
        });
    }
    file.set_len(0).map_err(io(STATE, lock))?;
    file.rewind().map_err(io(STATE, lock))?;
    writeln!(file, "{}", std::process::id()).map_err(io(STATE, lock))?;
    Ok(file)
}

fn lock_dir(dir: &Path) -> Result<File, LockError> {
    let file = File::open(dir).map_err(io(BPFFS, dir))?;
    if !try_flock(&file).map_err(io(BPFFS, dir))? {
        return Err(LockError::Held {
            what: BPFFS,
            path: dir.to_path_buf(),
            lock: dir.to_path_buf(),
            pid: holder_pid(&file),
        });
    }
    Ok(file)
}

/// An exclusive flock without waiting: `false` if another open file
/// (another process, or another open of it in this one) holds it.
fn try_flock(file: &File) -> std::io::Result<bool> {
    // SAFETY: a valid fd owned by `file` for the duration of the call.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}

/// The pid holding a flock on `file`'s inode, from `/proc/locks`.
fn holder_pid(file: &File) -> Option<u32> {
    let meta = file.metadata().ok()?;
    let dev = meta.dev();
    let want = (libc::major(dev), libc::minor(dev), meta.ino());
    let text = std::fs::read_to_string("/proc/locks").ok()?;
    text.lines()
        .filter_map(parse_lock)
        .find(|(_, id)| *id == want)
        .map(|(pid, _)| pid)
}

/// One granted flock line of `/proc/locks`: (pid, (major, minor, inode)).
/// `1: FLOCK  ADVISORY  WRITE 20885 00:27:27633 0 EOF` (major and minor
/// in hex); a waiter's line (`1: -> FLOCK …`) and other kinds are skipped,
/// as is pid 0 (a holder outside this pid namespace).
fn parse_lock(line: &str) -> Option<(u32, (u32, u32, u64))> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.get(1) != Some(&"FLOCK") {
        return None;
    }
    let pid: u32 = f.get(4)?.parse().ok().filter(|p| *p != 0)?;
    let mut id = f.get(5)?.split(':');
    let major = u32::from_str_radix(id.next()?, 16).ok()?;
    let minor = u32::from_str_radix(id.next()?, 16).ok()?;
    let inode = id.next()?.parse().ok()?;
    Some((pid, (major, minor, inode)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_locks_lines() {
        assert_eq!(
            parse_lock("1: FLOCK  ADVISORY  WRITE 20885 00:27:27633 0 EOF"),
            Some((20885, (0, 0x27, 27633)))
        );
        assert_eq!(
            parse_lock("3: FLOCK  ADVISORY  WRITE 7 fe:01:5374005 0 EOF"),
            Some((7, (0xfe, 1, 5_374_005)))
        );
        assert_eq!(
            parse_lock("1: -> FLOCK  ADVISORY  WRITE 9 00:27:27633 0 EOF"),
            None
        );
        assert_eq!(
            parse_lock("2: POSIX  ADVISORY  WRITE 9 00:27:27633 0 EOF"),
            None
        );
        assert_eq!(
            parse_lock("1: FLOCK  ADVISORY  WRITE 0 00:27:27633 0 EOF"),
            None
        );
    }

    #[test]
    fn lock_file_is_beside_the_state_file() {
        assert_eq!(
            lock_path(Path::new("/var/lib/lachesis/state.json")),
            Path::new("/var/lib/lachesis/state.json.lock")
        );
    }

    /// A second open of the same lock file (as a second process would
    /// open it) is refused, naming this process; once the first is
    /// dropped the lock is free and the file empty.
    #[test]
    fn a_held_state_lock_names_its_holder() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("sub/state.json");
        let lock = lock_path(&state);
        let first = lock_state_file(&state, &lock).unwrap();
        let written = std::fs::read_to_string(&lock).unwrap();
        assert_eq!(written.trim(), std::process::id().to_string());
        let err = lock_state_file(&state, &lock).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains(&format!("(pid {})", std::process::id()))
                && text.contains(&state.display().to_string()),
            "{text}"
        );
        assert!(matches!(err, LockError::Held { what: STATE, .. }));
        drop(first);
        let again = lock_state_file(&state, &lock).unwrap();
        drop(again);
    }

    #[test]
    fn a_held_directory_lock_names_its_holder() {
        let dir = tempfile::tempdir().unwrap();
        let _first = lock_dir(dir.path()).unwrap();
        let err = lock_dir(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains(&format!("(pid {})", std::process::id())) && err.contains("the bpffs dir"),
            "{err}"
        );
    }
}
