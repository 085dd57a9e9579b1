//! Absorber buckets (DESIGN §9): where a row's bytes go when its attribution
//! dies or changes, so that every exported tier keeps its value.
//!
//! Each bucket stores its labels as they were at settle time (the binding
//! they came from may be gone). Tier identities, checked by the property
//! tests against the rendered exposition:
//!
//! - port = live rows + port-settled (rebased rows of a still-bound MAC)
//! - server = Σ port + server-settled
//! - tenant = Σ server + tenant-settled (+ the `unknown` pseudo-tenant's rows)
//! - total = Σ tenant + total-settled
//!
//! The port-settled buckets are this implementation's answer to a rebase on a
//! live port: zeroing a row whose port-tier labels did not all change (e.g.
//! `lachesis_port_proto_bytes_total`, which has no zone label) would make a
//! continuing port series go down. They end, folded into server-settled, when
//! their MAC is evicted and its retention window has passed (docs/ledger.md,
//! "Port tier", "Returning port series").

use std::sync::Arc;

use lachesis_abi::{Direction, FlowKey, L4Class, Mac, Zone};
use rustc_hash::FxHashMap;

use crate::attribution::{external_network, Attribution};
use crate::counts::Counts;
use crate::flow::decode;

/// A label value shared between buckets.
pub type Label = Arc<str>;

/// Port-settled: bytes of rebased rows, kept under the labels they had.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PortBucket {
    /// The VM MAC whose rows were rebased (the bucket ends with it).
    pub vm_mac: Mac,
    /// `server_id` label.
    pub server_id: Label,
    /// `port_id` label.
    pub port_id: Label,
    /// `tenant_id` label.
    pub tenant_id: Label,
    /// `zone` label.
    pub zone: Zone,
    /// `external_network` label.
    pub external_network: Label,
    /// `direction` label.
    pub direction: Direction,
}

/// Port-proto-settled: the same bytes as [`PortBucket`], split by L4 class.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PortProtoBucket {
    /// The VM MAC whose rows were rebased.
    pub vm_mac: Mac,
    /// `server_id` label.
    pub server_id: Label,
    /// `port_id` label.
    pub port_id: Label,
    /// `tenant_id` label.
    pub tenant_id: Label,
    /// `proto` label.
    pub proto: L4Class,
    /// `direction` label.
    pub direction: Direction,
}

/// Server-settled: rows evicted with their binding.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ServerBucket {
    /// `server_id` label.
    pub server_id: Label,
    /// `tenant_id` label.
    pub tenant_id: Label,
    /// `zone` label.
    pub zone: Zone,
    /// `external_network` label.
    pub external_network: Label,
    /// `direction` label.
    pub direction: Direction,
}

/// Tenant-settled: server buckets of servers gone from Nova.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TenantBucket {
    /// `tenant_id` label.
    pub tenant_id: Label,
    /// `zone` label.
    pub zone: Zone,
    /// `external_network` label.
    pub external_network: Label,
    /// `direction` label.
    pub direction: Direction,
}

/// Total-settled: tenant buckets of projects gone from Keystone.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TotalBucket {
    /// `zone` label.
    pub zone: Zone,
    /// `external_network` label.
    pub external_network: Label,
    /// `direction` label.
    pub direction: Direction,
}

/// Every absorber tier, plus the synthetic `unknown` rows (flow keys with the
/// MACs zeroed) that evicted unresolved entries fold into.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Absorbers {
    /// Port-settled buckets.
    pub port: FxHashMap<PortBucket, Counts>,
    /// Port-proto-settled buckets.
    pub port_proto: FxHashMap<PortProtoBucket, Counts>,
    /// Server-settled buckets.
    pub server: FxHashMap<ServerBucket, Counts>,
    /// Tenant-settled buckets.
    pub tenant: FxHashMap<TenantBucket, Counts>,
    /// Total-settled buckets.
    pub total: FxHashMap<TotalBucket, Counts>,
    /// The `unknown` pseudo-tenant's rows, keyed by a flow key with zero MACs.
    pub unknown: FxHashMap<FlowKey, Counts>,
    /// VM MACs evicted with no other MAC left on their port, whose port and
    /// port-proto buckets are kept (the port series stays, flat) so that the
    /// port bound again continues where it stopped instead of restarting at
    /// zero under the same labels (docs/ledger.md, "Returning port series").
    /// Value: the unix second the retention started, 0 until the first
    /// [`crate::Ledger::expire_retained_ports`] stamps it.
    pub retained: FxHashMap<Mac, u64>,
}

/// The absorber tiers, in [`Absorbers::bucket_counts`] order.
pub const TIERS: [&str; 6] = ["port", "port_proto", "server", "tenant", "total", "unknown"];

impl Absorbers {
    /// Number of buckets per tier, in [`TIERS`] order.
    #[must_use]
    pub fn bucket_counts(&self) -> [usize; 6] {
        [
            self.port.len(),
            self.port_proto.len(),
            self.server.len(),
            self.tenant.len(),
            self.total.len(),
            self.unknown.len(),
        ]
    }
}

/// The synthetic `unknown` row a flow key folds into: MACs zeroed, zone,
/// direction, ethertype and L4 class kept (§9).
#[must_use]
pub fn unknown_key(key: &FlowKey) -> FlowKey {
    FlowKey {
        src_mac: [0; 6],
        dst_mac: [0; 6],
        pad: 0,
        ..*key
    }
}

/// Adds `c` to the bucket at `k`, creating it.
pub(crate) fn fold<K: std::hash::Hash + Eq>(map: &mut FxHashMap<K, Counts>, k: K, c: Counts) {
    map.entry(k).or_default().add(c);
}

/// Folds one row's `total` into the absorber its attribution `attr` (the
/// one in force before the change) names: the port tiers of its VM, under
/// `carrier` when another MAC of the same port carries the series on (an
/// evicted MAC's sibling, so the bucket ends with the port's last MAC),
/// else under the row's own VM MAC (a rebase, a row folded when its peer
/// went, or an evicted MAC's retained buckets: its port series stays until
/// the retention ends); `unknown` when its VM has no binding.
pub(crate) fn fold_row(
    a: &mut Absorbers,
    attr: &dyn Attribution,
    carrier: Option<Mac>,
    key: &FlowKey,
    total: Counts,
) {
    let Some(d) = decode(key) else { return };
    let Some(b) = attr.binding(d.vm_mac) else {
        fold(&mut a.unknown, unknown_key(key), total);
        return;
    };
    let ext: Label = Arc::from(external_network(
        attr,
        d.zone == Zone::External,
        d.peer_mac,
        Some(&b),
    ));
    let (server, port, tenant): (Label, Label, Label) = (
        Arc::from(b.server_id),
        Arc::from(b.port_id),
        Arc::from(b.tenant_id),
    );
    let vm_mac = carrier.unwrap_or(d.vm_mac);
    fold(
        &mut a.port,
        PortBucket {
            vm_mac,
            server_id: server.clone(),
            port_id: port.clone(),
            tenant_id: tenant.clone(),
            zone: d.zone,
            external_network: ext,
            direction: d.direction,
        },
        total,
    );
    fold(
        &mut a.port_proto,
        PortProtoBucket {
            vm_mac,
            server_id: server,
            port_id: port,
            tenant_id: tenant,
            proto: d.l4,
            direction: d.direction,
        },
        total,
    );
}
