//! Issue 21 on the real Neutron: the agent's sync asks each Neutron list for
//! `Resource::fields` only and parses its pages as they arrive; its plan
//! must be the plan of the same Neutron's whole lists, byte for byte, and
//! what Neutron answered must be exactly the listed fields of each object.

use std::collections::BTreeMap;

use lachesis_agent::reconcile::{MetadataSource, OpenStackSource};
use lachesis_openstack::{ApiMetrics, Client, CloudConfig};
use lachesis_planner::{parse_snapshot, plan, ApiBodies, OptionalBody, PlanOptions, Resource};
use serde_json::Value;

use super::harness::{Admin, KEYSTONE, NEUTRON};

/// The Neutron lists, the ones a sync asks fields of.
fn neutron() -> impl Iterator<Item = Resource> {
    Resource::ALL.into_iter().filter(|r| r.fields().is_some())
}

/// One unpaged GET as the admin session makes it: the body's text.
async fn text(admin: &Admin, url: &str) -> String {
    let resp = admin
        .http
        .get(url)
        .header("X-Auth-Token", &admin.token)
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    assert!(resp.status().is_success(), "GET {url}: {}", resp.status());
    resp.text().await.unwrap()
}

/// Objects of a list body by id.
fn by_id(body: &Value, r: Resource) -> BTreeMap<String, serde_json::Map<String, Value>> {
    body[r.collection()]
        .as_array()
        .unwrap_or_else(|| panic!("{r}: no array in {body}"))
        .iter()
        .map(|o| {
            let o = o.as_object().unwrap().clone();
            (o["id"].as_str().unwrap().to_owned(), o)
        })
        .collect()
}

pub async fn field_selected_sync_plans_like_whole_lists(admin: &Admin, cfg: CloudConfig) {
    // The agent's own sync: pages of 2 (several per list), fields= asked.
    let client = Client::new(cfg.clone(), ApiMetrics::default()).unwrap();
    let synced = OpenStackSource::new(client)
        .sync(None, PlanOptions::default())
        .await
        .unwrap();

    // The same cloud's whole lists, unpaged, without fields=, parsed whole.
    let mut whole_text = BTreeMap::new();
    for r in neutron() {
        whole_text.insert(r, text(admin, &format!("{NEUTRON}/{}", r.path())).await);
    }
    let whole_of = |r: Resource| -> Value { serde_json::from_str(&whole_text[&r]).unwrap() };
    let whole = ApiBodies {
        networks: whole_of(Resource::Networks),
        subnets: whole_of(Resource::Subnets),
        ports: whole_of(Resource::Ports),
        routers: whole_of(Resource::Routers),
        floatingips: whole_of(Resource::FloatingIps),
        projects: admin.get(&format!("{KEYSTONE}/projects")).await,
        servers: OptionalBody::NotDeployed,
        loadbalancers: OptionalBody::NotDeployed,
        amphorae: OptionalBody::NotDeployed,
    };
    let (snapshot, report) = parse_snapshot(&whole).unwrap();
    assert!(report.is_empty(), "{:?}", report.skipped);
    let want = plan(&snapshot, &PlanOptions::default());
    assert!(!want.bindings.is_empty() && !want.router_macs.is_empty());
    assert_eq!(
        synced.plan.to_json(),
        want.to_json(),
        "the field-selected sync plans as the whole lists do"
    );
    assert_eq!(synced.skipped, 0);

    // What Neutron answered the client: of each object, exactly the listed
    // fields it has (it answers what is asked and nothing else; a field it
    // does not know, such as external_gateways or trunk_details here, is
    // left out).
    let selected = Client::new(cfg, ApiMetrics::default())
        .unwrap()
        .sync()
        .await
        .unwrap()
        .bodies;
    let (mut whole_bytes, mut selected_bytes) = (0, 0);
    for r in neutron() {
        let fields = r.fields().unwrap();
        let got = by_id(selected.body(r).unwrap(), r);
        let full = by_id(&whole_of(r), r);
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            full.keys().collect::<Vec<_>>(),
            "{r}"
        );
        for (id, object) in &full {
            let mut expected = object.clone();
            expected.retain(|k, _| fields.contains(&k.as_str()));
            assert_eq!(got[id], expected, "{r} {id}");
        }
        // Bytes of the same list as Neutron writes it, whole and selected
        // (a measurement; nothing asserted on it).
        let query: Vec<String> = fields.iter().map(|f| format!("fields={f}")).collect();
        let url = format!("{NEUTRON}/{}?{}", r.path(), query.join("&"));
        let (w, s) = (whole_text[&r].len(), text(admin, &url).await.len());
        eprintln!(
            "real Neutron {r}: {} objects, {w} bytes whole, {s} bytes with fields= ({:+.0} %)",
            full.len(),
            percent(s, w) - 100.0
        );
        whole_bytes += w;
        selected_bytes += s;
    }
    eprintln!(
        "real Neutron, five lists: {whole_bytes} bytes whole, {selected_bytes} with fields= ({:+.0} %)",
        percent(selected_bytes, whole_bytes) - 100.0
    );
}

fn percent(part: usize, whole: usize) -> f64 {
    #[expect(clippy::cast_precision_loss, reason = "bytes of a small list")]
    let (p, w) = (part as f64, whole as f64);
    100.0 * p / w
}
