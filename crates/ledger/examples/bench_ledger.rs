//! `make bench-ledger`: drain apply, /metrics render and state flush at the
//! sizes of DESIGN §16, medians over several runs, plus allocations per
//! steady-state render. Prints a table, then one JSON line.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lachesis_abi::{Direction, EntryKey, FlowCounters, FlowKey, L4Class, Mac, Zone};
use lachesis_ledger::memory::{MemoryAttribution, OwnedBinding, SwapSource};
use lachesis_ledger::state::{FlushPhase, StateFile, StatePaths};
use lachesis_ledger::{CommittedPlan, Exporter, Format, Ledger, UnresolvedLimits};

struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards every call unchanged to the system allocator.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const RUNS: usize = 9;
const KEYS_PER_VM: usize = 10;

fn vm_mac(i: usize) -> Mac {
    let b = (i as u32).to_be_bytes();
    Mac([0xfa, 0x16, b[0], b[1], b[2], b[3]])
}

fn router_mac(i: usize) -> Mac {
    Mac([0x02, 0xaa, 0, 0, 0, i as u8])
}

/// A cloud with `vms` bound ports (10 per server, 5 servers per tenant) and 8 routers.
fn attribution(vms: usize) -> MemoryAttribution {
    let mut a = MemoryAttribution::default();
    for i in 0..vms {
        let server = i / 2;
        let b = OwnedBinding::new(
            &format!("{:032x}", server / 5),
            &format!("{server:08x}-0000-4000-8000-{server:012x}"),
            &format!("{i:08x}-1111-4000-8000-{i:012x}"),
        );
        a.bindings.insert(
            vm_mac(i),
            if i % 3 == 0 {
                b.with_fallback("fip-net")
            } else {
                b
            },
        );
        a.server_names.insert(
            format!("{server:08x}-0000-4000-8000-{server:012x}"),
            format!("vm-{server}"),
        );
    }
    for r in 0..8 {
        a.routers.insert(router_mac(r), format!("public-{r}"));
    }
    for t in 0..=vms / 10 {
        a.tenant_names
            .insert(format!("{t:032x}"), format!("project-{t}"));
    }
    a
}

/// Flow keys per VM on a typical node.
const TYPICAL_PER_VM: usize = 50;

/// `n` flow keys of a typical node: each VM talks to 40 neighbours on its
/// subnet (zone `same_tenant`) and through two routers (zone `external`),
/// over three L4 classes, so its 50 rows fold into a handful of series.
fn keys_typical(n: usize) -> Vec<FlowKey> {
    let vms = n / TYPICAL_PER_VM;
    (0..n)
        .map(|i| {
            let v = i / TYPICAL_PER_VM;
            let j = i % TYPICAL_PER_VM;
            let vm = vm_mac(v);
            let (peer, zone) = if j < 10 {
                (router_mac((v + j / 6) % 8), Zone::External)
            } else {
                (vm_mac((v + j) % vms), Zone::SameTenant)
            };
            let dir = Direction::ALL[j % 2];
            let l4 = [L4Class::Tcp, L4Class::Udp, L4Class::Icmp][(j / 2) % 3];
            let (src, dst) = if dir == Direction::Tx {
                (vm, peer)
            } else {
                (peer, vm)
            };
            FlowKey {
                src_mac: src.0,
                dst_mac: dst.0,
                eth_proto: 0x0800,
                direction: dir.code(),
                zone: zone.code(),
                l4: l4.code(),
                pad: 0,
            }
        })
        .collect()
}

/// `n` flow keys where nearly every row is a series of its own at port
/// level (zones, directions and classes all vary within a VM): the worst
/// case for rendering.
fn keys(n: usize) -> Vec<FlowKey> {
    (0..n)
        .map(|i| {
            let vm = vm_mac(i / KEYS_PER_VM);
            let j = i % KEYS_PER_VM;
            let peer = if j < 4 {
                router_mac(j)
            } else {
                vm_mac((i / KEYS_PER_VM + j) % (n / KEYS_PER_VM))
            };
            let dir = Direction::ALL[j % 2];
            let zone = [
                Zone::External,
                Zone::SameTenant,
                Zone::OtherTenant,
                Zone::Infra,
            ][j % 4];
            let l4 = [L4Class::Tcp, L4Class::Udp, L4Class::Icmp][j % 3];
            let (src, dst) = if dir == Direction::Tx {
                (vm, peer)
            } else {
                (peer, vm)
            };
            FlowKey {
                src_mac: src.0,
                dst_mac: dst.0,
                eth_proto: 0x0800,
                direction: dir.code(),
                zone: zone.code(),
                l4: l4.code(),
                pad: 0,
            }
        })
        .collect()
}

/// Kernel sub-entries per flow key: the CPUs that count each flow (DESIGN
/// §4.7; a row keeps one baseline per sub-entry, inline up to two).
const SUBS_PER_ROW: u16 = 2;

/// One reading per sub-entry of every key: `SUBS_PER_ROW` CPUs each.
fn readings(keys: &[FlowKey], round: u64) -> Vec<(EntryKey, FlowCounters)> {
    keys.iter()
        .enumerate()
        .flat_map(|(i, k)| {
            let i = i as u64;
            (0..SUBS_PER_ROW).map(move |cpu| {
                let c = u64::from(cpu);
                (
                    EntryKey::new(*k, cpu),
                    FlowCounters {
                        bytes: (i + 1 + c) * 1500 * round,
                        packets: (i + 1 + c) * round,
                        last_seen_ns: round,
                        created_ns: (i + 1) * u64::from(SUBS_PER_ROW) + c,
                    },
                )
            })
        })
        .collect()
}

/// CPU time of this thread: unlike wall time, not inflated when other
/// processes compete for the cores.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &raw mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0),
    )
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Wall and thread-CPU samples of one measure.
#[derive(Default)]
struct Samples {
    wall: Vec<f64>,
    cpu: Vec<f64>,
}

impl Samples {
    fn time<T>(&mut self, f: impl FnOnce() -> T) -> T {
        let (w, c) = (Instant::now(), thread_cpu());
        let out = f();
        self.cpu.push(ms(thread_cpu().saturating_sub(c)));
        self.wall.push(ms(w.elapsed()));
        out
    }

    /// Drops the first `n` samples (warm-up).
    fn skip(mut self, n: usize) -> Samples {
        self.wall.drain(..n);
        self.cpu.drain(..n);
        self
    }

    fn medians(self) -> (f64, f64) {
        (median(self.wall), median(self.cpu))
    }
}

struct Rendered {
    time: (f64, f64),
    allocs: u64,
    series: usize,
    bytes: usize,
    ledger: Arc<Ledger>,
    source: Arc<SwapSource>,
}

/// Render time and allocations of a 50 000-row ledger built from `rows`.
fn render_bench(rows: &[FlowKey], vms: usize) -> Rendered {
    let attr = attribution(vms);
    let source = Arc::new(SwapSource::new(attr));
    let ledger = Arc::new(Ledger::new(UnresolvedLimits::default(), source.clone()));
    ledger.apply_drain(&readings(rows, 1), 0).unwrap();
    assert_eq!(ledger.sizes().rows, rows.len());
    // Billing renders what the last flush made durable.
    let dir = tempfile::tempdir().unwrap();
    let file = Arc::new(StateFile::new(StatePaths::new(
        dir.path().join("state.json"),
    )));
    file.flush(&ledger).unwrap();
    let exporter = Exporter::new(ledger.clone(), file);
    let mut out = String::new();
    let mut times = Samples::default();
    let mut allocs = Vec::new();
    for _ in 0..RUNS + 2 {
        out.clear();
        let before = ALLOCS.load(Ordering::Relaxed);
        times.time(|| exporter.render(Format::OpenMetrics, &mut out).unwrap());
        allocs.push(ALLOCS.load(Ordering::Relaxed) - before);
    }
    // The first two renders grow the reused output buffer: not steady state.
    Rendered {
        time: times.skip(2).medians(),
        allocs: {
            let mut steady = allocs.split_off(2);
            steady.sort_unstable();
            steady[steady.len() / 2]
        },
        series: out.lines().filter(|l| !l.starts_with('#')).count(),
        bytes: out.len(),
        ledger,
        source,
    }
}

fn row(name: &str, (wall, cpu): (f64, f64), note: &str) {
    println!("{name:<44} {wall:>9.2} ms {cpu:>9.2} ms  {note}");
}

/// The flush with the agent's committed plan in the file (one binding per
/// port, encoded once at commit and shared by every flush), and what the old
/// API cost on top per flush: the caller's clone of the plan tree, then its
/// encoding. Returns both timings and the plan's bytes in the file.
fn plan_bench(
    typical: &Rendered,
    file: &StateFile,
    without: usize,
) -> ((f64, f64), (f64, f64), usize) {
    let plan: serde_json::Value = typical
        .source
        .current()
        .bindings
        .iter()
        .map(|(mac, b)| {
            serde_json::json!({"mac": mac.to_string(), "tenant": b.tenant_id,
                "server": b.server_id, "port": b.port_id})
        })
        .collect();
    let mut with_plan = (*typical.source.current()).clone();
    with_plan.plan = CommittedPlan::encode(&plan).unwrap();
    typical.source.store(with_plan);
    let mut flush_plan = Samples::default();
    let mut plan_bytes = 0;
    for _ in 0..RUNS {
        plan_bytes = flush_plan
            .time(|| file.flush(&typical.ledger).unwrap())
            .bytes
            - without;
    }
    let mut clone_encode = Samples::default();
    for _ in 0..RUNS {
        clone_encode.time(|| serde_json::to_vec(&plan.clone()).unwrap().len());
    }
    (flush_plan.medians(), clone_encode.medians(), plan_bytes)
}

fn print_plan(flush_plan: (f64, f64), plan_bytes: usize, clone_encode: (f64, f64)) {
    row(
        "state flush, 50 000 rows + committed plan",
        flush_plan,
        "plan shared, written as encoded",
    );
    println!("{:<44} {:>12}", "  plan bytes", plan_bytes);
    row(
        "  plan clone + encode (old API, per flush)",
        clone_encode,
        "no longer paid",
    );
}

/// Drain: a ledger already holding the 65 536 rows, fed the next reading
/// of every sub-entry (the steady state every 10 s); and the first sight of
/// them all by a fresh ledger.
fn drain_bench() -> (Samples, Samples) {
    let drain_keys = keys(65_536);
    let attr = attribution(65_536 / KEYS_PER_VM + 1);
    let source = Arc::new(SwapSource::new(attr));
    let ledger = Ledger::new(UnresolvedLimits::default(), source.clone());
    ledger.apply_drain(&readings(&drain_keys, 1), 0).unwrap();
    let mut drain = Samples::default();
    for round in 2..2 + RUNS as u64 {
        let r = readings(&drain_keys, round);
        let report = drain.time(|| ledger.apply_drain(&r, round)).unwrap();
        assert_eq!(report.evicted, 0);
    }
    let mut first = Samples::default();
    for _ in 0..3 {
        let fresh = Ledger::new(UnresolvedLimits::default(), source.clone());
        let r = readings(&drain_keys, 1);
        first.time(|| fresh.apply_drain(&r, 0)).unwrap();
    }
    (drain, first)
}

fn main() {
    let (drain, first) = drain_bench();

    let worst = render_bench(&keys(50_000), 50_000 / KEYS_PER_VM);
    let typical = render_bench(&keys_typical(50_000), 50_000 / TYPICAL_PER_VM);

    let dir = tempfile::tempdir().unwrap();
    let file = StateFile::new(StatePaths::new(dir.path().join("state.json")));
    let mut flush = Samples::default();
    let (mut lock, mut size) = (Vec::new(), 0);
    let mut phases: Vec<Vec<f64>> = vec![Vec::new(); FlushPhase::ALL.len()];
    for _ in 0..RUNS {
        let r = flush.time(|| file.flush(&typical.ledger).unwrap());
        lock.push(ms(r.lock_held()));
        for (acc, d) in phases.iter_mut().zip(r.phases) {
            acc.push(ms(d));
        }
        size = r.bytes;
    }

    let (flush_plan, clone_encode, plan_bytes) = plan_bench(&typical, &file, size);

    let drain = drain.medians();
    let flush = flush.medians();

    let lock = median(lock);
    println!(
        "ledger benchmark: medians of {RUNS} runs, release build, load average {} at the end",
        load_average()
    );
    println!("{:<44} {:>12} {:>12}", "measure", "wall", "thread CPU");
    row(
        "apply drain, 65 536 rows x 2 subs (steady)",
        drain,
        "131 072 readings",
    );
    row(
        "apply drain, 65 536 rows x 2 subs (first)",
        first.medians(),
        "",
    );
    row(
        "render, 50 000 rows (1 000 VMs x 50 flows)",
        typical.time,
        "target < 50 ms",
    );
    println!(
        "{:<44} {:>12}",
        "  samples / bytes rendered",
        format!("{} / {}", typical.series, typical.bytes)
    );
    println!(
        "{:<44} {:>12}",
        "  allocations per steady-state render", typical.allocs
    );
    row(
        "render, 50 000 rows (5 000 VMs x 10 flows)",
        worst.time,
        "every row its own port series",
    );
    println!(
        "{:<44} {:>12}",
        "  samples / bytes rendered",
        format!("{} / {}", worst.series, worst.bytes)
    );
    println!(
        "{:<44} {:>12}",
        "  allocations per steady-state render", worst.allocs
    );
    row("state flush, 50 000 rows", flush, "target < 100 ms");
    for (phase, v) in FlushPhase::ALL.iter().zip(phases) {
        println!(
            "{:<44} {:>9.3} ms",
            format!(
                "  phase {}{}",
                phase.label(),
                if *phase == FlushPhase::Copy {
                    " (ledger lock held)"
                } else {
                    ""
                }
            ),
            median(v)
        );
    }
    println!("{:<44} {:>12}", "  state file bytes", size);
    print_plan(flush_plan, plan_bytes, clone_encode);
    println!(
        "{{\"apply_drain_65536_ms\": {:.3}, \"render_50000_ms\": {:.3}, \"flush_50000_ms\": {:.3}, \"flush_lock_50000_ms\": {lock:.3}, \"render_allocs_steady\": {}, \"render_50000_worst_ms\": {:.3}, \"flush_50000_plan_ms\": {:.3}, \"plan_clone_encode_ms\": {:.3}}}",
        drain.0, typical.time.0, flush.0, typical.allocs, worst.time.0, flush_plan.0, clone_encode.0
    );
}
