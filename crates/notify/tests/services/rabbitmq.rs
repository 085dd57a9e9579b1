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
    start_config(config_at(url, &EXCHANGES, false))
}

/// [`start`] with a whole configuration.
fn start_config(
    config: RabbitMqConfig,
) -> (
    TransportMetrics,
    tokio::sync::mpsc::UnboundedReceiver<Seen>,
    common::Running,
    CancellationToken,
) {
    let m = metrics();
    let consumer = Arc::new(RabbitMqConsumer::new(config, m.clone()).unwrap());
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

/// The broker's TLS (amqps) listener the TLS test opens on the tier's node.
const TLS_PORT: u16 = 16671;

/// An amqps listener on the running node, with a certificate the test made
/// (`openssl`, SAN 127.0.0.1) from CA `ca.pem` in `dir`, readable by the
/// broker's own user; removed again when dropped.
struct TlsListener<'a> {
    broker: &'a lachesis_lab::Services,
}

impl<'a> TlsListener<'a> {
    fn open(broker: &'a lachesis_lab::Services, dir: &std::path::Path) -> TlsListener<'a> {
        use std::os::unix::fs::PermissionsExt as _;
        let pki = lachesis_lab::tls::Pki::new(dir);
        let _ = pki.ca("ca");
        let _ = pki.ca("other-ca");
        let (cert, key) = pki.issue(
            "ca",
            "broker",
            "IP:127.0.0.1",
            lachesis_lab::tls::Usage::Server,
            1,
        );
        // The broker runs as its own user: it must read the files.
        for (path, mode) in [(dir, 0o755), (key.as_path(), 0o644)] {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        let listener = format!(
            "rabbit_networking:ensure_ssl(), \
             rabbit_networking:start_ssl_listener({{\"127.0.0.1\", {TLS_PORT}}}, \
             [{{cacertfile, \"{}\"}}, {{certfile, \"{}\"}}, {{keyfile, \"{}\"}}, \
             {{verify, verify_none}}, {{fail_if_no_peer_cert, false}}], 10).",
            dir.join("ca.pem").display(),
            cert.display(),
            key.display()
        );
        let said = broker
            .try_rabbitmqctl(&["eval", &listener])
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(said.trim(), "ok", "start_ssl_listener: {said}");
        TlsListener { broker }
    }
}

impl Drop for TlsListener<'_> {
    fn drop(&mut self) {
        let _ = self.broker.try_rabbitmqctl(&[
            "eval",
            &format!("rabbit_networking:stop_tcp_listener({{\"127.0.0.1\", {TLS_PORT}}})."),
        ]);
    }
}

/// A consumer of `url` trusting `ca_file`.
fn start_tls(
    url: &str,
    ca_file: &std::path::Path,
) -> (
    TransportMetrics,
    tokio::sync::mpsc::UnboundedReceiver<Seen>,
    common::Running,
    CancellationToken,
) {
    let mut config = config_at(url, &EXCHANGES, false);
    config.ca_file = Some(ca_file.to_path_buf());
    start_config(config)
}

/// amqps against the broker's own TLS listener, with a certificate the
/// test made: trusting its CA (`ca_file`) the consumer subscribes and every
/// event arrives; trusting another CA it is refused, on the gauge as `tls`
/// (not `unreachable`), and its error names the certificate; `amqps` to the
/// plain port is `tls` too.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn amqps_to_a_real_tls_listener_subscribes_and_a_wrong_ca_is_named() {
    common::logs();
    let broker = lachesis_lab::Services::rabbitmq();
    let dir = tempfile::tempdir().unwrap();
    let _tls = TlsListener::open(&broker, dir.path());
    let url = format!("amqps://guest:guest@127.0.0.1:{TLS_PORT}/%2f");

    let (m, mut rx, _task, cancel) = start_tls(&url, &dir.path().join("ca.pem"));
    wait_until("subscribed over TLS", Duration::from_secs(20), || {
        m.snapshot().connected
    })
    .await;
    let publisher = Publisher::connect().await;
    let want = burst(&publisher).await;
    let got = decisions(&mut rx, want.len(), Duration::from_secs(10)).await;
    assert_eq!(kinds(&got), want, "every event, in order, over TLS");
    assert_eq!(m.snapshot().failing, None);
    cancel.cancel();

    let wrong = dir.path().join("other-ca.pem");
    let plain = format!("amqps://guest:guest@127.0.0.1:{RABBITMQ_PORT}/%2f");
    for (url, ca) in [
        (url.as_str(), &wrong),
        (plain.as_str(), &dir.path().join("ca.pem")),
    ] {
        let (m, _rx, _task, cancel) = start_tls(url, ca);
        wait_until(
            &format!(
                "{url} with {}: subscribe_failing{{reason=tls}}",
                ca.display()
            ),
            Duration::from_secs(20),
            || m.snapshot().failing == Some(SubscribeFailure::Tls),
        )
        .await;
        assert!(!m.snapshot().connected);
        cancel.cancel();
    }

    // What the error says, as the agent logs it.
    let config = {
        let mut c = config_at(&url, &EXCHANGES, false);
        c.ca_file = Some(wrong.clone());
        c
    };
    let consumer = RabbitMqConsumer::new(config, metrics()).unwrap();
    let Err(e) = consumer.subscribe(0).await else {
        panic!("subscribed trusting another CA");
    };
    assert_eq!(e.failure(), SubscribeFailure::Tls);
    let text = e.to_string();
    assert!(
        text.contains("certificate") && text.contains("UnknownIssuer"),
        "the error names the certificate problem: {text}"
    );
}
