//! Attaching both programs to a tap (DESIGN §4.4): TCX links pinned in
//! bpffs where the kernel has them (≥ 6.6), clsact + cls_bpf at a fixed
//! handle and priority otherwise. Re-attaching always *replaces* atomically,
//! so a restart never stacks a second copy (which would double count) and
//! never leaves a gap (which would lose bytes).

use std::ffi::CStr;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;

use lachesis_abi::Direction;
use libbpf_rs::{AsRawLibbpf, Link, Program, TcHook, TcHookBuilder, TC_EGRESS, TC_INGRESS};

use crate::error::{Error, Result};

/// Legacy cls_bpf filter handle and priority. Fixed, never 0: a filter at
/// priority 0 gets a fresh slot per call and would stack duplicates.
pub const TC_HANDLE: u32 = 0x4c41;
/// See [`TC_HANDLE`].
pub const TC_PRIORITY: u32 = 0x4c41;

/// Kernel names of our programs (`bpf_prog_info.name`).
const PROG_TX: &str = "lachesis_tx";
const PROG_RX: &str = "lachesis_rx";

/// How programs are attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachMode {
    /// TCX if the kernel has it, else cls_bpf.
    Auto,
    /// TCX links (kernel ≥ 6.6), pinned so a later instance can update them.
    Tcx,
    /// clsact qdisc + cls_bpf filters at [`TC_HANDLE`]/[`TC_PRIORITY`].
    Tc,
}

impl AttachMode {
    /// Parses the configuration spelling (`auto`, `tcx`, `tc`).
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "auto" => Ok(AttachMode::Auto),
            "tcx" => Ok(AttachMode::Tcx),
            "tc" => Ok(AttachMode::Tc),
            other => Err(Error::Invalid {
                what: "attach mode",
                detail: format!("{other:?}: expected auto, tcx or tc"),
            }),
        }
    }

    /// The concrete mode on this kernel.
    pub(crate) fn resolve(self) -> Result<AttachMode> {
        let release = kernel_release();
        let has_tcx = kernel_at_least(&release, 6, 6);
        match self {
            AttachMode::Auto if has_tcx => Ok(AttachMode::Tcx),
            AttachMode::Auto => Ok(AttachMode::Tc),
            AttachMode::Tcx if !has_tcx => Err(Error::NoTcx { release }),
            m => Ok(m),
        }
    }
}

fn kernel_release() -> String {
    // SAFETY: utsname is plain old data (arrays of C chars); all-zero is valid.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a live, writable utsname; uname only writes into it.
    if unsafe { libc::uname(&raw mut u) } != 0 {
        return String::new();
    }
    // SAFETY: the kernel NUL-terminates the field.
    unsafe { CStr::from_ptr(u.release.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

fn kernel_at_least(release: &str, major: u32, minor: u32) -> bool {
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty());
    let maj: u32 = parts.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    let min: u32 = parts.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    (maj, min) >= (major, minor)
}

/// Result of attaching one hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachOutcome {
    /// Nothing of ours was there; a new attachment was made.
    Attached,
    /// Ours was there and now runs the new program (atomic swap).
    Replaced,
}

/// One of our programs found attached to an interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// Interface index.
    pub ifindex: u32,
    /// Interface name, if it still resolves.
    pub ifname: Option<String>,
    /// tx = ingress hook, rx = egress hook.
    pub direction: Direction,
    /// TCX link or cls_bpf filter.
    pub mode: AttachMode,
    /// Kernel id of the attached program.
    pub prog_id: u32,
}

/// Resolves an interface name in the current network namespace.
pub fn ifindex(name: &str) -> Result<u32> {
    let c =
        std::ffi::CString::new(name).map_err(|_| Error::NoSuchInterface { name: name.into() })?;
    // SAFETY: valid C string.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        return Err(Error::NoSuchInterface { name: name.into() });
    }
    Ok(idx)
}

/// Name of an interface index, if it exists.
#[must_use]
pub fn ifname(index: u32) -> Option<String> {
    let mut buf = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: buf has IF_NAMESIZE bytes as the call requires.
    let p = unsafe { libc::if_indextoname(index, buf.as_mut_ptr()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: if_indextoname NUL-terminates on success.
    Some(
        unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned(),
    )
}

fn tcx_type(dir: Direction) -> libbpf_sys::bpf_attach_type {
    match dir {
        Direction::Tx => libbpf_sys::BPF_TCX_INGRESS,
        Direction::Rx => libbpf_sys::BPF_TCX_EGRESS,
    }
}

fn prog_name_for(dir: Direction) -> &'static str {
    match dir {
        Direction::Tx => PROG_TX,
        Direction::Rx => PROG_RX,
    }
}

fn prog_name(id: u32) -> Option<String> {
    // SAFETY: plain syscall wrappers; the fd is owned right after.
    let fd = unsafe { libbpf_sys::bpf_prog_get_fd_by_id(id) };
    if fd < 0 {
        return None;
    }
    // SAFETY: `fd` is non-negative, fresh from the kernel and owned by no
    // one else: OwnedFd becomes its only owner and closes it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: bpf_prog_info is plain old data; all-zero is a valid value.
    let mut info: libbpf_sys::bpf_prog_info = unsafe { std::mem::zeroed() };
    let mut len = size_of::<libbpf_sys::bpf_prog_info>() as u32;
    // SAFETY: `info` and `len` are live and writable; `len` is the size of
    // `info`, so the kernel writes no further than the struct.
    let rc =
        unsafe { libbpf_sys::bpf_prog_get_info_by_fd(fd.as_raw_fd(), &raw mut info, &raw mut len) };
    if rc != 0 {
        return None;
    }
    // SAFETY: the kernel NUL-terminates the 16-byte name.
    Some(
        unsafe { CStr::from_ptr(info.name.as_ptr()) }
            .to_string_lossy()
            .into_owned(),
    )
}

/// Programs of ours (by name) attached through TCX at `dir` on `ifindex`:
/// (program id, link id). Link id 0 means attached without a link.
fn tcx_ours(ifindex: u32, dir: Direction) -> Result<Vec<(u32, u32)>> {
    const MAX: usize = 64;
    let mut prog_ids = [0u32; MAX];
    let mut link_ids = [0u32; MAX];
    // SAFETY: zeroed options, sized, with arrays of `count` entries.
    let mut opts: libbpf_sys::bpf_prog_query_opts = unsafe { std::mem::zeroed() };
    opts.sz = size_of::<libbpf_sys::bpf_prog_query_opts>() as _;
    opts.prog_ids = prog_ids.as_mut_ptr();
    opts.link_ids = link_ids.as_mut_ptr();
    opts.__bindgen_anon_1.count = MAX as u32;
    // SAFETY: `opts` is sized and points at two live arrays of `MAX`
    // entries, `count` says so; they outlive the call.
    let rc = unsafe {
        libbpf_sys::bpf_prog_query_opts(ifindex.cast_signed(), tcx_type(dir), &raw mut opts)
    };
    if rc < 0 {
        if -rc == libc::ENODEV || -rc == libc::EINVAL {
            return Ok(Vec::new()); // interface gone, or no TCX on this kernel
        }
        return Err(Error::errno(
            format!("query TCX programs on ifindex {ifindex}"),
            rc,
        ));
    }
    // SAFETY: the kernel wrote `count` into the union.
    let n = (unsafe { opts.__bindgen_anon_1.count } as usize).min(MAX);
    let want = prog_name_for(dir);
    Ok((0..n)
        .filter(|&i| prog_name(prog_ids[i]).as_deref() == Some(want))
        .map(|i| (prog_ids[i], link_ids[i]))
        .collect())
}

fn link_fd(id: u32) -> Result<OwnedFd> {
    // SAFETY: returns a new fd or a negative errno.
    let fd = unsafe { libbpf_sys::bpf_link_get_fd_by_id(id) };
    if fd < 0 {
        return Err(Error::errno(format!("open link {id}"), fd));
    }
    // SAFETY: `fd` is non-negative, fresh from the kernel and owned by no
    // one else: OwnedFd becomes its only owner.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn link_detach(fd: &OwnedFd, what: &str) -> Result<()> {
    // SAFETY: fd is a link fd we own.
    let rc = unsafe { libbpf_sys::bpf_link_detach(fd.as_raw_fd()) };
    if rc < 0 {
        return Err(Error::errno(format!("detach {what}"), rc));
    }
    Ok(())
}

/// Attaches with TCX links pinned under `links_dir`.
pub(crate) struct Tcx<'a> {
    pub links_dir: &'a Path,
}

impl Tcx<'_> {
    fn pin_path(&self, ifindex: u32, dir: Direction) -> PathBuf {
        self.links_dir.join(format!("{ifindex}-{dir}"))
    }

    pub fn attach(
        &self,
        prog: &Program<'_>,
        ifindex: u32,
        dir: Direction,
    ) -> Result<AttachOutcome> {
        std::fs::create_dir_all(self.links_dir)
            .map_err(Error::io(format!("create {}", self.links_dir.display())))?;
        let pin = self.pin_path(ifindex, dir);
        let ours = tcx_ours(ifindex, dir)?;
        let mut kept_link = None;
        let mut outcome = AttachOutcome::Attached;
        if pin.exists() {
            // A pin of a link that no longer sits on this interface (it was
            // deleted, the index reused) is stale: drop it and start over.
            match Link::open(&pin) {
                Ok(mut link) if link_on(&link, ifindex, dir) => {
                    link.update_prog(prog).map_err(Error::bpf(format!(
                        "replace program on ifindex {ifindex} {dir}"
                    )))?;
                    kept_link = link_id(&link);
                    outcome = AttachOutcome::Replaced;
                }
                _ => {
                    std::fs::remove_file(&pin)
                        .map_err(Error::io(format!("remove stale pin {}", pin.display())))?;
                }
            }
        }
        if outcome == AttachOutcome::Attached {
            if let Some(&(_, link)) = ours.iter().find(|(_, l)| *l != 0) {
                // Ours, attached by an instance whose pins are gone: adopt it.
                let fd = link_fd(link)?;
                // SAFETY: both fds are valid; NULL opts means a plain update.
                let rc = unsafe {
                    libbpf_sys::bpf_link_update(
                        fd.as_raw_fd(),
                        prog.as_fd().as_raw_fd(),
                        std::ptr::null(),
                    )
                };
                if rc < 0 {
                    return Err(Error::errno(
                        format!("adopt link {link} on ifindex {ifindex}"),
                        rc,
                    ));
                }
                pin_fd(&fd, &pin)?;
                kept_link = Some(link);
                outcome = AttachOutcome::Replaced;
            } else {
                // SAFETY: zeroed, sized options: attach at the end of the chain.
                let mut opts: libbpf_sys::bpf_tcx_opts = unsafe { std::mem::zeroed() };
                opts.sz = size_of::<libbpf_sys::bpf_tcx_opts>() as _;
                // SAFETY: the program pointer is libbpf's own, alive while
                // `prog` is; `opts` is sized and lives across the call.
                let raw = unsafe {
                    libbpf_sys::bpf_program__attach_tcx(
                        prog.as_libbpf_object().as_ptr(),
                        ifindex.cast_signed(),
                        &raw const opts,
                    )
                };
                // libbpf returns NULL (with errno) or an encoded error pointer.
                // SAFETY: only inspects the pointer value, never reads it.
                let err = unsafe { libbpf_sys::libbpf_get_error(raw.cast()) };
                let Some(ptr) = NonNull::new(raw).filter(|_| err == 0) else {
                    return Err(Error::errno(
                        format!("attach TCX on ifindex {ifindex} {dir}"),
                        err as i32,
                    ));
                };
                // SAFETY: a valid link pointer from libbpf, owned from here.
                let mut link = unsafe { Link::from_ptr(ptr) };
                link.pin(&pin)
                    .map_err(Error::bpf(format!("pin link {}", pin.display())))?;
                kept_link = link_id(&link);
            }
        }
        // Any other copy of ours on this hook would double count.
        for (prog_id, link) in ours {
            if Some(link) != kept_link && link != 0 {
                link_detach(
                    &link_fd(link)?,
                    &format!("duplicate program {prog_id} on ifindex {ifindex}"),
                )?;
            }
        }
        Ok(outcome)
    }

    pub fn detach(&self, ifindex: u32, dir: Direction) -> Result<bool> {
        let mut any = false;
        for (prog_id, link) in tcx_ours(ifindex, dir)? {
            if link != 0 {
                link_detach(
                    &link_fd(link)?,
                    &format!("program {prog_id} on ifindex {ifindex}"),
                )?;
                any = true;
            }
        }
        let pin = self.pin_path(ifindex, dir);
        if pin.exists() {
            std::fs::remove_file(&pin).map_err(Error::io(format!("unpin {}", pin.display())))?;
        }
        Ok(any)
    }

    /// Removes pins whose links no longer sit on a live interface.
    pub fn prune_stale_pins(&self) -> Result<usize> {
        let Ok(entries) = std::fs::read_dir(self.links_dir) else {
            return Ok(0);
        };
        let mut n = 0;
        for entry in entries.flatten() {
            let path = entry.path();
            let alive = Link::open(&path)
                .ok()
                .and_then(|l| tcx_ifindex(&l))
                .is_some_and(|i| i != 0);
            if !alive {
                std::fs::remove_file(&path)
                    .map_err(Error::io(format!("unpin {}", path.display())))?;
                n += 1;
            }
        }
        Ok(n)
    }
}

fn pin_fd(fd: &OwnedFd, path: &Path) -> Result<()> {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| {
        Error::Invalid {
            what: "pin path",
            detail: format!("{} contains a NUL byte", path.display()),
        }
    })?;
    // SAFETY: valid fd and C string.
    let rc = unsafe { libbpf_sys::bpf_obj_pin(fd.as_raw_fd(), c.as_ptr()) };
    if rc < 0 {
        return Err(Error::errno(format!("pin {}", path.display()), rc));
    }
    Ok(())
}

fn link_id(link: &Link) -> Option<u32> {
    link.info().ok().map(|i| i.id)
}

fn tcx_ifindex(link: &Link) -> Option<u32> {
    match link.info().ok()?.info {
        libbpf_rs::query::LinkTypeInfo::Tcx(t) => Some(t.ifindex),
        _ => None,
    }
}

fn link_on(link: &Link, ifindex: u32, dir: Direction) -> bool {
    use libbpf_rs::ProgramAttachType::{TcxEgress, TcxIngress};
    match link.info().map(|i| i.info) {
        Ok(libbpf_rs::query::LinkTypeInfo::Tcx(t)) => {
            t.ifindex == ifindex
                && match dir {
                    Direction::Tx => matches!(t.attach_type, TcxIngress),
                    Direction::Rx => matches!(t.attach_type, TcxEgress),
                }
        }
        _ => false,
    }
}

fn tc_hook(fd: std::os::fd::BorrowedFd<'_>, ifindex: u32, dir: Direction) -> TcHook {
    TcHookBuilder::new(fd)
        .ifindex(ifindex.cast_signed())
        .replace(true)
        .handle(TC_HANDLE)
        .priority(TC_PRIORITY)
        .hook(match dir {
            Direction::Tx => TC_INGRESS,
            Direction::Rx => TC_EGRESS,
        })
}

/// The program id of ours at our handle/priority on this hook, if any.
fn tc_ours(fd: std::os::fd::BorrowedFd<'_>, ifindex: u32, dir: Direction) -> Option<u32> {
    let id = tc_hook(fd, ifindex, dir).query().ok()?;
    (prog_name(id).as_deref() == Some(prog_name_for(dir))).then_some(id)
}

pub(crate) fn tc_attach(prog: &Program<'_>, ifindex: u32, dir: Direction) -> Result<AttachOutcome> {
    // Beside an `ingress` qdisc both filters would share its one block
    // (crate::qdisc): refuse rather than count in the wrong direction.
    match crate::qdisc::ingress_slot(ifindex)? {
        None => {}
        Some(kind) if kind == "clsact" => {}
        Some(kind) => {
            // A filter of ours already in that block (attached before this
            // check existed) counts in the wrong direction: remove it.
            for d in [Direction::Tx, Direction::Rx] {
                let mut hook = tc_hook(prog.as_fd(), ifindex, d);
                let Ok(id) = hook.query() else { continue };
                if prog_name(id).is_some_and(|n| n == PROG_TX || n == PROG_RX) {
                    hook.detach().map_err(Error::bpf(format!(
                        "detach cls_bpf from the {kind} qdisc of ifindex {ifindex}"
                    )))?;
                }
            }
            return Err(Error::IngressQdisc { ifindex, kind });
        }
    }
    let existed = tc_ours(prog.as_fd(), ifindex, dir).is_some();
    let mut hook = tc_hook(prog.as_fd(), ifindex, dir);
    // Creating clsact is idempotent; the qdisc is never destroyed (it may
    // hold other tools' filters).
    hook.create()
        .map_err(Error::bpf(format!("create clsact on ifindex {ifindex}")))?;
    hook.attach().map_err(Error::bpf(format!(
        "attach cls_bpf on ifindex {ifindex} {dir}"
    )))?;
    Ok(if existed {
        AttachOutcome::Replaced
    } else {
        AttachOutcome::Attached
    })
}

pub(crate) fn tc_detach(prog: &Program<'_>, ifindex: u32, dir: Direction) -> Result<bool> {
    if tc_ours(prog.as_fd(), ifindex, dir).is_none() {
        return Ok(false);
    }
    tc_hook(prog.as_fd(), ifindex, dir)
        .detach()
        .map_err(Error::bpf(format!(
            "detach cls_bpf on ifindex {ifindex} {dir}"
        )))?;
    Ok(true)
}

/// Every attachment of ours on `ifindex`, both kinds, both directions.
pub(crate) fn list(prog_fd: std::os::fd::BorrowedFd<'_>, ifindex: u32) -> Result<Vec<Attachment>> {
    let mut out = Vec::new();
    for dir in [Direction::Tx, Direction::Rx] {
        for (prog_id, _) in tcx_ours(ifindex, dir)? {
            out.push(Attachment {
                ifindex,
                ifname: ifname(ifindex),
                direction: dir,
                mode: AttachMode::Tcx,
                prog_id,
            });
        }
        if let Some(prog_id) = tc_ours(prog_fd, ifindex, dir) {
            out.push(Attachment {
                ifindex,
                ifname: ifname(ifindex),
                direction: dir,
                mode: AttachMode::Tc,
                prog_id,
            });
        }
    }
    Ok(out)
}

/// Interfaces of the calling thread's network namespace, as (index, name)
/// sorted by index. Listed with `if_nameindex(3)`, which asks the kernel
/// over netlink (an `RTM_GETLINK` dump in glibc): `/sys/class/net` would
/// show the namespace sysfs was mounted in, not the caller's.
pub fn interfaces() -> Result<Vec<(u32, String)>> {
    // SAFETY: no arguments; the result is freed below, once read.
    let list = unsafe { libc::if_nameindex() };
    if list.is_null() {
        return Err(Error::io("list interfaces (if_nameindex)")(
            std::io::Error::last_os_error(),
        ));
    }
    let mut out = Vec::new();
    let mut at = list;
    // SAFETY: the array ends with an entry whose index is 0 and name NULL;
    // every entry before it holds a valid NUL-terminated name. It is read
    // entirely before `if_freenameindex` releases it.
    unsafe {
        while (*at).if_index != 0 && !(*at).if_name.is_null() {
            let name = std::ffi::CStr::from_ptr((*at).if_name)
                .to_string_lossy()
                .into_owned();
            out.push(((*at).if_index, name));
            at = at.add(1);
        }
        libc::if_freenameindex(list);
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_version_compare() {
        assert!(kernel_at_least("6.18.44-fc-v782", 6, 6));
        assert!(kernel_at_least("6.6.0", 6, 6));
        assert!(!kernel_at_least("6.1.0-18-amd64", 6, 6));
        assert!(!kernel_at_least("5.15.0", 6, 6));
        assert!(kernel_at_least("7.0", 6, 6));
        assert!(!kernel_at_least("", 6, 6));
    }

    #[test]
    fn attach_mode_spellings() {
        assert_eq!(AttachMode::parse("tc").unwrap(), AttachMode::Tc);
        assert_eq!(AttachMode::parse("auto").unwrap(), AttachMode::Auto);
        assert!(AttachMode::parse("xdp")
            .unwrap_err()
            .to_string()
            .contains("expected auto, tcx or tc"));
    }
}
