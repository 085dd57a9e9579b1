//! Attaching both programs to a tap (DESIGN §4.4): TCX links pinned in
//! bpffs where the kernel has them (≥ 6.6), clsact + cls_bpf at a fixed
//! handle and priority otherwise. Re-attaching always *replaces* atomically,
//! so a restart never stacks a second copy (which would double count) and
//! never leaves a gap (which would lose bytes).
//!
//! "Ours" means attached by an agent of *this* bpffs directory, never "named
//! like ours" (issue 19: a second agent on another directory detached the
//! running agent's programs). An attached program is ours when it is one
//! this process loaded, or one a TCX link pinned under `<bpffs>/links` ran
//! at load (a predecessor's) — known without opening anything — or, where
//! the kernel lets us open it by id (only with `CAP_SYS_ADMIN`, which the
//! unit does not grant), when the maps it uses include a `flows` map of
//! this directory (the one pinned at `<bpffs>/flows`, or one the load
//! retired from there), read from `bpf_prog_info.map_ids`. A cls_bpf filter
//! that cannot be opened is ours at this directory's own handle. A restart of the same agent reuses the `flows` pin, so its
//! predecessor's programs are ours and are replaced in place; another
//! directory's agent counts into another `flows` map, so its programs are
//! never replaced, detached or removed — a tap that carries them gets ours
//! beside them (docs/datapath.md, "Two agents on one host").

use std::ffi::CStr;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;

use lachesis_abi::Direction;
use libbpf_rs::{AsRawLibbpf, Link, Program, TcHook, TcHookBuilder, TC_EGRESS, TC_INGRESS};

use crate::error::{Error, Result};

/// The cls_bpf filter handle of the default bpffs directory
/// (`/sys/fs/bpf/lachesis`), and the one every directory used before
/// handles were derived from it ([`tc_handle_for`]). Never 0: a filter at
/// handle or priority 0 gets a fresh slot per call and would stack
/// duplicates that double count.
pub const TC_HANDLE: u32 = 0x4c41;
/// The cls_bpf filter priority, the same for every bpffs directory (where
/// our filters sit among other tools' ones).
pub const TC_PRIORITY: u32 = 0x4c41;

/// The default bpffs directory, whose filters keep [`TC_HANDLE`].
const DEFAULT_DIR: &str = "/sys/fs/bpf/lachesis";

/// The cls_bpf handle of the agent of `bpffs_dir` (canonical path): fixed
/// per directory, so a restart replaces its own filter at the same slot,
/// and distinct between directories, so two agents' filters on one tap sit
/// side by side instead of one replacing the other. [`TC_HANDLE`] for the
/// default directory (an upgrade replaces the filters of a build that had
/// one handle for all); otherwise a 32-bit FNV-1a hash of the path, never 0
/// nor [`TC_HANDLE`].
#[must_use]
pub fn tc_handle_for(bpffs_dir: &Path) -> u32 {
    if bpffs_dir == Path::new(DEFAULT_DIR) {
        return TC_HANDLE;
    }
    let mut h: u32 = 0x811c_9dc5;
    for b in bpffs_dir.as_os_str().as_encoded_bytes() {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    if h == 0 || h == TC_HANDLE {
        h = h.wrapping_add(2);
    }
    h
}

/// What makes an attachment ours: the `flows` maps of this bpffs
/// directory, the programs known to be ours without opening them, and this
/// directory's cls_bpf handle.
#[derive(Debug, Clone)]
pub(crate) struct Ours {
    /// Ids of the `flows` maps of our directory: the pinned one, and the
    /// ones this load retired from there (kept after their pins go, so a
    /// predecessor's program still on an interface stays recognisable).
    pub flows_maps: Vec<u32>,
    /// Programs known to be ours without opening them by id, which the
    /// kernel allows only with `CAP_SYS_ADMIN` (the unit does not grant
    /// it): the two this process loaded, and those the TCX links pinned
    /// under `<bpffs>/links` ran when it loaded (a predecessor's), each
    /// with the hook direction it serves.
    pub known: Vec<(u32, Direction)>,
    /// Where a filter of ours goes when none is there yet.
    pub tc_handle: u32,
}

/// What the kernel lets us tell of an attached program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Judged {
    Ours,
    /// Opened and read: another agent's or another tool's.
    Others,
    /// Not known and not openable (no `CAP_SYS_ADMIN`, or gone).
    Unknown,
}

impl Ours {
    /// Program `id` at a hook of direction `dir`: ours when known, or when
    /// opened and found named as our program for that hook and counting
    /// into one of our `flows` maps.
    fn judge(&self, id: u32, dir: Direction) -> Judged {
        if self.known.contains(&(id, dir)) {
            return Judged::Ours;
        }
        match prog_info(id) {
            Some(p)
                if p.name == prog_name_for(dir)
                    && p.map_ids.iter().any(|m| self.flows_maps.contains(m)) =>
            {
                Judged::Ours
            }
            Some(_) => Judged::Others,
            None => Judged::Unknown,
        }
    }

    /// Whether program `id`, attached at a hook of direction `dir`, is
    /// ours ([`Ours::judge`]). A program neither known nor openable is not.
    fn owns(&self, id: u32, dir: Direction) -> bool {
        self.judge(id, dir) == Judged::Ours
    }

    /// Whether the cls_bpf filter running `id` at `handle` is ours: judged
    /// ours, or — when it cannot be opened — sitting at this directory's
    /// own handle, where only an agent of this directory puts a filter (a
    /// restart's predecessor, whose program id this process cannot know).
    /// One at the one-handle builds' handle that cannot be opened is not.
    fn owns_filter(&self, handle: u32, id: u32, dir: Direction) -> bool {
        match self.judge(id, dir) {
            Judged::Ours => true,
            Judged::Others => false,
            Judged::Unknown => handle == self.tc_handle,
        }
    }

    /// Named like ours (the same classifier) but counting into another
    /// directory's maps: another agent's.
    fn foreign(&self, id: u32, dir: Direction) -> bool {
        prog_info(id).is_some_and(|p| {
            p.name == prog_name_for(dir) && !p.map_ids.iter().any(|m| self.flows_maps.contains(m))
        })
    }

    /// The cls_bpf slots a filter of ours may sit at: our handle, and the
    /// one handle of builds before handles were per directory.
    fn tc_handles(&self) -> impl Iterator<Item = u32> {
        let legacy = (self.tc_handle != TC_HANDLE).then_some(TC_HANDLE);
        std::iter::once(self.tc_handle).chain(legacy)
    }
}

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

/// `datapath.attach_mode`.
impl lachesis_config::Choice for AttachMode {
    const ALL: &'static [Self] = &[AttachMode::Auto, AttachMode::Tcx, AttachMode::Tc];
    const LABEL: &'static str = "auto | tcx | tc";

    fn word(self) -> &'static str {
        match self {
            AttachMode::Auto => "auto",
            AttachMode::Tcx => "tcx",
            AttachMode::Tc => "tc",
        }
    }
}

impl AttachMode {
    /// Parses the configuration spelling (`auto`, `tcx`, `tc`).
    pub fn parse(s: &str) -> Result<Self> {
        use lachesis_config::Choice as _;
        Self::ALL
            .iter()
            .copied()
            .find(|m| m.word() == s)
            .ok_or_else(|| Error::Invalid {
                what: "attach mode",
                detail: format!("{s:?}: expected auto, tcx or tc"),
            })
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

/// What the kernel says of an attached program.
struct ProgInfo {
    name: String,
    map_ids: Vec<u32>,
}

/// Name and map ids of program `id` (opening a program by id needs
/// `CAP_SYS_ADMIN`); `None` if it cannot be opened or read.
fn prog_info(id: u32) -> Option<ProgInfo> {
    // SAFETY: plain syscall wrappers; the fd is owned right after.
    let fd = unsafe { libbpf_sys::bpf_prog_get_fd_by_id(id) };
    if fd < 0 {
        return None;
    }
    // SAFETY: `fd` is non-negative, fresh from the kernel and owned by no
    // one else: OwnedFd becomes its only owner and closes it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    prog_info_of(fd.as_fd()).map(|(_, info)| info)
}

/// Id, name and map ids of the program behind `fd` (no capability beyond
/// holding the fd).
fn prog_info_of(fd: std::os::fd::BorrowedFd<'_>) -> Option<(u32, ProgInfo)> {
    const MAX_MAPS: usize = 64;
    let mut map_ids = [0u32; MAX_MAPS];
    // SAFETY: bpf_prog_info is plain old data; all-zero is a valid value.
    let mut info: libbpf_sys::bpf_prog_info = unsafe { std::mem::zeroed() };
    info.nr_map_ids = MAX_MAPS as u32;
    info.map_ids = map_ids.as_mut_ptr() as u64;
    let mut len = size_of::<libbpf_sys::bpf_prog_info>() as u32;
    // SAFETY: `info` and `len` are live and writable; `len` is the size of
    // `info`, so the kernel writes no further than the struct; `map_ids`
    // points at `nr_map_ids` live u32s, which outlive the call.
    let rc =
        unsafe { libbpf_sys::bpf_prog_get_info_by_fd(fd.as_raw_fd(), &raw mut info, &raw mut len) };
    if rc != 0 {
        return None;
    }
    // The kernel reports how many maps the program uses and copies at most
    // as many as there was room for.
    let n = (info.nr_map_ids as usize).min(MAX_MAPS);
    Some((
        info.id,
        ProgInfo {
            // SAFETY: the kernel NUL-terminates the 16-byte name.
            name: unsafe { CStr::from_ptr(info.name.as_ptr()) }
                .to_string_lossy()
                .into_owned(),
            map_ids: map_ids[..n].to_vec(),
        },
    ))
}

/// The programs known to be ours without opening any by id: `loaded`
/// (this process's own, by their fds) and what the TCX links pinned in
/// `links_dir` run now (a predecessor's, until they are updated).
pub(crate) fn known_programs(
    loaded: &[(std::os::fd::BorrowedFd<'_>, Direction)],
    links_dir: &Path,
) -> Vec<(u32, Direction)> {
    use libbpf_rs::ProgramAttachType::{TcxEgress, TcxIngress};
    let mut known: Vec<(u32, Direction)> = loaded
        .iter()
        .filter_map(|&(fd, dir)| prog_info_of(fd).map(|(id, _)| (id, dir)))
        .collect();
    if let Ok(entries) = std::fs::read_dir(links_dir) {
        for entry in entries.flatten() {
            let Ok(link) = Link::open(entry.path()) else {
                continue;
            };
            let Ok(info) = link.info() else { continue };
            if let libbpf_rs::query::LinkTypeInfo::Tcx(t) = info.info {
                let dir = match t.attach_type {
                    TcxIngress => Direction::Tx,
                    TcxEgress => Direction::Rx,
                    _ => continue,
                };
                known.push((info.prog_id, dir));
            }
        }
    }
    known.sort_unstable();
    known.dedup();
    known
}

/// Every program attached through TCX at `dir` on `ifindex`, in chain
/// order: (program id, link id). Link id 0 means attached without a link.
fn tcx_hook(ifindex: u32, dir: Direction) -> Result<Vec<(u32, u32)>> {
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
    Ok((0..n).map(|i| (prog_ids[i], link_ids[i])).collect())
}

/// Programs of ours (see [`Ours`]) attached through TCX at `dir` on
/// `ifindex`: (program id, link id).
fn tcx_ours(ours: &Ours, ifindex: u32, dir: Direction) -> Result<Vec<(u32, u32)>> {
    Ok(tcx_hook(ifindex, dir)?
        .into_iter()
        .filter(|&(prog, _)| ours.owns(prog, dir))
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

/// Link `id`, opened by id, or — where that needs `CAP_SYS_ADMIN` the
/// process lacks — through its pin `pin` when that pin holds it.
fn link_fd_or_pin(id: u32, pin: &Path) -> Result<OwnedFd> {
    link_fd(id).or_else(|by_id| {
        let c = std::ffi::CString::new(pin.as_os_str().as_encoded_bytes()).map_err(|_| {
            Error::Invalid {
                what: "pin path",
                detail: format!("{} contains a NUL byte", pin.display()),
            }
        })?;
        // SAFETY: a valid C string; returns a new fd or a negative errno.
        let fd = unsafe { libbpf_sys::bpf_obj_get(c.as_ptr()) };
        if fd < 0 {
            return Err(by_id);
        }
        // SAFETY: non-negative, fresh from the kernel, owned by no one else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: zeroed plain-old-data info, sized; the kernel writes no
        // further than `len`.
        let mut info: libbpf_sys::bpf_link_info = unsafe { std::mem::zeroed() };
        let mut len = size_of::<libbpf_sys::bpf_link_info>() as u32;
        // SAFETY: `info` and `len` are live and writable for the call.
        let rc = unsafe {
            libbpf_sys::bpf_link_get_info_by_fd(fd.as_raw_fd(), &raw mut info, &raw mut len)
        };
        if rc == 0 && info.id == id {
            Ok(fd)
        } else {
            Err(by_id)
        }
    })
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
    pub ours: &'a Ours,
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
        let ours = tcx_ours(self.ours, ifindex, dir)?;
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
                // Ours (it counts into our `flows`) but its pin is gone,
                // while something still holds the link: adopt it.
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
        // Any other copy of ours on this hook would double count. Another
        // agent's programs (other maps) are left where they are.
        for (prog_id, link) in ours {
            if Some(link) != kept_link && link != 0 {
                link_detach(
                    &link_fd_or_pin(link, &pin)?,
                    &format!("duplicate program {prog_id} on ifindex {ifindex}"),
                )?;
            }
        }
        Ok(outcome)
    }

    pub fn detach(&self, ifindex: u32, dir: Direction) -> Result<bool> {
        let mut any = false;
        let pin = self.pin_path(ifindex, dir);
        for (prog_id, link) in tcx_ours(self.ours, ifindex, dir)? {
            if link != 0 {
                link_detach(
                    &link_fd_or_pin(link, &pin)?,
                    &format!("program {prog_id} on ifindex {ifindex}"),
                )?;
                any = true;
            }
        }
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

fn tc_hook(fd: std::os::fd::BorrowedFd<'_>, ifindex: u32, dir: Direction, handle: u32) -> TcHook {
    TcHookBuilder::new(fd)
        .ifindex(ifindex.cast_signed())
        .replace(true)
        .handle(handle)
        .priority(TC_PRIORITY)
        .hook(match dir {
            Direction::Tx => TC_INGRESS,
            Direction::Rx => TC_EGRESS,
        })
}

/// The program id of the filter at `handle` (our priority) on this hook.
fn tc_at(
    fd: std::os::fd::BorrowedFd<'_>,
    ifindex: u32,
    dir: Direction,
    handle: u32,
) -> Option<u32> {
    tc_hook(fd, ifindex, dir, handle).query().ok()
}

/// Filters of ours on this hook: (handle, program id).
fn tc_ours(
    fd: std::os::fd::BorrowedFd<'_>,
    ours: &Ours,
    ifindex: u32,
    dir: Direction,
) -> Vec<(u32, u32)> {
    ours.tc_handles()
        .filter_map(|h| tc_at(fd, ifindex, dir, h).map(|id| (h, id)))
        .filter(|&(h, id)| ours.owns_filter(h, id, dir))
        .collect()
}

/// Attaches `prog` as a cls_bpf filter: in place of a filter of ours
/// already on the hook (an atomic replace at its handle: a restart, or an
/// upgrade from the one-handle build), else at our handle. A filter of
/// another agent at our handle is never replaced: the attach fails,
/// naming it. Any second filter of ours is then removed.
pub(crate) fn tc_attach(
    prog: &Program<'_>,
    ours: &Ours,
    ifindex: u32,
    dir: Direction,
) -> Result<AttachOutcome> {
    // Beside an `ingress` qdisc both filters would share its one block
    // (crate::qdisc): refuse rather than count in the wrong direction.
    match crate::qdisc::ingress_slot(ifindex)? {
        None => {}
        Some(kind) if kind == "clsact" => {}
        Some(kind) => {
            // A filter of ours already in that block (attached before this
            // check existed) counts in the wrong direction: remove it.
            for d in [Direction::Tx, Direction::Rx] {
                for (h, _) in tc_ours(prog.as_fd(), ours, ifindex, d) {
                    tc_hook(prog.as_fd(), ifindex, d, h)
                        .detach()
                        .map_err(Error::bpf(format!(
                            "detach cls_bpf from the {kind} qdisc of ifindex {ifindex}"
                        )))?;
                }
            }
            return Err(Error::IngressQdisc { ifindex, kind });
        }
    }
    let fd = prog.as_fd();
    let existing = tc_ours(fd, ours, ifindex, dir);
    let handle = existing.first().map_or(ours.tc_handle, |&(h, _)| h);
    if existing.is_empty() {
        if let Some(id) = tc_at(fd, ifindex, dir, handle) {
            return Err(Error::SlotTaken {
                ifindex,
                direction: dir,
                handle,
                priority: TC_PRIORITY,
                prog_id: id,
            });
        }
    }
    let mut hook = tc_hook(fd, ifindex, dir, handle);
    // Creating clsact is idempotent; the qdisc is never destroyed (it may
    // hold other tools' filters).
    hook.create()
        .map_err(Error::bpf(format!("create clsact on ifindex {ifindex}")))?;
    hook.attach().map_err(Error::bpf(format!(
        "attach cls_bpf on ifindex {ifindex} {dir} (handle {handle:#x})"
    )))?;
    for &(other, _) in existing.iter().skip(1) {
        tc_hook(fd, ifindex, dir, other)
            .detach()
            .map_err(Error::bpf(format!(
                "detach duplicate cls_bpf on ifindex {ifindex} {dir} (handle {other:#x})"
            )))?;
    }
    Ok(if existing.is_empty() {
        AttachOutcome::Attached
    } else {
        AttachOutcome::Replaced
    })
}

/// Removes the filters of ours from this hook; `true` if there was one.
pub(crate) fn tc_detach(
    prog: &Program<'_>,
    ours: &Ours,
    ifindex: u32,
    dir: Direction,
) -> Result<bool> {
    let fd = prog.as_fd();
    let found = tc_ours(fd, ours, ifindex, dir);
    for &(handle, _) in &found {
        tc_hook(fd, ifindex, dir, handle)
            .detach()
            .map_err(Error::bpf(format!(
                "detach cls_bpf on ifindex {ifindex} {dir} (handle {handle:#x})"
            )))?;
    }
    Ok(!found.is_empty())
}

fn attachment(ifindex: u32, direction: Direction, mode: AttachMode, prog_id: u32) -> Attachment {
    Attachment {
        ifindex,
        ifname: ifname(ifindex),
        direction,
        mode,
        prog_id,
    }
}

/// Every attachment of ours on `ifindex`, both kinds, both directions.
pub(crate) fn list(
    prog_fd: std::os::fd::BorrowedFd<'_>,
    ours: &Ours,
    ifindex: u32,
) -> Result<Vec<Attachment>> {
    let mut out = Vec::new();
    for dir in [Direction::Tx, Direction::Rx] {
        for (prog_id, _) in tcx_ours(ours, ifindex, dir)? {
            out.push(attachment(ifindex, dir, AttachMode::Tcx, prog_id));
        }
        for (_, prog_id) in tc_ours(prog_fd, ours, ifindex, dir) {
            out.push(attachment(ifindex, dir, AttachMode::Tc, prog_id));
        }
    }
    Ok(out)
}

/// Programs of another agent (the same classifier, another bpffs
/// directory's maps) on `ifindex`: every TCX one, and a cls_bpf filter at
/// one of the handles ours may use (another directory's own handle is not
/// looked for).
pub(crate) fn list_foreign(
    prog_fd: std::os::fd::BorrowedFd<'_>,
    ours: &Ours,
    ifindex: u32,
) -> Result<Vec<Attachment>> {
    let mut out = Vec::new();
    for dir in [Direction::Tx, Direction::Rx] {
        for (prog_id, _) in tcx_hook(ifindex, dir)? {
            if ours.foreign(prog_id, dir) {
                out.push(attachment(ifindex, dir, AttachMode::Tcx, prog_id));
            }
        }
        for h in ours.tc_handles() {
            if let Some(id) = tc_at(prog_fd, ifindex, dir, h).filter(|&id| ours.foreign(id, dir)) {
                out.push(attachment(ifindex, dir, AttachMode::Tc, id));
            }
        }
    }
    Ok(out)
}

/// Attaches `prog` at the one handle every directory used before handles
/// were per directory (what such a build left on a tap; tests only).
#[cfg(feature = "testing")]
pub(crate) fn tc_attach_at_legacy_handle(
    prog: &Program<'_>,
    ifindex: u32,
    dir: Direction,
) -> Result<()> {
    let mut hook = tc_hook(prog.as_fd(), ifindex, dir, TC_HANDLE);
    hook.create()
        .map_err(Error::bpf(format!("create clsact on ifindex {ifindex}")))?;
    hook.attach().map_err(Error::bpf(format!(
        "attach cls_bpf on ifindex {ifindex} {dir}"
    )))?;
    Ok(())
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
    fn tc_handles_per_directory() {
        assert_eq!(tc_handle_for(Path::new("/sys/fs/bpf/lachesis")), TC_HANDLE);
        let a = tc_handle_for(Path::new("/sys/fs/bpf/lachesis-a"));
        let b = tc_handle_for(Path::new("/sys/fs/bpf/lachesis-b"));
        assert_ne!(a, b);
        for h in [a, b] {
            assert!(h != 0 && h != TC_HANDLE, "{h:#x}");
        }
        assert_eq!(a, tc_handle_for(Path::new("/sys/fs/bpf/lachesis-a")));
        let ours = Ours {
            flows_maps: vec![1],
            known: Vec::new(),
            tc_handle: a,
        };
        assert_eq!(ours.tc_handles().collect::<Vec<_>>(), vec![a, TC_HANDLE]);
        let default = Ours {
            flows_maps: vec![1],
            known: Vec::new(),
            tc_handle: TC_HANDLE,
        };
        assert_eq!(default.tc_handles().collect::<Vec<_>>(), vec![TC_HANDLE]);
    }

    #[test]
    fn attach_mode_spellings() {
        use lachesis_config::Choice as _;
        assert_eq!(AttachMode::LABEL, AttachMode::words().join(" | "));
        assert_eq!(AttachMode::parse("tc").unwrap(), AttachMode::Tc);
        assert_eq!(AttachMode::parse("auto").unwrap(), AttachMode::Auto);
        assert!(AttachMode::parse("xdp")
            .unwrap_err()
            .to_string()
            .contains("expected auto, tcx or tc"));
    }
}
