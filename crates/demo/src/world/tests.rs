use super::*;
use crate::traffic::{FLOWS, SERVICES};

fn bundled() -> Topology {
    let t = Topology::from_yaml(crate::TOPOLOGY).unwrap();
    lachesis_sim::Store::from_topology(&t)
        .unwrap()
        .to_topology()
}

fn world() -> World {
    World::from_topology(&bundled(), &demo_rogue()).unwrap()
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn documentation(ip: IpAddr) -> bool {
    [
        "192.0.2.0/24",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "2001:db8::/32",
    ]
    .iter()
    .any(|p| p.parse::<Prefix>().unwrap().contains(ip))
}

#[test]
fn every_server_router_the_internet_and_the_rogue_are_hosts_with_taps_carrying_port_macs() {
    let t = bundled();
    let w = world();
    assert_eq!(w.hosts.len(), t.servers.len() + t.routers.len() + 2);
    for s in &t.servers {
        assert!(w.host(&s.name).is_some(), "{}", s.name);
    }
    let taps: Vec<(&str, &Iface)> = w.taps().map(|(h, i)| (h.name.as_str(), i)).collect();
    // Every compute port is a tap named as Nova names it, with its MAC.
    let compute: Vec<&Port> = t
        .ports
        .iter()
        .filter(|p| p.device_owner.starts_with("compute:"))
        .collect();
    assert_eq!(taps.len(), compute.len() + 1, "plus the rogue's");
    for p in compute {
        let (_, i) = taps
            .iter()
            .find(|(_, i)| i.port_id.as_deref() == Some(&p.id))
            .unwrap_or_else(|| panic!("no tap for {}", p.id));
        assert_eq!(i.mac.to_string(), p.mac_address);
        assert_eq!(i.outer, format!("tap{}", &p.id[..p.id.len().min(11)]));
    }
    let (_, rogue) = taps.iter().find(|(h, _)| *h == "rogue").unwrap();
    assert!(t
        .ports
        .iter()
        .all(|p| p.mac_address != rogue.mac.to_string()));
}

#[test]
fn everything_beyond_the_tenants_private_ranges_is_a_documentation_address() {
    let w = world();
    for h in &w.hosts {
        let public: Vec<IpAddr> = match h.role {
            Role::Internet => h
                .ifaces
                .iter()
                .flat_map(|i| i.addrs.iter().map(|a| a.ip))
                .chain(h.lo_addrs.iter().map(|a| a.ip))
                .collect(),
            Role::Router { .. } => h
                .ifaces
                .iter()
                .filter(|i| i.inner.starts_with("qg-"))
                .flat_map(|i| i.addrs.iter().map(|a| a.ip))
                .collect(),
            _ => continue,
        };
        assert!(!public.is_empty(), "{}", h.name);
        for ip in public {
            assert!(documentation(ip), "{}: {ip}", h.name);
        }
    }
}

/// `host`'s static neighbours on `iface`, as `ip mac` lines, sorted.
fn neighbours_of(w: &World, host: &str, iface: &str) -> Vec<String> {
    let mut out: Vec<String> = w
        .neighbours()
        .into_iter()
        .filter(|n| n.host == host && n.iface == iface)
        .map(|n| format!("{} {}", n.ip, n.mac))
        .collect();
    out.sort();
    out
}

#[test]
fn every_address_on_a_network_is_a_static_neighbour_of_every_other_leg_on_it() {
    let w = world();
    // a-web on acme-private: the router (both families), its peers, the
    // amphora with its VIP; not itself, nothing of another network.
    assert_eq!(
        neighbours_of(&w, "a-web", "eth0"),
        [
            "10.1.0.1 fa:16:3e:0a:00:02",
            "10.1.0.50 fa:16:3e:1b:00:33",
            "10.1.0.51 fa:16:3e:1b:00:33",
            "10.1.0.6 fa:16:3e:a1:00:06",
            "10.1.0.7 fa:16:3e:a1:00:07",
            "10.1.0.8 fa:16:3e:a1:00:08",
            "2001:db8:a::1 fa:16:3e:0a:00:02",
            "2001:db8:a::6 fa:16:3e:a1:00:06",
        ]
    );
    // IPv4 only on an IPv4-only leg; the keepalived address resolves to
    // its own MAC, the rogue VM is known too (no ARP on a tap's segment).
    assert_eq!(
        neighbours_of(&w, "b-app2", "eth0"),
        [
            "10.2.0.1 fa:16:3e:0b:00:02",
            "10.2.0.100 fa:16:3e:b2:0f:64",
            "10.2.0.5 fa:16:3e:b2:00:05",
            "10.2.0.7 fa:16:3e:b2:00:07",
            "10.2.0.99 fa:16:3e:ee:00:63",
        ]
    );
    // A router knows the VMs on its leg; the internet knows the routers'
    // gateway addresses and floating IPs.
    assert!(neighbours_of(&w, "acme-router", "qr-ra-acme")
        .contains(&"2001:db8:a::5 fa:16:3e:a1:00:05".to_owned()));
    assert_eq!(
        neighbours_of(&w, "internet", "ie-net-public"),
        [
            "2001:db8:ff::10 fa:16:3e:0a:00:01",
            "203.0.113.10 fa:16:3e:0a:00:01",
            "203.0.113.11 fa:16:3e:0b:00:01",
            "203.0.113.21 fa:16:3e:0a:00:01",
            "203.0.113.22 fa:16:3e:0a:00:01",
        ]
    );
}

/// `dest via nexthop` per route.
fn routes_of(h: &Host) -> Vec<String> {
    h.routes
        .iter()
        .map(|r| format!("{} via {}", r.dest, r.via))
        .collect()
}

#[test]
fn routers_route_translate_and_serve_metadata_as_neutron_would() {
    let w = world();
    let r = w.host("acme-router").unwrap();
    assert_eq!(
        routes_of(r),
        [
            "0.0.0.0/0 via 203.0.113.1",
            "::/0 via 2001:db8:ff::1",
            "10.2.0.0/24 via 10.50.0.20",
            "172.16.77.0/24 via 10.1.0.7",
        ]
    );
    // Floating IPs first (DNAT in, SNAT out), then the subnets' SNAT.
    assert_eq!(
        r.nat[..2],
        [
            Nat::Floating {
                fip: ip("203.0.113.22"),
                fixed: ip("10.1.0.50"),
                out: "qg-ra-gw".into()
            },
            Nat::Floating {
                fip: ip("203.0.113.21"),
                fixed: ip("10.1.0.5"),
                out: "qg-ra-gw".into()
            },
        ]
    );
    assert!(r.nat[2..].iter().all(|n| matches!(n, Nat::Snat { .. })));
    assert_eq!(r.nat.len(), 4, "{:?}", r.nat);
    assert_eq!(r.lo_addrs, [IfAddr::host(METADATA)]);
    // The internet routes acme's IPv6 subnet back (no NAT in IPv6).
    let inet = w.host("internet").unwrap();
    assert_eq!(
        inet.routes,
        [Route {
            dest: "2001:db8:a::/64".parse().unwrap(),
            via: ip("2001:db8:ff::10")
        }]
    );
}

#[test]
fn vms_get_their_gateway_host_routes_keepalived_legs_vips_and_branch_offices() {
    let w = world();
    let mirror = w.host("mirror").unwrap();
    let routes: Vec<String> = mirror
        .routes
        .iter()
        .map(|r| format!("{} via {}", r.dest, r.via))
        .collect();
    assert_eq!(
        routes,
        ["10.1.0.0/24 via 10.50.0.10", "10.2.0.0/24 via 10.50.0.20"]
    );
    let app = w.host("b-app").unwrap();
    assert_eq!(
        app.ifaces[0].vrrp,
        [(
            "fa:16:3e:b2:0f:64".parse().unwrap(),
            IfAddr::new(ip("10.2.0.100"), 24)
        )]
    );
    let amphora = w.host("amphora-lb-acme").unwrap();
    assert_eq!(amphora.ifaces[0].aliases, [IfAddr::host(ip("10.1.0.50"))]);
    assert_eq!(
        amphora.ifaces[0].bills_to.as_deref(),
        Some("0b0000000000000000000000000000aa")
    );
    assert_eq!(
        amphora.ifaces[1].bills_to.as_deref(),
        Some("0a000000000000000000000000000002")
    );
    let vpn = w.host("a-vpn").unwrap();
    assert_eq!(vpn.lo_addrs, [IfAddr::host(ip("172.16.77.10"))]);
    let web = w.host("a-web").unwrap();
    assert_eq!(web.routes.len(), 2, "one default route per family");
}

#[test]
fn a_regatewayed_router_moves_its_gateway_leg_routes_and_translation() {
    let mut t = bundled();
    let r = t
        .routers
        .iter_mut()
        .find(|r| r.id == "router-globex")
        .unwrap();
    let gw = r.external_gateway_info.as_mut().unwrap();
    gw.network_id = "net-public2".into();
    gw.external_fixed_ips[0] = lachesis_sim::topology::FixedIp {
        subnet_id: "sub-public2".into(),
        ip_address: "192.0.2.11".into(),
    };
    let before = world();
    let after = World::from_topology(&t, &demo_rogue()).unwrap();
    let (b, a) = (
        before.host("globex-router").unwrap(),
        after.host("globex-router").unwrap(),
    );
    let qg = a
        .ifaces
        .iter()
        .find(|i| i.inner.starts_with("qg-"))
        .unwrap();
    assert_eq!(qg.network_id, "net-public2");
    assert_eq!(qg.addrs, [IfAddr::new(ip("192.0.2.11"), 24)]);
    assert_eq!(a.routes[0].via, ip("192.0.2.1"));
    assert!(a
        .nat
        .iter()
        .all(|n| matches!(n, Nat::Snat { to, .. } if *to == ip("192.0.2.11"))));
    // The interfaces stay as they were: only the gateway leg is replaced.
    let legs = |h: &Host| {
        h.ifaces
            .iter()
            .filter(|i| i.inner.starts_with("qr-"))
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(legs(a), legs(b));
    for h in &before.hosts {
        if h.name != "globex-router" {
            assert_eq!(Some(h), after.host(&h.name), "{}", h.name);
        }
    }
}

#[test]
fn every_flow_and_listener_is_on_a_host_and_every_destination_is_held_by_one() {
    let w = world();
    for f in FLOWS {
        for h in std::iter::once(&f.from).chain(f.touches) {
            assert!(w.host(h).is_some(), "flow {}: no host {h}", f.name);
        }
        let to: std::net::SocketAddr = f.to.parse().unwrap();
        if to.ip().is_multicast() {
            continue;
        }
        let held = w.hosts.iter().any(|h| {
            h.lo_addrs.iter().any(|a| a.ip == to.ip())
                || h.ifaces
                    .iter()
                    .any(|i| i.neighbour_entries().any(|(ip, _)| ip == to.ip()))
        });
        assert!(held, "flow {}: nobody holds {}", f.name, to.ip());
    }
    for s in SERVICES {
        assert!(w.host(s.host).is_some(), "service on {}", s.host);
    }
}

#[test]
fn names_fit_and_a_vm_without_a_port_is_refused() {
    let w = world();
    for h in &w.hosts {
        for i in &h.ifaces {
            assert!(i.outer.len() <= 15 && i.inner.len() <= 15, "{i:?}");
        }
    }
    let mut t = bundled();
    t.servers.push(lachesis_sim::topology::Server {
        id: "srv-empty".into(),
        name: "empty".into(),
        tenant_id: "0b0000000000000000000000000000aa".into(),
        status: "ACTIVE".into(),
        availability_zone: "nova".into(),
    });
    let err = World::from_topology(&t, &demo_rogue()).unwrap_err();
    assert!(err.contains("empty has no interface"), "{err}");
}
