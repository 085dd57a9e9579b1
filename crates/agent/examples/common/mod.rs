//! Shared by the agent's benchmarks (`bench_reconcile`, `bench_agent`;
//! root): the generated cloud served in-process, a client of it, a bpffs
//! directory of this run, a kernel writer that counts and times its
//! writes, medians and the output lines.

#![expect(
    dead_code,
    reason = "each benchmark uses its own part; examples share no library"
)]

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use lachesis_agent::boot::BootGate;
use lachesis_agent::config::{Config, SharedTunables};
use lachesis_agent::order::{LedgerOwner, OrderMetrics, PlannedAttribution};
use lachesis_agent::reconcile::{
    BindingTable, Committed, Initial, KernelWriter, OpenStackSource, ReconcileMetrics, Reconciler,
    Seams, SettleBatch, Write, WriteError,
};
use lachesis_datapath::{AttachMode, Datapath, DatapathConfig, RetiredFlows};
use lachesis_ledger::state::{self, StatePaths};
use lachesis_openstack::config::AppCredRef;
use lachesis_openstack::{ApiMetrics, Client, CloudConfig, Credentials};
use lachesis_planner::Plan;
use lachesis_sim::generate::{APP_CREDENTIAL_ID, APP_CREDENTIAL_SECRET};
use lachesis_sim::{SimHandle, Store, Topology};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Neutron's page size in the benchmarks (a common `pagination_max_limit`;
/// `make bench-sync` uses the same).
pub const PAGE: usize = 1000;

/// Serves `topology` on a loopback port the system picks, in this process.
pub async fn serve(topology: &Topology) -> SimHandle {
    let store = Store::from_topology(topology).expect("the topology is valid");
    lachesis_sim::start(store, "127.0.0.1:0".parse().unwrap(), None)
        .await
        .expect("listen on loopback")
}

/// A client of `sim` with the generated cloud's application credential.
pub fn client(sim: &SimHandle) -> Client {
    let cfg = CloudConfig::new(
        sim.auth_url(),
        Credentials::ApplicationCredential {
            credential: AppCredRef::Id(APP_CREDENTIAL_ID.into()),
            secret: APP_CREDENTIAL_SECRET.into(),
        },
    );
    Client::new(cfg, ApiMetrics::default()).expect("client")
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A bpffs directory unique to this run (`/sys/fs/bpf/lachesis-bench-PID-N`),
/// removed with everything pinned in it on drop.
#[derive(Debug)]
pub struct Pins(pub PathBuf);

impl Pins {
    pub fn new(tag: &str) -> Pins {
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        Pins(PathBuf::from(format!(
            "/sys/fs/bpf/lachesis-bench-{tag}-{}-{n}",
            std::process::id()
        )))
    }

    /// The classifier loaded with fresh maps (not attached anywhere);
    /// `flows` at its smallest size.
    pub fn load(&self) -> Arc<Datapath> {
        let config = DatapathConfig {
            bpffs_dir: self.0.clone(),
            flows_max_entries: Some(lachesis_datapath::FLOWS_MIN_ENTRIES),
            attach_mode: AttachMode::Auto,
            ..DatapathConfig::default()
        };
        let (dp, _, _) = Datapath::load(&config).expect("load the classifier");
        Arc::new(dp)
    }
}

impl Drop for Pins {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A kernel that takes every write and holds nothing: what a pass costs
/// without the `bpf()` calls.
#[derive(Debug, Clone, Copy)]
pub struct Nowhere;

impl KernelWriter for Nowhere {
    fn write(&self, _: Write) -> Result<(), WriteError> {
        Ok(())
    }
}

/// What a [`Counting`] writer saw since it was last taken.
#[derive(Debug, Default, Clone)]
pub struct Writes {
    /// Every write that succeeded, in order.
    pub log: Vec<Write>,
    /// Time spent inside the inner writer.
    pub time: Duration,
}

/// Counts and times the writes passed on to `K`.
#[derive(Debug)]
pub struct Counting<K> {
    inner: K,
    seen: Mutex<Writes>,
}

impl<K> Counting<K> {
    pub fn new(inner: K) -> Arc<Self> {
        Arc::new(Counting {
            inner,
            seen: Mutex::new(Writes::default()),
        })
    }

    /// Everything since the last call.
    pub fn take(&self) -> Writes {
        std::mem::take(&mut self.seen.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl<K: KernelWriter> KernelWriter for Counting<K> {
    fn write(&self, write: Write) -> Result<(), WriteError> {
        let started = Instant::now();
        let done = self.inner.write(write);
        let took = started.elapsed();
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        seen.time += took;
        if done.is_ok() {
            seen.log.push(write);
        }
        done
    }
}

/// The agent's reconciler as the daemon builds it, with a counting writer.
pub type Agent<K> = Reconciler<Arc<OpenStackSource>, Arc<Counting<K>>, LedgerOwner<Arc<Datapath>>>;

/// One reconciler with its real source and ledger owner over a freshly
/// loaded datapath (not attached), holding an empty plan: nothing written
/// yet, so its first pass writes everything.
pub struct Rig<K> {
    pub reconciler: Agent<K>,
    pub source: Arc<OpenStackSource>,
    pub writer: Arc<Counting<K>>,
    pub dp: Arc<Datapath>,
    /// Boot's gate, at no phase: [`Reconciler::run`] serves nothing until
    /// it reaches `state_restored` (a pass run directly does not wait).
    pub gate: BootGate,
    pub tunables: Arc<SharedTunables>,
    _state: tempfile::TempDir,
    _pins: Pins,
}

/// A [`Rig`] syncing from `sim`, writing to `kernel(datapath)` through a
/// [`Counting`] writer; default tunables.
pub fn rig<K: KernelWriter>(sim: &SimHandle, kernel: impl FnOnce(&Arc<Datapath>) -> K) -> Rig<K> {
    let pins = Pins::new("reconcile");
    let dp = pins.load();
    let dir = tempfile::tempdir().expect("tempdir");
    let paths = StatePaths::new(dir.path().join("state.json"));
    let tunables = Arc::new(SharedTunables::new(Config::default().tunables));
    let empty = Arc::new(Plan::default());
    let owner = LedgerOwner::new(
        dp.clone(),
        tunables.get().unresolved_limits(),
        PlannedAttribution::default(),
        paths.clone(),
        OrderMetrics::unregistered(),
    );
    // Boot's restore step with no state file (DESIGN §12): an empty
    // ledger under an empty plan.
    let attribution = BindingTable::from_plan(&empty, &[], &[], Gauge::default()).attribution();
    owner
        .boot(
            state::load(&paths).expect("no state file yet"),
            Vec::<RetiredFlows>::new(),
            SettleBatch {
                settles: Vec::new(),
                attribution,
                plan: empty.clone(),
                ghosted_at: std::collections::BTreeMap::new(),
            },
        )
        .expect("boot restore");
    let source = Arc::new(OpenStackSource::new(client(sim)));
    let writer = Counting::new(kernel(&dp));
    let gate = BootGate::new();
    let reconciler = Reconciler::new(
        Seams {
            source: source.clone(),
            kernel: writer.clone(),
            ledger: owner,
        },
        Initial {
            committed: Committed {
                plan: empty,
                synced_at: SystemTime::now(),
                topology: None,
            },
            projects: Vec::new(),
            servers: Vec::new(),
        },
        tunables.clone(),
        gate.waiter(),
        ReconcileMetrics::register(&mut Registry::default()),
    );
    Rig {
        reconciler,
        source,
        writer,
        dp,
        gate,
        tunables,
        _state: dir,
        _pins: pins,
    }
}

/// The median of `v` (the upper one of an even count); 0 when empty.
pub fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// The largest of `v`; 0 when empty.
pub fn worst(v: &[f64]) -> f64 {
    v.iter().copied().fold(0.0, f64::max)
}

/// Milliseconds.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Rounded to three decimals, for the JSON line.
pub fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// `{"key": value, ...}` in the given order (the documented one).
pub fn json_line(pairs: &[(String, f64)]) -> String {
    let body: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("\"{k}\": {}", round(*v)))
        .collect();
    format!("{{{}}}", body.join(", "))
}

/// The `lachesis` binary: `$LACHESIS_BIN`, else beside this example's
/// directory (`target/<profile>/lachesis`; `make bench-agent` and `make
/// soak` build it).
pub fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("LACHESIS_BIN") {
        return path.into();
    }
    let exe = std::env::current_exe().expect("current_exe");
    let path = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/examples/<example>")
        .join("lachesis");
    assert!(
        path.exists(),
        "{} missing: build it first (`cargo build --release --bin lachesis`, \
         as `make bench-agent` and `make soak` do) or set LACHESIS_BIN",
        path.display()
    );
    path
}

/// `VmRSS` and `VmHWM` of `pid`, in KiB.
pub fn memory(pid: u32) -> (f64, f64) {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status");
    let field = |name: &str| -> f64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} missing from /proc/{pid}/status"))
    };
    (field("VmRSS:"), field("VmHWM:"))
}
