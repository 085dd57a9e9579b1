//! The machines the demo builds, derived from the simulator's topology
//! (pure: no I/O). Every server is a host behind one tap per port, every
//! router a host with one leg per interface and gateway, and one
//! "internet" host sits behind every external network as its upstream
//! gateway. What Neutron does not describe is derived by fixed rules
//! (docs/demo.md): the internet's hosts, a branch office behind a VM used as
//! a static route's nexthop, the metadata address in every router, the
//! keepalived interface of an allowed-address pair with its own MAC.
//!
//! Nothing on a segment that carries a tap may ever resolve an address
//! (ARP is not IP: the classifier passes it uncounted while the tap's own
//! counters count it), so every neighbour is known in advance:
//! [`World::neighbours`] lists them all.

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use lachesis_abi::{Mac, Prefix};
use lachesis_sim::topology::{Port, Topology};

/// The addresses of the internet's own hosts (documentation ranges).
pub const INTERNET_HOSTS: [IpAddr; 3] = [
    IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7)),
    IpAddr::V4(Ipv4Addr::new(198, 51, 100, 8)),
    IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0xffff, 0, 0, 0, 0, 7)),
];

/// The metadata address every router serves (DESIGN §6.1 step 3).
pub const METADATA: IpAddr = IpAddr::V4(Ipv4Addr::new(169, 254, 169, 254));

/// A VM booted outside Nova: its MAC is in no port, so every byte it sends
/// is `miss` and its tenant `unknown` (the revenue leak the view shows).
#[derive(Debug, Clone)]
pub struct Rogue {
    /// Host name.
    pub name: &'static str,
    /// Its network.
    pub network_id: &'static str,
    /// Its address and prefix length.
    pub addr: IfAddr,
    /// Its MAC (in no port).
    pub mac: Mac,
}

/// The rogue VM of the bundled topology, on `globex`'s network.
#[must_use]
pub fn demo_rogue() -> Rogue {
    Rogue {
        name: "rogue",
        network_id: "net-globex",
        addr: IfAddr::new(IpAddr::V4(Ipv4Addr::new(10, 2, 0, 99)), 24),
        mac: Mac([0xfa, 0x16, 0x3e, 0xee, 0x00, 0x63]),
    }
}

/// An interface address with its subnet's prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct IfAddr {
    /// The address.
    pub ip: IpAddr,
    /// Its subnet's prefix length.
    pub len: u8,
}

impl IfAddr {
    /// `ip/len`.
    #[must_use]
    pub fn new(ip: IpAddr, len: u8) -> IfAddr {
        IfAddr { ip, len }
    }

    /// The single-address form (/32 or /128).
    #[must_use]
    pub fn host(ip: IpAddr) -> IfAddr {
        IfAddr {
            ip,
            len: if ip.is_ipv4() { 32 } else { 128 },
        }
    }
}

impl fmt::Display for IfAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.ip, self.len)
    }
}

/// What a host plays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// A Nova server.
    Vm {
        /// Nova's id.
        server_id: String,
        /// Owning project (Nova's `tenant_id`).
        project_id: String,
    },
    /// A Neutron router.
    Router {
        /// Neutron's id.
        router_id: String,
    },
    /// The upstream of every external network and the internet's hosts.
    Internet,
    /// A VM no port describes.
    Rogue,
}

/// One leg of a host: a veth whose outer end is plugged into its
/// network's bridge in the hypervisor namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Iface {
    /// Name inside the host (`eth0`, `qr-…`, `qg-…`, `ie-…`).
    pub inner: String,
    /// Name of the outer end, on the bridge (`tap…` for a VM port).
    pub outer: String,
    /// The network (bridge) it is plugged into.
    pub network_id: String,
    /// The inner end's MAC: the port's.
    pub mac: Mac,
    /// Fixed addresses with their subnet's length, then floating IPs (/32).
    pub addrs: Vec<IfAddr>,
    /// The Neutron port, when there is one.
    pub port_id: Option<String>,
    /// The project a VM port's bytes are billed to: the port's, or for an
    /// amphora's data port its load balancer's (DESIGN §6.5). `None` for
    /// other legs.
    pub bills_to: Option<String>,
    /// A VM's tap: what the agent attaches to and the truth is read from.
    pub tap: bool,
    /// Allowed-address pairs with their own MAC: a keepalived interface
    /// (macvlan) each.
    pub vrrp: Vec<(Mac, IfAddr)>,
    /// Allowed-address pairs with the port's own MAC (a VIP), held as /32
    /// or /128 on this interface.
    pub aliases: Vec<IfAddr>,
}

impl Iface {
    /// Every (address, MAC) this interface answers for on its segment.
    pub fn neighbour_entries(&self) -> impl Iterator<Item = (IpAddr, Mac)> + '_ {
        self.addrs
            .iter()
            .chain(&self.aliases)
            .map(|a| (a.ip, self.mac))
            .chain(self.vrrp.iter().map(|(mac, a)| (a.ip, *mac)))
    }

    /// Whether any address of this interface is IPv6.
    #[must_use]
    pub fn has_v6(&self) -> bool {
        self.neighbour_entries().any(|(ip, _)| ip.is_ipv6())
    }
}

/// A static route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// Destination (`0.0.0.0/0` or `::/0` for the default route).
    pub dest: Prefix,
    /// Next hop.
    pub via: IpAddr,
}

/// A router's address translation (Neutron's L3 agent rules).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Nat {
    /// A floating IP: destination NAT in, source NAT out.
    Floating {
        /// The public address.
        fip: IpAddr,
        /// The port's fixed address.
        fixed: IpAddr,
        /// The gateway interface.
        out: String,
    },
    /// A tenant subnet leaving through the gateway.
    Snat {
        /// The subnet.
        source: Prefix,
        /// The gateway interface.
        out: String,
        /// The router's external address.
        to: IpAddr,
    },
}

/// One namespace of the demo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// Short name (the server's or router's name, `internet`, `rogue`):
    /// the namespace is `<run prefix><name>`.
    pub name: String,
    /// What it plays.
    pub role: Role,
    /// Its legs, in port order (`eth0` first for a VM).
    pub ifaces: Vec<Iface>,
    /// Addresses on `lo`: the metadata address, branch hosts, the
    /// internet's hosts.
    pub lo_addrs: Vec<IfAddr>,
    /// Static routes.
    pub routes: Vec<Route>,
    /// Address translation.
    pub nat: Vec<Nat>,
    /// Forwards between its interfaces (routers, the internet).
    pub forwards: bool,
}

impl Host {
    /// Whether any interface or `lo` address is IPv6.
    #[must_use]
    pub fn has_v6(&self) -> bool {
        self.ifaces.iter().any(Iface::has_v6) || self.lo_addrs.iter().any(|a| a.ip.is_ipv6())
    }
}

/// One static neighbour entry: in `host`, on `iface`, `ip` is at `mac`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Neighbour {
    /// Host name.
    pub host: String,
    /// Inner interface name.
    pub iface: String,
    /// The address.
    pub ip: IpAddr,
    /// Its MAC.
    pub mac: Mac,
}

/// Everything the demo builds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct World {
    /// Hosts, VMs first (in server order), then routers, the internet and
    /// the rogue VM.
    pub hosts: Vec<Host>,
    /// Bridge name per network id, for every network something is plugged into.
    pub bridges: BTreeMap<String, String>,
}

/// Linux interface names are at most 15 bytes.
const IFNAMSIZ: usize = 15;

/// `prefix` + the first characters of `id` that fit (Nova names taps
/// `tap` + the port id's first 11 characters).
fn ifname(prefix: &str, id: &str) -> String {
    let room = IFNAMSIZ - prefix.len();
    format!("{prefix}{}", &id[..id.len().min(room)])
}

/// A locally administered MAC for the internet's legs.
fn internet_mac(i: usize) -> Mac {
    Mac([0x02, 0x1d, 0xe0, 0x00, 0x00, i as u8 + 1])
}

fn parse_ip(text: &str, what: &str) -> Result<IpAddr, String> {
    let ip = text.split('/').next().unwrap_or(text);
    ip.parse()
        .map_err(|_| format!("{what}: {text:?} is not an address"))
}

fn parse_mac(text: &str, what: &str) -> Result<Mac, String> {
    text.parse().map_err(|e| format!("{what}: {e}"))
}

/// Subnets by id: prefix and gateway.
struct Subnets(BTreeMap<String, (Prefix, Option<IpAddr>)>);

impl Subnets {
    fn new(t: &Topology) -> Result<Subnets, String> {
        let mut out = BTreeMap::new();
        for s in &t.subnets {
            let cidr: Prefix = s
                .cidr
                .parse()
                .map_err(|e| format!("subnet {}: {e}", s.id))?;
            let gw = s
                .gateway_ip
                .as_deref()
                .map(|g| parse_ip(g, &format!("subnet {} gateway_ip", s.id)))
                .transpose()?;
            out.insert(s.id.clone(), (cidr, gw));
        }
        Ok(Subnets(out))
    }

    fn get(&self, id: &str) -> Result<(Prefix, Option<IpAddr>), String> {
        self.0
            .get(id)
            .copied()
            .ok_or_else(|| format!("no subnet {id}"))
    }

    /// The port's fixed addresses with their subnets' lengths, and the
    /// subnets they are on.
    fn fixed(&self, p: &Port) -> Result<Vec<(IfAddr, String)>, String> {
        p.fixed_ips
            .iter()
            .map(|f| {
                let ip = parse_ip(&f.ip_address, &format!("port {}", p.id))?;
                let (cidr, _) = self.get(&f.subnet_id)?;
                Ok((IfAddr::new(ip, cidr.prefix_len()), f.subnet_id.clone()))
            })
            .collect()
    }
}

fn default_route(ip: IpAddr) -> Route {
    let any = if ip.is_ipv4() {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    } else {
        IpAddr::V6(Ipv6Addr::UNSPECIFIED)
    };
    Route {
        dest: Prefix::new(any, 0).expect("length 0 fits every family"),
        via: ip,
    }
}

/// A router's interfaces: (port, its addresses, their subnets).
type Legs<'t> = Vec<(&'t Port, Vec<(IfAddr, String)>)>;

fn legs<'t>(t: &'t Topology, subnets: &Subnets, router: &str) -> Result<Legs<'t>, String> {
    t.ports
        .iter()
        .filter(|p| p.device_id == router && p.device_owner == "network:router_interface")
        .map(|p| Ok((p, subnets.fixed(p)?)))
        .collect()
}

impl World {
    /// Derives the demo's hosts from `t`, plus `rogue`.
    pub fn from_topology(t: &Topology, rogue: &Rogue) -> Result<World, String> {
        let subnets = Subnets::new(t)?;
        let mut hosts = Vec::new();
        let router_legs = |router: &str| legs(t, &subnets, router);
        // Which router holds an address on which subnet.
        let mut router_on_subnet: Vec<(String, String, IpAddr)> = Vec::new();
        for r in &t.routers {
            for (_, addrs) in router_legs(&r.id)? {
                for (a, subnet) in addrs {
                    router_on_subnet.push((r.id.clone(), subnet, a.ip));
                }
            }
        }

        for server in &t.servers {
            hosts.push(Self::vm(t, &subnets, server, &router_on_subnet)?);
        }
        for r in &t.routers {
            hosts.push(Self::router(t, &subnets, r)?);
        }
        hosts.push(Self::internet(t, &subnets)?);
        let (_, rogue_gw) = t
            .subnets
            .iter()
            .filter(|s| s.network_id == rogue.network_id)
            .find_map(|s| {
                let (cidr, gw) = subnets.get(&s.id).ok()?;
                cidr.contains(rogue.addr.ip).then_some((cidr, gw))
            })
            .ok_or_else(|| format!("no subnet of {} holds {}", rogue.network_id, rogue.addr))?;
        hosts.push(Host {
            name: rogue.name.to_owned(),
            role: Role::Rogue,
            ifaces: vec![Iface {
                inner: "eth0".into(),
                outer: ifname("tap", rogue.name),
                network_id: rogue.network_id.to_owned(),
                mac: rogue.mac,
                addrs: vec![rogue.addr],
                port_id: None,
                bills_to: None,
                tap: true,
                vrrp: vec![],
                aliases: vec![],
            }],
            lo_addrs: vec![],
            routes: rogue_gw.map(default_route).into_iter().collect(),
            nat: vec![],
            forwards: false,
        });

        let mut bridges = BTreeMap::new();
        for h in &hosts {
            for i in &h.ifaces {
                bridges
                    .entry(i.network_id.clone())
                    .or_insert_with(|| ifname("br-", &i.network_id));
            }
        }
        let world = World { hosts, bridges };
        world.check()?;
        Ok(world)
    }

    fn vm(
        t: &Topology,
        subnets: &Subnets,
        server: &lachesis_sim::topology::Server,
        router_on_subnet: &[(String, String, IpAddr)],
    ) -> Result<Host, String> {
        let router_legs = |router: &str| legs(t, subnets, router);
        let mut ifaces = Vec::new();
        let mut routes: Vec<Route> = Vec::new();
        let mut lo_addrs = Vec::new();
        let ports = t
            .ports
            .iter()
            .filter(|p| p.device_id == server.id && p.device_owner.starts_with("compute:"));
        for (n, p) in ports.enumerate() {
            let what = format!("port {}", p.id);
            let mac = parse_mac(&p.mac_address, &what)?;
            let fixed = subnets.fixed(p)?;
            let mut vrrp = Vec::new();
            let mut aliases = Vec::new();
            for pair in &p.allowed_address_pairs {
                let ip = parse_ip(&pair.ip_address, &what)?;
                let pair_mac = pair
                    .mac_address
                    .as_deref()
                    .map(|m| parse_mac(m, &what))
                    .transpose()?
                    .unwrap_or(mac);
                let len = fixed
                    .iter()
                    .find(|(a, _)| a.ip.is_ipv4() == ip.is_ipv4())
                    .map_or(IfAddr::host(ip).len, |(a, _)| a.len);
                if pair_mac == mac {
                    aliases.push(IfAddr::host(ip));
                } else {
                    vrrp.push((pair_mac, IfAddr::new(ip, len)));
                }
            }
            // The first gateway of each family is the default route; the
            // other routers on the port's subnets are reached by host
            // routes (the subnet's `host_routes` on a real cloud).
            for (a, subnet) in &fixed {
                let (_, gw) = subnets.get(subnet)?;
                let family_has_default = routes
                    .iter()
                    .any(|r| r.dest.prefix_len() == 0 && r.via.is_ipv4() == a.ip.is_ipv4());
                if let Some(gw) = gw.filter(|_| !family_has_default) {
                    routes.push(default_route(gw));
                }
                for (router, on, via) in router_on_subnet {
                    if on != subnet || Some(*via) == gw {
                        continue;
                    }
                    for (_, legs) in router_legs(router)? {
                        for (leg, leg_subnet) in legs {
                            if leg_subnet != *subnet && leg.ip.is_ipv4() == via.is_ipv4() {
                                let (dest, _) = subnets.get(&leg_subnet)?;
                                routes.push(Route { dest, via: *via });
                            }
                        }
                    }
                }
            }
            // A static route through this VM: it plays the branch office
            // behind it (host 10 of the destination).
            for r in &t.routers {
                for route in &r.routes {
                    let nexthop = parse_ip(&route.nexthop, &format!("router {}", r.id))?;
                    if fixed.iter().any(|(a, _)| a.ip == nexthop) {
                        let dest: Prefix = route
                            .destination
                            .parse()
                            .map_err(|e| format!("router {}: {e}", r.id))?;
                        lo_addrs.push(IfAddr::host(branch_host(dest)));
                    }
                }
            }
            ifaces.push(Iface {
                inner: format!("eth{n}"),
                outer: ifname("tap", &p.id),
                network_id: p.network_id.clone(),
                mac,
                addrs: fixed.into_iter().map(|(a, _)| a).collect(),
                port_id: Some(p.id.clone()),
                bills_to: Some(lb_owner(t, server, p).unwrap_or(&p.project_id).to_owned()),
                tap: true,
                vrrp,
                aliases,
            });
        }
        Ok(Host {
            name: server.name.clone(),
            role: Role::Vm {
                server_id: server.id.clone(),
                project_id: server.tenant_id.clone(),
            },
            ifaces,
            lo_addrs,
            routes,
            nat: vec![],
            forwards: false,
        })
    }

    fn router(
        t: &Topology,
        subnets: &Subnets,
        r: &lachesis_sim::topology::Router,
    ) -> Result<Host, String> {
        let mut ifaces = Vec::new();
        let mut routes = Vec::new();
        let mut nat = Vec::new();
        let legs = legs(t, subnets, &r.id)?;
        for (p, addrs) in &legs {
            ifaces.push(Iface {
                inner: ifname("qr-", &p.id),
                outer: ifname("qr-", &p.id),
                network_id: p.network_id.clone(),
                mac: parse_mac(&p.mac_address, &format!("port {}", p.id))?,
                addrs: addrs.iter().map(|(a, _)| *a).collect(),
                port_id: Some(p.id.clone()),
                bills_to: None,
                tap: false,
                vrrp: vec![],
                aliases: vec![],
            });
        }
        if let Some(gw) = &r.external_gateway_info {
            let (leg, up, translate) = gateway_leg(t, subnets, r, gw, &legs)?;
            ifaces.push(leg);
            routes.extend(up);
            nat.extend(translate);
        }
        for route in &r.routes {
            routes.push(Route {
                dest: route
                    .destination
                    .parse()
                    .map_err(|e| format!("router {}: {e}", r.id))?,
                via: parse_ip(&route.nexthop, &format!("router {}", r.id))?,
            });
        }
        Ok(Host {
            name: if r.name.is_empty() {
                r.id.clone()
            } else {
                r.name.clone()
            },
            role: Role::Router {
                router_id: r.id.clone(),
            },
            ifaces,
            lo_addrs: vec![IfAddr::host(METADATA)],
            routes,
            nat,
            forwards: true,
        })
    }

    fn internet(t: &Topology, subnets: &Subnets) -> Result<Host, String> {
        let router_legs = |router: &str| legs(t, subnets, router);
        let mut ifaces = Vec::new();
        let mut routes = Vec::new();
        for (i, net) in t.networks.iter().filter(|n| n.external).enumerate() {
            let mut addrs = Vec::new();
            for s in t.subnets.iter().filter(|s| s.network_id == net.id) {
                let (cidr, gw) = subnets.get(&s.id)?;
                if let Some(gw) = gw {
                    addrs.push(IfAddr::new(gw, cidr.prefix_len()));
                }
            }
            ifaces.push(Iface {
                inner: ifname("ie-", &net.id),
                outer: ifname("ie-", &net.id),
                network_id: net.id.clone(),
                mac: internet_mac(i),
                addrs,
                port_id: None,
                bills_to: None,
                tap: false,
                vrrp: vec![],
                aliases: vec![],
            });
        }
        // Tenant subnets that leave untranslated (IPv6, or SNAT off) are
        // routed back through their router's gateway address.
        for r in &t.routers {
            let Some(gw) = &r.external_gateway_info else {
                continue;
            };
            for f in &gw.external_fixed_ips {
                let via = parse_ip(&f.ip_address, &format!("router {} gateway", r.id))?;
                for (_, legs) in router_legs(&r.id)? {
                    for (a, subnet) in legs {
                        if a.ip.is_ipv4() == via.is_ipv4() && (a.ip.is_ipv6() || !gw.enable_snat) {
                            let (dest, _) = subnets.get(&subnet)?;
                            routes.push(Route { dest, via });
                        }
                    }
                }
            }
        }
        Ok(Host {
            name: "internet".into(),
            role: Role::Internet,
            ifaces,
            lo_addrs: INTERNET_HOSTS.iter().map(|ip| IfAddr::host(*ip)).collect(),
            routes,
            nat: vec![],
            forwards: true,
        })
    }

    /// Refuses what the build could not honour: long names, a name twice
    /// in one namespace, a VM without a port.
    fn check(&self) -> Result<(), String> {
        let mut outer = std::collections::BTreeSet::new();
        for b in self.bridges.values() {
            outer.insert(b.clone());
        }
        for h in &self.hosts {
            if h.ifaces.is_empty() {
                return Err(format!("host {} has no interface", h.name));
            }
            for i in &h.ifaces {
                for name in [&i.inner, &i.outer] {
                    if name.len() > IFNAMSIZ {
                        return Err(format!("interface name {name} is longer than 15"));
                    }
                }
                if !outer.insert(i.outer.clone()) {
                    return Err(format!("interface name {} used twice", i.outer));
                }
            }
        }
        Ok(())
    }

    /// The host named `name`.
    #[must_use]
    pub fn host(&self, name: &str) -> Option<&Host> {
        self.hosts.iter().find(|h| h.name == name)
    }

    /// Every tap with its host.
    pub fn taps(&self) -> impl Iterator<Item = (&Host, &Iface)> {
        self.hosts
            .iter()
            .flat_map(|h| h.ifaces.iter().map(move |i| (h, i)))
            .filter(|(_, i)| i.tap)
    }

    /// Every static neighbour entry: on each interface, every address of
    /// every other interface on the same network, same family.
    #[must_use]
    pub fn neighbours(&self) -> Vec<Neighbour> {
        let mut out = Vec::new();
        for h in &self.hosts {
            for i in &h.ifaces {
                for other in self.hosts.iter().flat_map(|o| &o.ifaces) {
                    if other.network_id != i.network_id || other.outer == i.outer {
                        continue;
                    }
                    for (ip, mac) in other.neighbour_entries() {
                        if i.addrs.iter().any(|a| a.ip.is_ipv4() == ip.is_ipv4()) {
                            out.push(Neighbour {
                                host: h.name.clone(),
                                iface: i.inner.clone(),
                                ip,
                                mac,
                            });
                        }
                    }
                }
            }
        }
        out
    }
}

/// A router's gateway leg, its default routes and its translation rules
/// (floating IPs first: the first matching rule wins).
fn gateway_leg(
    t: &Topology,
    subnets: &Subnets,
    r: &lachesis_sim::topology::Router,
    gw: &lachesis_sim::topology::Gateway,
    legs: &Legs<'_>,
) -> Result<(Iface, Vec<Route>, Vec<Nat>), String> {
    let port = t
        .ports
        .iter()
        .find(|p| p.device_id == r.id && p.device_owner == "network:router_gateway")
        .ok_or_else(|| format!("router {} has a gateway but no gateway port", r.id))?;
    let out = ifname("qg-", &port.id);
    let mut addrs = Vec::new();
    let mut routes = Vec::new();
    let mut nat = Vec::new();
    let mut floating = Vec::new();
    for f in &gw.external_fixed_ips {
        let ip = parse_ip(&f.ip_address, &format!("router {} gateway", r.id))?;
        let (cidr, upstream) = subnets.get(&f.subnet_id)?;
        addrs.push(IfAddr::new(ip, cidr.prefix_len()));
        if let Some(up) = upstream {
            routes.push(default_route(up));
        }
        if ip.is_ipv4() && gw.enable_snat {
            for (_, leg) in legs {
                for (a, subnet) in leg {
                    if a.ip.is_ipv4() {
                        let (source, _) = subnets.get(subnet)?;
                        nat.push(Nat::Snat {
                            source,
                            out: out.clone(),
                            to: ip,
                        });
                    }
                }
            }
        }
    }
    for f in t
        .floatingips
        .iter()
        .filter(|f| f.router_id.as_deref() == Some(r.id.as_str()))
    {
        let (Some(fixed), Some(_)) = (&f.fixed_ip_address, &f.port_id) else {
            continue;
        };
        let fip = parse_ip(&f.floating_ip_address, &format!("floating IP {}", f.id))?;
        let fixed = parse_ip(fixed, &format!("floating IP {}", f.id))?;
        addrs.push(IfAddr::host(fip));
        floating.push(Nat::Floating {
            fip,
            fixed,
            out: out.clone(),
        });
    }
    floating.append(&mut nat);
    let leg = Iface {
        inner: out.clone(),
        outer: out,
        network_id: gw.network_id.clone(),
        mac: parse_mac(&port.mac_address, &format!("port {}", port.id))?,
        addrs,
        port_id: Some(port.id.clone()),
        bills_to: None,
        tap: false,
        vrrp: vec![],
        aliases: vec![],
    };
    Ok((leg, routes, floating))
}

/// The load balancer's project when `p` is a data port of an amphora
/// serving one (not its management port, the one holding `lb_network_ip`).
fn lb_owner<'t>(
    t: &'t Topology,
    server: &lachesis_sim::topology::Server,
    p: &Port,
) -> Option<&'t str> {
    let amphora = t
        .amphorae
        .iter()
        .find(|a| a.compute_id.as_deref() == Some(server.id.as_str()) && a.status != "DELETED")?;
    let mgmt = amphora.lb_network_ip.as_deref();
    if p.fixed_ips
        .iter()
        .any(|f| Some(f.ip_address.as_str()) == mgmt)
    {
        return None;
    }
    let lb = t
        .loadbalancers
        .iter()
        .find(|lb| Some(&lb.id) == amphora.loadbalancer_id.as_ref() && lb.provider == "amphora")?;
    Some(&lb.project_id)
}

/// Host 10 of a branch office's prefix: the address that answers behind
/// the appliance.
#[must_use]
pub fn branch_host(dest: Prefix) -> IpAddr {
    match dest.addr() {
        IpAddr::V4(a) => IpAddr::V4(Ipv4Addr::from(u32::from(a) + 10)),
        IpAddr::V6(a) => IpAddr::V6(Ipv6Addr::from(u128::from(a) + 10)),
    }
}

#[cfg(test)]
mod tests;
