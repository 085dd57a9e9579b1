//! One pass, step by step (DESIGN §7): sync → trie delta → bindings (one
//! settle batch) → amphora addresses → commit → prunes → gauges → log.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::SystemTime;

use lachesis_abi::{EndpointValue, ENDPOINT_FLAG_AMPHORA};
use lachesis_ledger::{InternerFull, GLOBAL_TENANT_ID};
use lachesis_planner::{diff, PlanDelta, Scope};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use super::kernel::{KernelWriter, Write, WriteError};
use super::metrics::{LastPass, PassResult, Trigger};
use super::order::{BatchError, LedgerOrder, SettleBatch};
use super::source::{MetadataSource, Synced};
use super::table::{BindingTable, StepCounts};
use super::{chain, Committed, PlanStep, Reconciler};

/// Why a pass stopped before its commit.
#[derive(Debug, thiserror::Error)]
enum ApplyError {
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error(transparent)]
    Batch(#[from] BatchError),
    #[error(transparent)]
    Interner(#[from] InternerFull),
}

/// Kernel tenant ids of one pass, each asked of the ledger once.
struct TenantIds<'a, L> {
    ledger: &'a L,
    known: HashMap<String, u32>,
}

impl<L: LedgerOrder> TenantIds<'_, L> {
    fn of(&mut self, project: &str) -> Result<u32, InternerFull> {
        if let Some(id) = self.known.get(project) {
            return Ok(*id);
        }
        let id = self.ledger.tenant_id(project)?;
        self.known.insert(project.to_owned(), id);
        Ok(id)
    }

    fn of_scope(&mut self, scope: &Scope) -> Result<u32, InternerFull> {
        match scope {
            Scope::Global => Ok(GLOBAL_TENANT_ID),
            Scope::Tenant(project) => self.of(project),
        }
    }
}

/// Trie rows: every upsert first, the deletes only once all succeeded (a
/// delete before its replacement is written would let packets fall through
/// to a shorter row meanwhile).
fn apply_trie<K: KernelWriter, L: LedgerOrder>(
    kernel: &K,
    ids: &mut TenantIds<'_, L>,
    delta: &PlanDelta,
) -> Result<(), ApplyError> {
    for row in &delta.trie_upsert {
        kernel.write(Write::UpsertZone {
            tenant_id: ids.of_scope(&row.tenant)?,
            prefix: row.prefix,
            zone: row.zone,
        })?;
    }
    for row in &delta.trie_delete {
        kernel.write(Write::DeleteZone {
            tenant_id: ids.of_scope(&row.tenant)?,
            prefix: row.prefix,
        })?;
    }
    Ok(())
}

impl<S, K, L> Reconciler<S, K, L>
where
    S: MetadataSource,
    K: KernelWriter,
    L: LedgerOrder,
{
    /// One pass, counted; `None` when `cancel` interrupted the sync (nothing
    /// was touched, nothing is counted).
    pub(super) async fn pass_until(
        &mut self,
        trigger: Trigger,
        cancel: &CancellationToken,
    ) -> Option<PassResult> {
        let started = tokio::time::Instant::now();
        let previous = self.committed.borrow().plan.clone();
        let options = self.tunables.get().plan_options();
        let synced = tokio::select! {
            () = cancel.cancelled() => return None,
            synced = self.seams.source.sync(Some(previous), options) => synced,
        };
        let synced_at = SystemTime::now();
        let (result, error) = match synced {
            Err(e) => {
                let cause = chain(&e);
                if e.is_refusal() {
                    // Not a passing failure: every pass fails the same way
                    // until an operator changes the credentials.
                    error!(error = %cause, trigger = trigger.label(), "reconcile sync refused; nothing applied");
                } else {
                    warn!(error = %cause, trigger = trigger.label(), "reconcile sync failed; nothing applied");
                }
                (PassResult::SyncError, Some(cause))
            }
            Ok(synced) => match self.apply(&synced, synced_at).await {
                Ok(()) => (PassResult::Ok, None),
                Err(e) => {
                    let cause = chain(&e);
                    warn!(error = %cause, trigger = trigger.label(),
                        "reconcile apply failed; plan not committed, the next pass retries");
                    (PassResult::ApplyError, Some(cause))
                }
            },
        };
        self.metrics.count_run(LastPass {
            result,
            trigger,
            ended: SystemTime::now(),
            error,
        });
        self.metrics
            .observe_pass(trigger, started.elapsed().as_secs_f64());
        Some(result)
    }

    /// Everything after the sync, up to and including the commit; then the
    /// prunes and gauges.
    async fn apply(&mut self, synced: &Synced, synced_at: SystemTime) -> Result<(), ApplyError> {
        let committed = self.committed.borrow().clone();
        let diffing = std::time::Instant::now();
        let delta = diff(&committed.plan, &synced.plan);
        self.metrics
            .plan()
            .observe(PlanStep::Diff, diffing.elapsed());
        let mut ids = TenantIds {
            ledger: &self.seams.ledger,
            known: HashMap::new(),
        };
        apply_trie(&self.seams.kernel, &mut ids, &delta)?;

        let (counts, settles) = {
            let mut table = self.table.lock().await;
            let step = table.step(
                &synced.plan,
                &synced.projects,
                synced.servers.as_deref(),
                tokio::time::Instant::now(),
            );
            let settles = step.settles.len();
            // Userspace first: the ledger can resolve a MAC before the
            // kernel counts it under its new tenant id.
            if let Some((attr, ghosts)) = step.next {
                let attr = Arc::new(attr);
                let batch = SettleBatch {
                    settles: step.settles,
                    attribution: attr.clone(),
                    plan: synced.plan.clone(),
                    ghosted_at: BindingTable::ghost_times(&ghosts),
                };
                match self.seams.ledger.settle_batch(batch).await {
                    Ok(()) => {}
                    Err(e @ BatchError::NotDurable(_)) => {
                        warn!(error = %chain(&e), "settle batch swapped in; its flush is owed");
                    }
                    Err(e) => return Err(e.into()),
                }
                table.install(attr, ghosts);
            }
            for b in table.kernel_stale(&synced.plan) {
                let flags = if b.amphora { ENDPOINT_FLAG_AMPHORA } else { 0 };
                self.seams.kernel.write(Write::UpsertEndpoint {
                    mac: b.mac,
                    value: EndpointValue {
                        tenant_id: ids.of(&b.tenant)?,
                        flags,
                    },
                })?;
                table.kernel_written(b);
            }
            (step.counts, settles)
        };

        // Insert-only: a stale address is harmless, a wrongly deleted one
        // re-bills an amphora's plumbing.
        for ip in &delta.amphora_ips_added {
            self.seams.kernel.write(Write::InsertAmphora {
                tenant_id: ids.of(&ip.tenant)?,
                addr: ip.address,
            })?;
        }

        self.committed.send_replace(Arc::new(Committed {
            plan: synced.plan.clone(),
            synced_at,
            topology: Some(synced.topology.clone()),
        }));
        self.prune(synced).await;
        self.metrics.set_committed(&synced.plan);
        log_changes(&delta, counts, settles);
        Ok(())
    }

    /// Prunes only on lists that are known and non-empty: an unknown or
    /// empty list would end the buckets of every live server or project.
    /// A failed prune changes no bucket and is retried by the next pass.
    async fn prune(&self, synced: &Synced) {
        let ids = |list: &[super::Named]| -> BTreeSet<String> {
            list.iter().map(|n| n.id.clone()).collect()
        };
        if let Some(servers) = synced.servers.as_deref().filter(|l| !l.is_empty()) {
            if let Err(e) = self.seams.ledger.prune_servers(ids(servers)).await {
                warn!(error = %chain(&e), "server prune failed; retried next pass");
            }
        }
        if !synced.projects.is_empty() {
            if let Err(e) = self.seams.ledger.prune_tenants(ids(&synced.projects)).await {
                warn!(error = %chain(&e), "tenant prune failed; retried next pass");
            }
        }
    }
}

/// One line per pass that changed something; silence otherwise.
fn log_changes(delta: &PlanDelta, c: StepCounts, settles: usize) {
    if delta.is_empty() && c == StepCounts::default() {
        return;
    }
    info!(
        trie_upserts = delta.trie_upsert.len(),
        trie_deletes = delta.trie_delete.len(),
        bindings_learned = c.learned,
        bindings_changed = c.changed,
        ghosts_revived = c.revived,
        ghosted = c.ghosted,
        router_macs_changed = c.routers,
        settles,
        amphora_ips_added = delta.amphora_ips_added.len(),
        "reconcile applied changes"
    );
}
