//! A `flows` map in memory that counts between reads, with a shared log of
//! its calls and of the owner's ledger steps (tests only). The live map is
//! the (flow key, CPU) layout on one CPU (every entry is CPU 0's sub-entry);
//! retired maps are of the previous per-CPU layout (read folded).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use lachesis_abi::{EntryKey, FlowCounters, FlowKey, Mac, StatReason};
use lachesis_datapath::{DrainBuffer, Stats};

use super::kernel::{FlowKernel, KernelError, RetiredMap, Step};

/// One recorded event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    Drain,
    LookupDelete(Vec<FlowKey>),
    DeleteBinding(Mac),
    RetiredDrain(u8),
    RetiredRemoved(u8),
    Ledger(Step),
}

/// What the fake kernel holds.
#[derive(Debug, Default)]
pub struct State {
    pub flows: BTreeMap<FlowKey, FlowCounters>,
    pub capacity: u32,
    pub stats: Stats,
    pub clock: u64,
    /// Every byte ever counted, in every map: the independent truth.
    pub counted: u64,
    pub log: Vec<Call>,
    /// Bytes the datapath counts on a key while an evict settle runs (an
    /// entry still counting between the sweep's drain and its deletion).
    pub count_during_evict: Option<(FlowKey, u64)>,
    /// Each retired map's entries, by id.
    pub retired: BTreeMap<u8, BTreeMap<FlowKey, FlowCounters>>,
}

/// A handle on the shared fake kernel (the owner holds one, the test another).
#[derive(Debug, Clone, Default)]
pub struct FakeKernel(pub Arc<Mutex<State>>);

impl FakeKernel {
    pub fn new(capacity: u32) -> Self {
        let k = FakeKernel::default();
        k.state().capacity = capacity;
        k.state().clock = 1_000;
        k
    }

    pub fn state(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The datapath counts `bytes` on `key` (creating the entry).
    pub fn count(&self, key: FlowKey, bytes: u64) {
        let mut s = self.state();
        s.clock += 10;
        let now = s.clock;
        let e = s.flows.entry(key).or_insert(FlowCounters {
            created_ns: now,
            ..FlowCounters::default()
        });
        e.bytes += bytes;
        e.packets += 1;
        e.last_seen_ns = now;
        s.counted += bytes;
        s.stats[usize::from(StatReason::Vlan.code())] += 1;
    }

    /// A retired map `id` holding `bytes` on `key`, counted before this boot.
    pub fn retired(&self, id: u8, key: FlowKey, bytes: u64) -> FakeRetired {
        let mut s = self.state();
        s.clock += 10;
        let now = s.clock;
        s.retired.entry(id).or_default().insert(
            key,
            FlowCounters {
                bytes,
                packets: 1,
                last_seen_ns: now,
                created_ns: now,
            },
        );
        s.counted += bytes;
        drop(s);
        FakeRetired {
            id,
            kernel: self.clone(),
        }
    }

    pub fn log(&self) -> Vec<Call> {
        self.state().log.clone()
    }

    pub fn clear_log(&self) {
        self.state().log.clear();
    }
}

/// The one CPU of the fake kernel.
const CPU: u16 = 0;

/// Reads `map` as sub-entries of CPU `cpu` (`FOLDED_CPU`: a per-CPU map's
/// folded entries).
fn read(map: &BTreeMap<FlowKey, FlowCounters>, cpu: u16, buf: &mut DrainBuffer) {
    buf.entries.clear();
    buf.entries
        .extend(map.iter().map(|(k, v)| (EntryKey::new(*k, cpu), *v)));
}

impl FlowKernel for FakeKernel {
    fn drain(&mut self, buf: &mut DrainBuffer) -> Result<(), KernelError> {
        let mut s = self.state();
        s.log.push(Call::Drain);
        read(&s.flows, CPU, buf);
        Ok(())
    }

    fn stats(&mut self) -> Result<Stats, KernelError> {
        Ok(self.state().stats)
    }

    fn lookup_and_delete(&mut self, keys: &[EntryKey], buf: &mut DrainBuffer) -> usize {
        let mut s = self.state();
        s.log
            .push(Call::LookupDelete(keys.iter().map(|e| e.key).collect()));
        buf.entries.clear();
        for e in keys {
            if e.cpu != CPU {
                continue; // no such sub-entry
            }
            if let Some(v) = s.flows.remove(&e.key) {
                buf.entries.push((*e, v));
            }
        }
        0
    }

    fn delete_binding(&mut self, mac: Mac) -> Result<(), KernelError> {
        self.state().log.push(Call::DeleteBinding(mac));
        Ok(())
    }

    fn flows_capacity(&self) -> u32 {
        self.state().capacity
    }

    fn now_ns(&self) -> u64 {
        let mut s = self.state();
        s.clock += 1;
        s.clock
    }

    fn observe(&mut self, step: Step) {
        let during = matches!(step, Step::Settled("evict"));
        self.state().log.push(Call::Ledger(step));
        if during {
            let extra = self.state().count_during_evict;
            if let Some((key, bytes)) = extra {
                self.count(key, bytes);
            }
        }
    }
}

/// A retired map of the fake kernel.
#[derive(Debug)]
pub struct FakeRetired {
    id: u8,
    kernel: FakeKernel,
}

impl RetiredMap for FakeRetired {
    fn drain(&mut self, buf: &mut DrainBuffer) -> Result<(), KernelError> {
        let mut s = self.kernel.state();
        s.log.push(Call::RetiredDrain(self.id));
        let map = s.retired.get(&self.id).cloned().unwrap_or_default();
        read(&map, lachesis_abi::FOLDED_CPU, buf);
        Ok(())
    }

    fn remove(self) -> Result<(), KernelError> {
        let mut s = self.kernel.state();
        s.log.push(Call::RetiredRemoved(self.id));
        s.retired.remove(&self.id);
        Ok(())
    }
}
