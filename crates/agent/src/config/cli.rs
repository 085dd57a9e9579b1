//! The agent's configuration flags and `lachesis agent --check-config`.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use lachesis_config::layered::ConfigError;
use lachesis_config::layered::Flags;

use super::load::{config_file, load, Loaded, DEFAULT_CONFIG_PATH};

/// `lachesis agent` flags.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct AgentArgs {
    /// Configuration file [default: /etc/lachesis/lachesis.yaml; if that is
    /// absent, all defaults]. A file named here must exist.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Check the configuration (file, LACHESIS_* environment, flags) and
    /// what it refers to (the cloud entry and its clouds file, TLS files,
    /// the bpffs dir), print the effective configuration with secrets
    /// redacted, and exit: 0 if valid, 2 if not.
    #[arg(long)]
    pub check_config: bool,
    /// With --check-config: also authenticate once against the cloud's
    /// Keystone and find the endpoints the agent uses in the token's
    /// catalog (exit 2 if the credentials are refused, 1 if Keystone
    /// cannot be reached).
    #[arg(long, requires = "check_config")]
    pub check_openstack: bool,
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
            config_file(self.config.clone()),
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
    /// 0 valid, [`crate::exit::CONFIG`] invalid.
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
                code: crate::exit::CONFIG,
            }
        }
    }
}

/// `lachesis agent --check-config`: the configuration, then what it refers
/// to (`crate::preflight`), then with `--check-openstack` one
/// authentication; prints the report, returns its code.
#[must_use]
pub fn check_config(args: &AgentArgs) -> ExitCode {
    let checked = args.load().and_then(|loaded| {
        let resolved = crate::preflight::resolve(&loaded.config)?;
        Ok((loaded, resolved))
    });
    let mut report = check_report(
        &checked
            .as_ref()
            .map(|(l, _)| l.clone())
            .map_err(Clone::clone),
    );
    if let Ok((_, resolved)) = &checked {
        // The cloud entry, under the header line.
        let at = report.stdout.find('\n').map_or(0, |i| i + 1);
        let source = if resolved.cloud.is_some() {
            "openstack"
        } else {
            "metadata"
        };
        report
            .stdout
            .insert_str(at, &format!("# {source}: {}\n", resolved.origin));
        if args.check_openstack {
            let (lines, code) = check_openstack(resolved);
            report.stderr.push_str(&lines);
            report.code = code;
        }
    }
    print!("{}", report.stdout);
    eprint!("{}", report.stderr);
    ExitCode::from(report.code)
}

/// One token from the cloud's Keystone and the endpoints a sync uses from
/// its catalog: what each looked like, and the exit code (2: the cloud's
/// configuration is wrong — credentials refused, an endpoint the agent
/// needs missing for the configured interface and region; 1: Keystone
/// could not be asked).
fn check_openstack(resolved: &crate::preflight::Resolved) -> (String, u8) {
    use lachesis_openstack::{client::Session, ApiMetrics};
    let mut out = String::new();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            return (
                format!("lachesis: error: starting the async runtime: {e}\n"),
                crate::exit::FAILURE,
            )
        }
    };
    let origin = &resolved.origin;
    let Some(cloud) = resolved.cloud.clone() else {
        return (
            format!(
                "lachesis: config error: metadata.source: relay: this agent makes no OpenStack \
                 request, so --check-openstack has nothing to check ({origin})\n"
            ),
            crate::exit::CONFIG,
        );
    };
    let code = runtime.block_on(async {
        let session = match Session::new(cloud, ApiMetrics::default()) {
            Ok(s) => s,
            Err(e) => {
                let _ = writeln!(out, "lachesis: config error: openstack.cloud: {origin}: {e}");
                return crate::exit::CONFIG;
            }
        };
        if let Err(e) = session.token().await {
            return if matches!(e.status(), Some(401 | 403)) {
                let _ = writeln!(
                    out,
                    "lachesis: config error: openstack.cloud: Keystone refused the credentials of {origin}: {e}"
                );
                crate::exit::CONFIG
            } else {
                let _ = writeln!(out, "lachesis: error: authenticating with {origin}: {e}");
                crate::exit::FAILURE
            };
        }
        let _ = writeln!(out, "lachesis: openstack: authenticated with {origin}");
        let mut code = 0;
        // Neutron and Keystone are all-or-nothing in a sync; Nova and
        // Octavia best-effort (DESIGN §5).
        for (service, needed) in [
            ("identity", true),
            ("network", true),
            ("compute", false),
            ("load-balancer", false),
        ] {
            match session.endpoint(service).await {
                Ok(url) => {
                    let _ = writeln!(out, "lachesis: openstack: {service} endpoint {url}");
                }
                Err(e) if needed => {
                    let _ = writeln!(out, "lachesis: config error: openstack.cloud: {origin}: {e}");
                    code = crate::exit::CONFIG;
                }
                Err(e) => {
                    let _ = writeln!(
                        out,
                        "lachesis: warning: openstack: {e} (a best-effort list: the agent runs without it)"
                    );
                }
            }
        }
        code
    });
    (out, code)
}
