//! Userspace handle of the Lachesis classifier (DESIGN §4): load the object,
//! size and pin `flows`, write the metadata maps, attach to taps, drain.
//!
//! This is the only crate that talks `bpf()`. Kernel requirements: BPF with
//! BTF, TC (clsact), per-CPU hash batch lookups (5.6+) and lookup-and-delete
//! on per-CPU hash maps (5.14+); TCX attach needs 6.6+ and is probed at run
//! time, falling back to cls_bpf.

#![deny(missing_docs)]

mod attach;
mod bpffs;
#[cfg(test)]
mod btf_layout;
mod drain;
mod error;
#[cfg(feature = "testing")]
mod iter_drain;
mod libbpf_log;
mod lookup_delete;
mod maps;
mod object;
mod qdisc;
mod sizing;
#[cfg(feature = "testing")]
mod testrun;
mod verdict;

use std::net::IpAddr;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

#[cfg(feature = "testing")]
use lachesis_abi::VerdictSlot;
use lachesis_abi::{Direction, EndpointValue, EntryKey, Mac, Prefix, StatReason, Zone};
use libbpf_rs::{MapCore, MapHandle, Object, Program};

pub use attach::{
    ifindex, ifname, interfaces, tc_handle_for, AttachMode, AttachOutcome, Attachment, TC_HANDLE,
    TC_PRIORITY,
};
pub use drain::{DrainBuffer, FlowsLayout, RetiredFlows};
pub use error::{Error, Result};
#[cfg(feature = "testing")]
pub use iter_drain::{memlock, probe_iterator_targets, IterDrain};
pub use lookup_delete::FailedDelete;
pub use object::{DatapathConfig, FlowsPin, FlowsVariant};
pub use sizing::{
    flows_kernel_bytes, flows_max_entries, DEFAULT_FLOWS_MEMORY_BUDGET, FLOWS_BUCKET_BYTES,
    FLOWS_ELEMENT_BYTES, FLOWS_MAP_OVERHEAD, FLOWS_MAX_ENTRIES, FLOWS_MIN_ENTRIES,
    FLOWS_PER_CPU_BYTES,
};
#[cfg(feature = "testing")]
pub use testrun::{baseline_object, Baseline, TestRun};

pub use maps::MapFill;
use maps::MetadataMaps;

/// Kernel stats counters, indexed by [`StatReason`] code.
pub type Stats = [u64; StatReason::COUNT as usize];

fn prog_name(dir: Direction) -> &'static str {
    match dir {
        Direction::Tx => "lachesis_tx",
        Direction::Rx => "lachesis_rx",
    }
}

/// The loaded classifier and its maps.
#[derive(Debug)]
pub struct Datapath {
    obj: Object,
    flows: MapHandle,
    /// How `flows` is keyed and valued.
    flows_layout: FlowsLayout,
    variant: FlowsVariant,
    stats: MapHandle,
    meta: MetadataMaps,
    bpffs_dir: PathBuf,
    /// What is ours on an interface: this directory's `flows` maps and
    /// cls_bpf handle (attach.rs).
    ours: attach::Ours,
    mode: AttachMode,
    possible_cpus: usize,
    max_entries: u32,
}

/// Makes sure `dir` exists on a bpffs, mounting bpffs at `/sys/fs/bpf` when
/// `dir` is below it and nothing is mounted there yet (what
/// [`Datapath::load`] does first): for a caller that must open the
/// directory before loading (the agent locks it, one agent per directory).
pub fn ensure_bpffs_dir(dir: &Path) -> Result<()> {
    bpffs::ensure_dir(dir)
}

/// Checks, changing nothing, that [`ensure_bpffs_dir`] would succeed for
/// `dir`: it is on a bpffs (or its nearest existing ancestor is), or it is
/// below `/sys/fs/bpf` with nothing mounted there yet.
pub fn check_bpffs_dir(dir: &Path) -> Result<()> {
    bpffs::check_dir(dir)
}

/// The kernel id of a map.
fn map_id(map: &MapHandle) -> Result<u32> {
    Ok(map.info().map_err(Error::bpf("read a map's info"))?.info.id)
}

fn handle(obj: &Object, name: &str) -> Result<MapHandle> {
    let map = obj
        .maps()
        .find(|m| m.name() == name)
        .ok_or_else(|| Error::Invalid {
            what: "classifier object",
            detail: format!("has no map named {name}"),
        })?;
    MapHandle::try_from(&map).map_err(Error::bpf(format!("dup {name} fd")))
}

impl Datapath {
    /// Loads the classifier with fresh metadata maps and the pinned `flows`
    /// map reused when compatible (DESIGN §4.4). Retired incompatible maps
    /// are returned: drain each once more after [`Datapath::attach`] has
    /// replaced the old programs on every tap, then remove it.
    pub fn load(config: &DatapathConfig) -> Result<(Datapath, FlowsPin, Vec<RetiredFlows>)> {
        Self::load_object(config, FlowsVariant::production())
    }

    /// [`Datapath::load`] with another `flows` variant (`make bench-cores`).
    /// A pin of another variant is incompatible: it is retired like any.
    #[cfg(feature = "testing")]
    pub fn load_variant(
        config: &DatapathConfig,
        variant: FlowsVariant,
    ) -> Result<(Datapath, FlowsPin, Vec<RetiredFlows>)> {
        Self::load_object(config, variant)
    }

    fn load_object(
        config: &DatapathConfig,
        variant: FlowsVariant,
    ) -> Result<(Datapath, FlowsPin, Vec<RetiredFlows>)> {
        libbpf_log::install_once();
        let loaded = object::load(config, variant)?;
        let meta = MetadataMaps {
            endpoints: handle(&loaded.obj, "endpoints")?,
            zones_v4: handle(&loaded.obj, "zones_v4")?,
            zones_v6: handle(&loaded.obj, "zones_v6")?,
            amphora_ips: handle(&loaded.obj, "amphora_ips")?,
            tap_ports: handle(&loaded.obj, "tap_ports")?,
            verdict: if loaded.obj.maps().any(|m| m.name() == verdict::GEN_MAP) {
                Some(verdict::VerdictGen::map(
                    &handle(&loaded.obj, verdict::GEN_MAP)?,
                    loaded.possible_cpus,
                )?)
            } else {
                None
            },
        };
        let stats = handle(&loaded.obj, "stats")?;
        // Ours is what counts into this directory's `flows`: the pinned map
        // (a predecessor's programs use it when the pin was reused) and any
        // retired here (a predecessor's programs use that one until they
        // are replaced).
        let mut flows_maps = vec![map_id(&loaded.flows)?];
        for r in &loaded.retired {
            flows_maps.push(r.map_id()?);
        }
        // The handle follows the directory's canonical spelling, so
        // `/sys/fs/bpf/x/` and `/sys/fs/bpf/x` share their filters.
        let canonical =
            std::fs::canonicalize(&config.bpffs_dir).unwrap_or_else(|_| config.bpffs_dir.clone());
        // The programs known to be ours without opening any by id (which
        // needs CAP_SYS_ADMIN): our two, and what our pinned links run.
        let progs: Vec<Program<'_>> = loaded.obj.progs().collect();
        let own: Vec<(std::os::fd::BorrowedFd<'_>, Direction)> = progs
            .iter()
            .filter_map(|p| {
                [Direction::Tx, Direction::Rx]
                    .into_iter()
                    .find(|d| p.name() == prog_name(*d))
                    .map(|d| (p.as_fd(), d))
            })
            .collect();
        let known = attach::known_programs(&own, &config.bpffs_dir.join("links"));
        drop(own);
        drop(progs);
        let ours = attach::Ours {
            flows_maps,
            known,
            tc_handle: attach::tc_handle_for(&canonical),
        };
        let dp = Datapath {
            obj: loaded.obj,
            flows: loaded.flows,
            flows_layout: loaded.flows_layout,
            variant,
            stats,
            meta,
            bpffs_dir: config.bpffs_dir.clone(),
            ours,
            mode: loaded.mode,
            possible_cpus: loaded.possible_cpus,
            max_entries: loaded.max_entries,
        };
        Ok((dp, loaded.flows_pin, loaded.retired))
    }

    /// Effective `flows` capacity (exported as a gauge).
    #[must_use]
    pub fn flows_max_entries(&self) -> u32 {
        self.max_entries
    }

    /// Number of possible CPUs the per-CPU maps are sized for.
    #[must_use]
    pub fn possible_cpus(&self) -> usize {
        self.possible_cpus
    }

    /// How `flows` is keyed and valued.
    #[must_use]
    pub fn flows_layout(&self) -> FlowsLayout {
        self.flows_layout
    }

    /// The `flows` variant loaded (the atomic build on `PREEMPT_RT`).
    #[must_use]
    pub fn variant(&self) -> FlowsVariant {
        self.variant
    }

    /// The attach mode chosen for this kernel.
    #[must_use]
    pub fn attach_mode(&self) -> AttachMode {
        self.mode
    }

    /// Our bpffs directory.
    #[must_use]
    pub fn bpffs_dir(&self) -> &Path {
        &self.bpffs_dir
    }

    /// The cls_bpf filter handle of this bpffs directory
    /// ([`tc_handle_for`]; [`TC_HANDLE`] for the default one).
    #[must_use]
    pub fn tc_handle(&self) -> u32 {
        self.ours.tc_handle
    }

    fn links_dir(&self) -> PathBuf {
        self.bpffs_dir.join("links")
    }

    fn tcx<'a>(&'a self, links_dir: &'a Path) -> attach::Tcx<'a> {
        attach::Tcx {
            links_dir,
            ours: &self.ours,
        }
    }

    pub(crate) fn program(&self, dir: Direction) -> Program<'_> {
        let want = prog_name(dir);
        self.obj
            .progs()
            .find(|p| p.name() == want)
            .expect("the object defines both programs")
    }

    // ---- metadata writers -------------------------------------------------

    /// Binds a VM MAC to its interned tenant id (never 0) and flags.
    pub fn upsert_endpoint(&self, mac: Mac, value: EndpointValue) -> Result<()> {
        self.meta.upsert_endpoint(mac, value)
    }

    /// The binding of a VM MAC as the kernel holds it (`None`: unbound).
    pub fn endpoint(&self, mac: Mac) -> Result<Option<EndpointValue>> {
        self.meta.endpoint(mac)
    }

    /// Removes a binding; `false` if it was not there.
    pub fn delete_endpoint(&self, mac: Mac) -> Result<bool> {
        self.meta.delete_endpoint(mac)
    }

    /// Writes a trie row; tenant id 0 is the global scope.
    pub fn upsert_zone(&self, tenant_id: u32, prefix: Prefix, zone: Zone) -> Result<()> {
        self.meta.upsert_zone(tenant_id, prefix, zone)
    }

    /// Deletes a trie row; `false` if it was not there.
    pub fn delete_zone(&self, tenant_id: u32, prefix: Prefix) -> Result<bool> {
        self.meta.delete_zone(tenant_id, prefix)
    }

    /// Marks an amphora data-port address of the LB owner's tenant.
    pub fn upsert_amphora(&self, tenant_id: u32, addr: IpAddr) -> Result<()> {
        self.meta.upsert_amphora(tenant_id, addr)
    }

    /// Removes an amphora address; `false` if it was not there.
    pub fn delete_amphora(&self, tenant_id: u32, addr: IpAddr) -> Result<bool> {
        self.meta.delete_amphora(tenant_id, addr)
    }

    /// Records the MAC of the Neutron port behind the tap `ifindex`: the
    /// classifier keys a group frame that tap delivers (rx) by it, so the
    /// frame is attributed to the port that received it. Write it before
    /// attaching the tap (a frame counted before keeps its group address).
    pub fn set_tap_port(&self, ifindex: u32, mac: Mac) -> Result<()> {
        self.meta.set_tap_port(ifindex, mac)
    }

    /// The port MAC recorded for tap `ifindex`, as the kernel holds it.
    pub fn tap_port(&self, ifindex: u32) -> Result<Option<Mac>> {
        self.meta.tap_port(ifindex)
    }

    /// Forgets tap `ifindex`'s port MAC; `false` if none was recorded.
    pub fn delete_tap_port(&self, ifindex: u32) -> Result<bool> {
        self.meta.delete_tap_port(ifindex)
    }

    /// Entries and capacity of `endpoints`, `zones_v4`, `zones_v6`,
    /// `amphora_ips` and `tap_ports` (walked key by key; see [`MapFill`]).
    #[must_use]
    pub fn metadata_fill(&self) -> [MapFill; 5] {
        self.meta.fill()
    }

    /// The verdict cache's current generation (`None`: built without the
    /// cache). Tests.
    #[cfg(feature = "testing")]
    #[must_use]
    pub fn verdict_generation(&self) -> Option<u64> {
        self.meta.verdict.as_ref().map(verdict::VerdictGen::current)
    }

    /// Every slot of the verdict cache, per CPU (`None`: built without the
    /// cache). Tests.
    #[cfg(feature = "testing")]
    pub fn verdict_slots(&self) -> Result<Option<Vec<Vec<VerdictSlot>>>> {
        if self.meta.verdict.is_none() {
            return Ok(None);
        }
        let map = handle(&self.obj, verdict::SLOTS_MAP)?;
        let mut per_cpu = vec![Vec::new(); self.possible_cpus];
        for i in 0..map.max_entries() {
            let values = map
                .lookup_percpu(&i.to_ne_bytes(), libbpf_rs::MapFlags::ANY)
                .map_err(Error::bpf(format!("read verdict slot {i}")))?
                .unwrap_or_default();
            for (cpu, v) in values.iter().enumerate().take(self.possible_cpus) {
                per_cpu[cpu].push(bytemuck::pod_read_unaligned(v));
            }
        }
        Ok(Some(per_cpu))
    }

    /// Overwrites slot `index` of CPU `cpu`'s verdict cache (tests: a fill
    /// preempted half-way, a torn slot).
    #[cfg(feature = "testing")]
    pub fn write_verdict_slot(&self, cpu: usize, index: u32, slot: VerdictSlot) -> Result<()> {
        let map = handle(&self.obj, verdict::SLOTS_MAP)?;
        let key = index.to_ne_bytes();
        let mut values = map
            .lookup_percpu(&key, libbpf_rs::MapFlags::ANY)
            .map_err(Error::bpf(format!("read verdict slot {index}")))?
            .ok_or_else(|| Error::Invalid {
                what: "verdict slot",
                detail: format!("{index} is past the cache"),
            })?;
        let value = values.get_mut(cpu).ok_or_else(|| Error::Invalid {
            what: "verdict slot CPU",
            detail: format!("{cpu} of {}", self.possible_cpus),
        })?;
        *value = bytemuck::bytes_of(&slot).to_vec();
        map.update_percpu(&key, &values, libbpf_rs::MapFlags::ANY)
            .map_err(Error::bpf(format!("write verdict slot {index}")))
    }

    // ---- draining ---------------------------------------------------------

    /// Reads every `flows` entry with batched lookups into `buf` (reused).
    /// Never clears the map: read-don't-clear makes crashes lossless.
    pub fn drain(&self, buf: &mut DrainBuffer) -> Result<()> {
        drain::drain_batched(self.flows.as_fd(), self.flows_layout, buf)
    }

    /// The map-element iterator drain of [`FlowsVariant::PerCpuIter`]:
    /// the kernel folds each entry's per-CPU slots and emits only those
    /// last seen at or after `since_ns` (benchmark variant; the other
    /// objects have no iterator program and fail here).
    #[cfg(feature = "testing")]
    pub fn drain_active_since(&self, since_ns: u64, buf: &mut DrainBuffer) -> Result<IterDrain> {
        iter_drain::drain(&self.obj, &self.flows, since_ns, buf)
    }

    /// The kernel's own accounting of `flows` (`memlock` in its fdinfo,
    /// the map's memory usage as the kernel computes it), in bytes.
    #[cfg(feature = "testing")]
    pub fn flows_memlock(&self) -> Result<u64> {
        iter_drain::memlock(self.flows.as_fd())
    }

    /// The same read, one key at a time (benchmark contrast).
    #[cfg(feature = "testing")]
    pub fn drain_iterated(&self, buf: &mut DrainBuffer) -> Result<()> {
        drain::drain_iterated(&self.flows, self.flows_layout, buf)
    }

    /// Kernel stats counters.
    pub fn stats(&self) -> Result<Stats> {
        drain::read_stats(&self.stats)
    }

    /// Deletes the `flows` entries of `keys`, each read and removed in one
    /// kernel command (lookup-and-delete, Linux 5.14+), and leaves their
    /// final readings in `buf.entries`: nothing an entry counts between the
    /// last drain and its deletion goes unread (DESIGN §9). Keys without an
    /// entry yield nothing; keys the kernel refused are returned (their
    /// entries are untouched). Every kernel flow delete goes through here:
    /// pressure relief, the ghost sweep, unresolved eviction.
    pub fn lookup_and_delete_flows(
        &self,
        keys: &[EntryKey],
        buf: &mut DrainBuffer,
    ) -> Vec<FailedDelete> {
        lookup_delete::lookup_and_delete(self.flows.as_fd(), self.flows_layout, keys, buf)
    }

    /// Deletes one `flows` entry without reading it: whatever it counted
    /// since the last drain is lost. Tests only; the agent deletes with
    /// [`Datapath::lookup_and_delete_flows`]. `false` if absent.
    #[cfg(feature = "testing")]
    pub fn delete_flow(&self, key: &EntryKey) -> Result<bool> {
        if self.flows_layout == FlowsLayout::ByCpu {
            maps::delete_flow(&self.flows, bytemuck::bytes_of(key))
        } else {
            maps::delete_flow(&self.flows, bytemuck::bytes_of(&key.key))
        }
    }

    /// Writes a `flows` entry: the sub-entry `key` of the (flow key, CPU)
    /// map; `value` in CPU 0's slot and zeros in the others for a per-CPU
    /// map, `value` itself for a shared one, under `key.key` (benchmarks
    /// and tests that need a full map).
    #[cfg(feature = "testing")]
    pub fn write_flow_for_test(
        &self,
        key: &EntryKey,
        value: &lachesis_abi::FlowCounters,
    ) -> Result<()> {
        let flags = libbpf_rs::MapFlags::ANY;
        let written = match self.flows_layout {
            FlowsLayout::ByCpu => {
                let v = lachesis_abi::FlowValue {
                    counters: *value,
                    reserved: [0; 3],
                };
                self.flows
                    .update(bytemuck::bytes_of(key), bytemuck::bytes_of(&v), flags)
            }
            FlowsLayout::Shared => self.flows.update(
                bytemuck::bytes_of(&key.key),
                bytemuck::bytes_of(value),
                flags,
            ),
            FlowsLayout::PerCpu { slots } => {
                let slot = bytemuck::bytes_of(value).to_vec();
                let mut values = vec![vec![0u8; slot.len()]; slots];
                values[0] = slot;
                self.flows
                    .update_percpu(bytemuck::bytes_of(&key.key), &values, flags)
            }
        };
        written.map_err(Error::bpf("write flows entry"))
    }

    // ---- attach -----------------------------------------------------------
    //
    // "Ours" is what an agent of this bpffs directory attached: programs
    // counting into this directory's `flows` maps, TCX links pinned under
    // its `links/` (attach.rs). Programs of another directory's agent on
    // the same interface are never replaced, detached or removed.

    /// Attaches both programs to `ifname`, atomically replacing any of ours
    /// already there, and removes ours of the other attach kind (a mode
    /// change must not leave two copies counting). Another agent's programs
    /// on `ifname` stay: ours are attached beside them.
    pub fn attach(&self, ifname: &str) -> Result<[AttachOutcome; 2]> {
        let idx = ifindex(ifname)?;
        let links_dir = self.links_dir();
        let tcx = self.tcx(&links_dir);
        let mut out = [AttachOutcome::Attached; 2];
        for (slot, dir) in out.iter_mut().zip([Direction::Tx, Direction::Rx]) {
            let prog = self.program(dir);
            *slot = if self.mode == AttachMode::Tcx {
                let outcome = tcx.attach(&prog, idx, dir)?;
                attach::tc_detach(&prog, &self.ours, idx, dir)?;
                outcome
            } else {
                let outcome = attach::tc_attach(&prog, &self.ours, idx, dir)?;
                tcx.detach(idx, dir)?;
                outcome
            };
        }
        Ok(out)
    }

    /// Removes every attachment of ours from `ifname`; `true` if any was there.
    pub fn detach(&self, ifname: &str) -> Result<bool> {
        self.detach_index(ifindex(ifname)?)
    }

    fn detach_index(&self, idx: u32) -> Result<bool> {
        let links_dir = self.links_dir();
        let mut any = false;
        for dir in [Direction::Tx, Direction::Rx] {
            any |= self.tcx(&links_dir).detach(idx, dir)?;
            any |= attach::tc_detach(&self.program(dir), &self.ours, idx, dir)?;
        }
        Ok(any)
    }

    /// Every attachment of ours in this network namespace.
    pub fn attachments(&self) -> Result<Vec<Attachment>> {
        let fd = self.program(Direction::Tx);
        let mut out = Vec::new();
        for (idx, _) in interfaces()? {
            out.extend(attach::list(fd.as_fd(), &self.ours, idx)?);
        }
        Ok(out)
    }

    /// Programs of another agent (the same classifier counting into another
    /// bpffs directory's maps) on `ifname`: left alone, and counting beside
    /// ours. TCX programs and cls_bpf filters at the handles ours may use.
    pub fn foreign_attachments(&self, ifname: &str) -> Result<Vec<Attachment>> {
        let fd = self.program(Direction::Tx);
        attach::list_foreign(fd.as_fd(), &self.ours, ifindex(ifname)?)
    }

    /// Removes ours from every interface whose name does not `qualify`, and
    /// link pins of ours whose interface is gone. Returns what was removed.
    /// Only ever ours: another agent's programs, on any interface, stay.
    pub fn remove_unqualified(&self, qualify: impl Fn(&str) -> bool) -> Result<Vec<Attachment>> {
        let mut removed = Vec::new();
        for a in self.attachments()? {
            if !a.ifname.as_deref().is_some_and(&qualify) {
                self.detach_index(a.ifindex)?;
                removed.push(a);
            }
        }
        self.tcx(&self.links_dir()).prune_stale_pins()?;
        Ok(removed)
    }

    /// Attaches both programs to `ifname` as cls_bpf filters at
    /// [`TC_HANDLE`], as every build did before handles were per bpffs
    /// directory (the upgrade test's predecessor).
    #[cfg(feature = "testing")]
    pub fn attach_at_legacy_tc_handle(&self, ifname: &str) -> Result<()> {
        let idx = ifindex(ifname)?;
        for dir in [Direction::Tx, Direction::Rx] {
            attach::tc_attach_at_legacy_handle(&self.program(dir), idx, dir)?;
        }
        Ok(())
    }

    /// The program of `dir`, for tests that attach it by hand (to build
    /// what an older agent left on an interface).
    #[cfg(feature = "testing")]
    #[must_use]
    pub fn program_fd(&self, dir: Direction) -> std::os::fd::BorrowedFd<'_> {
        use libbpf_rs::AsRawLibbpf;
        // SAFETY: the program pointer is libbpf's own and alive as long as
        // `self.obj`; bpf_program__fd only reads it.
        let fd =
            unsafe { libbpf_sys::bpf_program__fd(self.program(dir).as_libbpf_object().as_ptr()) };
        assert!(fd >= 0, "a loaded program has an fd");
        // SAFETY: the descriptor is owned by `self.obj`, which outlives the
        // returned borrow.
        unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }
    }

    /// Runs a program once per `repeat` over `frame` through the kernel's
    /// program test-run facility (no interface involved).
    #[cfg(feature = "testing")]
    pub fn test_run(&self, dir: Direction, frame: &[u8], repeat: u32) -> Result<TestRun> {
        let want = prog_name(dir);
        let prog = self
            .obj
            .progs_mut()
            .find(|p| p.name() == want)
            .expect("the object defines both programs");
        testrun::run(&prog, frame, repeat)
    }
}
