//! The client against the simulator: auth kinds, catalog selection, paging,
//! token lifetime, re-auth, failure semantics, timeouts (issue 4).

use std::collections::BTreeSet;
use std::io::{Read as _, Write as _};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lachesis_openstack::client::ApiError;
use lachesis_openstack::config::{AppCredRef, DomainRef, ProjectRef, UserRef};
use lachesis_openstack::{
    ApiMetrics, Client, CloudConfig, Credentials, PageSink, ServiceStatus, Services, SyncError,
};
use lachesis_planner::{OptionalBody, Resource};
use lachesis_sim::{self as sim, Fault, KeystonePaging, SettingsPatch, SimHandle, Store, Topology};
use serde_json::{json, Value};

fn topology() -> Topology {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/topology.yaml");
    Topology::from_yaml(&std::fs::read_to_string(path).unwrap()).unwrap()
}

async fn sim_with(edit: impl FnOnce(&mut Topology)) -> SimHandle {
    let mut t = topology();
    edit(&mut t);
    sim::start(
        Store::from_topology(&t).unwrap(),
        "127.0.0.1:0".parse().unwrap(),
        None,
    )
    .await
    .unwrap()
}

/// Every list in the example has at least 3 items: page size 1 gives ≥ 3 pages.
async fn start_sim() -> SimHandle {
    sim_with(|t| t.settings.page_size = Some(1)).await
}

fn password(sim: &SimHandle) -> CloudConfig {
    let mut cfg = CloudConfig::new(
        sim.auth_url(),
        Credentials::Password {
            user: UserRef::Name {
                name: "admin".into(),
                domain: DomainRef::Name("Default".into()),
            },
            password: "admin-secret".into(),
            project: ProjectRef::Name {
                name: "admin".into(),
                domain: DomainRef::Id("default".into()),
            },
        },
    );
    cfg.timeout = Duration::from_secs(5);
    cfg
}

fn appcred(sim: &SimHandle) -> CloudConfig {
    let mut cfg = CloudConfig::new(
        sim.auth_url(),
        Credentials::ApplicationCredential {
            credential: AppCredRef::Id("ac-lachesis".into()),
            secret: "appcred-secret".into(),
        },
    );
    cfg.timeout = Duration::from_secs(5);
    cfg
}

fn ids(body: &Value, collection: &str) -> BTreeSet<String> {
    body[collection]
        .as_array()
        .unwrap_or_else(|| panic!("{collection}: {body}"))
        .iter()
        .map(|v| v["id"].as_str().unwrap().to_owned())
        .collect()
}

fn truth<T>(items: &[T], id: impl Fn(&T) -> &str) -> BTreeSet<String> {
    items.iter().map(|x| id(x).to_owned()).collect()
}

/// One unpaged GET, as independent truth for the merged pages.
async fn raw_list(sim: &SimHandle, path: &str) -> Value {
    let token = sim.application_credential_token("ac-lachesis").unwrap();
    let url = format!("{}/r/RegionOne/internal/{path}", sim.base_url());
    serde_json::from_str(
        &reqwest::Client::new()
            .get(url)
            .header("X-Auth-Token", token)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    )
    .unwrap()
}

#[tokio::test]
async fn password_sync_follows_every_page_to_the_end() {
    let sim = start_sim().await;
    let t = topology();
    let result = Client::new(password(&sim), ApiMetrics::default())
        .unwrap()
        .sync()
        .await
        .unwrap();
    let b = &result.bodies;
    assert_eq!(ids(&b.networks, "networks"), truth(&t.networks, |x| &x.id));
    assert_eq!(ids(&b.subnets, "subnets"), truth(&t.subnets, |x| &x.id));
    assert_eq!(ids(&b.ports, "ports"), truth(&t.ports, |x| &x.id));
    assert_eq!(ids(&b.routers, "routers"), truth(&t.routers, |x| &x.id));
    assert_eq!(
        ids(&b.floatingips, "floatingips"),
        truth(&t.floatingips, |x| &x.id)
    );
    assert_eq!(ids(&b.projects, "projects"), truth(&t.projects, |x| &x.id));
    assert_eq!(
        ids(b.servers.fetched().unwrap(), "servers"),
        truth(&t.servers, |x| &x.id)
    );
    assert_eq!(
        ids(b.loadbalancers.fetched().unwrap(), "loadbalancers"),
        truth(&t.loadbalancers, |x| &x.id)
    );
    assert_eq!(
        ids(b.amphorae.fetched().unwrap(), "amphorae"),
        truth(&t.amphorae, |x| &x.id)
    );
    assert_eq!(
        (result.nova.clone(), result.octavia.clone()),
        (ServiceStatus::Ok, ServiceStatus::Ok)
    );
    assert!(!result.is_partial());

    // Page size 1: n items → n full pages, each linking a next page, and the
    // last (empty) page ends the list — at least 3 pages on every list.
    let stats = sim.with_store(|s| s.stats());
    let expect = [
        ("networks", t.networks.len()),
        ("subnets", t.subnets.len()),
        ("ports", t.ports.len()),
        ("routers", t.routers.len()),
        ("floatingips", t.floatingips.len()),
        ("servers", t.servers.len()),
        ("loadbalancers", t.loadbalancers.len()),
        ("amphorae", t.amphorae.len()),
    ];
    for (endpoint, n) in expect {
        assert!(n >= 3, "{endpoint}: the example must page at least 3 times");
        assert_eq!(stats.requests_for(endpoint), n as u64 + 1, "{endpoint}");
    }
    // Keystone links a next page only while more remain.
    assert_eq!(stats.requests_for("projects"), t.projects.len() as u64);

    // The merged pages are exactly the unpaged list, item for item (the
    // fields a sync asks Neutron for, whether or not the server honours
    // `fields=`).
    sim.with_store(|s| {
        s.apply_settings(SettingsPatch {
            page_size: Some(0),
            ..Default::default()
        })
    })
    .unwrap();
    let selected = |r: Resource, body: &Value| {
        let mut body = body.clone();
        r.select_fields(&mut body);
        body
    };
    let raw_ports = raw_list(&sim, "network/v2.0/ports").await;
    let raw_routers = raw_list(&sim, "network/v2.0/routers").await;
    assert_eq!(
        selected(Resource::Ports, &b.ports),
        selected(Resource::Ports, &raw_ports)
    );
    assert_eq!(
        selected(Resource::Routers, &b.routers),
        selected(Resource::Routers, &raw_routers)
    );
    assert_eq!(
        b.servers.fetched().unwrap().clone(),
        raw_list(&sim, "compute/v2.1/servers/detail?all_tenants=1").await
    );
    assert_eq!(
        b.amphorae.fetched().unwrap().clone(),
        raw_list(&sim, "load-balancer/v2/octavia/amphorae").await
    );
}

/// Every page a sync hands over, in the order it came.
#[derive(Debug, Default)]
struct Recorder {
    pages: Vec<(Resource, Vec<Value>)>,
}

impl PageSink for Recorder {
    fn page(&mut self, resource: Resource, items: Vec<Value>) {
        self.pages.push((resource, items));
    }
}

#[tokio::test]
async fn each_page_reaches_the_sink_as_it_arrives() {
    let sim = start_sim().await;
    let client = Client::new(password(&sim), ApiMetrics::default()).unwrap();
    let mut recorder = Recorder::default();
    let services = client.sync_into(&mut recorder).await.unwrap();
    assert_eq!(
        services,
        Services {
            nova: ServiceStatus::Ok,
            octavia: ServiceStatus::Ok
        }
    );
    let merged = client.sync().await.unwrap().bodies;
    let stats = sim.with_store(|s| s.stats());
    for r in Resource::ALL {
        let pages: Vec<&Vec<Value>> = recorder
            .pages
            .iter()
            .filter(|(list, _)| *list == r)
            .map(|(_, items)| items)
            .collect();
        // Page size 1: one page per request, none merged before delivery.
        assert_eq!(
            pages.len() as u64 * 2,
            stats.requests_for(r.collection()),
            "{r}"
        );
        assert!(pages.iter().all(|items| items.len() <= 1), "{r}");
        let delivered: Vec<Value> = pages.into_iter().flatten().cloned().collect();
        assert_eq!(
            Some(&Value::Array(delivered)),
            merged.body(r).map(|b| &b[r.collection()]),
            "{r}: the pages in order are the merged body"
        );
    }
}

/// A loopback TCP relay to `target` that keeps the request line of every
/// HTTP request passing through: the URLs exactly as the client sent them.
fn recording_relay(listener: TcpListener, target: SocketAddr) -> Arc<Mutex<Vec<String>>> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let log = lines.clone();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(mut client) = client else { return };
            let mut server = TcpStream::connect(target).unwrap();
            let (mut from_server, mut to_client) =
                (server.try_clone().unwrap(), client.try_clone().unwrap());
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut from_server, &mut to_client);
                let _ = to_client.shutdown(Shutdown::Write);
            });
            let log = log.clone();
            std::thread::spawn(move || {
                let (mut buf, mut text) = ([0u8; 8192], Vec::new());
                while let Ok(n @ 1..) = client.read(&mut buf) {
                    if server.write_all(&buf[..n]).is_err() {
                        break;
                    }
                    text.extend_from_slice(&buf[..n]);
                    while let Some(end) = text.windows(2).position(|w| w == b"\r\n") {
                        let line = String::from_utf8_lossy(&text[..end]).into_owned();
                        text.drain(..end + 2);
                        // A request may follow a body on the same line.
                        if let Some(start) = line.find("GET /") {
                            log.lock().unwrap().push(line[start..].to_owned());
                        }
                    }
                }
                let _ = server.shutdown(Shutdown::Write);
            });
        }
    });
    lines
}

/// Issue 21: every Neutron list request, first page and following ones,
/// asks for exactly `Resource::fields` (one `fields=` each); the other
/// services' lists ask for no field selection. Checked on the wire: the
/// simulator advertises a relay that records each request line.
#[tokio::test]
async fn neutron_lists_ask_for_their_fields_on_every_page() {
    let relay = TcpListener::bind("127.0.0.1:0").unwrap();
    let advertised = format!("http://{}", relay.local_addr().unwrap());
    let mut t = topology();
    t.settings.page_size = Some(1);
    let sim = sim::start(
        Store::from_topology(&t).unwrap(),
        "127.0.0.1:0".parse().unwrap(),
        Some(advertised),
    )
    .await
    .unwrap();
    let requests = recording_relay(relay, sim.addr());
    Client::new(password(&sim), ApiMetrics::default())
        .unwrap()
        .sync()
        .await
        .unwrap();
    let requests = requests.lock().unwrap().clone();
    for r in Resource::ALL {
        let path = r.path().split('?').next().unwrap();
        let urls: Vec<url::Url> = requests
            .iter()
            .filter_map(|line| line.split(' ').nth(1))
            .map(|target| url::Url::parse(&format!("http://relay{target}")).unwrap())
            .filter(|u| u.path().ends_with(&format!("/{path}")))
            .collect();
        assert!(urls.len() >= 3, "{r}: several pages, got {urls:?}");
        for u in &urls {
            let fields: Vec<String> = u
                .query_pairs()
                .filter(|(k, _)| k == "fields")
                .map(|(_, v)| v.into_owned())
                .collect();
            let want: Vec<String> = r
                .fields()
                .unwrap_or(&[])
                .iter()
                .map(|f| (*f).to_owned())
                .collect();
            assert_eq!(fields, want, "{r}: {u}");
        }
    }
}

#[tokio::test]
async fn application_credential_sync_sees_the_same_cloud() {
    let sim = start_sim().await;
    let by_password = Client::new(password(&sim), ApiMetrics::default())
        .unwrap()
        .sync()
        .await
        .unwrap();
    let by_appcred = Client::new(appcred(&sim), ApiMetrics::default())
        .unwrap()
        .sync()
        .await
        .unwrap();
    assert_eq!(by_password.bodies, by_appcred.bodies);

    // And by name, owned by a user.
    let mut cfg = appcred(&sim);
    cfg.credentials = Credentials::ApplicationCredential {
        credential: AppCredRef::Name {
            name: "lachesis-metering".into(),
            user: UserRef::Name {
                name: "admin".into(),
                domain: DomainRef::Id("default".into()),
            },
        },
        secret: "appcred-secret".into(),
    };
    assert_eq!(
        Client::new(cfg, ApiMetrics::default())
            .unwrap()
            .sync()
            .await
            .unwrap()
            .bodies,
        by_password.bodies
    );
}

#[tokio::test]
async fn wrong_secret_fails_and_counts() {
    let sim = start_sim().await;
    let mut cfg = appcred(&sim);
    cfg.credentials = Credentials::ApplicationCredential {
        credential: AppCredRef::Id("ac-lachesis".into()),
        secret: "nope".into(),
    };
    let metrics = ApiMetrics::default();
    let err = Client::new(cfg, metrics.clone())
        .unwrap()
        .sync()
        .await
        .unwrap_err();
    assert!(
        matches!(err, SyncError::Api(ApiError::Status { status: 401, .. })),
        "{err}"
    );
    assert_eq!(metrics.get("identity", "auth", "401"), 1);
}

#[tokio::test]
async fn catalog_interface_and_region_are_honoured() {
    let sim = sim_with(|t| t.settings.regions = vec!["RegionOne".into(), "RegionTwo".into()]).await;
    let mut cfg = password(&sim);
    cfg.region = Some("RegionTwo".into());
    cfg.interface = "public".into();
    Client::new(cfg, ApiMetrics::default())
        .unwrap()
        .sync()
        .await
        .unwrap();
    let stats = sim.with_store(|s| s.stats());
    let api_calls: u64 = stats
        .all
        .requests
        .iter()
        .filter(|(k, _)| *k != "auth")
        .map(|(_, v)| v)
        .sum();
    let chosen: u64 = stats
        .all
        .requests
        .iter()
        .filter(|(k, _)| k.starts_with("RegionTwo/public/"))
        .map(|(_, v)| v)
        .sum();
    assert!(api_calls > 0);
    assert_eq!(
        chosen, api_calls,
        "every call must use RegionTwo/public: {:?}",
        stats.all.requests
    );

    // The default interface is `internal`.
    let mut cfg = password(&sim);
    cfg.region = Some("RegionOne".into());
    sim.with_store(lachesis_sim::Store::requests_reset);
    Client::new(cfg, ApiMetrics::default())
        .unwrap()
        .sync()
        .await
        .unwrap();
    let stats = sim.with_store(|s| s.stats());
    assert!(
        stats
            .all
            .requests
            .keys()
            .filter(|k| *k != "auth")
            .all(|k| k.starts_with("RegionOne/internal/")),
        "{:?}",
        stats.all.requests
    );

    // Two regions and none chosen: refuse to guess.
    let err = Client::new(password(&sim), ApiMetrics::default())
        .unwrap()
        .sync()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("several regions"), "{err}");
}

#[tokio::test]
async fn token_is_reused_then_renewed_before_expiry() {
    // Unpaged lists keep each sync short, so the reuse window (TTL minus
    // margin = 3 s) holds two syncs even on a loaded machine.
    let sim = sim_with(|t| {
        t.settings.page_size = None;
        t.settings.token_ttl_secs = 6;
    })
    .await;
    let mut cfg = password(&sim);
    cfg.token_renew_margin = Duration::from_secs(3);
    let client = Client::new(cfg, ApiMetrics::default()).unwrap();
    client.sync().await.unwrap();
    client.sync().await.unwrap();
    assert_eq!(
        sim.with_store(|s| s.stats()).tokens_issued,
        1,
        "a fresh token is reused"
    );
    // Inside the renew margin: a new token before the old one expires.
    // Wait for exactly that instant, as the cached token states it.
    let renew_at = client.session().token().await.unwrap().expires_at - Duration::from_secs(3);
    while std::time::SystemTime::now() < renew_at {
        let left = renew_at
            .duration_since(std::time::SystemTime::now())
            .unwrap_or_default();
        tokio::time::sleep(left + Duration::from_millis(1)).await;
    }
    client.sync().await.unwrap();
    assert_eq!(sim.with_store(|s| s.stats()).tokens_issued, 2);
    assert_eq!(client.session().auth_count(), 2);
}

#[tokio::test]
async fn a_401_mid_sync_reauthenticates_once() {
    let sim = start_sim().await;
    let metrics = ApiMetrics::default();
    let client = Client::new(password(&sim), metrics.clone()).unwrap();
    client.sync().await.unwrap();
    // Revoked tokens: every concurrent list sees a 401; one new token serves them all.
    sim.with_store(lachesis_sim::Store::revoke_tokens);
    let result = client.sync().await.unwrap();
    assert_eq!(
        ids(&result.bodies.ports, "ports").len(),
        topology().ports.len()
    );
    assert_eq!(sim.with_store(|s| s.stats()).tokens_issued, 2);

    // One 401 in the middle of the port pages.
    // Three pages pass, the fourth meets a 401.
    sim.with_store(|s| {
        s.add_fault(Fault {
            endpoint: "ports".into(),
            status: None,
            delay_ms: 0,
            drop: false,
            times: Some(3),
        });
    });
    sim.with_store(|s| {
        s.add_fault(Fault {
            endpoint: "ports".into(),
            status: Some(401),
            delay_ms: 0,
            drop: false,
            times: Some(1),
        });
    });
    let result = client.sync().await.unwrap();
    assert_eq!(
        ids(&result.bodies.ports, "ports").len(),
        topology().ports.len()
    );
    assert_eq!(sim.with_store(|s| s.stats()).tokens_issued, 3);
    // One from the revocation above, one from the injected fault.
    assert_eq!(metrics.get("network", "ports", "401"), 2);

    // A 401 that persists after the re-auth is a failure, not a loop.
    sim.with_store(|s| {
        s.add_fault(Fault {
            endpoint: "subnets".into(),
            status: Some(401),
            delay_ms: 0,
            drop: false,
            times: None,
        });
    });
    let err = client.sync().await.unwrap_err();
    assert!(
        matches!(err, SyncError::Api(ApiError::Status { status: 401, .. })),
        "{err}"
    );
    assert_eq!(sim.with_store(|s| s.stats()).tokens_issued, 4);
}

/// `/sim/stats` as the control API answers it.
async fn stats_over_http(sim: &SimHandle) -> lachesis_sim::Stats {
    let text = reqwest::get(format!("{}/sim/stats", sim.base_url()))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    serde_json::from_str(&text).unwrap()
}

#[tokio::test]
async fn sim_stats_count_exactly_the_bytes_each_client_received() {
    let sim = start_sim().await;
    let by_password = Client::new(password(&sim), ApiMetrics::default()).unwrap();
    let by_appcred = Client::new(appcred(&sim), ApiMetrics::default()).unwrap();
    by_password.sync().await.unwrap();
    by_appcred.sync().await.unwrap();
    // A revoked token: its 401s are still the same client's, and counted.
    sim.with_store(lachesis_sim::Store::revoke_tokens);
    by_password.sync().await.unwrap();

    let stats = stats_over_http(&sim).await;
    assert_eq!(stats, sim.with_store(|s| s.stats()));
    assert_eq!(
        stats.clients.keys().collect::<Vec<_>>(),
        ["application_credential/ac-lachesis", "user/u-admin"]
    );
    for (client, session) in [
        ("user/u-admin", by_password.session()),
        ("application_credential/ac-lachesis", by_appcred.session()),
    ] {
        let received = session.response_bytes();
        let served = &stats.clients[client];
        assert_eq!(received.len(), 10, "auth and the nine lists: {received:?}");
        for (endpoint, bytes) in &received {
            assert_eq!(served.bytes_for(endpoint), *bytes, "{client} {endpoint}");
        }
        assert_eq!(
            served.response_bytes.values().sum::<u64>(),
            received.values().sum::<u64>(),
            "{client}: nothing counted that the client did not receive"
        );
    }
    // The totals are the clients' sum; a reset zeroes them.
    for endpoint in ["auth", "ports", "projects", "amphorae"] {
        let by_clients: u64 = stats.clients.values().map(|t| t.bytes_for(endpoint)).sum();
        assert_eq!(stats.bytes_for(endpoint), by_clients, "{endpoint}");
    }
    reqwest::Client::new()
        .delete(format!("{}/sim/stats", sim.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(stats_over_http(&sim).await, lachesis_sim::Stats::default());
}

fn fault(endpoint: &str, status: u16) -> Fault {
    Fault {
        endpoint: endpoint.into(),
        status: Some(status),
        delay_ms: 0,
        drop: false,
        times: None,
    }
}

#[tokio::test]
async fn neutron_or_keystone_500_fails_the_whole_sync() {
    for endpoint in [
        "networks",
        "subnets",
        "ports",
        "routers",
        "floatingips",
        "projects",
    ] {
        let sim = start_sim().await;
        // Fail on a later page, after some of the list was already read.
        sim.with_store(|s| {
            s.add_fault(Fault {
                endpoint: endpoint.into(),
                status: None,
                delay_ms: 0,
                drop: false,
                times: Some(1),
            });
            s.add_fault(fault(endpoint, 500));
        });
        let metrics = ApiMetrics::default();
        let err = Client::new(password(&sim), metrics.clone())
            .unwrap()
            .sync()
            .await
            .unwrap_err();
        assert!(
            matches!(err, SyncError::Api(ApiError::Status { status: 500, .. })),
            "{endpoint}: {err}"
        );
        let service = if endpoint == "projects" {
            "identity"
        } else {
            "network"
        };
        assert_eq!(metrics.get(service, endpoint, "500"), 1, "{endpoint}");
    }
}

#[tokio::test]
async fn nova_or_octavia_500_marks_the_sync_partial() {
    let sim = start_sim().await;
    sim.with_store(|s| s.add_fault(fault("servers", 500)));
    let metrics = ApiMetrics::default();
    let r = Client::new(password(&sim), metrics.clone())
        .unwrap()
        .sync()
        .await
        .unwrap();
    assert!(
        matches!(r.nova, ServiceStatus::Failed { .. }),
        "{:?}",
        r.nova
    );
    assert_eq!(
        r.bodies.servers,
        OptionalBody::Failed,
        "failed must not look like an empty list"
    );
    assert_eq!(r.octavia, ServiceStatus::Ok);
    assert!(r.is_partial());
    assert_eq!(metrics.get("compute", "servers", "500"), 1);

    let sim = start_sim().await;
    sim.with_store(|s| s.add_fault(fault("amphorae", 503)));
    let r = Client::new(password(&sim), ApiMetrics::default())
        .unwrap()
        .sync()
        .await
        .unwrap();
    assert!(matches!(r.octavia, ServiceStatus::Failed { .. }));
    assert_eq!(
        (r.bodies.loadbalancers.clone(), r.bodies.amphorae.clone()),
        (OptionalBody::Failed, OptionalBody::Failed)
    );
    assert_eq!(r.nova, ServiceStatus::Ok);
    assert!(r.is_partial());
    assert_eq!(ids(&r.bodies.ports, "ports").len(), topology().ports.len());
}

#[tokio::test]
async fn catalog_without_load_balancer_is_normal() {
    let sim = sim_with(|t| {
        t.settings.page_size = Some(1);
        t.settings.services = vec!["identity".into(), "network".into(), "compute".into()];
    })
    .await;
    let r = Client::new(password(&sim), ApiMetrics::default())
        .unwrap()
        .sync()
        .await
        .unwrap();
    assert_eq!(r.octavia, ServiceStatus::NotInCatalog);
    assert_eq!(
        (r.bodies.loadbalancers.clone(), r.bodies.amphorae.clone()),
        (OptionalBody::NotDeployed, OptionalBody::NotDeployed)
    );
    assert!(!r.is_partial());
    assert!(r.bodies.servers.fetched().is_some());
}

#[tokio::test]
async fn timeouts_and_dropped_connections_are_network_errors() {
    let sim = start_sim().await;
    let mut cfg = password(&sim);
    // Far from both the injected delay and a loaded machine's normal latency.
    cfg.timeout = Duration::from_millis(1500);
    sim.with_store(|s| {
        s.add_fault(Fault {
            endpoint: "routers".into(),
            status: None,
            delay_ms: 5000,
            drop: false,
            times: Some(1),
        });
    });
    let metrics = ApiMetrics::default();
    let err = Client::new(cfg.clone(), metrics.clone())
        .unwrap()
        .sync()
        .await
        .unwrap_err();
    assert!(
        matches!(&err, SyncError::Api(ApiError::Network { message, .. }) if message.contains("timed out")),
        "{err}"
    );
    assert_eq!(metrics.get("network", "routers", "network"), 1);

    sim.with_store(|s| {
        s.add_fault(Fault {
            endpoint: "networks".into(),
            status: None,
            delay_ms: 0,
            drop: true,
            times: Some(1),
        });
    });
    let err = Client::new(cfg.clone(), metrics.clone())
        .unwrap()
        .sync()
        .await
        .unwrap_err();
    assert!(
        matches!(err, SyncError::Api(ApiError::Network { .. })),
        "{err}"
    );
    assert_eq!(metrics.get("network", "networks", "network"), 1);

    // A slow Nova only costs the servers list.
    sim.with_store(|s| {
        s.add_fault(Fault {
            endpoint: "servers".into(),
            status: None,
            delay_ms: 5000,
            drop: false,
            times: Some(1),
        });
    });
    let r = Client::new(cfg, metrics.clone())
        .unwrap()
        .sync()
        .await
        .unwrap();
    assert!(matches!(r.nova, ServiceStatus::Failed { .. }));
    assert_eq!(metrics.get("compute", "servers", "network"), 1);
}

#[tokio::test]
async fn old_keystone_truncation_is_an_error_not_a_list() {
    let sim = sim_with(|t| {
        t.settings.page_size = Some(2);
        t.settings.keystone_paging = KeystonePaging::Truncated;
    })
    .await;
    let err = Client::new(password(&sim), ApiMetrics::default())
        .unwrap()
        .sync()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("truncated"), "{err}");
}

#[tokio::test]
async fn client_page_size_is_sent_as_limit() {
    let sim = sim_with(|t| t.settings.page_size = None).await;
    let mut cfg = password(&sim);
    cfg.page_size = Some(2);
    let r = Client::new(cfg, ApiMetrics::default())
        .unwrap()
        .sync()
        .await
        .unwrap();
    let n = topology().ports.len();
    assert_eq!(ids(&r.bodies.ports, "ports").len(), n);
    // ceil(n/2) pages, plus one empty page when the last one was full.
    let expected = n.div_ceil(2) + usize::from(n.is_multiple_of(2));
    assert_eq!(
        sim.with_store(|s| s.stats()).requests_for("ports"),
        expected as u64
    );
}

#[tokio::test]
async fn metrics_family_is_named_as_documented() {
    let metrics = ApiMetrics::default();
    let mut registry = prometheus_client::registry::Registry::default();
    metrics.register(&mut registry);
    let sim = start_sim().await;
    sim.with_store(|s| s.add_fault(fault("servers", 500)));
    Client::new(password(&sim), metrics.clone())
        .unwrap()
        .sync()
        .await
        .unwrap();
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    assert!(
        text.contains(r#"lachesis_openstack_api_errors_total{service="compute",endpoint="servers",code="500"} 1"#),
        "{text}"
    );
}

// One scenario on purpose: every mutation kind, then one sync that sees them all.
#[expect(clippy::too_many_lines, reason = "one scenario, read top to bottom")]
#[tokio::test]
async fn mutation_api_changes_what_the_client_sees() {
    let sim = start_sim().await;
    let http = reqwest::Client::new();
    let ctl = |p: &str| format!("{}/sim/{p}", sim.base_url());
    let send = |req: reqwest::RequestBuilder, body: Value| async move {
        let resp = req.body(body.to_string()).send().await.unwrap();
        let status = resp.status().as_u16();
        (status, resp.text().await.unwrap())
    };
    // add a project, a port, move a port, remove one, routes, interfaces,
    // gateway, floating IPs, servers and load balancers.
    let calls = [
        (
            http.post(ctl("projects")),
            json!({"id": "0c00000000000000000000000000000c", "name": "tenant-c"}),
        ),
        (
            http.post(ctl("ports")),
            json!({"id": "p-new", "network_id": "net-b", "project_id": "0b0000000000000000000000000000bb",
            "mac_address": "fa:16:3e:b1:00:09", "device_id": "vm-b2", "device_owner": "compute:nova",
            "fixed_ips": [{"subnet_id": "sub-b4", "ip_address": "10.2.0.9"}]}),
        ),
        (
            http.patch(ctl("ports/p-vm-a2")),
            json!({"network_id": "net-shared", "fixed_ips": [{"subnet_id": "sub-shared", "ip_address": "10.50.0.66"}]}),
        ),
        (
            http.post(ctl("routers/router-b/routes")),
            json!({"destination": "10.9.0.0/16", "nexthop": "10.2.0.5"}),
        ),
        (
            http.post(ctl("routers/router-admin/interfaces")),
            json!({"subnet_id": "sub-shared", "mac_address": "fa:16:3e:00:ad:01", "ip_address": "10.50.0.1"}),
        ),
        (
            http.put(ctl("routers/router-admin/gateway")),
            json!({"network_id": "net-public"}),
        ),
        (
            http.post(ctl("floatingips")),
            json!({"id": "fip-9", "project_id": "0b0000000000000000000000000000bb",
            "floating_network_id": "net-public", "floating_ip_address": "203.0.113.99", "port_id": "p-new", "fixed_ip_address": "10.2.0.9"}),
        ),
        (
            http.post(ctl("servers")),
            json!({"id": "vm-b2", "name": "b-new", "tenant_id": "0b0000000000000000000000000000bb"}),
        ),
        (
            http.post(ctl("loadbalancers")),
            json!({"id": "lb9", "project_id": "0b0000000000000000000000000000bb"}),
        ),
    ];
    for (req, body) in calls {
        let (status, text) = send(req, body).await;
        assert!(status < 300, "{status}: {text}");
    }
    for path in [
        "ports/p-dhcp-a",
        "floatingips/fip-3",
        "loadbalancers/lb2",
        "routers/router-a/interfaces/sub-a6",
    ] {
        let (status, text) = send(http.delete(ctl(path)), Value::Null).await;
        assert_eq!(status, 204, "{path}: {text}");
    }
    let (status, _) = send(
        http.delete(ctl("routers/router-a/routes")),
        json!({"destination": "192.168.77.0/24", "nexthop": "10.1.0.5"}),
    )
    .await;
    assert_eq!(status, 204);
    // Refused like the real API would: a port on a network that does not exist, a duplicate.
    let (status, text) = send(http.post(ctl("ports")), json!({"id": "p-bad", "network_id": "net-nope", "project_id": "x", "mac_address": "fa:16:3e:00:00:01"})).await;
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("net-nope"), "{text}");
    let (status, _) = send(
        http.post(ctl("servers")),
        json!({"id": "vm-b2", "tenant_id": "x"}),
    )
    .await;
    assert_eq!(status, 409);

    let r = Client::new(password(&sim), ApiMetrics::default())
        .unwrap()
        .sync()
        .await
        .unwrap();
    let find = |body: &Value, coll: &str, id: &str| -> Value {
        body[coll]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["id"] == id)
            .cloned()
            .unwrap_or(Value::Null)
    };
    let b = &r.bodies;
    assert_eq!(
        find(&b.projects, "projects", "0c00000000000000000000000000000c")["name"],
        "tenant-c"
    );
    assert_eq!(
        find(&b.ports, "ports", "p-new")["mac_address"],
        "fa:16:3e:b1:00:09"
    );
    assert_eq!(
        find(&b.ports, "ports", "p-vm-a2")["network_id"],
        "net-shared"
    );
    assert_eq!(find(&b.ports, "ports", "p-dhcp-a"), Value::Null);
    assert_eq!(
        find(&b.ports, "ports", "p-ra-if6"),
        Value::Null,
        "interface removed with its port"
    );
    assert_eq!(
        find(&b.ports, "ports", "rif-router-admin-sub-shared")["device_owner"],
        "network:router_interface"
    );
    assert_eq!(
        find(&b.routers, "routers", "router-b")["routes"],
        json!([{"destination": "10.9.0.0/16", "nexthop": "10.2.0.5"}])
    );
    assert_eq!(
        find(&b.routers, "routers", "router-a")["routes"],
        json!([{"destination": "10.2.0.0/24", "nexthop": "10.50.0.20"}])
    );
    assert_eq!(
        find(&b.routers, "routers", "router-admin")["external_gateway_info"]["network_id"],
        "net-public"
    );
    assert_eq!(
        find(&b.floatingips, "floatingips", "fip-9")["port_id"],
        "p-new"
    );
    assert_eq!(find(&b.floatingips, "floatingips", "fip-3"), Value::Null);
    assert_eq!(
        find(b.servers.fetched().unwrap(), "servers", "vm-b2")["tenant_id"],
        "0b0000000000000000000000000000bb"
    );
    assert_eq!(
        find(b.loadbalancers.fetched().unwrap(), "loadbalancers", "lb9")["provider"],
        "amphora"
    );
    assert_eq!(
        find(b.loadbalancers.fetched().unwrap(), "loadbalancers", "lb2"),
        Value::Null
    );
}

#[tokio::test]
async fn fault_and_settings_endpoints_switch_at_run_time() {
    let sim = start_sim().await;
    let http = reqwest::Client::new();
    let ctl = |p: &str| format!("{}/sim/{p}", sim.base_url());
    let resp = http
        .put(ctl("faults"))
        .body(json!({"endpoint": "ports", "status": 500}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 204);
    let client = Client::new(password(&sim), ApiMetrics::default()).unwrap();
    let err = client.sync().await.unwrap_err();
    // The real Neutron error body reaches the caller.
    assert!(err.to_string().contains("NeutronError"), "{err}");
    http.delete(ctl("faults")).send().await.unwrap();
    client.sync().await.unwrap();
    let resp = http
        .put(ctl("settings"))
        .body(json!({"services": ["identity", "network"]}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    // The catalog comes with the next token.
    http.post(ctl("tokens/revoke")).send().await.unwrap();
    let r = client.sync().await.unwrap();
    assert_eq!(
        (r.nova, r.octavia),
        (ServiceStatus::NotInCatalog, ServiceStatus::NotInCatalog)
    );
    let stats: Value = serde_json::from_str(
        &http
            .get(ctl("stats"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(stats["tokens_issued"], 2);
}

#[tokio::test]
async fn tls_options_are_checked_when_the_client_is_built() {
    let sim = start_sim().await;
    let mut cfg = password(&sim);
    cfg.tls = lachesis_openstack::config::TlsVerify::Verify {
        ca_file: Some("/nonexistent/ca.pem".into()),
    };
    let err = Client::new(cfg.clone(), ApiMetrics::default()).unwrap_err();
    assert!(
        matches!(&err, ApiError::Setup(m) if m.contains("/nonexistent/ca.pem")),
        "{err}"
    );

    let dir = tempfile::tempdir().unwrap();
    let not_pem = dir.path().join("ca.pem");
    std::fs::write(&not_pem, "not a certificate").unwrap();
    cfg.tls = lachesis_openstack::config::TlsVerify::Verify {
        ca_file: Some(not_pem),
    };
    assert!(matches!(
        Client::new(cfg.clone(), ApiMetrics::default()),
        Err(ApiError::Setup(_))
    ));

    // Insecure still works (and warns); plain HTTP is unaffected by TLS options.
    cfg.tls = lachesis_openstack::config::TlsVerify::Insecure;
    Client::new(cfg, ApiMetrics::default())
        .unwrap()
        .sync()
        .await
        .unwrap();
}

/// Every list a sync of the simulator's example has, with its items.
async fn synced_lists(client: &Client) -> Vec<(Resource, Vec<Value>)> {
    let listed = client.sync().await.unwrap().bodies;
    Resource::ALL
        .into_iter()
        .filter_map(|r| Some((r, listed.items(r)?.to_vec())))
        .collect()
}

/// Every resource of the example, by id, as its list has it: same fields,
/// same content; an unknown id is `None`, not an error.
#[tokio::test]
async fn get_one_answers_what_the_list_has_and_none_for_a_gone_id() {
    let sim = start_sim().await;
    let client = Client::new(appcred(&sim), ApiMetrics::default()).unwrap();
    for (resource, items) in synced_lists(&client).await {
        assert!(!items.is_empty(), "{resource:?}");
        for item in &items {
            let id = item["id"].as_str().unwrap();
            let one = client.get_one(resource, id).await.unwrap();
            assert_eq!(one.as_ref(), Some(item), "{resource:?} {id}");
        }
        assert_eq!(client.get_one(resource, "no-such-id").await.unwrap(), None);
    }
    let metrics = ApiMetrics::default();
    let counted = Client::new(appcred(&sim), metrics.clone()).unwrap();
    assert_eq!(
        counted.get_one(Resource::Ports, "gone").await.unwrap(),
        None
    );
    assert_eq!(
        metrics.get("network", "ports/{id}", "404"),
        0,
        "a 404 is an answer"
    );
    sim.with_store(|s| s.add_fault(fault("ports/{id}", 500)));
    assert!(counted.get_one(Resource::Ports, "p-vm-a1").await.is_err());
    assert_eq!(metrics.get("network", "ports/{id}", "500"), 1);
}

/// A digest lists Neutron's ids and revisions only, every page; the other
/// lists whole.
#[tokio::test]
async fn list_revisions_has_every_id_with_its_revision() {
    use lachesis_openstack::Revisions;
    let sim = start_sim().await;
    let client = Client::new(appcred(&sim), ApiMetrics::default()).unwrap();
    for (resource, items) in synced_lists(&client).await {
        match client.list_revisions(resource).await.unwrap() {
            Revisions::Numbers(numbers) => {
                assert_eq!(resource.service(), "network");
                let expected: Vec<(String, Option<u64>)> = items
                    .iter()
                    .map(|i| {
                        let id = i["id"].as_str().unwrap().to_owned();
                        (id, i["revision_number"].as_u64())
                    })
                    .collect();
                assert_eq!(numbers, expected, "{resource:?}");
                assert!(numbers.iter().all(|(_, rev)| rev.is_some()));
            }
            Revisions::Bodies(bodies) => {
                assert_ne!(resource.service(), "network");
                assert_eq!(bodies, items, "{resource:?}");
            }
        }
    }
    // Ids and revisions only: a fraction of the list's bytes.
    let before = client.session().traffic();
    client.list_revisions(Resource::Ports).await.unwrap();
    let lean = client.session().traffic() - before;
    let before = client.session().traffic();
    client.sync().await.unwrap();
    let full = client.session().traffic() - before;
    assert!(lean.bytes * 5 < full.bytes, "{lean:?} vs a sync's {full:?}");
}
