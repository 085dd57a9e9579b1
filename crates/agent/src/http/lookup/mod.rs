//! `/debug/lookup`: how the kernel would classify a packet, step by step,
//! from the live bindings and the committed plan's rows. The same rule as
//! the classifier (DESIGN §4.2 steps 3 and 5, bpf/lachesis.bpf.c):
//!
//! 1. the frame's destination MAC has the group bit → `multicast`;
//! 2. no binding for the VM MAC → `miss`;
//! 3. the peer MAC is itself a bound VM port (direct L2) → `same_tenant` or
//!    `other_tenant` by tenant, no trie lookup;
//! 4. else the longest prefix holding the remote address among the VM
//!    tenant's rows of that family, else among the global rows (tenant `*`),
//!    else `miss` (the global catch-all is missing);
//! 5. then, only when a flag is set: the VM is an amphora data port and
//!    `amphora_ips` holds (its tenant, the local address), else the peer is
//!    one and holds (the peer's tenant, the remote address) → `infra`.
//!
//! Tenants compare by project id: the kernel compares interned ids, one per
//! project, so equal ids are equal projects.

use std::net::{IpAddr, Ipv6Addr};

use lachesis_abi::{Direction, Mac, Zone};
use lachesis_ledger::memory::MemoryAttribution;
use lachesis_ledger::BindingLabels;
use lachesis_planner::{AmphoraIp, RouterMac, Scope, TrieRow};
use serde::Serialize;

use super::params::{BadParams, Params};
use super::source::{display, LiveBinding};

/// The parameters `/debug/lookup` accepts.
pub const PARAMS: &[&str] = &["mac", "ip", "peer", "local", "direction"];

const MAC_FORM: &str = "a MAC address: six hex octets separated by ':' or '-' (02:00:00:00:00:01)";
const IP_FORM: &str = "an IPv4 or IPv6 address (10.0.0.5, 2001:db8::5)";
const DIRECTION_FORM: &str = "tx (the VM sends) or rx (the VM receives)";

/// The packet to classify, already swapped to the VM's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Query {
    /// `mac`: the VM's own MAC (source on tx, destination on rx).
    #[serde(rename = "mac", serialize_with = "display")]
    pub vm_mac: Mac,
    /// `ip`: the remote address (destination on tx, source on rx).
    #[serde(rename = "ip")]
    pub remote: IpAddr,
    /// `peer`: the other MAC of the frame; absent means "not a known VM
    /// port" (a router's MAC, the usual case for routed traffic).
    #[serde(rename = "peer", serialize_with = "display_opt")]
    pub peer_mac: Option<Mac>,
    /// `local`: the VM's own address; only the amphora check reads it.
    pub local: Option<IpAddr>,
    /// `direction`: which hook (default `tx`); only the multicast gate
    /// reads it, since the destination MAC is the peer on tx, the VM on rx.
    #[serde(serialize_with = "display")]
    pub direction: Direction,
}

impl Query {
    /// Reads `?mac=&ip=[&peer=][&local=][&direction=]`; every bad
    /// parameter is in the [`BadParams`], each with its form.
    pub fn parse(query: Option<&str>) -> Result<Query, BadParams> {
        let mut p = Params::parse(query, PARAMS);
        let mac = |t: &str| t.parse::<Mac>().ok();
        let ip = |t: &str| t.parse::<IpAddr>().ok();
        let vm_mac = p.required("mac", MAC_FORM, mac);
        let remote = p.required("ip", IP_FORM, ip);
        let peer_mac = p.optional("peer", MAC_FORM, mac);
        let local = p.optional("local", IP_FORM, ip);
        let direction = p
            .optional("direction", DIRECTION_FORM, Direction::from_label)
            .unwrap_or(Direction::Tx);
        let query = vm_mac.zip(remote).map(|(vm_mac, remote)| Query {
            vm_mac,
            remote,
            peer_mac,
            local,
            direction,
        });
        p.finish(query)
    }
}

/// The answer: the zone, why, and every step taken on the way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Explanation {
    /// The packet as understood.
    pub query: Query,
    /// The resulting zone.
    #[serde(serialize_with = "display")]
    pub zone: Zone,
    /// One sentence: the step that decided the zone.
    pub reason: String,
    /// The steps in the kernel's order, up to the deciding one.
    pub steps: Vec<Step>,
    /// What the answer assumed because a parameter was not given.
    pub caveats: Vec<String>,
}

/// One step of the classification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum Step {
    /// The destination MAC's group bit (`None`: the destination was not given).
    MulticastGate {
        /// The frame's destination MAC.
        destination: Option<String>,
        /// Whether it has the group bit.
        multicast: bool,
    },
    /// `endpoints[vm_mac]`.
    VmBinding {
        /// The VM MAC looked up.
        mac: String,
        /// The entry, if any.
        binding: Option<LiveBinding>,
    },
    /// `endpoints[peer_mac]` (`mac` is `None` when no peer was given).
    PeerBinding {
        /// The peer MAC looked up.
        mac: Option<String>,
        /// The entry, if any.
        binding: Option<LiveBinding>,
    },
    /// One LPM lookup: under the VM's tenant, then under `*`.
    Trie {
        /// The tenant whose rows were consulted (`*` for the global rows).
        tenant: String,
        /// `ipv4` or `ipv6`: the trie consulted.
        family: &'static str,
        /// Rows of that tenant and family.
        rows_in_scope: usize,
        /// Those holding the remote address, longest prefix first.
        containing: Vec<TrieRow>,
        /// The longest of them: the trie's answer.
        matched: Option<TrieRow>,
    },
    /// One load-balancer segment-2 check (`amphora_ips`).
    Amphora {
        /// `vm` or `peer`: whose flag is set.
        endpoint: &'static str,
        /// The tenant the address is looked up under.
        tenant: String,
        /// The address looked up (`None`: `local` was not given).
        address: Option<IpAddr>,
        /// Whether `amphora_ips` holds it (`None`: not checked).
        listed: Option<bool>,
    },
}

/// Classifies `query` against `bindings` (the live `endpoints`), `trie` and
/// `amphora_ips` (the committed plan's).
#[must_use]
pub fn explain(
    query: &Query,
    trie: &[TrieRow],
    bindings: &[LiveBinding],
    amphora_ips: &[AmphoraIp],
) -> Explanation {
    let mut out = Explanation {
        query: *query,
        zone: Zone::Miss,
        reason: String::new(),
        steps: Vec::new(),
        caveats: Vec::new(),
    };
    let destination = match query.direction {
        Direction::Tx => query.peer_mac,
        Direction::Rx => Some(query.vm_mac),
    };
    let multicast = destination.is_some_and(Mac::is_multicast);
    out.steps.push(Step::MulticastGate {
        destination: destination.map(|m| m.to_string()),
        multicast,
    });
    if destination.is_none() {
        out.caveats
            .push("no peer MAC given: the destination MAC is assumed unicast".to_owned());
    }
    if multicast {
        return out.decide(Zone::Multicast, "the destination MAC has the group bit");
    }

    let vm = find(bindings, query.vm_mac);
    out.steps.push(Step::VmBinding {
        mac: query.vm_mac.to_string(),
        binding: vm.cloned(),
    });
    let Some(vm) = vm else {
        return out.decide(Zone::Miss, "the VM MAC has no binding");
    };
    let vm_tenant = vm.binding.tenant.as_str();

    let peer = query.peer_mac.and_then(|m| find(bindings, m));
    out.steps.push(Step::PeerBinding {
        mac: query.peer_mac.map(|m| m.to_string()),
        binding: peer.cloned(),
    });
    if query.peer_mac.is_none() {
        out.caveats.push(
            "no peer MAC given: the peer is assumed not to be a VM port (routed traffic)"
                .to_owned(),
        );
    }
    let (mut zone, mut reason) = match peer {
        Some(p) if p.binding.tenant == vm_tenant => (
            Zone::SameTenant,
            "the peer MAC is a VM port of the same tenant (direct L2, no trie lookup)".to_owned(),
        ),
        Some(_) => (
            Zone::OtherTenant,
            "the peer MAC is a VM port of another tenant (direct L2, no trie lookup)".to_owned(),
        ),
        None => trie_zone(&mut out.steps, trie, vm_tenant, query.remote),
    };

    // Segment 2 of a load balancer: evaluated after the zone, as the kernel
    // does, and only for a flagged endpoint.
    let mut segment2 = false;
    if vm.binding.amphora {
        let listed = query
            .local
            .map(|a| amphora_listed(amphora_ips, vm_tenant, a));
        out.steps.push(Step::Amphora {
            endpoint: "vm",
            tenant: vm_tenant.to_owned(),
            address: query.local,
            listed,
        });
        if listed.is_none() {
            out.caveats.push(
                "the VM is an amphora data port and no local address was given: segment 2 not checked"
                    .to_owned(),
            );
        }
        segment2 = listed == Some(true);
    }
    if let Some(p) = peer.filter(|p| !segment2 && p.binding.amphora) {
        let listed = amphora_listed(amphora_ips, &p.binding.tenant, query.remote);
        out.steps.push(Step::Amphora {
            endpoint: "peer",
            tenant: p.binding.tenant.clone(),
            address: Some(query.remote),
            listed: Some(listed),
        });
        segment2 = listed;
    }
    if segment2 {
        zone = Zone::Infra;
        "load-balancer segment 2: an amphora address of its tenant".clone_into(&mut reason);
    }
    out.zone = zone;
    out.reason = reason;
    out
}

/// The `external_network` label the ledger gives the explained packet's
/// bytes (DESIGN §6.4), and the rule that chose it. Not part of the
/// kernel's classification: the ledger attributes it per flow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExternalAttribution {
    /// The label (`none` when no rule gives one).
    pub label: String,
    /// Which rule decided.
    pub rule: ExternalRule,
}

/// The rule of DESIGN §6.4 that decided an [`ExternalAttribution`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "rule", rename_all = "snake_case")]
pub enum ExternalRule {
    /// The zone is not `external`: only `external` carries a label.
    NotExternal,
    /// Rule 1: the peer MAC is an interface of this router, which has an
    /// external gateway.
    RouterMac {
        /// The router's id.
        router: String,
    },
    /// Rule 2: the VM binding's fallback (a floating IP's network, else the
    /// gateway of the router behind the VM's subnet).
    VmFallback,
    /// Rule 3: neither applies.
    NoRule,
}

/// No peer MAC given: a MAC no router map holds, so rule 1 cannot apply.
const NO_PEER: Mac = Mac([0; 6]);

/// The label the ledger would give `e`'s bytes, with the committed plan's
/// `router_macs`; the label itself comes from the ledger's own rule
/// ([`lachesis_ledger::external_network`]), never a copy of it.
#[must_use]
pub fn external_network(e: &Explanation, router_macs: &[RouterMac]) -> ExternalAttribution {
    let vm = e.steps.iter().find_map(|s| match s {
        Step::VmBinding {
            binding: Some(b), ..
        } => Some(&b.binding),
        _ => None,
    });
    let router = e.query.peer_mac.and_then(|peer| {
        router_macs
            .iter()
            .find(|r| r.mac == peer && r.external_network.is_some())
    });
    let mut attr = MemoryAttribution::default();
    if let Some(r) = router {
        attr.routers
            .insert(r.mac, r.external_network.clone().unwrap_or_default());
    }
    let labels = vm.map(|b| BindingLabels {
        tenant_id: &b.tenant,
        server_id: &b.server,
        port_id: &b.port,
        fallback_external_network: b.external_network.as_deref(),
    });
    let external = e.zone == Zone::External;
    let label = lachesis_ledger::external_network(
        &attr,
        external,
        e.query.peer_mac.unwrap_or(NO_PEER),
        labels.as_ref(),
    )
    .to_owned();
    let rule = match (external, router) {
        (false, _) => ExternalRule::NotExternal,
        (true, Some(r)) => ExternalRule::RouterMac {
            router: r.router.clone(),
        },
        (true, None) if vm.is_some_and(|b| b.external_network.is_some()) => {
            ExternalRule::VmFallback
        }
        (true, None) => ExternalRule::NoRule,
    };
    ExternalAttribution { label, rule }
}

impl Explanation {
    fn decide(mut self, zone: Zone, reason: &str) -> Self {
        self.zone = zone;
        reason.clone_into(&mut self.reason);
        self
    }
}

fn find(bindings: &[LiveBinding], mac: Mac) -> Option<&LiveBinding> {
    bindings.iter().find(|b| b.binding.mac == mac)
}

/// The kernel's two LPM lookups: the VM tenant's rows, then the global rows.
fn trie_zone(
    steps: &mut Vec<Step>,
    trie: &[TrieRow],
    tenant: &str,
    remote: IpAddr,
) -> (Zone, String) {
    let scopes = [Scope::Tenant(tenant.to_owned()), Scope::Global];
    for scope in &scopes {
        let matched = lpm(steps, trie, scope, remote);
        if let Some(row) = matched {
            let whose = match scope {
                Scope::Global => "the global rows".to_owned(),
                Scope::Tenant(t) => format!("tenant {t}'s rows"),
            };
            return (
                row.zone,
                format!("longest prefix {} among {whose}", row.prefix),
            );
        }
    }
    (
        Zone::Miss,
        "no row holds the address, not even a global catch-all (a boot-order bug)".to_owned(),
    )
}

/// Longest prefix among `scope`'s rows of `remote`'s family that holds it;
/// records the step.
fn lpm(steps: &mut Vec<Step>, trie: &[TrieRow], scope: &Scope, remote: IpAddr) -> Option<TrieRow> {
    let in_scope: Vec<&TrieRow> = trie
        .iter()
        .filter(|r| &r.tenant == scope && r.prefix.is_ipv4() == remote.is_ipv4())
        .collect();
    let mut containing: Vec<TrieRow> = in_scope
        .iter()
        .filter(|r| r.prefix.contains(remote))
        .map(|r| (*r).clone())
        .collect();
    containing.sort_by_key(|r| std::cmp::Reverse(r.prefix.prefix_len()));
    let matched = containing.first().cloned();
    steps.push(Step::Trie {
        tenant: scope.as_str().to_owned(),
        family: if remote.is_ipv4() { "ipv4" } else { "ipv6" },
        rows_in_scope: in_scope.len(),
        containing,
        matched: matched.clone(),
    });
    matched
}

/// `amphora_ips` keys hold IPv4 as `::ffff:a.b.c.d`: compare in that form,
/// as the kernel does.
fn amphora_listed(amphora_ips: &[AmphoraIp], tenant: &str, addr: IpAddr) -> bool {
    let key = as_v6(addr);
    amphora_ips
        .iter()
        .any(|a| a.tenant == tenant && as_v6(a.address) == key)
}

fn as_v6(addr: IpAddr) -> Ipv6Addr {
    match addr {
        IpAddr::V4(a) => a.to_ipv6_mapped(),
        IpAddr::V6(a) => a,
    }
}

#[expect(
    clippy::ref_option,
    reason = "serde's `serialize_with` passes the field itself, `&Option<T>`"
)]
fn display_opt<T: std::fmt::Display, S: serde::Serializer>(
    v: &Option<T>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => s.collect_str(v),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
pub(crate) mod tests;
