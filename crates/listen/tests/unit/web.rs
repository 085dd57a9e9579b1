//! `listen.web_config_file` on loopback, held to the operator's own tools:
//! certificates made by `openssl`, requests sent by `curl`, a password
//! hash made by libxcrypt. Each test names what it proves.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response};
use lachesis_lab::tls::{curl, served_serial, Curled, Pki, Usage, PASSWORD, PASSWORD_HASH};
use lachesis_listen::{serve, Endpoint, ListenerStats, Web, WebConfigError};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

async fn page(_req: Request<Incoming>) -> Response<Full<Bytes>> {
    Response::new(Full::new(Bytes::from_static(b"ok\n")))
}

/// A listener serving `web` on a free loopback port.
struct Served {
    addr: SocketAddr,
    stats: Arc<ListenerStats>,
    cancel: CancellationToken,
}

impl Drop for Served {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

async fn start(web: &Arc<Web>) -> Served {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let cancel = CancellationToken::new();
    let endpoint = Endpoint {
        web: web.clone(),
        ..Endpoint::plain("test")
    };
    let stats = endpoint.stats.clone();
    tokio::spawn(serve(listener, endpoint, page, cancel.clone()));
    tokio::spawn(web.clone().watch(cancel.clone()));
    Served {
        addr,
        stats,
        cancel,
    }
}

/// `curl` off the runtime's workers.
async fn get(args: Vec<String>) -> Curled {
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        curl(&args)
    })
    .await
    .unwrap()
}

fn s(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|p| (*p).to_owned()).collect()
}

/// A CA `ca`, a server certificate for 127.0.0.1 (serial 1), client
/// certificates `client` (SAN prometheus.test) and `intruder` (SAN
/// intruder.test) from it, and `stranger` from another CA `other-ca`.
fn pki(dir: &Path) -> Pki {
    let pki = Pki::new(dir);
    let _ = pki.ca("ca");
    let _ = pki.ca("other-ca");
    let _ = pki.issue(
        "ca",
        "server",
        "IP:127.0.0.1,DNS:localhost",
        Usage::Server,
        1,
    );
    let _ = pki.issue("ca", "client", "DNS:prometheus.test", Usage::Client, 10);
    let _ = pki.issue("ca", "intruder", "DNS:intruder.test", Usage::Client, 11);
    let _ = pki.issue(
        "other-ca",
        "stranger",
        "DNS:prometheus.test",
        Usage::Client,
        12,
    );
    pki
}

fn write_config(dir: &Path, yaml: &str) -> std::path::PathBuf {
    let path = dir.join("web.yml");
    std::fs::write(&path, yaml).unwrap();
    path
}

fn https(addr: SocketAddr) -> String {
    format!("https://{addr}/metrics")
}

/// TLS and basic authentication: plain HTTP and an untrusted chain get no
/// answer, a request without the right user and password gets 401 (and
/// costs no handler call), the configured user gets the page with the
/// configured headers; both bcrypt spellings (`$2y$`, `$2b$`) are read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_and_basic_auth_answer_only_the_configured_users() {
    let dir = tempfile::tempdir().unwrap();
    let _pki = pki(dir.path());
    let b_spelling = PASSWORD_HASH.replacen("$2y$", "$2b$", 1);
    let path = write_config(
        dir.path(),
        &format!(
            "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n\
             http_server_config:\n  headers:\n    X-Frame-Options: deny\n    X-Content-Type-Options: nosniff\n\
             basic_auth_users:\n  prometheus: '{PASSWORD_HASH}'\n  grafana: '{b_spelling}'\n"
        ),
    );
    let web = Web::load(&path).unwrap();
    assert!(web.is_tls() && web.requires_credentials());
    let served = start(&web).await;
    let (addr, ca) = (served.addr, dir.path().join("ca.pem"));
    let ca = ca.to_str().unwrap();

    let plain = get(s(&[&format!("http://{addr}/metrics")])).await;
    assert_eq!(plain.status, 0, "plain HTTP to a TLS listener: {plain:?}");
    let untrusted = get(s(&[&https(addr)])).await;
    assert_eq!(
        untrusted.exit, 60,
        "a chain curl does not trust: {untrusted:?}"
    );

    let none = get(s(&["--cacert", ca, &https(addr)])).await;
    assert_eq!(none.status, 401, "{none:?}");
    assert!(
        none.text.to_lowercase().contains("www-authenticate: basic"),
        "{none:?}"
    );
    assert!(
        none.text.to_lowercase().contains("x-frame-options: deny"),
        "{none:?}"
    );
    let wrong = get(s(&["--cacert", ca, "-u", "prometheus:nope", &https(addr)])).await;
    assert_eq!(wrong.status, 401, "{wrong:?}");
    let stranger = get(s(&[
        "--cacert",
        ca,
        "-u",
        &format!("mallory:{PASSWORD}"),
        &https(addr),
    ]))
    .await;
    assert_eq!(
        stranger.status, 401,
        "an unknown user with a known password: {stranger:?}"
    );
    assert_eq!(served.stats.rejections().unauthorized, 3);

    for user in ["prometheus", "grafana"] {
        let ok = get(s(&[
            "--cacert",
            ca,
            "-u",
            &format!("{user}:{PASSWORD}"),
            &https(addr),
        ]))
        .await;
        assert_eq!(ok.status, 200, "{user}: {ok:?}");
        assert!(ok.text.ends_with("ok\n"), "{ok:?}");
        let lower = ok.text.to_lowercase();
        assert!(lower.contains("x-frame-options: deny"), "{ok:?}");
        assert!(lower.contains("x-content-type-options: nosniff"), "{ok:?}");
    }
    // Remembered: the same credentials again, and still refused when wrong.
    let again = get(s(&[
        "--cacert",
        ca,
        "-u",
        &format!("prometheus:{PASSWORD}"),
        &https(addr),
    ]))
    .await;
    assert_eq!(again.status, 200);
    let wrong = get(s(&["--cacert", ca, "-u", "prometheus:nope", &https(addr)])).await;
    assert_eq!(wrong.status, 401);
    let r = served.stats.rejections();
    assert_eq!(r.unauthorized, 4);
    assert!(
        r.tls_handshake >= 2,
        "plain HTTP and the untrusted chain: {r:?}"
    );
}

/// The toolkit's client-certificate policies, each against no
/// certificate, a certificate of another CA, and one of the configured
/// CA; and `client_allowed_sans`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_are_asked_for_as_the_policy_says() {
    let dir = tempfile::tempdir().unwrap();
    let _pki = pki(dir.path());
    let p = |n: &str| dir.path().join(n).display().to_string();
    let ca = p("ca.pem");
    let with = |name: &str| {
        s(&[
            "--cert",
            &p(&format!("{name}.pem")),
            "--key",
            &p(&format!("{name}.key")),
        ])
    };
    // (policy and extra keys, [no certificate, stranger, client, intruder] → answered?)
    let cases: &[(&str, [bool; 4])] = &[
        ("client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.pem", [false, false, true, true]),
        ("client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: ca.pem", [true, false, true, true]),
        ("client_auth_type: RequireAnyClientCert", [false, true, true, true]),
        ("client_auth_type: RequestClientCert", [true, true, true, true]),
        (
            "client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.pem\n  client_allowed_sans: [prometheus.test]",
            [false, false, true, false],
        ),
    ];
    for (policy, want) in cases {
        let path = write_config(
            dir.path(),
            &format!(
                "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n  {policy}\n"
            ),
        );
        let web = Web::load(&path).unwrap_or_else(|e| panic!("{policy}: {e}"));
        let served = start(&web).await;
        let mut refused = 0;
        for (i, who) in [None, Some("stranger"), Some("client"), Some("intruder")]
            .iter()
            .enumerate()
        {
            let mut args = s(&["--cacert", &ca]);
            if let Some(who) = who {
                args.extend(with(who));
            }
            args.push(https(served.addr));
            let got = get(args).await;
            assert_eq!(
                got.status == 200,
                want[i],
                "{policy}: client {who:?} answered {}: {got:?}",
                got.status
            );
            refused += u64::from(!want[i]);
        }
        assert_eq!(served.stats.rejections().tls_handshake, refused, "{policy}");
    }
}

/// A certificate rotated under the running listener is served to the next
/// connection within a few looks of the watcher, without a restart; a
/// broken key keeps the rotated certificate in force and is counted; an
/// unreadable file at a reload (SIGHUP) too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_certificate_is_served_and_a_broken_one_keeps_the_last_good() {
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path());
    let path = write_config(
        dir.path(),
        "tls_server_config:\n  cert_file: live.pem\n  key_file: live.key\n",
    );
    let install = |name: &str| {
        std::fs::copy(
            dir.path().join(format!("{name}.pem")),
            dir.path().join("live.pem"),
        )
        .unwrap();
        std::fs::copy(
            dir.path().join(format!("{name}.key")),
            dir.path().join("live.key"),
        )
        .unwrap();
    };
    install("server");
    let web = Web::load(&path).unwrap();
    let served = start(&web).await;
    let addr = served.addr;
    let serial = move || async move {
        tokio::task::spawn_blocking(move || served_serial(addr))
            .await
            .unwrap()
    };
    assert_eq!(serial().await.as_deref(), Some("01"));

    let _ = pki.issue("ca", "rotated", "IP:127.0.0.1", Usage::Server, 2);
    let rotated = Instant::now();
    install("rotated");
    let deadline = rotated + Duration::from_secs(15);
    while serial().await.as_deref() != Some("02") {
        assert!(
            Instant::now() < deadline,
            "the rotated certificate not served within 15 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!("rotation served after {:?}", rotated.elapsed());
    assert_eq!(web.reloads().ok, 1);

    std::fs::write(dir.path().join("live.key"), "not a key\n").unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    while web.reloads().invalid == 0 {
        assert!(
            Instant::now() < deadline,
            "the broken key not noticed within 15 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        serial().await.as_deref(),
        Some("02"),
        "the last good certificate stays"
    );
    let ok = get(s(&[
        "--cacert",
        &dir.path().join("ca.pem").display().to_string(),
        &https(addr),
    ]))
    .await;
    assert_eq!(ok.status, 200, "{ok:?}");

    std::fs::remove_file(&path).unwrap();
    assert!(matches!(
        web.reload(),
        Err(WebConfigError::Unreadable { .. })
    ));
    assert_eq!(web.reloads().unreadable, 1);
    assert_eq!(serial().await.as_deref(), Some("02"));
    assert_eq!(web.reloads().ok, 1, "nothing bad was taken");
}

/// `rate_limit`: the burst, then 429 until the interval refills a token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rate_limit_answers_429_past_its_burst() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(dir.path(), "rate_limit:\n  interval: 1m\n  burst: 2\n");
    let web = Web::load(&path).unwrap();
    assert!(!web.is_tls());
    let served = start(&web).await;
    let url = format!("http://{}/", served.addr);
    let codes: Vec<u16> = {
        let mut v = Vec::new();
        for _ in 0..3 {
            v.push(get(s(&[&url])).await.status);
        }
        v
    };
    assert_eq!(codes, [200, 200, 429]);
    assert_eq!(served.stats.rejections().rate_limited, 1);
}

/// Every file the listener cannot serve is refused whole, naming the key
/// and what is expected; what it can safely ignore is a warning; an empty
/// file is plain HTTP; names are relative to the file's directory.
#[test]
fn a_file_that_cannot_be_served_is_refused_naming_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let _pki = pki(dir.path());
    let tls = "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n";
    let bad: &[(&str, &str)] = &[
        ("tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n  nonsense: 1\n", "nonsense"),
        ("basic_auth: {}\n", "basic_auth"),
        ("tls_server_config:\n  cert_file: missing.pem\n  key_file: server.key\n", "cert_file"),
        ("tls_server_config:\n  key_file: server.key\n", "no cert_file"),
        ("tls_server_config:\n  cert_file: server.pem\n  key_file: ca.key\n", "does not go with"),
        ("tls_server_config:\n  cert_file: server.key\n  key_file: server.key\n", "no CERTIFICATE"),
        (&format!("{tls}  client_ca_file: ca.pem\n"), "NoClientCert"),
        (&format!("{tls}  client_auth_type: RequireAndVerifyClientCert\n"), "needs client_ca_file"),
        (&format!("{tls}  client_auth_type: Sometimes\n"), "RequireAndVerifyClientCert"),
        (
            &format!("{tls}  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: ca.pem\n  client_allowed_sans: [a]\n"),
            "client_allowed_sans",
        ),
        (&format!("{tls}  min_version: TLS13\n  max_version: TLS12\n"), "above max_version"),
        (&format!("{tls}  max_version: TLS11\n"), "max_version"),
        (&format!("{tls}  min_version: SSL3\n"), "not a TLS version"),
        (&format!("{tls}  cipher_suites: [TLS_RSA_WITH_RC4_128_SHA]\n"), "none of"),
        (&format!("{tls}  curve_preferences: [Curve25519]\n"), "not a curve"),
        ("basic_auth_users:\n  alice: plaintext\n", "basic_auth_users.alice"),
        (&format!("basic_auth_users:\n  'a:b': '{PASSWORD_HASH}'\n"), "contains ':'"),
        ("http_server_config:\n  headers:\n    X-Powered-By: me\n", "cannot be set"),
        ("http_server_config:\n  headers:\n    X-Frame-Options: allow\n", "deny or sameorigin"),
        ("rate_limit:\n  interval: 1s\n  burst: 0\n", "rate_limit.burst"),
        ("rate_limit:\n  interval: 5\n  burst: 1\n", "rate_limit.interval"),
        ("tls_server_config: [\n", "expected the exporter toolkit"),
    ];
    for (yaml, want) in bad {
        let path = write_config(dir.path(), yaml);
        match Web::load(&path) {
            Err(e @ WebConfigError::Invalid { .. }) => {
                let text = e.to_string();
                assert!(text.contains(want), "{yaml:?}: {text:?} lacks {want:?}");
                assert!(text.starts_with(&path.display().to_string()), "{text}");
            }
            other => panic!("{yaml:?}: {other:?}"),
        }
    }
    assert!(matches!(
        Web::load(&dir.path().join("absent.yml")),
        Err(WebConfigError::Unreadable { .. })
    ));

    let warned: &[(&str, &str)] = &[
        (&format!("{tls}  min_version: TLS10\n"), "min_version"),
        (
            &format!("{tls}  cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256]\n"),
            "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
        ),
        (&format!("{tls}  curve_preferences: [CurveP521, X25519]\n"), "CurveP521"),
    ];
    for (yaml, want) in warned {
        let path = write_config(dir.path(), yaml);
        let warnings =
            lachesis_listen::web::check(&path).unwrap_or_else(|e| panic!("{yaml:?}: {e}"));
        assert!(
            warnings.iter().any(|w| w.contains(want)),
            "{yaml:?}: {warnings:?}"
        );
    }

    for yaml in [
        "",
        "# nothing yet\n",
        "http_server_config:\n  http2: true\n",
    ] {
        let web = Web::load(&write_config(dir.path(), yaml)).unwrap();
        assert!(!web.is_tls() && !web.requires_credentials(), "{yaml:?}");
    }
    // Relative to the file, whatever the working directory.
    let elsewhere = tempfile::tempdir().unwrap();
    let moved = elsewhere.path().join("web.yml");
    std::fs::write(
        &moved,
        format!(
            "tls_server_config:\n  cert_file: {0}/server.pem\n  key_file: {0}/server.key\n",
            dir.path().display()
        ),
    )
    .unwrap();
    assert!(Web::load(&moved).unwrap().is_tls());
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(
        sub.join("web.yml"),
        "tls_server_config:\n  cert_file: ../server.pem\n  key_file: ../server.key\n",
    )
    .unwrap();
    assert!(Web::load(&sub.join("web.yml")).unwrap().is_tls());
}
