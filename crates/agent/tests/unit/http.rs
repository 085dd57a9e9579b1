//! Both HTTP listeners on loopback, over real sockets and a real HTTP
//! client: a real ledger holding one flushed row behind `/metrics`, the
//! planner's reviewed `two-tenants` plan behind the debug pages.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lachesis_abi::{Direction, FlowCounters, FlowKey, L4Class, Mac, Zone};
use lachesis_agent::config::{Config, LogLevel};
use lachesis_agent::http::{
    serve, DebugRoutes, DebugSource, FlowListing, LiveBinding, MetricsRoutes,
};
use lachesis_ledger::memory::{MemoryAttribution, OwnedBinding, SwapSource};
use lachesis_ledger::{state, Exporter, Ledger, UnresolvedLimits};
use lachesis_listen::Endpoint;
use lachesis_planner::{Plan, Topology};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use reqwest::StatusCode;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";
/// The one ledger row's series, as the text format prints it.
const TENANT_SERIES: &str = "lachesis_tenant_bytes_total{tenant_id=\"project-a\",zone=\"external\",external_network=\"public\",direction=\"tx\"} 1500";

/// The reviewed plan of `crates/planner/tests/fixtures/two-tenants`.
fn fixture_plan() -> Plan {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../planner/tests/fixtures/two-tenants.expected.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

struct Fake {
    plan: Arc<Plan>,
}

impl DebugSource for Fake {
    fn config(&self) -> Arc<Config> {
        Arc::new(Config::default())
    }
    fn committed_plan(&self) -> Option<Arc<Plan>> {
        Some(self.plan.clone())
    }
    fn bindings(&self) -> Vec<LiveBinding> {
        self.plan
            .bindings
            .iter()
            .cloned()
            .map(LiveBinding::live)
            .collect()
    }
    fn flows(&self, _limit: usize) -> FlowListing {
        FlowListing::default()
    }
    fn topology(&self) -> Option<Arc<Topology>> {
        None
    }
    fn health(&self) -> lachesis_agent::http::AgentHealth {
        lachesis_agent::http::AgentHealth {
            phase: Some("running"),
            degraded: false,
            synced_at: None,
            last_pass: None,
        }
    }
    fn taps(&self) -> lachesis_agent::http::NodeTaps {
        lachesis_agent::http::NodeTaps::default()
    }
    fn port_totals(&self) -> std::collections::BTreeMap<String, lachesis_ledger::PortTotals> {
        std::collections::BTreeMap::new()
    }
}

/// A ledger holding one 1500-byte tx flow of project-a to the internet,
/// flushed so the billing families (the durable view) show it; built as
/// the ledger crate's own example does.
fn ledger_exporter(dir: &std::path::Path) -> Exporter {
    let vm = Mac([2, 0, 0, 0, 0, 1]);
    let router = Mac([2, 0, 0, 0, 0, 0xfe]);
    let mut attr = MemoryAttribution::default();
    attr.bindings
        .insert(vm, OwnedBinding::new("project-a", "server-1", "port-1"));
    attr.routers.insert(router, "public".to_owned());
    let source = Arc::new(SwapSource::new(attr));
    let ledger = Arc::new(Ledger::new(UnresolvedLimits::default(), source));
    let key = FlowKey {
        src_mac: vm.0,
        dst_mac: router.0,
        eth_proto: 0x0800,
        direction: Direction::Tx.code(),
        zone: Zone::External.code(),
        l4: L4Class::Tcp.code(),
        pad: 0,
    };
    let reading = FlowCounters {
        bytes: 1500,
        packets: 1,
        last_seen_ns: 9,
        created_ns: 7,
    };
    ledger.apply_drain(&[(key, reading)], 0).unwrap();
    let file = Arc::new(state::StateFile::new(state::StatePaths::new(
        dir.join("state.json"),
    )));
    file.flush(&ledger).unwrap();
    Exporter::new(ledger, file)
}

/// Both listeners serving on loopback ports, as the daemon runs them.
struct Listeners {
    metrics: SocketAddr,
    debug: SocketAddr,
    ready: tokio::sync::watch::Sender<bool>,
    levels: Arc<Mutex<Vec<LogLevel>>>,
    cancel: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
}

impl Listeners {
    async fn start() -> Listeners {
        let dir = tempfile::tempdir().unwrap();
        let mut registry = Registry::default();
        let degraded = Gauge::<i64>::default();
        degraded.set(1);
        registry.register(
            "lachesis_degraded",
            "Running from the state file's plan",
            degraded,
        );
        let (ready, ready_rx) = tokio::sync::watch::channel(false);
        let readiness = move || {
            if *ready_rx.borrow() {
                Ok(())
            } else {
                Err("boot phase attached".to_owned())
            }
        };
        let metrics = MetricsRoutes::new(
            Arc::new(ledger_exporter(dir.path())),
            registry,
            Arc::new(readiness),
        );
        let levels: Arc<Mutex<Vec<LogLevel>>> = Arc::default();
        let seen = levels.clone();
        let control = move |level| {
            seen.lock().unwrap().push(level);
            Ok(())
        };
        let debug = DebugRoutes::new(
            Arc::new(Fake {
                plan: Arc::new(fixture_plan()),
            }),
            Arc::new(control),
        );
        let cancel = CancellationToken::new();
        let m = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let d = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (metrics_addr, debug_addr) = (m.local_addr().unwrap(), d.local_addr().unwrap());
        let tasks = vec![
            tokio::spawn(serve(
                m,
                Endpoint::plain("metrics"),
                Arc::new(metrics),
                cancel.clone(),
            )),
            tokio::spawn(serve(
                d,
                Endpoint::plain("debug"),
                Arc::new(debug),
                cancel.clone(),
            )),
        ];
        Listeners {
            metrics: metrics_addr,
            debug: debug_addr,
            ready,
            levels,
            cancel,
            tasks,
            http: reqwest::Client::new(),
            _dir: dir,
        }
    }

    async fn get(
        &self,
        addr: SocketAddr,
        path: &str,
        accept: Option<&str>,
    ) -> (StatusCode, String, String) {
        let mut req = self.http.get(format!("http://{addr}{path}"));
        if let Some(a) = accept {
            req = req.header("accept", a);
        }
        let r = req.send().await.unwrap();
        let status = r.status();
        let ctype = r
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        (status, ctype, r.text().await.unwrap())
    }

    async fn lookup(&self, query: &str) -> Value {
        let (status, ctype, body) = self
            .get(self.debug, &format!("/debug/lookup?{query}"), None)
            .await;
        assert_eq!(status, StatusCode::OK, "{query}: {body}");
        assert_eq!(ctype, "application/json");
        serde_json::from_str(&body).unwrap()
    }

    async fn put_level(&self, body: &'static str) -> (StatusCode, String) {
        let r = self
            .http
            .put(format!("http://{}/debug/log-level", self.debug))
            .body(body)
            .send()
            .await
            .unwrap();
        (r.status(), r.text().await.unwrap())
    }
}

#[tokio::test]
async fn metrics_negotiates_openmetrics_as_one_document() {
    let agent = Listeners::start().await;
    let (status, ctype, body) = agent
        .get(
            agent.metrics,
            "/metrics",
            Some("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(ctype, OPENMETRICS);
    assert!(body.contains(&format!("\n{TENANT_SERIES}\n")), "{body}");
    assert!(body.contains("\nlachesis_degraded 1\n"), "{body}");
    assert_eq!(body.matches("# EOF").count(), 1, "{body}");
    assert!(body.ends_with("\n# EOF\n"));
    // The ledger's families, then the agent's.
    let billing = body.find("# TYPE lachesis_tenant_bytes counter").unwrap();
    let agent_family = body.find("# TYPE lachesis_degraded gauge").unwrap();
    assert!(billing < agent_family);
}

#[tokio::test]
async fn metrics_defaults_to_prometheus_text() {
    let agent = Listeners::start().await;
    for accept in [None, Some("text/plain"), Some("*/*")] {
        let (status, ctype, body) = agent.get(agent.metrics, "/metrics", accept).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(ctype, PROMETHEUS_TEXT, "{accept:?}");
        assert!(body.contains(&format!("\n{TENANT_SERIES}\n")), "{body}");
        assert!(body.contains("# TYPE lachesis_tenant_bytes_total counter\n"));
        assert!(!body.contains("# EOF"));
        // The scrapes before this one were timed.
        assert!(
            body.contains("lachesis_collect_duration_seconds_count"),
            "{body}"
        );
    }
}

/// Issue 19 item 14: over a real socket, `Accept-Encoding: gzip` (what
/// Prometheus sends) gets a gzip body that decodes to the exposition a
/// plain scrape gets; without it the body stays plain.
#[tokio::test]
async fn metrics_is_gzipped_when_the_scraper_asks_and_plain_otherwise() {
    use std::io::Read as _;
    let agent = Listeners::start().await;
    let url = format!("http://{}/metrics", agent.metrics);
    let plain = agent.http.get(&url).send().await.unwrap();
    assert_eq!(plain.status(), StatusCode::OK);
    assert!(plain.headers().get("content-encoding").is_none());
    let plain = plain.text().await.unwrap();
    let packed = agent
        .http
        .get(&url)
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(packed.status(), StatusCode::OK);
    assert_eq!(packed.headers()["content-encoding"], "gzip");
    assert_eq!(packed.headers()["content-type"], PROMETHEUS_TEXT);
    let packed = packed.bytes().await.unwrap();
    let mut unpacked = String::new();
    flate2::read::GzDecoder::new(&packed[..])
        .read_to_string(&mut unpacked)
        .unwrap();
    // The render counter moved between the two scrapes; the rest is equal.
    let steady = |body: &str| -> Vec<String> {
        body.lines()
            .filter(|l| !l.contains("lachesis_collect_duration_seconds"))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(steady(&unpacked), steady(&plain));
    assert!(
        unpacked.contains(&format!("\n{TENANT_SERIES}\n")),
        "{unpacked}"
    );
}

#[tokio::test]
async fn readyz_flips_from_503_to_200_when_boot_completes() {
    let agent = Listeners::start().await;
    let (status, _, body) = agent.get(agent.metrics, "/readyz", None).await;
    assert_eq!(
        (status, body.as_str()),
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: boot phase attached\n"
        )
    );
    // Healthy meanwhile: the process serves.
    let (status, _, body) = agent.get(agent.metrics, "/healthz", None).await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "ok\n"));
    agent.ready.send_replace(true);
    let (status, _, body) = agent.get(agent.metrics, "/readyz", None).await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "ready\n"));
}

#[tokio::test]
async fn the_listeners_keep_their_own_pages() {
    let agent = Listeners::start().await;
    let (status, _, _) = agent.get(agent.metrics, "/debug/config", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, _) = agent.get(agent.debug, "/metrics", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let r = agent
        .http
        .post(format!("http://{}/metrics", agent.metrics))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(r.headers()["allow"], "GET, HEAD");
    // HEAD answers with the headers only.
    let r = agent
        .http
        .head(format!("http://{}/healthz", agent.metrics))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.text().await.unwrap(), "");
}

#[tokio::test]
async fn debug_plan_and_config() {
    let agent = Listeners::start().await;
    let (status, ctype, body) = agent.get(agent.debug, "/debug/plan", None).await;
    assert_eq!(
        (status, ctype.as_str()),
        (StatusCode::OK, "application/json")
    );
    assert_eq!(body, fixture_plan().to_json());
    let (status, ctype, body) = agent.get(agent.debug, "/debug/config", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(ctype.starts_with("application/yaml"));
    assert_eq!(body, Config::default().to_yaml());
}

#[tokio::test]
async fn debug_lookup_classifies_like_the_kernel_over_the_fixture_plan() {
    let agent = Listeners::start().await;
    // fa:16:3e:11:11:01 belongs to project 3f2a…, which owns 10.1.0.0/24
    // and 2001:db8:a::/64 and reaches 10.2.0.0/24 through a shared router.
    let vm = "mac=fa:16:3e:11:11:01";
    for (query, zone, matched) in [
        ("ip=10.1.0.9", "same_tenant", Some("10.1.0.0/24")),
        ("ip=10.1.0.1", "infra", Some("10.1.0.1/32")),
        ("ip=10.2.0.9", "other_tenant", Some("10.2.0.0/24")),
        ("ip=2001:db8:a::9", "same_tenant", Some("2001:db8:a::/64")),
        // Not the tenant's: the global rows answer.
        ("ip=100.64.0.9", "shared", Some("100.64.0.0/24")),
        ("ip=8.8.8.8", "external", Some("0.0.0.0/0")),
        // Direct L2 to a VM of project 7c41…: no trie.
        ("ip=10.2.0.5&peer=fa:16:3e:22:22:01", "other_tenant", None),
    ] {
        let v = agent.lookup(&format!("{vm}&{query}")).await;
        assert_eq!(v["zone"], zone, "{query}: {v:#}");
        let last_match = v["steps"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["step"] == "trie")
            .filter_map(|s| s["matched"]["prefix"].as_str())
            .next_back();
        assert_eq!(last_match, matched, "{query}: {v:#}");
    }
    // The amphora data port talking from its own address: segment 2.
    let v = agent
        .lookup("mac=fa:16:3e:0c:00:02&ip=10.2.0.9&local=10.2.0.21")
        .await;
    assert_eq!(v["zone"], "infra", "{v:#}");
    let v = agent.lookup("mac=fa:16:3e:99:99:99&ip=8.8.8.8").await;
    assert_eq!(v["zone"], "miss");
    // Bad input: 400 naming the parameter and the form.
    let (status, _, body) = agent
        .get(
            agent.debug,
            "/debug/lookup?mac=fa:16:3e:11:11&ip=8.8.8.8",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.starts_with("parameter `mac`"), "{body}");
    assert!(body.contains("six hex octets"), "{body}");
}

#[tokio::test]
async fn put_log_level_good_and_bad() {
    let agent = Listeners::start().await;
    let (status, body) = agent.put_level("warn").await;
    assert_eq!(
        (status, body.as_str()),
        (StatusCode::OK, "log level is now warn\n")
    );
    let (status, body) = agent.put_level("loud").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("error, warn, info, debug, trace"), "{body}");
    assert_eq!(*agent.levels.lock().unwrap(), [LogLevel::Warn]);
}

#[tokio::test]
async fn cancellation_stops_both_listeners() {
    let agent = Listeners::start().await;
    // A keep-alive connection is open when the token fires.
    let (status, _, _) = agent.get(agent.metrics, "/healthz", None).await;
    assert_eq!(status, StatusCode::OK);
    agent.cancel.cancel();
    for task in agent.tasks {
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("serve returns after cancellation")
            .unwrap();
    }
    for addr in [agent.metrics, agent.debug] {
        assert!(
            tokio::net::TcpStream::connect(addr).await.is_err(),
            "{addr} still accepts"
        );
    }
}
