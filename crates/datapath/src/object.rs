//! Loading the classifier: size `flows`, reuse or retire its pin, load, pin.

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use lachesis_config::form;
use libbpf_rs::{MapCore, MapHandle, MapInfo, Object, ObjectBuilder, ProgramAttachType};
use serde::{Deserialize, Serialize};
use serde_inline_default::serde_inline_default;
use serde_with::serde_as;

use crate::attach::AttachMode;
use crate::bpffs;
use crate::drain::{FlowsLayout, RetiredFlows};
use crate::error::{Error, Result};
use crate::sizing::{flows_max_entries, DEFAULT_FLOWS_MEMORY_BUDGET};

/// The compiled classifier, built from `bpf/lachesis.bpf.c` by build.rs.
pub(crate) static CLASSIFIER: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/lachesis.bpf.o"));

/// The atomic build of the production layout, for `PREEMPT_RT` kernels.
static CLASSIFIER_ATOMIC: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/lachesis_atomic.bpf.o"));

/// Where the kernel says whether it is a `PREEMPT_RT` one (absent otherwise).
const REALTIME_FLAG: &str = "/sys/kernel/realtime";

/// How the classifier is built: the same source compiled with a different
/// switch (`bpf/lachesis.bpf.c`; decision records 0010 and 0011).
/// [`Datapath::load`] loads [`FlowsVariant::production`]; the others are
/// for the benchmarks and for tests that run the previous layout's agent
/// or another architecture's build.
///
/// [`Datapath::load`]: crate::Datapath::load
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowsVariant {
    /// A preallocated hash keyed by (flow key, CPU) (DESIGN §4.7): each CPU
    /// creates and writes only its own sub-entry, plain adds; a 256-slot
    /// per-CPU verdict cache (DESIGN §4.2).
    ByCpu,
    /// [`FlowsVariant::ByCpu`] with atomic adds and sequence-checked
    /// verdict slots: what a `PREEMPT_RT` kernel loads, where a TC program
    /// can be preempted on its CPU by another task counting the same
    /// sub-entry or filling the same slot. Same map: a pin of either is
    /// adopted by the other.
    ByCpuAtomic,
    /// The previous layout: a per-CPU hash keyed by the flow key, each CPU
    /// adding into its own slot, drains folding the slots (one 32-byte
    /// value per possible CPU per entry).
    PerCpu,
    /// One shared hash keyed by the flow key, bytes and packets added
    /// atomically (one value per entry whatever the CPU count).
    Shared,
    /// [`FlowsVariant::PerCpu`] plus a map-element iterator program that
    /// folds the slots in the kernel and emits only entries seen since a
    /// threshold.
    PerCpuIter,
    /// [`FlowsVariant::ByCpu`] without the verdict cache: every frame
    /// classified from the metadata maps (`make bench-packet`'s contrast).
    ByCpuNoCache,
    /// [`FlowsVariant::ByCpu`] with a one-slot verdict cache (`make
    /// bench-verdict`'s contrast).
    ByCpuVerdict1,
    /// [`FlowsVariant::ByCpu`] reading the cache's generation with an
    /// ordered atomic fetch, as every architecture but x86-64 builds it
    /// (tests run it here).
    ByCpuGenFetch,
}

impl FlowsVariant {
    /// Every variant, the production ones first.
    pub const ALL: [FlowsVariant; 8] = [
        FlowsVariant::ByCpu,
        FlowsVariant::ByCpuAtomic,
        FlowsVariant::PerCpu,
        FlowsVariant::Shared,
        FlowsVariant::PerCpuIter,
        FlowsVariant::ByCpuNoCache,
        FlowsVariant::ByCpuVerdict1,
        FlowsVariant::ByCpuGenFetch,
    ];

    /// The variant the agent runs on this kernel: the atomic build on a
    /// `PREEMPT_RT` kernel (`/sys/kernel/realtime` reads 1), the plain one
    /// otherwise.
    #[must_use]
    pub fn production() -> FlowsVariant {
        let realtime = std::fs::read_to_string(REALTIME_FLAG).is_ok_and(|s| s.trim() == "1");
        if realtime {
            FlowsVariant::ByCpuAtomic
        } else {
            FlowsVariant::ByCpu
        }
    }

    /// A short name for tables and JSON.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            FlowsVariant::ByCpu => "by_cpu",
            FlowsVariant::ByCpuAtomic => "by_cpu_atomic",
            FlowsVariant::PerCpu => "percpu",
            FlowsVariant::Shared => "shared",
            FlowsVariant::PerCpuIter => "percpu_iter",
            FlowsVariant::ByCpuNoCache => "by_cpu_nocache",
            FlowsVariant::ByCpuVerdict1 => "by_cpu_verdict1",
            FlowsVariant::ByCpuGenFetch => "by_cpu_genfetch",
        }
    }

    /// The layout of its `flows` map on `possible_cpus` CPUs.
    #[must_use]
    pub fn layout(self, possible_cpus: usize) -> FlowsLayout {
        match self {
            FlowsVariant::ByCpu
            | FlowsVariant::ByCpuAtomic
            | FlowsVariant::ByCpuNoCache
            | FlowsVariant::ByCpuVerdict1
            | FlowsVariant::ByCpuGenFetch => FlowsLayout::ByCpu,
            FlowsVariant::PerCpu | FlowsVariant::PerCpuIter => FlowsLayout::PerCpu {
                slots: possible_cpus,
            },
            FlowsVariant::Shared => FlowsLayout::Shared,
        }
    }

    #[cfg_attr(
        feature = "testing",
        expect(
            clippy::unnecessary_wraps,
            reason = "always `Ok` with the `testing` feature, which embeds every object"
        )
    )]
    fn object(self) -> Result<&'static [u8]> {
        match self {
            FlowsVariant::ByCpu => return Ok(CLASSIFIER),
            FlowsVariant::ByCpuAtomic => return Ok(CLASSIFIER_ATOMIC),
            FlowsVariant::PerCpu
            | FlowsVariant::Shared
            | FlowsVariant::PerCpuIter
            | FlowsVariant::ByCpuNoCache
            | FlowsVariant::ByCpuVerdict1
            | FlowsVariant::ByCpuGenFetch => {}
        }
        #[cfg(feature = "testing")]
        {
            Ok(match self {
                FlowsVariant::PerCpu => {
                    include_bytes!(concat!(env!("OUT_DIR"), "/lachesis_percpu.bpf.o"))
                }
                FlowsVariant::Shared => {
                    include_bytes!(concat!(env!("OUT_DIR"), "/lachesis_shared.bpf.o"))
                }
                FlowsVariant::ByCpuNoCache => {
                    include_bytes!(concat!(env!("OUT_DIR"), "/lachesis_nocache.bpf.o"))
                }
                FlowsVariant::ByCpuVerdict1 => {
                    include_bytes!(concat!(env!("OUT_DIR"), "/lachesis_verdict1.bpf.o"))
                }
                FlowsVariant::ByCpuGenFetch => {
                    include_bytes!(concat!(env!("OUT_DIR"), "/lachesis_genfetch.bpf.o"))
                }
                _ => include_bytes!(concat!(env!("OUT_DIR"), "/lachesis_iter.bpf.o")),
            })
        }
        #[cfg(not(feature = "testing"))]
        Err(Error::Invalid {
            what: "flows variant",
            detail: format!(
                "{} is built only with the datapath's `testing` feature",
                self.name()
            ),
        })
    }
}

/// File name of the pinned `flows` map inside the pin directory.
const FLOWS_PIN: &str = "flows";
/// Prefix of a retired (incompatible) `flows` pin awaiting its final drain
/// (bpffs refuses dots in names).
const RETIRED_PREFIX: &str = "flows_retired_";

/// How the datapath is set up: the `datapath` section of the agent's
/// configuration (DESIGN §13), one field per key.
#[serde_inline_default]
#[serde_as]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping of datapath keys")]
pub struct DatapathConfig {
    /// Interfaces whose names start with one of these are metered (Nova's
    /// taps).
    #[serde_inline_default(vec!["tap".to_owned()])]
    #[serde_as(as = "form::List<form::Interface>")]
    pub interface_prefixes: Vec<String>,
    /// Extra interfaces metered by exact name.
    #[serde_inline_default(Vec::new())]
    #[serde_as(as = "form::List<form::Interface>")]
    pub interfaces: Vec<String>,
    /// Our directory on bpffs; pins live here (`flows`, `links/`).
    #[serde_inline_default(PathBuf::from("/sys/fs/bpf/lachesis"))]
    #[serde_as(as = "form::Path")]
    pub bpffs_dir: PathBuf,
    /// Kernel memory budget for `flows` (DESIGN §4.5).
    #[serde_inline_default(DEFAULT_FLOWS_MEMORY_BUDGET)]
    #[serde_as(as = "form::Size")]
    pub flows_memory_budget: u64,
    /// TCX, legacy cls_bpf, or the best the kernel offers.
    #[serde_inline_default(AttachMode::Auto)]
    #[serde_as(as = "form::OneOf")]
    pub attach_mode: AttachMode,
    /// Exact `flows` size, overriding the budget (benchmarks and tests; no
    /// key).
    #[serde(skip)]
    pub flows_max_entries: Option<u32>,
}

impl Default for DatapathConfig {
    fn default() -> Self {
        lachesis_config::defaults()
    }
}

/// What happened to the pinned `flows` map at load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowsPin {
    /// No pin existed; a fresh map was created and pinned.
    Created,
    /// A compatible pin was adopted: counting continues in the same map.
    Reused,
    /// An incompatible pin was retired; its bytes must be drained once more
    /// after the new programs replace the old ones (see [`RetiredFlows`]).
    Replaced,
}

pub(crate) struct Loaded {
    pub obj: Object,
    pub flows: MapHandle,
    /// How `flows` is keyed and valued.
    pub flows_layout: FlowsLayout,
    pub flows_pin: FlowsPin,
    pub retired: Vec<RetiredFlows>,
    pub max_entries: u32,
    pub possible_cpus: usize,
    pub mode: AttachMode,
}

fn possible_cpus() -> Result<usize> {
    libbpf_rs::num_possible_cpus().map_err(Error::bpf("count possible CPUs"))
}

/// A pinned map can be adopted only if everything the kernel fixed at its
/// creation matches; anything else would misread keys or values. A per-CPU
/// map of the previous layout never is: it is retired and drained once.
fn compatible(info: &MapInfo, layout: FlowsLayout, max_entries: u32, cpus: usize) -> bool {
    FlowsLayout::of(
        info.map_type(),
        info.info.key_size,
        info.info.value_size,
        cpus,
    ) == Some(layout)
        && info.info.max_entries == max_entries
        && info.info.map_flags == 0
}

fn open_retired(dir: &Path) -> Result<Vec<RetiredFlows>> {
    let mut out = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(Error::io(format!("list {}", dir.display())))?;
    for entry in entries {
        let entry = entry.map_err(Error::io(format!("list {}", dir.display())))?;
        let name = entry.file_name();
        if name.to_string_lossy().starts_with(RETIRED_PREFIX) {
            let path = entry.path();
            let handle = MapHandle::from_pinned_path(&path).map_err(Error::bpf(format!(
                "open retired flows pin {}",
                path.display()
            )))?;
            out.push(RetiredFlows::new(handle, path)?);
        }
    }
    out.sort_by(|a, b| a.path().cmp(b.path()));
    Ok(out)
}

/// The iterator variant reads `possible_cpus` per-CPU slots per entry; its
/// only read-only global is that count (the verifier takes it as a
/// constant). Objects without the iterator have no `.rodata`.
fn set_possible_cpus(map: &mut libbpf_rs::OpenMapMut<'_>, cpus: usize) -> Result<()> {
    let cpus = u32::try_from(cpus).map_err(|_| Error::Invalid {
        what: "possible CPU count",
        detail: format!("{cpus} does not fit a u32"),
    })?;
    match map.initial_value_mut() {
        Some(data) if data.len() == 4 => {
            data.copy_from_slice(&cpus.to_ne_bytes());
            Ok(())
        }
        other => Err(Error::Invalid {
            what: "classifier object",
            detail: format!(
                "its .rodata holds {} bytes; only the u32 possible_cpus is expected",
                other.map_or(0, |d| d.len())
            ),
        }),
    }
}

/// The loaded `flows` is what `variant` declares (a build that drifted
/// from the layout the drain reads would misread every entry).
fn check_layout(
    flows: &MapHandle,
    layout: FlowsLayout,
    possible_cpus: usize,
    variant: FlowsVariant,
) -> Result<()> {
    if FlowsLayout::of_handle(flows, possible_cpus) == Some(layout) {
        return Ok(());
    }
    Err(Error::Invalid {
        what: "classifier object",
        detail: format!(
            "its flows map (type {:?}, key {} B, value {} B) is not the {} layout",
            flows.map_type(),
            flows.key_size(),
            flows.value_size(),
            variant.name()
        ),
    })
}

pub(crate) fn load(config: &DatapathConfig, variant: FlowsVariant) -> Result<Loaded> {
    let possible_cpus = possible_cpus()?;
    let mut open = ObjectBuilder::default()
        .open_memory(variant.object()?)
        .map_err(Error::bpf("open the classifier object"))?;
    if !open.maps().any(|m| m.name() == FLOWS_PIN) {
        return Err(Error::Invalid {
            what: "classifier object",
            detail: "has no map named flows".into(),
        });
    }
    let flows_layout = variant.layout(possible_cpus);
    let max_entries = config.flows_max_entries.unwrap_or_else(|| {
        flows_max_entries(
            config.flows_memory_budget,
            u32::try_from(possible_cpus).unwrap_or(u32::MAX),
        )
    });
    let mode = config.attach_mode.resolve()?;
    bpffs::ensure_dir(&config.bpffs_dir)?;

    // A retired pin left by a crash mid-swap still holds undrained bytes.
    let mut retired = open_retired(&config.bpffs_dir)?;
    let pin = config.bpffs_dir.join(FLOWS_PIN);
    let mut reuse = None;
    let mut flows_pin = FlowsPin::Created;
    if pin.exists() {
        let old = MapHandle::from_pinned_path(&pin)
            .map_err(Error::bpf(format!("open pinned flows {}", pin.display())))?;
        let info = old.info().map_err(Error::bpf("read pinned flows info"))?;
        if compatible(&info, flows_layout, max_entries, possible_cpus) {
            reuse = Some(old);
            flows_pin = FlowsPin::Reused;
        } else {
            // Keep it reachable under another name until its final drain,
            // so even a crash before that drain loses nothing.
            let nanos = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            let dest = config.bpffs_dir.join(format!("{RETIRED_PREFIX}{nanos}"));
            // bpffs has no rename: pin the second name first, then drop the
            // first, so there is no instant without a pin.
            let mut old = old;
            old.pin(&dest).map_err(Error::bpf(format!(
                "pin retired flows at {}",
                dest.display()
            )))?;
            std::fs::remove_file(&pin).map_err(Error::io(format!("unpin {}", pin.display())))?;
            retired.push(RetiredFlows::new(old, dest)?);
            flows_pin = FlowsPin::Replaced;
        }
    }

    for mut map in open.maps_mut() {
        if map.name().to_string_lossy().ends_with(".rodata") {
            set_possible_cpus(&mut map, possible_cpus)?;
        }
        if map.name() == crate::verdict::GEN_MAP {
            // One generation line per CPU id the programs can run on.
            let lines = u32::try_from(possible_cpus).unwrap_or(u32::MAX);
            map.set_max_entries(lines)
                .map_err(Error::bpf("size verdict_gen"))?;
        }
        if map.name() == FLOWS_PIN {
            map.set_max_entries(max_entries)
                .map_err(Error::bpf("size flows"))?;
            if let Some(old) = &reuse {
                map.reuse_fd(old.as_fd())
                    .map_err(Error::bpf("reuse pinned flows"))?;
            }
        }
    }
    if mode == AttachMode::Tc {
        // Without TCX the programs load as a `SEC("tc")` one would, with
        // expected attach type 0. Debian 12's 6.1 does not check it for a
        // classifier (the object as built, TCX attach type and all, loads
        // there too: seen under qemu); older kernels, never booted here,
        // are not handed a number they do not know. cls_bpf ignores it.
        for mut prog in open.progs_mut() {
            prog.set_attach_type(ProgramAttachType::CgroupInetIngress);
        }
    }
    let mut obj = open
        .load()
        .map_err(Error::bpf("load the classifier (verifier)"))?;

    let mut flows = None;
    for mut map in obj.maps_mut() {
        if map.name() == FLOWS_PIN {
            if reuse.is_none() {
                map.pin(&pin)
                    .map_err(Error::bpf(format!("pin flows at {}", pin.display())))?;
            }
            flows = Some(MapHandle::try_from(&*map).map_err(Error::bpf("dup flows fd"))?);
        }
    }
    let flows = flows.ok_or_else(|| Error::Invalid {
        what: "classifier object",
        detail: "has no map named flows".into(),
    })?;
    check_layout(&flows, flows_layout, possible_cpus, variant)?;
    if flows_pin == FlowsPin::Created && !retired.is_empty() {
        flows_pin = FlowsPin::Replaced;
    }
    Ok(Loaded {
        obj,
        flows,
        flows_layout,
        flows_pin,
        retired,
        max_entries,
        possible_cpus,
        mode,
    })
}

#[cfg(all(test, feature = "testing"))]
mod tests {
    use super::*;

    /// `BPF_STX | BPF_ATOMIC | BPF_DW` with `BPF_FETCH` in its immediate:
    /// an atomic read-modify-write that returns the old value, which the
    /// JITs emit fully ordered.
    fn ordered_fetches(variant: FlowsVariant) -> usize {
        let open = ObjectBuilder::default()
            .open_memory(variant.object().unwrap())
            .unwrap();
        let prog = open
            .progs()
            .find(|p| p.name() == "lachesis_tx")
            .expect("the tx program");
        prog.insns()
            .iter()
            .filter(|i| i.code == 0xdb && i.imm & 0x01 != 0)
            .count()
    }

    /// What `bpf/lachesis.bpf.c` says each build does with the verdict
    /// cache's generation: an ordered atomic fetch where the CPU may
    /// reorder loads (every target but x86-64, and the build tests run in
    /// its place here), a plain load on x86-64.
    #[test]
    fn the_generation_load_is_ordered_where_the_build_says() {
        assert_eq!(ordered_fetches(FlowsVariant::ByCpuGenFetch), 1);
        let plain = usize::from(cfg!(target_arch = "x86_64"));
        assert_eq!(ordered_fetches(FlowsVariant::ByCpu), 1 - plain);
        assert_eq!(ordered_fetches(FlowsVariant::ByCpuNoCache), 0);
    }
}
