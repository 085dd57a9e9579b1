use std::sync::Mutex;

use hyper::header::{ALLOW, CONTENT_TYPE};
use hyper::Method;
use lachesis_abi::{Direction, L4Class, Mac, Zone};
use lachesis_planner::{Anomaly, AnomalyClass, Binding, Plan, Scope, TrieRow};
use serde_json::Value;

use super::*;
use crate::config::Config;
use crate::http::reply::body_text;
use crate::http::source::{FlowListing, LiveBinding, LogFilter, TrackedLevel};

const VM: &str = "02:00:00:00:00:01";

struct Fake {
    config: Arc<Config>,
    plan: Option<Arc<Plan>>,
    flows: usize,
    asked_limit: Mutex<Option<usize>>,
}

impl DebugSource for Fake {
    fn config(&self) -> Arc<Config> {
        self.config.clone()
    }
    fn committed_plan(&self) -> Option<Arc<Plan>> {
        self.plan.clone()
    }
    fn bindings(&self) -> Vec<LiveBinding> {
        self.plan
            .iter()
            .flat_map(|p| p.bindings.iter().cloned().map(LiveBinding::live))
            .collect()
    }
    fn topology(&self) -> Option<Arc<lachesis_planner::Topology>> {
        None
    }
    fn health(&self) -> crate::http::AgentHealth {
        crate::http::AgentHealth {
            phase: Some("running"),
            degraded: false,
            synced_at: None,
            last_pass: None,
        }
    }
    fn taps(&self) -> crate::http::NodeTaps {
        crate::http::NodeTaps::default()
    }
    fn port_totals(&self) -> std::collections::BTreeMap<String, lachesis_ledger::PortTotals> {
        std::collections::BTreeMap::new()
    }
    fn flows(&self, limit: usize) -> FlowListing {
        *self.asked_limit.lock().unwrap() = Some(limit);
        // Deliberately ignores the limit: the page must still bound it.
        let flow = |i: usize| FlowEntry {
            src_mac: VM.parse().unwrap(),
            dst_mac: Mac([2, 0, 0, 0, 0, 0xfe]),
            eth_proto: 0x0800,
            direction: Direction::Tx,
            zone: Zone::External,
            l4: L4Class::Tcp,
            bytes: 1000 - i as u64,
            packets: 1,
            tenant: Some("project-a".to_owned()),
            server: Some("server-1".to_owned()),
            port: Some("port-1".to_owned()),
        };
        FlowListing {
            total: self.flows,
            flows: (0..self.flows).map(flow).collect(),
        }
    }
}

fn plan() -> Plan {
    Plan {
        trie: vec![
            TrieRow {
                tenant: Scope::Global,
                prefix: "0.0.0.0/0".parse().unwrap(),
                zone: Zone::External,
            },
            TrieRow {
                tenant: Scope::Tenant("project-a".to_owned()),
                prefix: "10.0.0.0/24".parse().unwrap(),
                zone: Zone::SameTenant,
            },
        ],
        bindings: vec![Binding {
            mac: VM.parse().unwrap(),
            tenant: "project-a".to_owned(),
            server: "server-1".to_owned(),
            port: "port-1".to_owned(),
            external_network: None,
            amphora: false,
        }],
        anomalies: vec![Anomaly {
            class: AnomalyClass::Cycle,
            detail: "router r1 → r2 → r1".to_owned(),
        }],
        ..Plan::default()
    }
}

type Levels = Arc<Mutex<Vec<LogLevel>>>;

fn fake(plan: Option<Plan>, flows: usize) -> Fake {
    let config = Config::from_yaml(
        "notifications:\n  rabbitmq:\n    url: amqp://user:s3cret@broker:5672/\n",
    )
    .unwrap();
    Fake {
        config: Arc::new(config),
        plan: plan.map(Arc::new),
        flows,
        asked_limit: Mutex::new(None),
    }
}

fn routes_with(plan: Option<Plan>, flows: usize) -> (DebugRoutes, Arc<Fake>, Levels) {
    let fake = Arc::new(fake(plan, flows));
    let levels: Levels = Arc::default();
    let seen = levels.clone();
    let control = move |level: LogLevel| {
        if level == LogLevel::Trace {
            return Err("trace is disabled in this build".to_owned());
        }
        seen.lock().unwrap().push(level);
        Ok(())
    };
    let routes = DebugRoutes::new(fake.clone(), Arc::new(control));
    (routes, fake, levels)
}

fn routes() -> DebugRoutes {
    routes_with(Some(plan()), 3).0
}

fn request(method: Method, uri: &str, body: &'static [u8]) -> Request<Bytes> {
    Request::builder()
        .method(method)
        .uri(uri)
        .body(Bytes::from_static(body))
        .unwrap()
}

fn get(uri: &str) -> Reply {
    routes().handle(&request(Method::GET, uri, b""))
}

fn get_json(routes: &DebugRoutes, uri: &str) -> Value {
    let r = routes.handle(&request(Method::GET, uri, b""));
    assert_eq!(r.status(), StatusCode::OK, "{uri}");
    assert_eq!(r.headers()[CONTENT_TYPE], "application/json");
    serde_json::from_str(&body_text(r)).unwrap()
}

#[test]
fn config_is_the_redacted_effective_yaml() {
    let r = get("/debug/config");
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()[CONTENT_TYPE], "application/yaml; charset=utf-8");
    let body = body_text(r);
    assert!(!body.contains("s3cret"), "{body}");
    assert!(body.contains("broker:5672"), "{body}");
    // The effective values, defaults included.
    assert!(body.contains("127.0.0.1:9848"), "{body}");
    let reread = Config::from_yaml(&body);
    assert!(reread.is_ok(), "{reread:?}");
}

#[test]
fn plan_is_the_plan_commands_json_or_503_before_the_first() {
    let r = get("/debug/plan");
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(body_text(r), plan().to_json());
    let (none, _, _) = routes_with(None, 0);
    let r = none.handle(&request(Method::GET, "/debug/plan", b""));
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(body_text(r).contains("no committed plan"));
}

#[test]
fn anomalies_list_class_and_detail() {
    let v = get_json(&routes(), "/debug/anomalies");
    assert_eq!(v["count"], 1);
    assert_eq!(
        v["anomalies"][0],
        serde_json::json!({"class": "cycle", "detail": "router r1 → r2 → r1"})
    );
    let (none, _, _) = routes_with(None, 0);
    assert_eq!(get_json(&none, "/debug/anomalies")["count"], 0);
}

#[test]
fn flows_are_bounded_by_the_limit_with_the_total() {
    let (routes, fake, _) = routes_with(Some(plan()), 250);
    let v = get_json(&routes, "/debug/flows");
    assert_eq!(
        (
            v["total"].as_u64(),
            v["limit"].as_u64(),
            v["shown"].as_u64()
        ),
        (Some(250), Some(100), Some(100))
    );
    assert_eq!(v["flows"].as_array().unwrap().len(), 100);
    assert_eq!(*fake.asked_limit.lock().unwrap(), Some(FLOWS_DEFAULT_LIMIT));
    let v = get_json(&routes, "/debug/flows?limit=2");
    assert_eq!(v["shown"], 2);
    assert_eq!(
        v["flows"][0],
        serde_json::json!({
            "src_mac": VM, "dst_mac": "02:00:00:00:00:fe", "eth_proto": "0x0800",
            "direction": "tx", "zone": "external", "l4": "tcp",
            "bytes": 1000, "packets": 1,
            "tenant": "project-a", "server": "server-1", "port": "port-1",
        })
    );
    let v = get_json(&routes, &format!("/debug/flows?limit={FLOWS_MAX_LIMIT}"));
    assert_eq!(v["shown"], 250);
    let v = get_json(&routes, "/debug/flows?limit=0");
    assert_eq!(
        (v["total"].as_u64(), v["shown"].as_u64()),
        (Some(250), Some(0))
    );
}

#[test]
fn a_bad_flows_limit_is_400_naming_the_range() {
    for uri in [
        "/debug/flows?limit=10001",
        "/debug/flows?limit=-1",
        "/debug/flows?limit=many",
        "/debug/flows?limit=",
    ] {
        let r = get(uri);
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{uri}");
        let body = body_text(r);
        assert!(body.contains("parameter `limit`"), "{uri}: {body}");
        assert!(body.contains("an integer from 0 to 10000"), "{uri}: {body}");
    }
    let r = get("/debug/flows?top=5");
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(body_text(r).contains("parameter `top`: unknown parameter"));
}

#[test]
fn every_bad_parameter_is_one_line_of_the_400() {
    for (uri, lines) in [
        (
            "/debug/lookup?zone=x&mac=nope&direction=up",
            &[
                "parameter `zone`: unknown parameter; expected one of: mac, ip, peer, local, direction",
                "parameter `mac`: \"nope\" is not valid; expected a MAC address",
                "parameter `ip`: missing; expected an IPv4 or IPv6 address",
                "parameter `direction`: \"up\" is not valid; expected tx",
            ][..],
        ),
        (
            "/debug/lookup?mac=02:00:00:00:00:01&mac=02:00:00:00:00:02&ip=1.1.1.1&local=x",
            &[
                "parameter `mac`: given twice; expected each parameter at most once",
                "parameter `local`: \"x\" is not valid; expected an IPv4 or IPv6 address",
            ][..],
        ),
        (
            "/debug/flows?limit=many&top=5",
            &[
                "parameter `top`: unknown parameter; expected one of: limit",
                "parameter `limit`: \"many\" is not valid; expected an integer from 0 to 10000",
            ][..],
        ),
    ] {
        let r = get(uri);
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{uri}");
        let body = body_text(r);
        let got: Vec<&str> = body.lines().collect();
        assert_eq!(got.len(), lines.len(), "{uri}: {body}");
        for (line, start) in got.iter().zip(lines) {
            assert!(line.starts_with(start), "{uri}: {line:?} is not {start:?}…");
        }
    }
}

#[test]
fn lookup_explains_from_the_plan_rows_and_the_bindings() {
    let v = get_json(&routes(), &format!("/debug/lookup?mac={VM}&ip=10.0.0.9"));
    assert_eq!(v["zone"], "same_tenant");
    assert_eq!(v["steps"][3]["matched"]["prefix"], "10.0.0.0/24");
    let v = get_json(&routes(), &format!("/debug/lookup?mac={VM}&ip=9.9.9.9"));
    assert_eq!(v["zone"], "external");
    let v = get_json(&routes(), "/debug/lookup?mac=02:00:00:00:00:99&ip=9.9.9.9");
    assert_eq!(v["zone"], "miss");
}

#[test]
fn lookup_with_bad_input_is_400_naming_the_parameter_and_form() {
    for (uri, names) in [
        ("/debug/lookup", "parameter `mac`: missing"),
        (
            "/debug/lookup?mac=nope&ip=1.1.1.1",
            "parameter `mac`: \"nope\" is not valid",
        ),
        (
            "/debug/lookup?mac=02:00:00:00:00:01&ip=10.0.0.300",
            "parameter `ip`",
        ),
    ] {
        let r = get(uri);
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{uri}");
        let body = body_text(r);
        assert!(body.starts_with(names), "{uri}: {body}");
        assert!(body.contains("expected "), "{uri}: {body}");
    }
    // Bad input is reported even before there is a plan to look in.
    let (none, _, _) = routes_with(None, 0);
    let r = none.handle(&request(Method::GET, "/debug/lookup?mac=x&ip=1.1.1.1", b""));
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let r = none.handle(&request(
        Method::GET,
        &format!("/debug/lookup?mac={VM}&ip=1.1.1.1"),
        b"",
    ));
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
}

#[test]
fn put_log_level_applies_a_valid_word() {
    let (routes, _, levels) = routes_with(Some(plan()), 0);
    let r = routes.handle(&request(Method::PUT, "/debug/log-level", b"debug\n"));
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(body_text(r), "log level is now debug\n");
    assert_eq!(*levels.lock().unwrap(), [LogLevel::Debug]);
}

#[test]
fn put_log_level_refuses_other_words_naming_the_accepted_ones() {
    let (routes, _, levels) = routes_with(Some(plan()), 0);
    for body in [&b"verbose"[..], b"", b"DEBUG", b"\xff\xfe"] {
        let r = routes.handle(&request(Method::PUT, "/debug/log-level", body));
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{body:?}");
        let text = body_text(r);
        assert!(
            text.contains("error, warn, info, debug, trace"),
            "{body:?}: {text}"
        );
    }
    assert!(levels.lock().unwrap().is_empty());
}

#[test]
fn put_log_level_reports_a_failed_apply() {
    let (routes, _, _) = routes_with(Some(plan()), 0);
    let r = routes.handle(&request(Method::PUT, "/debug/log-level", b"trace"));
    assert_eq!(r.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert!(body_text(r).contains("trace is disabled"));
}

/// Issue 19 item 18: `GET /debug/log-level` was a 405; it reports the
/// filter in force, in the words `PUT` takes, and follows each change —
/// through `PUT` or not (a SIGHUP reload calls the same control).
#[test]
fn get_log_level_reports_the_filter_in_force() {
    let control = Arc::new(TrackedLevel::new(
        LogFilter::Directives("warn,lachesis_openstack=debug".to_owned()),
        |_| Ok(()),
    ));
    let routes = DebugRoutes::new(Arc::new(fake(Some(plan()), 0)), control.clone());
    let read = |routes: &DebugRoutes| {
        let r = routes.handle(&request(Method::GET, "/debug/log-level", b""));
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.headers()[CONTENT_TYPE], "text/plain; charset=utf-8");
        body_text(r)
    };
    let body = read(&routes);
    assert!(
        body.starts_with(
            "log filter is RUST_LOG's \"warn,lachesis_openstack=debug\" (not one level)"
        ),
        "{body}"
    );
    assert!(body.contains("error, warn, info, debug, trace"), "{body}");
    let r = routes.handle(&request(Method::PUT, "/debug/log-level", b"debug"));
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(read(&routes), "log level is debug\n");
    // A change outside the listener (the daemon's reload) shows too.
    control.set_level(LogLevel::Error).unwrap();
    assert_eq!(read(&routes), "log level is error\n");
    let r = routes.handle(&request(Method::HEAD, "/debug/log-level", b""));
    assert_eq!(r.status(), StatusCode::OK);
}

#[test]
fn a_refused_level_is_not_reported_as_in_force() {
    let control = TrackedLevel::new(LogFilter::Level(LogLevel::Info), |level| {
        if level == LogLevel::Trace {
            Err("no".to_owned())
        } else {
            Ok(())
        }
    });
    assert!(control.set_level(LogLevel::Trace).is_err());
    assert_eq!(control.current(), Some(LogFilter::Level(LogLevel::Info)));
}

#[test]
fn a_control_that_does_not_track_says_so() {
    let r = get("/debug/log-level");
    assert_eq!(r.status(), StatusCode::NOT_IMPLEMENTED);
    assert!(body_text(r).contains("does not report its level"));
}

#[test]
fn routing_404_and_405() {
    let r = get("/debug/nothing");
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert!(body_text(r).contains("/debug/lookup"));
    assert_eq!(get("/metrics").status(), StatusCode::NOT_FOUND);
    let r = routes().handle(&request(Method::POST, "/debug/log-level", b"x"));
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(r.headers()[ALLOW], "GET, HEAD, PUT");
    for path in PATHS.iter().filter(|p| **p != "/debug/log-level") {
        let r = routes().handle(&request(Method::PUT, path, b"x"));
        assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED, "{path}");
        assert_eq!(r.headers()[ALLOW], "GET, HEAD");
    }
}
