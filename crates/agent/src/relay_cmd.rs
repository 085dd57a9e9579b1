//! `lachesis relay` (DESIGN §17): flags, `--check-config`, signals; the
//! relay crate does the work.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use lachesis_agent::config::{parse_log_level, ConfigError, Flags, Issue};
use lachesis_agent::http::LogLevelControl;
use lachesis_listen::Web;
use lachesis_relay::{config, serve, RabbitPublisher, ServeError};
use tokio::signal::unix::{signal, SignalKind};
use tokio_util::sync::CancellationToken;

/// `lachesis relay` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct RelayArgs {
    /// Configuration file [default: /etc/lachesis/relay.yaml; if that is
    /// absent, defaults, with the required stream.url from the environment
    /// or --set]. A file named here must exist.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Check the configuration (file, LACHESIS_* environment, flags),
    /// print the effective configuration with secrets redacted, and exit:
    /// 0 if valid, 2 if not.
    #[arg(long)]
    pub check_config: bool,
    /// Set a key over the file and the environment, e.g.
    /// `--set relay.digest_interval=1m` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

/// Runs `lachesis relay` until SIGTERM or SIGINT (exit 0); SIGHUP re-reads
/// `listen.web_config_file`.
pub fn run(
    args: &RelayArgs,
    log_flag: Option<lachesis_agent::config::LogLevel>,
    log: &Arc<dyn LogLevelControl>,
) -> anyhow::Result<ExitCode> {
    let flags = Flags {
        set: args.set.clone(),
        log_level: log_flag.map(|l| l.as_str().to_owned()),
    };
    // What `listen.web_config_file` names must load, as for the agent
    // (exit 2 naming the key, at start and at --check-config).
    let loaded = config::load(args.config.clone(), std::env::vars_os(), &flags).and_then(|l| {
        let web = Web::from_setting(l.config.listen.web_config_file.as_deref()).map_err(|e| {
            ConfigError::from(vec![Issue::new("listen.web_config_file", e.to_string())])
        })?;
        Ok((l, web))
    });
    if args.check_config {
        let loaded = loaded.map(|(l, _)| l);
        let (out, err, code) = config::check_report(&loaded);
        print!("{out}");
        eprint!("{err}");
        return Ok(ExitCode::from(code));
    }
    let (loaded, web) = loaded?;
    let level = parse_log_level(&loaded.config.log.level)
        .map_err(|e| ConfigError::from(vec![Issue::new("log.level", e)]))?;
    let runtime = crate::daemon_start(log_flag, level, log)?;
    let served = runtime.block_on(async {
        let cancel = CancellationToken::new();
        let mut term = signal(SignalKind::terminate()).context("waiting for SIGTERM")?;
        let mut hup = signal(SignalKind::hangup()).context("waiting for SIGHUP")?;
        let relay = async {
            let mut stream = loaded.config.stream.clone();
            // Relays of a cluster's brokers spread over its nodes.
            stream.first_host = fastrand::usize(..stream.url.hosts().len().max(1));
            let publisher = RabbitPublisher::new(stream);
            let served = Box::pin(serve(
                &loaded.config,
                web.clone(),
                publisher,
                cancel.clone(),
            ))
            .await;
            cancel.cancel();
            served
        };
        let stop = async {
            loop {
                tokio::select! {
                    _ = term.recv() => break,
                    _ = tokio::signal::ctrl_c() => break,
                    () = cancel.cancelled() => break,
                    // SIGHUP re-reads listen.web_config_file (logged and
                    // counted there); the rest is read once at start.
                    _ = hup.recv() => {
                        let _ = web.reload();
                    }
                }
            }
            cancel.cancel();
        };
        let (served, ()) = tokio::join!(relay, stop);
        anyhow::Ok(served)
    })?;
    match served {
        Ok(()) => Ok(ExitCode::SUCCESS),
        // What the configuration names and does not resolve is a
        // configuration error (exit 2), as for the agent.
        Err(e @ (ServeError::Cloud(_) | ServeError::Notifications { .. })) => {
            let text = e.to_string();
            let (key, message) = text.split_once(": ").unwrap_or(("openstack", &text));
            Err(ConfigError::from(vec![Issue::new(key, message)]).into())
        }
        Err(e) => Err(e.into()),
    }
}
