//! The agent's configuration flags and `lachesis agent --check-config`.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use super::error::ConfigError;
use super::load::{load, ConfigFile, Flags, Loaded, DEFAULT_CONFIG_PATH};

/// `lachesis agent` flags.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct AgentArgs {
    /// Configuration file [default: /etc/lachesis/lachesis.yaml; if that is
    /// absent, all defaults]. A file named here must exist.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Check the configuration (file, LACHESIS_* environment, flags), print
    /// the effective configuration with secrets redacted, and exit: 0 if
    /// valid, 1 if not.
    #[arg(long)]
    pub check_config: bool,
    /// The global `--log-level` (every subcommand takes it, so the binary
    /// fills this in); it wins over `log.level`.
    #[arg(skip)]
    pub log_level: Option<String>,
    /// Set a key over the file and the environment, e.g.
    /// `--set tunables.scrape_interval=5s` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

impl AgentArgs {
    /// Loads the configuration these flags describe, with the process's
    /// environment.
    pub fn load(&self) -> Result<Loaded, ConfigError> {
        load(
            ConfigFile::new(self.config.clone()),
            std::env::vars_os(),
            &Flags {
                set: self.set.clone(),
                log_level: self.log_level.clone(),
            },
        )
    }
}

/// What `--check-config` prints, and its exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckReport {
    /// The effective configuration (valid) or nothing.
    pub stdout: String,
    /// Warnings (valid) or every error, each once (invalid).
    pub stderr: String,
    /// 0 valid, 1 invalid.
    pub code: u8,
}

/// The report for a load result.
#[must_use]
pub fn check_report(result: &Result<Loaded, ConfigError>) -> CheckReport {
    match result {
        Ok(loaded) => {
            let mut stdout = String::new();
            if loaded.file_found {
                let _ = writeln!(
                    stdout,
                    "# lachesis effective configuration (file {}; secrets redacted)",
                    loaded.file.path().display()
                );
            } else {
                let _ = writeln!(
                    stdout,
                    "# lachesis effective configuration (no {DEFAULT_CONFIG_PATH}: defaults; \
                     secrets redacted)"
                );
            }
            for (key, origin) in loaded.config.overridden() {
                let _ = writeln!(stdout, "# {key} set by {origin}");
            }
            stdout.push_str(&loaded.config.to_yaml());
            let mut stderr = String::new();
            for warning in loaded.config.warnings() {
                let _ = writeln!(stderr, "lachesis: warning: {warning}");
            }
            CheckReport {
                stdout,
                stderr,
                code: 0,
            }
        }
        Err(e) => {
            let mut stderr = String::new();
            for issue in &e.issues {
                let _ = writeln!(stderr, "lachesis: config error: {issue}");
            }
            CheckReport {
                stdout: String::new(),
                stderr,
                code: 1,
            }
        }
    }
}

/// `lachesis agent --check-config`: prints the report, returns its code.
#[must_use]
pub fn check_config(args: &AgentArgs) -> ExitCode {
    let report = check_report(&args.load());
    print!("{}", report.stdout);
    eprint!("{}", report.stderr);
    ExitCode::from(report.code)
}
