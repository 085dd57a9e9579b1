//! `lachesis demo` (DESIGN §14): the whole system on one machine with no
//! cloud. The simulator serves the bundled topology
//! (`examples/demo-topology.yaml`), network namespaces play every VM,
//! router and the internet (`world`, `net`), the real agent counts the
//! taps' traffic in the kernel (`agent`), flows of every zone run
//! between the hosts (`traffic`), and a live view reads the agent's own
//! `/metrics` (`metrics`, `view`). Scenario steps (`scenario`) change
//! the cloud while it runs; `--check` runs them and compares every series
//! with the taps' own counters (`truth`). Everything the run creates
//! carries its pid and is removed on exit, Ctrl-C and SIGTERM, or by the
//! next run after a crash (`cleanup`). Guide: docs/demo.md.

//!
//! By what it does: `lifecycle` (start everything, stop and clean up
//! whatever ends the run), `session` (one running demo's state, in four
//! locks), `live` (the view and the keys), `check` (`--check`'s verdict);
//! the rest are the parts they use. Only [`DemoArgs`] and [`run`] are
//! public: the `lachesis demo` subcommand.

#![deny(missing_docs)]

mod agent;
mod check;
mod cleanup;
mod lifecycle;
mod live;
mod metrics;
mod net;
mod scenario;
mod session;
mod traffic;
mod truth;
mod tui;
mod view;
mod world;

use std::path::Path;
use std::process::ExitCode;

/// The bundled topology.
const TOPOLOGY: &str = include_str!("../../../examples/demo-topology.yaml");

/// Arguments of `lachesis demo`.
#[derive(Debug, Clone, clap::Args)]
pub struct DemoArgs {
    /// Run the scenario steps unattended (one every `--step-every`), then exit.
    #[arg(long)]
    pub script: bool,
    /// Run the scripted scenario at a fast pace, then compare every tenant
    /// and port series with the taps' own interface counters and check no
    /// series went down: exit 0 only when all of it holds.
    #[arg(long, conflicts_with = "script")]
    pub check: bool,
    /// Plain periodic lines even when standard output is a terminal.
    #[arg(long)]
    pub plain: bool,
    /// Seconds between scenario steps with `--script`.
    #[arg(long, default_value_t = 15, value_name = "SECS")]
    pub step_every: u64,
}

/// Runs the demo; `exe` is the `lachesis` binary (the agent is started
/// from it).
///
/// # Errors
/// Not root, or something could not be built or started (everything the
/// run made is removed first).
pub fn run(args: &DemoArgs, exe: &Path) -> anyhow::Result<ExitCode> {
    lifecycle::run(args, exe)
}
