//! The real cloud itself: bring-up/tear-down by PID, an admin session, and
//! the topology built through the real API.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{json, Value};

pub use lachesis_lab::services::{
    CLOUD_ADMIN_PASSWORD as ADMIN_PASSWORD, KEYSTONE_URL as KEYSTONE, NEUTRON_URL as NEUTRON,
};

/// A thin admin session for building the topology (not the code under test).
pub struct Admin {
    pub http: reqwest::Client,
    pub token: String,
    pub user_id: String,
}

impl Admin {
    pub async fn login() -> Self {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_mins(1))
            .build()
            .unwrap();
        let body = json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {
            "name": "admin", "domain": {"name": "Default"}, "password": ADMIN_PASSWORD}}},
            "scope": {"project": {"name": "admin", "domain": {"name": "Default"}}}}});
        let resp = http
            .post(format!("{KEYSTONE}/auth/tokens"))
            .header("Content-Type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 201);
        let token = resp.headers()["x-subject-token"]
            .to_str()
            .unwrap()
            .to_owned();
        let body: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
        let user_id = body["token"]["user"]["id"].as_str().unwrap().to_owned();
        Self {
            http,
            token,
            user_id,
        }
    }

    pub async fn call(&self, method: reqwest::Method, url: &str, body: Option<Value>) -> Value {
        let mut req = self
            .http
            .request(method.clone(), url)
            .header("X-Auth-Token", &self.token);
        if let Some(b) = body {
            req = req
                .header("Content-Type", "application/json")
                .body(b.to_string());
        }
        let resp = req
            .send()
            .await
            .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
        let status = resp.status();
        let text = resp.text().await.unwrap();
        assert!(status.is_success(), "{method} {url}: {status}: {text}");
        if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap()
        }
    }

    pub async fn get(&self, url: &str) -> Value {
        self.call(reqwest::Method::GET, url, None).await
    }
    pub async fn post(&self, url: &str, body: Value) -> Value {
        self.call(reqwest::Method::POST, url, Some(body)).await
    }
    pub async fn put(&self, url: &str, body: Value) -> Value {
        self.call(reqwest::Method::PUT, url, Some(body)).await
    }
    pub async fn delete(&self, url: &str) {
        self.call(reqwest::Method::DELETE, url, None).await;
    }

    pub async fn list(&self, coll: &str) -> Vec<Value> {
        self.get(&format!("{NEUTRON}/{coll}")).await[coll]
            .as_array()
            .unwrap()
            .clone()
    }

    /// Removes everything a previous run built, so "exactly" means exactly.
    pub async fn clean(&self) {
        for f in self.list("floatingips").await {
            self.delete(&format!(
                "{NEUTRON}/floatingips/{}",
                f["id"].as_str().unwrap()
            ))
            .await;
        }
        for r in self.list("routers").await {
            let id = r["id"].as_str().unwrap();
            self.put(
                &format!("{NEUTRON}/routers/{id}"),
                json!({"router": {"routes": []}}),
            )
            .await;
            for p in self.list("ports").await {
                if p["device_id"] == id && p["device_owner"] == "network:router_interface" {
                    self.put(
                        &format!("{NEUTRON}/routers/{id}/remove_router_interface"),
                        json!({"port_id": p["id"]}),
                    )
                    .await;
                }
            }
            self.delete(&format!("{NEUTRON}/routers/{id}")).await;
        }
        for p in self.list("ports").await {
            self.delete(&format!("{NEUTRON}/ports/{}", p["id"].as_str().unwrap()))
                .await;
        }
        for n in self.list("networks").await {
            self.delete(&format!("{NEUTRON}/networks/{}", n["id"].as_str().unwrap()))
                .await;
        }
        let projects = self.get(&format!("{KEYSTONE}/projects")).await;
        for p in projects["projects"].as_array().unwrap() {
            if p["name"].as_str().unwrap().starts_with("lt-") {
                let id = p["id"].as_str().unwrap();
                self.call(
                    reqwest::Method::PATCH,
                    &format!("{KEYSTONE}/projects/{id}"),
                    Some(json!({"project": {"enabled": false}})),
                )
                .await;
                self.delete(&format!("{KEYSTONE}/projects/{id}")).await;
            }
        }
        let creds = self
            .get(&format!(
                "{KEYSTONE}/users/{}/application_credentials",
                self.user_id
            ))
            .await;
        for c in creds["application_credentials"].as_array().unwrap() {
            self.delete(&format!(
                "{KEYSTONE}/users/{}/application_credentials/{}",
                self.user_id,
                c["id"].as_str().unwrap()
            ))
            .await;
        }
    }
}

pub fn id(v: &Value, wrapper: &str) -> String {
    v[wrapper]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no {wrapper}.id in {v}"))
        .to_owned()
}

/// What the test built, by id.
#[derive(Debug, Default)]
pub struct Built {
    pub projects: BTreeSet<String>,
    pub networks: BTreeSet<String>,
    pub subnets: BTreeSet<String>,
    pub routers: BTreeSet<String>,
    pub floatingips: BTreeSet<String>,
    /// Ports created directly or returned by `add_router_interface`.
    pub ports: BTreeSet<String>,
    pub public: String,
    pub shared: String,
    pub router_a: String,
    pub router_b: String,
    pub vm_a1: String,
    pub fip_bound: String,
    pub project_a: String,
    pub project_b: String,
}

#[expect(
    clippy::too_many_lines,
    reason = "the topology reads best as one script"
)]
pub async fn build(admin: &Admin) -> Built {
    let mut b = Built::default();
    for name in ["lt-tenant-a", "lt-tenant-b"] {
        let p = admin
            .post(
                &format!("{KEYSTONE}/projects"),
                json!({"project": {"name": name, "domain_id": "default"}}),
            )
            .await;
        b.projects.insert(id(&p, "project"));
    }
    let projects: Vec<String> = b.projects.iter().cloned().collect();
    let (pa, pb) = {
        let all = admin.get(&format!("{KEYSTONE}/projects")).await;
        let find = |n: &str| {
            all["projects"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["name"] == n)
                .unwrap()["id"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        (find("lt-tenant-a"), find("lt-tenant-b"))
    };
    assert!(projects.contains(&pa) && projects.contains(&pb));
    b.project_a = pa.clone();
    b.project_b = pb.clone();

    let net = |body: Value| async move {
        id(
            &admin
                .post(&format!("{NEUTRON}/networks"), json!({"network": body}))
                .await,
            "network",
        )
    };
    b.public = net(json!({"name": "lt-public", "router:external": true,
        "provider:network_type": "flat", "provider:physical_network": "public"}))
    .await;
    b.shared = net(json!({"name": "lt-shared", "shared": true})).await;
    let net_a = net(json!({"name": "lt-a", "project_id": pa})).await;
    let net_b = net(json!({"name": "lt-b", "project_id": pb})).await;
    b.networks.extend([
        b.public.clone(),
        b.shared.clone(),
        net_a.clone(),
        net_b.clone(),
    ]);

    let subnet = |network: String, project: Option<String>, cidr: &'static str, v: u8| async move {
        let mut body =
            json!({"network_id": network, "cidr": cidr, "ip_version": v, "enable_dhcp": false});
        if let Some(p) = project {
            body["project_id"] = json!(p);
        }
        id(
            &admin
                .post(&format!("{NEUTRON}/subnets"), json!({"subnet": body}))
                .await,
            "subnet",
        )
    };
    let pub4 = subnet(b.public.clone(), None, "203.0.113.0/24", 4).await;
    let pub6 = subnet(b.public.clone(), None, "2001:db8:ff::/64", 6).await;
    let shared4 = subnet(b.shared.clone(), None, "10.50.0.0/24", 4).await;
    let a4 = subnet(net_a.clone(), Some(pa.clone()), "10.1.0.0/24", 4).await;
    let a6 = subnet(net_a.clone(), Some(pa.clone()), "2001:db8:a::/64", 6).await;
    let b4 = subnet(net_b.clone(), Some(pb.clone()), "10.2.0.0/24", 4).await;
    b.subnets.extend([
        pub4.clone(),
        pub6,
        shared4.clone(),
        a4.clone(),
        a6.clone(),
        b4.clone(),
    ]);

    let port = |body: Value| async move {
        id(
            &admin
                .post(&format!("{NEUTRON}/ports"), json!({"port": body}))
                .await,
            "port",
        )
    };
    let router = |name: &str, project: &str| {
        let body = json!({"router": {"name": name, "project_id": project,
            "external_gateway_info": {"network_id": b.public}}});
        async move {
            id(
                &admin.post(&format!("{NEUTRON}/routers"), body).await,
                "router",
            )
        }
    };
    b.router_a = router("lt-router-a", &pa).await;
    b.router_b = router("lt-router-b", &pb).await;
    b.routers.extend([b.router_a.clone(), b.router_b.clone()]);

    let add_if = |router: String, body: Value| async move {
        let r = admin
            .put(
                &format!("{NEUTRON}/routers/{router}/add_router_interface"),
                body,
            )
            .await;
        r["port_id"].as_str().unwrap().to_owned()
    };
    b.ports
        .insert(add_if(b.router_a.clone(), json!({"subnet_id": a4})).await);
    b.ports
        .insert(add_if(b.router_a.clone(), json!({"subnet_id": a6})).await);
    b.ports
        .insert(add_if(b.router_b.clone(), json!({"subnet_id": b4})).await);
    // Each tenant's router also sits on the shared network at a fixed address.
    for (router, project, ip) in [
        (&b.router_a, &pa, "10.50.0.10"),
        (&b.router_b, &pb, "10.50.0.20"),
    ] {
        let p = port(json!({"network_id": b.shared, "project_id": project,
            "fixed_ips": [{"subnet_id": shared4, "ip_address": ip}]}))
        .await;
        b.ports
            .insert(add_if(router.clone(), json!({"port_id": p})).await);
    }

    b.vm_a1 = port(json!({"name": "lt-vm-a1", "network_id": net_a, "project_id": pa,
        "mac_address": "fa:16:3e:a1:00:01", "device_id": "5e7a1c1e-0000-4000-8000-0000000000a1",
        "device_owner": "compute:nova",
        "fixed_ips": [{"subnet_id": a4, "ip_address": "10.1.0.5"}],
        "allowed_address_pairs": [{"ip_address": "10.1.0.100", "mac_address": "fa:16:3e:a1:0f:0f"}]})).await;
    b.ports.insert(b.vm_a1.clone());
    b.ports.insert(
        port(
            json!({"name": "lt-vm-a2", "network_id": net_a, "project_id": pa,
        "mac_address": "fa:16:3e:a1:00:02", "device_id": "5e7a1c1e-0000-4000-8000-0000000000a2",
        "device_owner": "compute:az1", "fixed_ips": [{"subnet_id": a4, "ip_address": "10.1.0.6"}]}),
        )
        .await,
    );
    b.ports.insert(port(json!({"name": "lt-vm-a1-shared", "network_id": b.shared, "project_id": pa,
        "mac_address": "fa:16:3e:a1:00:03", "device_id": "5e7a1c1e-0000-4000-8000-0000000000a1",
        "device_owner": "compute:nova", "fixed_ips": [{"subnet_id": shared4, "ip_address": "10.50.0.31"}]})).await);
    b.ports.insert(port(json!({"name": "lt-vm-b1", "network_id": net_b, "project_id": pb,
        "mac_address": "fa:16:3e:b1:00:01", "device_id": "5e7a1c1e-0000-4000-8000-0000000000b1",
        "device_owner": "compute:nova", "fixed_ips": [{"subnet_id": b4, "ip_address": "10.2.0.5"}]})).await);

    // Extra routes: through the other tenant's router, and through a VM.
    admin
        .put(
            &format!("{NEUTRON}/routers/{}", b.router_a),
            json!({"router": {"routes": [
            {"destination": "10.2.0.0/24", "nexthop": "10.50.0.20"},
            {"destination": "192.168.77.0/24", "nexthop": "10.1.0.5"}]}}),
        )
        .await;

    let fip = |body: Value| async move {
        id(
            &admin
                .post(
                    &format!("{NEUTRON}/floatingips"),
                    json!({"floatingip": body}),
                )
                .await,
            "floatingip",
        )
    };
    b.fip_bound =
        fip(json!({"floating_network_id": b.public, "project_id": pa, "port_id": b.vm_a1})).await;
    let fip_free = fip(json!({"floating_network_id": b.public, "project_id": pb})).await;
    b.floatingips.extend([b.fip_bound.clone(), fip_free]);
    b
}
