//! `lachesis relay`'s configuration (docs/fleet.md "Running a relay",
//! `examples/relay.yaml`): one typed section per component, read in layers
//! like the agent's (`lachesis_config::layered`: file, `LACHESIS_*`,
//! `--set`, every problem at once). The OpenStack and notification
//! sections are their crates' own types; `relay` is this crate's.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::LazyLock;
use std::time::Duration;

use lachesis_config::layered::{
    self, check_spans, in_file_order, read, ConfigError, ConfigFile, Flags, Issue, Layout, Span,
};
use lachesis_config::{form, Schema};
use lachesis_notify::rabbitmq::stream::StreamConfig;
use lachesis_notify::NotificationSettings;
use lachesis_openstack::OpenStackSettings;
use serde::{Deserialize, Serialize};
use serde_inline_default::serde_inline_default;
use serde_with::serde_as;

/// Where the file is looked for when `--config` is not given.
pub const DEFAULT_RELAY_CONFIG_PATH: &str = "/etc/lachesis/relay.yaml";

/// The whole configuration of `lachesis relay`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping of configuration sections")]
pub struct RelayConfig {
    /// The cloud the relay lists and GETs from (its credential is the only
    /// admin-read one of a fleet).
    #[serde(default)]
    pub openstack: OpenStackSettings,
    /// The relay's listener.
    #[serde(default)]
    pub listen: RelayListen,
    /// The oslo notifications the relay follows (the agent's consumers);
    /// without either, the relay heals by digests alone.
    #[serde(default)]
    pub notifications: NotificationSettings,
    /// The state stream the relay writes (a RabbitMQ stream queue; the
    /// relay declares it). Required.
    pub stream: StreamConfig,
    /// What the relay does when.
    #[serde(default)]
    pub relay: RelaySettings,
    /// Logging.
    #[serde(default)]
    pub log: RelayLog,
}

/// `listen.*`
#[serde_inline_default]
#[serde_as]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping of listen keys")]
pub struct RelayListen {
    /// `/metrics` and `/healthz` (9849: beside the agent's 9847 and 9848,
    /// so a relay may run on a compute node).
    #[serde_inline_default(SocketAddr::from(([0, 0, 0, 0], 9849)))]
    #[serde_as(as = "form::Address")]
    pub metrics: SocketAddr,
    /// The exporter toolkit's web configuration (TLS, basic-auth users,
    /// headers, rate limit), as the agent's key of the same name; `None`:
    /// plain HTTP.
    #[serde(default)]
    #[serde_as(as = "Option<form::Path>")]
    pub web_config_file: Option<PathBuf>,
}

impl Default for RelayListen {
    fn default() -> Self {
        lachesis_config::defaults()
    }
}

/// `relay.*`: the relay's schedule. Bounds (with their reasons) in
/// [`SPANS`].
#[serde_inline_default]
#[serde_as]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping of relay keys")]
pub struct RelaySettings {
    /// The relay's name in its records, unique in a fleet; `None`: the
    /// host name.
    #[serde_as(as = "Option<form::Text>")]
    pub name: Option<String>,
    /// How often each collection is listed as id + revision and repaired.
    #[serde_inline_default(Duration::from_mins(5))]
    #[serde_as(as = "form::Duration")]
    pub digest_interval: Duration,
    /// How often the relay syncs everything again.
    #[serde_inline_default(Duration::from_hours(1))]
    #[serde_as(as = "form::Duration")]
    pub resync_interval: Duration,
    /// How often a full snapshot is written. 10 minutes: an agent that
    /// starts reads back about two intervals (retention must cover them),
    /// so this bounds the stream's size and a booting agent's read to a
    /// few snapshots, while a snapshot of a 20 000-port cloud (a few MB)
    /// every 10 minutes is a small share of the broker's bandwidth.
    #[serde_inline_default(Duration::from_mins(10))]
    #[serde_as(as = "form::Duration")]
    pub snapshot_interval: Duration,
}

impl Default for RelaySettings {
    fn default() -> Self {
        lachesis_config::defaults()
    }
}

/// `log.*`
#[serde_inline_default]
#[serde_as]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping of log keys")]
pub struct RelayLog {
    /// Least severe level written: error, warn, info, debug or trace
    /// (`--log-level` and `RUST_LOG` win).
    #[serde_inline_default("info".to_owned())]
    #[serde_as(as = "form::Text")]
    pub level: String,
}

impl Default for RelayLog {
    fn default() -> Self {
        lachesis_config::defaults()
    }
}

/// The bounds of each `relay.*` duration, and why.
pub const SPANS: &[(&str, Span)] = &[
    (
        "relay.digest_interval",
        Span {
            min: Duration::from_secs(1),
            below: "each digest lists every Neutron collection",
            max: Duration::from_hours(24),
            above: "a lost notification is healed only at the next digest",
        },
    ),
    (
        "relay.resync_interval",
        Span {
            min: Duration::from_mins(1),
            below: "each resync is a full sync of the cloud",
            max: Duration::from_hours(7 * 24),
            above: "what a digest cannot see (content of lists without revision is compared by digests too) still deserves a full look now and then",
        },
    ),
    (
        "relay.snapshot_interval",
        Span {
            min: Duration::from_secs(1),
            below: "each snapshot writes every record again",
            max: Duration::from_hours(24),
            above: "a starting agent reads back two intervals of the stream",
        },
    ),
];

/// `log.level`'s words, the agent's (`lachesis agent`'s `LogLevel`): checked
/// here so `--check-config` refuses what the start would.
const LOG_LEVELS: [&str; 5] = ["error", "warn", "info", "debug", "trace"];

/// Every key and section of [`RelayConfig`], from its types.
pub static SCHEMA: LazyLock<Schema> = LazyLock::new(Schema::of::<RelayConfig>);

static LAYOUT: LazyLock<Layout> = LazyLock::new(|| Layout {
    schema: &SCHEMA,
    example: "relay.digest_interval",
    example_value: "1m",
});

/// The tree → the configuration, and its rules.
fn build(tree: serde_json::Value) -> Result<RelayConfig, Vec<Issue>> {
    let read = read::<RelayConfig>(&SCHEMA, tree)?;
    let mut issues = read.issues;
    check_spans(SPANS, &read.tree, &read.bad, &mut issues);
    if let Some(r) = &read.config.notifications.rabbitmq {
        if r.exchanges.is_empty() && !read.bad.contains("notifications.rabbitmq.exchanges") {
            issues.push(Issue::new(
                "notifications.rabbitmq.exchanges",
                "is empty: the relay's queue would receive nothing",
            ));
        }
    }
    let level = read.config.log.level.trim();
    if !read.bad.contains("log.level") && !LOG_LEVELS.contains(&level) {
        issues.push(Issue::new(
            "log.level",
            format!("{level:?} is not one of {}", LOG_LEVELS.join(", ")),
        ));
    }
    in_file_order(&SCHEMA, &mut issues);
    if issues.is_empty() {
        Ok(read.config)
    } else {
        Err(issues)
    }
}

impl RelayConfig {
    /// A configuration from YAML text alone (no environment, no flags).
    pub fn from_yaml(text: &str) -> Result<RelayConfig, ConfigError> {
        layered::parse(&SCHEMA, Some(text), &[], build)
    }

    /// The effective configuration as YAML, secrets redacted.
    #[must_use]
    pub fn to_yaml(&self) -> String {
        serde_saphyr::to_string(self).expect("plain structs of scalars serialize")
    }

    /// The relay's name: `relay.name`, else the host name.
    #[must_use]
    pub fn name(&self) -> String {
        self.relay.name.clone().unwrap_or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_owned())
                .ok()
                .filter(|h| !h.is_empty())
                .unwrap_or_else(|| "relay".to_owned())
        })
    }
}

/// A loaded configuration and where it came from.
#[derive(Debug, Clone)]
pub struct LoadedRelay {
    /// The configuration.
    pub config: RelayConfig,
    /// The file.
    pub file: ConfigFile,
    /// The environment and flag layers, by key and origin.
    pub overridden: Vec<(String, String)>,
    /// Whether the file existed.
    pub file_found: bool,
}

/// `--config` (or the default path), then `env`, then `flags`.
pub fn load<I>(config: Option<PathBuf>, env: I, flags: &Flags) -> Result<LoadedRelay, ConfigError>
where
    I: IntoIterator<Item = (OsString, OsString)>,
{
    let file = ConfigFile::new(config, DEFAULT_RELAY_CONFIG_PATH);
    let read = layered::load(&LAYOUT, &file, env, flags, build)?;
    Ok(LoadedRelay {
        config: read.config,
        overridden: read
            .overrides
            .iter()
            .map(|o| (o.key.path.clone(), o.origin.clone()))
            .collect(),
        file_found: read.file_found,
        file,
    })
}

/// What `lachesis relay --check-config` prints (stdout, stderr) and its
/// exit code: 0 valid, 2 invalid.
#[must_use]
pub fn check_report(result: &Result<LoadedRelay, ConfigError>) -> (String, String, u8) {
    match result {
        Ok(loaded) => {
            let mut out = String::new();
            let from = if loaded.file_found {
                format!("file {}", loaded.file.path().display())
            } else {
                format!("no {DEFAULT_RELAY_CONFIG_PATH}: defaults")
            };
            let _ = writeln!(
                out,
                "# lachesis relay effective configuration ({from}; secrets redacted)"
            );
            for (key, origin) in &loaded.overridden {
                let _ = writeln!(out, "# {key} set by {origin}");
            }
            out.push_str(&loaded.config.to_yaml());
            (out, String::new(), 0)
        }
        Err(e) => {
            let mut err = String::new();
            for issue in &e.issues {
                let _ = writeln!(err, "lachesis: config error: {issue}");
            }
            (String::new(), err, 2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_bounds() {
        let c = RelayConfig::from_yaml("stream:\n  url: rabbit://u:p@h:5672/\n").unwrap();
        assert_eq!(c.relay.digest_interval, Duration::from_mins(5));
        assert_eq!(c.relay.resync_interval, Duration::from_hours(1));
        assert_eq!(c.relay.snapshot_interval, Duration::from_mins(10));
        let e =
            RelayConfig::from_yaml("relay:\n  digest_interval: 10ms\n  bogus: 1\n").unwrap_err();
        let keys: Vec<&str> = e.issues.iter().map(|i| i.key.as_str()).collect();
        // The absent stream section is one problem among the others, where
        // the file would have it.
        assert_eq!(
            keys,
            ["stream", "relay.digest_interval", "relay.bogus"],
            "{e}"
        );
        assert_eq!(
            e.issues[0].message,
            "is required (a mapping of stream keys)"
        );
        assert!(e.issues[1].message.contains("below 1s"), "{e}");
    }

    #[test]
    fn layers_name_their_origin() {
        let env = [
            (
                OsString::from("LACHESIS_RELAY__SNAPSHOT_INTERVAL"),
                OsString::from("2m"),
            ),
            (
                OsString::from("LACHESIS_STREAM__URL"),
                OsString::from("rabbit://u:p@h:5672/"),
            ),
        ];
        let flags = Flags {
            set: vec!["relay.name=r1".into()],
            log_level: None,
        };
        let loaded = load(Some("/dev/null".into()), env, &flags).unwrap();
        assert_eq!(
            loaded.config.relay.snapshot_interval,
            Duration::from_mins(2)
        );
        assert_eq!(loaded.config.name(), "r1");
        let (out, _, code) = check_report(&Ok(loaded));
        assert_eq!(code, 0);
        assert!(out.contains("# relay.snapshot_interval set by LACHESIS_RELAY__SNAPSHOT_INTERVAL"));
    }

    #[test]
    fn a_log_level_the_start_would_refuse_is_refused_by_the_check() {
        let url = "stream:\n  url: rabbit://u:p@h:5672/\n";
        for level in ["error", "warn", "info", "debug", "trace"] {
            let c = RelayConfig::from_yaml(&format!("{url}log:\n  level: {level}\n")).unwrap();
            assert_eq!(c.log.level, level);
        }
        let e = RelayConfig::from_yaml(&format!("{url}log:\n  level: verbose\n")).unwrap_err();
        assert_eq!(e.issues.len(), 1, "{e}");
        assert_eq!(e.issues[0].key, "log.level");
        assert_eq!(
            e.issues[0].message,
            "\"verbose\" is not one of error, warn, info, debug, trace"
        );
    }

    #[test]
    fn the_stream_password_is_never_printed() {
        let c = RelayConfig::from_yaml("stream:\n  url: rabbit://u:hunter2@h:5672/\n").unwrap();
        assert!(!c.to_yaml().contains("hunter2"));
    }
}
