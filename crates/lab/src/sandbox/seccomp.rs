//! The seccomp filter: systemd's system-call groups, the kernel headers'
//! numbers and the classic-BPF program that allows, refuses or kills.

use std::collections::{BTreeMap, BTreeSet};

/// `#define __NR_name number` lines of a kernel `asm/unistd_64.h`.
#[must_use]
pub fn syscall_numbers(header: &str) -> BTreeMap<String, u32> {
    header
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let (def, name, nr) = (w.next()?, w.next()?, w.next()?);
            let name = name.strip_prefix("__NR_")?;
            (def == "#define").then_some(())?;
            Some((name.to_owned(), nr.parse().ok()?))
        })
        .collect()
}

/// The groups of `systemd-analyze syscall-filter`: each `@group` heading
/// and its members (names and nested `@groups`), comments dropped.
#[must_use]
pub fn syscall_groups(listing: &str) -> BTreeMap<String, Vec<String>> {
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut current = None;
    for line in listing.lines() {
        let word = line.trim();
        if word.is_empty() || word.starts_with('#') {
            continue;
        }
        if line.starts_with('@') {
            groups.entry(word.to_owned()).or_default();
            current = Some(word.to_owned());
        } else if let Some(g) = &current {
            groups
                .get_mut(g)
                .expect("the heading")
                .push(word.to_owned());
        }
    }
    groups
}

/// The numbers `filter` allows (with `@default`, which systemd adds to
/// every allow list; an item `~x` takes `x` away again), groups
/// expanded; names with no number on this architecture (`mmap2`, …) drop
/// out.
///
/// # Errors
/// A group systemd does not have, or a name in none of its groups.
pub fn allowed_numbers(
    filter: &[String],
    groups: &BTreeMap<String, Vec<String>>,
    numbers: &BTreeMap<String, u32>,
) -> Result<BTreeSet<u32>, String> {
    let mut out = BTreeSet::new();
    // systemd starts an allow list with `@default`, then adds and takes
    // away (`~`) in the unit's order.
    for item in std::iter::once("@default").chain(filter.iter().map(String::as_str)) {
        match item.strip_prefix('~') {
            Some(taken) => {
                for nr in expand(taken, groups, numbers)? {
                    out.remove(&nr);
                }
            }
            None => out.extend(expand(item, groups, numbers)?),
        }
    }
    Ok(out)
}

/// The numbers of one name or `@group` (nested groups expanded).
fn expand(
    item: &str,
    groups: &BTreeMap<String, Vec<String>>,
    numbers: &BTreeMap<String, u32>,
) -> Result<BTreeSet<u32>, String> {
    // What systemd knows: `@known` and every group's members.
    let known: BTreeSet<&str> = groups.values().flatten().map(String::as_str).collect();
    let mut todo = vec![item];
    let (mut seen, mut out) = (BTreeSet::new(), BTreeSet::new());
    while let Some(item) = todo.pop() {
        if !seen.insert(item) {
            continue;
        }
        if item.starts_with('@') {
            let members = groups.get(item).ok_or_else(|| {
                format!("{item}: no such group in systemd-analyze syscall-filter")
            })?;
            todo.extend(members.iter().map(String::as_str));
        } else if let Some(nr) = numbers.get(item) {
            out.insert(*nr);
        } else if !known.contains(item) && !groups.is_empty() {
            return Err(format!("{item}: not a system call systemd knows"));
        }
    }
    Ok(out)
}

/// The address family numbers of `RestrictAddressFamilies=` names.
///
/// # Errors
/// A family this module has no number for.
pub fn family_numbers(names: &[String]) -> Result<Vec<u32>, String> {
    names
        .iter()
        .map(|n| {
            let nr = match n.as_str() {
                "AF_UNIX" | "AF_LOCAL" => libc::AF_UNIX,
                "AF_INET" => libc::AF_INET,
                "AF_INET6" => libc::AF_INET6,
                "AF_NETLINK" => libc::AF_NETLINK,
                "AF_PACKET" => libc::AF_PACKET,
                other => return Err(format!("{other}: an address family unknown here")),
            };
            Ok(u32::try_from(nr).expect("a small family"))
        })
        .collect()
}

// Classic BPF for seccomp (linux/filter.h, linux/seccomp.h).
const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const JEQ_K: u16 = 0x05 | 0x10;
const JGE_K: u16 = 0x05 | 0x30;
const JSET_K: u16 = 0x05 | 0x40;
const RET_K: u16 = 0x06;
const RET_ALLOW: u32 = 0x7fff_0000;
const RET_KILL_PROCESS: u32 = 0x8000_0000;
const RET_ERRNO: u32 = 0x0005_0000;
// struct seccomp_data: nr, arch, instruction pointer, args[6].
const DATA_NR: u32 = 0;
const DATA_ARCH: u32 = 4;
const DATA_ARG0_LOW: u32 = 16;
const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
const X32_SYSCALL_BIT: u32 = 0x4000_0000;
const PER_QUERY: u32 = 0xffff_ffff;
#[allow(clippy::cast_sign_loss, reason = "positive flag constants")]
const NAMESPACE_FLAGS: u32 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWCGROUP
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | 0x80/* CLONE_NEWTIME */) as u32;

fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

fn errno(e: i32) -> u32 {
    RET_ERRNO | u32::try_from(e).expect("a positive errno")
}

/// What the seccomp filter enforces.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// The allow list (`None`: every call not refused below is allowed).
    pub allowed: Option<BTreeSet<u32>>,
    /// `socket(2)` families allowed (`None`: all).
    pub families: Option<Vec<u32>>,
    /// `personality(2)` only queries or keeps `PER_LINUX`.
    pub lock_personality: bool,
    /// No new namespaces: `unshare`, `clone` with a namespace flag and
    /// `setns` fail with `EPERM`, `clone3` with `ENOSYS` (so the C library
    /// falls back to `clone`), as systemd does.
    pub restrict_namespaces: bool,
    /// Only this architecture's (x86-64) calls, no x32.
    pub native_only: bool,
}

/// The numbers of the calls the filter looks into.
#[derive(Debug, Clone, Copy)]
#[allow(missing_docs, reason = "each field is the call it names")]
pub struct Calls {
    pub socket: u32,
    pub personality: u32,
    pub unshare: u32,
    pub clone: u32,
    pub clone3: u32,
    pub setns: u32,
}

impl Calls {
    /// From a [`syscall_numbers`] table.
    ///
    /// # Errors
    /// One of them is missing from the table.
    pub fn from(numbers: &BTreeMap<String, u32>) -> Result<Calls, String> {
        let nr = |name: &str| {
            numbers
                .get(name)
                .copied()
                .ok_or_else(|| format!("{name}: no number in the kernel headers"))
        };
        Ok(Calls {
            socket: nr("socket")?,
            personality: nr("personality")?,
            unshare: nr("unshare")?,
            clone: nr("clone")?,
            clone3: nr("clone3")?,
            setns: nr("setns")?,
        })
    }
}

/// The seccomp program for `policy` (x86-64).
#[must_use]
pub fn program(policy: &Policy, calls: &Calls) -> Vec<libc::sock_filter> {
    let mut p = Vec::new();
    if policy.native_only {
        p.push(stmt(LD_W_ABS, DATA_ARCH));
        p.push(jump(JEQ_K, AUDIT_ARCH_X86_64, 1, 0));
        p.push(stmt(RET_K, RET_KILL_PROCESS));
    }
    p.push(stmt(LD_W_ABS, DATA_NR));
    if policy.native_only {
        p.push(jump(JGE_K, X32_SYSCALL_BIT, 0, 1));
        p.push(stmt(RET_K, RET_KILL_PROCESS));
    }
    // Each argument check loads the argument, refuses or reloads the
    // number and goes on to the allow list.
    let reload = stmt(LD_W_ABS, DATA_NR);
    if let Some(families) = &policy.families {
        let n = u8::try_from(families.len()).expect("a few families");
        p.push(jump(JEQ_K, calls.socket, 0, n + 3));
        p.push(stmt(LD_W_ABS, DATA_ARG0_LOW));
        for (i, f) in (0u8..).zip(families) {
            p.push(jump(JEQ_K, *f, n - i, 0));
        }
        p.push(stmt(RET_K, errno(libc::EAFNOSUPPORT)));
        p.push(reload);
    }
    if policy.lock_personality {
        p.push(jump(JEQ_K, calls.personality, 0, 5));
        p.push(stmt(LD_W_ABS, DATA_ARG0_LOW));
        p.push(jump(JEQ_K, PER_QUERY, 2, 0));
        p.push(jump(JEQ_K, 0 /* PER_LINUX */, 1, 0));
        p.push(stmt(RET_K, errno(libc::EPERM)));
        p.push(reload);
    }
    if policy.restrict_namespaces {
        for call in [calls.unshare, calls.clone] {
            p.push(jump(JEQ_K, call, 0, 4));
            p.push(stmt(LD_W_ABS, DATA_ARG0_LOW));
            p.push(jump(JSET_K, NAMESPACE_FLAGS, 0, 1));
            p.push(stmt(RET_K, errno(libc::EPERM)));
            p.push(reload);
        }
        p.push(jump(JEQ_K, calls.setns, 0, 1));
        p.push(stmt(RET_K, errno(libc::EPERM)));
        p.push(jump(JEQ_K, calls.clone3, 0, 1));
        p.push(stmt(RET_K, errno(libc::ENOSYS)));
    }
    match &policy.allowed {
        None => p.push(stmt(RET_K, RET_ALLOW)),
        Some(allowed) => {
            for nr in allowed {
                p.push(jump(JEQ_K, *nr, 0, 1));
                p.push(stmt(RET_K, RET_ALLOW));
            }
            p.push(stmt(RET_K, RET_KILL_PROCESS));
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    const LISTING: &str = "@default\n    # Always\n    exit_group\n    mmap2\n\n\
        @basic-io\n    read\n    write\n\n@system-service\n    # General\n    @basic-io\n    @default\n    \
        ioctl\n\n@known\n    chroot\n    exit_group\n    ioctl\n    mmap2\n    read\n    write\n";

    fn numbers() -> BTreeMap<String, u32> {
        syscall_numbers(
            "#ifndef _ASM_UNISTD_64_H\n#define __NR_read 0\n#define __NR_write 1\n\
             #define __NR_ioctl 16\n#define __NR_chroot 161\n#define __NR_exit_group 231\n",
        )
    }

    #[test]
    fn groups_expand_with_the_default_set_and_unknown_names_are_errors() {
        let groups = syscall_groups(LISTING);
        assert_eq!(
            groups["@system-service"],
            ["@basic-io", "@default", "ioctl"]
        );
        let list = |l: &[&str]| l.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let got = allowed_numbers(&list(&["@system-service"]), &groups, &numbers()).unwrap();
        assert_eq!(got.into_iter().collect::<Vec<_>>(), [0, 1, 16, 231]);
        // `@default` is added to any allow list; `mmap2` has no number here.
        let got = allowed_numbers(&list(&["chroot"]), &groups, &numbers()).unwrap();
        assert_eq!(got.into_iter().collect::<Vec<_>>(), [161, 231]);
        // A later `~` line takes calls away again.
        let got = allowed_numbers(
            &list(&["@system-service", "~@basic-io", "~ioctl"]),
            &groups,
            &numbers(),
        );
        assert_eq!(got.unwrap().into_iter().collect::<Vec<_>>(), [231]);
        let err = allowed_numbers(&list(&["@nope"]), &groups, &numbers()).unwrap_err();
        assert!(err.starts_with("@nope: no such group"), "{err}");
        let err = allowed_numbers(&list(&["bfp"]), &groups, &numbers()).unwrap_err();
        assert_eq!(err, "bfp: not a system call systemd knows");
    }

    /// A classic-BPF interpreter for the instructions [`program`] emits,
    /// run on one `seccomp_data`.
    fn run(prog: &[libc::sock_filter], arch: u32, nr: u32, arg0: u64) -> u32 {
        let word = |off: u32| match off {
            DATA_NR => nr,
            DATA_ARCH => arch,
            DATA_ARG0_LOW => arg0 as u32,
            other => panic!("load at {other}"),
        };
        let (mut pc, mut a) = (0usize, 0u32);
        loop {
            let i = prog[pc];
            let (t, f) = (pc + 1 + usize::from(i.jt), pc + 1 + usize::from(i.jf));
            pc = match i.code {
                LD_W_ABS => {
                    a = word(i.k);
                    pc + 1
                }
                JEQ_K => {
                    if a == i.k {
                        t
                    } else {
                        f
                    }
                }
                JGE_K => {
                    if a >= i.k {
                        t
                    } else {
                        f
                    }
                }
                JSET_K => {
                    if a & i.k != 0 {
                        t
                    } else {
                        f
                    }
                }
                RET_K => return i.k,
                other => panic!("opcode {other:#x}"),
            };
        }
    }

    #[test]
    fn the_filter_allows_refuses_and_kills_as_systemd_does() {
        let nrs = numbers();
        let mut all = nrs.clone();
        for (name, nr) in [
            ("socket", 41),
            ("personality", 135),
            ("unshare", 272),
            ("clone", 56),
            ("clone3", 435),
            ("setns", 308),
        ] {
            all.insert(name.to_owned(), nr);
        }
        let calls = Calls::from(&all).unwrap();
        let policy = Policy {
            allowed: Some([0, 1, 41, 56, 135, 272].into_iter().collect()),
            families: Some(vec![1, 2, 10, 16]),
            lock_personality: true,
            restrict_namespaces: true,
            native_only: true,
        };
        let prog = program(&policy, &calls);
        let x86 = AUDIT_ARCH_X86_64;
        let eperm = errno(libc::EPERM);
        for (arch, nr, arg, want) in [
            (x86, 0, 0, RET_ALLOW),
            (x86, 161, 0, RET_KILL_PROCESS),
            (0x4000_0003, 0, 0, RET_KILL_PROCESS),
            (x86, X32_SYSCALL_BIT, 0, RET_KILL_PROCESS),
            (x86, 41, 2, RET_ALLOW),
            (x86, 41, 16, RET_ALLOW),
            (x86, 41, 17, errno(libc::EAFNOSUPPORT)),
            (x86, 41, 0x1_0000_0011, errno(libc::EAFNOSUPPORT)),
            (x86, 135, 0xffff_ffff, RET_ALLOW),
            (x86, 135, 0, RET_ALLOW),
            (x86, 135, 8, eperm),
            (x86, 272, 0x400, RET_ALLOW),
            (x86, 272, 0x1000_0000, eperm),
            (x86, 56, 0x0001_1200, RET_ALLOW),
            (x86, 56, 0x4000_0000, eperm),
            (x86, 308, 0, eperm),
            (x86, 435, 0, errno(libc::ENOSYS)),
        ] {
            assert_eq!(
                run(&prog, arch, nr, arg),
                want,
                "arch {arch:#x} nr {nr} arg {arg:#x}"
            );
        }
        // Without an allow list every call not refused is allowed.
        let open = program(
            &Policy {
                allowed: None,
                ..policy
            },
            &calls,
        );
        assert_eq!(run(&open, x86, 161, 0), RET_ALLOW);
        assert_eq!(run(&open, x86, 41, 17), errno(libc::EAFNOSUPPORT));
    }
}
