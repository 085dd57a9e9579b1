//! The userspace twin of the `endpoints` map (DESIGN §6.3, §7, §9): live
//! bindings, ghosts, the router-MAC map and the names the ledger resolves
//! rows with, plus what the kernel map was last written with.
//!
//! Shared by the reconciler and the ghost sweeper behind one async mutex
//! ([`SharedTable`]): each holds it for the whole of its step, kernel
//! writes and settle batch included, so a ghost cannot be revived by a pass
//! while the sweep is evicting it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use lachesis_abi::Mac;
use lachesis_planner::{Binding, Plan};
use prometheus_client::metrics::gauge::Gauge;
use tokio::time::Instant;

use super::order::{AttributionSnapshot, Settle, SettleBatch};
use super::source::Named;

/// The table, shared by the reconciler and the ghost sweeper.
pub type SharedTable = Arc<tokio::sync::Mutex<BindingTable>>;

/// A binding whose port is gone, kept resolvable for the grace window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ghost {
    /// The binding as it was when its port disappeared.
    pub binding: Binding,
    /// When the pass that found it gone ran.
    pub since: Instant,
}

impl Ghost {
    /// True once `grace` has passed since the ghosting (the live
    /// `ghost_grace` tunable: a reload applies to existing ghosts too).
    #[must_use]
    pub fn expired(&self, now: Instant, grace: Duration) -> bool {
        now.saturating_duration_since(self.since) >= grace
    }
}

/// What the kernel `endpoints` entry of a MAC was last written with.
/// Tenant ids are never renumbered, so the project names the id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KernelBinding {
    pub tenant: String,
    pub amphora: bool,
}

impl KernelBinding {
    pub(crate) fn of(b: &Binding) -> Self {
        KernelBinding {
            tenant: b.tenant.clone(),
            amphora: b.amphora,
        }
    }

    fn matches(&self, b: &Binding) -> bool {
        self.tenant == b.tenant && self.amphora == b.amphora
    }
}

/// True when a binding's labels change (DESIGN §7: tenant, server, external
/// network; and the port, a label of the port tiers: a port recreated with
/// the same MAC must not carry the old port's bytes). The amphora flag alone
/// is a kernel matter and moves no bytes.
fn labels_differ(old: &Binding, new: &Binding) -> bool {
    old.tenant != new.tenant
        || old.server != new.server
        || old.port != new.port
        || old.external_network != new.external_network
}

/// The router-MAC map of a plan: only routers with a gateway attribute.
fn gateway_routers(plan: &Plan) -> BTreeMap<Mac, String> {
    plan.router_macs
        .iter()
        .filter_map(|r| Some((r.mac, r.external_network.clone()?)))
        .collect()
}

fn names(list: &[Named]) -> BTreeMap<String, String> {
    list.iter()
        .map(|n| (n.id.clone(), n.name.clone()))
        .collect()
}

/// The userspace bindings and what the kernel holds.
#[derive(Debug)]
pub struct BindingTable {
    attr: Arc<AttributionSnapshot>,
    ghosts: BTreeMap<Mac, Ghost>,
    kernel: BTreeMap<Mac, KernelBinding>,
    ghost_gauge: Gauge,
}

/// What a pass changes in the table, before anything is applied.
#[derive(Debug, Default)]
pub(crate) struct BindingStep {
    /// Settles of the pass, bindings first, then router MACs.
    pub settles: Vec<Settle>,
    /// The attribution and ghosts after the step; `None` when nothing in
    /// the ledger's view changes.
    pub next: Option<(AttributionSnapshot, BTreeMap<Mac, Ghost>)>,
    pub counts: StepCounts,
}

/// Sizes of a binding step, for the log line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct StepCounts {
    pub learned: usize,
    pub changed: usize,
    pub revived: usize,
    pub ghosted: usize,
    pub routers: usize,
}

impl BindingTable {
    /// The table as cold start (or a degraded boot from the state file's
    /// plan) left it: `plan`'s bindings live and written to the kernel, no
    /// ghosts. `ghost_gauge` follows the number of ghosts from now on.
    #[must_use]
    pub fn from_plan(
        plan: &Plan,
        projects: &[Named],
        servers: &[Named],
        ghost_gauge: Gauge,
    ) -> Self {
        let live: BTreeMap<Mac, Binding> =
            plan.bindings.iter().map(|b| (b.mac, b.clone())).collect();
        let kernel = live
            .iter()
            .map(|(m, b)| (*m, KernelBinding::of(b)))
            .collect();
        ghost_gauge.set(0);
        BindingTable {
            attr: Arc::new(AttributionSnapshot {
                live,
                ghosts: BTreeMap::new(),
                routers: gateway_routers(plan),
                tenant_names: names(projects),
                server_names: names(servers),
            }),
            ghosts: BTreeMap::new(),
            kernel,
            ghost_gauge,
        }
    }

    /// The table with `ghosts` restored from the state file beside the
    /// plan it was built from (DESIGN §11, §12): resolvable again, and swept
    /// when their grace, counted from their `since`, has passed. A ghost
    /// whose MAC the plan binds live is dropped (a MAC is never both).
    #[must_use]
    pub fn with_ghosts(mut self, ghosts: BTreeMap<Mac, Ghost>) -> Self {
        let attr = Arc::make_mut(&mut self.attr);
        for (mac, g) in ghosts {
            if attr.live.contains_key(&mac) {
                continue;
            }
            attr.ghosts.insert(mac, g.binding.clone());
            self.ghosts.insert(mac, g);
        }
        self.publish_ghosts();
        self
    }

    /// When each ghost was ghosted, for [`super::SettleBatch::ghosted_at`].
    #[must_use]
    pub fn ghost_times(ghosts: &BTreeMap<Mac, Ghost>) -> BTreeMap<Mac, Instant> {
        ghosts.iter().map(|(m, g)| (*m, g.since)).collect()
    }

    /// The attribution in force (what boot installs in the ledger's
    /// attribution source before the first drain).
    #[must_use]
    pub fn attribution(&self) -> Arc<AttributionSnapshot> {
        self.attr.clone()
    }

    /// The ghosts, by MAC.
    #[must_use]
    pub fn ghosts(&self) -> &BTreeMap<Mac, Ghost> {
        &self.ghosts
    }

    /// Ghosts whose grace has passed at `now`, for the sweep.
    #[must_use]
    pub fn expired_ghosts(&self, now: Instant, grace: Duration) -> Vec<(Mac, Ghost)> {
        self.ghosts
            .iter()
            .filter(|(_, g)| g.expired(now, grace))
            .map(|(m, g)| (*m, g.clone()))
            .collect()
    }

    /// The attribution with ghost `mac` dropped: what the sweep's evict
    /// swaps in. `None` when `mac` is not a ghost (revived meanwhile).
    #[must_use]
    pub fn without_ghost(&self, mac: Mac) -> Option<AttributionSnapshot> {
        let mut attr = (*self.attr).clone();
        attr.ghosts.remove(&mac)?;
        Some(attr)
    }

    /// Drops ghost `mac` once its evict is swapped in.
    pub fn forget_ghost(&mut self, mac: Mac) -> Option<Ghost> {
        let ghost = self.ghosts.remove(&mac)?;
        Arc::make_mut(&mut self.attr).ghosts.remove(&mac);
        self.publish_ghosts();
        Some(ghost)
    }

    /// Records that the kernel `endpoints` entry of `mac` was deleted (the
    /// sweep's first step), so a pass that finds the MAC desired again
    /// writes it back.
    pub fn kernel_entry_deleted(&mut self, mac: Mac) {
        self.kernel.remove(&mac);
    }

    fn publish_ghosts(&self) {
        self.ghost_gauge
            .set(i64::try_from(self.ghosts.len()).unwrap_or(i64::MAX));
    }

    /// Bindings of `plan` whose kernel entry is missing or holds another
    /// tenant or flag: new, re-pointed, revived after a sweep deleted the
    /// entry, or left over by a failed write.
    pub(crate) fn kernel_stale<'p>(&self, plan: &'p Plan) -> Vec<&'p Binding> {
        plan.bindings
            .iter()
            .filter(|b| !self.kernel.get(&b.mac).is_some_and(|k| k.matches(b)))
            .collect()
    }

    /// Records a successful kernel write of `b`.
    pub(crate) fn kernel_written(&mut self, b: &Binding) {
        self.kernel.insert(b.mac, KernelBinding::of(b));
    }

    /// Installs the attribution a settle batch swapped in.
    pub(crate) fn install(&mut self, attr: Arc<AttributionSnapshot>, ghosts: BTreeMap<Mac, Ghost>) {
        self.attr = attr;
        self.ghosts = ghosts;
        self.publish_ghosts();
    }

    /// Boot's settle batch (DESIGN §12 step 4): from this table (the state
    /// file's attribution) to `plan`, and the ghosts the reconciler's table
    /// starts with — the file's, still in their grace, plus the bindings of
    /// the file's plan that `plan` lacks.
    #[must_use]
    pub fn boot_batch(
        &self,
        plan: &Arc<Plan>,
        projects: &[Named],
        servers: Option<&[Named]>,
        now: Instant,
    ) -> (SettleBatch, BTreeMap<Mac, Ghost>) {
        let step = self.step(plan, projects, servers, now);
        let (attribution, ghosts) = match step.next {
            Some((attr, ghosts)) => (Arc::new(attr), ghosts),
            None => (self.attribution(), self.ghosts.clone()),
        };
        let batch = SettleBatch {
            settles: step.settles,
            attribution,
            plan: plan.clone(),
            ghosted_at: Self::ghost_times(&ghosts),
        };
        (batch, ghosts)
    }

    /// The binding step of a pass (DESIGN §7), computed without applying
    /// anything: learn what is new, re-pointed or ghosted-and-desired,
    /// settling each changed attribution under the one in force; then ghost
    /// what is no longer desired (after the learning, so a MAC recreated in
    /// one pass is never missing); then the router-MAC map.
    pub(crate) fn step(
        &self,
        plan: &Plan,
        projects: &[Named],
        servers: Option<&[Named]>,
        now: Instant,
    ) -> BindingStep {
        let mut step = BindingStep::default();
        let c = &mut step.counts;
        let mut live = BTreeMap::new();
        let mut ghosts = self.ghosts.clone();
        for b in &plan.bindings {
            let settle_from = if let Some(old) = self.attr.live.get(&b.mac) {
                if old != b {
                    c.changed += 1;
                }
                Some(old)
            } else if ghosts.remove(&b.mac).is_some() {
                c.revived += 1;
                // The ghost's rows are settled under the ghost's own
                // attribution: a reborn MAC never inherits bytes.
                self.ghosts.get(&b.mac).map(|g| &g.binding)
            } else {
                c.learned += 1;
                None
            };
            if let Some(from) = settle_from.filter(|from| labels_differ(from, b)) {
                step.settles.push(Settle::RebaseMac {
                    mac: b.mac,
                    from: from.clone(),
                    to: b.clone(),
                });
            }
            live.insert(b.mac, b.clone());
        }
        for (mac, old) in &self.attr.live {
            if !live.contains_key(mac) {
                c.ghosted += 1;
                ghosts.insert(
                    *mac,
                    Ghost {
                        binding: old.clone(),
                        since: now,
                    },
                );
            }
        }
        let routers = gateway_routers(plan);
        let macs: std::collections::BTreeSet<&Mac> =
            self.attr.routers.keys().chain(routers.keys()).collect();
        for mac in macs {
            let (from, to) = (self.attr.routers.get(mac), routers.get(mac));
            if from != to {
                c.routers += 1;
                step.settles.push(Settle::RebaseRouterPeer {
                    mac: *mac,
                    from: from.cloned(),
                    to: to.cloned(),
                });
            }
        }
        let next = AttributionSnapshot {
            live,
            ghosts: ghosts
                .iter()
                .map(|(m, g)| (*m, g.binding.clone()))
                .collect(),
            routers,
            tenant_names: names(projects),
            // An unknown server list keeps the names known so far.
            server_names: servers.map_or_else(|| self.attr.server_names.clone(), names),
        };
        if next != *self.attr {
            step.next = Some((next, ghosts));
        }
        step
    }
}
