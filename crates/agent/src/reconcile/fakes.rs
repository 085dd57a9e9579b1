//! Fakes of the three seams: a scripted metadata source, a kernel writer
//! that records every call and keeps the maps it would hold, and a ledger
//! owner that records batches and prunes and settles against the
//! attribution it was last given.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use lachesis_abi::{EndpointValue, Mac, Prefix, Zone, ENDPOINT_FLAG_AMPHORA};
use lachesis_ledger::{InternerFull, TenantInterner, GLOBAL_TENANT_ID};
use lachesis_openstack::client::ApiError;
use lachesis_openstack::SyncError as OsSyncError;
use lachesis_planner::{Binding, Plan, PlanOptions, Scope};

use super::kernel::{KernelWriter, Write, WriteError};
use super::order::{
    AttributionSnapshot, BatchError, LedgerOrder, PruneFailed, Settle, SettleBatch,
};
use super::source::{MetadataSource, SyncError, Synced};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A metadata source serving one synced state until told otherwise.
#[derive(Debug)]
pub(crate) struct FakeSource {
    state: Mutex<SourceState>,
}

#[derive(Debug)]
struct SourceState {
    current: Synced,
    failures: usize,
    calls: usize,
    delay: Duration,
    active: usize,
    most_active: usize,
}

impl FakeSource {
    pub fn new(synced: Synced) -> Arc<Self> {
        Arc::new(FakeSource {
            state: Mutex::new(SourceState {
                current: synced,
                failures: 0,
                calls: 0,
                delay: Duration::ZERO,
                active: 0,
                most_active: 0,
            }),
        })
    }

    /// Serves `synced` from the next sync on.
    pub fn set(&self, synced: Synced) {
        lock(&self.state).current = synced;
    }

    /// The next `n` syncs fail as a Neutron 500 would.
    pub fn fail_next(&self, n: usize) {
        lock(&self.state).failures = n;
    }

    /// Each sync takes `delay` (of tokio time) from now on.
    pub fn set_delay(&self, delay: Duration) {
        lock(&self.state).delay = delay;
    }

    /// Syncs asked for so far (failed ones included).
    pub fn calls(&self) -> usize {
        lock(&self.state).calls
    }

    /// The most syncs ever in progress at once.
    pub fn most_concurrent(&self) -> usize {
        lock(&self.state).most_active
    }
}

impl MetadataSource for FakeSource {
    async fn sync(
        &self,
        _previous: Option<Arc<Plan>>,
        _options: PlanOptions,
    ) -> Result<Synced, SyncError> {
        let delay = {
            let mut s = lock(&self.state);
            s.calls += 1;
            s.active += 1;
            s.most_active = s.most_active.max(s.active);
            s.delay
        };
        tokio::time::sleep(delay).await;
        let mut s = lock(&self.state);
        s.active -= 1;
        if s.failures > 0 {
            s.failures -= 1;
            return Err(SyncError::Fetch(OsSyncError::Api(ApiError::Status {
                service: "network".to_owned(),
                endpoint: "ports".to_owned(),
                url: "http://neutron.invalid/v2.0/ports".to_owned(),
                status: 500,
                body: "Internal Server Error".to_owned(),
            })));
        }
        Ok(s.current.clone())
    }
}

/// What happened, across the kernel and the ledger, in order: proves
/// "userspace first, then kernel".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mark {
    /// A kernel write that succeeded.
    Kernel(Write),
    /// The ledger's attribution swap.
    Swap,
}

/// The shared order of [`Mark`]s.
#[derive(Debug, Default)]
pub(crate) struct Timeline(Mutex<Vec<Mark>>);

impl Timeline {
    fn push(&self, mark: Mark) {
        lock(&self.0).push(mark);
    }

    /// Everything so far; then forgets it.
    pub fn take(&self) -> Vec<Mark> {
        std::mem::take(&mut lock(&self.0))
    }
}

/// A kernel writer that logs every call in order and applies it to maps of
/// its own, so tests can compare the "kernel" with a plan.
#[derive(Debug)]
pub(crate) struct RecordingWriter {
    state: Mutex<WriterState>,
    timeline: Arc<Timeline>,
}

#[derive(Debug, Default)]
struct WriterState {
    calls: Vec<Write>,
    /// Calls ever made (the log is taken, this is not).
    made: usize,
    fail_at: Option<usize>,
    zones: BTreeMap<(u32, Prefix), Zone>,
    endpoints: BTreeMap<Mac, EndpointValue>,
    amphora: BTreeSet<(u32, IpAddr)>,
}

/// The maps a fake kernel holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KernelMaps {
    pub zones: BTreeMap<(u32, Prefix), Zone>,
    pub endpoints: BTreeMap<Mac, EndpointValue>,
    pub amphora: BTreeSet<(u32, IpAddr)>,
}

impl KernelMaps {
    /// The maps a kernel written from `plan` alone holds, with the tenant ids
    /// `ledger` hands out.
    pub fn of(plan: &Plan, ledger: &impl LedgerOrder) -> KernelMaps {
        let id = |scope: &Scope| match scope {
            Scope::Global => GLOBAL_TENANT_ID,
            Scope::Tenant(t) => ledger.tenant_id(t).unwrap(),
        };
        KernelMaps {
            zones: plan
                .trie
                .iter()
                .map(|r| ((id(&r.tenant), r.prefix), r.zone))
                .collect(),
            endpoints: plan
                .bindings
                .iter()
                .map(|b| (b.mac, endpoint_value(b, ledger)))
                .collect(),
            amphora: plan
                .amphora_ips
                .iter()
                .map(|a| (ledger.tenant_id(&a.tenant).unwrap(), a.address))
                .collect(),
        }
    }
}

pub(crate) fn endpoint_value(b: &Binding, ledger: &impl LedgerOrder) -> EndpointValue {
    EndpointValue {
        tenant_id: ledger.tenant_id(&b.tenant).unwrap(),
        flags: if b.amphora { ENDPOINT_FLAG_AMPHORA } else { 0 },
    }
}

impl RecordingWriter {
    /// A kernel that cold start wrote from `plan`, sharing `ledger`'s
    /// timeline.
    pub fn holding(plan: &Plan, ledger: &Arc<RecordingLedger>) -> Arc<Self> {
        let maps = KernelMaps::of(plan, ledger);
        Arc::new(RecordingWriter {
            state: Mutex::new(WriterState {
                zones: maps.zones,
                endpoints: maps.endpoints,
                amphora: maps.amphora,
                ..WriterState::default()
            }),
            timeline: ledger.timeline.clone(),
        })
    }

    /// The `n`th call from now (1 = the next one) fails and changes nothing.
    pub fn fail_nth(&self, n: usize) {
        let mut s = lock(&self.state);
        s.fail_at = Some(s.made + n - 1);
    }

    /// Every call so far, failed ones included, in order; then forgets them.
    pub fn take_calls(&self) -> Vec<Write> {
        std::mem::take(&mut lock(&self.state).calls)
    }

    /// What the maps hold now.
    pub fn maps(&self) -> KernelMaps {
        let s = lock(&self.state);
        KernelMaps {
            zones: s.zones.clone(),
            endpoints: s.endpoints.clone(),
            amphora: s.amphora.clone(),
        }
    }
}

impl KernelWriter for RecordingWriter {
    fn write(&self, write: Write) -> Result<(), WriteError> {
        let mut s = lock(&self.state);
        let index = s.made;
        s.made += 1;
        s.calls.push(write);
        if s.fail_at == Some(index) {
            return Err(WriteError {
                write,
                source: "injected failure (EIO)".into(),
            });
        }
        match write {
            Write::UpsertZone {
                tenant_id,
                prefix,
                zone,
            } => {
                s.zones.insert((tenant_id, prefix), zone);
            }
            Write::DeleteZone { tenant_id, prefix } => {
                s.zones.remove(&(tenant_id, prefix));
            }
            Write::UpsertEndpoint { mac, value } => {
                s.endpoints.insert(mac, value);
            }
            Write::DeleteEndpoint { mac } => {
                s.endpoints.remove(&mac);
            }
            Write::InsertAmphora { tenant_id, addr } => {
                s.amphora.insert((tenant_id, addr));
            }
        }
        self.timeline.push(Mark::Kernel(write));
        Ok(())
    }
}

/// What the attribution in force said about a settle's MAC when it ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum InForce {
    /// A VM MAC's binding (live or ghost).
    Binding(Option<Binding>),
    /// A router MAC's external network.
    Router(Option<String>),
}

/// One thing the ledger owner was asked to do, in order.
#[expect(
    clippy::large_enum_variant,
    reason = "a test log of a few entries: boxing the settles would only make the assertions harder to read"
)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LedgerEvent {
    /// A settle, with what the attribution in force said at that moment.
    Settled { settle: Settle, in_force: InForce },
    /// The attribution swap that ends a batch.
    Swapped(Arc<AttributionSnapshot>),
    /// A server prune with its alive list.
    PrunedServers(BTreeSet<String>),
    /// A tenant prune with its alive list.
    PrunedTenants(BTreeSet<String>),
}

/// How the next batch fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BatchFailure {
    NotApplied,
    NotDurable,
}

/// A ledger owner that records what it is asked, settling against (and
/// swapping) the attribution it holds, as the real one does.
#[derive(Debug)]
pub(crate) struct RecordingLedger {
    interner: Mutex<TenantInterner>,
    state: Mutex<LedgerState>,
    /// Shared with the writer built over this ledger.
    pub timeline: Arc<Timeline>,
}

#[derive(Debug)]
struct LedgerState {
    in_force: Arc<AttributionSnapshot>,
    events: Vec<LedgerEvent>,
    batches: usize,
    fail_next: VecDeque<BatchFailure>,
}

impl RecordingLedger {
    pub fn new() -> Arc<Self> {
        Arc::new(RecordingLedger {
            interner: Mutex::new(TenantInterner::default()),
            state: Mutex::new(LedgerState {
                in_force: Arc::default(),
                events: Vec::new(),
                batches: 0,
                fail_next: VecDeque::new(),
            }),
            timeline: Arc::default(),
        })
    }

    /// Installs boot's attribution (not recorded).
    pub fn boot_with(&self, attr: Arc<AttributionSnapshot>) {
        lock(&self.state).in_force = attr;
    }

    /// The next batch fails this way.
    pub fn fail_next_batch(&self, how: BatchFailure) {
        lock(&self.state).fail_next.push_back(how);
    }

    /// Everything recorded so far; then forgets it.
    pub fn take_events(&self) -> Vec<LedgerEvent> {
        std::mem::take(&mut lock(&self.state).events)
    }

    /// Batches asked for so far (failed ones included).
    pub fn batches(&self) -> usize {
        lock(&self.state).batches
    }

    /// The attribution in force.
    pub fn in_force(&self) -> Arc<AttributionSnapshot> {
        lock(&self.state).in_force.clone()
    }
}

impl LedgerOrder for RecordingLedger {
    fn tenant_id(&self, project: &str) -> Result<u32, InternerFull> {
        lock(&self.interner).intern(project)
    }

    async fn settle_batch(&self, batch: SettleBatch) -> Result<(), BatchError> {
        let mut s = lock(&self.state);
        s.batches += 1;
        let failure = s.fail_next.pop_front();
        if failure == Some(BatchFailure::NotApplied) {
            return Err(BatchError::NotApplied(
                "injected: flush before the settles failed".into(),
            ));
        }
        for settle in batch.settles {
            let in_force = match &settle {
                Settle::RebaseMac { mac, .. } => {
                    InForce::Binding(s.in_force.binding(*mac).cloned())
                }
                Settle::RebaseRouterPeer { mac, .. } => {
                    InForce::Router(s.in_force.routers.get(mac).cloned())
                }
            };
            s.events.push(LedgerEvent::Settled { settle, in_force });
        }
        s.in_force = batch.attribution.clone();
        s.events.push(LedgerEvent::Swapped(batch.attribution));
        self.timeline.push(Mark::Swap);
        match failure {
            Some(BatchFailure::NotDurable) => Err(BatchError::NotDurable(
                "injected: flush after the settles failed".into(),
            )),
            _ => Ok(()),
        }
    }

    async fn prune_servers(&self, alive: BTreeSet<String>) -> Result<(), PruneFailed> {
        lock(&self.state)
            .events
            .push(LedgerEvent::PrunedServers(alive));
        Ok(())
    }

    async fn prune_tenants(&self, alive: BTreeSet<String>) -> Result<(), PruneFailed> {
        lock(&self.state)
            .events
            .push(LedgerEvent::PrunedTenants(alive));
        Ok(())
    }
}
