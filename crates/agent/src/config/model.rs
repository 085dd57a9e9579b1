//! The validated configuration the agent runs with. Built only by
//! [`super::Config::parse`] (or [`Default`]), so every value here has passed
//! its checks.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use lachesis_datapath::{AttachMode, DatapathConfig};
use lachesis_ledger::UnresolvedLimits;
use lachesis_planner::PlanOptions;

use super::layers::Override;
use lachesis_notify::RabbitUrl;

use super::secret::Secret;

/// The whole configuration (DESIGN §13).
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// `openstack.*`
    pub openstack: OpenStackSettings,
    /// `listen.*`
    pub listen: ListenSettings,
    /// `datapath.*`
    pub datapath: DatapathSettings,
    /// `state.*`
    pub state: StateSettings,
    /// `notifications.*`
    pub notifications: NotificationSettings,
    /// `tunables.*`: the hot-reloadable snapshot.
    pub tunables: Tunables,
    /// `log.*`
    pub log: LogSettings,
    /// The environment and flag layers this was built with, re-applied over
    /// the file at every reload.
    pub(crate) overrides: Vec<Override>,
}

impl Default for Config {
    fn default() -> Self {
        Config::parse(None, Vec::new()).expect("the defaults table is valid (tested)")
    }
}

/// `openstack.*`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenStackSettings {
    /// Entry of `clouds.yaml`; `None`: `OS_CLOUD` or the `OS_*` variables.
    pub cloud: Option<String>,
    /// Explicit `clouds.yaml`; `None`: the standard search path.
    pub clouds_file: Option<PathBuf>,
}

/// `listen.*`
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenSettings {
    /// `/metrics`, `/healthz`, `/readyz`.
    pub metrics: SocketAddr,
    /// `/debug/…` (loopback unless deliberately configured otherwise).
    pub debug: SocketAddr,
}

/// `datapath.*`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatapathSettings {
    /// Interface name prefixes to meter.
    pub interface_prefixes: Vec<String>,
    /// Extra interfaces to meter by exact name.
    pub interfaces: Vec<String>,
    /// Our bpffs directory.
    pub bpffs_dir: PathBuf,
    /// Kernel memory budget for `flows`, bytes (DESIGN §4.5).
    pub flows_memory_budget: u64,
    /// TCX, cls_bpf, or the best the kernel offers.
    pub attach_mode: AttachMode,
}

impl DatapathSettings {
    /// Whether an interface of this name is metered.
    #[must_use]
    pub fn matches(&self, ifname: &str) -> bool {
        self.interfaces.iter().any(|n| n == ifname)
            || self
                .interface_prefixes
                .iter()
                .any(|p| ifname.starts_with(p.as_str()))
    }

    /// The datapath crate's setup for these settings.
    #[must_use]
    pub fn datapath_config(&self) -> DatapathConfig {
        DatapathConfig {
            bpffs_dir: self.bpffs_dir.clone(),
            flows_memory_budget: self.flows_memory_budget,
            flows_max_entries: None,
            attach_mode: self.attach_mode,
        }
    }
}

/// `state.*`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateSettings {
    /// The state file (DESIGN §11).
    pub path: PathBuf,
}

/// `notifications.*`: each transport is off when `None`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NotificationSettings {
    /// `notifications.rabbitmq.*`
    pub rabbitmq: Option<RabbitMqSettings>,
    /// `notifications.kafka.*`
    pub kafka: Option<KafkaSettings>,
}

/// `notifications.rabbitmq.*` (DESIGN §8). TLS follows from the URL
/// (`amqps://`, or `?ssl=1` in an oslo transport URL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RabbitMqSettings {
    /// The brokers (an oslo transport URL or an AMQP URI, each with one or
    /// more hosts); every password is redacted wherever it is shown.
    pub url: RabbitUrl,
    /// Exchanges the agent's queue is bound to.
    pub exchanges: Vec<String>,
    /// Whether those exchanges are durable (must match their declaration).
    pub durable: bool,
    /// CA bundle for TLS; `None`: the system roots.
    pub ca_file: Option<PathBuf>,
}

/// `notifications.kafka.*` (DESIGN §8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaSettings {
    /// Bootstrap brokers, `host:port`.
    pub brokers: Vec<String>,
    /// The notifications topic.
    pub topic: String,
    /// TLS; `None`: plaintext.
    pub tls: Option<KafkaTls>,
    /// SASL; `None`: no authentication.
    pub sasl: Option<KafkaSasl>,
}

/// `notifications.kafka.tls.*` with `enabled: true`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaTls {
    /// CA bundle; `None`: the system roots.
    pub ca_file: Option<PathBuf>,
    /// Client certificate and key, for mutual TLS.
    pub client: Option<ClientCert>,
}

/// A client certificate and its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCert {
    /// PEM certificate (chain).
    pub cert_file: PathBuf,
    /// PEM private key.
    pub key_file: PathBuf,
}

/// `notifications.kafka.sasl.*`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaSasl {
    /// The SASL mechanism.
    pub mechanism: SaslMechanism,
    /// User name.
    pub username: String,
    /// Password (redacted wherever it is shown).
    pub password: Secret,
}

/// SASL mechanisms a Kafka broker offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaslMechanism {
    /// `PLAIN`: the password crosses the wire (use TLS).
    Plain,
    /// `SCRAM-SHA-256`.
    ScramSha256,
    /// `SCRAM-SHA-512`.
    ScramSha512,
}

impl SaslMechanism {
    /// In the order of [`super::keys::SASL_MECHANISMS`].
    pub const ALL: [SaslMechanism; 3] = [
        SaslMechanism::Plain,
        SaslMechanism::ScramSha256,
        SaslMechanism::ScramSha512,
    ];

    /// The configuration spelling.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "plain",
            SaslMechanism::ScramSha256 => "scram-sha-256",
            SaslMechanism::ScramSha512 => "scram-sha-512",
        }
    }
}

/// The hot-reloadable tunables (DESIGN §13): one snapshot, swapped whole by
/// a reload and read at each use.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tunables {
    /// Drain period.
    pub scrape_interval: Duration,
    /// Reconcile period without a kick.
    pub reconcile_interval: Duration,
    /// Quiet window after a kick (at most 5 s).
    pub kick_debounce: Duration,
    /// How long a ghost binding is kept.
    pub ghost_grace: Duration,
    /// Ghost sweep period.
    pub ghost_sweep_interval: Duration,
    /// State file flush period.
    pub state_flush_interval: Duration,
    /// `flows` fill that starts pressure relief (below 1.0).
    pub pressure_high_watermark: f64,
    /// `flows` fill that pressure relief evicts down to (below the high one).
    pub pressure_low_watermark: f64,
    /// Most entries one relief pass evicts.
    pub pressure_max_evictions: u32,
    /// Unresolved buffer capacity.
    pub unresolved_cap: usize,
    /// Unresolved buffer TTL.
    pub unresolved_ttl: Duration,
    /// Static-route resolver hop limit.
    pub route_hop_limit: u32,
    /// How long the port series of a swept binding stays, flat, so the
    /// port bound again continues it (docs/ledger.md, "Returning port
    /// series"); 0 ends it at the sweep.
    pub port_series_retention: Duration,
    /// A notification gap's pass waits a random time up to this
    /// (DESIGN §17): a broker restart must not make a fleet sync at once.
    pub resync_spread: Duration,
}

impl Tunables {
    /// The ledger's unresolved-buffer limits.
    #[must_use]
    pub fn unresolved_limits(&self) -> UnresolvedLimits {
        UnresolvedLimits {
            capacity: self.unresolved_cap,
            ttl_ns: u64::try_from(self.unresolved_ttl.as_nanos()).unwrap_or(u64::MAX),
        }
    }

    /// The planner's options.
    #[must_use]
    pub fn plan_options(&self) -> PlanOptions {
        PlanOptions {
            hop_limit: self.route_hop_limit,
        }
    }
}

/// `log.*`
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogSettings {
    /// Least severe level written (hot-reloadable).
    pub level: LogLevel,
    /// Line format (restart-only).
    pub format: LogFormat,
}

/// Log levels, most to least severe (`log.level`, and every subcommand's
/// `--log-level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum LogLevel {
    /// Failures only.
    Error,
    /// And conditions an operator should look at.
    Warn,
    /// And lifecycle events (the default).
    Info,
    /// And per-pass detail.
    Debug,
    /// Everything.
    Trace,
}

impl LogLevel {
    /// In the order of [`super::keys::LOG_LEVELS`].
    pub const ALL: [LogLevel; 5] = [
        LogLevel::Error,
        LogLevel::Warn,
        LogLevel::Info,
        LogLevel::Debug,
        LogLevel::Trace,
    ];

    /// The configuration spelling.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Error => "error",
            LogLevel::Warn => "warn",
            LogLevel::Info => "info",
            LogLevel::Debug => "debug",
            LogLevel::Trace => "trace",
        }
    }
}

/// Log line formats (`log.format`, and every subcommand's `--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable `key=value` lines.
    Text,
    /// One JSON object per line.
    Json,
}

impl LogFormat {
    /// In the order of [`super::keys::LOG_FORMATS`].
    pub const ALL: [LogFormat; 2] = [LogFormat::Text, LogFormat::Json];

    /// The configuration spelling.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            LogFormat::Text => "text",
            LogFormat::Json => "json",
        }
    }
}

/// Attach modes in the order of [`super::keys::ATTACH_MODES`].
pub const ATTACH_MODES_ALL: [AttachMode; 3] = [AttachMode::Auto, AttachMode::Tcx, AttachMode::Tc];

/// The configuration spelling of an attach mode.
#[must_use]
pub fn attach_mode_str(mode: AttachMode) -> &'static str {
    match mode {
        AttachMode::Auto => "auto",
        AttachMode::Tcx => "tcx",
        AttachMode::Tc => "tc",
    }
}

#[cfg(test)]
mod tests {
    use super::super::keys::{ATTACH_MODES, LOG_FORMATS, LOG_LEVELS, SASL_MECHANISMS};
    use super::*;

    /// Each choice key's words and its enum agree position by position (the
    /// parser maps a word to the variant at its index).
    #[test]
    fn choice_words_match_the_enums() {
        assert_eq!(LogLevel::ALL.map(LogLevel::as_str), LOG_LEVELS);
        assert_eq!(LogFormat::ALL.map(LogFormat::as_str), LOG_FORMATS);
        assert_eq!(
            SaslMechanism::ALL.map(SaslMechanism::as_str),
            SASL_MECHANISMS
        );
        assert_eq!(ATTACH_MODES_ALL.map(attach_mode_str), ATTACH_MODES);
    }
}
