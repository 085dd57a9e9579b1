//! The mount namespace: the read-only, writable, hidden and private parts
//! of the file system the unit's directives ask for.

use std::ffi::{CStr, CString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::failed;
use super::unit::Directives;

/// One line of `/proc/self/mountinfo`: the mount point and its per-mount
/// flags (`MS_*`), octal escapes decoded.
#[must_use]
pub fn mountinfo(text: &str) -> Vec<(PathBuf, libc::c_ulong)> {
    text.lines()
        .filter_map(|l| {
            let mut w = l.split(' ');
            let point = w.nth(4)?;
            let options = w.next()?;
            let mut flags = 0;
            for o in options.split(',') {
                flags |= match o {
                    "ro" => libc::MS_RDONLY,
                    "nosuid" => libc::MS_NOSUID,
                    "nodev" => libc::MS_NODEV,
                    "noexec" => libc::MS_NOEXEC,
                    "noatime" => libc::MS_NOATIME,
                    "nodiratime" => libc::MS_NODIRATIME,
                    "relatime" => libc::MS_RELATIME,
                    "strictatime" => libc::MS_STRICTATIME,
                    "nosymfollow" => libc::MS_NOSYMFOLLOW,
                    _ => 0,
                };
            }
            Some((PathBuf::from(unescape(point)), flags))
        })
        .collect()
}

fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[i], octal) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What `ProtectKernelTunables=` makes read-only under /proc (beside
/// /sys), as systemd lists them.
const TUNABLES: [&str; 9] = [
    "/proc/acpi",
    "/proc/apm",
    "/proc/asound",
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
    "/proc/latency_stats",
];

/// The host's device nodes a private /dev keeps (`PrivateDevices=`), each
/// held by a descriptor of this number plus its index while /dev is
/// replaced.
const DEVICES: [(&CStr, &CStr); 6] = [
    (c"/dev/null", c"/proc/self/fd/1000"),
    (c"/dev/zero", c"/proc/self/fd/1001"),
    (c"/dev/full", c"/proc/self/fd/1002"),
    (c"/dev/random", c"/proc/self/fd/1003"),
    (c"/dev/urandom", c"/proc/self/fd/1004"),
    (c"/dev/tty", c"/proc/self/fd/1005"),
];
const DEVICE_FD: i32 = 1000;

/// API file systems `ProtectSystem=strict` leaves alone.
const API_FS: [&str; 3] = ["/dev", "/proc", "/sys"];

/// The mounts one child makes, prepared in the parent.
#[derive(Debug)]
pub(super) struct Mounts {
    /// Bound onto themselves (each a mount of its own) before the rest
    /// turns read-only.
    writable: Vec<CString>,
    /// Remounted read-only, keeping their other flags.
    read_only: Vec<(CString, libc::c_ulong)>,
    /// Bound onto themselves, then read-only (`/proc/sys`, …).
    read_only_binds: Vec<CString>,
    /// `(where, flags, options)` of a new tmpfs.
    tmpfs: Vec<(CString, libc::c_ulong, CString)>,
    /// A `/dev` of its own (`PrivateDevices=`).
    private_devices: bool,
}

fn cstring(p: &Path) -> Result<CString, String> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| format!("{}: a NUL in the path", p.display()))
}

fn under(p: &Path, dirs: &[PathBuf]) -> bool {
    dirs.iter().any(|d| p.starts_with(d))
}

/// The mounts of `d` on this machine's `mounts` ([`mountinfo`]),
/// `state_dir` standing for the unit's `StateDirectory=`.
pub(super) fn plan(
    d: &Directives,
    state_dir: &Path,
    mounts: &[(PathBuf, libc::c_ulong)],
) -> Result<Mounts, String> {
    let mut writable = d.read_write_paths.clone();
    if d.state_directory {
        writable.push(state_dir.to_owned());
    }
    let mut hidden = Vec::new();
    let mut tmpfs = Vec::new();
    let fresh = |p: &str, flags, options: &str| {
        (
            CString::new(p).expect("no NUL"),
            flags,
            CString::new(options).expect("no NUL"),
        )
    };
    if d.private_tmp {
        for p in ["/tmp", "/var/tmp"] {
            if Path::new(p).is_dir() {
                hidden.push(PathBuf::from(p));
                tmpfs.push(fresh(p, libc::MS_NOSUID | libc::MS_NODEV, "mode=1777"));
            }
        }
    }
    if d.protect_home {
        for p in ["/home", "/root", "/run/user"] {
            if Path::new(p).is_dir() {
                hidden.push(PathBuf::from(p));
                let flags = libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
                tmpfs.push(fresh(p, flags, "mode=000"));
            }
        }
    }
    for w in &writable {
        if under(w, &hidden) {
            return Err(format!(
                "{}: writable, but under a directory the sandbox hides",
                w.display()
            ));
        }
        if !w.is_dir() {
            return Err(format!("{}: writable, but no such directory", w.display()));
        }
    }
    let mut read_only = Vec::new();
    let mut api: Vec<PathBuf> = API_FS.iter().map(PathBuf::from).collect();
    if d.protect_kernel_tunables {
        // /sys read-only too (the writable paths under it excepted).
        api.retain(|p| p != Path::new("/sys"));
    }
    if d.private_devices {
        // A new /dev hides the host's mounts under it.
        hidden.push(PathBuf::from("/dev"));
    }
    let sys_only = |p: &Path| p.starts_with("/sys");
    for (point, flags) in mounts {
        if under(point, &api) || under(point, &writable) || under(point, &hidden) {
            continue;
        }
        if d.protect_system_strict || (d.protect_kernel_tunables && sys_only(point)) {
            read_only.push((cstring(point)?, *flags));
        }
    }
    let mut read_only_binds = Vec::new();
    if d.protect_kernel_tunables {
        for p in TUNABLES {
            if Path::new(p).exists() {
                read_only_binds.push(CString::new(p).expect("no NUL"));
            }
        }
    }
    Ok(Mounts {
        writable: writable
            .iter()
            .map(|p| cstring(p))
            .collect::<Result<_, _>>()?,
        read_only,
        read_only_binds,
        tmpfs,
        private_devices: d.private_devices,
    })
}

impl Mounts {
    /// Makes the calling (forked) process a mount namespace of its own and
    /// the mounts in it.
    ///
    /// # Safety
    /// Between fork and exec: only system calls on memory prepared before
    /// the fork.
    pub(super) unsafe fn apply(&self) -> io::Result<()> {
        let root = c"/";
        // SAFETY: each call below is given NUL-terminated strings that
        // live as long as `self`; none keeps a pointer.
        unsafe {
            if libc::unshare(libc::CLONE_NEWNS) != 0 {
                return Err(failed(b"unshare(CLONE_NEWNS)", c""));
            }
            let none = std::ptr::null();
            if libc::mount(
                none,
                root.as_ptr(),
                none,
                libc::MS_REC | libc::MS_SLAVE,
                none.cast(),
            ) != 0
            {
                return Err(failed(b"make slave", root));
            }
            for w in &self.writable {
                let flags = libc::MS_BIND | libc::MS_REC;
                if libc::mount(w.as_ptr(), w.as_ptr(), none, flags, none.cast()) != 0 {
                    return Err(failed(b"bind", w));
                }
            }
            for (point, kept) in &self.read_only {
                let flags = libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | kept;
                if libc::mount(none, point.as_ptr(), none, flags, none.cast()) != 0 {
                    return Err(failed(b"remount read-only", point));
                }
            }
            for p in &self.read_only_binds {
                let kept = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
                let ro = libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY;
                if libc::mount(
                    p.as_ptr(),
                    p.as_ptr(),
                    none,
                    libc::MS_BIND | libc::MS_REC,
                    none.cast(),
                ) != 0
                    || libc::mount(none, p.as_ptr(), none, ro | kept, none.cast()) != 0
                {
                    return Err(failed(b"bind read-only", p));
                }
            }
            if self.private_devices {
                private_dev()?;
            }
            for (point, flags, options) in &self.tmpfs {
                let fs = c"tmpfs";
                if libc::mount(
                    fs.as_ptr(),
                    point.as_ptr(),
                    fs.as_ptr(),
                    *flags,
                    options.as_ptr().cast(),
                ) != 0
                {
                    return Err(failed(b"mount tmpfs on", point));
                }
            }
        }
        Ok(())
    }
}

/// Replaces /dev with a tmpfs holding only the pseudo-devices (null,
/// zero, full, random, urandom, tty), a new devpts instance, a /dev/shm
/// and the usual links, as systemd's `PrivateDevices=` does.
///
/// # Safety
/// Between fork and exec, as [`Mounts::apply`].
unsafe fn private_dev() -> io::Result<()> {
    let none = std::ptr::null();
    // SAFETY: NUL-terminated constants; the descriptors are our own.
    unsafe {
        for (i, (host, _)) in (0..).zip(DEVICES) {
            let fd = libc::open(host.as_ptr(), libc::O_PATH | libc::O_CLOEXEC);
            if fd < 0 || libc::dup3(fd, DEVICE_FD + i, libc::O_CLOEXEC) < 0 {
                return Err(failed(b"open", host));
            }
            libc::close(fd);
        }
        let dev = c"/dev";
        let fs = c"tmpfs";
        let flags = libc::MS_NOSUID | libc::MS_NOEXEC;
        if libc::mount(
            fs.as_ptr(),
            dev.as_ptr(),
            fs.as_ptr(),
            flags,
            c"mode=755".as_ptr().cast(),
        ) != 0
        {
            return Err(failed(b"mount tmpfs on", dev));
        }
        for (i, (node, held)) in (0..).zip(DEVICES) {
            let fd = libc::open(
                node.as_ptr(),
                libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                0o666,
            );
            if fd < 0 {
                return Err(failed(b"create", node));
            }
            libc::close(fd);
            if libc::mount(
                held.as_ptr(),
                node.as_ptr(),
                none,
                libc::MS_BIND,
                none.cast(),
            ) != 0
            {
                return Err(failed(b"bind", node));
            }
            libc::close(DEVICE_FD + i);
        }
        for d in [c"/dev/pts", c"/dev/shm"] {
            if libc::mkdir(d.as_ptr(), 0o755) != 0 {
                return Err(failed(b"mkdir", d));
            }
        }
        let pts = c"/dev/pts";
        let options = c"newinstance,ptmxmode=0666,mode=620";
        if libc::mount(
            c"devpts".as_ptr(),
            pts.as_ptr(),
            c"devpts".as_ptr(),
            flags,
            options.as_ptr().cast(),
        ) != 0
        {
            return Err(failed(b"mount devpts on", pts));
        }
        let shm = c"/dev/shm";
        if libc::mount(
            fs.as_ptr(),
            shm.as_ptr(),
            fs.as_ptr(),
            flags | libc::MS_NODEV,
            c"mode=1777".as_ptr().cast(),
        ) != 0
        {
            return Err(failed(b"mount tmpfs on", shm));
        }
        for (target, link) in [
            (c"pts/ptmx", c"/dev/ptmx"),
            (c"/proc/self/fd", c"/dev/fd"),
            (c"/proc/self/fd/0", c"/dev/stdin"),
            (c"/proc/self/fd/1", c"/dev/stdout"),
            (c"/proc/self/fd/2", c"/dev/stderr"),
        ] {
            if libc::symlink(target.as_ptr(), link.as_ptr()) != 0 {
                return Err(failed(b"symlink", link));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const UNIT: &str = include_str!("../../../../deploy/systemd/lachesis.service");

    #[test]
    fn mountinfo_gives_points_and_their_flags() {
        let text = "22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda rw\n\
            41 22 0:38 / /sys/fs/bpf rw,nosuid,nodev,noexec,relatime shared:2 - bpf bpf rw\n\
            99 22 0:50 / /mnt/a\\040b ro,nosuid - tmpfs tmpfs rw\n";
        let got = mountinfo(text);
        assert_eq!(got[0], (PathBuf::from("/"), libc::MS_RELATIME));
        let bpf = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC | libc::MS_RELATIME;
        assert_eq!(got[1], (PathBuf::from("/sys/fs/bpf"), bpf));
        assert_eq!(
            got[2],
            (PathBuf::from("/mnt/a b"), libc::MS_RDONLY | libc::MS_NOSUID)
        );
    }

    #[test]
    fn writable_paths_stay_off_the_read_only_list_and_hidden_ones_are_refused() {
        let d = Directives::parse(UNIT).unwrap();
        let mounts = [
            (PathBuf::from("/"), libc::MS_RELATIME),
            (PathBuf::from("/sys"), libc::MS_NOSUID),
            (PathBuf::from("/sys/fs/bpf"), 0),
            (PathBuf::from("/sys/kernel/tracing"), 0),
            (PathBuf::from("/proc"), 0),
            (PathBuf::from("/dev/shm"), 0),
            (PathBuf::from("/tmp"), 0),
            (PathBuf::from("/boot"), 0),
        ];
        let err = plan(&d, Path::new("/tmp/state"), &mounts).unwrap_err();
        assert_eq!(
            err,
            "/tmp/state: writable, but under a directory the sandbox hides"
        );
        let p = plan(&d, Path::new("/var/lib"), &mounts).unwrap();
        let ro: Vec<(&CStr, libc::c_ulong)> = p
            .read_only
            .iter()
            .map(|(c, f)| (c.as_c_str(), *f))
            .collect();
        // The root, /sys (ProtectKernelTunables) but the bpffs
        // (ReadWritePaths), /boot; not /proc, nor what a private /dev or
        // /tmp replaces.
        assert_eq!(
            ro,
            [
                (c"/", libc::MS_RELATIME),
                (c"/sys", libc::MS_NOSUID),
                (c"/sys/kernel/tracing", 0),
                (c"/boot", 0)
            ]
        );
        assert_eq!(p.writable, [c"/sys/fs/bpf", c"/var/lib"]);
        assert!(p
            .read_only_binds
            .iter()
            .any(|b| b.as_c_str() == c"/proc/sys"));
        assert!(p.private_devices);
        let tmpfs: Vec<&CStr> = p.tmpfs.iter().map(|(c, _, _)| c.as_c_str()).collect();
        assert!(
            tmpfs.contains(&c"/tmp") && tmpfs.contains(&c"/root"),
            "{tmpfs:?}"
        );
    }
}
