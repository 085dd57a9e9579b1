//! The configuration the agent runs with (DESIGN §13): one typed section
//! per component, one field per key with its doc, its default and its
//! value form. The datapath's and the notification consumers' sections are
//! their crates' own types. Built only by [`Config::parse`] (or
//! [`Default`]), so every value here has passed its checks.
//!
//! Which keys a reload applies follows this layout: [`HOT`] names the
//! parts swapped whole, everything else is read once at start.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::LazyLock;
use std::time::Duration;

use lachesis_config::{form, Choice, Schema};
use lachesis_datapath::{DatapathConfig, FLOWS_MAX_ENTRIES};
use lachesis_ledger::UnresolvedLimits;
use lachesis_notify::rabbitmq::stream::StreamConfig;
pub use lachesis_notify::NotificationSettings;
pub use lachesis_openstack::OpenStackSettings;
use lachesis_planner::PlanOptions;
use serde::{Deserialize, Serialize};
use serde_inline_default::serde_inline_default;
use serde_with::serde_as;

use lachesis_config::layered::{Layout, Override};

/// Most router hops a static route may be configured to take.
pub const ROUTE_HOP_LIMIT_MAX: u64 = 255;
/// Most rows the unresolved buffer may be configured to hold.
pub const UNRESOLVED_CAP_MAX: u64 = 10_000_000;

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping of configuration sections")]
pub struct Config {
    /// Which cloud the metadata comes from.
    #[serde(default)]
    pub openstack: OpenStackSettings,
    /// Where the desired state comes from: OpenStack itself, or a relay's
    /// state stream (DESIGN §17).
    #[serde(default)]
    pub metadata: MetadataSettings,
    /// The two HTTP listeners.
    #[serde(default)]
    pub listen: ListenSettings,
    /// Which interfaces are metered and how the kernel side is set up.
    #[serde(default)]
    pub datapath: DatapathConfig,
    /// The state file.
    #[serde(default)]
    pub state: StateSettings,
    /// Change notifications that trigger a reconcile early.
    #[serde(default)]
    pub notifications: NotificationSettings,
    /// Intervals and limits: the hot-reloadable snapshot.
    #[serde(default)]
    pub tunables: Tunables,
    /// Logging.
    #[serde(default)]
    pub log: LogSettings,
    /// The environment and flag layers this was built with, re-applied over
    /// the file at every reload.
    #[serde(skip)]
    pub(crate) overrides: Vec<Override>,
}

impl Default for Config {
    fn default() -> Self {
        lachesis_config::defaults()
    }
}

/// What a reload applies: the tunables, swapped whole, and the log level.
/// Every other key is read once at start (a change is warned about).
pub const HOT: &[&str] = &["tunables", "log.level"];

impl Config {
    /// Takes [`HOT`] from `new`.
    pub(crate) fn take_hot(&mut self, new: &Config) {
        self.tunables = new.tunables;
        self.log.level = new.log.level;
    }

    /// The effective configuration as YAML, every key present (unset ones
    /// as `null`), secrets redacted. Reads back to the same configuration
    /// except for the secrets.
    #[must_use]
    pub fn to_yaml(&self) -> String {
        serde_saphyr::to_string(self).expect("plain structs of scalars serialize")
    }
}

/// Every key and section of [`Config`], from its types.
pub(crate) static SCHEMA: LazyLock<Schema> = LazyLock::new(Schema::of::<Config>);

/// The agent's keys, and the one its messages give as an example.
pub(crate) static LAYOUT: LazyLock<Layout> = LazyLock::new(|| Layout {
    schema: &SCHEMA,
    example: "tunables.scrape_interval",
    example_value: "5s",
});

/// Whether a reload applies the key at `path`.
pub(crate) fn is_hot(path: &str) -> bool {
    HOT.iter()
        .any(|h| path == *h || path.strip_prefix(h).is_some_and(|r| r.starts_with('.')))
}

/// `metadata.*` (DESIGN §17, docs/fleet.md "An agent in relay mode").
#[serde_inline_default]
#[serde_as]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping of metadata keys")]
pub struct MetadataSettings {
    /// `openstack`: the agent syncs from OpenStack itself; `relay`: it
    /// reads a relay's state stream and makes no OpenStack request.
    #[serde_inline_default(MetadataSource::OpenStack)]
    #[serde_as(as = "form::OneOf")]
    pub source: MetadataSource,
    /// The state stream (the notify crate's section); required when
    /// `source` is `relay`, unused otherwise.
    pub stream: Option<StreamConfig>,
    /// How far back a boot reads the stream when no relay heartbeat names
    /// its newest snapshot: more than two of the
    /// relay's snapshot intervals, so a complete snapshot is in it.
    #[serde_inline_default(DEFAULT_LOOKBACK)]
    #[serde_as(as = "form::Duration")]
    pub lookback: Duration,
}

/// `metadata.lookback` unless configured: more than two snapshot intervals
/// of a relay writing one every 10 minutes (docs/fleet.md).
pub const DEFAULT_LOOKBACK: Duration = Duration::from_mins(25);

impl Default for MetadataSettings {
    fn default() -> Self {
        lachesis_config::defaults()
    }
}

/// Where the desired state comes from (`metadata.source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetadataSource {
    /// The agent's own syncs against Keystone, Neutron, Nova and Octavia.
    OpenStack,
    /// A relay's state stream (`metadata.stream`); no OpenStack request.
    Relay,
}

impl Choice for MetadataSource {
    const ALL: &'static [Self] = &[MetadataSource::OpenStack, MetadataSource::Relay];
    const LABEL: &'static str = "openstack | relay";

    fn word(self) -> &'static str {
        match self {
            MetadataSource::OpenStack => "openstack",
            MetadataSource::Relay => "relay",
        }
    }
}

impl Config {
    /// The state stream and how far back to read it, in relay mode.
    #[must_use]
    pub fn relay(&self) -> Option<(&StreamConfig, Duration)> {
        match (self.metadata.source, &self.metadata.stream) {
            (MetadataSource::Relay, Some(stream)) => Some((stream, self.metadata.lookback)),
            _ => None,
        }
    }
}

/// `listen.*`
#[serde_inline_default]
#[serde_as]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping of listen keys")]
pub struct ListenSettings {
    /// `/metrics`, `/healthz`, `/readyz`.
    #[serde_inline_default(SocketAddr::from(([0, 0, 0, 0], 9847)))]
    #[serde_as(as = "form::Address")]
    pub metrics: SocketAddr,
    /// `/debug/…` (loopback unless deliberately configured otherwise).
    #[serde_inline_default(SocketAddr::from(([127, 0, 0, 1], 9848)))]
    #[serde_as(as = "form::Address")]
    pub debug: SocketAddr,
    /// The exporter toolkit's web configuration (TLS, basic-auth users,
    /// headers, rate limit) for both listeners; `None`: plain HTTP to
    /// anyone. Its contents are re-read on SIGHUP and when it or a file it
    /// names changes (`lachesis_listen::web`).
    #[serde(default)]
    #[serde_as(as = "Option<form::Path>")]
    pub web_config_file: Option<PathBuf>,
}

/// `state.*`
#[serde_inline_default]
#[serde_as]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping of state keys")]
pub struct StateSettings {
    /// The state file (DESIGN §11).
    #[serde_inline_default(PathBuf::from("/var/lib/lachesis/state.json"))]
    #[serde_as(as = "form::Path")]
    pub path: PathBuf,
}

/// The hot-reloadable tunables (DESIGN §13): one snapshot, swapped whole by
/// a reload and read at each use. Durations have their bounds in
/// `validate::SPANS`.
#[serde_inline_default]
#[serde_as]
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping of tunables keys")]
pub struct Tunables {
    /// How often `flows` is drained into the ledger.
    #[serde_inline_default(Duration::from_secs(10))]
    #[serde_as(as = "form::Duration")]
    pub scrape_interval: Duration,
    /// Full reconcile period when no notification kicked one.
    #[serde_inline_default(Duration::from_mins(5))]
    #[serde_as(as = "form::Duration")]
    pub reconcile_interval: Duration,
    /// Quiet window after a kick before the reconcile runs. When no layer
    /// sets it: 1 s, or [`super::validate::RELAY_KICK_DEBOUNCE`] with
    /// `metadata.source: relay`.
    #[serde_inline_default(Duration::from_secs(1))]
    #[serde_as(as = "form::Duration")]
    pub kick_debounce: Duration,
    /// How long a vanished port's binding is kept before it is swept.
    #[serde_inline_default(Duration::from_mins(1))]
    #[serde_as(as = "form::Duration")]
    pub ghost_grace: Duration,
    /// How often ghosts past their grace are swept.
    #[serde_inline_default(Duration::from_mins(1))]
    #[serde_as(as = "form::Duration")]
    pub ghost_sweep_interval: Duration,
    /// How often the state file is written (also after every settle batch).
    #[serde_inline_default(Duration::from_mins(1))]
    #[serde_as(as = "form::Duration")]
    pub state_flush_interval: Duration,
    /// `flows` fill that starts pressure relief (below 1.0).
    #[serde_inline_default(0.80)]
    #[serde_as(as = "form::Ratio")]
    pub pressure_high_watermark: f64,
    /// `flows` fill that pressure relief evicts down to (below the high one).
    #[serde_inline_default(0.75)]
    #[serde_as(as = "form::Ratio")]
    pub pressure_low_watermark: f64,
    /// Most entries one relief pass evicts (at most the largest `flows`).
    #[serde_inline_default(1000)]
    #[serde_as(as = "form::Count<{ FLOWS_MAX_ENTRIES as u64 }>")]
    pub pressure_max_evictions: u32,
    /// Most rows waiting for their VM MAC to be bound.
    #[serde_inline_default(10_000)]
    #[serde_as(as = "form::Count<UNRESOLVED_CAP_MAX>")]
    pub unresolved_cap: usize,
    /// Longest a row waits for its VM MAC before it goes to `unknown`.
    #[serde_inline_default(Duration::from_mins(1))]
    #[serde_as(as = "form::Duration")]
    pub unresolved_ttl: Duration,
    /// Router hops a static route may take (DESIGN §6.2).
    #[serde_inline_default(16)]
    #[serde_as(as = "form::Count<ROUTE_HOP_LIMIT_MAX>")]
    pub route_hop_limit: u32,
    /// How long the port series of a swept binding stays, flat, so the
    /// port bound again continues it (docs/ledger.md, "Returning port
    /// series"); 0 ends it at the sweep.
    #[serde_inline_default(Duration::from_hours(24))]
    #[serde_as(as = "form::Duration")]
    pub port_series_retention: Duration,
    /// A notification gap's pass waits a random time up to this
    /// (DESIGN §17): a broker restart must not make a fleet sync at once.
    #[serde_inline_default(Duration::from_secs(30))]
    #[serde_as(as = "form::Duration")]
    pub resync_spread: Duration,
}

impl Default for Tunables {
    fn default() -> Self {
        lachesis_config::defaults()
    }
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
#[serde_inline_default]
#[serde_as]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping of log keys")]
pub struct LogSettings {
    /// Least severe level written (hot-reloadable; `--log-level` and
    /// `RUST_LOG` win at start).
    #[serde_inline_default(LogLevel::Info)]
    #[serde_as(as = "form::OneOf")]
    pub level: LogLevel,
    /// Line format, one line per event (restart-only).
    #[serde_inline_default(LogFormat::Text)]
    #[serde_as(as = "form::OneOf")]
    pub format: LogFormat,
}

impl Default for LogSettings {
    fn default() -> Self {
        lachesis_config::defaults()
    }
}

impl Default for ListenSettings {
    fn default() -> Self {
        lachesis_config::defaults()
    }
}

impl Default for StateSettings {
    fn default() -> Self {
        lachesis_config::defaults()
    }
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

impl Choice for LogLevel {
    const ALL: &'static [Self] = &LogLevel::ALL;
    const LABEL: &'static str = "error | warn | info | debug | trace";

    fn word(self) -> &'static str {
        self.as_str()
    }
}

impl LogLevel {
    /// Most to least severe.
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

impl Choice for LogFormat {
    const ALL: &'static [Self] = &LogFormat::ALL;
    const LABEL: &'static str = "text | json";

    fn word(self) -> &'static str {
        self.as_str()
    }
}

impl LogFormat {
    /// Every format.
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

/// Parses a `log.level` spelling (the `PUT /debug/log-level` body).
pub fn parse_log_level(text: &str) -> Result<LogLevel, String> {
    LogLevel::pick(&lachesis_config::Scalar::Str(text.trim().to_owned()))
}

#[cfg(test)]
mod tests {
    use lachesis_datapath::AttachMode;
    use lachesis_notify::SaslMechanism;

    use super::*;

    #[test]
    fn keys_are_unique_and_in_file_order() {
        let paths: Vec<&str> = SCHEMA.keys().iter().map(|k| k.path.as_str()).collect();
        for (i, p) in paths.iter().enumerate() {
            assert!(!paths[i + 1..].contains(p), "{p} twice");
        }
        assert_eq!(
            SCHEMA.children(""),
            [
                "openstack",
                "metadata",
                "listen",
                "datapath",
                "state",
                "notifications",
                "tunables",
                "log"
            ]
        );
        assert_eq!(SCHEMA.children("notifications"), ["rabbitmq", "kafka"]);
        assert_eq!(SCHEMA.children("notifications.kafka.tls").len(), 4);
        assert!(SCHEMA.children("tunables.scrape_interval").is_empty());
        // A prefix of a name is not a section.
        assert!(SCHEMA.children("tun").is_empty());
        let sections: Vec<(&str, bool)> = SCHEMA
            .sections()
            .iter()
            .map(|s| (s.path.as_str(), s.optional))
            .collect();
        assert_eq!(
            sections,
            [
                ("openstack", false),
                ("metadata", false),
                // Required in relay mode (a rule), off otherwise.
                ("metadata.stream", true),
                ("listen", false),
                ("datapath", false),
                ("state", false),
                ("notifications", false),
                // Off unless present; Kafka's TLS is off unless enabled.
                ("notifications.rabbitmq", true),
                ("notifications.kafka", true),
                ("notifications.kafka.tls", false),
                ("notifications.kafka.sasl", true),
                ("tunables", false),
                ("log", false),
            ]
        );
        for s in SCHEMA.sections() {
            assert!(!s.children.is_empty(), "{} has no keys", s.path);
        }
    }

    /// Each choice's label in the reference is its words.
    #[test]
    fn choice_labels_are_their_words() {
        fn label<T: Choice>() -> (String, &'static str) {
            (T::words().join(" | "), T::LABEL)
        }
        for (words, label) in [
            label::<LogLevel>(),
            label::<LogFormat>(),
            label::<MetadataSource>(),
            label::<SaslMechanism>(),
            label::<AttachMode>(),
        ] {
            assert_eq!(words, label);
        }
    }
}
