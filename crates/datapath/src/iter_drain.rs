//! The map-element iterator drain of [`FlowsVariant::PerCpuIter`] and the
//! kernel's own memory accounting of `flows` — what `make bench-cores`
//! measures beside the batched drain (decision record 0006).
//!
//! An `iter/bpf_map_elem` program attached to a per-CPU hash is handed
//! each entry's key and a buffer of every possible CPU's value (the kernel
//! copies them in, Linux 5.9+); ours folds them and writes one 56-byte
//! record through the `seq_file` only when the entry was last seen at or
//! after a threshold, so userspace reads only what changed.
//!
//! [`FlowsVariant::PerCpuIter`]: crate::FlowsVariant::PerCpuIter

use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use lachesis_abi::DrainRecord;
use libbpf_rs::{MapCore, MapFlags, MapHandle, Object};

use crate::drain::DrainBuffer;
use crate::error::{Error, Result};

/// What one iterator drain cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IterDrain {
    /// Bytes the kernel copied to userspace (records only).
    pub bytes: u64,
    /// `read()` calls on the iterator, the last one returning 0.
    pub reads: u32,
}

const RECORD: usize = size_of::<DrainRecord>();
/// Bytes asked per `read()`; the kernel's `seq_file` fills at most its own
/// buffer per call.
const READ_CHUNK: usize = 1 << 16;

pub(crate) fn drain(
    obj: &Object,
    flows: &MapHandle,
    since_ns: u64,
    buf: &mut DrainBuffer,
) -> Result<IterDrain> {
    let missing = |what: &str| Error::Invalid {
        what: "classifier object",
        detail: format!("has no {what}: only the iterator variant drains this way"),
    };
    let since = obj
        .maps()
        .find(|m| m.name() == "drain_since")
        .ok_or_else(|| missing("map drain_since"))?;
    since
        .update(&0u32.to_ne_bytes(), &since_ns.to_ne_bytes(), MapFlags::ANY)
        .map_err(Error::bpf("write drain_since"))?;
    let prog = obj
        .progs_mut()
        .find(|p| p.name() == "drain_active")
        .ok_or_else(|| missing("program drain_active"))?;
    let link = prog
        .attach_iter(flows.as_fd())
        .map_err(Error::bpf("attach the flows iterator"))?;
    let mut iter = libbpf_rs::Iter::new(&link).map_err(Error::bpf("open the flows iterator"))?;

    let raw = &mut buf.records;
    raw.clear();
    let mut out = IterDrain::default();
    loop {
        let at = raw.len();
        raw.resize(at + READ_CHUNK, 0);
        let n = iter
            .read(&mut raw[at..])
            .map_err(Error::io("read the flows iterator"))?;
        out.reads += 1;
        raw.truncate(at + n);
        if n == 0 {
            break;
        }
    }
    out.bytes = raw.len() as u64;
    if !raw.len().is_multiple_of(RECORD) {
        return Err(Error::Invalid {
            what: "iterator output",
            detail: format!(
                "{} bytes is not a whole number of {RECORD}-byte records",
                raw.len()
            ),
        });
    }
    buf.entries.clear();
    buf.calls = out.reads;
    buf.entries.extend(raw.chunks_exact(RECORD).map(|r| {
        let rec: DrainRecord = bytemuck::pod_read_unaligned(r);
        (lachesis_abi::EntryKey::folded(rec.key), rec.counters)
    }));
    Ok(out)
}

static ITER_PROBE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/iter_probe.bpf.o"));

/// Loads each empty iterator program of `bpf/iter_probe.bpf.c` alone:
/// `(iterator target, the kernel's answer)`. Tells whether the kernel
/// refuses an iterator kind itself or only a given program's content.
#[must_use]
pub fn probe_iterator_targets() -> Vec<(&'static str, Result<()>)> {
    ["bpf_map", "bpf_map_elem"]
        .into_iter()
        .map(|target| (target, load_probe(&format!("probe_{target}"))))
        .collect()
}

fn load_probe(program: &str) -> Result<()> {
    let mut open = libbpf_rs::ObjectBuilder::default()
        .open_memory(ITER_PROBE)
        .map_err(Error::bpf("open the iterator probe object"))?;
    for mut prog in open.progs_mut() {
        let wanted = prog.name() == program;
        prog.set_autoload(wanted);
    }
    open.load().map(drop).map_err(Error::bpf(format!(
        "load the empty iterator program {program}"
    )))
}

/// `memlock` of a BPF map's fdinfo: the kernel's own accounting of the
/// memory the map holds (its `map_mem_usage`), in bytes.
pub fn memlock(fd: BorrowedFd<'_>) -> Result<u64> {
    let path = format!("/proc/self/fdinfo/{}", fd.as_raw_fd());
    let text = std::fs::read_to_string(&path).map_err(Error::io(format!("read {path}")))?;
    parse_memlock(&text).ok_or_else(|| Error::Invalid {
        what: "map fdinfo",
        detail: format!("{path} has no memlock line"),
    })
}

fn parse_memlock(fdinfo: &str) -> Option<u64> {
    fdinfo
        .lines()
        .find_map(|l| l.strip_prefix("memlock:"))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::parse_memlock;

    #[test]
    fn memlock_is_read_from_its_fdinfo_line() {
        let fdinfo = "pos:\t0\nflags:\t02000002\nmnt_id:\t15\nino:\t1057\nmap_type:\t5\n\
                      key_size:\t18\nvalue_size:\t32\nmax_entries:\t4096\nmap_flags:\t0x0\n\
                      map_extra:\t0x0\nmemlock:\t657536\nmap_id:\t53\nfrozen:\t0\n";
        assert_eq!(parse_memlock(fdinfo), Some(657_536));
        assert_eq!(parse_memlock("pos:\t0\n"), None);
    }
}
