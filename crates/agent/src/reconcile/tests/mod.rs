//! Reconciler tests: the pass against the fakes (`pass.rs`), the schedule
//! in paused time (`schedule.rs`), the real source against the simulator on
//! loopback (`source.rs`), relay mode's source against it (`relay.rs`)
//! and the metric families against docs/metrics.md
//! (`catalogue.rs`).

mod catalogue;
mod pass;
mod relay;
mod schedule;
mod source;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use lachesis_abi::{Mac, Zone};
use lachesis_planner::{AmphoraIp, Binding, Plan, RouterMac, Scope, SourceStatus, TrieRow};
use prometheus_client::registry::Registry;

use super::fakes::{FakeSource, RecordingLedger, RecordingWriter};
use super::{Committed, Initial, LedgerOrder, Named, ReconcileMetrics, Reconciler, Seams, Synced};
use crate::boot::{BootGate, Phase};
use crate::config::{Config, SharedTunables, Tunables};

pub(super) type TestReconciler =
    Reconciler<Arc<FakeSource>, Arc<RecordingWriter>, Arc<RecordingLedger>>;

pub(super) fn mac(n: u8) -> Mac {
    Mac([2, 0, 0, 0, 0, n])
}

/// An ordinary VM binding of MAC `n`.
pub(super) fn vm(n: u8, tenant: &str, server: &str, port: &str) -> Binding {
    Binding {
        mac: mac(n),
        tenant: tenant.to_owned(),
        server: server.to_owned(),
        port: port.to_owned(),
        external_network: None,
        amphora: false,
    }
}

pub(super) fn row(tenant: Option<&str>, prefix: &str, zone: Zone) -> TrieRow {
    TrieRow {
        tenant: tenant.map_or(Scope::Global, |t| Scope::Tenant(t.to_owned())),
        prefix: prefix.parse().unwrap(),
        zone,
    }
}

pub(super) fn router(n: u8, external: Option<&str>) -> RouterMac {
    RouterMac {
        mac: mac(n),
        router: format!("router-{n}"),
        external_network: external.map(str::to_owned),
    }
}

pub(super) fn amphora_ip(tenant: &str, addr: &str) -> AmphoraIp {
    AmphoraIp {
        tenant: tenant.to_owned(),
        address: addr.parse().unwrap(),
    }
}

/// A plan from its parts, sorted as the planner sorts it.
pub(super) fn plan(
    mut trie: Vec<TrieRow>,
    mut bindings: Vec<Binding>,
    mut routers: Vec<RouterMac>,
    mut amphora: Vec<AmphoraIp>,
) -> Plan {
    trie.sort_by(|a, b| (&a.tenant, a.prefix).cmp(&(&b.tenant, b.prefix)));
    bindings.sort_by_key(|b| b.mac);
    routers.sort_by_key(|r| r.mac);
    amphora.sort();
    let mut p = Plan {
        trie,
        bindings,
        router_macs: routers,
        amphora_ips: amphora,
        ..Plan::default()
    };
    p.sources.servers = SourceStatus::Ok;
    p
}

/// The starting cloud: two tenants, a gateway router, an amphora address.
pub(super) fn base() -> Plan {
    plan(
        vec![
            row(None, "0.0.0.0/0", Zone::External),
            row(None, "10.0.1.1/32", Zone::Infra),
            row(Some("p-a"), "10.0.1.0/24", Zone::SameTenant),
            row(Some("p-b"), "10.0.2.0/24", Zone::SameTenant),
        ],
        vec![vm(1, "p-a", "s-1", "port-1"), vm(2, "p-b", "s-2", "port-2")],
        vec![router(0xfe, Some("public"))],
        vec![amphora_ip("p-a", "10.0.1.50")],
    )
}

/// A sync of `plan` where Nova answered with every server the plan binds.
pub(super) fn synced(plan: Plan) -> Synced {
    let projects: BTreeSet<&str> = plan.bindings.iter().map(|b| b.tenant.as_str()).collect();
    let servers: BTreeSet<&str> = plan.bindings.iter().map(|b| b.server.as_str()).collect();
    Synced {
        projects: projects
            .into_iter()
            .map(|p| Named::new(p, &format!("name of {p}")))
            .collect(),
        servers: Some(
            servers
                .into_iter()
                .map(|s| Named::new(s, &format!("name of {s}")))
                .collect(),
        ),
        skipped: 0,
        plan: Arc::new(plan),
        topology: Arc::default(),
    }
}

/// Tunables for the tests: a 60 s interval, a 1 s debounce.
pub(super) fn tunables() -> Tunables {
    let mut t = Config::default().tunables;
    t.reconcile_interval = Duration::from_mins(1);
    t.kick_debounce = Duration::from_secs(1);
    t
}

/// A reconciler over the fakes, booted from `initial` (the kernel holds it,
/// the ledger's attribution is the table's), with its source serving
/// `initial` too until a test says otherwise.
pub(super) struct Rig {
    pub source: Arc<FakeSource>,
    pub kernel: Arc<RecordingWriter>,
    pub ledger: Arc<RecordingLedger>,
    pub tunables: Arc<SharedTunables>,
    pub gate: BootGate,
    pub registry: Registry,
    pub reconciler: TestReconciler,
}

impl Rig {
    pub fn new(initial: &Plan) -> Rig {
        let ledger = RecordingLedger::new();
        let kernel = RecordingWriter::holding(initial, &ledger);
        let first = synced(initial.clone());
        let source = FakeSource::new(first.clone());
        let tunables = Arc::new(SharedTunables::new(tunables()));
        let gate = BootGate::new();
        let mut registry = Registry::default();
        let metrics = ReconcileMetrics::register(&mut registry);
        let reconciler = Reconciler::new(
            Seams {
                source: source.clone(),
                kernel: kernel.clone(),
                ledger: ledger.clone(),
            },
            Initial {
                committed: Committed {
                    plan: first.plan.clone(),
                    synced_at: SystemTime::now(),
                    topology: None,
                },
                projects: first.projects.clone(),
                servers: first.servers.clone().unwrap_or_default(),
            },
            tunables.clone(),
            gate.waiter(),
            metrics,
        );
        ledger.boot_with(reconciler.bindings().try_lock().unwrap().attribution());
        Rig {
            source,
            kernel,
            ledger,
            tunables,
            gate,
            registry,
            reconciler,
        }
    }

    /// Boot reaches `state_restored`.
    pub fn restore(&self) {
        for phase in [
            Phase::BpfLoaded,
            Phase::MetadataReady,
            Phase::Attached,
            Phase::StateRestored,
        ] {
            self.gate.advance(phase).unwrap();
        }
    }

    /// The plan committed last.
    pub fn committed(&self) -> Arc<Plan> {
        self.reconciler.committed().borrow().plan.clone()
    }

    /// The registry in the OpenMetrics text format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry).unwrap();
        out
    }

    /// The kernel tenant id the ledger gives `project`.
    pub fn id(&self, project: &str) -> u32 {
        self.ledger.tenant_id(project).unwrap()
    }
}
