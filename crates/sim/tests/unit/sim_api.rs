//! The simulator's `OpenStack` API over HTTP, as a relay or a client meets
//! it: a GET by id for every resource it may fetch, Neutron's `fields=`,
//! and each change showing in `revision_number` / `updated_at`.

use crate::common;

use reqwest::Method;
use serde_json::{json, Value};

/// A token-holding client of one simulator's `RegionOne/internal` endpoints.
struct Api {
    http: reqwest::Client,
    base: String,
    token: String,
    ctl: common::Control,
}

impl Api {
    fn of(sim: &lachesis_sim::SimHandle) -> Self {
        Self {
            http: reqwest::Client::new(),
            base: format!("{}/r/RegionOne/internal", sim.base_url()),
            token: sim.application_credential_token("ac-lachesis").unwrap(),
            ctl: common::Control::of(sim),
        }
    }

    /// `GET <base>/<path>`: the status and the JSON body.
    async fn get(&self, path: &str) -> (u16, Value) {
        let resp = self
            .http
            .get(format!("{}/{path}", self.base))
            .header("X-Auth-Token", &self.token)
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        (
            status,
            serde_json::from_str(&resp.text().await.unwrap()).unwrap(),
        )
    }

    /// A GET that must succeed.
    async fn ok(&self, path: &str) -> Value {
        let (status, body) = self.get(path).await;
        assert_eq!(status, 200, "{path}: {body}");
        body
    }

    /// A control-API call that must succeed.
    async fn change(&self, method: Method, path: &str, body: &Value) {
        let status = self.ctl.send(method.clone(), path, body).await;
        assert!(
            (200..300).contains(&status),
            "{method} /sim/{path}: {status}"
        );
    }
}

fn keys(v: &Value) -> Vec<&str> {
    let mut k: Vec<&str> = v
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .map(String::as_str)
        .collect();
    k.sort_unstable();
    k
}

#[tokio::test]
async fn every_resource_a_relay_fetches_has_a_get_by_id_in_its_services_shape() {
    let sim = common::example_sim(lachesis_sim::SimOptions::default()).await;
    let api = Api::of(&sim);
    for (path, wrapper, id) in [
        ("network/v2.0/networks/net-a", "network", "net-a"),
        ("network/v2.0/subnets/sub-a4", "subnet", "sub-a4"),
        ("network/v2.0/ports/p-vm-a1", "port", "p-vm-a1"),
        ("network/v2.0/routers/router-a", "router", "router-a"),
        ("network/v2.0/floatingips/fip-1", "floatingip", "fip-1"),
        (
            "identity/v3/projects/0b0000000000000000000000000000aa",
            "project",
            "0b0000000000000000000000000000aa",
        ),
        ("compute/v2.1/servers/vm-a1", "server", "vm-a1"),
        (
            "load-balancer/v2/lbaas/loadbalancers/lb1",
            "loadbalancer",
            "lb1",
        ),
        (
            "load-balancer/v2/octavia/amphorae/amp-1",
            "amphora",
            "amp-1",
        ),
    ] {
        let body = api.ok(path).await;
        assert_eq!(keys(&body), [wrapper], "{path}");
        assert_eq!(body[wrapper]["id"], id, "{path}");
    }
    // The same object a list shows.
    let listed = api
        .ok("network/v2.0/networks?limit=1&marker=net-lbmgmt")
        .await;
    assert_eq!(
        api.ok("network/v2.0/networks/net-public").await["network"],
        listed["networks"][0]
    );
    assert_eq!(
        api.ok("network/v2.0/networks/net-a").await["network"]["subnets"],
        json!(["sub-a4", "sub-a6"])
    );
    // A GET by id is its own endpoint: for faults and for the counters.
    api.change(
        Method::PUT,
        "faults",
        &json!({"endpoint": "ports/{id}", "status": 503, "times": 1}),
    )
    .await;
    assert_eq!(api.get("network/v2.0/ports/p-vm-a1").await.0, 503);
    assert_eq!(api.get("network/v2.0/ports?limit=1").await.0, 200);
    assert_eq!(api.get("network/v2.0/ports/p-vm-a1").await.0, 200);
    let stats = sim.with_store(|s| s.stats());
    assert_eq!(
        (
            stats.requests_for("ports/{id}"),
            stats.requests_for("ports")
        ),
        (3, 1)
    );
}

#[tokio::test]
async fn a_missing_id_gets_each_services_own_404() {
    let sim = common::example_sim(lachesis_sim::SimOptions::default()).await;
    let api = Api::of(&sim);
    for (path, body) in [
        (
            "network/v2.0/ports/nope",
            json!({"NeutronError": {"type": "PortNotFound", "message": "Port nope could not be found.", "detail": ""}}),
        ),
        (
            "network/v2.0/routers/nope",
            json!({"NeutronError": {"type": "RouterNotFound", "message": "Router nope could not be found", "detail": ""}}),
        ),
        (
            "network/v2.0/floatingips/nope",
            json!({"NeutronError": {"type": "FloatingIPNotFound", "message": "Floating IP nope could not be found", "detail": ""}}),
        ),
        (
            "identity/v3/projects/nope",
            json!({"error": {"code": 404, "message": "Could not find project: nope.", "title": "Not Found"}}),
        ),
        (
            "compute/v2.1/servers/nope",
            json!({"itemNotFound": {"code": 404, "message": "Instance nope could not be found."}}),
        ),
        (
            "load-balancer/v2/octavia/amphorae/nope",
            json!({"faultcode": "Client", "faultstring": "Amphora nope not found.", "debuginfo": null}),
        ),
    ] {
        assert_eq!(api.get(path).await, (404, body), "{path}");
    }
}

#[tokio::test]
async fn neutron_answers_only_the_fields_asked_for_and_still_pages() {
    let sim = common::example_sim(lachesis_sim::SimOptions::default()).await;
    let api = Api::of(&sim);
    let one = api
        .ok("network/v2.0/ports/p-vm-a1?fields=mac_address&fields=device_id")
        .await;
    assert_eq!(
        one,
        json!({"port": {"mac_address": "fa:16:3e:a1:00:01", "device_id": "vm-a1"}})
    );
    // Without `id` in the fields the pages still link on by id.
    let mut url = "network/v2.0/ports?fields=mac_address&limit=4".to_owned();
    let mut macs = Vec::new();
    loop {
        let page = api.ok(&url).await;
        for p in page["ports"].as_array().unwrap() {
            assert_eq!(keys(p), ["mac_address"], "{p}");
            macs.push(p["mac_address"].as_str().unwrap().to_owned());
        }
        assert!(macs.len() < 100, "the links went round: {macs:?}");
        let Some(next) = page["ports_links"]
            .as_array()
            .and_then(|l| l.iter().find(|l| l["rel"] == "next"))
        else {
            break;
        };
        let href = next["href"].as_str().unwrap();
        assert!(href.contains("fields=mac_address"), "{href}");
        url = href.split_once("/internal/").unwrap().1.to_owned();
    }
    api.change(Method::PUT, "settings", &json!({"page_size": 0}))
        .await;
    let whole = api.ok("network/v2.0/ports").await;
    let all: Vec<&str> = whole["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["mac_address"].as_str().unwrap())
        .collect();
    assert_eq!(macs, all);
    // Only Neutron takes `fields`: Nova answers whole servers.
    let server = api.ok("compute/v2.1/servers/vm-a1?fields=id").await;
    assert!(server["server"].get("tenant_id").is_some(), "{server}");
}

#[tokio::test]
async fn a_change_through_the_control_api_shows_in_revision_and_updated_at() {
    let sim = common::example_sim(lachesis_sim::SimOptions::default()).await;
    let api = Api::of(&sim);
    let settings = api.ctl.call(Method::GET, "settings", &Value::Null).await.1;
    assert_eq!(
        (&settings["clock"], &settings["now"]),
        (
            &json!("2026-01-01T00:00:00Z"),
            &json!("2026-01-01T00:00:00Z")
        )
    );
    let before = api.ok("network/v2.0/routers/router-b").await["router"].clone();
    assert_eq!(before["revision_number"], 1);
    api.change(Method::PUT, "settings", &json!({"clock_step_secs": 90}))
        .await;
    api.change(
        Method::POST,
        "routers/router-b/routes",
        &json!({"destination": "10.9.0.0/16", "nexthop": "10.2.0.5"}),
    )
    .await;
    let after = api.ok("network/v2.0/routers/router-b").await["router"].clone();
    assert_eq!(
        (
            &after["revision_number"],
            &after["updated_at"],
            &after["created_at"]
        ),
        (
            &json!(2),
            &json!("2026-01-01T00:01:30Z"),
            &json!("2026-01-01T00:00:00Z")
        )
    );
    // A subnet on net-b raises the network, visible on its GET.
    api.change(
        Method::POST,
        "subnets",
        &json!({"id": "sub-b9", "network_id": "net-b", "project_id": "0b0000000000000000000000000000bb", "cidr": "10.29.0.0/24"}),
    )
    .await;
    let net = api.ok("network/v2.0/networks/net-b").await["network"].clone();
    assert_eq!(
        (&net["revision_number"], &net["subnets"]),
        (&json!(2), &json!(["sub-b4", "sub-b9"]))
    );
    // A wall clock cannot step: 400, nothing changed.
    let (status, body) = api
        .ctl
        .call(
            Method::PUT,
            "settings",
            &json!({"clock": "wall", "clock_step_secs": 1}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    let settings = api.ctl.call(Method::GET, "settings", &Value::Null).await.1;
    assert_eq!(settings["clock"], "2026-01-01T00:01:30Z");
}

fn ids(body: &Value, collection: &str) -> Vec<String> {
    body[collection]
        .as_array()
        .unwrap_or_else(|| panic!("no {collection} in {body}"))
        .iter()
        .map(|x| x["id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn changed_since_is_neutrons_400_by_default_and_filters_without_validation() {
    let sim = common::example_sim(lachesis_sim::SimOptions::default()).await;
    let api = Api::of(&sim);
    assert_eq!(
        api.get("network/v2.0/networks?changed_since=2026-01-01T00:00:00")
            .await,
        (
            400,
            json!({"NeutronError": {"type": "HTTPBadRequest",
                "message": "['changed_since'] is invalid attribute for filtering", "detail": ""}})
        )
    );
    api.change(
        Method::PUT,
        "settings",
        &json!({"neutron_filter_validation": false, "page_size": 0, "clock_step_secs": 10}),
    )
    .await;
    api.change(Method::PATCH, "ports/p-vm-b1", &json!({"name": "b1"}))
        .await;
    api.change(Method::PUT, "settings", &json!({"clock_step_secs": 10}))
        .await;
    api.change(Method::DELETE, "ports/p-dhcp-a", &Value::Null)
        .await;
    let since = |t: &str| format!("network/v2.0/ports?changed_since={t}");
    assert_eq!(
        ids(&api.ok(&since("2026-01-01T00:00:10Z")).await, "ports"),
        ["p-vm-b1"]
    );
    // Whole seconds: the change at :10 is not at or after :10.5.
    assert_eq!(
        ids(&api.ok(&since("2026-01-01T00:00:10.5")).await, "ports"),
        Vec::<String>::new()
    );
    // A deletion never shows.
    assert_eq!(
        ids(&api.ok(&since("2026-01-01T00:00:20")).await, "ports"),
        Vec::<String>::new()
    );
    let all = api.ok(&since("2026-01-01T00:00:00")).await;
    assert_eq!(
        ids(&all, "ports").len(),
        15,
        "every port is as new as the load"
    );
    assert_eq!(
        api.ok("network/v2.0/ports?changed_since=2026-01-01T00:00:10&fields=id")
            .await,
        json!({"ports": [{"id": "p-vm-b1"}]})
    );
    let (status, body) = api.get(&since("soon")).await;
    assert_eq!(status, 400, "{body}");
}

#[tokio::test]
async fn nova_changes_since_lists_changed_and_deleted_servers() {
    let sim = common::example_sim(lachesis_sim::SimOptions::default()).await;
    let api = Api::of(&sim);
    api.change(
        Method::PUT,
        "settings",
        &json!({"page_size": 0, "clock_step_secs": 60}),
    )
    .await;
    api.change(Method::PATCH, "servers/vm-a1", &json!({"name": "web-2"}))
        .await;
    api.change(Method::DELETE, "servers/vm-b1", &Value::Null)
        .await;
    let changed = api
        .ok("compute/v2.1/servers/detail?all_tenants=1&changes-since=2026-01-01T00:01:00Z")
        .await;
    assert_eq!(ids(&changed, "servers"), ["vm-a1", "vm-b1"]);
    let deleted = &changed["servers"][1];
    assert_eq!(
        (
            &deleted["status"],
            &deleted["OS-EXT-STS:vm_state"],
            &deleted["updated"]
        ),
        (
            &json!("DELETED"),
            &json!("deleted"),
            &json!("2026-01-01T00:01:00Z")
        )
    );
    // Without changes-since a deleted server is gone, and so is its GET.
    let live = api.ok("compute/v2.1/servers/detail?all_tenants=1").await;
    assert!(!ids(&live, "servers").contains(&"vm-b1".to_owned()));
    assert_eq!(api.get("compute/v2.1/servers/vm-b1").await.0, 404);
    // The token's project alone without all_tenants, deleted ones too.
    let own = api
        .ok("compute/v2.1/servers/detail?changes-since=2026-01-01T00:01:00Z")
        .await;
    assert_eq!(ids(&own, "servers"), Vec::<String>::new());
    let (status, body) = api
        .get("compute/v2.1/servers/detail?changes-since=yesterday")
        .await;
    assert_eq!(status, 400);
    assert!(body["badRequest"]["message"]
        .as_str()
        .unwrap()
        .contains("changes-since"));
}
