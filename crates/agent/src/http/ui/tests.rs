use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use hyper::header::{CONTENT_TYPE, LOCATION};
use hyper::Method;
use lachesis_abi::Zone;
use lachesis_planner::topology::{FloatingIpSummary, NetworkSummary, RouterSummary, VmPort};
use lachesis_planner::{
    AmphoraIp, Anomaly, AnomalyClass, Binding, FallbackReason, Plan, RouterMac,
};

use super::*;
use lachesis_abi::{Direction, L4Class};
use lachesis_ledger::{Counts, PortTotals};

use crate::config::Config;
use crate::http::lookup::tests::{mac, row};
use crate::http::reply::body_text;
use crate::http::source::{AgentHealth, FlowEntry, FlowListing, LiveBinding, NodeTaps};
use crate::http::{DebugRoutes, Routes as _};
use crate::links::{TapBoard, TapState, TapStatus};
use crate::reconcile::{LastPass, PassResult, Trigger};
use lachesis_lab::page::{number, numbers, row as tr};

const VM_A: &str = "fa:16:3e:a1:00:01";
const VM_B: &str = "fa:16:3e:b1:00:01";
const ROUTER_A: &str = "fa:16:3e:00:0a:01";
const ROUTER_B: &str = "fa:16:3e:00:0b:01";
/// Tenant B's name and server B's name: what a hostile cloud user types.
const EVIL_PROJECT: &str = "<script>alert(1)</script>";
const EVIL_SERVER: &str = "<img src=x onerror=alert(2)>";

struct Fake {
    plan: Option<Arc<Plan>>,
    topology: Option<Arc<Topology>>,
    health: AgentHealth,
    taps: NodeTaps,
    totals: BTreeMap<String, PortTotals>,
    flows: Vec<FlowEntry>,
}

impl DebugSource for Fake {
    fn config(&self) -> Arc<Config> {
        Arc::new(Config::default())
    }
    fn committed_plan(&self) -> Option<Arc<Plan>> {
        self.plan.clone()
    }
    fn bindings(&self) -> Vec<LiveBinding> {
        let mut out: Vec<LiveBinding> = self
            .plan
            .iter()
            .flat_map(|p| p.bindings.iter().cloned().map(LiveBinding::live))
            .collect();
        if self.plan.is_some() {
            out.push(LiveBinding {
                binding: binding("fa:16:3e:99:00:01", "pa", "srv-gone", "p-gone", None),
                ghost: true,
            });
        }
        out
    }
    fn topology(&self) -> Option<Arc<Topology>> {
        self.topology.clone()
    }
    fn flows(&self, limit: usize) -> FlowListing {
        FlowListing {
            total: self.flows.len(),
            flows: self.flows.iter().take(limit).cloned().collect(),
        }
    }
    fn health(&self) -> AgentHealth {
        self.health.clone()
    }
    fn taps(&self) -> NodeTaps {
        self.taps.clone()
    }
    fn port_totals(&self) -> BTreeMap<String, PortTotals> {
        self.totals.clone()
    }
}

fn ago(secs: u64) -> SystemTime {
    SystemTime::now() - Duration::from_secs(secs)
}

/// Running, synced two minutes ago, the last pass fine.
fn healthy() -> AgentHealth {
    AgentHealth {
        phase: Some("running"),
        degraded: false,
        synced_at: Some(ago(120)),
        last_pass: Some(LastPass {
            result: PassResult::Ok,
            trigger: Trigger::Tick,
            ended: ago(30),
            error: None,
        }),
    }
}

fn tap(index: u32, name: &str, state: TapState, port: Option<&str>) -> TapStatus {
    TapStatus {
        index,
        name: name.to_owned(),
        state,
        since: ago(600),
        port_mac: port.map(mac),
        heals: 0,
        last_heal: None,
    }
}

/// VM A's tap (Nova's name for port p-a1), healed twice; a matching tap
/// naming no port whose attach the kernel refuses.
fn node_taps() -> NodeTaps {
    let mut a = tap(7, "tapp-a1", TapState::Attached, Some(VM_A));
    a.heals = 2;
    a.last_heal = Some(ago(90));
    let stray = tap(
        9,
        "tapzz-stray",
        TapState::Failed("attach tapzz-stray: EBUSY".to_owned()),
        None,
    );
    NodeTaps {
        attach_mode: "tcx",
        presence_interval: Duration::from_secs(30),
        board: Arc::new(TapBoard {
            taps: vec![a, stray],
            last_check: Some(ago(12)),
        }),
        heals_total: 3,
    }
}

fn totals(tx: (u64, u64), rx: (u64, u64)) -> PortTotals {
    PortTotals {
        tx: Counts::new(tx.0, tx.1),
        rx: Counts::new(rx.0, rx.1),
    }
}

/// p-a1 behind its tap; p-old billed here before its VM left.
fn port_totals() -> BTreeMap<String, PortTotals> {
    BTreeMap::from([
        ("p-a1".to_owned(), totals((1_536_000, 1200), (4096, 8))),
        ("p-old".to_owned(), totals((77, 1), (0, 0))),
    ])
}

fn flow(bytes: u64, direction: Direction, bound: bool) -> FlowEntry {
    let (vm, peer) = (mac(VM_A), mac(ROUTER_A));
    let (src_mac, dst_mac) = match direction {
        Direction::Tx => (vm, peer),
        Direction::Rx => (peer, vm),
    };
    FlowEntry {
        src_mac,
        dst_mac,
        eth_proto: 0x0800,
        direction,
        zone: Zone::External,
        l4: L4Class::Tcp,
        bytes,
        packets: bytes / 1000 + 1,
        tenant: bound.then(|| "pa".to_owned()),
        server: bound.then(|| "srv-a1".to_owned()),
        port: bound.then(|| "p-a1".to_owned()),
    }
}

fn binding(m: &str, tenant: &str, server: &str, port: &str, ext: Option<&str>) -> Binding {
    Binding {
        mac: mac(m),
        tenant: tenant.to_owned(),
        server: server.to_owned(),
        port: port.to_owned(),
        external_network: ext.map(str::to_owned),
        amphora: false,
    }
}

/// Tenant A owns 10.1.0.0/24 and reaches B's 10.2.0.0/24 through the
/// routers on the shared 10.50.0.0/24; the internet is the catch-all.
fn plan() -> Plan {
    Plan {
        trie: vec![
            row("*", "0.0.0.0/0", Zone::External),
            row("*", "10.50.0.0/24", Zone::Shared),
            row("*", "::/0", Zone::External),
            row("pa", "10.1.0.0/24", Zone::SameTenant),
            row("pa", "10.1.0.1/32", Zone::Infra),
            row("pa", "10.2.0.0/24", Zone::OtherTenant),
            row("pa", "2001:db8:a::/64", Zone::SameTenant),
            row("pb", "10.2.0.0/24", Zone::SameTenant),
        ],
        bindings: vec![
            binding(VM_A, "pa", "srv-a1", "p-a1", Some("public")),
            binding(VM_B, "pb", "srv-b1", "p-b1", None),
        ],
        router_macs: vec![
            RouterMac {
                mac: mac(ROUTER_A),
                router: "r-a".to_owned(),
                external_network: Some("public".to_owned()),
            },
            RouterMac {
                mac: mac(ROUTER_B),
                router: "r-b".to_owned(),
                external_network: None,
            },
        ],
        amphora_ips: vec![AmphoraIp {
            tenant: "pb".to_owned(),
            address: "10.2.0.51".parse().unwrap(),
        }],
        anomalies: vec![
            Anomaly {
                class: AnomalyClass::Cycle,
                detail: "router <b>r1</b> → r2 → r1".to_owned(),
            },
            Anomaly {
                class: AnomalyClass::DanglingRoute,
                detail: "router r-a route 192.0.2.0/24 via 10.9.9.9".to_owned(),
            },
        ],
        route_fallbacks: FallbackReason::ALL
            .iter()
            .map(|r| (*r, u64::from(*r == FallbackReason::Cycle) * 3))
            .collect(),
        ..Plan::default()
    }
}

fn network(
    id: &str,
    name: &str,
    project: &str,
    flags: (bool, bool),
    cidrs: &[&str],
) -> NetworkSummary {
    NetworkSummary {
        id: id.to_owned(),
        name: Some(name.to_owned()),
        project: project.to_owned(),
        shared: flags.0,
        external: flags.1,
        cidrs: cidrs.iter().map(|c| c.parse().unwrap()).collect(),
    }
}

fn router(
    id: &str,
    name: &str,
    project: &str,
    gateways: &[&str],
    interfaces: &[&str],
) -> RouterSummary {
    RouterSummary {
        id: id.to_owned(),
        name: Some(name.to_owned()),
        project: project.to_owned(),
        gateways: gateways.iter().map(|s| (*s).to_owned()).collect(),
        interfaces: interfaces.iter().map(|s| (*s).to_owned()).collect(),
        routes: Vec::new(),
    }
}

fn vm(id: &str, network: &str, project: &str, server: &str, m: &str, ip: &str) -> VmPort {
    VmPort {
        id: id.to_owned(),
        network: network.to_owned(),
        project: project.to_owned(),
        server: server.to_owned(),
        mac: Some(mac(m)),
        addresses: vec![ip.parse().unwrap()],
    }
}

fn topology() -> Topology {
    Topology {
        projects: [("pa", "tenant-a"), ("pb", EVIL_PROJECT), ("admin", "admin")]
            .into_iter()
            .map(|(id, name)| (id.to_owned(), name.to_owned()))
            .collect(),
        servers: [("srv-a1", "a-web"), ("srv-b1", EVIL_SERVER)]
            .into_iter()
            .map(|(id, name)| (id.to_owned(), name.to_owned()))
            .collect(),
        networks: vec![
            network(
                "net-a",
                "a-private",
                "pa",
                (false, false),
                &["10.1.0.0/24", "2001:db8:a::/64"],
            ),
            network("net-b", "b-private", "pb", (false, false), &["10.2.0.0/24"]),
            network(
                "net-pub",
                "public",
                "admin",
                (false, true),
                &["203.0.113.0/24"],
            ),
            network(
                "net-sh",
                "shared",
                "admin",
                (true, false),
                &["10.50.0.0/24"],
            ),
        ],
        routers: vec![
            router("r-a", "a-router", "pa", &["net-pub"], &["net-a", "net-sh"]),
            router("r-b", "b-router", "pb", &[], &["net-b", "net-sh"]),
        ],
        floating_ips: vec![FloatingIpSummary {
            id: "fip-1".to_owned(),
            address: Some("203.0.113.21".parse().unwrap()),
            network: "net-pub".to_owned(),
            project: "pa".to_owned(),
            port: Some("p-a1".to_owned()),
            fixed_ip: Some("10.1.0.5".parse().unwrap()),
        }],
        vm_ports: vec![
            vm("p-a1", "net-a", "pa", "srv-a1", VM_A, "10.1.0.5"),
            vm("p-b1", "net-b", "pb", "srv-b1", VM_B, "10.2.0.5"),
        ],
    }
}

fn fake(plan: Option<Plan>, topology: Option<Topology>) -> Fake {
    Fake {
        plan: plan.map(Arc::new),
        topology: topology.map(Arc::new),
        health: healthy(),
        taps: node_taps(),
        totals: port_totals(),
        flows: vec![
            flow(90_000, Direction::Tx, true),
            flow(5_000, Direction::Rx, true),
            flow(700, Direction::Tx, false),
        ],
    }
}

fn routes_of(fake: Fake) -> DebugRoutes {
    DebugRoutes::new(Arc::new(fake), Arc::new(|_| Ok(())))
}

fn routes_over(plan: Option<Plan>, topology: Option<Topology>) -> DebugRoutes {
    routes_of(fake(plan, topology))
}

fn routes() -> DebugRoutes {
    routes_over(Some(plan()), Some(topology()))
}

fn get_with(routes: &DebugRoutes, uri: &str) -> (StatusCode, String) {
    let req = Request::builder()
        .method(Method::GET)
        .uri(uri)
        .body(Bytes::new())
        .unwrap();
    let r = routes.handle(&req);
    let status = r.status();
    if status != StatusCode::SEE_OTHER {
        assert_eq!(
            r.headers()[CONTENT_TYPE],
            "text/html; charset=utf-8",
            "{uri}"
        );
    }
    let body = body_text(r);
    // Every page a test renders: no two sentences joined without a space.
    prose::assert_sentences_apart(uri, &prose::visible_text(&body));
    (status, body)
}

/// The page at `uri`, which must answer 200.
fn get(uri: &str) -> String {
    let (status, body) = get_with(&routes(), uri);
    assert_eq!(status, StatusCode::OK, "{uri}: {body}");
    body
}

/// The part of `page` from the `<h2>` starting with `title` to the next.
fn section<'a>(page: &'a str, title: &str) -> &'a str {
    let start = page
        .find(&format!("<h2>{title}"))
        .unwrap_or_else(|| panic!("no section {title:?} in {page}"));
    let rest = &page[start + 4..];
    &page[start..start + 4 + rest.find("<h2>").unwrap_or(rest.len())]
}

fn escaped(text: &str) -> String {
    let mut h = html::Html::new();
    h.text(text);
    h.into_string()
}

fn count(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

/// The `data-id`s of the SVG nodes of `kind`, in document order.
fn node_ids(page: &str, kind: &str) -> Vec<String> {
    let marker = format!("data-kind=\"{kind}\" data-id=\"");
    page.match_indices(&marker)
        .map(|(i, _)| {
            let rest = &page[i + marker.len()..];
            rest[..rest.find('"').unwrap()].to_owned()
        })
        .collect()
}

#[test]
fn every_page_is_html_with_the_policy_the_navigation_and_no_script() {
    for (path, _, _) in NAV {
        let req = Request::builder().uri(*path).body(Bytes::new()).unwrap();
        let r = routes().handle(&req);
        assert_eq!(r.status(), StatusCode::OK, "{path}");
        assert_eq!(r.headers()["content-security-policy"], CSP, "{path}");
        assert_eq!(r.headers()["cache-control"], "no-store", "{path}");
        let body = body_text(r);
        assert!(body.starts_with("<!DOCTYPE html>"), "{path}");
        assert!(body.trim_end().ends_with("</html>"), "{path}");
        assert!(!body.to_lowercase().contains("<script"), "{path}");
        for (other, _, _) in NAV {
            assert!(
                body.contains(&format!("href=\"{other}\"")),
                "{path} links {other}"
            );
        }
        assert_eq!(count(&body, "aria-current=\"page\""), 1, "{path}");
        assert_eq!(
            count(&body, "<div id=\"health\""),
            1,
            "{path}: the health strip"
        );
        // Served by the listener: in the 404's list, and the listener's only
        // read-only verbs.
        assert!(crate::http::DEBUG_PATHS.contains(path), "{path}");
    }
}

#[test]
fn names_from_the_cloud_render_as_text() {
    for uri in [
        "/debug/ui/",
        "/debug/ui/plan",
        "/debug/ui/plan?tenant=pb",
        "/debug/ui/topology",
        "/debug/ui/topology?tenant=*",
        "/debug/ui/topology?tenant=pb",
        "/debug/ui/node",
        "/debug/ui/flows",
        &format!("/debug/ui/lookup?mac={VM_B}&ip=10.2.0.9"),
        &format!("/debug/ui/lookup?mac={VM_A}&ip=10.2.0.9&peer={VM_B}"),
    ] {
        let body = get(uri);
        assert!(!body.contains(EVIL_PROJECT), "{uri}");
        assert!(!body.contains("<img"), "{uri}");
        assert!(!body.to_lowercase().contains("<script"), "{uri}");
    }
    let escaped = "&lt;script&gt;alert(1)&lt;/script&gt;";
    assert!(get("/debug/ui/plan").contains(escaped));
    assert!(get("/debug/ui/topology?tenant=*").contains(escaped));
    assert!(get(&format!("/debug/ui/lookup?mac={VM_B}&ip=10.2.0.9")).contains(escaped));
    assert!(get("/debug/ui/plan").contains("&lt;img src=x onerror=alert(2)&gt;"));
    // An anomaly's detail is text too.
    assert!(get("/debug/ui/anomalies").contains("router &lt;b&gt;r1&lt;/b&gt;"));
    // A typed value refilled into the form cannot close its attribute.
    let (status, body) = get_with(&routes(), "/debug/ui/plan?mac=%22%3E%3Cscript%3E");
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body.contains("value=\"&quot;&gt;&lt;script&gt;\""),
        "{body}"
    );
    assert!(!body.to_lowercase().contains("<script"));
}

#[test]
fn the_plan_page_lists_every_table_unfiltered() {
    let body = get("/debug/ui/plan");
    let trie = section(&body, "Trie rows");
    for r in plan().trie {
        assert!(
            trie.contains(&format!("<code>{}</code>", r.prefix)),
            "{}",
            r.prefix
        );
    }
    assert!(trie.contains("tenant-a"), "names from the topology");
    let bindings = section(&body, "Bindings");
    for m in [VM_A, VM_B, "fa:16:3e:99:00:01"] {
        assert!(bindings.contains(m), "{m}");
    }
    assert!(bindings.contains("ghost"));
    assert!(bindings.contains("a-web"), "server names from the topology");
    assert!(bindings.contains(&format!("href=\"/debug/ui/lookup?mac={VM_A}\"")));
    let routers = section(&body, "Router MACs");
    assert!(routers.contains(ROUTER_A) && routers.contains(ROUTER_B));
    assert!(routers.contains("a-router"));
    let amphorae = section(&body, "Amphora addresses");
    assert!(amphorae.contains("10.2.0.51"));
    // Empty fields, as a form sends them, filter nothing.
    assert_eq!(get("/debug/ui/plan?tenant=&mac=&address="), body);
}

#[test]
fn the_plan_filters_narrow_each_table_they_apply_to() {
    // A tenant: its rows, bindings, routers' MACs, amphora addresses.
    let body = get("/debug/ui/plan?tenant=pa");
    let trie = section(&body, "Trie rows");
    assert!(trie.contains("4 of 8, by tenant"), "{trie}");
    assert!(!trie.contains("0.0.0.0/0"));
    assert!(body.contains("<option value=\"pa\" selected>"));
    let bindings = section(&body, "Bindings");
    assert!(bindings.contains(VM_A) && !bindings.contains(VM_B));
    assert!(bindings.contains("fa:16:3e:99:00:01"), "the tenant's ghost");
    let routers = section(&body, "Router MACs");
    assert!(routers.contains(ROUTER_A) && !routers.contains(ROUTER_B));
    assert!(section(&body, "Amphora addresses").contains("0 of 1"));
    // The global rows by `*`.
    let trie_global = get("/debug/ui/plan?tenant=*");
    assert!(section(&trie_global, "Trie rows").contains("3 of 8"));

    // A MAC: the rows the kernel consults for it (its tenant's, then `*`).
    let body = get(&format!("/debug/ui/plan?mac={VM_B}"));
    let trie = section(&body, "Trie rows");
    assert!(trie.contains("4 of 8, by MAC"), "{trie}");
    assert_eq!(count(trie, "<code>10.2.0.0/24</code>"), 1);
    assert!(!trie.contains("10.1.0.0/24"));
    let bindings = section(&body, "Bindings");
    assert!(bindings.contains(VM_B) && !bindings.contains(VM_A));
    assert!(section(&body, "Router MACs").contains("0 of 2"));
    // A router's MAC finds the router, and no binding.
    let body = get(&format!("/debug/ui/plan?mac={ROUTER_B}"));
    assert!(section(&body, "Router MACs").contains("1 of 2"));
    assert!(body.contains("That MAC has no binding"));

    // An address: the rows holding it, the ports holding it, amphora entries.
    let body = get("/debug/ui/plan?address=10.2.0.51");
    let trie = section(&body, "Trie rows");
    assert!(trie.contains("3 of 8, by address"), "{trie}");
    assert_eq!(count(trie, "<code>10.2.0.0/24</code>"), 2);
    assert!(trie.contains("0.0.0.0/0"));
    assert!(section(&body, "Amphora addresses").contains("1 of 1"));
    assert!(section(&body, "Bindings").contains("0 of 3"));
    let body = get("/debug/ui/plan?address=10.2.0.5");
    assert!(section(&body, "Bindings").contains(VM_B));
    // Router MACs are not filtered by an address: the heading says so.
    assert!(section(&body, "Router MACs").contains("<span class=\"muted\">2</span>"));

    // Together: AND.
    let body = get(&format!("/debug/ui/plan?mac={VM_B}&address=10.2.0.9"));
    let trie = section(&body, "Trie rows");
    assert!(trie.contains("2 of 8, by MAC and address"), "{trie}");
}

#[test]
fn bad_plan_filters_are_a_400_page_with_the_form() {
    for (uri, says) in [
        ("/debug/ui/plan?mac=nope", "parameter `mac`"),
        ("/debug/ui/plan?address=10.0.0.300", "parameter `address`"),
        (
            "/debug/ui/plan?tennant=pa",
            "parameter `tennant`: unknown parameter",
        ),
    ] {
        let (status, body) = get_with(&routes(), uri);
        assert_eq!(status, StatusCode::BAD_REQUEST, "{uri}");
        assert!(body.contains(says), "{uri}: {body}");
        assert!(body.contains("<form class=\"filters\""), "{uri}");
    }
}

#[test]
fn anomalies_are_grouped_by_class_with_meaning_and_action() {
    let body = get("/debug/ui/anomalies");
    for class in [AnomalyClass::Cycle, AnomalyClass::DanglingRoute] {
        let s = section(&body, &format!("<code>{}</code>", class.label()));
        let (meaning, action) = anomalies::explain_class(class);
        assert!(
            s.contains(&escaped(meaning)) && s.contains(&escaped(action)),
            "{class}"
        );
    }
    assert!(section(&body, "<code>dangling_route</code>").contains("192.0.2.0/24 via 10.9.9.9"));
    assert!(
        !body.contains("<h2><code>ambiguity</code>"),
        "absent classes get no section"
    );
    let every = section(&body, "Every class");
    for class in AnomalyClass::ALL {
        assert!(
            every.contains(&format!("<code>{}</code>", class.label())),
            "{class}"
        );
    }
    assert!(every.contains("<td><code>cycle</code></td><td>1</td>"));
    assert!(every.contains("<td><code>max_hops</code></td><td>0</td>"));
    let fallbacks = section(&body, "Route fallbacks");
    assert!(fallbacks.contains("<td><code>cycle</code></td><td>3</td>"));
    assert_eq!(count(fallbacks, "<tr>"), FallbackReason::ALL.len() + 1);
}

#[test]
fn every_anomaly_class_has_its_own_explanation() {
    let mut seen = std::collections::BTreeSet::new();
    for class in AnomalyClass::ALL {
        let (meaning, action) = anomalies::explain_class(*class);
        assert!(meaning.len() > 40 && action.len() > 20, "{class}");
        assert!(seen.insert(meaning), "{class} repeats another's meaning");
    }
}

#[test]
fn a_plan_without_anomalies_says_so() {
    let mut p = plan();
    p.anomalies.clear();
    let (status, body) = get_with(&routes_over(Some(p), None), "/debug/ui/anomalies");
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("raised no anomaly"));
}

/// The zone badge of the lookup page's verdict.
fn verdict_zone(page: &str) -> &str {
    let v = &page[page.find("id=\"verdict\"").expect("a verdict")..];
    let start = v.find("class=\"zone z-").unwrap() + "class=\"zone z-".len();
    &v[start..start + v[start..].find('"').unwrap()]
}

fn external_label(page: &str) -> &str {
    let marker = "<strong id=\"external-network\">";
    let start = page.find(marker).unwrap() + marker.len();
    &page[start..start + page[start..].find('<').unwrap()]
}

#[test]
fn the_lookup_page_renders_the_json_pages_answer() {
    let routes = routes();
    for query in [
        format!("mac={VM_A}&ip=10.1.0.9"),
        format!("mac={VM_A}&ip=10.1.0.1"),
        format!("mac={VM_A}&ip=10.2.0.9&peer={ROUTER_A}"),
        format!("mac={VM_A}&ip=8.8.8.8&peer={ROUTER_A}"),
        format!("mac={VM_A}&ip=10.50.0.7"),
        format!("mac={VM_A}&ip=2001:db8:a::9"),
        format!("mac={VM_A}&ip=10.2.0.5&peer={VM_B}"),
        format!("mac={VM_B}&ip=8.8.8.8"),
        "mac=fa:16:3e:00:00:99&ip=8.8.8.8".to_owned(),
        format!("mac={VM_A}&ip=8.8.8.8&peer=01:00:5e:00:00:01"),
    ] {
        let req = Request::builder()
            .uri(format!("/debug/lookup?{query}"))
            .body(Bytes::new())
            .unwrap();
        let json: serde_json::Value =
            serde_json::from_str(&body_text(routes.handle(&req))).unwrap();
        let (status, page) = get_with(&routes, &format!("/debug/ui/lookup?{query}"));
        assert_eq!(status, StatusCode::OK, "{query}");
        assert_eq!(verdict_zone(&page), json["zone"], "{query}");
        let steps = json["steps"].as_array().unwrap();
        assert_eq!(
            count(section(&page, "Steps"), "<li"),
            steps.len(),
            "{query}"
        );
        assert!(
            page.contains(&format!(
                "href=\"/debug/lookup?{}\"",
                query.replace('&', "&amp;").replace(':', "%3A")
            )),
            "{query}: {page}"
        );
    }
}

#[test]
fn the_lookup_page_names_map_row_zone_and_external_network() {
    // Same tenant: the tenant's row in zones_v4.
    let page = get(&format!("/debug/ui/lookup?mac={VM_A}&ip=10.1.0.9"));
    assert_eq!(verdict_zone(&page), "same_tenant");
    let steps = section(&page, "Steps");
    assert!(steps.contains("Map <code>endpoints</code></strong>, key = the VM MAC"));
    assert!(steps.contains("LPM trie <code>zones_v4</code>"));
    assert!(steps.contains("tenant tenant-a&#39;s rows"));
    assert!(steps.contains("Matched <code>10.1.0.0/24</code>"));
    assert_eq!(external_label(&page), "none");
    assert!(page.contains("only zone external carries an external network"));
    // Another tenant through a router.
    let page = get(&format!(
        "/debug/ui/lookup?mac={VM_A}&ip=10.2.0.9&peer={ROUTER_A}&direction=tx"
    ));
    assert_eq!(verdict_zone(&page), "other_tenant");
    assert!(page.contains("Matched <code>10.2.0.0/24</code>"));
    // The internet through router A: rule 1 names the router.
    let page = get(&format!(
        "/debug/ui/lookup?mac={VM_A}&ip=8.8.8.8&peer={ROUTER_A}"
    ));
    assert_eq!(verdict_zone(&page), "external");
    assert!(page.contains("global rows (tenant *)"));
    assert_eq!(external_label(&page), "public");
    assert!(page.contains("interface of router a-router"));
    // No peer: the VM's own fallback.
    let page = get(&format!(
        "/debug/ui/lookup?mac={VM_A}&ip=8.8.8.8&peer=&local="
    ));
    assert_eq!(external_label(&page), "public");
    assert!(page.contains("rule 2"));
    assert!(section(&page, "Assumed").contains("no peer MAC given"));
    // IPv6 reads the other trie.
    let page = get(&format!(
        "/debug/ui/lookup?mac={VM_A}&ip=2001:db8:a::9&direction=rx"
    ));
    assert!(page.contains("LPM trie <code>zones_v6</code>"));
    assert!(page.contains("<option value=\"rx\" selected>"));
    // An unknown MAC stops at the binding: the deciding step is marked.
    let page = get("/debug/ui/lookup?mac=fa:16:3e:00:00:99&ip=8.8.8.8");
    assert_eq!(verdict_zone(&page), "miss");
    assert!(section(&page, "Steps").contains(
        "<li class=\"decided\"><strong>Map <code>endpoints</code></strong>, key = the VM MAC"
    ));
}

#[test]
fn the_lookup_form_alone_and_with_bad_input() {
    let page = get("/debug/ui/lookup");
    assert!(page.contains("<form class=\"filters\" method=\"get\" action=\"/debug/ui/lookup\">"));
    for name in ["mac", "ip", "peer", "local", "direction"] {
        assert!(page.contains(&format!("name=\"{name}\"")), "{name}");
    }
    assert!(!page.contains("id=\"verdict\""));
    // Suggestions: every bound MAC and every router MAC, named.
    assert!(page.contains(&format!(
        "<option value=\"{VM_A}\" label=\"tenant-a · a-web\">"
    )));
    assert!(page.contains(&format!(
        "<option value=\"{ROUTER_A}\" label=\"router a-router → public\">"
    )));
    for (query, says) in [
        ("ip=8.8.8.8", "parameter `mac`: missing"),
        ("mac=zz&ip=8.8.8.8", "parameter `mac`"),
        (
            &format!("mac={VM_A}&ip=8.8.8.8&direction=up")[..],
            "parameter `direction`",
        ),
    ] {
        let (status, body) = get_with(&routes(), &format!("/debug/ui/lookup?{query}"));
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}");
        assert!(body.contains(says), "{query}: {body}");
        assert!(body.contains("name=\"mac\""), "the form stays");
    }
}

/// The text of each item of a 400 page's list of bad parameters.
fn bad_params(page: &str) -> Vec<String> {
    element(page, "bad-params", "ul")
        .split("<li>")
        .skip(1)
        .map(|item| item.split("</li>").next().unwrap().to_owned())
        .collect()
}

#[test]
fn a_page_lists_every_bad_parameter_with_the_form_refilled() {
    for (uri, problems) in [
        (
            format!("/debug/ui/lookup?mac=zz&direction=up&zone=1&peer={VM_B}&peer={VM_A}"),
            &[
                "parameter `zone`: unknown parameter",
                "parameter `peer`: given twice",
                "parameter `mac`: &quot;zz&quot; is not valid; expected a MAC address",
                "parameter `ip`: missing; expected an IPv4 or IPv6 address",
                "parameter `direction`: &quot;up&quot; is not valid",
            ][..],
        ),
        (
            "/debug/ui/plan?mac=nope&address=10.0.0.300&tennant=pa".to_owned(),
            &[
                "parameter `tennant`: unknown parameter",
                "parameter `mac`: &quot;nope&quot; is not valid",
                "parameter `address`: &quot;10.0.0.300&quot; is not valid",
            ][..],
        ),
        (
            "/debug/ui/topology?tenant=pa&tenant=pb&project=pa".to_owned(),
            &[
                "parameter `tenant`: given twice",
                "parameter `project`: unknown parameter",
            ][..],
        ),
        (
            "/debug/ui/flows?limit=many&top=1".to_owned(),
            &[
                "parameter `top`: unknown parameter",
                "parameter `limit`: &quot;many&quot; is not valid; expected an integer from 0 to 10000",
            ][..],
        ),
    ] {
        let (status, page) = get_with(&routes(), &uri);
        assert_eq!(status, StatusCode::BAD_REQUEST, "{uri}");
        let listed = bad_params(&page);
        assert_eq!(listed.len(), problems.len(), "{uri}: {listed:?}");
        for (item, start) in listed.iter().zip(problems) {
            assert!(item.starts_with(start), "{uri}: {item:?} is not {start:?}…");
            assert!(item.contains("; expected "), "{uri}: {item:?}");
        }
    }
    // The lookup form keeps what was typed, the bad values included.
    let (_, page) = get_with(&routes(), "/debug/ui/lookup?mac=zz&ip=&direction=up");
    assert!(
        page.contains(
            "name=\"mac\" list=\"vm-macs\" required placeholder=\"fa:16:3e:…\" value=\"zz\""
        ),
        "{page}"
    );
}

#[test]
fn the_topology_svg_has_one_node_per_router_and_network() {
    let page = get("/debug/ui/topology?tenant=*");
    let t = topology();
    let mut routers = node_ids(&page, "router");
    routers.sort();
    assert_eq!(
        routers,
        t.routers.iter().map(|r| r.id.clone()).collect::<Vec<_>>()
    );
    let mut networks = node_ids(&page, "network");
    networks.sort();
    assert_eq!(
        networks,
        t.networks.iter().map(|n| n.id.clone()).collect::<Vec<_>>()
    );
    assert_eq!(node_ids(&page, "fip"), ["fip-1"]);
    assert_eq!(node_ids(&page, "vm").len(), 2);
    assert_eq!(count(&page, "<svg "), 1);
    assert_eq!(count(&page, "class=\"edge gateway\""), 1, "r-a → public");
    // Router a: two interfaces; router b: two; the fip and both VMs hang
    // off their networks.
    assert_eq!(count(&page, "<line class=\"edge\""), 4);
    assert!(page.contains("class=\"node network external\""));
    assert!(page.contains("class=\"node network shared\""));
    assert!(
        page.contains("tenant tenant-a"),
        "owner groups are labelled"
    );
    assert!(section(&page, "Floating IPs").contains("203.0.113.21"));
}

#[test]
fn the_topology_of_one_tenant_keeps_what_it_touches() {
    let page = get("/debug/ui/topology?tenant=pa");
    assert_eq!(node_ids(&page, "router"), ["r-a"]);
    let mut networks = node_ids(&page, "network");
    networks.sort();
    assert_eq!(networks, ["net-a", "net-pub", "net-sh"]);
    assert_eq!(node_ids(&page, "vm").len(), 1);
    let (status, body) = get_with(&routes(), "/debug/ui/topology?project=pa");
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("parameter `project`"));
}

#[test]
fn a_crowded_network_counts_what_it_does_not_draw() {
    let mut t = topology();
    for i in 0..10 {
        t.vm_ports.push(vm(
            &format!("p-x{i:02}"),
            "net-a",
            "pa",
            "srv-x",
            "fa:16:3e:00:00:01",
            "10.1.0.77",
        ));
    }
    let (_, page) = get_with(
        &routes_over(Some(plan()), Some(t)),
        "/debug/ui/topology?tenant=*",
    );
    assert!(page.contains("+ 5 more"), "11 ports, 6 drawn");
    assert_eq!(node_ids(&page, "vm").len(), 6 + 1);
}

#[test]
fn boxes_of_one_band_never_overlap() {
    let mut t = topology();
    for i in 0..30 {
        let project = format!("p{}", i % 4);
        t.networks.push(network(
            &format!("n{i:02}"),
            "n",
            &project,
            (i % 7 == 0, false),
            &[],
        ));
        t.routers.push(router(
            &format!("r{i:02}"),
            "r",
            &project,
            &["net-pub"],
            &[&format!("n{i:02}"), &format!("n{:02}", (i * 7) % 30)],
        ));
    }
    t.networks.sort_by(|a, b| a.id.cmp(&b.id));
    t.routers.sort_by(|a, b| a.id.cmp(&b.id));
    let view = topology::View::select(&t, None);
    let l = topology::Layout::new(&t, &view);
    let mut boxes: Vec<(usize, usize)> = l.at.values().map(|a| (a.y, a.x)).collect();
    boxes.extend(l.routers.iter().map(|(a, _)| (a.y, a.x)));
    boxes.sort_unstable();
    for pair in boxes.windows(2) {
        if pair[0].0 == pair[1].0 {
            assert!(pair[1].1 >= pair[0].1 + topology::NODE_W, "{pair:?}");
        }
    }
    assert!(boxes
        .iter()
        .all(|(y, x)| x + topology::NODE_W <= l.width && *y < l.height));
}

#[test]
fn without_a_plan_or_a_topology_the_pages_say_why() {
    let none = routes_over(None, None);
    for uri in [
        "/debug/ui/plan",
        "/debug/ui/anomalies",
        "/debug/ui/topology",
        &format!("/debug/ui/lookup?mac={VM_A}&ip=8.8.8.8"),
    ] {
        let (status, body) = get_with(&none, uri);
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{uri}");
        assert!(
            body.contains("No committed plan") || body.contains("No topology"),
            "{uri}"
        );
    }
    let (status, body) = get_with(&none, "/debug/ui/");
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("No committed plan") && body.contains("No topology"));
    // Degraded: a plan, no topology. The plan page still works, by ids.
    let degraded = routes_over(Some(plan()), None);
    let (status, body) = get_with(&degraded, "/debug/ui/plan");
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("<td><code>pa</code></td>"));
}

#[test]
fn the_index_summarises_and_links_the_json_pages() {
    let body = get("/debug/ui/");
    assert!(
        body.contains("<a href=\"/debug/ui/node\">2 matching taps, 1 attached</a> (tcx); 3 heals since start."),
        "{body}"
    );
    assert!(body.contains("8 (6 IPv4, 2 IPv6)"), "{body}");
    assert!(body.contains("2 (+ 1 ghosts in their grace window)"));
    assert!(
        body.contains("3 projects, 4 networks (1 external), 2 routers, 1 floating IPs, 2 VM ports")
    );
    for (path, _) in JSON_PAGES {
        assert!(body.contains(&format!("href=\"{path}\"")), "{path}");
    }
}

#[test]
fn debug_itself_sends_a_person_to_the_index() {
    for uri in ["/debug", "/debug/", "/debug/ui"] {
        let r = routes().handle(&Request::builder().uri(uri).body(Bytes::new()).unwrap());
        assert_eq!(r.status(), StatusCode::SEE_OTHER, "{uri}");
        assert_eq!(r.headers()[LOCATION], "/debug/ui/");
    }
}

/// The `translate(x y)` of the node `kind`/`id`.
fn node_at(page: &str, kind: &str, id: &str) -> (usize, usize) {
    let marker = format!("data-kind=\"{kind}\" data-id=\"{id}\" transform=\"translate(");
    let start = page.find(&marker).unwrap_or_else(|| panic!("{kind} {id}")) + marker.len();
    let text = &page[start..start + page[start..].find(')').unwrap()];
    let (x, y) = text.split_once(' ').unwrap();
    (x.parse().unwrap(), y.parse().unwrap())
}

#[test]
fn floating_ips_stack_over_their_network_and_vms_under_theirs() {
    let mut t = topology();
    for i in 2..10 {
        t.floating_ips.push(FloatingIpSummary {
            id: format!("fip-{i}"),
            address: None,
            ..t.floating_ips[0].clone()
        });
    }
    let (_, page) = get_with(&routes_over(Some(plan()), Some(t)), "/debug/ui/topology");
    assert!(page.contains("+ 3 more"), "9 floating IPs, 6 drawn");
    let (_, public_y) = node_at(&page, "network", "net-pub");
    let fips = node_ids(&page, "fip");
    assert_eq!(fips.len(), 6);
    let ys: Vec<usize> = fips.iter().map(|f| node_at(&page, "fip", f).1).collect();
    assert!(ys.iter().all(|y| *y < public_y), "{ys:?} over {public_y}");
    assert!(ys.windows(2).all(|w| w[0] < w[1]), "top down: {ys:?}");
    let (_, router_y) = node_at(&page, "router", "r-a");
    assert!(public_y < router_y);
    let (_, net_a_y) = node_at(&page, "network", "net-a");
    assert!(router_y < net_a_y);
    assert!(node_at(&page, "vm", "p-a1").1 > net_a_y);
}

/// The part of `page` from the element with `id` to the end of its
/// `tag`.
fn element<'a>(page: &'a str, id: &str, tag: &str) -> &'a str {
    let start = page
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no #{id} in {page}"));
    let end = start + page[start..].find(&format!("</{tag}>")).unwrap();
    &page[start..end]
}

/// Issue 19 item 18: every page carries the agent's health — boot phase,
/// degraded mode, sync age, the last reconcile pass, the build.
#[test]
fn the_health_strip_says_phase_degraded_sync_last_pass_and_version() {
    let strip = |f: Fake| {
        let (_, page) = get_with(&routes_of(f), "/debug/ui/plan");
        element(&page, "health", "div").to_owned()
    };
    let ok = strip(fake(Some(plan()), Some(topology())));
    assert!(
        ok.starts_with(
            "id=\"health\" class=\"health ok\" data-phase=\"running\" data-degraded=\"false\""
        ),
        "{ok}"
    );
    assert!(
        ok.contains("<span class=\"k\">boot phase</span> <b>running</b>"),
        "{ok}"
    );
    assert!(
        ok.contains("<span class=\"k\">degraded</span> <b>no</b>"),
        "{ok}"
    );
    assert!(
        ok.contains("<span class=\"k\">last sync</span> <b title=\""),
        "{ok}"
    );
    assert!(
        ok.contains(">2 min ago</b>") || ok.contains(">2 min 1 s ago</b>"),
        "{ok}"
    );
    assert!(
        ok.contains(
            "data-result=\"ok\"><span class=\"k\">last reconcile</span> <b>ok</b> 30 s ago (tick)"
        ) || ok.contains("<b>ok</b> 31 s ago (tick)"),
        "{ok}"
    );
    // The build, as lachesis_build_info labels it.
    assert!(
        ok.contains(&format!(
            "<b>{}</b> <code>{}</code>",
            env!("CARGO_PKG_VERSION"),
            env!("LACHESIS_REVISION")
        )),
        "{ok}"
    );

    let mut f = fake(Some(plan()), None);
    f.health = AgentHealth {
        phase: Some("running"),
        degraded: true,
        synced_at: Some(ago(7200)),
        last_pass: Some(LastPass {
            result: PassResult::SyncError,
            trigger: Trigger::Kick,
            ended: ago(5),
            error: Some("listing ports: <Neutron> 503".to_owned()),
        }),
    };
    let bad = strip(f);
    assert!(bad.contains("class=\"health warn\""), "{bad}");
    assert!(bad.contains("data-degraded=\"true\""), "{bad}");
    assert!(
        bad.contains("<b>yes</b>: counting under the state file's plan"),
        "{bad}"
    );
    assert!(bad.contains(">2 h ago</b>"), "{bad}");
    assert!(
        bad.contains(
            "<b>sync_error</b> 5 s ago (kick): <span title=\"listing ports: &lt;Neutron&gt; 503\">"
        ),
        "{bad}"
    );

    let mut f = fake(None, None);
    f.health = AgentHealth {
        phase: Some("state_restored"),
        degraded: false,
        synced_at: None,
        last_pass: None,
    };
    let early = strip(f);
    assert!(
        early.contains("class=\"health warn\""),
        "not running yet: {early}"
    );
    assert!(early.contains("<b>state_restored</b>"));
    assert!(early.contains("<span class=\"k\">last sync</span> <b>none yet</b>"));
    assert!(early.contains("<span class=\"k\">last reconcile</span> <b>none since start</b>"));
}

/// Issue 19 item 18: the node page lists every matching tap — attached
/// or not — with the port behind it, that port's tenant and server by
/// name, its bytes exactly as the durable view holds them, its attach
/// state and its heals; then the ports billed here with no tap now.
#[test]
fn the_node_page_shows_each_tap_with_port_tenant_server_bytes_attach_and_heals() {
    let page = get("/debug/ui/node");
    assert!(page.contains("<h1>This node</h1>"));
    assert!(
        page.contains("1 attached, 1 failing; programs attached with tcx."),
        "{page}"
    );
    assert!(page.contains("starts with <code>tap</code> (<code>datapath.interface_prefixes</code>) or is none (<code>datapath.interfaces</code>)"), "{page}");
    assert!(page.contains("heals since start: 3"));
    assert!(page.contains("A presence check every 30 s, the last <span title=\""));

    let a = tr(&page, "data-tap", "tapp-a1");
    assert!(a.contains("data-port=\"p-a1\""), "{a}");
    assert!(
        a.contains(&format!(
            "<code>p-a1</code><br><span class=\"muted\">{VM_A}"
        )),
        "{a}"
    );
    assert!(
        a.contains("tenant-a<br><code class=\"id\">pa</code>"),
        "{a}"
    );
    assert!(
        a.contains("a-web<br><code class=\"id\">srv-a1</code>"),
        "{a}"
    );
    // The exact durable counts of p-a1, and their size.
    let want = port_totals()["p-a1"];
    assert_eq!(number(a, "data-tx-bytes"), want.tx.bytes);
    assert_eq!(number(a, "data-rx-bytes"), want.rx.bytes);
    assert!(
        a.contains("1536000 B<br><span class=\"muted\">1.5 MiB · 1200 packets"),
        "{a}"
    );
    assert!(
        a.contains("4096 B<br><span class=\"muted\">4.0 KiB · 8 packets"),
        "{a}"
    );
    assert!(a.contains("data-state=\"attached\""), "{a}");
    assert!(a.contains("<span title=\"since "), "{a}");
    assert!(a.contains(">for 10 min</span>"), "{a}");
    assert_eq!(number(a, "data-heals"), 2);
    assert!(a.contains("last <span title=\""), "{a}");

    let stray = tr(&page, "data-tap", "tapzz-stray");
    assert!(!stray.contains("data-port="), "{stray}");
    assert!(
        stray.contains("no port of the plan is named by this tap"),
        "{stray}"
    );
    assert!(stray.contains("data-state=\"failed\""), "{stray}");
    assert!(
        stray.contains("not attached</span> attach tapzz-stray: EBUSY"),
        "{stray}"
    );
    assert!(
        !stray.contains("data-tx-bytes"),
        "no port, no bytes: {stray}"
    );

    // The durable view, said so.
    assert!(page.contains("the ledger's durable view"), "{page}");
    // p-old has counts and no tap.
    let gone = section(&page, "Billed here, no tap now");
    let old = tr(gone, "data-port", "p-old");
    assert_eq!(number(old, "data-tx-bytes"), 77);
    assert!(
        old.contains("77 B<br><span class=\"muted\">1 packet</span>"),
        "{old}"
    );
    assert!(!gone.contains("data-port=\"p-a1\""));
}

#[test]
fn a_tap_whose_port_mac_is_unwritten_or_ambiguous_says_which() {
    let mut p = plan();
    // Two ports whose ids agree on Nova's 11 characters.
    p.bindings.push(binding(
        "fa:16:3e:c1:00:01",
        "pb",
        "srv-c",
        "p-collide-a1",
        None,
    ));
    p.bindings.push(binding(
        "fa:16:3e:c1:00:02",
        "pb",
        "srv-c",
        "p-collide-a2",
        None,
    ));
    let mut f = fake(Some(p), Some(topology()));
    f.taps.board = Arc::new(TapBoard {
        taps: vec![
            tap(8, "tapp-b1", TapState::Attached, None),
            tap(
                10,
                &lachesis_planner::tap_name("p-collide-a1"),
                TapState::Attached,
                None,
            ),
        ],
        last_check: None,
    });
    let (_, page) = get_with(&routes_of(f), "/debug/ui/node");
    let b = tr(&page, "data-tap", "tapp-b1");
    assert!(b.contains("data-port=\"p-b1\""), "named by the tap: {b}");
    assert!(
        b.contains("its MAC not written to <code>tap_ports</code> yet"),
        "{b}"
    );
    assert!(b.contains(&escaped(EVIL_PROJECT)), "{b}");
    let c = tr(&page, "data-tap", "tapp-collide-a");
    assert!(
        c.contains("ports p-collide-a1, p-collide-a2 share this name"),
        "{c}"
    );
    assert!(page.contains("A presence check every 30 s, none yet"));
}

#[test]
fn a_node_without_taps_says_so() {
    let mut f = fake(Some(plan()), Some(topology()));
    f.taps.board = Arc::new(TapBoard::default());
    f.totals.clear();
    let (status, page) = get_with(&routes_of(f), "/debug/ui/node");
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("No interface on this node matches"), "{page}");
    assert!(!page.contains("Billed here, no tap now"));
}

/// Issue 19 item 18: the flows as a table — the JSON page's listing,
/// row for row, the VM's side of each frame picked out.
#[test]
fn the_flows_page_is_the_json_listing_as_a_table() {
    let page = get("/debug/ui/flows");
    let table = element(&page, "flows", "table");
    assert_eq!(count(table, "<tr>"), 3 + 1, "a header and three flows");
    assert!(page.contains("The 3 largest of 3 flows by bytes"), "{page}");
    assert_eq!(numbers(table, "data-bytes"), [90_000, 5_000, 700]);
    // Both directions name the VM's own MAC first (its plan filter link).
    assert_eq!(
        count(table, &format!("href=\"/debug/ui/plan?mac={VM_A}\"")),
        3
    );
    assert_eq!(
        count(table, &format!("<td><code>{ROUTER_A}</code></td>")),
        3
    );
    assert!(table.contains("<span class=\"zone z-external\">external</span>"));
    assert!(table.contains("tenant-a<br><code class=\"id\">pa</code>"));
    assert!(table.contains("a-web<br><code class=\"id\">srv-a1</code>"));
    assert!(table.contains("unresolved: no binding for the VM MAC yet"));
    assert!(page.contains("href=\"/debug/flows?limit=100\""));

    // `limit` as the JSON page reads it.
    let page = get("/debug/ui/flows?limit=1");
    assert_eq!(count(element(&page, "flows", "table"), "<tr>"), 2);
    assert!(page.contains("The 1 largest of 3 flows"));
    assert!(page.contains("value=\"1\""), "the form keeps it");
    let (status, page) = get_with(&routes(), "/debug/ui/flows?limit=10001");
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(page.contains("parameter `limit`"), "{page}");
    assert!(page.contains("name=\"limit\""), "the form stays");
    let (status, _) = get_with(&routes(), "/debug/ui/flows?limit=");
    assert_eq!(status, StatusCode::OK, "an empty field is the default");
}

/// Issue 19 item 18: the topology draws the tenants with VMs on this node
/// unless asked for every tenant (`*`) or one.
#[test]
fn the_topology_defaults_to_the_tenants_with_vms_on_this_node() {
    let page = get("/debug/ui/topology");
    assert_eq!(node_ids(&page, "router"), ["r-a"], "tenant-a's only");
    let mut networks = node_ids(&page, "network");
    networks.sort();
    assert_eq!(networks, ["net-a", "net-pub", "net-sh"]);
    assert_eq!(node_ids(&page, "vm"), ["p-a1"]);
    assert!(element(&page, "scope", "p").contains("The tenants with VMs on this node: tenant-a."));
    assert!(page.contains("href=\"/debug/ui/topology?tenant=*\">Show every tenant</a>"));
    assert!(
        page.contains("<option value=\"\" selected>tenants with VMs on this node (1)</option>"),
        "{page}"
    );
    let every = get("/debug/ui/topology?tenant=*");
    assert_eq!(node_ids(&every, "router").len(), 2);
    assert!(every.contains("<option value=\"*\" selected>every tenant</option>"));
    // A node with no bound VM draws everything and says why.
    let mut f = fake(Some(plan()), Some(topology()));
    f.taps.board = Arc::new(TapBoard::default());
    let (_, page) = get_with(&routes_of(f), "/debug/ui/topology");
    assert_eq!(node_ids(&page, "router").len(), 2);
    assert!(page.contains("No VM behind this node&#39;s taps is bound to a port"));
}
