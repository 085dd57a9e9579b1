//! The notification consumers in the daemon (DESIGN §8, §12 step 5):
//! their families registered with the others, then each configured
//! transport started as a task of its own that waits for `state_restored`
//! and turns every kick decision and every gap into a reconciler kick.

use std::sync::Arc;

use lachesis_notify::{
    Consumer, Decision, Gap, KafkaConfig, KafkaConsumer, NotifyMetrics, RabbitMqConfig,
    RabbitMqConsumer, Sink, Transport,
};
use prometheus_client::registry::Registry;

use super::tasks::{StartedEarly, Task, TaskSet};
use crate::boot::{BootWaiter, Phase};
use crate::config::{Issue, NotificationSettings, SharedTunables};
use crate::reconcile::Kicker;

/// The configured consumers and their families, from registration to
/// their tasks.
pub(super) struct Notifications {
    metrics: NotifyMetrics,
    rabbitmq: Option<RabbitMqConfig>,
    kafka: Option<KafkaConfig>,
}

impl Notifications {
    /// Registers the families of the configured transports (none when
    /// neither is).
    pub(super) fn register(registry: &mut Registry, settings: &NotificationSettings) -> Self {
        let rabbitmq = settings.rabbitmq.as_ref().map(rabbitmq_config);
        let kafka = settings.kafka.clone();
        let mut transports = Vec::new();
        if rabbitmq.is_some() {
            transports.push(Transport::RabbitMq);
        }
        if kafka.is_some() {
            transports.push(Transport::Kafka);
        }
        let topic = kafka.as_ref().map(|k| k.topic.as_str());
        let metrics = NotifyMetrics::register(registry, &transports, topic);
        Notifications {
            metrics,
            rabbitmq,
            kafka,
        }
    }

    /// One task per configured transport. A consumer that cannot be built
    /// (an unreadable TLS file) is a task that fails at once, which stops
    /// the daemon naming the file.
    ///
    /// # Errors
    /// Boot has not reached the consumers' phase.
    pub(super) fn start(
        self,
        kicker: &Kicker,
        tunables: &Arc<SharedTunables>,
        waiter: &BootWaiter,
        tasks: &mut TaskSet,
    ) -> Result<(), StartedEarly> {
        let sink = Arc::new(KickSink {
            kicker: kicker.clone(),
            tunables: tunables.clone(),
        });
        let m = &self.metrics;
        let consumers = [
            (
                Task::RabbitMqConsumer,
                "notifications.rabbitmq",
                self.rabbitmq.map(|c| {
                    RabbitMqConsumer::new(c, m.transport(Transport::RabbitMq))
                        .map(Consumer::RabbitMq)
                }),
            ),
            (
                Task::KafkaConsumer,
                "notifications.kafka",
                self.kafka.map(|c| {
                    KafkaConsumer::new(c, m.transport(Transport::Kafka)).map(Consumer::Kafka)
                }),
            ),
        ];
        for (task, section, built) in consumers {
            let Some(built) = built else { continue };
            let (sink, mut waiter) = (sink.clone(), waiter.clone());
            tasks.start(task, |cancel| async move {
                let consumer = built.map_err(|e| format!("{section}: {e}"))?;
                waiter
                    .reached(Phase::StateRestored)
                    .await
                    .map_err(|e| e.to_string())?;
                consumer.run(sink.as_ref(), cancel).await;
                Ok::<(), String>(())
            })?;
        }
        Ok(())
    }
}

/// Builds each configured consumer, reading its TLS files, and drops it:
/// the problems `--check-config` and the agent's start report before
/// anything touches the kernel (`crate::preflight`), each under the key that
/// names the files.
#[must_use]
pub fn check_notifications(settings: &NotificationSettings) -> Vec<Issue> {
    let mut registry = Registry::default();
    let n = Notifications::register(&mut registry, settings);
    let mut issues = Vec::new();
    if let Some(config) = n.rabbitmq {
        let key = if config.ca_file.is_some() {
            "notifications.rabbitmq.ca_file"
        } else {
            "notifications.rabbitmq"
        };
        if let Err(e) = RabbitMqConsumer::new(config, n.metrics.transport(Transport::RabbitMq)) {
            issues.push(Issue::new(key, e.to_string()));
        }
    }
    if let Some(config) = n.kafka {
        let key = if config.tls.enabled {
            "notifications.kafka.tls"
        } else {
            "notifications.kafka"
        };
        if let Err(e) = KafkaConsumer::new(config, n.metrics.transport(Transport::Kafka)) {
            issues.push(Issue::new(key, e.to_string()));
        }
    }
    issues
}

/// Kicks the reconciler for what the consumers report.
struct KickSink {
    kicker: Kicker,
    tunables: Arc<SharedTunables>,
}

impl Sink for KickSink {
    fn decided(&self, _: Transport, decision: &Decision) {
        if decision.is_kick() {
            self.kicker.kick();
        }
    }

    /// Every agent of a fleet sees a broker come back at the same moment:
    /// each covers the gap after its own random share of
    /// `tunables.resync_spread` (DESIGN §17), not all in the same second.
    fn gap(&self, _: Transport, _: Gap) {
        let spread = self.tunables.get().resync_spread;
        self.kicker.kick_after(spread.mul_f64(fastrand::f64()));
    }
}

/// The configured section with the host this agent tries first.
fn rabbitmq_config(s: &RabbitMqConfig) -> RabbitMqConfig {
    RabbitMqConfig {
        // Spread a fleet over the cluster's nodes (DESIGN §17).
        first_host: fastrand::usize(..s.url.hosts().len().max(1)),
        ..s.clone()
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::config::Config;

    #[test]
    fn a_fleet_spreads_over_the_rabbitmq_hosts() {
        let c = parsed(
            "notifications:\n  rabbitmq: {url: \"rabbit://u:p@r1:5672,u:p@r2:5672,u:p@r3:5672/\"}\n",
        );
        let settings = c.notifications.rabbitmq.unwrap();
        let drawn: std::collections::BTreeSet<usize> = (0..200)
            .map(|_| rabbitmq_config(&settings).first_host)
            .collect();
        assert_eq!(
            drawn,
            (0..3).collect(),
            "every host, and only them, is tried first"
        );
    }

    #[test]
    fn a_gap_is_covered_within_the_spread_and_at_once_without_one() {
        let kicker = Kicker::new(crate::reconcile::ReconcileMetrics::default());
        let mut tunables = Config::default().tunables;
        tunables.resync_spread = std::time::Duration::from_secs(30);
        let shared = Arc::new(SharedTunables::new(tunables));
        let sink = KickSink {
            kicker: kicker.clone(),
            tunables: shared.clone(),
        };
        let mut delays = Vec::new();
        for _ in 0..200 {
            let before = tokio::time::Instant::now();
            sink.gap(Transport::RabbitMq, Gap::Reconnected);
            let due = kicker.deferred().expect("deferred");
            delays.push(due - before);
            kicker.take();
        }
        assert!(delays
            .iter()
            .all(|d| *d <= std::time::Duration::from_secs(30)));
        // Spread, not one fixed delay: 200 draws fall on both halves.
        let half = std::time::Duration::from_secs(15);
        assert!(delays.iter().any(|d| *d < half) && delays.iter().any(|d| *d > half));
        assert!(kicker.pending().is_none(), "a gap is no immediate kick");
        tunables.resync_spread = std::time::Duration::ZERO;
        shared.set(tunables);
        let before = tokio::time::Instant::now();
        sink.gap(Transport::Kafka, Gap::OffsetReset);
        assert!(kicker.deferred().unwrap() - before < std::time::Duration::from_millis(100));
    }

    fn parsed(yaml: &str) -> Config {
        Config::from_yaml(yaml).unwrap()
    }

    fn rendered(registry: &Registry) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
        text
    }

    #[test]
    fn every_configured_key_reaches_the_consumers() {
        let c = parsed(
            "notifications:
  rabbitmq: {url: \"amqps://u:pw@rabbit:5671/os\", exchanges: [neutron, nova], durable: true, ca_file: /etc/ca.pem}
  kafka:
    brokers: [\"k1:9093\", \"k2:9093\"]
    topic: os.notifications
    tls: {enabled: true, ca_file: /etc/kca.pem, cert_file: /etc/c.pem, key_file: /etc/k.pem}
    sasl: {mechanism: scram-sha-512, username: agent, password: s3cret}
",
        );
        let mut registry = Registry::default();
        let n = Notifications::register(&mut registry, &c.notifications);
        let r = n.rabbitmq.unwrap();
        assert_eq!(r.url.expose(), "amqps://u:pw@rabbit:5671/os");
        assert_eq!(r.exchanges, ["neutron", "nova"]);
        assert!(r.durable);
        assert_eq!(r.ca_file, Some(PathBuf::from("/etc/ca.pem")));
        let k = n.kafka.unwrap();
        assert_eq!(k.brokers, ["k1:9093", "k2:9093"]);
        assert_eq!(k.topic, "os.notifications");
        let tls = k.tls;
        assert!(tls.enabled);
        assert_eq!(tls.ca_file, Some(PathBuf::from("/etc/kca.pem")));
        assert_eq!(
            (tls.cert_file, tls.key_file),
            (
                Some(PathBuf::from("/etc/c.pem")),
                Some(PathBuf::from("/etc/k.pem"))
            )
        );
        let sasl = k.sasl.unwrap();
        assert_eq!(
            (
                sasl.mechanism,
                sasl.username.as_str(),
                sasl.password.expose()
            ),
            (
                lachesis_notify::SaslMechanism::ScramSha512,
                "agent",
                "s3cret"
            )
        );
        let text = rendered(&registry);
        assert!(text.contains("lachesis_notifications_connected{transport=\"rabbitmq\"} 0"));
        assert!(text.contains(
            "lachesis_notifications_lag_messages{transport=\"kafka\",topic=\"os.notifications\"} 0"
        ));
    }

    #[test]
    fn nothing_configured_registers_nothing() {
        let mut registry = Registry::default();
        let n = Notifications::register(&mut registry, &Config::default().notifications);
        assert!(n.rabbitmq.is_none() && n.kafka.is_none());
        assert!(!rendered(&registry).contains("notifications"));
    }
}
