//! One `tracing` setup for every subcommand: logs go to standard error, as
//! text or one JSON object per line. The filter: `--log-level`, else
//! `RUST_LOG`, else (the agent, once its configuration is loaded) the
//! configured `log.level`, else `info`.

use std::io::IsTerminal as _;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Args;
use lachesis_agent::config::{LogFormat, LogLevel};
use lachesis_agent::http::{LogFilter, LogLevelControl, TrackedLevel};
use tracing_subscriber::reload::Handle;
use tracing_subscriber::EnvFilter;

/// The global logging flags (accepted before or after the subcommand).
#[derive(Debug, Args)]
#[command(next_help_heading = "Logging (every subcommand)")]
pub struct LogArgs {
    /// Most verbose level logged. Without it, `RUST_LOG` (tracing's
    /// directive syntax, e.g. `warn,lachesis_openstack=debug`) filters when
    /// set, else `info`.
    #[arg(long, global = true, value_enum, value_name = "LEVEL")]
    pub log_level: Option<LogLevel>,
    /// Log line format on standard error.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// `RUST_LOG` when it says something (a blank one is unset).
fn rust_log_set(rust_log: Option<String>) -> Option<String> {
    rust_log.filter(|s| !s.trim().is_empty())
}

/// The filter for a level. At `info` the Kafka client's own retry lines
/// (several a second while a broker is down) are held to warnings, and
/// below `debug` the AMQP client says nothing: it logs three errors for
/// every refused login or missing vhost, at every retry, where the
/// consumer logs one per change of state, naming the host and the reason.
/// `debug` and `trace` show both.
fn level_directives(level: LogLevel) -> String {
    match level {
        LogLevel::Info => "info,rskafka=warn,lapin=off".to_owned(),
        LogLevel::Warn | LogLevel::Error => format!("{},lapin=off", level.as_str()),
        other => other.as_str().to_owned(),
    }
}

/// The filter directives at start: the flag, else `RUST_LOG`, else `info`.
fn directives(level: Option<LogLevel>, rust_log: Option<String>) -> String {
    match (level, rust_log_set(rust_log)) {
        (Some(level), _) => level_directives(level),
        (None, Some(env)) => env,
        (None, None) => level_directives(LogLevel::Info),
    }
}

/// The level to apply once the agent's configuration is loaded: its
/// `log.level` (file, `LACHESIS_LOG__LEVEL`, `--set`), unless the flag or
/// `RUST_LOG` already chose the filter at [`init`].
#[must_use]
pub fn configured_level(
    flag: Option<LogLevel>,
    rust_log: Option<String>,
    configured: LogLevel,
) -> Option<LogLevel> {
    if flag.is_some() || rust_log_set(rust_log).is_some() {
        return None;
    }
    Some(configured)
}

/// Installs the process-wide subscriber and returns the control that
/// replaces its filter (`PUT /debug/log-level`, a reloaded `log.level`).
/// Fails on a malformed `RUST_LOG`.
pub fn init(args: &LogArgs) -> anyhow::Result<Arc<dyn LogLevelControl>> {
    let rust_log = std::env::var("RUST_LOG").ok();
    let initial = initial_filter(args.log_level, rust_log.clone());
    let text = directives(args.log_level, rust_log);
    let filter = EnvFilter::builder()
        .parse(&text)
        .with_context(|| format!("RUST_LOG={text:?} is not a tracing filter (e.g. `warn` or `info,lachesis_openstack=debug`)"))?;
    // The handle's type names the formatter: one builder per format.
    let (installed, control) = match args.log_format {
        LogFormat::Text => {
            let builder = tracing_subscriber::fmt()
                .with_writer(std::io::stderr)
                .with_ansi(std::io::stderr().is_terminal())
                .with_env_filter(filter)
                .with_filter_reloading();
            let control = control(builder.reload_handle(), initial.clone());
            (builder.try_init(), control)
        }
        LogFormat::Json => {
            let builder = tracing_subscriber::fmt()
                .with_writer(std::io::stderr)
                .json()
                .with_env_filter(filter)
                .with_filter_reloading();
            let control = control(builder.reload_handle(), initial.clone());
            (builder.try_init(), control)
        }
    };
    installed.map_err(|e| anyhow::anyhow!("installing the log subscriber: {e}"))?;
    Ok(control)
}

/// What [`directives`] installs, as `GET /debug/log-level` reports it.
fn initial_filter(level: Option<LogLevel>, rust_log: Option<String>) -> LogFilter {
    match (level, rust_log_set(rust_log)) {
        (Some(level), _) => LogFilter::Level(level),
        (None, Some(env)) => LogFilter::Directives(env),
        (None, None) => LogFilter::Level(LogLevel::Info),
    }
}

/// The log-level control over a reloadable filter, starting at `initial`.
fn control<S: 'static>(handle: Handle<EnvFilter, S>, initial: LogFilter) -> Arc<dyn LogLevelControl>
where
    Handle<EnvFilter, S>: Send + Sync,
{
    Arc::new(TrackedLevel::new(initial, move |level: LogLevel| {
        handle
            .reload(EnvFilter::new(level_directives(level)))
            .map_err(|e| e.to_string())
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_wins_over_rust_log_which_wins_over_the_default() {
        assert_eq!(
            directives(Some(LogLevel::Warn), Some("debug".into())),
            "warn,lapin=off"
        );
        assert_eq!(directives(None, Some("a=debug".into())), "a=debug");
        assert_eq!(
            directives(None, Some("  ".into())),
            "info,rskafka=warn,lapin=off"
        );
        assert_eq!(directives(None, None), "info,rskafka=warn,lapin=off");
        assert_eq!(directives(Some(LogLevel::Debug), None), "debug");
    }

    #[test]
    fn the_filter_reported_is_the_one_installed() {
        assert_eq!(
            initial_filter(Some(LogLevel::Warn), Some("debug".into())),
            LogFilter::Level(LogLevel::Warn)
        );
        assert_eq!(
            initial_filter(None, Some("a=debug".into())),
            LogFilter::Directives("a=debug".into())
        );
        assert_eq!(
            initial_filter(None, Some(" ".into())),
            LogFilter::Level(LogLevel::Info)
        );
        assert_eq!(initial_filter(None, None), LogFilter::Level(LogLevel::Info));
    }

    #[test]
    fn the_configured_level_applies_only_when_neither_flag_nor_rust_log_chose() {
        use LogLevel::{Debug, Error, Warn};
        assert_eq!(configured_level(None, None, Debug), Some(Debug));
        assert_eq!(configured_level(None, Some(" ".into()), Error), Some(Error));
        assert_eq!(configured_level(None, Some("trace".into()), Debug), None);
        assert_eq!(configured_level(Some(Warn), None, Debug), None);
        assert_eq!(
            configured_level(Some(Warn), Some("trace".into()), Debug),
            None
        );
    }
}
