//! bpffs: make sure the pin directory lives on a BPF filesystem.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::error::{Error, Result};

const BPF_FS_MAGIC: i64 = 0xcafe_4a11;
const DEFAULT_MOUNT: &str = "/sys/fs/bpf";

fn is_bpffs(path: &Path) -> Result<bool> {
    let c = CString::new(path.as_os_str().as_bytes()).map_err(|_| Error::Invalid {
        what: "bpffs path",
        detail: format!("{} contains a NUL byte", path.display()),
    })?;
    // SAFETY: statfs is plain old data; all-zero is a valid value.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is NUL-terminated and outlives the call; `st` is live and
    // writable, and statfs writes only into it.
    let rc = unsafe { libc::statfs(c.as_ptr(), &raw mut st) };
    if rc != 0 {
        return Err(Error::io(format!("statfs {}", path.display()))(
            std::io::Error::last_os_error(),
        ));
    }
    #[allow(
        clippy::unnecessary_cast,
        reason = "f_type's width differs between libcs and targets"
    )]
    Ok(st.f_type as i64 == BPF_FS_MAGIC)
}

/// Whether [`ensure_dir`] would succeed for `dir`, changing nothing: `dir`
/// (or its nearest existing ancestor) is on a bpffs, or it lies below
/// `/sys/fs/bpf` where nothing is mounted yet (`ensure_dir` mounts bpffs
/// there). What `lachesis agent --check-config` and the agent's start check
/// before anything touches the kernel.
pub(crate) fn check_dir(dir: &Path) -> Result<()> {
    let mut existing = dir;
    while !existing.exists() {
        match existing.parent() {
            Some(parent) => existing = parent,
            None => break,
        }
    }
    if !existing.is_dir() {
        return Err(Error::Invalid {
            what: "bpffs dir",
            detail: format!("{} is not a directory", existing.display()),
        });
    }
    if is_bpffs(existing)? {
        return Ok(());
    }
    let mount = Path::new(DEFAULT_MOUNT);
    if dir.starts_with(mount) && mount.is_dir() && !is_bpffs(mount)? {
        return Ok(());
    }
    Err(Error::NotBpffs {
        path: dir.to_path_buf(),
    })
}

/// Ensures `dir` exists on a bpffs, mounting bpffs at `/sys/fs/bpf` when the
/// directory is below it and nothing is mounted there yet (DESIGN §4.4).
pub(crate) fn ensure_dir(dir: &Path) -> Result<()> {
    let mount = Path::new(DEFAULT_MOUNT);
    if dir.starts_with(mount) && mount.is_dir() && !is_bpffs(mount)? {
        let src = CString::new("bpf").expect("static");
        let target = CString::new(DEFAULT_MOUNT).expect("static");
        // SAFETY: all pointers are valid C strings; data may be null.
        let rc = unsafe {
            libc::mount(
                src.as_ptr(),
                target.as_ptr(),
                src.as_ptr(),
                0,
                std::ptr::null(),
            )
        };
        if rc != 0 {
            return Err(Error::io("mount bpffs at /sys/fs/bpf")(
                std::io::Error::last_os_error(),
            ));
        }
    }
    std::fs::create_dir_all(dir).map_err(Error::io(format!("create {}", dir.display())))?;
    if !is_bpffs(dir)? {
        return Err(Error::NotBpffs {
            path: dir.to_path_buf(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_off_bpffs_is_refused_and_nothing_is_made() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("lachesis");
        let e = check_dir(&dir).unwrap_err();
        assert!(matches!(e, Error::NotBpffs { .. }), "{e}");
        assert!(!dir.exists(), "the check created {}", dir.display());
        let file = tmp.path().join("file");
        std::fs::write(&file, "").unwrap();
        let e = check_dir(&file.join("below")).unwrap_err();
        assert!(e.to_string().contains("is not a directory"), "{e}");
    }
}
