//! A generated cloud at the sizes of DESIGN §16 — 20 000 ports, 5 000
//! subnets, 2 000 routers — the one topology every benchmark uses (plan,
//! sync, reconcile, agent), so their figures describe the same cloud.
//! Feature `generate`; never part of the `lachesis` binary.
//!
//! Shape: 500 projects; two external networks (`public-0`
//! 203.0.112.0/20, `public-1` 198.18.0.0/15); four shared transit networks
//! (100.64–67.0.0/16); 4 995 tenant subnets, every fifth one IPv6. Router
//! `r` belongs to project `2r`, has a gateway on `public-0`, interfaces on
//! tenant subnets `2r` and `2r + 1` and on transit `r % 4`, and two extra
//! routes: to the tenant subnet of the router four places on, through that
//! router's transit address (IPv4 only), and to a range behind a VM
//! appliance on its own first subnet. One DHCP port per router's first
//! subnet, 10 000 VM ports (each a Nova server) spread over the tenant
//! subnets, a floating IP on every fifth VM.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use lachesis_planner::{ApiBodies, OptionalBody, Resource};

use crate::store::{MutationError, Store};
use crate::topology::{
    AppCredential, FixedIp, FloatingIp, Gateway, Network, Port, Project, Route, Router, Server,
    Subnet, Topology, User,
};

/// Keystone projects.
pub const PROJECTS: usize = 500;
/// Subnets, external ones aside from the second (`public-1`).
pub const SUBNETS: usize = 5_000;
/// Routers, each with a gateway, three interfaces and extra routes.
pub const ROUTERS: usize = 2_000;
/// VM ports, one Nova server each.
pub const VMS: usize = 10_000;
/// Every port: VMs, router interfaces and gateways, DHCP.
pub const PORTS: usize = 20_000;
/// Shared transit networks between routers.
const TRANSITS: usize = 4;
/// Tenant subnets are `0..TENANT_SUBNETS`; the rest are transit and external.
const TENANT_SUBNETS: usize = SUBNETS - TRANSITS - 1;
/// External networks (`public-0`, `public-1`).
pub const EXTERNALS: usize = 2;

/// The application credential the generated cloud accepts (scoped to the
/// first project, which plays admin).
pub const APP_CREDENTIAL_ID: &str = "ac-bench";
/// Its secret.
pub const APP_CREDENTIAL_SECRET: &str = "bench-secret";

/// Project `i`'s id (32 hex digits, as Keystone's).
#[must_use]
pub fn project(i: usize) -> String {
    format!("{:032x}", 0xa000_0000_u128 + (i % PROJECTS) as u128)
}

fn uuid(kind: u32, i: usize) -> String {
    // The index leads: Nova names a tap after an id's first 11 characters,
    // so ids that differ only at the end would all claim one tap name
    // (planner anomaly tap_name_collision), as no real Neutron's would.
    format!("{i:08x}-{kind:04x}-4000-8000-{i:012x}")
}

fn mac(kind: u8, i: usize) -> String {
    format!(
        "fa:16:3e:{kind:02x}:{:02x}:{:02x}",
        (i >> 8) & 0xff,
        i & 0xff
    )
}

/// Tenant subnet `k`: IPv4 `10.x.y.0/24`, every fifth one IPv6 `2001:db8:k::/64`.
fn tenant_base(k: usize) -> (IpAddr, u8) {
    if k % 5 == 4 {
        (
            IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, k as u16, 0, 0, 0, 0, 0)),
            64,
        )
    } else {
        (
            IpAddr::V4(Ipv4Addr::new(10, (k / 256) as u8, (k % 256) as u8, 0)),
            24,
        )
    }
}

fn host(base: IpAddr, n: u32) -> IpAddr {
    match base {
        IpAddr::V4(a) => IpAddr::V4(Ipv4Addr::from(u32::from(a) + n)),
        IpAddr::V6(a) => IpAddr::V6(Ipv6Addr::from(u128::from(a) + u128::from(n))),
    }
}

fn transit_addr(r: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(
        u32::from(Ipv4Addr::new(100, 64 + (r % TRANSITS) as u8, 0, 0)) + 1 + r as u32,
    ))
}

fn network_id(k: usize) -> String {
    uuid(1, k)
}

fn subnet_id(k: usize) -> String {
    uuid(2, k)
}

/// Ids of external network `e` and its subnet.
fn external(e: usize) -> (String, String) {
    (network_id(900_000 + e), subnet_id(900_000 + e))
}

/// Router `r`'s id.
#[must_use]
pub fn router_id(r: usize) -> String {
    uuid(3, r)
}

#[expect(
    clippy::too_many_arguments,
    reason = "one positional argument per port field reads best in a generator"
)]
fn port(
    id: String,
    network: String,
    project: String,
    mac: String,
    owner: &str,
    device: String,
    subnet: String,
    ip: IpAddr,
) -> Port {
    Port {
        id,
        name: String::new(),
        network_id: network,
        project_id: project,
        mac_address: mac,
        device_id: device,
        device_owner: owner.to_owned(),
        fixed_ips: vec![FixedIp {
            subnet_id: subnet,
            ip_address: ip.to_string(),
        }],
        allowed_address_pairs: Vec::new(),
    }
}

/// A route of router `r` to `v4` or `v6` (the family of its first
/// subnet) through the VM appliance at `.10` on that subnet.
fn via_appliance(r: usize, v4: String, v6: String) -> Route {
    let (own, _) = tenant_base(2 * r);
    Route {
        destination: if own.is_ipv4() { v4 } else { v6 },
        nexthop: host(own, 10).to_string(),
    }
}

/// Router `r`'s route to a range behind a VM appliance on its own first
/// subnet.
#[must_use]
pub fn appliance_route(r: usize) -> Route {
    via_appliance(
        r,
        format!("192.168.{}.0/24", r % 256),
        format!("2001:db8:ffff:{r:x}::/64"),
    )
}

/// A route router `r` does not hold: another range behind the same
/// appliance (a one-router change for the benchmarks).
#[must_use]
pub fn extra_route(r: usize) -> Route {
    via_appliance(
        r,
        format!("172.{}.{}.0/24", 16 + r / 256, r % 256),
        format!("2001:db8:fffe:{r:x}::/64"),
    )
}

/// Router `r` with its gateway on external network `e` (0 or 1), and that
/// gateway's port (same id on either network).
#[must_use]
pub fn router(r: usize, e: usize) -> (Router, Port) {
    assert!(e < EXTERNALS, "external network {e} of {EXTERNALS}");
    let id = router_id(r);
    let gw_ip = if e == 0 {
        IpAddr::V4(Ipv4Addr::from(
            u32::from(Ipv4Addr::new(203, 0, 112, 10)) + r as u32,
        ))
    } else {
        IpAddr::V4(Ipv4Addr::from(
            u32::from(Ipv4Addr::new(198, 18, 0, 10)) + r as u32,
        ))
    };
    let (ext_net, ext_sub) = external(e);
    let peer = (r + TRANSITS) % ROUTERS;
    let (peer_base, peer_bits) = tenant_base(2 * peer);
    let mut extra = Vec::new();
    if peer_base.is_ipv4() {
        extra.push(Route {
            destination: format!("{peer_base}/{peer_bits}"),
            nexthop: transit_addr(peer).to_string(),
        });
    }
    extra.push(appliance_route(r));
    let router = Router {
        id: id.clone(),
        name: format!("router-{r}"),
        project_id: project(2 * r),
        external_gateway_info: Some(Gateway {
            network_id: ext_net.clone(),
            enable_snat: true,
            external_fixed_ips: vec![FixedIp {
                subnet_id: ext_sub.clone(),
                ip_address: gw_ip.to_string(),
            }],
        }),
        routes: extra,
    };
    // Neutron shows no project on an admin-created gateway port.
    let gateway = port(
        uuid(4, 3 * ROUTERS + r),
        ext_net,
        String::new(),
        mac(0xe0, r),
        "network:router_gateway",
        id,
        ext_sub,
        gw_ip,
    );
    (router, gateway)
}

/// VM port `i` (its server is `vm-i`, id its `device_id`).
#[must_use]
pub fn vm_port(i: usize) -> Port {
    let k = i % TENANT_SUBNETS;
    let (base, _) = tenant_base(k);
    port(
        uuid(6, i),
        network_id(k),
        project(k),
        mac(0x10 + (i >> 16) as u8, i),
        "compute:nova",
        uuid(7, i),
        subnet_id(k),
        host(base, 10 + (i / TENANT_SUBNETS) as u32),
    )
}

fn networks_and_subnets(t: &mut Topology) {
    let admin = project(0);
    let externals = [
        ("203.0.112.0/20", "203.0.112.1"),
        ("198.18.0.0/15", "198.18.0.1"),
    ];
    for (e, (cidr, gw)) in externals.into_iter().enumerate() {
        let (net, sub) = external(e);
        t.networks.push(Network {
            id: net.clone(),
            name: format!("public-{e}"),
            project_id: admin.clone(),
            shared: false,
            external: true,
        });
        t.subnets
            .push(subnet(sub, net, &admin, cidr, Some(gw.to_owned())));
    }
    for tr in 0..TRANSITS {
        let (net, sub) = (network_id(800_000 + tr), subnet_id(800_000 + tr));
        t.networks.push(Network {
            id: net.clone(),
            name: format!("transit-{tr}"),
            project_id: admin.clone(),
            shared: true,
            external: false,
        });
        let cidr = format!("100.{}.0.0/16", 64 + tr);
        t.subnets.push(subnet(sub, net, &admin, &cidr, None));
    }
    for k in 0..TENANT_SUBNETS {
        let (base, len) = tenant_base(k);
        t.networks.push(Network {
            id: network_id(k),
            name: format!("net-{k}"),
            project_id: project(k),
            shared: false,
            external: false,
        });
        let gw = Some(host(base, 1).to_string());
        t.subnets.push(subnet(
            subnet_id(k),
            network_id(k),
            &project(k),
            &format!("{base}/{len}"),
            gw,
        ));
    }
}

fn subnet(id: String, network: String, project: &str, cidr: &str, gw: Option<String>) -> Subnet {
    Subnet {
        id,
        name: String::new(),
        network_id: network,
        project_id: project.to_owned(),
        cidr: cidr.to_owned(),
        gateway_ip: gw,
        enable_dhcp: true,
    }
}

fn routers(t: &mut Topology) {
    for r in 0..ROUTERS {
        let (router, gateway) = router(r, 0);
        t.ports.push(gateway);
        for (n, k) in [2 * r, 2 * r + 1].into_iter().enumerate() {
            let (base, _) = tenant_base(k);
            t.ports.push(port(
                uuid(4, 3 * r + n),
                network_id(k),
                router.project_id.clone(),
                mac(0xa0 + n as u8, r),
                "network:router_interface",
                router.id.clone(),
                subnet_id(k),
                host(base, 1),
            ));
        }
        let tr = r % TRANSITS;
        t.ports.push(port(
            uuid(4, 3 * r + 2),
            network_id(800_000 + tr),
            router.project_id.clone(),
            mac(0xa2, r),
            "network:router_interface",
            router.id.clone(),
            subnet_id(800_000 + tr),
            transit_addr(r),
        ));
        t.routers.push(router);
    }
    for d in 0..ROUTERS {
        let k = 2 * d;
        let (base, _) = tenant_base(k);
        t.ports.push(port(
            uuid(5, d),
            network_id(k),
            project(k),
            mac(0xd0, d),
            "network:dhcp",
            "dhcp-agent".to_owned(),
            subnet_id(k),
            host(base, 2),
        ));
    }
}

fn vms(t: &mut Topology) {
    let (public, _) = external(0);
    let first_fip = u32::from(Ipv4Addr::new(203, 0, 120, 0));
    for i in 0..VMS {
        let p = vm_port(i);
        t.servers.push(Server {
            id: p.device_id.clone(),
            name: format!("vm-{i}"),
            tenant_id: p.project_id.clone(),
            status: "ACTIVE".to_owned(),
            availability_zone: "nova".to_owned(),
        });
        if i % 5 == 0 {
            t.floatingips.push(FloatingIp {
                id: uuid(8, i),
                project_id: p.project_id.clone(),
                floating_network_id: public.clone(),
                floating_ip_address: Ipv4Addr::from(first_fip + (i / 5) as u32).to_string(),
                port_id: Some(p.id.clone()),
                fixed_ip_address: None,
                router_id: None,
            });
        }
        t.ports.push(p);
    }
}

/// The whole cloud (module doc). Whole lists are served unless the
/// caller sets `settings.page_size`.
#[must_use]
pub fn large() -> Topology {
    let mut t = Topology {
        projects: (0..PROJECTS)
            .map(|i| Project {
                id: project(i),
                name: format!("p{i}"),
                domain_id: "default".to_owned(),
                description: String::new(),
            })
            .collect(),
        users: vec![User {
            id: "u-bench".to_owned(),
            name: "admin".to_owned(),
            domain_id: "default".to_owned(),
            password: APP_CREDENTIAL_SECRET.to_owned(),
        }],
        application_credentials: vec![AppCredential {
            id: APP_CREDENTIAL_ID.to_owned(),
            name: "bench".to_owned(),
            user_id: "u-bench".to_owned(),
            project_id: project(0),
            secret: APP_CREDENTIAL_SECRET.to_owned(),
        }],
        ..Topology::default()
    };
    networks_and_subnets(&mut t);
    routers(&mut t);
    vms(&mut t);
    t
}

/// Moves router `r`'s gateway (the router's `external_gateway_info` and
/// its gateway port) to external network `e`, as one re-gateway in
/// Neutron would.
pub fn regateway(store: &mut Store, r: usize, e: usize) -> Result<(), MutationError> {
    let (router, gateway) = router(r, e);
    store.replace("routers", &router.id, to_value(&router))?;
    store.replace("ports", &gateway.id, to_value(&gateway))?;
    Ok(())
}

fn to_value(v: &impl serde::Serialize) -> serde_json::Value {
    serde_json::to_value(v).expect("topology types serialize")
}

/// Every list of DESIGN §5 as the services answer it unpaged (admin token,
/// `all_tenants`), rendered in-process: the planner's input without a
/// client or a socket. Octavia's lists are `NotDeployed` when the catalog
/// lacks `load-balancer`, as the client reports them.
#[must_use]
pub fn bodies(store: &Store) -> ApiBodies {
    let list = |r: Resource| crate::render::unpaged(store, r);
    let optional = |r: Resource, service: &str| {
        if store.settings.services.iter().any(|s| s == service) {
            OptionalBody::Fetched(list(r))
        } else {
            OptionalBody::NotDeployed
        }
    };
    ApiBodies {
        networks: list(Resource::Networks),
        subnets: list(Resource::Subnets),
        ports: list(Resource::Ports),
        routers: list(Resource::Routers),
        floatingips: list(Resource::FloatingIps),
        projects: list(Resource::Projects),
        servers: optional(Resource::Servers, "compute"),
        loadbalancers: optional(Resource::LoadBalancers, "load-balancer"),
        amphorae: optional(Resource::Amphorae, "load-balancer"),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use lachesis_planner::{parse_snapshot, plan, PlanOptions};

    use super::*;

    #[test]
    fn the_cloud_has_the_documented_sizes_and_the_simulator_accepts_it() {
        let t = large();
        assert_eq!(t.ports.len(), PORTS);
        assert_eq!(t.subnets.len(), SUBNETS + 1, "plus the second external");
        assert_eq!(t.routers.len(), ROUTERS);
        assert_eq!(t.servers.len(), VMS);
        assert_eq!(t.projects.len(), PROJECTS);
        let macs: BTreeSet<&str> = t.ports.iter().map(|p| p.mac_address.as_str()).collect();
        assert_eq!(macs.len(), PORTS, "every port has its own MAC");
        let fips: BTreeSet<&str> = t
            .floatingips
            .iter()
            .map(|f| f.floating_ip_address.as_str())
            .collect();
        assert_eq!(fips.len(), VMS / 5, "every floating address is distinct");
        Store::from_topology(&t).expect("the simulator accepts the generated cloud");
    }

    #[test]
    fn the_rendered_lists_parse_whole_and_plan_every_vm() {
        let store = Store::from_topology(&large()).unwrap();
        let (snapshot, report) = parse_snapshot(&bodies(&store)).unwrap();
        assert!(report.is_empty(), "{:?}", report.skipped.first());
        assert_eq!(snapshot.ports.len(), PORTS);
        assert_eq!(snapshot.servers.as_ref().map(Vec::len), Some(VMS));
        let p = plan(&snapshot, &PlanOptions::default());
        assert_eq!(
            p.bindings.len(),
            VMS,
            "VM ports are bound, platform ports not"
        );
        assert!(p.anomalies.is_empty(), "{:?}", p.anomalies.first());
    }

    #[test]
    fn a_regateway_and_back_restores_the_cloud() {
        let mut store = Store::from_topology(&large()).unwrap();
        let before = bodies(&store);
        regateway(&mut store, 7, 1).unwrap();
        let moved = bodies(&store);
        assert_ne!(moved.routers, before.routers);
        assert_ne!(moved.ports, before.ports);
        let r = &store.routers[&router_id(7)];
        let (public1, _) = external(1);
        assert_eq!(
            r.external_gateway_info.as_ref().unwrap().network_id,
            public1
        );
        regateway(&mut store, 7, 0).unwrap();
        // The same cloud, two revisions on: each move changed the router.
        assert_eq!(
            store.meta(Resource::Routers, &router_id(7)).revision_number,
            3
        );
        assert_eq!(without_history(bodies(&store)), without_history(before));
    }

    /// The bodies without what only records history (`revision_number`).
    /// The fixed clock did not move, so the stamps are compared too.
    fn without_history(mut b: ApiBodies) -> ApiBodies {
        for list in [&mut b.routers, &mut b.ports] {
            for item in list.as_object_mut().unwrap().values_mut() {
                for x in item.as_array_mut().unwrap() {
                    x.as_object_mut().unwrap().remove("revision_number");
                }
            }
        }
        b
    }

    #[test]
    fn the_extra_route_is_new_and_on_the_appliance() {
        for r in [0, 2, 7] {
            let (router, _) = router(r, 0);
            let extra = extra_route(r);
            assert!(!router.routes.contains(&extra));
            assert_eq!(extra.nexthop, appliance_route(r).nexthop);
        }
    }
}
