//! What libbpf prints.
//!
//! libbpf echoes the kernel's netlink extended-ack text for every failed tc
//! request, including the lookups this crate makes on purpose to learn
//! whether a clsact qdisc or one of our filters exists ("Parent Qdisc
//! doesn't exists", "Cannot find specified filter chain", "Exclusivity flag
//! on"). Those answers are expected; failures that matter come back as
//! [`crate::Error`] values with the errno. So the extack echo is dropped and
//! every other libbpf warning still reaches stderr. libbpf's printer is
//! process-wide: a binary with its own logger may replace this with
//! `libbpf_rs::set_print`.

use std::sync::Once;

use libbpf_rs::PrintLevel;

#[expect(
    clippy::needless_pass_by_value,
    reason = "the signature libbpf-rs requires"
)]
fn sink(_level: PrintLevel, msg: String) {
    if msg.starts_with("libbpf: Kernel error message:") {
        return;
    }
    eprint!("{msg}");
}

pub(crate) fn install_once() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        libbpf_rs::set_print(Some((PrintLevel::Warn, sink)));
    });
}
