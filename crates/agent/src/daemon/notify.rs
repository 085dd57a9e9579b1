//! The notification consumers in the daemon (DESIGN §8, §12 step 5):
//! their families registered with the others, then each configured
//! transport started as a task of its own that waits for `state_restored`
//! and turns every kick decision and every gap into a reconciler kick.

use std::path::PathBuf;
use std::sync::Arc;

use lachesis_notify::{
    Consumer, Decision, Gap, KafkaConfig, KafkaConsumer, KafkaTlsFiles, NotifyMetrics,
    RabbitMqConfig, RabbitMqConsumer, Sasl, Sink, Transport,
};
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

use super::{named, Tasks};
use crate::boot::{BootWaiter, Phase};
use crate::config::{
    KafkaSasl, KafkaSettings, NotificationSettings, RabbitMqSettings, SaslMechanism,
};
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
        let kafka = settings.kafka.as_ref().map(kafka_config);
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
    pub(super) fn spawn(
        self,
        kicker: &Kicker,
        waiter: &BootWaiter,
        cancel: &CancellationToken,
        tasks: &mut Tasks,
    ) {
        let sink = Arc::new(KickSink(kicker.clone()));
        let m = &self.metrics;
        let consumers = [
            (
                "rabbitmq consumer",
                "notifications.rabbitmq",
                self.rabbitmq.map(|c| {
                    RabbitMqConsumer::new(c, m.transport(Transport::RabbitMq))
                        .map(Consumer::RabbitMq)
                }),
            ),
            (
                "kafka consumer",
                "notifications.kafka",
                self.kafka.map(|c| {
                    KafkaConsumer::new(c, m.transport(Transport::Kafka)).map(Consumer::Kafka)
                }),
            ),
        ];
        for (name, section, built) in consumers {
            let Some(built) = built else { continue };
            let (sink, mut waiter, cancel) = (sink.clone(), waiter.clone(), cancel.clone());
            tasks.spawn(named(name, async move {
                let consumer = built.map_err(|e| format!("{section}: {e}"))?;
                waiter
                    .reached(Phase::StateRestored)
                    .await
                    .map_err(|e| e.to_string())?;
                consumer.run(sink.as_ref(), cancel).await;
                Ok(())
            }));
        }
    }
}

/// Kicks the reconciler for what the consumers report.
struct KickSink(Kicker);

impl Sink for KickSink {
    fn decided(&self, _: Transport, decision: &Decision) {
        if decision.is_kick() {
            self.0.kick();
        }
    }

    fn gap(&self, _: Transport, _: Gap) {
        self.0.kick();
    }
}

fn rabbitmq_config(s: &RabbitMqSettings) -> RabbitMqConfig {
    RabbitMqConfig {
        url: s.url.clone(),
        exchanges: s.exchanges.clone(),
        durable: s.durable,
        ca_file: s.ca_file.clone(),
    }
}

fn kafka_config(s: &KafkaSettings) -> KafkaConfig {
    KafkaConfig {
        brokers: s.brokers.clone(),
        topic: s.topic.clone(),
        tls: s.tls.as_ref().map(|t| KafkaTlsFiles {
            ca_file: t.ca_file.clone(),
            client: t
                .client
                .as_ref()
                .map(|c| -> (PathBuf, PathBuf) { (c.cert_file.clone(), c.key_file.clone()) }),
        }),
        sasl: s.sasl.as_ref().map(sasl),
    }
}

fn sasl(s: &KafkaSasl) -> Sasl {
    Sasl {
        mechanism: match s.mechanism {
            SaslMechanism::Plain => lachesis_notify::SaslMechanism::Plain,
            SaslMechanism::ScramSha256 => lachesis_notify::SaslMechanism::ScramSha256,
            SaslMechanism::ScramSha512 => lachesis_notify::SaslMechanism::ScramSha512,
        },
        username: s.username.clone(),
        password: s.password.expose().to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

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
        let tls = k.tls.unwrap();
        assert_eq!(tls.ca_file, Some(PathBuf::from("/etc/kca.pem")));
        assert_eq!(
            tls.client,
            Some((PathBuf::from("/etc/c.pem"), PathBuf::from("/etc/k.pem")))
        );
        let sasl = k.sasl.unwrap();
        assert_eq!(
            (
                sasl.mechanism,
                sasl.username.as_str(),
                sasl.password.as_str()
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
