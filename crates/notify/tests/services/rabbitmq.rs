//! The RabbitMQ consumer against Debian's RabbitMQ (started on a private
//! loopback port by `scripts/real-cloud up-rabbitmq`, and a second,
//! independent node by `up-rabbitmq2` for failover). Root only; fails
//! loudly when a broker cannot run.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{decisions, kinds, nothing_more, spawn, wait_until, Recorder, Seen};
use lachesis_lab::services::{RABBITMQ2_PORT, RABBITMQ_PORT};
use lachesis_notify::{
    Gap, NotifyMetrics, RabbitError, RabbitMqConfig, RabbitMqConsumer, RabbitUrl, SubscribeFailure,
    Transport, TransportMetrics,
};
use lapin::options::{BasicPublishOptions, ExchangeDeclareOptions};
use lapin::types::FieldTable;
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

const URL: &str = "amqp://guest:guest@127.0.0.1:16672/%2f";
const EXCHANGES: [&str; 5] = ["neutron", "nova", "keystone", "octavia", "openstack"];

fn config(exchanges: &[&str], durable: bool) -> RabbitMqConfig {
    config_at(URL, exchanges, durable)
}

fn config_at(url: &str, exchanges: &[&str], durable: bool) -> RabbitMqConfig {
    RabbitMqConfig {
        url: RabbitUrl::parse(url).unwrap(),
        exchanges: exchanges.iter().map(|e| (*e).to_owned()).collect(),
        durable,
        ca_file: None,
        first_host: 0,
    }
}

/// A consumer of `url` on every default exchange, running until the test
/// ends: its metrics, its reports, its task.
fn start(
    url: &str,
) -> (
    TransportMetrics,
    tokio::sync::mpsc::UnboundedReceiver<Seen>,
    common::Running,
    CancellationToken,
) {
    let m = metrics();
    let consumer =
        Arc::new(RabbitMqConsumer::new(config_at(url, &EXCHANGES, false), m.clone()).unwrap());
    let (sink, rx) = Recorder::new();
    let cancel = CancellationToken::new();
    let c = cancel.clone();
    let task = spawn(async move { consumer.run(&sink, c).await });
    (m, rx, task, cancel)
}

fn metrics() -> TransportMetrics {
    NotifyMetrics::register(&mut Registry::default(), &[Transport::RabbitMq], None)
        .transport(Transport::RabbitMq)
}

/// Publishes like an OpenStack service: topic exchange declared
/// non-durable, routing key `notifications.info`.
struct Publisher {
    _conn: lapin::Connection,
    chan: lapin::Channel,
}

impl Publisher {
    async fn connect() -> Publisher {
        Publisher::to(RABBITMQ_PORT).await
    }

    /// To the node listening on `port` (vhost `/`).
    async fn to(port: u16) -> Publisher {
        let url = format!("amqp://guest:guest@127.0.0.1:{port}/%2f");
        let conn = lapin::Connection::connect(&url, lapin::ConnectionProperties::default())
            .await
            .unwrap();
        let chan = conn.create_channel().await.unwrap();
        Publisher { _conn: conn, chan }
    }

    async fn publish(&self, exchange: &str, body: &[u8]) {
        self.chan
            .exchange_declare(
                exchange.into(),
                lapin::ExchangeKind::Topic,
                ExchangeDeclareOptions::default(),
                FieldTable::default(),
            )
            .await
            .unwrap();
        self.chan
            .basic_publish(
                exchange.into(),
                "notifications.info".into(),
                BasicPublishOptions::default(),
                body,
                lapin::BasicProperties::default(),
            )
            .await
            .unwrap()
            .await
            .unwrap();
    }
}

/// One burst through every exchange: what each consumer must report, in
/// order.
async fn burst(p: &Publisher) -> Vec<(String, bool)> {
    let sent = [
        (
            "neutron",
            common::envelope("port.create.start", Some("network.ctl")),
        ),
        (
            "neutron",
            common::envelope("port.create.end", Some("network.ctl")),
        ),
        (
            "neutron",
            common::envelope("router.interface.create", Some("network.ctl")),
        ),
        (
            "keystone",
            common::envelope("identity.project.deleted", Some("identity.ctl")),
        ),
        (
            "nova",
            common::envelope("compute.instance.delete.end", Some("compute.hv1")),
        ),
        (
            "octavia",
            common::envelope("octavia.loadbalancer.update.end", None),
        ),
        (
            "openstack",
            common::envelope("image.upload", Some("image.ctl")),
        ),
        ("neutron", b"{\"truncated\": ".to_vec()),
    ];
    for (exchange, body) in &sent {
        p.publish(exchange, body).await;
    }
    vec![
        ("port.create.start".into(), false),
        ("port.create.end".into(), true),
        ("router.interface.create".into(), true),
        ("identity.project.deleted".into(), true),
        ("compute.instance.delete.end".into(), true),
        ("octavia.loadbalancer.update.end".into(), true),
        ("image.upload".into(), false),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_agents_both_receive_every_event_and_resume_after_a_broker_restart() {
    common::logs();
    let broker = lachesis_lab::Services::rabbitmq();
    let cancel = CancellationToken::new();
    let mut agents = Vec::new();
    for _ in 0..2 {
        let m = metrics();
        let consumer =
            Arc::new(RabbitMqConsumer::new(config(&EXCHANGES, false), m.clone()).unwrap());
        let (sink, rx) = Recorder::new();
        let c = cancel.clone();
        let task = spawn(async move { consumer.run(&sink, c).await });
        agents.push((m, rx, task));
    }
    for (m, _, _) in &agents {
        wait_until("both consumers subscribed", Duration::from_secs(20), || {
            m.snapshot().connected
        })
        .await;
    }

    let publisher = Publisher::connect().await;
    let want = burst(&publisher).await;
    for (m, rx, _) in &mut agents {
        let got = decisions(rx, want.len(), Duration::from_secs(10)).await;
        assert_eq!(kinds(&got), want, "every event, in order, to each agent");
        wait_until("the garbage counted", Duration::from_secs(5), || {
            m.snapshot().decode_errors == 1
        })
        .await;
        let s = m.snapshot();
        assert_eq!(
            (s.received, s.decoded, s.kicked, s.ignored, s.gap_kicks),
            (8, 7, 5, 2, 0)
        );
        nothing_more(rx, Duration::from_millis(300)).await;
    }
    drop(publisher);

    // Broker restart: both see the connection go, reconnect by themselves,
    // and say a gap may have happened.
    broker.stop_broker();
    for (m, _, _) in &agents {
        wait_until(
            "connected gauge 0 with the broker down",
            Duration::from_secs(20),
            || !m.snapshot().connected,
        )
        .await;
    }
    broker.start_broker();
    for (m, rx, _) in &mut agents {
        wait_until(
            "resubscribed after the restart",
            Duration::from_mins(1),
            || m.snapshot().connected,
        )
        .await;
        match tokio::time::timeout(Duration::from_secs(5), rx.recv()).await {
            Ok(Some(Seen::Gap(Gap::Reconnected))) => {}
            other => panic!("expected a reconnection gap, got {other:?}"),
        }
        let s = m.snapshot();
        assert_eq!(s.gap_kicks, 1);
        assert!(s.transport_errors >= 1, "{s:?}");
    }
    let publisher = Publisher::connect().await;
    let want = burst(&publisher).await;
    for (m, rx, _) in &mut agents {
        let got = decisions(rx, want.len(), Duration::from_secs(10)).await;
        assert_eq!(kinds(&got), want, "resumed after the restart");
        wait_until("second burst counted", Duration::from_secs(5), || {
            m.snapshot().received == 16
        })
        .await;
    }
    cancel.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durability_mismatch_is_refused_by_the_broker_and_named() {
    common::logs();
    let _broker = lachesis_lab::Services::rabbitmq();
    let exchange = format!("lt-durable-{}", std::process::id());
    // The deployment declared it durable.
    let p = Publisher::connect().await;
    p.chan
        .exchange_declare(
            exchange.as_str().into(),
            lapin::ExchangeKind::Topic,
            ExchangeDeclareOptions {
                durable: true,
                ..ExchangeDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await
        .unwrap();
    let m = metrics();
    let wrong = RabbitMqConsumer::new(config(&[exchange.as_str()], false), m.clone()).unwrap();
    let e = wrong.subscribe(0).await.unwrap_err();
    assert!(matches!(e, RabbitError::Declare { .. }), "{e:?}");
    assert_eq!(e.failure(), SubscribeFailure::Declare);
    let text = e.to_string();
    assert!(
        text.contains("PRECONDITION_FAILED") && text.contains("notifications.rabbitmq.durable"),
        "{text}"
    );
    // The run loop counts it and stays disconnected.
    let cancel = CancellationToken::new();
    let c = cancel.clone();
    let (sink, _rx) = Recorder::new();
    let _task = spawn(async move { wrong.run(&sink, c).await });
    wait_until(
        "the refusal counted and shown",
        Duration::from_secs(10),
        || {
            let now = m.snapshot();
            now.transport_errors >= 1 && now.failing == Some(SubscribeFailure::Declare)
        },
    )
    .await;
    assert!(!m.snapshot().connected);
    cancel.cancel();

    let right = RabbitMqConsumer::new(config(&[exchange.as_str()], true), metrics()).unwrap();
    let sub = right.subscribe(0).await.unwrap();
    assert!(
        sub.queue.starts_with("amq.gen-"),
        "server-named: {}",
        sub.queue
    );
    p.chan
        .exchange_delete(
            exchange.as_str().into(),
            lapin::options::ExchangeDeleteOptions::default(),
        )
        .await
        .unwrap();
}

/// The form DESIGN, the docs and every OpenStack service use: the trailing
/// `/` is the default vhost, in an oslo transport URL and in an AMQP URI
/// alike (the AMQP URI rule would make it the empty vhost, which the
/// broker refuses as "vhost not found").
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_url_ending_in_a_slash_reads_the_default_vhost() {
    common::logs();
    let _broker = lachesis_lab::Services::rabbitmq();
    let oslo = format!("rabbit://guest:guest@127.0.0.1:{RABBITMQ_PORT}/");
    let amqp = format!("amqp://guest:guest@127.0.0.1:{RABBITMQ_PORT}/");
    let mut agents = vec![start(&oslo), start(&amqp)];
    for (m, _, _, _) in &agents {
        wait_until(
            "subscribed on the default vhost",
            Duration::from_secs(20),
            || m.snapshot().connected,
        )
        .await;
    }
    let publisher = Publisher::connect().await;
    let want = burst(&publisher).await;
    for (m, rx, _, _) in &mut agents {
        let got = decisions(rx, want.len(), Duration::from_secs(10)).await;
        assert_eq!(kinds(&got), want);
        let s = m.snapshot();
        assert_eq!((s.failovers, s.failing, s.transport_errors), (0, None, 0));
    }
}

/// Two brokers in one URL: the consumer reads from the first; with the
/// first stopped it reads from the second (events published there arrive:
/// the switch is proven by receiving), and back on the first when the
/// second stops after the first came back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stopped_broker_of_the_url_does_not_stop_notifications() {
    common::logs();
    let brokers = lachesis_lab::Services::rabbitmq_pair();
    let url = format!(
        "rabbit://guest:guest@127.0.0.1:{RABBITMQ_PORT},guest:guest@127.0.0.1:{RABBITMQ2_PORT}/"
    );
    let (m, mut rx, _task, _cancel) = start(&url);
    wait_until("subscribed", Duration::from_secs(20), || {
        m.snapshot().connected
    })
    .await;

    // The two brokers are independent: an event reaches the consumer only
    // through the broker its queue is on.
    let want = vec![("port.create.end".to_owned(), true)];
    let on = |port| async move {
        let p = Publisher::to(port).await;
        p.publish(
            "neutron",
            &common::envelope("port.create.end", Some("network.ctl")),
        )
        .await;
    };
    on(RABBITMQ_PORT).await;
    assert_eq!(
        kinds(&decisions(&mut rx, 1, Duration::from_secs(10)).await),
        want
    );
    assert_eq!(m.snapshot().failovers, 0, "read from the first host");

    brokers.stop_broker();
    subscribed_after_failovers(&m, 1, "to the second broker").await;
    match tokio::time::timeout(Duration::from_secs(5), rx.recv()).await {
        Ok(Some(Seen::Gap(Gap::Reconnected))) => {}
        other => panic!("expected a reconnection gap, got {other:?}"),
    }
    on(RABBITMQ2_PORT).await;
    assert_eq!(
        kinds(&decisions(&mut rx, 1, Duration::from_secs(10)).await),
        want,
        "received through the second broker"
    );
    assert_eq!(m.snapshot().failing, None, "one host was enough");

    // The first comes back; the consumer stays where it reads until that
    // host fails, then goes back.
    brokers.start_broker();
    brokers.stop_second_broker();
    subscribed_after_failovers(&m, 2, "back to the first broker").await;
    on(RABBITMQ_PORT).await;
    let got = decisions(&mut rx, 1, Duration::from_secs(10)).await;
    assert_eq!(kinds(&got), want, "received through the first broker again");
    let s = m.snapshot();
    assert_eq!((s.gap_kicks, s.failing), (2, None));
}

/// Waits until the consumer has failed over `n` times and is subscribed.
async fn subscribed_after_failovers(m: &TransportMetrics, n: u64, where_to: &str) {
    wait_until(
        &format!("failed over {where_to}"),
        Duration::from_mins(1),
        || {
            let now = m.snapshot();
            now.failovers == n && now.connected
        },
    )
    .await;
}

/// A consumer that cannot subscribe says why on the gauge, within seconds:
/// a refused password, a vhost that does not exist, every host down; a
/// round that met several reasons shows the most telling.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_consumer_that_cannot_subscribe_shows_why() {
    common::logs();
    let _broker = lachesis_lab::Services::rabbitmq();
    let p = RABBITMQ_PORT;
    let cases = [
        (
            format!("rabbit://guest:wrong@127.0.0.1:{p}/"),
            SubscribeFailure::Auth,
        ),
        (
            format!("rabbit://guest:guest@127.0.0.1:{p}/no-such-vhost"),
            SubscribeFailure::Vhost,
        ),
        // Port 1: nothing listens there.
        (
            "rabbit://guest:guest@127.0.0.1:1/".to_owned(),
            SubscribeFailure::Unreachable,
        ),
        (
            format!("rabbit://guest:guest@127.0.0.1:1,guest:wrong@127.0.0.1:{p}/"),
            SubscribeFailure::Auth,
        ),
    ];
    let agents: Vec<_> = cases
        .iter()
        .map(|(url, want)| (start(url), *want))
        .collect();
    for ((m, _, _, _), want) in &agents {
        wait_until(
            &format!("subscribe_failing{{reason={}}} at 1", want.as_str()),
            Duration::from_secs(10),
            || m.snapshot().failing == Some(*want),
        )
        .await;
        let s = m.snapshot();
        assert!(!s.connected && s.transport_errors >= 1, "{s:?}");
    }
}
