//! [`Config`] back to the file's form: the effective configuration printed
//! by `--check-config` and `/debug/config` (secrets redacted), and the
//! leaf-by-leaf view a reload compares (secrets kept, never printed).

use serde_json::Value;

use super::layers;
use super::model::{attach_mode_str, Config};
use super::raw::{
    RawConfig, RawDatapath, RawKafka, RawKafkaSasl, RawKafkaTls, RawListen, RawLog,
    RawNotifications, RawOpenStack, RawRabbitMq, RawState, RawTunables, Scalar, SecretScalar,
};
use super::secret::REDACTED;
use super::values::{show_duration, show_size};

/// Whether secrets are shown as [`REDACTED`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Secrets {
    Redact,
    /// Only for comparing two configurations; never printed.
    Keep,
}

impl Config {
    /// The effective configuration as YAML, every key present (unset ones
    /// as `null`), secrets redacted. Reads back to the same configuration
    /// except for the secrets.
    #[must_use]
    pub fn to_yaml(&self) -> String {
        serde_saphyr::to_string(&self.to_raw(Secrets::Redact))
            .expect("plain structs of scalars serialize")
    }

    /// Every set key by dotted path, in file order.
    pub(crate) fn leaves(&self, secrets: Secrets) -> Vec<(String, Value)> {
        let tree = serde_json::to_value(self.to_raw(secrets)).expect("plain structs serialize");
        layers::leaves(&tree)
    }

    pub(crate) fn to_raw(&self, secrets: Secrets) -> RawConfig {
        let s = |t: &str| Some(Scalar::Str(t.to_owned()));
        let path = |p: &std::path::Path| Some(Scalar::Str(p.display().to_string()));
        let list = |items: &[String]| Some(items.iter().map(|i| Scalar::Str(i.clone())).collect());
        let int = |n: u64| Some(Scalar::Int(n.into()));
        let dur = |d| s(&show_duration(d));
        let secret = |shown: String| {
            Some(SecretScalar(Scalar::Str(match secrets {
                Secrets::Redact => REDACTED.to_owned(),
                Secrets::Keep => shown,
            })))
        };
        let t = &self.tunables;
        let n = &self.notifications;
        RawConfig {
            openstack: Some(RawOpenStack {
                cloud: self.openstack.cloud.as_deref().and_then(s),
                clouds_file: self.openstack.clouds_file.as_deref().and_then(path),
            }),
            listen: Some(RawListen {
                metrics: s(&self.listen.metrics.to_string()),
                debug: s(&self.listen.debug.to_string()),
            }),
            datapath: Some(RawDatapath {
                interface_prefixes: list(&self.datapath.interface_prefixes),
                interfaces: list(&self.datapath.interfaces),
                bpffs_dir: path(&self.datapath.bpffs_dir),
                flows_memory_budget: s(&show_size(self.datapath.flows_memory_budget)),
                attach_mode: s(attach_mode_str(self.datapath.attach_mode)),
            }),
            state: Some(RawState {
                path: path(&self.state.path),
            }),
            notifications: Some(RawNotifications {
                rabbitmq: n.rabbitmq.as_ref().map(|r| RawRabbitMq {
                    url: match secrets {
                        Secrets::Redact => {
                            Some(SecretScalar(Scalar::Str(r.url.redacted().to_owned())))
                        }
                        Secrets::Keep => secret(r.url.expose().to_string()),
                    },
                    exchanges: list(&r.exchanges),
                    durable: Some(Scalar::Bool(r.durable)),
                    ca_file: r.ca_file.as_deref().and_then(path),
                }),
                kafka: n.kafka.as_ref().map(|k| RawKafka {
                    brokers: list(&k.brokers),
                    topic: s(&k.topic),
                    tls: Some(RawKafkaTls {
                        enabled: Some(Scalar::Bool(k.tls.is_some())),
                        ca_file: k
                            .tls
                            .as_ref()
                            .and_then(|t| t.ca_file.as_deref())
                            .and_then(path),
                        cert_file: k
                            .tls
                            .as_ref()
                            .and_then(|t| t.client.as_ref())
                            .and_then(|c| path(&c.cert_file)),
                        key_file: k
                            .tls
                            .as_ref()
                            .and_then(|t| t.client.as_ref())
                            .and_then(|c| path(&c.key_file)),
                    }),
                    sasl: k.sasl.as_ref().map(|a| RawKafkaSasl {
                        mechanism: s(a.mechanism.as_str()),
                        username: s(&a.username),
                        password: secret(a.password.expose().to_owned()),
                    }),
                }),
            }),
            tunables: Some(RawTunables {
                scrape_interval: dur(t.scrape_interval),
                reconcile_interval: dur(t.reconcile_interval),
                kick_debounce: dur(t.kick_debounce),
                ghost_grace: dur(t.ghost_grace),
                ghost_sweep_interval: dur(t.ghost_sweep_interval),
                state_flush_interval: dur(t.state_flush_interval),
                pressure_high_watermark: Some(Scalar::Float(t.pressure_high_watermark)),
                pressure_low_watermark: Some(Scalar::Float(t.pressure_low_watermark)),
                pressure_max_evictions: int(t.pressure_max_evictions.into()),
                unresolved_cap: int(t.unresolved_cap as u64),
                unresolved_ttl: dur(t.unresolved_ttl),
                route_hop_limit: int(t.route_hop_limit.into()),
                port_series_retention: dur(t.port_series_retention),
                resync_spread: dur(t.resync_spread),
            }),
            log: Some(RawLog {
                level: s(self.log.level.as_str()),
                format: s(self.log.format.as_str()),
            }),
        }
    }
}
