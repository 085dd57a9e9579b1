//! `make bench-neutron` (root: Debian's own Keystone and Neutron, brought up
//! by the real-cloud tier's script): what one sync's port list costs a real
//! Neutron, whole and with the fields a sync asks for (DESIGN §17).
//!
//! Builds N VM ports (default 2 000, in bulk requests) on one network,
//! then lists them paged as the agent does (`limit=1000`, following
//! `next`), whole objects and with `fields=` for every field
//! `lachesis_planner::Resource::Ports` names, alternating, several rounds.
//! On loopback with nothing else asking, a list's wall time is Neutron's
//! server time (its API worker building the answer; the client's share is
//! reading the bytes). Prints milliseconds per port row, bytes and the
//! ratio of each pair, medians, then one JSON line; deletes what it built.
//!
//! `cargo run --release -p lachesis-agent --example bench_neutron [PORTS] [ROUNDS]`

use std::time::{Duration, Instant};

use lachesis_lab::services::{CLOUD_ADMIN_PASSWORD, KEYSTONE_URL, NEUTRON_URL};
use lachesis_planner::Resource;
use serde_json::{json, Value};

/// The network this benchmark builds its ports on.
const NETWORK: &str = "bench-neutron";
/// Ports a bulk create carries.
const BULK: usize = 200;
/// The agent's page size (a common `pagination_max_limit`).
const PAGE: usize = 1000;

struct Admin {
    http: reqwest::Client,
    token: String,
    project: String,
}

impl Admin {
    async fn login() -> Admin {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_mins(5))
            .build()
            .expect("client");
        let body = json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {
            "name": "admin", "domain": {"name": "Default"}, "password": CLOUD_ADMIN_PASSWORD}}},
            "scope": {"project": {"name": "admin", "domain": {"name": "Default"}}}}});
        let resp = http
            .post(format!("{KEYSTONE_URL}/auth/tokens"))
            .header("Content-Type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .expect("Keystone answers");
        assert_eq!(resp.status().as_u16(), 201, "admin login");
        let token = resp.headers()["x-subject-token"]
            .to_str()
            .expect("a token")
            .to_owned();
        let body: Value = serde_json::from_str(&resp.text().await.expect("a body")).expect("JSON");
        let project = body["token"]["project"]["id"]
            .as_str()
            .expect("a project-scoped token")
            .to_owned();
        Admin {
            http,
            token,
            project,
        }
    }

    async fn call(&self, method: reqwest::Method, url: &str, body: Option<Value>) -> (u16, String) {
        let mut req = self
            .http
            .request(method, url)
            .header("X-Auth-Token", &self.token);
        if let Some(b) = body {
            req = req
                .header("Content-Type", "application/json")
                .body(b.to_string());
        }
        let resp = req.send().await.expect("Neutron answers");
        let status = resp.status().as_u16();
        (status, resp.text().await.expect("a body"))
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        let (status, text) = self
            .call(
                reqwest::Method::POST,
                &format!("{NEUTRON_URL}/{path}"),
                Some(body),
            )
            .await;
        assert!((200..300).contains(&status), "POST {path}: {status} {text}");
        serde_json::from_str(&text).expect("JSON")
    }

    async fn delete(&self, path: &str) {
        let (status, text) = self
            .call(
                reqwest::Method::DELETE,
                &format!("{NEUTRON_URL}/{path}"),
                None,
            )
            .await;
        assert!(
            (200..300).contains(&status) || status == 404,
            "DELETE {path}: {status} {text}"
        );
    }

    async fn put(&self, path: &str, body: Value) {
        let (status, text) = self
            .call(
                reqwest::Method::PUT,
                &format!("{NEUTRON_URL}/{path}"),
                Some(body),
            )
            .await;
        assert!((200..300).contains(&status), "PUT {path}: {status} {text}");
    }

    /// Removes what an earlier run of this benchmark built (a run cut
    /// short leaves its network and ports): the tier is shared with the
    /// tests.
    async fn clean(&self) {
        let (_, text) = self
            .call(
                reqwest::Method::GET,
                &format!("{NEUTRON_URL}/networks?name={NETWORK}&fields=id"),
                None,
            )
            .await;
        let nets: Value = serde_json::from_str(&text).expect("JSON");
        for net in nets["networks"].as_array().into_iter().flatten() {
            let Some(net) = net["id"].as_str() else {
                continue;
            };
            let (_, text) = self
                .call(
                    reqwest::Method::GET,
                    &format!("{NEUTRON_URL}/ports?network_id={net}&fields=id"),
                    None,
                )
                .await;
            let ports: Value = serde_json::from_str(&text).expect("JSON");
            for p in ports["ports"].as_array().into_iter().flatten() {
                if let Some(id) = p["id"].as_str() {
                    self.delete(&format!("ports/{id}")).await;
                }
            }
            self.delete(&format!("networks/{net}")).await;
        }
    }

    /// Every page of the port list with `query`: (wall time, bytes, rows).
    async fn list_ports(&self, query: &str) -> (Duration, usize, usize) {
        let mut url = format!("{NEUTRON_URL}/ports?limit={PAGE}{query}");
        let (mut bytes, mut rows) = (0, 0);
        let started = Instant::now();
        loop {
            let (status, text) = self.call(reqwest::Method::GET, &url, None).await;
            assert_eq!(status, 200, "{url}: {text}");
            bytes += text.len();
            let body: Value = serde_json::from_str(&text).expect("JSON");
            let page = body["ports"].as_array().map_or(0, Vec::len);
            rows += page;
            let next = body["ports_links"]
                .as_array()
                .and_then(|l| l.iter().find(|k| k["rel"] == "next"))
                .and_then(|k| k["href"].as_str());
            match next {
                Some(href) if page > 0 => href.clone_into(&mut url),
                _ => break,
            }
        }
        (started.elapsed(), bytes, rows)
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = std::env::args().skip(1);
    let ports: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(2000);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    lachesis_lab::require_root_for("Debian's Keystone and Neutron (scripts/real-cloud)");
    let _cloud = lachesis_lab::Services::cloud();
    let admin = Admin::login().await;
    admin.clean().await;
    // Neutron's default quota is 500 ports a project.
    admin
        .put(
            &format!("quotas/{}", admin.project),
            json!({"quota": {"port": -1}}),
        )
        .await;

    let net = admin
        .post("networks", json!({"network": {"name": NETWORK}}))
        .await["network"]["id"]
        .as_str()
        .expect("a network id")
        .to_owned();
    let subnet = admin
        .post(
            "subnets",
            json!({"subnet": {"network_id": net, "ip_version": 4, "cidr": "10.200.0.0/16"}}),
        )
        .await["subnet"]["id"]
        .as_str()
        .expect("a subnet id")
        .to_owned();
    let started = Instant::now();
    for batch in 0..ports.div_ceil(BULK) {
        let n = BULK.min(ports - batch * BULK);
        let list: Vec<Value> = (0..n)
            .map(|i| {
                let k = batch * BULK + i;
                json!({"network_id": net, "device_owner": "compute:nova",
                    "device_id": format!("bench-neutron-vm-{k}"),
                    "fixed_ips": [{"subnet_id": subnet}]})
            })
            .collect();
        admin.post("ports", json!({"ports": list})).await;
    }
    eprintln!(
        "bench-neutron: {ports} ports built in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let fields: String = Resource::Ports
        .fields()
        .expect("ports are field-selected")
        .iter()
        .flat_map(|f| ["&fields=", f])
        .collect();
    // One of each before measuring (caches, connections).
    admin.list_ports("").await;
    admin.list_ports(&fields).await;
    let (mut whole, mut selected) = (Vec::new(), Vec::new());
    let (mut whole_bytes, mut selected_bytes, mut rows) = (0, 0, 0);
    for _ in 0..rounds {
        let (t, b, r) = admin.list_ports("").await;
        whole.push(t.as_secs_f64() * 1000.0);
        (whole_bytes, rows) = (b, r);
        let (t, b, _) = admin.list_ports(&fields).await;
        selected.push(t.as_secs_f64() * 1000.0);
        selected_bytes = b;
    }
    #[expect(clippy::cast_precision_loss, reason = "a few thousand rows")]
    let per_row = |ms: f64| ms / rows as f64;
    let (w, s) = (median(whole.clone()), median(selected.clone()));
    println!("bench-neutron: port list of {rows} rows, pages of {PAGE}, {rounds} rounds alternating (medians)");
    println!(
        "  whole objects   {w:>8.1} ms  {:>6.3} ms/row  {whole_bytes:>9} B  (min {:.1}, max {:.1})",
        per_row(w),
        whole.iter().copied().fold(f64::INFINITY, f64::min),
        whole.iter().copied().fold(0.0, f64::max)
    );
    println!(
        "  with fields=    {s:>8.1} ms  {:>6.3} ms/row  {selected_bytes:>9} B  (min {:.1}, max {:.1})",
        per_row(s),
        selected.iter().copied().fold(f64::INFINITY, f64::min),
        selected.iter().copied().fold(0.0, f64::max)
    );
    #[expect(clippy::cast_precision_loss, reason = "bytes of one list")]
    let byte_ratio = selected_bytes as f64 / whole_bytes as f64;
    println!(
        "  fields= / whole: time {:.2}x, bytes {byte_ratio:.2}x",
        s / w
    );
    println!(
        "{}",
        json!({"rows": rows, "whole_ms": w, "fields_ms": s, "whole_ms_per_row": per_row(w),
            "fields_ms_per_row": per_row(s), "whole_bytes": whole_bytes,
            "fields_bytes": selected_bytes, "time_ratio": s / w, "byte_ratio": byte_ratio})
    );

    // What it built goes (the tier is shared with the tests).
    admin.clean().await;
}
