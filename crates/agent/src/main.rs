//! `lachesis`: the per-node metering agent and its operator commands (DESIGN §14).
//!
//! Exit status, the same for every subcommand (README "Exit status";
//! `lachesis_agent::exit`): 0 success, 1 failure, 2 usage or configuration
//! error, 3 `plan` printed a partial plan.

use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};

mod logging;
mod plan_cmd;
mod plan_table;
mod relay_cmd;
#[cfg(feature = "sim")]
mod sim_cmd;

use lachesis_agent::config::ConfigError;
pub use lachesis_agent::exit::PARTIAL as EXIT_PARTIAL;
use lachesis_agent::exit::{CONFIG as EXIT_USAGE, FAILURE as EXIT_FAILURE};

/// What `--version` prints after the name: `0.1.0 (revision 412acf8b19ea)`.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (revision ",
    env!("LACHESIS_REVISION"),
    ")"
);

#[derive(Debug, Parser)]
#[command(
    name = "lachesis",
    // `lachesis --version`: the package version and the commit it was built
    // from, the same pair `lachesis_build_info{version,revision}` exports
    // (build.rs; `LACHESIS_REVISION` for a build without git).
    version = VERSION,
    propagate_version = true,
    about = "Per-node OpenStack traffic metering agent"
)]
struct Cli {
    #[command(flatten)]
    log: logging::LogArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the metering daemon.
    Agent(lachesis_agent::config::AgentArgs),
    /// Print the desired kernel state for a cloud or a folder of API responses.
    Plan(plan_cmd::PlanArgs),
    /// Run the fleet relay: OpenStack to the state stream (DESIGN §17).
    Relay(relay_cmd::RelayArgs),
    /// Serve a simulated OpenStack API from a topology file.
    #[cfg(feature = "sim")]
    Sim(sim_cmd::SimArgs),
    /// Run the whole system on this machine with no cloud (root).
    #[cfg(feature = "demo")]
    Demo(lachesis_demo::DemoArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let log = match logging::init(&cli.log) {
        Ok(log) => log,
        Err(err) => {
            eprintln!("lachesis: error: {err:#}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    match run(&cli, log) {
        Ok(code) => code,
        Err(err) => {
            // Usage errors found after parsing print like clap's own.
            if let Some(usage) = err.downcast_ref::<clap::Error>() {
                let _ = usage.print();
                return ExitCode::from(EXIT_USAGE);
            }
            // A configuration error prints as `--check-config` prints it:
            // one line per problem, each naming its key.
            if let Some(config) = err.downcast_ref::<ConfigError>() {
                // What was being read, when a caller said (`plan --config`
                // names its file).
                let context: Vec<String> = err
                    .chain()
                    .take_while(|e| !e.is::<ConfigError>())
                    .map(ToString::to_string)
                    .collect();
                let context = if context.is_empty() {
                    String::new()
                } else {
                    format!("{}: ", context.join(": "))
                };
                for issue in &config.issues {
                    eprintln!("lachesis: config error: {context}{issue}");
                }
                return ExitCode::from(EXIT_USAGE);
            }
            // `{:#}` prints the context chain; each error of the chain
            // carries its cause's text exactly once.
            eprintln!("lachesis: error: {err:#}");
            ExitCode::from(EXIT_FAILURE)
        }
    }
}

fn run(
    cli: &Cli,
    log: std::sync::Arc<dyn lachesis_agent::http::LogLevelControl>,
) -> anyhow::Result<ExitCode> {
    match cli.command {
        #[cfg(feature = "sim")]
        Command::Sim(ref args) => sim_cmd::run(args),
        #[cfg(feature = "demo")]
        Command::Demo(ref args) => {
            let exe = std::env::current_exe().context("locating the lachesis binary")?;
            lachesis_demo::run(args, &exe)
        }
        Command::Agent(ref args) if args.check_config => {
            let mut args = args.clone();
            args.log_level = cli.log.log_level.map(|l| l.as_str().to_owned());
            Ok(lachesis_agent::config::check_config(&args))
        }
        Command::Agent(ref args) => {
            let mut args = args.clone();
            args.log_level = cli.log.log_level.map(|l| l.as_str().to_owned());
            let loaded = args.load()?;
            let runtime = daemon_start(cli.log.log_level, loaded.config.log.level, &log)?;
            runtime.block_on(lachesis_agent::daemon::run(loaded, log))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Plan(ref args) => plan_cmd::run(args),
        Command::Relay(ref args) => relay_cmd::run(args, cli.log.log_level, &log),
    }
}

/// What a daemon (`agent`, `relay`) does before it runs: its configured
/// log level applied unless `--log-level` or `RUST_LOG` said otherwise, and
/// the async runtime.
pub fn daemon_start(
    flag: Option<lachesis_agent::config::LogLevel>,
    configured: lachesis_agent::config::LogLevel,
    log: &std::sync::Arc<dyn lachesis_agent::http::LogLevelControl>,
) -> anyhow::Result<tokio::runtime::Runtime> {
    if let Some(level) = logging::configured_level(flag, std::env::var("RUST_LOG").ok(), configured)
    {
        log.set_level(level)
            .map_err(|e| anyhow::anyhow!("applying log.level: {e}"))?;
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// A usage error found after parsing, formatted like clap's (exit 2).
pub fn usage_error(subcommand: &str, message: impl std::fmt::Display) -> anyhow::Error {
    use clap::CommandFactory as _;
    let mut cli = Cli::command();
    cli.build();
    let mut cmd = cli.find_subcommand(subcommand).cloned().unwrap_or(cli);
    anyhow::Error::new(cmd.error(clap::error::ErrorKind::MissingRequiredArgument, message))
}
