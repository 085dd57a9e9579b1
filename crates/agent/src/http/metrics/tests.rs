use std::sync::atomic::AtomicBool;

use hyper::header::{ALLOW, CONTENT_TYPE};
use hyper::Method;
use lachesis_ledger::memory::{MemoryAttribution, SwapSource};
use lachesis_ledger::state::{StateFile, StatePaths};
use lachesis_ledger::{Ledger, UnresolvedLimits};
use prometheus_client::metrics::counter::Counter;

use super::*;
use crate::http::reply::body_text;

/// An empty ledger (its health families still render), an agent registry
/// with one counter at 7, and a readiness flag the test flips.
fn routes() -> (MetricsRoutes, Arc<AtomicBool>) {
    let source = Arc::new(SwapSource::new(MemoryAttribution::default()));
    let ledger = Arc::new(Ledger::new(UnresolvedLimits::default(), source));
    let mut registry = Registry::default();
    let kicks = Counter::<u64>::default();
    kicks.inc_by(7);
    registry.register("lachesis_test_kicks", "A test counter", kicks);
    let ready = Arc::new(AtomicBool::new(false));
    let flag = ready.clone();
    let readiness = move || {
        if flag.load(Ordering::SeqCst) {
            Ok(())
        } else {
            Err("boot phase metadata_ready".to_owned())
        }
    };
    let routes = MetricsRoutes::new(
        Arc::new(Exporter::new(
            ledger,
            Arc::new(StateFile::new(StatePaths::new("/nonexistent/state.json"))),
        )),
        registry,
        Arc::new(readiness),
    );
    (routes, ready)
}

fn get(path: &str, accept: Option<&str>) -> Request<Bytes> {
    let mut b = Request::builder().uri(path);
    if let Some(a) = accept {
        b = b.header(ACCEPT, a);
    }
    b.body(Bytes::new()).unwrap()
}

/// `# TYPE` names in document order.
fn families(body: &str) -> Vec<&str> {
    body.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| l.split(' ').next().unwrap())
        .collect()
}

#[test]
fn openmetrics_is_one_document_with_one_eof_at_the_end() {
    let (routes, _) = routes();
    let r = routes.handle(&get(
        "/metrics",
        Some("application/openmetrics-text; version=1.0.0"),
    ));
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(
        r.headers()[CONTENT_TYPE],
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    let body = body_text(r);
    assert_eq!(body.matches("# EOF").count(), 1, "{body}");
    assert!(body.ends_with("\n# EOF\n"), "{body}");
    // Ledger families first, then the agent's (OpenMetrics drops `_total`
    // from a counter's TYPE line).
    let names = families(&body);
    let ledger = names
        .iter()
        .position(|n| *n == "lachesis_ledger_rows")
        .unwrap();
    let agent = names
        .iter()
        .position(|n| *n == "lachesis_test_kicks")
        .unwrap();
    assert!(ledger < agent, "{names:?}");
    assert!(body.contains("\nlachesis_test_kicks_total 7\n"), "{body}");
    assert!(names.contains(&COLLECT_DURATION), "{names:?}");
}

#[test]
fn prometheus_text_by_default_and_without_eof() {
    let (routes, _) = routes();
    for accept in [None, Some("text/plain;version=0.0.4"), Some("*/*")] {
        let r = routes.handle(&get("/metrics", accept));
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(
            r.headers()[CONTENT_TYPE],
            "text/plain; version=0.0.4; charset=utf-8"
        );
        let body = body_text(r);
        assert!(!body.contains("# EOF"), "{body}");
        assert!(
            body.contains("# TYPE lachesis_test_kicks_total counter\n"),
            "{body}"
        );
        assert!(
            body.contains("# TYPE lachesis_ledger_rows gauge\n"),
            "{body}"
        );
    }
}

#[test]
fn every_family_appears_once() {
    let (routes, _) = routes();
    for format in [Format::OpenMetrics, Format::PrometheusText] {
        let body = routes.render(format).unwrap();
        let mut names = families(&body);
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n, "{format:?}: a family twice in {body}");
    }
}

#[test]
fn each_render_is_observed_in_the_collect_duration() {
    let (routes, _) = routes();
    let count = |body: &str| -> u64 {
        let line = body
            .lines()
            .find(|l| l.starts_with("lachesis_collect_duration_seconds_count"))
            .unwrap_or_else(|| panic!("no _count in {body}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    // A scrape shows the renders before it.
    assert_eq!(count(&routes.render(Format::PrometheusText).unwrap()), 0);
    assert_eq!(count(&routes.render(Format::OpenMetrics).unwrap()), 1);
    assert_eq!(count(&routes.render(Format::PrometheusText).unwrap()), 2);
}

#[test]
fn readyz_is_503_with_the_phase_until_boot_completes() {
    let (routes, ready) = routes();
    let r = routes.handle(&get("/readyz", None));
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body_text(r), "not ready: boot phase metadata_ready\n");
    ready.store(true, Ordering::SeqCst);
    let r = routes.handle(&get("/readyz", None));
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(body_text(r), "ready\n");
}

#[test]
fn healthz_answers_while_not_ready() {
    let (routes, _) = routes();
    let r = routes.handle(&get("/healthz", None));
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(body_text(r), "ok\n");
}

/// Issue 19 item 9: `/healthz` answered 200 while drains stalled; it says
/// why it is unhealthy now, with a 503 a probe or a watchdog acts on.
#[test]
fn healthz_is_503_with_the_reason_when_the_agent_stopped_working() {
    struct Stalled;
    impl Readiness for Stalled {
        fn ready(&self) -> Result<(), String> {
            Ok(())
        }
        fn alive(&self) -> Result<(), String> {
            Err("no successful drain for 95s".to_owned())
        }
    }
    let source = Arc::new(SwapSource::new(MemoryAttribution::default()));
    let ledger = Arc::new(Ledger::new(UnresolvedLimits::default(), source));
    let routes = MetricsRoutes::new(
        Arc::new(Exporter::new(
            ledger,
            Arc::new(StateFile::new(StatePaths::new("/nonexistent/state.json"))),
        )),
        Registry::default(),
        Arc::new(Stalled),
    );
    let r = routes.handle(&get("/healthz", None));
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body_text(r), "unhealthy: no successful drain for 95s\n");
}

#[test]
fn unknown_paths_are_404_and_other_methods_405() {
    let (routes, _) = routes();
    for path in ["/", "/metrics/", "/debug/config", "/metricsx"] {
        let r = routes.handle(&get(path, None));
        assert_eq!(r.status(), StatusCode::NOT_FOUND, "{path}");
        assert!(body_text(r).contains("/metrics, /healthz, /readyz"));
    }
    for path in PATHS {
        let req = Request::builder()
            .method(Method::POST)
            .uri(*path)
            .body(Bytes::from_static(b"x"))
            .unwrap();
        let r = routes.handle(&req);
        assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED, "{path}");
        assert_eq!(r.headers()[ALLOW], "GET, HEAD");
    }
    // A query string does not change the page.
    assert_eq!(
        routes.handle(&get("/healthz?x=1", None)).status(),
        StatusCode::OK
    );
}

/// The catalogue row of the one family this module registers.
#[test]
fn collect_duration_is_documented_as_rendered() {
    let doc = include_str!("../../../../../docs/metrics.md");
    let row = doc
        .lines()
        .find(|l| l.starts_with(&format!("| `{COLLECT_DURATION}` |")))
        .expect("documented in docs/metrics.md");
    let cells: Vec<&str> = row.split('|').map(str::trim).collect();
    assert_eq!((cells[2], cells[3], cells[4]), ("histogram", "—", "agent"));
    let (routes, _) = routes();
    let body = routes.render(Format::OpenMetrics).unwrap();
    assert!(
        body.contains(&format!("# TYPE {COLLECT_DURATION} histogram\n")),
        "{body}"
    );
}

/// The body of a reply as bytes (a gzip body is not UTF-8).
fn body_bytes(r: Reply) -> Vec<u8> {
    use http_body_util::BodyExt as _;
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(r.into_body().collect())
        .unwrap()
        .to_bytes()
        .to_vec()
}

/// The exposition without `lachesis_collect_duration_seconds`, which
/// counts every render and so differs between two scrapes.
fn without_collect_duration(body: &str) -> String {
    let mut out = String::new();
    for line in body.lines().filter(|l| !l.contains(COLLECT_DURATION)) {
        out.push_str(line);
        out.push('\n');
    }
    out
}

fn get_encoded(accept: Option<&str>, encoding: &str) -> Request<Bytes> {
    let mut b = Request::builder()
        .uri("/metrics")
        .header(ACCEPT_ENCODING, encoding);
    if let Some(a) = accept {
        b = b.header(ACCEPT, a);
    }
    b.body(Bytes::new()).unwrap()
}

/// Issue 19 item 14: `/metrics` ignored `Accept-Encoding` and sent every
/// scrape uncompressed. A gzip request gets a gzip body that decodes to
/// the same exposition, in both formats.
#[test]
fn a_gzip_request_gets_the_same_exposition_gzipped() {
    use std::io::Read as _;
    let (routes, _) = routes();
    for accept in [None, Some("application/openmetrics-text; version=1.0.0")] {
        let plain = body_text(routes.handle(&get("/metrics", accept)));
        let r = routes.handle(&get_encoded(accept, "gzip, deflate"));
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.headers()[CONTENT_ENCODING], "gzip", "{accept:?}");
        assert_eq!(r.headers()[VARY], "Accept, Accept-Encoding");
        let packed = body_bytes(r);
        assert_eq!(&packed[..2], &[0x1f, 0x8b], "a gzip member");
        let mut unpacked = String::new();
        flate2::read::GzDecoder::new(packed.as_slice())
            .read_to_string(&mut unpacked)
            .unwrap();
        assert!(packed.len() < unpacked.len(), "compressed");
        assert_eq!(
            without_collect_duration(&unpacked),
            without_collect_duration(&plain),
            "{accept:?}"
        );
    }
}

#[test]
fn a_plain_request_stays_plain() {
    let (routes, _) = routes();
    for encoding in [None, Some("identity"), Some("gzip;q=0"), Some("br")] {
        let req = match encoding {
            Some(e) => get_encoded(None, e),
            None => get("/metrics", None),
        };
        let r = routes.handle(&req);
        assert_eq!(r.status(), StatusCode::OK);
        assert!(r.headers().get(CONTENT_ENCODING).is_none(), "{encoding:?}");
        assert_eq!(r.headers()[VARY], "Accept, Accept-Encoding");
        let body = body_text(r);
        assert!(body.starts_with("# HELP "), "{encoding:?}: {body}");
    }
}
