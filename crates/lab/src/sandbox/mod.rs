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
//! - a seccomp filter for `SystemCallFilter=` (an allow list, anything else
//!   kills the process, as systemd does), `SystemCallArchitectures=native`,
//!   `RestrictAddressFamilies=`, `RestrictNamespaces=yes` and
//!   `LockPersonality=`;
//! - the kernel's memory-deny-write-execute (`PR_SET_MDWE`) for
//!   `MemoryDenyWriteExecute=`.
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
    mdwe: bool,
    filter: Vec<libc::sock_filter>,
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
        let plan = Plan {
            mounts: mounts::plan(&directives, state_dir, &mountinfo(&mounts))?,
            mdwe: directives.memory_deny_write_execute,
            filter,
        };
        Ok(Sandbox {
            plan: Arc::new(plan),
            directives,
        })
    }

    /// Makes `cmd` enter the sandbox between fork and exec. Run it as root
    /// (with `CAP_SYS_ADMIN`): the capabilities are the wrapper's business
    /// (`setpriv`), after the sandbox is in place.
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

impl Plan {
    /// Applies the plan to the calling (forked) process.
    fn enter(&self) -> io::Result<()> {
        // SAFETY: between fork and exec, as `apply` requires; the other
        // calls take constants and a program that lives as long as `self`.
        unsafe {
            self.mounts.apply()?;
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
