//! The bodies of every fuzz target: one function per parser of input from
//! outside the process, taking the fuzzer's bytes. Each asserts what it
//! can beyond "no panic" (a round trip, a deterministic result, an error
//! that names its input). `fuzz/fuzz_targets/` (cargo-fuzz, nightly) calls
//! them under libFuzzer; `tests/` replays the committed corpus and every
//! crash found through them on the stable toolchain, in `make test`.

pub mod agent;
pub mod openstack;
pub mod wire;

/// A target's body.
pub type Target = fn(&[u8]);

/// Every target: its name (the `fuzz/fuzz_targets/<name>.rs` file and the
/// `fuzz/corpus/<name>/` directory) and its body.
pub const TARGETS: &[(&str, Target)] = &[
    ("notification", wire::notification),
    ("state_stream", wire::state_stream),
    ("web_config", wire::web_config),
    ("openstack_lists", openstack::openstack_lists),
    ("clouds_yaml", openstack::clouds_yaml),
    ("agent_config", agent::agent_config),
    ("state_file", agent::state_file),
    ("netlink_link", agent::netlink_link),
    ("debug_query", agent::debug_query),
];

/// The body of target `name` (what a `fuzz/fuzz_targets/` binary runs).
///
/// # Panics
/// There is no such target.
#[must_use]
pub fn target(name: &str) -> Target {
    TARGETS
        .iter()
        .find(|(n, _)| *n == name)
        .map_or_else(|| panic!("no fuzz target {name}"), |(_, t)| *t)
}
