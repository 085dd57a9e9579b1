//! The one table of configuration keys (DESIGN §13): every key's dotted
//! path, value form, default and reload class.
//!
//! Defaults live here and nowhere else: they are written in the form an
//! operator would write them in the file, layered under the file before it is
//! read, and parsed by the same code as the file's own values.
//! `docs/configuration.md` is checked against this table by a test, and
//! the typed defaults are checked against the constants of the crates that
//! use them (datapath, ledger, planner).

/// When a changed value takes effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reload {
    /// Applied by a reload (SIGHUP) through the tunables snapshot.
    Hot,
    /// Read once at start; a changed value is warned about until a restart.
    Restart,
}

impl Reload {
    /// The spelling used in the configuration reference.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            Reload::Hot => "hot",
            Reload::Restart => "restart",
        }
    }
}

/// The form of a key's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Free text (a cloud name).
    Text,
    /// An absolute file-system path.
    Path,
    /// An IP socket address (`0.0.0.0:9847`, `[::1]:9848`).
    Address,
    /// A list of interface names or name prefixes.
    Interfaces,
    /// A list of `RabbitMQ` exchange names.
    Exchanges,
    /// A list of `host:port` broker addresses.
    Brokers,
    /// A Kafka topic name.
    Topic,
    /// A byte size (`64MiB`, `512KiB`, `1GiB` or plain bytes).
    Size,
    /// A duration (`200ms`, `10s`, `5m`, `1h`).
    Duration,
    /// A fraction between 0 and 1.
    Ratio,
    /// A non-negative whole number.
    Count,
    /// `true` or `false`.
    Bool,
    /// One of a fixed set of words.
    Choice(&'static [&'static str]),
    /// A `RabbitMQ` URL (oslo transport URL or AMQP URI) whose passwords
    /// are secrets.
    RabbitUrl,
    /// Text that is never printed.
    Secret,
}

impl Kind {
    /// The type column of the configuration reference.
    #[must_use]
    pub fn label(self) -> String {
        match self {
            Kind::Text => "string".into(),
            Kind::Path => "path".into(),
            Kind::Address => "address".into(),
            Kind::Interfaces => "list of names".into(),
            Kind::Exchanges => "list of exchanges".into(),
            Kind::Brokers => "list of host:port".into(),
            Kind::Topic => "topic".into(),
            Kind::Size => "size".into(),
            Kind::Duration => "duration".into(),
            Kind::Ratio => "ratio".into(),
            Kind::Count => "integer".into(),
            Kind::Bool => "bool".into(),
            Kind::Choice(words) => words.join(" \\| "),
            Kind::RabbitUrl => "broker URL (secret passwords)".into(),
            Kind::Secret => "secret".into(),
        }
    }

    /// Lists are written `[a, b]` in YAML, or `a,b` in an environment
    /// variable or `--set`.
    #[must_use]
    pub fn is_list(self) -> bool {
        matches!(self, Kind::Interfaces | Kind::Exchanges | Kind::Brokers)
    }

    /// Values taken verbatim from the environment and `--set` (never read as
    /// YAML, so a password starting with `*` or `!` is not a YAML alias or tag).
    #[must_use]
    pub fn is_verbatim(self) -> bool {
        matches!(
            self,
            Kind::Text | Kind::Path | Kind::Topic | Kind::RabbitUrl | Kind::Secret
        )
    }
}

/// What a key is when nothing sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fallback {
    /// This value, written as in the file (YAML).
    Value(&'static str),
    /// Unset: the feature it configures is off or chosen elsewhere.
    Unset,
    /// Must be given whenever its section is present.
    Required,
}

/// One configuration key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    /// Dotted path, exactly as in the file (`tunables.scrape_interval`).
    pub path: &'static str,
    /// The value's form.
    pub kind: Kind,
    /// The default.
    pub fallback: Fallback,
    /// Hot-reloadable or restart-only.
    pub reload: Reload,
}

/// Sections that are off unless present in the file (or created by an
/// environment variable or `--set` naming a key inside them); their keys'
/// defaults apply only then.
pub const OPTIONAL_SECTIONS: &[&str] = &[
    "notifications.rabbitmq",
    "notifications.kafka",
    "notifications.kafka.tls",
    "notifications.kafka.sasl",
];

/// `log.level` spellings, most to least severe.
pub const LOG_LEVELS: &[&str] = &["error", "warn", "info", "debug", "trace"];
/// `log.format` spellings.
pub const LOG_FORMATS: &[&str] = &["text", "json"];
/// `datapath.attach_mode` spellings.
pub const ATTACH_MODES: &[&str] = &["auto", "tcx", "tc"];
/// `notifications.kafka.sasl.mechanism` spellings.
pub const SASL_MECHANISMS: &[&str] = &["plain", "scram-sha-256", "scram-sha-512"];

const fn key(path: &'static str, kind: Kind, fallback: Fallback, reload: Reload) -> Key {
    Key {
        path,
        kind,
        fallback,
        reload,
    }
}

use Fallback::{Required, Unset, Value};
use Reload::{Hot, Restart};

/// Every key, in file order.
pub const KEYS: &[Key] = &[
    key("openstack.cloud", Kind::Text, Unset, Restart),
    key("openstack.clouds_file", Kind::Path, Unset, Restart),
    key(
        "listen.metrics",
        Kind::Address,
        Value("0.0.0.0:9847"),
        Restart,
    ),
    key(
        "listen.debug",
        Kind::Address,
        Value("127.0.0.1:9848"),
        Restart,
    ),
    key(
        "datapath.interface_prefixes",
        Kind::Interfaces,
        Value("[tap]"),
        Restart,
    ),
    key(
        "datapath.interfaces",
        Kind::Interfaces,
        Value("[]"),
        Restart,
    ),
    key(
        "datapath.bpffs_dir",
        Kind::Path,
        Value("/sys/fs/bpf/lachesis"),
        Restart,
    ),
    key(
        "datapath.flows_memory_budget",
        Kind::Size,
        Value("64MiB"),
        Restart,
    ),
    key(
        "datapath.attach_mode",
        Kind::Choice(ATTACH_MODES),
        Value("auto"),
        Restart,
    ),
    key(
        "state.path",
        Kind::Path,
        Value("/var/lib/lachesis/state.json"),
        Restart,
    ),
    key(
        "notifications.rabbitmq.url",
        Kind::RabbitUrl,
        Required,
        Restart,
    ),
    key(
        "notifications.rabbitmq.exchanges",
        Kind::Exchanges,
        Value("[neutron, nova, keystone, octavia, openstack]"),
        Restart,
    ),
    key(
        "notifications.rabbitmq.durable",
        Kind::Bool,
        Value("false"),
        Restart,
    ),
    key("notifications.rabbitmq.ca_file", Kind::Path, Unset, Restart),
    key(
        "notifications.kafka.brokers",
        Kind::Brokers,
        Required,
        Restart,
    ),
    key(
        "notifications.kafka.topic",
        Kind::Topic,
        Value("notifications.info"),
        Restart,
    ),
    key(
        "notifications.kafka.tls.enabled",
        Kind::Bool,
        Value("false"),
        Restart,
    ),
    key(
        "notifications.kafka.tls.ca_file",
        Kind::Path,
        Unset,
        Restart,
    ),
    key(
        "notifications.kafka.tls.cert_file",
        Kind::Path,
        Unset,
        Restart,
    ),
    key(
        "notifications.kafka.tls.key_file",
        Kind::Path,
        Unset,
        Restart,
    ),
    key(
        "notifications.kafka.sasl.mechanism",
        Kind::Choice(SASL_MECHANISMS),
        Required,
        Restart,
    ),
    key(
        "notifications.kafka.sasl.username",
        Kind::Text,
        Required,
        Restart,
    ),
    key(
        "notifications.kafka.sasl.password",
        Kind::Secret,
        Required,
        Restart,
    ),
    key(
        "tunables.scrape_interval",
        Kind::Duration,
        Value("10s"),
        Hot,
    ),
    key(
        "tunables.reconcile_interval",
        Kind::Duration,
        Value("5m"),
        Hot,
    ),
    key("tunables.kick_debounce", Kind::Duration, Value("1s"), Hot),
    key("tunables.ghost_grace", Kind::Duration, Value("60s"), Hot),
    key(
        "tunables.ghost_sweep_interval",
        Kind::Duration,
        Value("60s"),
        Hot,
    ),
    key(
        "tunables.state_flush_interval",
        Kind::Duration,
        Value("60s"),
        Hot,
    ),
    key(
        "tunables.pressure_high_watermark",
        Kind::Ratio,
        Value("0.80"),
        Hot,
    ),
    key(
        "tunables.pressure_low_watermark",
        Kind::Ratio,
        Value("0.75"),
        Hot,
    ),
    key(
        "tunables.pressure_max_evictions",
        Kind::Count,
        Value("1000"),
        Hot,
    ),
    key("tunables.unresolved_cap", Kind::Count, Value("10000"), Hot),
    key("tunables.unresolved_ttl", Kind::Duration, Value("60s"), Hot),
    key("tunables.route_hop_limit", Kind::Count, Value("16"), Hot),
    key(
        "tunables.port_series_retention",
        Kind::Duration,
        Value("24h"),
        Hot,
    ),
    key("tunables.resync_spread", Kind::Duration, Value("30s"), Hot),
    key("log.level", Kind::Choice(LOG_LEVELS), Value("info"), Hot),
    key(
        "log.format",
        Kind::Choice(LOG_FORMATS),
        Value("text"),
        Restart,
    ),
];

/// The key at `path`.
#[must_use]
pub fn find(path: &str) -> Option<&'static Key> {
    KEYS.iter().find(|k| k.path == path)
}

/// The names directly under `section` (`""` for the top level), in file
/// order: the "expected one of" of an unknown-key error.
#[must_use]
pub fn children(section: &str) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for k in KEYS {
        let rest = if section.is_empty() {
            Some(k.path)
        } else {
            k.path
                .strip_prefix(section)
                .and_then(|r| r.strip_prefix('.'))
        };
        if let Some(name) = rest.and_then(|r| r.split('.').next()) {
            if !out.contains(&name) {
                out.push(name);
            }
        }
    }
    out
}

/// Every section path (`notifications`, `notifications.kafka`, …), in file
/// order.
#[must_use]
pub fn sections() -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for k in KEYS {
        let mut end = 0;
        while let Some(dot) = k.path[end..].find('.') {
            end += dot;
            let section = &k.path[..end];
            if !out.iter().any(|s| s == section) {
                out.push(section.to_owned());
            }
            end += 1;
        }
    }
    out
}

/// The optional sections that hold `path`, innermost first.
pub fn optional_ancestors(path: &str) -> impl Iterator<Item = &'static str> + '_ {
    OPTIONAL_SECTIONS
        .iter()
        .rev()
        .copied()
        .filter(move |s| path.strip_prefix(s).is_some_and(|r| r.starts_with('.')))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_unique_and_every_section_has_keys() {
        for (i, k) in KEYS.iter().enumerate() {
            assert!(
                KEYS[i + 1..].iter().all(|o| o.path != k.path),
                "{} twice",
                k.path
            );
        }
        for s in OPTIONAL_SECTIONS {
            assert!(!children(s).is_empty(), "{s} has no keys");
        }
    }

    #[test]
    fn children_follow_file_order() {
        assert_eq!(
            children(""),
            [
                "openstack",
                "listen",
                "datapath",
                "state",
                "notifications",
                "tunables",
                "log"
            ]
        );
        assert_eq!(children("notifications"), ["rabbitmq", "kafka"]);
        assert_eq!(children("notifications.kafka.tls").len(), 4);
        assert!(children("tunables.scrape_interval").is_empty());
        // A prefix of a name is not a section.
        assert!(children("tun").is_empty());
    }

    #[test]
    fn sections_in_file_order() {
        assert_eq!(
            sections(),
            [
                "openstack",
                "listen",
                "datapath",
                "state",
                "notifications",
                "notifications.rabbitmq",
                "notifications.kafka",
                "notifications.kafka.tls",
                "notifications.kafka.sasl",
                "tunables",
                "log"
            ]
        );
    }

    #[test]
    fn optional_ancestors_innermost_first() {
        let got: Vec<_> = optional_ancestors("notifications.kafka.tls.ca_file").collect();
        assert_eq!(got, ["notifications.kafka.tls", "notifications.kafka"]);
        assert_eq!(optional_ancestors("tunables.scrape_interval").count(), 0);
        // The section itself is not its own ancestor.
        assert_eq!(
            optional_ancestors("notifications.kafka").collect::<Vec<_>>(),
            Vec::<&str>::new()
        );
    }
}
