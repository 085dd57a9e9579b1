//! A small builder of API response bodies (the real Neutron/Keystone/Octavia
//! shapes) so each test reads as a topology, plus an LPM that mimics the
//! kernel's lookup order as independent truth.

use std::net::IpAddr;

use lachesis_planner::{
    parse_snapshot, plan_with_previous, ApiBodies, OptionalBody, Plan, PlanOptions, Prefix, Scope,
    Snapshot,
};
use serde_json::{json, Value};

#[derive(Default)]
pub struct Cloud {
    pub networks: Vec<Value>,
    pub subnets: Vec<Value>,
    pub ports: Vec<Value>,
    pub routers: Vec<Value>,
    pub fips: Vec<Value>,
    pub projects: Vec<Value>,
    pub lbs: Option<Vec<Value>>,
    pub amphorae: Option<Vec<Value>>,
    /// Both Octavia fetches fail (the lists above are then not sent).
    pub octavia_failed: bool,
}

impl Cloud {
    pub fn projects(&mut self, ids: &[&str]) -> &mut Self {
        for id in ids {
            self.projects.push(json!({"id": id, "name": format!("name-{id}"), "domain_id": "default", "enabled": true}));
        }
        self
    }

    fn net(
        &mut self,
        id: &str,
        name: &str,
        project: &str,
        shared: bool,
        external: bool,
    ) -> &mut Self {
        self.networks.push(json!({
            "id": id, "name": name, "project_id": project, "tenant_id": project,
            "shared": shared, "router:external": external, "status": "ACTIVE", "mtu": 1450
        }));
        self
    }

    pub fn network(&mut self, id: &str, project: &str) -> &mut Self {
        self.net(id, id, project, false, false)
    }

    pub fn shared_network(&mut self, id: &str, project: &str) -> &mut Self {
        self.net(id, id, project, true, false)
    }

    pub fn external_network(&mut self, id: &str, name: &str) -> &mut Self {
        self.net(id, name, "admin", false, true)
    }

    /// A subnet; the owner is the network's (Neutron requires it for tenants).
    pub fn subnet(
        &mut self,
        id: &str,
        network: &str,
        cidr: &str,
        gateway: Option<&str>,
    ) -> &mut Self {
        let project = self
            .networks
            .iter()
            .find(|n| n["id"] == network)
            .map(|n| n["project_id"].as_str().unwrap().to_owned())
            .unwrap_or_default();
        let v = if cidr.contains(':') { 6 } else { 4 };
        self.subnets.push(json!({
            "id": id, "network_id": network, "project_id": project, "cidr": cidr,
            "gateway_ip": gateway, "ip_version": v, "enable_dhcp": true
        }));
        self
    }

    fn network_of_subnet(&self, subnet: &str) -> String {
        self.subnets.iter().find(|s| s["id"] == subnet).map_or_else(
            || panic!("test topology: unknown subnet {subnet}"),
            |s| s["network_id"].as_str().unwrap().to_owned(),
        )
    }

    /// A port with one address per (subnet, ip).
    pub fn port(
        &mut self,
        id: &str,
        project: &str,
        mac: &str,
        owner: &str,
        device: &str,
        ips: &[(&str, &str)],
    ) -> &mut Value {
        let network = self.network_of_subnet(ips[0].0);
        let fixed: Vec<Value> = ips
            .iter()
            .map(|(s, ip)| json!({"subnet_id": s, "ip_address": ip}))
            .collect();
        self.ports.push(json!({
            "id": id, "network_id": network, "project_id": project, "tenant_id": project,
            "mac_address": mac, "device_owner": owner, "device_id": device,
            "fixed_ips": fixed, "allowed_address_pairs": [], "status": "ACTIVE",
            "binding:host_id": "compute-1"
        }));
        self.ports.last_mut().unwrap()
    }

    pub fn vm(
        &mut self,
        id: &str,
        project: &str,
        mac: &str,
        server: &str,
        subnet: &str,
        ip: &str,
    ) -> &mut Value {
        self.port(id, project, mac, "compute:nova", server, &[(subnet, ip)])
    }

    /// A VM appliance (NAT box, firewall, VPN) of `project` on `subnet`:
    /// what a static route's nexthop points at. Its ids and MAC derive from
    /// the port count, so each call makes a distinct port.
    pub fn appliance(&mut self, project: &str, subnet: &str, ip: &str) -> &mut Value {
        let n = self.ports.len();
        let mac = format!("fa:16:3e:ee:{:02x}:{:02x}", n / 256, n % 256);
        self.vm(
            &format!("appliance-{n}"),
            project,
            &mac,
            &format!("srv-appliance-{n}"),
            subnet,
            ip,
        )
    }

    pub fn router(
        &mut self,
        id: &str,
        project: &str,
        gateway: Option<(&str, &str, &str)>,
        routes: &[(&str, &str)],
    ) -> &mut Self {
        let routes: Vec<Value> = routes
            .iter()
            .map(|(d, n)| json!({"destination": d, "nexthop": n}))
            .collect();
        let gw = gateway.map(|(net, subnet, ip)| {
            json!({"network_id": net, "enable_snat": true,
                   "external_fixed_ips": [{"subnet_id": subnet, "ip_address": ip}]})
        });
        self.routers.push(json!({
            "id": id, "name": id, "project_id": project, "tenant_id": project,
            "external_gateway_info": gw, "routes": routes, "status": "ACTIVE",
            "admin_state_up": true, "distributed": false, "ha": false
        }));
        if let Some((_, subnet, ip)) = gateway {
            let mac = format!(
                "fa:16:3e:ff:{:02x}:{:02x}",
                self.ports.len() / 256,
                self.ports.len() % 256
            );
            self.port(
                &format!("{id}-gw"),
                "",
                &mac,
                "network:router_gateway",
                id,
                &[(subnet, ip)],
            );
        }
        self
    }

    /// A router interface port on `subnet` holding `ip`.
    pub fn iface(&mut self, router: &str, mac: &str, subnet: &str, ip: &str) -> &mut Self {
        let project = self
            .routers
            .iter()
            .find(|r| r["id"] == router)
            .map(|r| r["project_id"].as_str().unwrap().to_owned())
            .unwrap_or_default();
        let id = format!("{router}-if-{subnet}");
        self.port(
            &id,
            &project,
            mac,
            "network:router_interface",
            router,
            &[(subnet, ip)],
        );
        self
    }

    pub fn fip(&mut self, id: &str, network: &str, port: &str, fixed: &str) -> &mut Self {
        self.fips.push(json!({
            "id": id, "floating_network_id": network, "port_id": port, "fixed_ip_address": fixed,
            "floating_ip_address": "198.51.100.99", "project_id": "x", "status": "ACTIVE"
        }));
        self
    }

    fn optional(&self, list: Option<&Vec<Value>>, key: &str) -> OptionalBody {
        match list {
            _ if self.octavia_failed => OptionalBody::Failed,
            Some(l) => OptionalBody::Fetched(json!({ key: l })),
            None => OptionalBody::NotDeployed,
        }
    }

    pub fn bodies(&self) -> ApiBodies {
        ApiBodies {
            networks: json!({ "networks": self.networks }),
            subnets: json!({ "subnets": self.subnets }),
            ports: json!({ "ports": self.ports }),
            routers: json!({ "routers": self.routers }),
            floatingips: json!({ "floatingips": self.fips }),
            projects: json!({ "projects": self.projects, "links": {"self": "x", "next": null} }),
            servers: OptionalBody::NotDeployed,
            loadbalancers: self.optional(self.lbs.as_ref(), "loadbalancers"),
            amphorae: self.optional(self.amphorae.as_ref(), "amphorae"),
        }
    }

    pub fn plan_with(&self, options: PlanOptions) -> Plan {
        plan_with_previous(&self.snapshot(), &options, None)
    }

    /// A reconcile pass: planned with the last committed plan at hand.
    pub fn plan_after(&self, previous: &Plan) -> Plan {
        plan_with_previous(&self.snapshot(), &PlanOptions::default(), Some(previous))
    }

    fn snapshot(&self) -> Snapshot {
        let (snap, report) = parse_snapshot(&self.bodies()).expect("well-formed bodies");
        assert!(
            report.is_empty(),
            "test topology has malformed entries: {:?}",
            report.skipped
        );
        snap
    }

    pub fn plan(&self) -> Plan {
        self.plan_with(PlanOptions::default())
    }
}

/// The global rows every plan has: catch-alls and the metadata addresses.
pub const GLOBAL_BASE: [&str; 4] = [
    "* 0.0.0.0/0 external",
    "* ::/0 external",
    "* 169.254.169.254/32 infra",
    "* fe80::a9fe:a9fe/128 infra",
];

/// [`GLOBAL_BASE`] followed by `rows`.
pub fn with_base(rows: &[&'static str]) -> Vec<&'static str> {
    GLOBAL_BASE
        .iter()
        .copied()
        .chain(rows.iter().copied())
        .collect()
}

/// Two routers on one shared transit network, each owning a subnet.
pub fn pair() -> Cloud {
    let mut c = Cloud::default();
    c.projects(&["t1", "t2", "t3", "admin"]);
    c.shared_network("tr", "admin")
        .subnet("tr-s", "tr", "100.64.0.0/24", None);
    c.network("n1", "t1")
        .subnet("s1", "n1", "10.1.0.0/24", Some("10.1.0.1"));
    c.network("n2", "t2")
        .subnet("s2", "n2", "10.2.0.0/24", Some("10.2.0.1"));
    c
}

pub fn wire_pair(c: &mut Cloud, r1_routes: &[(&str, &str)], r2_routes: &[(&str, &str)]) {
    c.router("R1", "t1", None, r1_routes);
    c.router("R2", "t2", None, r2_routes);
    c.iface("R1", "fa:16:3e:00:01:01", "s1", "10.1.0.1");
    c.iface("R1", "fa:16:3e:00:01:02", "tr-s", "100.64.0.1");
    c.iface("R2", "fa:16:3e:00:02:01", "s2", "10.2.0.1");
    c.iface("R2", "fa:16:3e:00:02:02", "tr-s", "100.64.0.2");
}

pub const PAIR_GLOBAL: [&str; 5] = [
    "* 100.64.0.0/24 shared",
    "* 10.1.0.1/32 infra",
    "* 10.2.0.1/32 infra",
    "* 100.64.0.1/32 infra",
    "* 100.64.0.2/32 infra",
];

pub const PAIR_OWNED: [&str; 4] = [
    "t1 10.1.0.0/24 same_tenant",
    "t1 10.1.0.1/32 infra",
    "t2 10.2.0.0/24 same_tenant",
    "t2 10.2.0.1/32 infra",
];

pub fn pair_rows(extra: &[&'static str]) -> Vec<&'static str> {
    let mut v = with_base(&PAIR_GLOBAL);
    v.extend(PAIR_OWNED);
    v.extend(extra);
    v
}

/// Every trie row as "tenant prefix zone".
pub fn rows(plan: &Plan) -> Vec<String> {
    plan.trie
        .iter()
        .map(|r| format!("{} {} {}", r.tenant, r.prefix, r.zone))
        .collect()
}

/// Asserts the full row set, order-insensitively for readability of the
/// expectation, and separately that the plan's own order is sorted.
pub fn assert_rows(plan: &Plan, expected: &[&str]) {
    let mut got = rows(plan);
    let mut want: Vec<String> = expected.iter().map(|s| (*s).to_owned()).collect();
    got.sort();
    want.sort();
    let missing: Vec<&String> = want.iter().filter(|w| !got.contains(w)).collect();
    let extra: Vec<&String> = got.iter().filter(|g| !want.contains(g)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "trie rows differ\nmissing: {missing:#?}\nextra: {extra:#?}"
    );
    let keys: Vec<(Scope, Prefix)> = plan
        .trie
        .iter()
        .map(|r| (r.tenant.clone(), r.prefix))
        .collect();
    assert!(
        keys.windows(2).all(|w| w[0] < w[1]),
        "trie not sorted/unique"
    );
}

/// The kernel's classification of a routed remote address (DESIGN §4.2 step
/// 5): longest prefix among the VM tenant's rows, else among global rows.
pub fn lpm(plan: &Plan, tenant: &str, addr: &str) -> Option<String> {
    let addr: IpAddr = addr.parse().unwrap();
    let best = |scope: &Scope| {
        plan.trie
            .iter()
            .filter(|r| &r.tenant == scope && r.prefix.contains(addr))
            .max_by_key(|r| r.prefix.prefix_len())
            .map(|r| r.zone.label().to_owned())
    };
    best(&Scope::Tenant(tenant.to_owned())).or_else(|| best(&Scope::Global))
}

/// Fallback count of one reason label.
pub fn fallbacks(plan: &Plan, reason: &str) -> u64 {
    plan.route_fallbacks
        .iter()
        .find(|(r, _)| r.label() == reason)
        .map_or(0, |(_, n)| *n)
}

/// The fallback reasons with a non-zero count, in label order.
pub fn nonzero_fallbacks(plan: &Plan) -> Vec<(&'static str, u64)> {
    plan.route_fallbacks
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(r, n)| (r.label(), *n))
        .collect()
}

/// Anomaly class labels, one per anomaly.
pub fn anomaly_classes(plan: &Plan) -> Vec<&'static str> {
    plan.anomalies.iter().map(|a| a.class.label()).collect()
}
