//! `listen.web_config_file` on a running agent (docs/operations.md
//! "Protecting the metrics"), held to Debian's Prometheus scraping through
//! TLS with a client certificate and basic authentication, and to curl
//! and openssl: who is answered, a certificate rotated under the running
//! agent, a broken file at SIGHUP kept out.

use std::path::Path;
use std::time::{Duration, Instant};

use lachesis_lab::tls::{curl, served_serial, Curled, Pki, Usage, PASSWORD, PASSWORD_HASH};

use super::World;
use crate::common::agent::{traffic, Setup};
use crate::common::prometheus::{value, Prometheus};
use lachesis_lab::agent::Agent;

/// curl's arguments for the agent's `path` with `client`'s certificate
/// (`None`: none) and `user:password` (`None`: none), trusting `ca`.
fn request(
    dir: &Path,
    addr: std::net::SocketAddr,
    path: &str,
    client: Option<&str>,
    auth: Option<&str>,
) -> Curled {
    let p = |n: &str| dir.join(n).display().to_string();
    let mut args = vec!["--cacert".to_owned(), p("ca.pem")];
    if let Some(c) = client {
        args.extend([
            "--cert".to_owned(),
            p(&format!("{c}.pem")),
            "--key".to_owned(),
            p(&format!("{c}.key")),
        ]);
    }
    if let Some(a) = auth {
        args.extend(["-u".to_owned(), a.to_owned()]);
    }
    args.push(format!("https://{addr}{path}"));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    curl(&args)
}

/// Plain HTTP, no client certificate, one of another CA: no answer; the
/// right certificate without or with wrong credentials: 401; both
/// listeners held to the same file.
fn who_is_answered(dir: &Path, setup: &Setup, credentials: &str) {
    let m = setup.metrics;
    let plain = curl(&[&format!("http://{m}/metrics")]);
    assert_eq!(plain.status, 0, "plain HTTP: {plain:?}");
    let no_cert = request(dir, m, "/metrics", None, Some(credentials));
    assert_eq!(no_cert.status, 0, "no client certificate: {no_cert:?}");
    let stranger = request(dir, m, "/metrics", Some("stranger"), Some(credentials));
    assert_eq!(
        stranger.status, 0,
        "a certificate of another CA: {stranger:?}"
    );
    let anonymous = request(dir, m, "/metrics", Some("prometheus"), None);
    assert_eq!(anonymous.status, 401, "{anonymous:?}");
    let wrong = request(
        dir,
        m,
        "/metrics",
        Some("prometheus"),
        Some("prometheus:guess"),
    );
    assert_eq!(wrong.status, 401, "{wrong:?}");
    // The debug listener is held to the same file.
    let debug = request(dir, setup.debug, "/debug/config", Some("prometheus"), None);
    assert_eq!(debug.status, 401, "{debug:?}");
    let debug = request(
        dir,
        setup.debug,
        "/debug/config",
        Some("prometheus"),
        Some(credentials),
    );
    assert_eq!(debug.status, 200, "{debug:?}");
    assert!(debug.text.contains("web_config_file"), "{debug:?}");
}

/// Debian's Prometheus scraping `m` through TLS with its certificate and
/// the user.
fn scraping(dir: &Path, m: std::net::SocketAddr) -> Prometheus {
    let p = |n: &str| dir.join(n).display().to_string();
    Prometheus::start_scraping(
        &[("lachesis", &[m])],
        &format!(
            "    scheme: https\n    tls_config:\n      ca_file: {}\n      cert_file: {}\n      key_file: {}\n\
             \x20   basic_auth:\n      username: prometheus\n      password: '{PASSWORD}'\n",
            p("ca.pem"),
            p("prometheus.pem"),
            p("prometheus.key")
        ),
    )
}

/// The CAs and certificates (`server` installed as `live`), the web
/// configuration (a client certificate of `ca` and user `prometheus`) and
/// the agent's configuration naming it: the PKI, the web file and its
/// text.
fn configure(setup: &Setup) -> (Pki, std::path::PathBuf, String) {
    let dir = setup.dir.path();
    let pki = Pki::new(dir);
    let _ = pki.ca("ca");
    let _ = pki.ca("other-ca");
    let _ = pki.issue("ca", "server", "IP:127.0.0.1", Usage::Server, 1);
    let _ = pki.issue("ca", "prometheus", "DNS:prometheus.test", Usage::Client, 10);
    let _ = pki.issue(
        "other-ca",
        "stranger",
        "DNS:prometheus.test",
        Usage::Client,
        11,
    );
    std::fs::copy(dir.join("server.pem"), dir.join("live.pem")).unwrap();
    std::fs::copy(dir.join("server.key"), dir.join("live.key")).unwrap();
    let web = dir.join("web.yml");
    let good = format!(
        "tls_server_config:\n  cert_file: live.pem\n  key_file: live.key\n  \
         client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.pem\n\
         basic_auth_users:\n  prometheus: '{PASSWORD_HASH}'\n"
    );
    std::fs::write(&web, &good).unwrap();
    let config = std::fs::read_to_string(&setup.config).unwrap();
    assert!(config.contains("listen:\n"), "{config}");
    let config = config.replacen(
        "listen:\n",
        &format!("listen:\n  web_config_file: {}\n", web.display()),
        1,
    );
    std::fs::write(&setup.config, config).unwrap();

    (pki, web, good)
}

/// Waits for `/readyz` through TLS with the client certificate and the
/// user.
fn wait_ready(agent: &mut Agent, dir: &Path, m: std::net::SocketAddr, credentials: &str) {
    let until = Instant::now() + Duration::from_mins(1);
    loop {
        if let Some(status) = agent.child.try_wait().unwrap() {
            panic!("the agent exited ({status}); log:\n{}", agent.log_text());
        }
        if request(dir, m, "/readyz", Some("prometheus"), Some(credentials)).status == 200 {
            break;
        }
        assert!(
            Instant::now() < until,
            "never ready through TLS; log:\n{}",
            agent.log_text()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn prometheus_scrapes_an_agent_through_tls_and_basic_auth_across_a_certificate_rotation() {
    let world = World::new(&[], &[]);
    let (a, b, setup) = (&world.vms[0], &world.vms[1], &world.setup);
    let dir = setup.dir.path();
    let (pki, web, good) = configure(setup);
    let install = |name: &str| {
        std::fs::copy(dir.join(format!("{name}.pem")), dir.join("live.pem")).unwrap();
        std::fs::copy(dir.join(format!("{name}.key")), dir.join("live.key")).unwrap();
    };

    let mut agent = setup.start(0);
    let credentials = format!("prometheus:{PASSWORD}");
    let m = setup.metrics;
    wait_ready(&mut agent, dir, m, &credentials);
    assert!(
        !agent
            .log_text()
            .contains("listen.web_config_file is not set"),
        "the plain-HTTP warning with a web configuration set:\n{}",
        agent.log_text()
    );

    who_is_answered(dir, setup, &credentials);

    // Debian's Prometheus, through TLS with its certificate and the user.
    let prometheus = scraping(dir, m);
    prometheus.wait_for("up{job=\"lachesis\"} == 1", |r| r.len() == 1);
    let rejected = |reason: &str| {
        format!("lachesis_http_rejected_total{{job=\"lachesis\",listener=\"metrics\",reason=\"{reason}\"}}")
    };
    // Two 401s above (none, wrong) and three refused handshakes (plain,
    // no certificate, stranger), as Prometheus read them.
    prometheus.wait_for(&rejected("unauthorized"), |r| {
        r.len() == 1 && value(&r[0]) >= 2.0
    });
    prometheus.wait_for(&rejected("tls_handshake"), |r| {
        r.len() == 1 && value(&r[0]) >= 3.0
    });
    traffic(a, b, 0);
    prometheus.wait_for("sum(lachesis_tenant_bytes_total{job=\"lachesis\"})", |r| {
        r.len() == 1 && value(&r[0]) > 0.0
    });

    // A certificate rotated under the running agent: the next handshake
    // presents it, Prometheus goes on scraping (it trusts the CA), and the
    // reload is counted.
    assert_eq!(served_serial(m).as_deref(), Some("01"));
    let _ = pki.issue("ca", "rotated", "IP:127.0.0.1", Usage::Server, 2);
    let rotated = Instant::now();
    install("rotated");
    while served_serial(m).as_deref() != Some("02") {
        assert!(
            rotated.elapsed() < Duration::from_secs(20),
            "the rotated certificate not served within 20 s; log:\n{}",
            agent.log_text()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!("rotated certificate served after {:?}", rotated.elapsed());
    prometheus.wait_for(
        "lachesis_web_config_reloads_total{job=\"lachesis\",result=\"ok\"} == 1",
        |r| r.len() == 1,
    );
    let ok = request(dir, m, "/metrics", Some("prometheus"), Some(&credentials));
    assert_eq!(ok.status, 200, "{:?}", ok.status);

    // A broken file at SIGHUP: kept out, counted, the rotated certificate
    // and the users still in force, the agent still running.
    // The watcher tries the changed file once; the SIGHUP tries it again
    // (a file that failed is not retried until it changes or a SIGHUP).
    std::fs::write(
        &web,
        "tls_server_config:\n  cert_file: live.pem\n  key_file: nowhere.key\n",
    )
    .unwrap();
    let invalid = "lachesis_web_config_reloads_total{job=\"lachesis\",result=\"invalid\"}";
    prometheus.wait_for(&format!("{invalid} == 1"), |r| r.len() == 1);
    agent.signal(libc::SIGHUP);
    prometheus.wait_for(&format!("{invalid} == 2"), |r| r.len() == 1);
    assert!(
        agent.child.try_wait().unwrap().is_none(),
        "{}",
        agent.log_text()
    );
    assert_eq!(served_serial(m).as_deref(), Some("02"));
    assert_eq!(
        request(dir, m, "/metrics", Some("prometheus"), None).status,
        401
    );
    assert_eq!(
        request(dir, m, "/metrics", Some("prometheus"), Some(&credentials)).status,
        200
    );
    assert!(
        agent.log_text().contains("nowhere.key"),
        "the refused reload names its file:\n{}",
        agent.log_text()
    );
    // The file fixed: taken again.
    std::fs::write(&web, &good).unwrap();
    agent.signal(libc::SIGHUP);
    prometheus.wait_for(
        "lachesis_web_config_reloads_total{job=\"lachesis\",result=\"ok\"} >= 2",
        |r| r.len() == 1,
    );
    agent.stop();
}
