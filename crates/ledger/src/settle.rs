//! Settle and prune (DESIGN §9, §7): the only operations that move bytes
//! between a row and the absorbers, each done whole inside one critical
//! section so no export can see a fold half-applied.

use lachesis_abi::{EntryKey, FlowKey, Mac, Zone};
use rustc_hash::FxHashSet;

use crate::absorbers::{
    fold, fold_row, Absorbers, Label, PortBucket, PortProtoBucket, ServerBucket, TenantBucket,
    TotalBucket,
};
use crate::attribution::{Attribution, UNKNOWN_TENANT};
use crate::book::Book;
use crate::counts::Counts;
use crate::flow::decode;
use crate::health::Health;

/// Which rows a rebase touches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selector {
    /// Every row of this VM MAC (tenant, server or fallback network changed).
    VmMac(Mac),
    /// Zone-`external` rows whose peer is this router interface MAC (the
    /// router's external gateway changed, §6.4 rule 1).
    RouterPeer(Mac),
}

/// The two settle modes of §9.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettleMode {
    /// Ghost sweep after the grace: fold the MAC's rows into the absorbers
    /// and delete them. Its port-tier series end.
    Evict {
        /// The ghosted VM MAC.
        vm_mac: Mac,
    },
    /// Attribution change on a live binding: fold, zero the rows' totals,
    /// keep their raw baselines.
    Rebase(Selector),
}

impl SettleMode {
    /// Metric label.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            SettleMode::Evict { .. } => "evict",
            SettleMode::Rebase(_) => "rebase",
        }
    }
}

/// Outcome of a settle.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SettleReport {
    /// Rows folded.
    pub rows: usize,
    /// Bytes and packets moved into absorbers.
    pub moved: Counts,
}

/// Outcome of a prune.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PruneReport {
    /// Buckets folded into the tier above.
    pub folded: usize,
    /// Buckets kept because their owner still has live rows or lower-tier
    /// buckets: releasing them now would make the owner's series go down.
    pub deferred: usize,
}

/// An alive list that must not be used for pruning.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PruneError {
    /// An empty list would prune every bucket; §7 only prunes on a
    /// successful, non-empty list.
    #[error(
        "refusing to prune {tier} buckets from an empty alive list: expected at least one {what}"
    )]
    EmptyAliveList {
        /// `server` or `tenant`.
        tier: &'static str,
        /// What the list should contain.
        what: &'static str,
    },
}

fn selected(key: &FlowKey, sel: Selector) -> bool {
    let Some(d) = decode(key) else { return false };
    match sel {
        Selector::VmMac(m) => d.vm_mac == m,
        Selector::RouterPeer(m) => d.peer_mac == m && d.zone == Zone::External,
    }
}

/// Another MAC that carries the port series `(server, port, tenant)` on
/// after `gone` ends: bound to that port now, or holding port buckets under
/// those labels (a MAC rebased away keeps its old port's bucket). The
/// smallest, so the choice is deterministic.
fn heir(a: &Absorbers, attr: &dyn Attribution, port: (&str, &str, &str), gone: Mac) -> Option<Mac> {
    let (server, port_id, tenant) = port;
    let same =
        |s: &Label, p: &Label, t: &Label| &**s == server && &**p == port_id && &**t == tenant;
    attr.macs_on_port(server, port_id, tenant)
        .into_iter()
        .chain(
            a.port
                .keys()
                .filter(|b| same(&b.server_id, &b.port_id, &b.tenant_id))
                .map(|b| b.vm_mac),
        )
        .chain(
            a.port_proto
                .keys()
                .filter(|b| same(&b.server_id, &b.port_id, &b.tenant_id))
                .map(|b| b.vm_mac),
        )
        .filter(|m| *m != gone)
        .min()
}

/// The evicted MAC's port and port-proto buckets: each moves to an heir of
/// its port when there is one (the port's series goes on). Without one,
/// `Keep::Retain` leaves it where it is (the eviction's retention window:
/// the series stays, flat) and `Keep::Nothing` ends it: the port bucket
/// folds into server-settled and the proto split (a parallel view of the
/// same bytes) ends. Returns whether any bucket stayed under `gone`.
fn end_port_buckets(a: &mut Absorbers, attr: &dyn Attribution, gone: Mac, keep: Keep) -> bool {
    let mut kept = false;
    let ports: Vec<PortBucket> = a
        .port
        .keys()
        .filter(|b| b.vm_mac == gone)
        .cloned()
        .collect();
    for b in ports {
        let to = heir(a, attr, (&b.server_id, &b.port_id, &b.tenant_id), gone);
        if to.is_none() && keep == Keep::Retain {
            kept = true;
            continue;
        }
        let Some(c) = a.port.remove(&b) else { continue };
        match to {
            Some(vm_mac) => fold(&mut a.port, PortBucket { vm_mac, ..b }, c),
            None => fold(
                &mut a.server,
                ServerBucket {
                    server_id: b.server_id,
                    tenant_id: b.tenant_id,
                    zone: b.zone,
                    external_network: b.external_network,
                    direction: b.direction,
                },
                c,
            ),
        }
    }
    let protos: Vec<PortProtoBucket> = a
        .port_proto
        .keys()
        .filter(|b| b.vm_mac == gone)
        .cloned()
        .collect();
    for b in protos {
        let to = heir(a, attr, (&b.server_id, &b.port_id, &b.tenant_id), gone);
        if to.is_none() && keep == Keep::Retain {
            kept = true;
            continue;
        }
        let Some(c) = a.port_proto.remove(&b) else {
            continue;
        };
        if let Some(vm_mac) = to {
            fold(&mut a.port_proto, PortProtoBucket { vm_mac, ..b }, c);
        }
    }
    kept
}

/// What [`end_port_buckets`] does with a bucket no other MAC carries on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keep {
    /// Leave it under the evicted MAC (retention).
    Retain,
    /// End it.
    Nothing,
}

/// Ends the retention of evicted MACs whose window (`retention_s`) has
/// passed at `now_s` (unix seconds): their port buckets move to an heir of
/// the port or fold into server-settled, and their port series end. A MAC
/// bound again meanwhile keeps its buckets (they are a live binding's
/// again) and only loses the mark. A mark not yet stamped (0) is stamped
/// with `now_s`. Returns how many retentions ended with buckets moved.
pub(crate) fn expire_retained(
    book: &mut Book,
    attr: &dyn Attribution,
    now_s: u64,
    retention_s: u64,
) -> usize {
    let a = &mut book.absorbers;
    let mut due = Vec::new();
    for (mac, since) in &mut a.retained {
        if *since == 0 {
            *since = now_s.max(1);
        }
        if now_s.saturating_sub(*since) >= retention_s {
            due.push(*mac);
        }
    }
    due.sort_unstable();
    let mut ended = 0;
    for mac in due {
        a.retained.remove(&mac);
        if attr.binding(mac).is_none() {
            end_port_buckets(a, attr, mac, Keep::Nothing);
            ended += 1;
        }
    }
    ended
}

/// Folds the selected rows under the attribution `attr` (the one in force
/// *before* the change). Rows whose MAC has no binding are exported under
/// the `unknown` tenant, so their bytes fold into `unknown`.
pub(crate) fn settle(
    book: &mut Book,
    attr: &dyn Attribution,
    mode: SettleMode,
    health: &mut Health,
    deletes: &mut Vec<EntryKey>,
) -> SettleReport {
    let sel = match mode {
        SettleMode::Evict { vm_mac } => Selector::VmMac(vm_mac),
        SettleMode::Rebase(sel) => sel,
    };
    let keys: Vec<FlowKey> = book
        .rows
        .keys()
        .filter(|k| selected(k, sel))
        .copied()
        .collect();
    let sibling = match mode {
        SettleMode::Evict { vm_mac } => attr.binding(vm_mac).and_then(|b| {
            heir(
                &book.absorbers,
                attr,
                (b.server_id, b.port_id, b.tenant_id),
                vm_mac,
            )
        }),
        SettleMode::Rebase(_) => None,
    };
    let mut report = SettleReport::default();
    for key in keys {
        let Some(row) = book.rows.get_mut(&key) else {
            continue;
        };
        let total = row.total;
        match mode {
            SettleMode::Rebase(_) => row.total = Counts::default(),
            SettleMode::Evict { .. } => {
                let subs = row.subs.take();
                book.rows.remove(&key);
                // Each kernel sub-entry is deleted once this eviction is
                // flushed; should one survive, its next reading continues
                // from here.
                book.tombstone_all(key, &subs, false, deletes);
            }
        }
        report.rows += 1;
        report.moved.add(total);
        let carrier = match mode {
            SettleMode::Evict { .. } => sibling,
            SettleMode::Rebase(_) => None,
        };
        fold_row(&mut book.absorbers, attr, carrier, &key, total);
    }
    if let SettleMode::Evict { vm_mac } = mode {
        let peers = evict_peer_rows(book, attr, vm_mac, deletes);
        report.rows += peers.rows;
        report.moved.add(peers.moved);
        let a = &mut book.absorbers;
        let kept = end_port_buckets(a, attr, vm_mac, Keep::Retain);
        // A new eviction restarts the window (stamped by the next expiry).
        if kept {
            a.retained.insert(vm_mac, 0);
        } else {
            a.retained.remove(&vm_mac);
        }
    }
    match mode {
        SettleMode::Evict { .. } => health.settled_evict += report.rows as u64,
        SettleMode::Rebase(_) => health.settled_rebase += report.rows as u64,
    }
    report
}

/// The rows of other VMs whose peer is `gone`, the MAC an eviction ends:
/// a flow key names its peer's MAC, so without this a long-lived VM would
/// keep a row (and its kernel sub-entries) for every peer it ever talked
/// to. Each such row folds like a rebase, into its own VM's port-settled
/// buckets under the labels it had (every series of that VM goes on
/// unchanged), and leaves the book; its sub-entries are tombstoned and
/// released for deletion with the same flush, so a reading that still
/// comes (the final one of the delete, or a peer MAC bound again) starts
/// a new row from the tombstone: nothing is lost or counted twice.
fn evict_peer_rows(
    book: &mut Book,
    attr: &dyn Attribution,
    gone: Mac,
    deletes: &mut Vec<EntryKey>,
) -> SettleReport {
    let keys: Vec<FlowKey> = book
        .rows
        .keys()
        .filter(|k| decode(k).is_some_and(|d| d.peer_mac == gone && d.vm_mac != gone))
        .copied()
        .collect();
    let mut report = SettleReport::default();
    for key in keys {
        let Some(mut row) = book.rows.remove(&key) else {
            continue;
        };
        let subs = row.subs.take();
        book.tombstone_all(key, &subs, true, deletes);
        report.rows += 1;
        report.moved.add(row.total);
        // The buckets are the row's own VM's, which stays.
        fold_row(&mut book.absorbers, attr, None, &key, row.total);
    }
    report
}

/// Servers and tenants that still have live rows or port-settled buckets
/// under `attr`.
fn referenced(book: &Book, attr: &dyn Attribution) -> (FxHashSet<String>, FxHashSet<String>) {
    let mut servers = FxHashSet::default();
    let mut tenants = FxHashSet::default();
    for key in book.rows.keys() {
        if let Some(b) = decode(key).and_then(|d| attr.binding(d.vm_mac)) {
            if !servers.contains(b.server_id) {
                servers.insert(b.server_id.to_owned());
            }
            if !tenants.contains(b.tenant_id) {
                tenants.insert(b.tenant_id.to_owned());
            }
        }
    }
    for b in book.absorbers.port.keys() {
        servers.insert(b.server_id.to_string());
        tenants.insert(b.tenant_id.to_string());
    }
    (servers, tenants)
}

/// The tier a prune ends the buckets of (§7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PruneTier {
    /// Server-settled buckets of servers absent from a successful,
    /// non-empty Nova list fold into tenant-settled (the tenant series
    /// keeps its value; the server series ends).
    Server,
    /// Tenant-settled buckets of projects absent from the Keystone list
    /// fold into total-settled. `unknown` is terminal and never pruned.
    Tenant,
}

impl PruneTier {
    /// `server` or `tenant`.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            PruneTier::Server => "server",
            PruneTier::Tenant => "tenant",
        }
    }

    /// What its alive list names.
    fn listed(self) -> &'static str {
        match self {
            PruneTier::Server => "server",
            PruneTier::Tenant => "project",
        }
    }
}

/// One tier's lifecycle: its buckets whose owner `alive` lacks fold into
/// the tier above, unless the owner is still referenced (then deferred).
pub(crate) fn prune(
    tier: PruneTier,
    book: &mut Book,
    attr: &dyn Attribution,
    alive: &FxHashSet<&str>,
    health: &mut Health,
) -> Result<PruneReport, PruneError> {
    if alive.is_empty() {
        return Err(PruneError::EmptyAliveList {
            tier: tier.label(),
            what: tier.listed(),
        });
    }
    let report = match tier {
        PruneTier::Server => {
            end_retained_of_gone_servers(book, attr, alive);
            let (referenced, _) = referenced(book, attr);
            prune_tier(
                &mut book.absorbers.server,
                &mut book.absorbers.tenant,
                |b| (!alive.contains(&*b.server_id)).then_some(&*b.server_id),
                &referenced,
                |b| TenantBucket {
                    tenant_id: b.tenant_id,
                    zone: b.zone,
                    external_network: b.external_network,
                    direction: b.direction,
                },
            )
        }
        PruneTier::Tenant => {
            let (_, mut referenced) = referenced(book, attr);
            for b in book.absorbers.server.keys() {
                referenced.insert(b.tenant_id.to_string());
            }
            prune_tier(
                &mut book.absorbers.tenant,
                &mut book.absorbers.total,
                |b| {
                    (&*b.tenant_id != UNKNOWN_TENANT && !alive.contains(&*b.tenant_id))
                        .then_some(&*b.tenant_id)
                },
                &referenced,
                |b| TotalBucket {
                    zone: b.zone,
                    external_network: b.external_network,
                    direction: b.direction,
                },
            )
        }
    };
    let pruned = match tier {
        PruneTier::Server => &mut health.pruned_server,
        PruneTier::Tenant => &mut health.pruned_tenant,
    };
    *pruned += report.folded as u64;
    health.prunes_deferred += report.deferred as u64;
    Ok(report)
}

/// A retained port series of a server Nova no longer lists cannot come
/// back under the same labels (server ids are never reused): it ends now,
/// so the server's own series ends with this prune, not a retention window
/// later.
fn end_retained_of_gone_servers(book: &mut Book, attr: &dyn Attribution, alive: &FxHashSet<&str>) {
    let a = &mut book.absorbers;
    let mut dead: Vec<Mac> = a
        .retained
        .keys()
        .filter(|m| attr.binding(**m).is_none())
        .filter(|m| {
            a.port
                .keys()
                .filter(|b| b.vm_mac == **m)
                .map(|b| &b.server_id)
                .chain(
                    a.port_proto
                        .keys()
                        .filter(|b| b.vm_mac == **m)
                        .map(|b| &b.server_id),
                )
                .all(|s| !alive.contains(&**s))
        })
        .copied()
        .collect();
    dead.sort_unstable();
    for m in dead {
        a.retained.remove(&m);
        end_port_buckets(a, attr, m, Keep::Nothing);
    }
}

/// Ends the buckets of one tier whose owner is gone (`gone_owner` names it),
/// folding each into the tier above through `lift`; an owner still
/// `referenced` by live rows or lower-tier buckets is deferred to a later
/// pass, so no continuing series loses what it already showed.
fn prune_tier<K, T>(
    from: &mut rustc_hash::FxHashMap<K, Counts>,
    to: &mut rustc_hash::FxHashMap<T, Counts>,
    gone_owner: impl Fn(&K) -> Option<&str>,
    referenced: &FxHashSet<String>,
    lift: impl Fn(K) -> T,
) -> PruneReport
where
    K: Clone + std::hash::Hash + Eq,
    T: std::hash::Hash + Eq,
{
    let mut report = PruneReport::default();
    let gone: Vec<(K, bool)> = from
        .keys()
        .filter_map(|b| gone_owner(b).map(|owner| (b.clone(), referenced.contains(owner))))
        .collect();
    for (b, still_referenced) in gone {
        if still_referenced {
            report.deferred += 1;
            continue;
        }
        if let Some(c) = from.remove(&b) {
            fold(to, lift(b), c);
            report.folded += 1;
        }
    }
    report
}
