//! The agent unit's sandboxing (`deploy/systemd/lachesis.service`) applied
//! to a child process with the kernel mechanisms systemd itself uses, for
//! test machines without systemd as PID 1:
//!
//! - a mount namespace of its own (`PrivateMounts=`) for
//!   `ProtectSystem=strict` (every mount read-only but `/dev`, `/proc`,
//!   `/sys`), `ProtectKernelTunables=` (`/sys`, `/proc/sys` and the like
//!   read-only), `ReadWritePaths=` and `StateDirectory=` (kept writable),
//!   `PrivateTmp=` (a new empty `/tmp` and `/var/tmp`), `ProtectHome=`
//!   (`/home`, `/root`, `/run/user` empty and inaccessible) and
//!   `PrivateDevices=` (a `/dev` of pseudo-devices only; systemd's cgroup
//!   device policy beside it is not reproduced);
//! - a seccomp filter for `SystemCallFilter=` (an allow list, less the
//!   calls of a later `~` line; anything else kills the process, as
//!   systemd does), `SystemCallArchitectures=native`,
//!   `RestrictAddressFamilies=`, `RestrictNamespaces=yes` and
//!   `LockPersonality=`;
//! - the kernel's memory-deny-write-execute (`PR_SET_MDWE`) for
//!   `MemoryDenyWriteExecute=`;
//! - the capability bounding set cut, no ambient or inheritable
//!   capabilities, and no new privileges, for `CapabilityBoundingSet=`,
//!   `AmbientCapabilities=` (empty) and `NoNewPrivileges=`: as systemd
//!   does, before the filter and the exec.
//!
//! The system-call groups are systemd's own (`systemd-analyze
//! syscall-filter`) and their numbers the kernel headers'
//! (`asm/unistd_64.h`), so a group systemd changes is followed here. The
//! unit's other directives (`ProtectKernelModules=`, `ProtectKernelLogs=`,
//! `ProtectControlGroups=`, `ProtectClock=`, `ProtectHostname=`,
//! `RestrictRealtime=`, `RestrictSUIDSGID=`, `UMask=`) are not emulated,
//! though the system-call filter alone kills most of what the first five
//! forbid. [`Directives::parse`] refuses values of the emulated ones that
//! it cannot reproduce, so a unit changed beyond the emulation fails the
//! test instead of being checked more loosely.

mod mounts;
mod seccomp;
mod unit;

use std::ffi::CStr;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

pub use mounts::mountinfo;
pub use seccomp::{
    allowed_numbers, family_numbers, program, syscall_groups, syscall_numbers, Calls, Policy,
};
pub use unit::Directives;

/// The mounts, seccomp program and flags one child applies, all prepared
/// in the parent so the child (between fork and exec) only makes system
/// calls.
#[derive(Debug)]
struct Plan {
    mounts: mounts::Mounts,
    /// Capabilities to drop from the bounding set (`CapabilityBoundingSet=`).
    drop_caps: Vec<libc::c_ulong>,
    no_new_privs: bool,
    mdwe: bool,
    filter: Vec<libc::sock_filter>,
}

/// The kernel headers' capability numbers.
const CAPABILITY_HEADER: &str = "/usr/include/linux/capability.h";

/// The capabilities outside `keep` (names, `CAP_…`), from the kernel
/// headers' numbers and the running kernel's last one.
fn caps_to_drop(keep: &[String]) -> Result<Vec<libc::c_ulong>, String> {
    let header = std::fs::read_to_string(CAPABILITY_HEADER)
        .map_err(|e| format!("{CAPABILITY_HEADER} (package linux-libc-dev): {e}"))?;
    let numbers: std::collections::BTreeMap<&str, libc::c_ulong> = header
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            (w.next()? == "#define").then_some(())?;
            let (name, nr) = (w.next()?, w.next()?);
            Some((name.strip_prefix("CAP_")?, nr.parse().ok()?))
        })
        .collect();
    let last = "/proc/sys/kernel/cap_last_cap";
    let last: libc::c_ulong = std::fs::read_to_string(last)
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .ok_or_else(|| format!("{last}: not readable"))?;
    let mut kept = Vec::new();
    for name in keep {
        let nr = name
            .strip_prefix("CAP_")
            .and_then(|n| numbers.get(n))
            .ok_or_else(|| format!("{name}: no such capability in {CAPABILITY_HEADER}"))?;
        kept.push(*nr);
    }
    Ok((0..=last).filter(|c| !kept.contains(c)).collect())
}

/// The unit's sandbox, ready to apply to commands.
#[derive(Debug, Clone)]
pub struct Sandbox {
    plan: Arc<Plan>,
    /// What it enforces (for the caller's messages).
    pub directives: Directives,
}

/// The kernel headers' system-call numbers.
const HEADER: &str = "/usr/include/x86_64-linux-gnu/asm/unistd_64.h";

impl Sandbox {
    /// The sandbox of the unit file `unit`, `state_dir` standing for its
    /// `StateDirectory=` (`/var/lib/NAME`), built from this machine's
    /// mounts, systemd's system-call groups and the kernel headers.
    ///
    /// # Errors
    /// The unit asks for what [`Directives::parse`] refuses, or a table
    /// (`systemd-analyze`, the headers, `/proc/self/mountinfo`) cannot be
    /// read, each error naming what failed.
    pub fn for_unit(unit: &Path, state_dir: &Path) -> Result<Sandbox, String> {
        if !cfg!(target_arch = "x86_64") {
            return Err("the seccomp emulation knows x86-64 only".to_owned());
        }
        let text = std::fs::read_to_string(unit).map_err(|e| format!("{}: {e}", unit.display()))?;
        let directives =
            Directives::parse(&text).map_err(|e| format!("{}: {e}", unit.display()))?;
        let mut policy = Policy {
            lock_personality: directives.lock_personality,
            restrict_namespaces: directives.restrict_namespaces,
            native_only: directives.native_only,
            ..Policy::default()
        };
        let header = std::fs::read_to_string(HEADER)
            .map_err(|e| format!("{HEADER} (package linux-libc-dev): {e}"))?;
        let numbers = syscall_numbers(&header);
        if let Some(filter) = &directives.system_call_filter {
            let out = Command::new("systemd-analyze")
                .arg("syscall-filter")
                .output()
                .map_err(|e| format!("systemd-analyze syscall-filter (package systemd): {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "systemd-analyze syscall-filter: {}: {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
            let groups = syscall_groups(&String::from_utf8_lossy(&out.stdout));
            policy.allowed = Some(allowed_numbers(filter, &groups, &numbers)?);
        }
        if let Some(families) = &directives.address_families {
            policy.families = Some(family_numbers(families)?);
        }
        let filter = program(&policy, &Calls::from(&numbers)?);
        let mounts = std::fs::read_to_string("/proc/self/mountinfo")
            .map_err(|e| format!("/proc/self/mountinfo: {e}"))?;
        if filter.len() > 4096 {
            // BPF_MAXINSNS
            return Err(format!(
                "a seccomp program of {} instructions",
                filter.len()
            ));
        }
        let drop_caps = match &directives.capability_bounding_set {
            Some(keep) => caps_to_drop(keep)?,
            None => Vec::new(),
        };
        let plan = Plan {
            mounts: mounts::plan(&directives, state_dir, &mountinfo(&mounts))?,
            drop_caps,
            no_new_privs: directives.no_new_privileges,
            mdwe: directives.memory_deny_write_execute,
            filter,
        };
        Ok(Sandbox {
            plan: Arc::new(plan),
            directives,
        })
    }

    /// Makes `cmd` enter the sandbox between fork and exec. Run it as root
    /// (with `CAP_SYS_ADMIN`, for the mounts; the capabilities are cut
    /// after them).
    pub fn apply(&self, cmd: &mut Command) {
        let plan = Arc::clone(&self.plan);
        // SAFETY: `enter` makes only system calls on memory prepared
        // before the fork (no allocation, no lock), as the child of a
        // multi-threaded parent must.
        unsafe {
            cmd.pre_exec(move || plan.enter());
        }
    }
}

/// Writes `what` and `path` to standard error (the child's log) and
/// returns the error of the call that just failed.
fn failed(what: &[u8], path: &CStr) -> io::Error {
    let err = io::Error::last_os_error();
    for part in [b"sandbox: ".as_slice(), what, b" ", path.to_bytes(), b"\n"] {
        // SAFETY: a write of a live buffer; its result does not matter.
        let _ = unsafe { libc::write(2, part.as_ptr().cast(), part.len()) };
    }
    err
}

/// `struct __user_cap_header_struct` and `__user_cap_data_struct`
/// (linux/capability.h, version 3: two data words).
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Empties the calling process's inheritable set.
///
/// # Safety
/// Between fork and exec, as [`Plan::enter`].
unsafe fn clear_inheritable() -> io::Result<()> {
    let mut header = CapHeader {
        version: 0x2008_0522,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: the header and two data words the version-3 calls expect.
    unsafe {
        if libc::syscall(libc::SYS_capget, &raw mut header, data.as_mut_ptr()) != 0 {
            return Err(failed(b"capget", c""));
        }
        for d in &mut data {
            d.inheritable = 0;
        }
        if libc::syscall(libc::SYS_capset, &raw mut header, data.as_ptr()) != 0 {
            return Err(failed(b"capset", c""));
        }
    }
    Ok(())
}

impl Plan {
    /// Applies the plan to the calling (forked) process.
    fn enter(&self) -> io::Result<()> {
        // SAFETY: between fork and exec, as `apply` requires; the other
        // calls take constants and a program that lives as long as `self`.
        unsafe {
            self.mounts.apply()?;
            // Capabilities as systemd leaves them before the exec: the
            // bounding set cut, no ambient or inheritable ones (root's
            // exec then gets exactly the bounding set).
            for cap in &self.drop_caps {
                if libc::prctl(libc::PR_CAPBSET_DROP, *cap, 0, 0, 0) != 0 {
                    return Err(failed(b"prctl(PR_CAPBSET_DROP)", c""));
                }
            }
            if !self.drop_caps.is_empty() {
                let clear_all = libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong;
                if libc::prctl(libc::PR_CAP_AMBIENT, clear_all, 0, 0, 0) != 0 {
                    return Err(failed(b"prctl(PR_CAP_AMBIENT_CLEAR_ALL)", c""));
                }
                clear_inheritable()?;
            }
            if self.no_new_privs && libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(failed(b"prctl(PR_SET_NO_NEW_PRIVS)", c""));
            }
            let refuse_exec_gain = 1;
            if self.mdwe && libc::prctl(libc::PR_SET_MDWE, refuse_exec_gain, 0, 0, 0) != 0 {
                return Err(failed(b"prctl(PR_SET_MDWE)", c""));
            }
            let prog = libc::sock_fprog {
                len: u16::try_from(self.filter.len()).unwrap_or(u16::MAX),
                filter: self.filter.as_ptr().cast_mut(),
            };
            let set = libc::SECCOMP_SET_MODE_FILTER;
            if libc::syscall(libc::SYS_seccomp, set, 0, &raw const prog) != 0 {
                return Err(failed(b"seccomp", c""));
            }
        }
        Ok(())
    }
}
