//! Root: the agent end to end in network namespaces, BPF on its taps.
//! Each test moves its thread into a namespace of its own (`isolate`) or
//! names everything it makes after the process and a counter: the tests of
//! this one binary run side by side on several threads.

mod agent_e2e;
mod debug_pages;
#[cfg(feature = "demo")]
mod demo;
mod instances;
mod links;
mod startup;
