//! Root: BPF program test-runs, attach, network namespaces. Each test's
//! names (veths, labs, bpffs directories) carry the process id and a
//! counter, or the test runs in a namespace of its own: the tests of this
//! one binary run side by side on several threads.

mod classifier;
mod debian12_kernel;
mod ingress_qdisc;
mod interfaces;
mod lookup_delete;
mod netns;
mod ownership;
mod sizing;
mod verdict;
