//! Boots a kernel under qemu (software emulation) with an initramfs that
//! holds this test binary, and reads what the guest prints on its serial
//! console. Host side of `tests/kernel/debian12_kernel/mod.rs`.
//!
//! Everything is the run's own: a fresh temporary directory for the
//! initramfs, one qemu child killed by its PID (through `Child::kill`) when
//! it overruns or the test panics, nothing else touched.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Where `scripts/setup-qemu` unpacks Debian 12's kernel.
pub const KERNEL_CACHE: &str = "/var/cache/lachesis-test/debian12-kernel/current";
/// The emulator (Debian's qemu-system-x86).
pub const QEMU: &str = "qemu-system-x86_64";
/// The guest's shell, `insmod` and `ip` (Debian's busybox-static).
pub const BUSYBOX: &str = "/bin/busybox";
/// iproute2's `tc` (busybox's cannot add an `ingress` qdisc).
pub const TC: &str = "/usr/sbin/tc";

const SETUP_HINT: &str = "run `bash scripts/setup-qemu` (or `make test`, which runs it) as root";

/// A kernel and the modules the guest loads before the tests.
#[derive(Debug)]
pub struct Kernel {
    /// `uname -r` of the kernel.
    pub release: String,
    /// What package it came from (`Package:` and `Version:` lines).
    pub package: String,
    pub vmlinuz: PathBuf,
    pub modules: Vec<PathBuf>,
}

impl Kernel {
    /// Debian 12's kernel as `scripts/setup-qemu` left it; panics, naming
    /// the fix, when it is not there (the test never skips).
    pub fn debian12() -> Kernel {
        let dir = std::env::var_os("LACHESIS_DEBIAN12_KERNEL")
            .map_or_else(|| PathBuf::from(KERNEL_CACHE), PathBuf::from);
        let read = |name: &str| {
            let p = dir.join(name);
            std::fs::read_to_string(&p).unwrap_or_else(|e| {
                panic!(
                    "Debian 12's kernel is not unpacked ({}: {e}); {SETUP_HINT}",
                    p.display()
                )
            })
        };
        let release = read("release").trim().to_owned();
        let package = read("package").trim().replace('\n', ", ");
        let vmlinuz = dir.join("vmlinuz");
        assert!(
            vmlinuz.is_file(),
            "{} is missing; {SETUP_HINT}",
            vmlinuz.display()
        );
        let mut modules: Vec<PathBuf> = std::fs::read_dir(dir.join("modules"))
            .unwrap_or_else(|e| panic!("{}/modules: {e}; {SETUP_HINT}", dir.display()))
            .map(|e| e.expect("list modules").path())
            .filter(|p| p.extension().is_some_and(|x| x == "ko"))
            .collect();
        modules.sort();
        for want in ["veth.ko", "sch_ingress.ko", "cls_bpf.ko"] {
            assert!(
                modules
                    .iter()
                    .any(|m| m.file_name().is_some_and(|n| n == want)),
                "{}/modules lacks {want}; {SETUP_HINT}",
                dir.display()
            );
        }
        Kernel {
            release,
            package,
            vmlinuz,
            modules,
        }
    }
}

/// An initramfs in the kernel's `newc` cpio format, built in memory: no
/// staging directory, no `mknod`, no cpio tool.
#[derive(Debug, Default)]
pub struct Initramfs {
    out: Vec<u8>,
    dirs: BTreeSet<String>,
    files: BTreeSet<String>,
    ino: u32,
}

const S_IFDIR: u32 = 0o040_000;
const S_IFREG: u32 = 0o100_000;
const S_IFCHR: u32 = 0o020_000;
const S_IFLNK: u32 = 0o120_000;

impl Initramfs {
    fn entry(&mut self, name: &str, mode: u32, rdev: (u32, u32), data: &[u8]) {
        self.ino += 1;
        let namesize = name.len() + 1;
        let fields = [
            self.ino,
            mode,
            0, // uid
            0, // gid
            1, // nlink
            0, // mtime
            u32::try_from(data.len()).expect("initramfs member under 4 GiB"),
            0, // devmajor
            0, // devminor
            rdev.0,
            rdev.1,
            u32::try_from(namesize).expect("short name"),
            0, // check
        ];
        self.out.extend_from_slice(b"070701");
        for f in fields {
            self.out.extend_from_slice(format!("{f:08x}").as_bytes());
        }
        self.out.extend_from_slice(name.as_bytes());
        self.out.push(0);
        self.pad();
        self.out.extend_from_slice(data);
        self.pad();
    }

    fn pad(&mut self) {
        while !self.out.len().is_multiple_of(4) {
            self.out.push(0);
        }
    }

    /// A directory and its parents (each once).
    pub fn dir(&mut self, path: &str) {
        let path = path.trim_matches('/');
        let mut at = String::new();
        for part in path.split('/').filter(|p| !p.is_empty()) {
            if !at.is_empty() {
                at.push('/');
            }
            at.push_str(part);
            if self.dirs.insert(at.clone()) {
                let name = at.clone();
                self.entry(&name, S_IFDIR | 0o755, (0, 0), &[]);
            }
        }
    }

    /// A regular file at `path` (parents created); a path already added
    /// keeps its first content (two executables share their libraries).
    pub fn file(&mut self, path: &str, mode: u32, data: &[u8]) {
        let path = path.trim_start_matches('/');
        if !self.files.insert(path.to_owned()) {
            return;
        }
        if let Some((parent, _)) = path.rsplit_once('/') {
            self.dir(parent);
        }
        self.entry(path, S_IFREG | mode, (0, 0), data);
    }

    /// A character device node (the console the kernel opens for PID 1).
    pub fn char_dev(&mut self, path: &str, major: u32, minor: u32) {
        let path = path.trim_start_matches('/');
        if let Some((parent, _)) = path.rsplit_once('/') {
            self.dir(parent);
        }
        self.entry(path, S_IFCHR | 0o600, (major, minor), &[]);
    }

    /// A symbolic link at `path` pointing at `target`.
    pub fn symlink(&mut self, path: &str, target: &str) {
        let path = path.trim_start_matches('/');
        if let Some((parent, _)) = path.rsplit_once('/') {
            self.dir(parent);
        }
        if self.files.insert(path.to_owned()) {
            self.entry(path, S_IFLNK | 0o777, (0, 0), target.as_bytes());
        }
    }

    /// A host executable at `path`, with every shared library `ldd` names
    /// for it at the same paths (the guest has no other userland).
    pub fn executable(&mut self, host: &Path, path: &str) {
        let data = std::fs::read(host).unwrap_or_else(|e| panic!("read {}: {e}", host.display()));
        self.file(path, 0o755, &data);
        for lib in shared_libraries(host) {
            let data =
                std::fs::read(&lib).unwrap_or_else(|e| panic!("read {}: {e}", lib.display()));
            self.file(&lib.to_string_lossy(), 0o755, &data);
        }
    }

    /// The archive, with its trailer.
    pub fn finish(mut self) -> Vec<u8> {
        self.entry("TRAILER!!!", 0, (0, 0), &[]);
        self.out
    }
}

/// The libraries (and the dynamic loader) `ldd` resolves for `exe`; none
/// for a static executable.
fn shared_libraries(exe: &Path) -> Vec<PathBuf> {
    let out = Command::new("ldd")
        .arg(exe)
        .output()
        .unwrap_or_else(|e| panic!("ldd {}: {e}", exe.display()));
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        // "not a dynamic executable": nothing to copy.
        return Vec::new();
    }
    let mut libs = BTreeSet::new();
    for line in text.lines() {
        let line = line.trim();
        assert!(
            !line.contains("not found"),
            "ldd {}: {line}: a library the guest needs is missing on the host",
            exe.display()
        );
        let path = match line.split_once("=>") {
            Some((_, rest)) => rest.split_whitespace().next(),
            None => line
                .split_whitespace()
                .next()
                .filter(|p| p.starts_with('/')),
        };
        if let Some(p) = path.filter(|p| p.starts_with('/')) {
            libs.insert(PathBuf::from(p));
        }
    }
    libs.into_iter().collect()
}

/// A unique directory of this run, removed on drop.
#[derive(Debug)]
pub struct RunDir(pub PathBuf);

impl RunDir {
    pub fn new(tag: &str) -> RunDir {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir =
            std::env::temp_dir().join(format!("lachesis-{tag}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
        RunDir(dir)
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The qemu child; killed (by its own PID) and reaped if still running
/// when dropped, so a panicking test leaves no emulator behind.
struct Qemu(Child);

impl Drop for Qemu {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// What a boot printed and how long it took.
#[derive(Debug)]
pub struct Boot {
    /// Serial console output (with `\r` removed).
    pub console: String,
    pub elapsed: Duration,
}

impl Boot {
    /// The last `n` lines of the console, for failure messages.
    pub fn tail(&self, n: usize) -> String {
        let lines: Vec<&str> = self.console.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}

/// Boots `kernel` with `initramfs` under TCG (1 GiB, 2 vCPUs), the console
/// on the first serial port, and waits for the guest to power off (`-no-reboot`
/// turns the guest's reboot into qemu's exit). Panics if qemu is missing or
/// the guest overruns `timeout`.
pub fn boot(kernel: &Kernel, initramfs: &Path, append: &str, timeout: Duration) -> Boot {
    let started = Instant::now();
    let child = Command::new(QEMU)
        .args(["-accel", "tcg", "-m", "1G", "-smp", "2"])
        .args(["-nographic", "-nodefaults", "-no-user-config", "-no-reboot"])
        .args(["-serial", "stdio", "-monitor", "none"])
        .arg("-kernel")
        .arg(&kernel.vmlinuz)
        .arg("-initrd")
        .arg(initramfs)
        .arg("-append")
        .arg(append)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {QEMU}: {e}; {SETUP_HINT}"));
    let mut qemu = Qemu(child);
    let console = Arc::new(Mutex::new(Vec::new()));
    let reader = {
        let console = Arc::clone(&console);
        let mut stdout = qemu.0.stdout.take().expect("piped stdout");
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0 {
                    break;
                }
                console.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        })
    };
    let text =
        |c: &Arc<Mutex<Vec<u8>>>| String::from_utf8_lossy(&c.lock().unwrap()).replace('\r', "");
    let status = loop {
        if let Some(status) = qemu.0.try_wait().expect("wait for qemu") {
            break status;
        }
        if started.elapsed() > timeout {
            let _ = qemu.0.kill();
            let _ = qemu.0.wait();
            let shown = text(&console);
            let tail: Vec<&str> = shown.lines().collect();
            panic!(
                "the guest did not power off within {timeout:?}; console tail:\n{}",
                tail[tail.len().saturating_sub(40)..].join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    reader.join().expect("console reader");
    let mut stderr = String::new();
    if let Some(mut e) = qemu.0.stderr.take() {
        let _ = e.read_to_string(&mut stderr);
    }
    let boot = Boot {
        console: text(&console),
        elapsed: started.elapsed(),
    };
    assert!(
        status.success(),
        "{QEMU} exited with {status}: {}\nconsole tail:\n{}",
        stderr.trim(),
        boot.tail(40)
    );
    boot
}
