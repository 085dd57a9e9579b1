//! The file as written: serde structs that reject unknown keys, one field
//! per key of [`super::keys::KEYS`], every leaf still unparsed.
//!
//! Values stay [`Scalar`]s here so that every malformed value can be
//! reported (not just the first), with its key's path, by the validation
//! step that turns this into [`super::Config`].

use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};

/// One YAML scalar, kept as written.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub(crate) enum Scalar {
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
}

impl Scalar {
    /// The value as an operator wrote it, for error messages.
    pub(crate) fn shown(&self) -> String {
        match self {
            Scalar::Bool(b) => b.to_string(),
            Scalar::Int(i) => i.to_string(),
            Scalar::Float(f) => f.to_string(),
            Scalar::Str(s) => format!("{s:?}"),
        }
    }

    /// The text of a scalar where text is expected (a numeric password or
    /// cloud name is still text).
    pub(crate) fn text(&self) -> String {
        match self {
            Scalar::Str(s) => s.clone(),
            Scalar::Bool(b) => b.to_string(),
            Scalar::Int(i) => i.to_string(),
            Scalar::Float(f) => f.to_string(),
        }
    }
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ScalarVisitor;
        impl Visitor<'_> for ScalarVisitor {
            type Value = Scalar;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a single value (text, number or true/false)")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Scalar, E> {
                Ok(Scalar::Bool(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Scalar, E> {
                Ok(Scalar::Int(v.into()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Scalar, E> {
                Ok(Scalar::Int(v.into()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Scalar, E> {
                Ok(Scalar::Float(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Scalar, E> {
                Ok(Scalar::Str(v.to_owned()))
            }
        }
        d.deserialize_any(ScalarVisitor)
    }
}

/// A scalar holding a secret: never shown by `Debug`.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub(crate) struct SecretScalar(pub Scalar);

impl fmt::Debug for SecretScalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(super::secret::REDACTED)
    }
}

/// The whole file.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping of configuration sections")]
pub(crate) struct RawConfig {
    /// Which cloud the metadata comes from.
    #[serde(default)]
    pub openstack: Option<RawOpenStack>,
    /// The two HTTP listeners.
    #[serde(default)]
    pub listen: Option<RawListen>,
    /// Which interfaces are metered and how the kernel side is set up.
    #[serde(default)]
    pub datapath: Option<RawDatapath>,
    /// The state file.
    #[serde(default)]
    pub state: Option<RawState>,
    /// Change notifications that trigger a reconcile early.
    #[serde(default)]
    pub notifications: Option<RawNotifications>,
    /// Intervals and limits that a reload changes in place.
    #[serde(default)]
    pub tunables: Option<RawTunables>,
    /// Logging.
    #[serde(default)]
    pub log: Option<RawLog>,
}

/// `openstack`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping of openstack keys")]
pub(crate) struct RawOpenStack {
    /// Entry of `clouds.yaml` to use; unset means `OS_CLOUD` or the `OS_*`
    /// variables decide.
    #[serde(default)]
    pub cloud: Option<Scalar>,
    /// Explicit `clouds.yaml`; unset means the standard search path.
    #[serde(default)]
    pub clouds_file: Option<Scalar>,
}

/// `listen`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping of listen keys")]
pub(crate) struct RawListen {
    /// `/metrics`, `/healthz`, `/readyz`.
    #[serde(default)]
    pub metrics: Option<Scalar>,
    /// The `/debug/…` endpoints; loopback unless deliberately changed.
    #[serde(default)]
    pub debug: Option<Scalar>,
}

/// `datapath`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping of datapath keys")]
pub(crate) struct RawDatapath {
    /// Interfaces whose names start with one of these are metered.
    #[serde(default)]
    pub interface_prefixes: Option<Vec<Scalar>>,
    /// Extra interfaces metered by exact name.
    #[serde(default)]
    pub interfaces: Option<Vec<Scalar>>,
    /// Our directory on bpffs (the pinned `flows` map and links).
    #[serde(default)]
    pub bpffs_dir: Option<Scalar>,
    /// Kernel memory `flows` may take; its size is derived from it.
    #[serde(default)]
    pub flows_memory_budget: Option<Scalar>,
    /// `auto`, `tcx` or `tc`.
    #[serde(default)]
    pub attach_mode: Option<Scalar>,
}

/// `state`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping of state keys")]
pub(crate) struct RawState {
    /// The state file.
    #[serde(default)]
    pub path: Option<Scalar>,
}

/// `notifications`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping of notifications keys")]
pub(crate) struct RawNotifications {
    /// `RabbitMQ` consumer; off when absent.
    #[serde(default)]
    pub rabbitmq: Option<RawRabbitMq>,
    /// Kafka consumer; off when absent.
    #[serde(default)]
    pub kafka: Option<RawKafka>,
}

/// `notifications.rabbitmq`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping of rabbitmq keys")]
pub(crate) struct RawRabbitMq {
    /// `amqp://` or `amqps://` (TLS) broker URL with credentials.
    #[serde(default)]
    pub url: Option<SecretScalar>,
    /// Topic exchanges to bind the agent's queue to.
    #[serde(default)]
    pub exchanges: Option<Vec<Scalar>>,
    /// Whether those exchanges were declared durable.
    #[serde(default)]
    pub durable: Option<Scalar>,
    /// CA bundle for an `amqps://` broker; unset means the system roots.
    #[serde(default)]
    pub ca_file: Option<Scalar>,
}

/// `notifications.kafka`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping of kafka keys")]
pub(crate) struct RawKafka {
    /// Bootstrap brokers.
    #[serde(default)]
    pub brokers: Option<Vec<Scalar>>,
    /// The notifications topic.
    #[serde(default)]
    pub topic: Option<Scalar>,
    /// TLS to the brokers; off when absent.
    #[serde(default)]
    pub tls: Option<RawKafkaTls>,
    /// SASL authentication; off when absent.
    #[serde(default)]
    pub sasl: Option<RawKafkaSasl>,
}

/// `notifications.kafka.tls`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping of tls keys")]
pub(crate) struct RawKafkaTls {
    /// Connect with TLS.
    #[serde(default)]
    pub enabled: Option<Scalar>,
    /// CA bundle; unset means the system roots.
    #[serde(default)]
    pub ca_file: Option<Scalar>,
    /// Client certificate (with `key_file`) for mutual TLS.
    #[serde(default)]
    pub cert_file: Option<Scalar>,
    /// Client private key (with `cert_file`).
    #[serde(default)]
    pub key_file: Option<Scalar>,
}

/// `notifications.kafka.sasl`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping of sasl keys")]
pub(crate) struct RawKafkaSasl {
    /// `plain`, `scram-sha-256` or `scram-sha-512`.
    #[serde(default)]
    pub mechanism: Option<Scalar>,
    /// SASL user name.
    #[serde(default)]
    pub username: Option<Scalar>,
    /// SASL password (secret).
    #[serde(default)]
    pub password: Option<SecretScalar>,
}

/// `tunables`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping of tunables keys")]
pub(crate) struct RawTunables {
    /// How often `flows` is drained into the ledger.
    #[serde(default)]
    pub scrape_interval: Option<Scalar>,
    /// How often a full reconcile runs without a kick.
    #[serde(default)]
    pub reconcile_interval: Option<Scalar>,
    /// Quiet window after a kick before the reconcile runs.
    #[serde(default)]
    pub kick_debounce: Option<Scalar>,
    /// How long a vanished port's binding is kept before it is swept.
    #[serde(default)]
    pub ghost_grace: Option<Scalar>,
    /// How often ghosts past their grace are swept.
    #[serde(default)]
    pub ghost_sweep_interval: Option<Scalar>,
    /// How often the state file is written.
    #[serde(default)]
    pub state_flush_interval: Option<Scalar>,
    /// `flows` fill that starts pressure relief.
    #[serde(default)]
    pub pressure_high_watermark: Option<Scalar>,
    /// `flows` fill that pressure relief evicts down to.
    #[serde(default)]
    pub pressure_low_watermark: Option<Scalar>,
    /// Most entries one pressure-relief pass evicts.
    #[serde(default)]
    pub pressure_max_evictions: Option<Scalar>,
    /// Most rows the unresolved buffer holds.
    #[serde(default)]
    pub unresolved_cap: Option<Scalar>,
    /// Longest a row waits in the unresolved buffer.
    #[serde(default)]
    pub unresolved_ttl: Option<Scalar>,
    /// Router hops a static route may take.
    #[serde(default)]
    pub route_hop_limit: Option<Scalar>,
    /// How long a swept port's series stays, flat, for the port to return.
    #[serde(default)]
    pub port_series_retention: Option<Scalar>,
    /// The window a notification gap's pass is spread over.
    #[serde(default)]
    pub resync_spread: Option<Scalar>,
}

/// `log`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping of log keys")]
pub(crate) struct RawLog {
    /// Least severe level written.
    #[serde(default)]
    pub level: Option<Scalar>,
    /// `text` or `json`, one line per event.
    #[serde(default)]
    pub format: Option<Scalar>,
}
