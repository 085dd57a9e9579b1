//! Writes the benchmarks' generated cloud as a topology file, for `lachesis
//! sim --topology` (the `lachesis` binary leaves the generator out):
//!
//! ```text
//! cargo run -p lachesis-sim --example generate -- large > large.yaml
//! lachesis sim --topology large.yaml
//! ```

use std::io::Write as _;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args != ["large"] {
        eprintln!(
            "usage: generate large   (the benchmarks' cloud: {} ports, {} routers; YAML on standard output)",
            lachesis_sim::generate::PORTS,
            lachesis_sim::generate::ROUTERS
        );
        return ExitCode::from(2);
    }
    let yaml = match serde_saphyr::to_string(&lachesis_sim::generate::large()) {
        Ok(y) => y,
        Err(e) => {
            eprintln!("generate: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = std::io::stdout().lock().write_all(yaml.as_bytes()) {
        eprintln!("generate: writing: {e}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
