//! `lachesis relay` as an operator runs it (root: Debian's RabbitMQ of the
//! services tier): the binary against the simulator, following its oslo
//! notifications on the broker and writing the state stream there. The
//! test reads the stream as an agent does (`StreamReader` + the fleet
//! crate's `Assembler`) and holds it to the simulator's own lists:
//!
//! - the first snapshot is complete and holds every port, network, subnet,
//!   router, floating IP, project and server of the cloud;
//! - a port created through the simulator's API reaches the stream through
//!   its notification within 3 s; one deleted while its notification is
//!   dropped by the simulator's fault injection is tombstoned by the
//!   digest;
//! - heartbeats carry the relay's last check against OpenStack;
//! - a relay killed with SIGKILL and started again writes a new complete
//!   snapshot, and a reader resumed after its last offset continues.
//!
//! Each run writes a stream of its own and deletes it at the end.

use crate::common;

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use common::relay::{
    delete_stream, held, listed, now_ms, open_when_declared, read_until, write_config, Relay,
    StreamGuard, BROKER,
};
use common::Sim;
use lachesis_fleet::{Assembler, Record};
use lachesis_lab::agent::metric;
use lachesis_lab::http::free_port;
use lachesis_lab::sandbox::Sandbox;
use lachesis_lab::Services;
use lachesis_notify::rabbitmq::stream::StreamConfig;
use lachesis_notify::RabbitUrl;
use lachesis_planner::Resource;

#[test]
fn the_relay_writes_a_complete_snapshot_follows_notifications_and_heals_by_digest() {
    lachesis_lab::require_root_for("the services tier's RabbitMQ");
    let _services = Services::rabbitmq();
    // The relay runs as its unit runs it: in the unit's sandbox (no
    // capability, read-only file system, @system-service less @privileged
    // and @resources, …), its files where the package puts them, outside
    // the /tmp and /root the sandbox hides (docs/operations.md "The unit's
    // privileges").
    let dir = tempfile::Builder::new()
        .prefix("lachesis-relay-")
        .tempdir_in("/var/lib")
        .unwrap();
    let binary = dir.path().join("lachesis");
    if std::fs::hard_link(common::LACHESIS, &binary).is_err() {
        std::fs::copy(common::LACHESIS, &binary).unwrap();
    }
    let unit = common::repo().join("deploy/systemd/lachesis-relay.service");
    let sandbox = Sandbox::for_unit(&unit, dir.path()).unwrap_or_else(|e| panic!("{e}"));
    let sim = Sim::start(&["--rabbitmq-url", BROKER]);
    let stream = format!("lt-relay-{}", std::process::id());
    let metrics = SocketAddr::from((Ipv4Addr::LOCALHOST, free_port()));
    let config = write_config(dir.path(), &sim, &stream, metrics, "2s");
    let start = |log: &str| {
        Relay::start_in(
            &binary,
            &config,
            dir.path().join(log),
            metrics,
            Some(&sandbox),
        )
    };
    let mut relay = start("relay.log");

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let url = RabbitUrl::parse(BROKER).unwrap();
        let mut cfg = StreamConfig::new(url);
        cfg.stream.clone_from(&stream);
        let mut reader = open_when_declared(&cfg, Duration::from_secs(30), &relay).await;
        let mut asm = Assembler::new();

        // 1. The first complete snapshot holds the whole cloud.
        read_until(&mut reader, &mut asm, Duration::from_secs(30), "a complete snapshot", &relay, |a, _| a.ready()).await;
        for kind in [
            Resource::Networks,
            Resource::Subnets,
            Resource::Ports,
            Resource::Routers,
            Resource::FloatingIps,
        ] {
            assert_eq!(held(&asm, kind), listed(&sim, kind), "{kind:?}");
        }
        for kind in [Resource::Projects, Resource::Servers] {
            assert!(!held(&asm, kind).is_empty(), "{kind:?} in the snapshot");
        }

        // 2. A heartbeat names the relay's last check against OpenStack.
        read_until(&mut reader, &mut asm, Duration::from_secs(15), "a heartbeat", &relay, |_, r| {
            matches!(r, Record::Heartbeat(_))
        })
        .await;
        let beat = asm.heartbeats()["test-relay"].clone();
        assert!(now_ms().saturating_sub(beat.checked_ms) < 30_000, "{beat:?}");
        assert_eq!(beat.digest, asm.state().digest(), "the relay and the reader hold the same state");

        // 3. A port created through the API reaches the stream through its
        //    notification (a digest runs every 2 s too, so the bound is the
        //    notification's: 3 s).
        let network = listed(&sim, Resource::Networks).into_iter().next().unwrap();
        let body = format!(
            r#"{{"id": "p-relay-new", "network_id": "{network}", "project_id": "p1", "mac_address": "fa:16:3e:77:00:01", "device_id": "vm-x", "device_owner": "compute:nova", "fixed_ips": []}}"#
        );
        let created = Instant::now();
        assert!((200..300).contains(&sim.control("POST", "/sim/ports", &body)));
        read_until(&mut reader, &mut asm, Duration::from_secs(3), "the new port's record", &relay, |a, _| {
            held(a, Resource::Ports).contains("p-relay-new")
        })
        .await;
        eprintln!("port created → record on the stream: {:?}", created.elapsed());

        // 4. A delete whose notification is dropped: the digest tombstones it.
        let fault = r#"{"notification_faults": {"rules": [{"event_type": "port.delete.end", "probability": 1.0, "action": "drop"}]}}"#;
        let status = sim.control("PUT", "/sim/settings", fault);
        assert!((200..300).contains(&status), "fault injection: {status}");
        assert!((200..300).contains(&sim.control("DELETE", "/sim/ports/p-relay-new", "")));
        read_until(&mut reader, &mut asm, Duration::from_secs(15), "the digest's tombstone", &relay, |a, _| {
            !held(a, Resource::Ports).contains("p-relay-new")
        })
        .await;
        assert_eq!(held(&asm, Resource::Ports), listed(&sim, Resource::Ports));
        // The relay's own account of it, on its /metrics.
        let tombstoned =
            metric(relay.metrics, "lachesis_relay_repaired_total{action=\"tombstone\"}");
        assert!(tombstoned >= Some(1.0), "repaired tombstones: {tombstoned:?}");
        let snapshots = metric(relay.metrics, "lachesis_relay_snapshots_total");
        assert!(snapshots >= Some(1.0), "snapshots: {snapshots:?}");

        // 5. A relay killed and started again writes a new complete
        //    snapshot; the reader goes on from where it was.
        relay.kill();
        let before = asm.counts().complete;
        let mut relay = start("relay2.log");
        read_until(&mut reader, &mut asm, Duration::from_secs(30), "a snapshot from the restarted relay", &relay, |a, _| {
            a.counts().complete > before
        })
        .await;
        assert_eq!(held(&asm, Resource::Ports), listed(&sim, Resource::Ports));
        relay.kill();
        drop(reader);
        delete_stream(&stream)
            .await
            .expect("delete the test's stream");
    });
}

/// The relay's listener with `listen.web_config_file` (TLS and a user), and
/// SIGHUP: the file re-read (a user renamed takes effect on the next
/// request), the relay still running, the reload counted.
#[test]
fn the_relay_serves_its_metrics_through_tls_and_basic_auth_and_reloads_on_sighup() {
    use lachesis_lab::tls::{curl, Pki, Usage, PASSWORD, PASSWORD_HASH};
    lachesis_lab::require_root_for("the services tier's RabbitMQ");
    let _services = Services::rabbitmq();
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    let ca = pki.ca("ca");
    let _ = pki.issue("ca", "relay", "IP:127.0.0.1", Usage::Server, 1);
    let web = dir.path().join("web.yml");
    let users = |user: &str| {
        format!(
            "tls_server_config:\n  cert_file: relay.pem\n  key_file: relay.key\n\
             basic_auth_users:\n  {user}: '{PASSWORD_HASH}'\n"
        )
    };
    std::fs::write(&web, users("prometheus")).unwrap();
    let sim = Sim::start(&[]);
    let stream = format!("lt-relay-tls-{}", std::process::id());
    let _guard = StreamGuard(stream.clone());
    let metrics = SocketAddr::from((Ipv4Addr::LOCALHOST, free_port()));
    let config = write_config(dir.path(), &sim, &stream, metrics, "10m");
    let text = std::fs::read_to_string(&config).unwrap().replacen(
        "listen:\n",
        &format!("listen:\n  web_config_file: {}\n", web.display()),
        1,
    );
    std::fs::write(&config, text).unwrap();
    let mut relay = Relay::start(&config, dir.path().join("relay.log"), metrics);
    let url = format!("https://{metrics}/metrics");
    let ca = ca.display().to_string();
    let get = |user: &str| curl(&["--cacert", &ca, "-u", &format!("{user}:{PASSWORD}"), &url]);
    let until = Instant::now() + Duration::from_secs(30);
    while get("prometheus").status != 200 {
        assert!(relay.running(), "the relay exited:\n{}", relay.log_text());
        assert!(
            Instant::now() < until,
            "never served through TLS:\n{}",
            relay.log_text()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let body = get("prometheus").text;
    assert!(body.contains("lachesis_relay_syncs_total"), "{body}");
    assert!(
        body.contains("lachesis_web_config_reloads_total{result=\"ok\"} 0"),
        "{body}"
    );
    assert_eq!(curl(&["--cacert", &ca, &url]).status, 401);
    assert_eq!(
        curl(&[&format!("http://{metrics}/metrics")]).status,
        0,
        "plain HTTP"
    );

    // A user renamed, then SIGHUP at once (before the watcher's look).
    std::fs::write(&web, users("grafana")).unwrap();
    relay.signal(libc::SIGHUP);
    let until = Instant::now() + Duration::from_secs(10);
    while get("grafana").status != 200 {
        assert!(
            relay.running(),
            "SIGHUP ended the relay:\n{}",
            relay.log_text()
        );
        assert!(
            Instant::now() < until,
            "the new user never answered:\n{}",
            relay.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(get("prometheus").status, 401, "the removed user");
    let body = get("grafana").text;
    assert!(
        body.contains("lachesis_http_rejected_total{listener=\"metrics\",reason=\"unauthorized\"}"),
        "{body}"
    );
    assert!(relay.running());
    assert!(
        !relay
            .log_text()
            .contains("listen.web_config_file is not set"),
        "{}",
        relay.log_text()
    );
}
