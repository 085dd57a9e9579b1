//! `lachesis`: the per-node metering agent and its operator commands (DESIGN §14).

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod plan_cmd;
mod sim_cmd;

#[derive(Debug, Parser)]
#[command(
    name = "lachesis",
    version,
    about = "Per-node OpenStack traffic metering agent"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the metering daemon.
    Agent(lachesis_agent::config::AgentArgs),
    /// Print the desired kernel state for a cloud or a folder of API responses.
    Plan(plan_cmd::PlanArgs),
    /// Serve a simulated OpenStack API from a topology file.
    Sim(sim_cmd::SimArgs),
    /// Run the whole system on this machine with no cloud.
    Demo,
}

fn main() -> ExitCode {
    match run(&Cli::parse()) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("lachesis: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

#[allow(clippy::unnecessary_wraps)] // the commands that land next return errors
fn run(cli: &Cli) -> anyhow::Result<ExitCode> {
    let what = match cli.command {
        Command::Sim(ref args) => return sim_cmd::run(args),
        Command::Agent(ref args) if args.check_config => {
            return Ok(lachesis_agent::config::check_config(args))
        }
        Command::Agent(_) => "agent",
        Command::Plan(ref args) => return plan_cmd::run(args),
        Command::Demo => "demo",
    };
    eprintln!("lachesis {what}: not built yet (see the open issues); nothing was done");
    Ok(ExitCode::from(2))
}
