//! Resources rendered exactly as the services list them: the fields the
//! agent reads plus the ones real responses carry, so a client tested here
//! meets no surprise on a real cloud.

use serde_json::{json, Value};

use super::revision::Meta;
use super::topology::{
    Amphora, FloatingIp, LoadBalancer, Network, Port, Project, Router, Server, Subnet,
};

/// 4 or 6, told by whether the text holds a colon: only for a CIDR or an
/// address already checked, such as a stored subnet's `cidr`.
#[must_use]
pub fn ip_version(cidr_or_ip: &str) -> u8 {
    if cidr_or_ip.contains(':') {
        6
    } else {
        4
    }
}

/// A network as `GET /v2.0/networks` lists it. `subnet_ids` are its
/// subnets' ids, which the store keeps on the subnets, not the network.
#[must_use]
pub fn network(n: &Network, subnet_ids: &[String], m: Meta) -> Value {
    json!({
        "id": n.id, "name": n.name, "project_id": n.project_id, "tenant_id": n.project_id,
        "shared": n.shared, "router:external": n.external, "status": "ACTIVE",
        "admin_state_up": true, "subnets": subnet_ids, "mtu": 1450,
        "availability_zone_hints": [], "availability_zones": ["nova"],
        "ipv4_address_scope": null, "ipv6_address_scope": null,
        "port_security_enabled": true, "description": "", "tags": [],
        "created_at": m.created_at.rfc3339(), "updated_at": m.updated_at.rfc3339(),
        "revision_number": m.revision_number, "is_default": false, "l2_adjacency": true, "qos_policy_id": null,
    })
}

/// A subnet as `GET /v2.0/subnets` lists it, `ip_version` from the `cidr`
/// and IPv6 subnets in SLAAC mode.
#[must_use]
pub fn subnet(s: &Subnet, m: Meta) -> Value {
    let v6 = ip_version(&s.cidr) == 6;
    json!({
        "id": s.id, "name": s.name, "network_id": s.network_id,
        "project_id": s.project_id, "tenant_id": s.project_id,
        "cidr": s.cidr, "gateway_ip": s.gateway_ip, "ip_version": ip_version(&s.cidr),
        "enable_dhcp": s.enable_dhcp, "allocation_pools": [], "dns_nameservers": [],
        "host_routes": [], "service_types": [], "dns_publish_fixed_ip": false, "segment_id": null, "subnetpool_id": null,
        "ipv6_ra_mode": if v6 { json!("slaac") } else { Value::Null },
        "ipv6_address_mode": if v6 { json!("slaac") } else { Value::Null },
        "description": "", "tags": [], "created_at": m.created_at.rfc3339(),
        "updated_at": m.updated_at.rfc3339(), "revision_number": m.revision_number,
    })
}

/// A port as `GET /v2.0/ports` lists it: a pair without a MAC shows the
/// port's own, and a port with no `device_owner` is `DOWN`.
#[must_use]
pub fn port(p: &Port, m: Meta) -> Value {
    let pairs: Vec<Value> = p
        .allowed_address_pairs
        .iter()
        .map(|a| json!({"ip_address": a.ip_address, "mac_address": a.mac_address.as_deref().unwrap_or(&p.mac_address)}))
        .collect();
    let fixed: Vec<Value> = p
        .fixed_ips
        .iter()
        .map(|f| json!({"subnet_id": f.subnet_id, "ip_address": f.ip_address}))
        .collect();
    json!({
        "id": p.id, "name": p.name, "network_id": p.network_id,
        "project_id": p.project_id, "tenant_id": p.project_id,
        "mac_address": p.mac_address, "device_id": p.device_id, "device_owner": p.device_owner,
        "fixed_ips": fixed, "allowed_address_pairs": pairs, "admin_state_up": true,
        "status": if p.device_owner.is_empty() { "DOWN" } else { "ACTIVE" },
        "binding:vnic_type": "normal", "security_groups": [], "extra_dhcp_opts": [],
        "port_security_enabled": true, "description": "", "tags": [],
        "created_at": m.created_at.rfc3339(), "updated_at": m.updated_at.rfc3339(),
        "revision_number": m.revision_number,
    })
}

/// A router as `GET /v2.0/routers` lists it (`external_gateway_info` null
/// when it has no gateway).
#[must_use]
pub fn router(r: &Router, m: Meta) -> Value {
    let gw = r.external_gateway_info.as_ref().map_or(Value::Null, |g| {
        json!({
            "network_id": g.network_id, "enable_snat": g.enable_snat,
            "external_fixed_ips": g.external_fixed_ips.iter()
                .map(|f| json!({"subnet_id": f.subnet_id, "ip_address": f.ip_address}))
                .collect::<Vec<_>>(),
        })
    });
    json!({
        "id": r.id, "name": r.name, "project_id": r.project_id, "tenant_id": r.project_id,
        "admin_state_up": true, "status": "ACTIVE", "external_gateway_info": gw,
        "routes": r.routes.iter().map(|x| json!({"destination": x.destination, "nexthop": x.nexthop})).collect::<Vec<_>>(),
        "availability_zone_hints": [], "availability_zones": ["nova"], "flavor_id": null,
        "distributed": false, "ha": false,
        "description": "", "tags": [], "created_at": m.created_at.rfc3339(),
        "updated_at": m.updated_at.rfc3339(), "revision_number": m.revision_number,
    })
}

/// A floating IP as `GET /v2.0/floatingips` lists it: `ACTIVE` when bound
/// to a port, `DOWN` when not.
#[must_use]
pub fn floatingip(f: &FloatingIp, m: Meta) -> Value {
    json!({
        "id": f.id, "project_id": f.project_id, "tenant_id": f.project_id,
        "floating_network_id": f.floating_network_id, "floating_ip_address": f.floating_ip_address,
        "port_id": f.port_id, "fixed_ip_address": f.fixed_ip_address, "router_id": f.router_id,
        "status": if f.port_id.is_some() { "ACTIVE" } else { "DOWN" },
        "description": "", "tags": [], "port_forwardings": [], "qos_policy_id": null,
        "dns_domain": "", "dns_name": "", "port_details": null,
        "created_at": m.created_at.rfc3339(), "updated_at": m.updated_at.rfc3339(),
        "revision_number": m.revision_number,
    })
}

/// A project as `GET /v3/projects` lists it; `base` is the identity
/// endpoint the `links.self` URL is built on.
#[must_use]
pub fn project(p: &Project, base: &str) -> Value {
    json!({
        "id": p.id, "name": p.name, "domain_id": p.domain_id, "description": p.description,
        "enabled": true, "is_domain": false, "parent_id": p.domain_id, "tags": [],
        "options": {}, "links": {"self": format!("{base}/projects/{}", p.id)},
    })
}

/// A server as `GET /v2.1/servers/detail` lists it, with the `OS-EXT-*`
/// fields of an admin token; `base` is the compute endpoint the links are
/// built on. A deleted one (which only `changes-since` lists) is `DELETED`,
/// `updated` at its deletion.
#[must_use]
pub fn server(s: &Server, base: &str, m: Meta, deleted: bool) -> Value {
    let status = if deleted {
        "DELETED"
    } else {
        s.status.as_str()
    };
    // Nova's power states: 1 RUNNING, 0 NOSTATE once deleted.
    let power = u8::from(!deleted);
    json!({
        "id": s.id, "name": s.name, "tenant_id": s.tenant_id, "user_id": "sim-user",
        "status": status, "OS-EXT-AZ:availability_zone": s.availability_zone,
        "OS-EXT-STS:vm_state": status.to_lowercase(), "OS-EXT-STS:task_state": null,
        "OS-EXT-STS:power_state": power, "addresses": {}, "metadata": {}, "tags": [],
        "flavor": {"original_name": "m1.small", "vcpus": 1, "ram": 2048, "disk": 20,
                   "ephemeral": 0, "swap": 0, "extra_specs": {}},
        "image": "", "hostId": "", "key_name": null, "config_drive": "",
        "accessIPv4": "", "accessIPv6": "", "progress": 0, "locked": false,
        "created": m.created_at.rfc3339(), "updated": m.updated_at.rfc3339(), "security_groups": [],
        "os-extended-volumes:volumes_attached": [], "description": null,
        "links": [{"rel": "self", "href": format!("{base}/servers/{}", s.id)},
                  {"rel": "bookmark", "href": format!("{base}/servers/{}", s.id)}],
    })
}

/// A load balancer as `GET /v2/lbaas/loadbalancers` lists it, always
/// `ACTIVE`/`ONLINE`.
#[must_use]
pub fn loadbalancer(l: &LoadBalancer, m: Meta) -> Value {
    json!({
        "id": l.id, "name": l.name, "project_id": l.project_id, "tenant_id": l.project_id,
        "provider": l.provider, "vip_address": l.vip_address, "vip_port_id": l.vip_port_id,
        "vip_subnet_id": l.vip_subnet_id, "vip_network_id": l.vip_network_id,
        "vip_qos_policy_id": null, "provisioning_status": "ACTIVE", "operating_status": "ONLINE",
        "admin_state_up": true, "listeners": [], "pools": [], "flavor_id": null,
        "availability_zone": null, "description": "", "tags": [],
        "created_at": m.created_at.rfc3339(), "updated_at": m.updated_at.rfc3339(),
    })
}

/// An amphora as `GET /v2/octavia/amphorae` lists it.
#[must_use]
pub fn amphora(a: &Amphora, m: Meta) -> Value {
    json!({
        "id": a.id, "loadbalancer_id": a.loadbalancer_id, "compute_id": a.compute_id,
        "lb_network_ip": a.lb_network_ip, "vrrp_ip": a.vrrp_ip, "ha_ip": a.ha_ip,
        "vrrp_port_id": null, "ha_port_id": null, "status": a.status, "role": a.role,
        "cert_expiration": "2027-01-01T00:00:00", "cert_busy": false,
        "vrrp_interface": null, "vrrp_id": 1, "vrrp_priority": null, "cached_zone": "nova",
        "image_id": null, "compute_flavor": null,
        "created_at": m.created_at.rfc3339(), "updated_at": m.updated_at.rfc3339(),
    })
}
