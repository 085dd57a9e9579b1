//! Helpers shared by the integration tests.

use lachesis_abi::{Direction, EntryKey, FlowCounters, FlowKey, L4Class, Mac, Zone};
use lachesis_ledger::memory::{MemoryAttribution, OwnedBinding};

pub const ETH_IPV4: u16 = 0x0800;

pub fn mac(n: u8) -> Mac {
    Mac([2, 0, 0, 0, 0, n])
}

/// A key seen from `vm` talking to `peer`, laid out like the wire.
pub fn key(vm: Mac, peer: Mac, dir: Direction, zone: Zone, l4: L4Class) -> FlowKey {
    let (src, dst) = match dir {
        Direction::Tx => (vm, peer),
        Direction::Rx => (peer, vm),
    };
    FlowKey {
        src_mac: src.0,
        dst_mac: dst.0,
        eth_proto: ETH_IPV4,
        direction: dir.code(),
        zone: zone.code(),
        l4: l4.code(),
        pad: 0,
    }
}

pub fn reading(bytes: u64, packets: u64, created_ns: u64) -> FlowCounters {
    FlowCounters {
        bytes,
        packets,
        last_seen_ns: created_ns,
        created_ns,
    }
}

/// Two tenants, three VMs, one router to network `public`.
pub fn world() -> MemoryAttribution {
    let mut a = MemoryAttribution::default();
    a.bindings.insert(
        mac(1),
        OwnedBinding::new("t-a", "s-1", "p-1").with_fallback("fip-net"),
    );
    a.bindings
        .insert(mac(2), OwnedBinding::new("t-a", "s-2", "p-2"));
    a.bindings
        .insert(mac(3), OwnedBinding::new("t-b", "s-3", "p-3"));
    a.routers.insert(mac(100), "public".to_owned());
    a.tenant_names.insert("t-a".to_owned(), "alpha".to_owned());
    a.tenant_names.insert("t-b".to_owned(), "beta".to_owned());
    a.server_names.insert("s-1".to_owned(), "web-1".to_owned());
    a.server_names.insert("s-3".to_owned(), "db-1".to_owned());
    a
}

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use lachesis_ledger::memory::SwapSource;
use lachesis_ledger::state::{Loaded, StateFile, StatePaths};
use lachesis_ledger::{
    CommittedPlan, DrainReport, Exporter, Format, InternerConflict, Ledger, PruneError,
    PruneReport, Reading, SettleMode, SettleReport, UnresolvedLimits,
};

/// The kernel map as the last full drain read it: what a settle's drain
/// reads again when nothing counted since.
type Readings = Vec<(EntryKey, FlowCounters)>;

/// A drain that shows no entry at all.
pub const NOTHING: &[(EntryKey, FlowCounters)] = &[];

/// Label pairs of one sample, in exposition order.
pub type Labels = Vec<(String, String)>;
/// Sample name → labels → value text.
pub type Samples = BTreeMap<String, BTreeMap<Labels, String>>;

/// Every sample of either text format (the lab's one reader), by name
/// and labels.
pub fn parse(text: &str) -> Samples {
    let mut out = Samples::new();
    for sample in lachesis_lab::exposition::parse(text).samples() {
        let prev = out
            .entry(sample.name.clone())
            .or_default()
            .insert(sample.labels.clone(), sample.text.clone());
        assert!(prev.is_none(), "duplicate sample {}", sample.series());
    }
    out
}

/// A ledger, the swappable source it attributes through and a state file of
/// its own. Its methods take the attribution a step runs under and store it
/// in the source first, so a test reads as "this happens under that
/// attribution". Settles follow the protocol (drain, flush, settle, flush:
/// the drain reads again what the last drain read, the kernel having
/// counted nothing since) and prunes are flushed right away (docs/ledger.md);
/// the kernel deletes those flushes release accumulate in `released`.
/// Everything else goes to the ledger through `Deref`.
#[derive(Debug, Clone)]
pub struct Rig {
    pub ledger: Arc<Ledger>,
    pub source: Arc<SwapSource>,
    pub state: Arc<StateFile>,
    /// Kept for as long as the rig: the state file lives in it.
    _dir: Arc<tempfile::TempDir>,
    released: Arc<Mutex<Vec<EntryKey>>>,
    last_drain: Arc<Mutex<(Readings, u64)>>,
}

impl std::ops::Deref for Rig {
    type Target = Ledger;
    fn deref(&self) -> &Ledger {
        &self.ledger
    }
}

impl Default for Rig {
    fn default() -> Self {
        Rig::new(UnresolvedLimits::default())
    }
}

impl Rig {
    pub fn new(limits: UnresolvedLimits) -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let state = StateFile::new(StatePaths::new(dir.path().join("state.json")));
        Rig::with_state(limits, Arc::new(state), Arc::new(dir))
    }

    /// A rig flushing to `state` (a state file that outlives the rig, as
    /// the file outlives an agent process); `dir` is kept alive with it.
    pub fn with_state(
        limits: UnresolvedLimits,
        state: Arc<StateFile>,
        dir: Arc<tempfile::TempDir>,
    ) -> Rig {
        let source = Arc::new(SwapSource::default());
        Rig {
            ledger: Arc::new(Ledger::new(limits, source.clone())),
            source,
            state,
            _dir: dir,
            released: Arc::default(),
            last_drain: Arc::default(),
        }
    }

    /// Where the rig's state file lives.
    pub fn paths(&self) -> StatePaths {
        self.state.paths().clone()
    }

    /// Boot step 4 through the rig's state file (which counts the fallback).
    pub fn restore_loaded(
        &self,
        loaded: Loaded,
        now_ns: u64,
    ) -> Result<CommittedPlan, InternerConflict> {
        self.state.restore(&self.ledger, loaded, now_ns)
    }

    pub fn use_attr(&self, attr: &MemoryAttribution) {
        self.source.store(attr.clone());
    }

    /// Flushes to the rig's own state file: the durable view catches up and
    /// the deletes this flush covers are released (kept in `released`).
    pub fn commit(&self) {
        let report = self.state.flush(&self.ledger).unwrap();
        self.released.lock().unwrap().extend(report.delete);
    }

    /// Kernel deletes released by flushes so far (and forgets them), for
    /// tests whose readings are all folded per-key entries.
    pub fn take_released(&self) -> Vec<FlowKey> {
        self.take_released_entries()
            .into_iter()
            .map(|e| {
                assert!(e.is_folded(), "a CPU's sub-entry released: {e:?}");
                e.key
            })
            .collect()
    }

    /// Kernel sub-entries released by flushes so far (and forgets them).
    pub fn take_released_entries(&self) -> Vec<EntryKey> {
        std::mem::take(&mut *self.released.lock().unwrap())
    }

    pub fn apply_drain<R: Reading>(
        &self,
        attr: &MemoryAttribution,
        readings: &[R],
        now_ns: u64,
    ) -> DrainReport {
        self.use_attr(attr);
        let report = self
            .ledger
            .apply_drain(readings, now_ns)
            .expect("drain accepted");
        *self.last_drain.lock().unwrap() = (
            readings
                .iter()
                .map(|r| (r.entry(), *r.counters()))
                .collect(),
            now_ns,
        );
        report
    }

    /// Final readings (what a lookup-and-delete returned) under `attr`.
    pub fn apply_final<R: Reading>(
        &self,
        attr: &MemoryAttribution,
        readings: &[R],
        now_ns: u64,
    ) -> DrainReport {
        self.use_attr(attr);
        self.ledger
            .apply_final(readings, now_ns)
            .expect("final readings accepted")
    }

    /// Drains (the kernel as last read), flushes, settles under `old` and
    /// flushes again (the agent's order); the source keeps `old` unless
    /// `swap` changes it (the next step stores its own attribution anyway).
    pub fn settle(
        &self,
        old: &MemoryAttribution,
        mode: SettleMode,
        swap: impl FnOnce(),
    ) -> SettleReport {
        self.use_attr(old);
        let (readings, now) = self.last_drain.lock().unwrap().clone();
        self.ledger
            .apply_drain(&readings, now)
            .expect("drain accepted");
        self.commit();
        let report = self.ledger.settle(mode, swap).expect("settle accepted");
        self.commit();
        report
    }

    pub fn prune_servers<'s>(
        &self,
        attr: &MemoryAttribution,
        alive: impl IntoIterator<Item = &'s str>,
    ) -> Result<PruneReport, PruneError> {
        self.use_attr(attr);
        let report = self.ledger.prune_servers(alive);
        self.commit();
        report
    }

    pub fn prune_tenants<'s>(
        &self,
        attr: &MemoryAttribution,
        alive: impl IntoIterator<Item = &'s str>,
    ) -> Result<PruneReport, PruneError> {
        self.use_attr(attr);
        let report = self.ledger.prune_tenants(alive);
        self.commit();
        report
    }
}

/// What a scrape returns now, as `OpenMetrics` text under `attr`: the
/// billing families show the last flush.
pub fn scrape(rig: &Rig, attr: &MemoryAttribution) -> String {
    rig.use_attr(attr);
    let exporter = Exporter::new(rig.ledger.clone(), rig.state.clone());
    let mut out = String::new();
    exporter.render(Format::OpenMetrics, &mut out).unwrap();
    out
}

/// Flushes, then scrapes: the export of everything applied so far.
pub fn render(rig: &Rig, attr: &MemoryAttribution) -> String {
    rig.use_attr(attr);
    rig.commit();
    scrape(rig, attr)
}

/// One billing family's series as (labels → value).
pub fn family(samples: &Samples, name: &str) -> BTreeMap<Labels, u64> {
    samples
        .get(name)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.parse().expect("integer counter")))
                .collect()
        })
        .unwrap_or_default()
}

/// Builds a label list from pairs.
pub fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// Value of one series, 0 if absent... no: `None` if absent.
pub fn value(samples: &Samples, name: &str, pairs: &[(&str, &str)]) -> Option<u64> {
    family(samples, name).get(&labels(pairs)).copied()
}

/// A tenant's tx series of `zone` with no external network.
pub fn tenant_tx(samples: &Samples, tenant: &str, zone: &str) -> Option<u64> {
    value(
        samples,
        "lachesis_tenant_bytes_total",
        &[
            ("tenant_id", tenant),
            ("zone", zone),
            ("external_network", "none"),
            ("direction", "tx"),
        ],
    )
}

/// A port's tx bytes of `zone` with no external network.
pub fn port_tx(
    samples: &Samples,
    server: &str,
    port: &str,
    tenant: &str,
    zone: &str,
) -> Option<u64> {
    value(
        samples,
        "lachesis_port_bytes_total",
        &[
            ("server_id", server),
            ("port_id", port),
            ("tenant_id", tenant),
            ("zone", zone),
            ("external_network", "none"),
            ("direction", "tx"),
        ],
    )
}
