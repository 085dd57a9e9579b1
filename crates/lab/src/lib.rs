//! Test hosts for Lachesis: crafted Ethernet frames for the program
//! test-run facility, and a network-namespace lab (namespaces as VMs,
//! host-side veths named like taps) for real-traffic tests and the demo.
//!
//! Everything the lab creates carries a per-run unique name and is removed
//! when the lab is dropped; nothing else on the machine is touched.

pub mod frame;
pub mod netns;

/// Fails loudly when not root: kernel tests must never skip silently.
pub fn require_root() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert!(
        euid == 0,
        "this test needs root (BPF, TC, network namespaces); run `make test` as root — refusing to skip"
    );
}
