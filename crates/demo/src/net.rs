//! Builds a [`World`] out of network namespaces, veths and bridges, and
//! takes it down again.
//!
//! The demo's own process lives in the *hypervisor* namespace (`<run>hv`):
//! the bridges (one per network), the outer ends of every leg (the VMs'
//! taps among them), the agent, the simulator's listener. Each host is a
//! namespace of its own (`<run><host>`). Nothing is created outside these
//! namespaces except the bpffs pin folder (see [`crate::run`]), so nothing
//! the demo does can reach the machine's own network.
//!
//! Truth hygiene (the taps' counters are the independent truth): IPv6 is
//! off on every link unless an interface has an IPv6 address (then without
//! router solicitation, DAD or a link-local address); every neighbour and
//! every bridge forwarding entry is static; a tap never receives flooded,
//! broadcast or multicast frames. So the only frames on a tap are IP
//! packets its VM sent or was sent on purpose.

use std::fmt::Write as _;
use std::io::Write as _;
use std::net::IpAddr;
use std::process::{Command, Stdio};

use anyhow::{bail, Context as _};
use lachesis_lab::netns::{self, IfCounters};

use crate::world::{Host, Iface, Nat, World};

/// Runs `ip` with `args`, then `-batch -` fed `lines` (in the current
/// namespace, or in `netns` with `-n`).
fn ip_batch(netns: Option<&str>, lines: &str) -> anyhow::Result<()> {
    if lines.is_empty() {
        return Ok(());
    }
    let mut cmd = Command::new("ip");
    if let Some(ns) = netns {
        cmd.args(["-n", ns]);
    }
    feed(cmd.args(["-batch", "-"]), lines).with_context(|| match netns {
        Some(ns) => format!("configuring namespace {ns}"),
        None => "configuring the hypervisor namespace".to_owned(),
    })
}

/// `bridge -batch -` in the current namespace.
fn bridge_batch(lines: &str) -> anyhow::Result<()> {
    if lines.is_empty() {
        return Ok(());
    }
    feed(Command::new("bridge").args(["-batch", "-"]), lines).context("configuring the bridges")
}

/// Runs `cmd` with `input` on its standard input; fails with its stderr.
fn feed(cmd: &mut Command, input: &str) -> anyhow::Result<()> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {cmd:?}"))?;
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(input.as_bytes())
        .with_context(|| format!("writing to {cmd:?}"))?;
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed: {}\ninput was:\n{input}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Writes `/proc/sys/<key with dots as slashes>` in the namespace `netns`
/// (from a thread that entered it: sysctls under `net.` are per namespace).
pub fn sysctls(netns: &str, pairs: Vec<(String, &'static str)>) -> anyhow::Result<()> {
    let ns = netns.to_owned();
    netns::spawn_in(netns, move || -> Result<(), String> {
        for (key, value) in pairs {
            let path = format!("/proc/sys/{}", key.replace('.', "/"));
            std::fs::write(&path, value).map_err(|e| format!("{ns}: write {path}: {e}"))?;
        }
        Ok(())
    })
    .join()
    .map_err(|_| anyhow::anyhow!("sysctl thread panicked"))?
    .map_err(anyhow::Error::msg)
}

/// Defaults for every link created afterwards in a namespace: no IPv6
/// unless enabled per interface, and then nothing sent on its own.
fn quiet_defaults() -> Vec<(String, &'static str)> {
    let mut v = Vec::new();
    for scope in ["all", "default"] {
        for (key, value) in [
            ("disable_ipv6", "1"),
            ("accept_ra", "0"),
            ("accept_dad", "0"),
            ("dad_transmits", "0"),
            ("router_solicitations", "0"),
        ] {
            v.push((format!("net.ipv6.conf.{scope}.{key}"), value));
        }
    }
    v
}

/// The namespaces of one run: `<prefix>hv` and `<prefix><host>`.
#[derive(Debug, Clone)]
pub struct Names {
    /// `ldemo-<pid>-`.
    pub prefix: String,
}

impl Names {
    /// The hypervisor namespace.
    #[must_use]
    pub fn hv(&self) -> String {
        format!("{}hv", self.prefix)
    }

    /// A host's namespace.
    #[must_use]
    pub fn host(&self, host: &str) -> String {
        format!("{}{host}", self.prefix)
    }
}

/// Creates the hypervisor namespace and sets its quiet defaults (before
/// any link exists in it).
pub fn create_hv(names: &Names) -> anyhow::Result<()> {
    netns::run(&["ip", "netns", "add", &names.hv()]).map_err(anyhow::Error::msg)?;
    sysctls(&names.hv(), quiet_defaults())?;
    netns::run(&["ip", "-n", &names.hv(), "link", "set", "lo", "up"])
        .map_err(anyhow::Error::msg)?;
    Ok(())
}

/// Builds every bridge and host of `world`. Call it from a thread inside
/// the hypervisor namespace.
pub fn build(names: &Names, world: &World) -> anyhow::Result<()> {
    let mut hv = String::new();
    for bridge in world.bridges.values() {
        // No snooping: the bridge joins no group and sends no report.
        let _ = writeln!(hv, "link add {bridge} type bridge mcast_snooping 0");
        let _ = writeln!(hv, "link set {bridge} up");
    }
    ip_batch(None, &hv)?;
    for host in &world.hosts {
        create_host(names, host)?;
        for iface in &host.ifaces {
            plug(names, world, host, iface)?;
        }
        configure(names, host, &host.ifaces)?;
    }
    neighbours(names, world, |_| true)?;
    for host in &world.hosts {
        nat(names, host)?;
    }
    Ok(())
}

fn create_host(names: &Names, host: &Host) -> anyhow::Result<()> {
    let ns = names.host(&host.name);
    netns::run(&["ip", "netns", "add", &ns]).map_err(anyhow::Error::msg)?;
    let mut keys = quiet_defaults();
    if host.forwards {
        keys.push(("net.ipv4.ip_forward".into(), "1"));
        // A router hairpinning a packet to the VPN appliance on the same
        // subnet would otherwise send ICMP redirects.
        keys.push(("net.ipv4.conf.all.send_redirects".into(), "0"));
        keys.push(("net.ipv4.conf.default.send_redirects".into(), "0"));
        if host.has_v6() {
            keys.push(("net.ipv6.conf.all.forwarding".into(), "1"));
        }
    }
    sysctls(&ns, keys)
}

/// Creates `iface`'s veth (outer end on its bridge, inner end in the
/// host) with its MAC, and the bridge's static forwarding entries for it.
fn plug(names: &Names, world: &World, host: &Host, iface: &Iface) -> anyhow::Result<()> {
    let ns = names.host(&host.name);
    let bridge = &world.bridges[&iface.network_id];
    let (outer, inner) = (&iface.outer, &iface.inner);
    let mut hv = String::new();
    let _ = writeln!(
        hv,
        "link add {outer} type veth peer name {inner} netns {ns}"
    );
    let _ = writeln!(hv, "link set {outer} master {bridge}");
    let _ = writeln!(hv, "link set {outer} up");
    ip_batch(None, &hv)?;
    let mut br = String::new();
    if iface.tap {
        // Nothing reaches a tap but frames addressed to its VM.
        let _ = writeln!(
            br,
            "link set dev {outer} flood off mcast_flood off bcast_flood off"
        );
    }
    for mac in std::iter::once(iface.mac).chain(iface.vrrp.iter().map(|(m, _)| *m)) {
        let _ = writeln!(br, "fdb replace {mac} dev {outer} master static");
    }
    bridge_batch(&br)?;
    let mut inside = format!("link set {inner} address {}\n", iface.mac);
    if iface.has_v6() {
        let _ = writeln!(inside, "link set {inner} addrgenmode none");
    }
    ip_batch(Some(&ns), &inside)
}

/// Addresses, keepalived interfaces, links up and routes of `ifaces` (all
/// of the host's at build time; one new leg when re-gatewayed).
fn configure(names: &Names, host: &Host, ifaces: &[Iface]) -> anyhow::Result<()> {
    let ns = names.host(&host.name);
    let v6: Vec<(String, &'static str)> = ifaces
        .iter()
        .filter(|i| i.has_v6())
        .map(|i| (format!("net.ipv6.conf.{}.disable_ipv6", i.inner), "0"))
        .collect();
    let lo_v6 = host.lo_addrs.iter().any(|a| a.ip.is_ipv6());
    let mut keys = v6;
    if lo_v6 {
        keys.push(("net.ipv6.conf.lo.disable_ipv6".into(), "0"));
    }
    if !keys.is_empty() {
        sysctls(&ns, keys)?;
    }
    let mut b = String::from("link set lo up\n");
    for a in &host.lo_addrs {
        let _ = writeln!(b, "addr replace {a} dev lo");
    }
    for i in ifaces {
        let dev = &i.inner;
        for a in i.addrs.iter().chain(&i.aliases) {
            let _ = writeln!(b, "addr replace {a} dev {dev}{}", nodad(a.ip));
        }
        let _ = writeln!(b, "link set {dev} up");
        for (n, (mac, a)) in i.vrrp.iter().enumerate() {
            let v = format!("vrrp{n}");
            let _ = writeln!(
                b,
                "link add link {dev} name {v} address {mac} type macvlan mode private"
            );
            let _ = writeln!(
                b,
                "addr replace {} dev {v}",
                crate::world::IfAddr::host(a.ip)
            );
            let _ = writeln!(b, "link set {v} up");
        }
    }
    ip_batch(Some(&ns), &b)?;
    routes(names, host)
}

fn nodad(ip: IpAddr) -> &'static str {
    if ip.is_ipv6() {
        " nodad"
    } else {
        ""
    }
}

/// (Re)writes the host's static routes.
fn routes(names: &Names, host: &Host) -> anyhow::Result<()> {
    let mut b = String::new();
    for r in &host.routes {
        let _ = writeln!(b, "route replace {} via {}", r.dest, r.via);
    }
    ip_batch(Some(&names.host(&host.name)), &b)
}

/// Writes the static neighbour entries of every host `which` selects.
fn neighbours(names: &Names, world: &World, which: impl Fn(&Host) -> bool) -> anyhow::Result<()> {
    for host in world.hosts.iter().filter(|h| which(h)) {
        let mut b = String::new();
        for n in world.neighbours().iter().filter(|n| n.host == host.name) {
            let _ = writeln!(
                b,
                "neigh replace {} lladdr {} dev {} nud permanent",
                n.ip, n.mac, n.iface
            );
        }
        ip_batch(Some(&names.host(&host.name)), &b)?;
    }
    Ok(())
}

/// The router's translation rules, as Neutron's L3 agent would write them
/// (one table of our own, replaced whole).
fn nat(names: &Names, host: &Host) -> anyhow::Result<()> {
    if !host.forwards || matches!(host.role, crate::world::Role::Internet) {
        return Ok(());
    }
    let mut pre = String::new();
    let mut post = String::new();
    for rule in &host.nat {
        match rule {
            Nat::Floating { fip, fixed, out } => {
                let _ = writeln!(pre, "    ip daddr {fip} dnat to {fixed}");
                let _ = writeln!(post, "    oifname \"{out}\" ip saddr {fixed} snat to {fip}");
            }
            Nat::Snat { source, out, to } => {
                let _ = writeln!(post, "    oifname \"{out}\" ip saddr {source} snat to {to}");
            }
        }
    }
    let rules = format!(
        "table ip lachesis_demo\ndelete table ip lachesis_demo\n\
         table ip lachesis_demo {{\n  chain pre {{\n    type nat hook prerouting priority dstnat; policy accept;\n{pre}  }}\n\
         \x20 chain post {{\n    type nat hook postrouting priority srcnat; policy accept;\n{post}  }}\n}}\n"
    );
    feed(
        Command::new("ip").args(["netns", "exec", &names.host(&host.name), "nft", "-f", "-"]),
        &rules,
    )
    .with_context(|| format!("NAT rules of {}", host.name))
}

/// Unplugs a host the way Nova deletes a VM: its taps go (explicitly:
/// sockets of the demo's threads may keep the namespace itself alive),
/// then its namespace.
pub fn remove_host(names: &Names, host: &Host) -> anyhow::Result<()> {
    for i in &host.ifaces {
        netns::run(&["ip", "link", "del", &i.outer]).map_err(anyhow::Error::msg)?;
    }
    netns::run(&["ip", "netns", "del", &names.host(&host.name)]).map_err(anyhow::Error::msg)?;
    Ok(())
}

/// Moves a router's gateway leg to what `new` says (the simulator's
/// gateway was changed): the old leg goes, the new one is plugged and
/// configured, routes, translation and the neighbours of the router and
/// the internet are rewritten.
pub fn regateway(names: &Names, old: &World, new: &World, router: &str) -> anyhow::Result<()> {
    let (Some(before), Some(after)) = (old.host(router), new.host(router)) else {
        bail!("no router {router}");
    };
    for i in before.ifaces.iter().filter(|i| !after.ifaces.contains(i)) {
        netns::run(&["ip", "link", "del", &i.outer]).map_err(anyhow::Error::msg)?;
    }
    let added: Vec<Iface> = after
        .ifaces
        .iter()
        .filter(|i| !before.ifaces.contains(i))
        .cloned()
        .collect();
    for i in &added {
        plug(names, new, after, i)?;
    }
    configure(names, after, &added)?;
    neighbours(names, new, |h| {
        h.name == router || matches!(h.role, crate::world::Role::Internet)
    })?;
    nat(names, after)
}

/// The counters of every tap (read in the hypervisor namespace, from the
/// calling thread).
pub fn tap_counters(world: &World) -> anyhow::Result<Vec<(String, IfCounters)>> {
    world
        .taps()
        .map(|(_, i)| {
            IfCounters::read_here(&i.outer)
                .map(|c| (i.outer.clone(), c))
                .map_err(anyhow::Error::msg)
        })
        .collect()
}

/// Waits until no tap's counters moved for `still` consecutive polls
/// 100 ms apart; fails after `limit`.
pub fn wait_quiet(
    taps: &[String],
    still: u32,
    limit: std::time::Duration,
) -> anyhow::Result<Vec<IfCounters>> {
    let read = || -> anyhow::Result<Vec<IfCounters>> {
        taps.iter()
            .map(|t| IfCounters::read_here(t).map_err(anyhow::Error::msg))
            .collect()
    };
    let until = std::time::Instant::now() + limit;
    let mut last = read()?;
    let mut n = 0;
    while n < still {
        if std::time::Instant::now() > until {
            bail!("the taps never went quiet within {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        let now = read()?;
        n = if now == last { n + 1 } else { 0 };
        last = now;
    }
    Ok(last)
}
