//! Typed errors of the datapath crate: each names the operation and the
//! object (map, interface, path) it was applied to.

use std::path::PathBuf;

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong while talking to the kernel.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A libbpf call failed.
    #[error("{op}: {source}")]
    Bpf {
        /// What was being done, e.g. "load the classifier object".
        op: String,
        /// The libbpf error (carries the errno).
        #[source]
        source: libbpf_rs::Error,
    },
    /// A system call or file operation failed.
    #[error("{op}: {source}")]
    Io {
        /// What was being done.
        op: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// No interface of that name exists in this network namespace.
    #[error("interface {name:?} does not exist")]
    NoSuchInterface {
        /// The name asked for.
        name: String,
    },
    /// The pin directory is not on a BPF filesystem and cannot be put on one.
    #[error("{path} is not on a bpf filesystem (mount bpffs at /sys/fs/bpf, or set datapath.bpffs_dir below it)")]
    NotBpffs {
        /// The configured directory.
        path: PathBuf,
    },
    /// A value handed to a map writer is out of range.
    #[error("invalid {what}: {detail}")]
    Invalid {
        /// Which input.
        what: &'static str,
        /// What is wrong and what is expected.
        detail: String,
    },
    /// Our cls_bpf slot on a hook holds a filter that is not ours (another
    /// agent's, or another tool's): it is never replaced.
    #[error(
        "cls_bpf handle {handle:#x} priority {priority:#x} on ifindex {ifindex} {direction} holds \
         program {prog_id}, which is not this bpffs directory's: not replaced (remove it with \
         `tc filter del dev IFNAME {hook} pref {priority} handle {handle:#x} bpf` if it is a \
         leftover)",
        hook = hook_name(*.direction)
    )]
    SlotTaken {
        /// The interface.
        ifindex: u32,
        /// tx = ingress hook, rx = egress hook.
        direction: lachesis_abi::Direction,
        /// Our filter handle.
        handle: u32,
        /// Our filter priority.
        priority: u32,
        /// The program found there.
        prog_id: u32,
    },
    /// cls_bpf needs `clsact` in the interface's ingress slot and another
    /// qdisc holds it (`ingress`, as Neutron's bandwidth-limit rules put
    /// there): attaching beside it would run the rx program on the ingress
    /// hook, so the interface is left unattached.
    #[error("ifindex {ifindex} has an `{kind}` qdisc where cls_bpf needs clsact (Neutron QoS bandwidth limits and OVS ingress policing install one): not attached, as both programs would share its one hook; on kernel 6.6 or later attach mode auto uses TCX, which needs no qdisc")]
    IngressQdisc {
        /// The interface.
        ifindex: u32,
        /// The qdisc found in the ingress slot.
        kind: String,
    },
    /// TCX was demanded but the running kernel does not offer it.
    #[error("TCX attach requested but the kernel ({release}) is older than 6.6; use attach mode 'auto' or 'tc'")]
    NoTcx {
        /// `uname -r`.
        release: String,
    },
}

/// The TC hook a direction's program sits on.
fn hook_name(direction: lachesis_abi::Direction) -> &'static str {
    match direction {
        lachesis_abi::Direction::Tx => "ingress",
        lachesis_abi::Direction::Rx => "egress",
    }
}

impl Error {
    pub(crate) fn bpf(op: impl Into<String>) -> impl FnOnce(libbpf_rs::Error) -> Error {
        let op = op.into();
        move |source| Error::Bpf { op, source }
    }

    pub(crate) fn io(op: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
        let op = op.into();
        move |source| Error::Io { op, source }
    }

    /// Builds an `Io` error from a negative errno return value.
    pub(crate) fn errno(op: impl Into<String>, ret: i32) -> Error {
        Error::Io {
            op: op.into(),
            source: std::io::Error::from_raw_os_error(ret.saturating_neg()),
        }
    }
}
