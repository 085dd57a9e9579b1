//! The `lachesis_notifications_*` families (DESIGN §8, §10;
//! docs/metrics.md), by transport. Only the configured transports have
//! series: a gauge reading "not connected" for a transport nobody
//! configured would page someone for nothing.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::decode::Decision;

/// A broker kind (`transport` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// AMQP 0-9-1.
    RabbitMq,
    /// Kafka protocol.
    Kafka,
}

impl Transport {
    /// The label value.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::RabbitMq => "rabbitmq",
            Transport::Kafka => "kafka",
        }
    }
}

/// What failed (`kind` label of `lachesis_notifications_errors_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A message that is not an oslo notification; skipped.
    Decode,
    /// Connecting, declaring, subscribing, fetching or acknowledging
    /// failed; the consumer reconnects with backoff.
    Transport,
}

impl ErrorKind {
    /// Every value, seeded at zero.
    pub const ALL: [ErrorKind; 2] = [ErrorKind::Decode, ErrorKind::Transport];

    /// The label value.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Decode => "decode",
            ErrorKind::Transport => "transport",
        }
    }
}

/// Why a RabbitMQ consumer has no subscription (`reason` label of
/// `lachesis_notifications_subscribe_failing`). Ordered by how much each
/// tells the operator: a round that met several reports the greatest (a
/// refused password on one node says more than another node being down).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SubscribeFailure {
    /// No host accepted a connection: refused, reset or timed out.
    Unreachable,
    /// A host's TLS handshake failed: its certificate not signed by
    /// `ca_file` (or the system roots), naming another host, expired, or
    /// TLS against a plain port.
    Tls,
    /// The broker refused a declaration, the binding or the consume
    /// (`PRECONDITION_FAILED`: durability mismatch; `ACCESS_REFUSED`:
    /// permissions).
    Declare,
    /// The vhost does not exist or the user has no access to it
    /// (`NOT_ALLOWED` when opening the connection).
    Vhost,
    /// The user or password was refused (`ACCESS_REFUSED` at login).
    Auth,
}

impl SubscribeFailure {
    /// Every value, seeded at zero.
    pub const ALL: [SubscribeFailure; 5] = [
        SubscribeFailure::Auth,
        SubscribeFailure::Vhost,
        SubscribeFailure::Declare,
        SubscribeFailure::Tls,
        SubscribeFailure::Unreachable,
    ];

    /// The label value.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            SubscribeFailure::Unreachable => "unreachable",
            SubscribeFailure::Tls => "tls",
            SubscribeFailure::Declare => "declare",
            SubscribeFailure::Vhost => "vhost",
            SubscribeFailure::Auth => "auth",
        }
    }

    /// What the operator should look at.
    #[must_use]
    pub fn hint(self) -> &'static str {
        match self {
            SubscribeFailure::Unreachable => {
                "no host of notifications.rabbitmq.url accepted a connection (refused, reset or timed out)"
            }
            SubscribeFailure::Tls => {
                "the TLS handshake failed: the broker's certificate is not signed by notifications.rabbitmq.ca_file (or the system roots), does not name the URL's host, or has expired; or the URL asks TLS of a plain AMQP port"
            }
            SubscribeFailure::Declare => {
                "the broker refused a declaration, binding or consume: check notifications.rabbitmq.durable against the deployment and the user's permissions"
            }
            SubscribeFailure::Vhost => {
                "the vhost of notifications.rabbitmq.url does not exist or the user has no permission on it (an empty path is the default vhost /)"
            }
            SubscribeFailure::Auth => {
                "the broker refused the user or password of notifications.rabbitmq.url"
            }
        }
    }
}

type One = [(&'static str, &'static str); 1];
type Two = [(&'static str, &'static str); 2];
type Lag = [(&'static str, String); 2];

/// Every notification family, registered once.
#[derive(Debug, Clone, Default)]
pub struct NotifyMetrics {
    received: Family<One, Counter>,
    decoded: Family<One, Counter>,
    ignored: Family<One, Counter>,
    kicked: Family<One, Counter>,
    gap_kicks: Family<One, Counter>,
    errors: Family<Two, Counter>,
    connected: Family<One, Gauge>,
    lag: Family<Lag, Gauge>,
    failovers: Family<One, Counter>,
    subscribe_failing: Family<Two, Gauge>,
}

impl NotifyMetrics {
    /// Registers the families, with zero series for each transport of
    /// `transports` (and the lag of `kafka_topic`). Registers nothing when
    /// no transport is configured.
    pub fn register(
        registry: &mut Registry,
        transports: &[Transport],
        kafka_topic: Option<&str>,
    ) -> NotifyMetrics {
        let m = NotifyMetrics::default();
        if transports.is_empty() {
            return m;
        }
        let counters = [
            ("lachesis_notifications_received", "Messages received from the broker", &m.received),
            ("lachesis_notifications_decoded", "Messages decoded as oslo notifications", &m.decoded),
            ("lachesis_notifications_ignored", "Decoded notifications that do not ask for a reconcile (.start events, other services and events)", &m.ignored),
            ("lachesis_notifications_kicked", "Decoded notifications that kicked the reconciler", &m.kicked),
            ("lachesis_notifications_gap_kicks", "Kicks made because notifications may have been missed (a RabbitMQ reconnection, a Kafka offset reset)", &m.gap_kicks),
        ];
        for (name, help, family) in counters {
            registry.register(name, help, family.clone());
        }
        registry.register(
            "lachesis_notifications_errors",
            "Undecodable messages and transport failures",
            m.errors.clone(),
        );
        registry.register(
            "lachesis_notifications_connected",
            "1 while the consumer is connected and subscribed",
            m.connected.clone(),
        );
        if transports.contains(&Transport::RabbitMq) {
            registry.register(
                "lachesis_notifications_failovers",
                "RabbitMQ: subscriptions made on another host of the URL than the previous one (at start: than the first)",
                m.failovers.clone(),
            );
            registry.register(
                "lachesis_notifications_subscribe_failing",
                "RabbitMQ: 1 on the reason no host could be subscribed on, until a subscription",
                m.subscribe_failing.clone(),
            );
            let l = label(Transport::RabbitMq);
            let _ = m.failovers.get_or_create(&l);
            for reason in SubscribeFailure::ALL {
                let _ = m.subscribe_failing.get_or_create(&failing_label(reason));
            }
        }
        if kafka_topic.is_some() {
            registry.register(
                "lachesis_notifications_lag_messages",
                "Kafka: high watermark minus the next offset to read, summed over the topic's partitions",
                m.lag.clone(),
            );
        }
        for t in transports {
            let l = label(*t);
            for family in [&m.received, &m.decoded, &m.ignored, &m.kicked, &m.gap_kicks] {
                let _ = family.get_or_create(&l);
            }
            for kind in ErrorKind::ALL {
                let _ = m.errors.get_or_create(&errors_label(*t, kind));
            }
            let _ = m.connected.get_or_create(&l);
        }
        if let Some(topic) = kafka_topic {
            let _ = m.lag.get_or_create(&lag_label(topic));
        }
        m
    }

    /// The handle one consumer counts with.
    #[must_use]
    pub fn transport(&self, transport: Transport) -> TransportMetrics {
        TransportMetrics {
            transport,
            families: self.clone(),
        }
    }
}

fn label(t: Transport) -> One {
    [("transport", t.as_str())]
}

fn errors_label(t: Transport, kind: ErrorKind) -> Two {
    [("transport", t.as_str()), ("kind", kind.as_str())]
}

fn failing_label(reason: SubscribeFailure) -> Two {
    [
        ("transport", Transport::RabbitMq.as_str()),
        ("reason", reason.as_str()),
    ]
}

fn lag_label(topic: &str) -> Lag {
    [
        ("transport", Transport::Kafka.as_str().to_owned()),
        ("topic", topic.to_owned()),
    ]
}

/// One transport's series.
#[derive(Debug, Clone)]
pub struct TransportMetrics {
    transport: Transport,
    families: NotifyMetrics,
}

impl TransportMetrics {
    /// The transport counted.
    #[must_use]
    pub fn kind(&self) -> Transport {
        self.transport
    }

    fn count(&self, family: &Family<One, Counter>) {
        family.get_or_create(&label(self.transport)).inc();
    }

    /// A message arrived.
    pub fn received(&self) {
        self.count(&self.families.received);
    }

    /// A message decoded to `decision`.
    pub fn decided(&self, decision: &Decision) {
        self.count(&self.families.decoded);
        if decision.is_kick() {
            self.count(&self.families.kicked);
        } else {
            self.count(&self.families.ignored);
        }
    }

    /// A kick for messages that may have been missed.
    pub fn gap_kick(&self) {
        self.count(&self.families.gap_kicks);
    }

    /// A failure of `kind`.
    pub fn error(&self, kind: ErrorKind) {
        self.families
            .errors
            .get_or_create(&errors_label(self.transport, kind))
            .inc();
    }

    /// Connected and subscribed, or not.
    pub fn connected(&self, up: bool) {
        self.families
            .connected
            .get_or_create(&label(self.transport))
            .set(i64::from(up));
    }

    /// RabbitMQ: subscribed on another host than the previous subscription.
    pub fn failover(&self) {
        self.count(&self.families.failovers);
    }

    /// RabbitMQ: why no host could be subscribed on (`None`: subscribed,
    /// or trying again after a connection that dropped). One reason at 1,
    /// the others at 0.
    pub fn subscribe_failing(&self, reason: Option<SubscribeFailure>) {
        for r in SubscribeFailure::ALL {
            self.families
                .subscribe_failing
                .get_or_create(&failing_label(r))
                .set(i64::from(Some(r) == reason));
        }
    }

    /// Kafka: messages behind the high watermark on `topic`.
    pub fn lag(&self, topic: &str, messages: i64) {
        self.families
            .lag
            .get_or_create(&lag_label(topic))
            .set(messages);
    }

    /// The current values, for tests and logs: received, decoded,
    /// ignored, kicked, gap kicks, decode errors, transport errors,
    /// connected; RabbitMQ's failovers and failing reason.
    #[must_use]
    pub fn snapshot(&self) -> Snapshot {
        let l = label(self.transport);
        let c = |f: &Family<One, Counter>| f.get(&l).map_or(0, |c| c.get());
        let e = |k| {
            self.families
                .errors
                .get(&errors_label(self.transport, k))
                .map_or(0, |c| c.get())
        };
        let f = &self.families;
        Snapshot {
            received: c(&f.received),
            decoded: c(&f.decoded),
            ignored: c(&f.ignored),
            kicked: c(&f.kicked),
            gap_kicks: c(&f.gap_kicks),
            decode_errors: e(ErrorKind::Decode),
            transport_errors: e(ErrorKind::Transport),
            connected: f.connected.get(&l).is_some_and(|g| g.get() == 1),
            failovers: c(&f.failovers),
            failing: SubscribeFailure::ALL.into_iter().find(|r| {
                f.subscribe_failing
                    .get(&failing_label(*r))
                    .is_some_and(|g| g.get() == 1)
            }),
        }
    }

    /// Kafka: the lag gauge of `topic`.
    #[must_use]
    pub fn lag_of(&self, topic: &str) -> i64 {
        self.families
            .lag
            .get(&lag_label(topic))
            .map_or(0, |g| g.get())
    }
}

/// One transport's counters at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Snapshot {
    /// `lachesis_notifications_received_total`
    pub received: u64,
    /// `lachesis_notifications_decoded_total`
    pub decoded: u64,
    /// `lachesis_notifications_ignored_total`
    pub ignored: u64,
    /// `lachesis_notifications_kicked_total`
    pub kicked: u64,
    /// `lachesis_notifications_gap_kicks_total`
    pub gap_kicks: u64,
    /// `lachesis_notifications_errors_total{kind="decode"}`
    pub decode_errors: u64,
    /// `lachesis_notifications_errors_total{kind="transport"}`
    pub transport_errors: u64,
    /// `lachesis_notifications_connected` is 1.
    pub connected: bool,
    /// `lachesis_notifications_failovers_total` (RabbitMQ).
    pub failovers: u64,
    /// The reason `lachesis_notifications_subscribe_failing` is 1 on
    /// (RabbitMQ).
    pub failing: Option<SubscribeFailure>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use lachesis_lab::catalogue;

    fn render(registry: &Registry) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
        text
    }

    #[test]
    fn every_family_is_documented_exactly() {
        let mut registry = Registry::default();
        let _m = NotifyMetrics::register(
            &mut registry,
            &[Transport::RabbitMq, Transport::Kafka],
            Some("notifications.info"),
        );
        let rendered = catalogue::rendered(&render(&registry), "notify");
        assert_eq!(rendered.len(), 10, "{rendered:?}");
        catalogue::assert_documented(&rendered);
    }

    #[test]
    fn only_configured_transports_have_series() {
        let mut registry = Registry::default();
        let _m = NotifyMetrics::register(&mut registry, &[], None);
        assert_eq!(render(&registry).trim(), "# EOF");

        let mut registry = Registry::default();
        let m = NotifyMetrics::register(&mut registry, &[Transport::RabbitMq], None);
        let text = render(&registry);
        assert!(text.contains("lachesis_notifications_connected{transport=\"rabbitmq\"} 0"));
        assert!(text.contains(
            "lachesis_notifications_errors_total{transport=\"rabbitmq\",kind=\"decode\"} 0"
        ));
        assert!(!text.contains("kafka"), "{text}");
        for reason in ["auth", "vhost", "declare", "unreachable"] {
            assert!(
                text.contains(&format!(
                    "lachesis_notifications_subscribe_failing{{transport=\"rabbitmq\",reason=\"{reason}\"}} 0"
                )),
                "{text}"
            );
        }
        assert!(text.contains("lachesis_notifications_failovers_total{transport=\"rabbitmq\"} 0"));
        let r = m.transport(Transport::RabbitMq);
        r.received();
        r.decided(&Decision::Kick {
            event_type: "port.create.end".into(),
            rule: crate::Rule::NeutronCommitted,
        });
        r.connected(true);
        let s = r.snapshot();
        assert_eq!((s.received, s.decoded, s.kicked, s.ignored), (1, 1, 1, 0));
        assert!(s.connected);
        assert_eq!((s.failovers, s.failing), (0, None));
        // One reason at a time; a subscription clears it.
        r.subscribe_failing(Some(SubscribeFailure::Unreachable));
        r.subscribe_failing(Some(SubscribeFailure::Auth));
        r.failover();
        let s = r.snapshot();
        assert_eq!((s.failovers, s.failing), (1, Some(SubscribeFailure::Auth)));
        let text = render(&registry);
        assert_eq!(text.matches("subscribe_failing{").count(), 5, "{text}");
        assert_eq!(
            text.matches("subscribe_failing{transport=\"rabbitmq\",reason=\"auth\"} 1")
                .count(),
            1,
            "{text}"
        );
        for reason in ["vhost", "declare", "tls", "unreachable"] {
            assert!(text.contains(&format!("reason=\"{reason}\"}} 0")), "{text}");
        }
        r.subscribe_failing(None);
        assert_eq!(r.snapshot().failing, None);
    }

    #[test]
    fn a_round_reports_its_most_telling_reason() {
        use SubscribeFailure::{Auth, Declare, Unreachable, Vhost};
        assert_eq!([Unreachable, Auth, Declare].into_iter().max(), Some(Auth));
        assert_eq!([Unreachable, Declare].into_iter().max(), Some(Declare));
        assert!(Vhost > Declare && Auth > Vhost);
    }
}
