//! `make bench-cores`: the `flows` variants side by side (issues 13 and
//! 24, decision records 0006 and 0010), each built from the same classifier
//! source with a compile-time switch — the previous layout's per-CPU hash
//! (the reference every ratio is taken against), the hash keyed by (flow
//! key, CPU) the agent runs (`by_cpu`) and its atomic build for `PREEMPT_RT`
//! kernels, the shared hash with atomic adds, and the per-CPU hash drained
//! by a map-element iterator that folds the CPU slots in the kernel and
//! emits only entries seen since the last drain. Every one carries the
//! same verdict cache (decision record 0011), so they differ only in
//! `flows`. For each:
//!
//! 1. ns per packet on `make bench-packet`'s paths (program test-run), as a
//!    ratio to the one-lookup baseline measured in the same rounds, and to
//!    the per-CPU variant;
//! 2. the same program with two threads pinned to two CPUs hitting one
//!    flow at once (contention), beside one thread alone;
//! 3. drain time and bytes copied to userspace for 65 536 entries (or
//!    sub-entries) with 1 % and 100 % of them active since the last drain;
//! 4. entries (sub-entries for `by_cpu`) that fit the 64 MiB budget at 2,
//!    64 and 256 possible CPUs,
//!    from the kernel's own accounting (fdinfo `memlock`) of maps of three
//!    sizes and two value sizes, extrapolated per possible CPU.
//!
//! Prints a table per part and one JSON object as the last line. Root.

#![expect(
    clippy::cast_precision_loss,
    reason = "byte counts and map sizes here are far below 2^52"
)]

#[path = "common/fill.rs"]
mod fill;
#[expect(
    dead_code,
    reason = "shared with bench_packet, which alone holds each path to its ratio target"
)]
#[path = "common/paths.rs"]
mod paths;
#[path = "../tests/common/topology.rs"]
mod topology;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::Barrier;
use std::time::Instant;

use lachesis_abi::{ENTRY_KEY_SIZE, FLOW_COUNTERS_SIZE, FLOW_KEY_SIZE, FLOW_VALUE_SIZE};
use lachesis_datapath::{
    baseline_object, flows_max_entries, memlock, probe_iterator_targets, AttachMode, Baseline,
    Datapath, DatapathConfig, DrainBuffer, FlowsVariant, DEFAULT_FLOWS_MEMORY_BUDGET,
    FLOWS_MAX_ENTRIES, FLOWS_MIN_ENTRIES,
};
use libbpf_rs::{MapHandle, MapType};
use paths::{map_test_run_tap, median, paths, Path};
use topology::populate;

const REPEAT: u32 = 200_000;
const ROUNDS: usize = 7;
const ALTERNATING_CALLS: usize = 10_000;
const CONTENTION_REPEAT: u32 = 400_000;
const CONTENTION_ROUNDS: usize = 5;
const DRAIN_ENTRIES: u32 = 65_536;
const DRAIN_ROUNDS: usize = 9;
/// The 1 % case: every 100th entry active.
const ACTIVE_EVERY: u32 = 100;
const CPU_COUNTS: [u64; 3] = [2, 64, 256];
/// The ratio to the per-CPU classifier the issues allow on any path.
const MAX_COST_RATIO: f64 = 1.3;
/// The variants in the bench's order: the reference first.
const ORDER: [FlowsVariant; 5] = [
    FlowsVariant::PerCpu,
    FlowsVariant::ByCpu,
    FlowsVariant::ByCpuAtomic,
    FlowsVariant::Shared,
    FlowsVariant::PerCpuIter,
];

fn ns(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1e9
}

struct Loaded {
    variant: FlowsVariant,
    dp: Datapath,
    dir: PathBuf,
}

fn try_load(variant: FlowsVariant, entries: u32, tag: &str) -> lachesis_datapath::Result<Loaded> {
    let dir = PathBuf::from(format!(
        "/sys/fs/bpf/lachesis-bench-cores-{tag}-{}-{}",
        variant.name(),
        std::process::id()
    ));
    let cfg = DatapathConfig {
        bpffs_dir: dir.clone(),
        flows_max_entries: Some(entries),
        attach_mode: AttachMode::Auto,
        ..DatapathConfig::default()
    };
    match Datapath::load_variant(&cfg, variant) {
        Ok((dp, _, _)) => Ok(Loaded { variant, dp, dir }),
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            Err(e)
        }
    }
}

impl Drop for Loaded {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

// ---- 1. per packet ---------------------------------------------------------

#[derive(Default)]
struct PathTimes {
    rep: Vec<f64>,
    rep_base: Vec<f64>,
    alt: Vec<f64>,
    alt_base: Vec<f64>,
}

struct PathResult {
    rep: f64,
    rep_ratio: f64,
    alt: f64,
    alt_ratio: f64,
}

fn per_packet(
    loaded: &[Loaded],
    base: &Baseline,
    paths: &[Path],
) -> BTreeMap<(usize, usize), PathResult> {
    let mut times: BTreeMap<(usize, usize), PathTimes> = BTreeMap::new();
    let run_base = |f: &[u8], r: u32| ns(base.test_run(f, r).expect("test-run").duration);
    // Warm: both flows exist in every map, so every measured run is a
    // steady-state hit.
    for l in loaded {
        for p in paths {
            for f in &p.frames {
                l.dp.test_run(p.dir, f, 1).expect("test-run");
                run_base(f, 1);
            }
        }
    }
    // Rounds interleave the variants, so drift in the machine's load
    // spreads over all of them alike.
    for _ in 0..ROUNDS {
        for (pi, p) in paths.iter().enumerate() {
            for (vi, l) in loaded.iter().enumerate() {
                let t = times.entry((vi, pi)).or_default();
                let run =
                    |f: &[u8], r: u32| ns(l.dp.test_run(p.dir, f, r).expect("test-run").duration);
                t.rep.push(run(&p.frames[0], REPEAT));
                t.rep_base.push(run_base(&p.frames[0], REPEAT));
                for i in 0..ALTERNATING_CALLS / ROUNDS {
                    let f = &p.frames[i % 2];
                    t.alt.push(run(f, 1));
                    t.alt_base.push(run_base(f, 1));
                }
            }
        }
    }
    times
        .into_iter()
        .map(|(k, t)| {
            let (rep, rb) = (median(t.rep), median(t.rep_base));
            let (alt, ab) = (median(t.alt), median(t.alt_base));
            let r = PathResult {
                rep,
                rep_ratio: rep / rb,
                alt,
                alt_ratio: alt / ab,
            };
            (k, r)
        })
        .collect()
}

// ---- 2. contention ---------------------------------------------------------

/// Pins the calling thread to `cpu` and gives it the lowest real-time
/// priority, so the build jobs sharing the machine do not preempt it and
/// the two threads really run side by side (the overlap column shows how
/// far they did). The kernel throttles real-time threads at 95 % of each
/// second, so nothing else starves meanwhile.
fn pin_to_cpu(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes
    // inside it; both calls with pid 0 affect only the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        let rc = libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &raw const set);
        assert_eq!(
            rc,
            0,
            "pin to CPU {cpu}: {}",
            std::io::Error::last_os_error()
        );
        let param = libc::sched_param { sched_priority: 1 };
        if libc::sched_setscheduler(0, libc::SCHED_FIFO, &raw const param) != 0 {
            eprintln!(
                "real-time priority refused ({}); contention is measured under ordinary scheduling",
                std::io::Error::last_os_error()
            );
        }
    }
}

/// A test-run loop: returns the kernel-timed ns per packet.
type Runner<'a> = &'a (dyn Fn() -> f64 + Sync);

/// `run` on CPU 0 alone.
fn alone(run: Runner<'_>) -> f64 {
    std::thread::scope(|s| {
        s.spawn(|| {
            pin_to_cpu(0);
            run()
        })
        .join()
    })
    .expect("runner")
}

/// `runs[0]` on CPU 0 and `runs[1]` on CPU 1, released together: the mean
/// of their ns per packet, and how much of the longer one's wall time the
/// other was running too (1.0: side by side all along).
fn side_by_side(runs: [Runner<'_>; 2]) -> (f64, f64) {
    let barrier = Barrier::new(2);
    let both: Vec<(f64, Instant, Instant)> = std::thread::scope(|s| {
        let handles: Vec<_> = runs
            .into_iter()
            .enumerate()
            .map(|(cpu, run)| {
                let barrier = &barrier;
                s.spawn(move || {
                    pin_to_cpu(cpu);
                    barrier.wait();
                    let start = Instant::now();
                    let per_packet = run();
                    (per_packet, start, Instant::now())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("runner"))
            .collect()
    });
    let common = both[0]
        .2
        .min(both[1].2)
        .saturating_duration_since(both[0].1.max(both[1].1));
    let longest = both
        .iter()
        .map(|(_, start, end)| end.duration_since(*start))
        .max()
        .expect("two threads");
    (
        f64::midpoint(both[0].0, both[1].0),
        common.as_secs_f64() / longest.as_secs_f64(),
    )
}

/// Medians over the rounds of one program's contention figures.
#[derive(Default)]
struct Contention {
    alone: Vec<f64>,
    one_flow: Vec<f64>,
    two_flows: Vec<f64>,
    overlap: Vec<f64>,
}

// ---- 3. drain --------------------------------------------------------------

struct DrainResult {
    ms: f64,
    entries: usize,
    bytes: u64,
    calls: u32,
}

const ACTIVE_STAMP: u64 = 2_000;
const SINCE: u64 = 1_000;
const IDLE_STAMP: u64 = 1;

/// Bytes the batch lookup copies out per entry of `variant` at `cpus`
/// possible CPUs: the key and its value(s), as the kernel lays them out.
fn batch_bytes_per_entry(variant: FlowsVariant, cpus: u64) -> u64 {
    variant
        .layout(usize::try_from(cpus).expect("a CPU count"))
        .bytes_per_entry() as u64
}

fn drain(l: &Loaded, active_every: u32) -> DrainResult {
    fill::fill(&l.dp, DRAIN_ENTRIES, |i| {
        if i % active_every == 0 {
            ACTIVE_STAMP
        } else {
            IDLE_STAMP
        }
    });
    let want_active = DRAIN_ENTRIES.div_ceil(active_every) as usize;
    let mut buf = DrainBuffer::new();
    let mut ms = Vec::new();
    let mut out = DrainResult {
        ms: 0.0,
        entries: 0,
        bytes: 0,
        calls: 0,
    };
    for _ in 0..DRAIN_ROUNDS {
        let t = Instant::now();
        if l.variant == FlowsVariant::PerCpuIter {
            let it =
                l.dp.drain_active_since(SINCE, &mut buf)
                    .expect("iterator drain");
            ms.push(t.elapsed().as_secs_f64() * 1e3);
            out.bytes = it.bytes;
            assert_eq!(
                buf.entries.len(),
                want_active,
                "the iterator emits exactly the active entries"
            );
        } else {
            l.dp.drain(&mut buf).expect("drain");
            ms.push(t.elapsed().as_secs_f64() * 1e3);
            assert_eq!(
                buf.entries.len(),
                DRAIN_ENTRIES as usize,
                "a batched drain reads every entry"
            );
            out.bytes = buf.entries.len() as u64 * l.dp.flows_layout().bytes_per_entry() as u64;
        }
        out.calls = buf.calls;
        out.entries = buf.entries.len();
    }
    // What the drain returned is exact: per entry the value written.
    for (k, v) in &buf.entries {
        let want = fill::counters(fill::index(&k.key), v.last_seen_ns);
        assert_eq!((v.bytes, v.packets), (want.bytes, want.packets), "{k:?}");
    }
    out.ms = median(ms);
    out
}

// ---- 4. capacity -----------------------------------------------------------

/// The kernel's accounting of one `flows` type, split into what an entry
/// costs apart from its value, what each value copy costs, the bucket, and
/// the map's constant overhead — measured on this machine's possible CPUs.
struct Accounting {
    /// Element bytes apart from the value copies (header, key, pointer).
    elem_fixed: f64,
    /// Bytes of the value part per entry at `cpus` possible CPUs.
    value_part: f64,
    /// Bytes per hash bucket (the kernel allocates a power of two of them).
    bucket: f64,
    /// Bytes that do not depend on the size.
    constant: f64,
    per_cpu: bool,
}

const SIZE_A: u32 = 65_536;
const SIZE_B: u32 = 98_304; // same bucket count as SIZE_C
const SIZE_C: u32 = 131_072;

fn probe(map_type: MapType, key_size: u32, value_size: u32, entries: u32) -> f64 {
    let map = MapHandle::create(
        map_type,
        Some("lachesis_probe"),
        key_size,
        value_size,
        entries,
        &libbpf_rs::libbpf_sys::bpf_map_create_opts {
            sz: size_of::<libbpf_rs::libbpf_sys::bpf_map_create_opts>() as _,
            ..Default::default()
        },
    )
    .expect("create a probe map");
    memlock(map.as_fd()).expect("read memlock") as f64
}

/// `value_size` is the variant's own; the value part is measured by adding
/// 32 bytes to it.
fn accounting(map_type: MapType, key_size: u32, value_size: u32) -> Accounting {
    let at = |v: u32| [SIZE_A, SIZE_B, SIZE_C].map(|n| probe(map_type, key_size, v, n));
    let [a, b, c] = at(value_size);
    let [_, _, c64] = at(value_size + 32);
    // SIZE_B → SIZE_C adds elements only (same buckets); SIZE_A → SIZE_B
    // adds elements and doubles the buckets.
    let elem = (c - b) / f64::from(SIZE_C - SIZE_B);
    let bucket = (b - a - elem * f64::from(SIZE_B - SIZE_A)) / f64::from(SIZE_C - SIZE_A);
    let constant = a - f64::from(SIZE_A) * (elem + bucket);
    // 32 more value bytes: the value part's cost per entry (one copy per
    // possible CPU for a per-CPU map, one copy otherwise).
    let elem64 = (c64 - (c - elem * f64::from(SIZE_C))) / f64::from(SIZE_C);
    let per_cpu = map_type == MapType::PercpuHash;
    let value_part = elem64 - elem;
    Accounting {
        elem_fixed: elem - value_part,
        value_part,
        bucket,
        constant,
        per_cpu,
    }
}

impl Accounting {
    /// Bytes per entry (without its bucket) at `cpus` possible CPUs; the
    /// per-CPU value part scales with the CPU count it was measured at.
    fn elem_at(&self, measured_cpus: u64, cpus: u64) -> f64 {
        let value = if self.per_cpu {
            self.value_part / measured_cpus as f64 * cpus as f64
        } else {
            self.value_part
        };
        self.elem_fixed + value
    }

    /// The largest size whose accounted memory fits `budget`.
    fn fit(&self, measured_cpus: u64, cpus: u64, budget: u64) -> u64 {
        let cost = |n: u64| {
            self.constant
                + n as f64 * self.elem_at(measured_cpus, cpus)
                + n.next_power_of_two() as f64 * self.bucket
        };
        let (mut lo, mut hi) = (0u64, budget);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if cost(mid) <= budget as f64 {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        lo
    }
}

// ---- main ------------------------------------------------------------------

/// Why the kernel refused a variant, with the iterator probe's findings.
fn refusal(e: &lachesis_datapath::Error) -> String {
    let mut why = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let _ = write!(why, ": {s}");
        source = s.source();
    }
    let probe: Vec<String> = probe_iterator_targets()
        .into_iter()
        .map(|(target, r)| match r {
            Ok(()) => format!("an empty iter/{target} program loads"),
            Err(e) => format!(
                "an empty iter/{target} program is refused too ({})",
                std::error::Error::source(&e).map_or_else(|| e.to_string(), ToString::to_string)
            ),
        })
        .collect();
    format!("{why}; {}", probe.join("; "))
}

fn json_str(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

fn main() {
    lachesis_lab::require_root();
    let cpus = libbpf_rs::num_possible_cpus().expect("possible CPUs") as u64;

    // Which variants this kernel loads at all.
    let mut refused: BTreeMap<&'static str, String> = BTreeMap::new();
    let mut loaded: Vec<Loaded> = Vec::new();
    for v in ORDER {
        match try_load(v, 65_536, "pkt") {
            Ok(l) => loaded.push(l),
            Err(e) => {
                refused.insert(v.name(), refusal(&e));
            }
        }
    }
    for (name, why) in &refused {
        println!("{name}: refused by this kernel — {why}");
    }
    let base = baseline_object().expect("load the baseline");
    let mut net = None;
    for l in &loaded {
        let n = populate(&l.dp);
        map_test_run_tap(&l.dp, &n);
        net = Some(n);
    }
    let paths = paths(net.as_ref().expect("the per-CPU variant loads"));

    let (json_pkt, json_worst, worst_pkt) = report_per_packet(&loaded, &base, &paths, cpus);
    let (json_cont, worst_cont) = report_contention(&loaded, &base, &paths);
    drop(loaded);
    let json_drain = report_drain(&refused, cpus);
    let (json_cap, at_256) = report_capacity(cpus);
    let json_verdict = verdict(&refused, &worst_pkt, &worst_cont, &at_256);
    println!(
        "{{\"possible_cpus\":{cpus},\"refused\":{{{}}},\"per_packet\":{{{json_pkt}}},\"worst_vs_percpu\":{{{json_worst}}},\"contention\":{{{json_cont}}},\"drain\":{{{json_drain}}},\"capacity\":{{{json_cap}}},\"verdict\":{{{json_verdict}}}}}",
        refused
            .iter()
            .map(|(n, w)| format!("\"{n}\":\"{}\"", json_str(w)))
            .collect::<Vec<_>>()
            .join(","),
    );
}

/// The rule per candidate: more entries than the per-CPU hash at
/// 256 CPUs, and no path costing more than [`MAX_COST_RATIO`] times the
/// per-CPU hash's, alone or with two CPUs on one flow. Prints one line per
/// candidate; the JSON members of `verdict`.
fn verdict(
    refused: &BTreeMap<&'static str, String>,
    worst_pkt: &BTreeMap<&'static str, f64>,
    worst_cont: &BTreeMap<&'static str, f64>,
    at_256: &BTreeMap<&'static str, u64>,
) -> String {
    println!();
    println!(
        "this run's verdict (capacity at 256 CPUs above the per-CPU hash's, every path ≤ {MAX_COST_RATIO}x the per-CPU hash alone and under contention). Contention shows only when the two CPUs do not share a cache; on a VM that depends on where the host runs its vCPUs, so runs differ: decide on several (decision record 0006)"
    );
    let percpu = at_256[FlowsVariant::PerCpu.name()];
    let mut json = Vec::new();
    for v in ORDER.into_iter().skip(1) {
        let name = v.name();
        let mut fails = Vec::new();
        if refused.contains_key(name) {
            fails.push("refused by this kernel".to_owned());
        }
        let cap = at_256[name];
        if cap <= percpu {
            fails.push(format!("{cap} entries at 256 CPUs, not above {percpu}"));
        }
        if let Some(pkt) = worst_pkt.get(name).filter(|w| **w > MAX_COST_RATIO) {
            fails.push(format!("{pkt:.2}x per packet alone"));
        }
        if let Some(cont) = worst_cont.get(name).filter(|w| **w > MAX_COST_RATIO) {
            fails.push(format!("{cont:.2}x per packet with two CPUs on one flow"));
        }
        let why = fails.join("; ");
        let wins = why.is_empty();
        println!(
            "{name}: {}",
            if wins {
                "wins".to_owned()
            } else {
                format!("does not win ({why})")
            }
        );
        json.push(format!(
            "\"{name}\":{{\"wins\":{wins},\"why_not\":\"{}\"}}",
            json_str(&why)
        ));
    }
    json.join(",")
}

/// Part 1; returns the JSON members of `per_packet` and `worst_vs_percpu`.
fn report_per_packet(
    loaded: &[Loaded],
    base: &Baseline,
    paths: &[Path],
    cpus: u64,
) -> (String, String, BTreeMap<&'static str, f64>) {
    let pkt = per_packet(loaded, base, paths);
    println!();
    println!(
        "1. per packet (program test-run, {cpus} possible CPUs): medians of {ROUNDS} rounds × {REPEAT} repeats (rep) and {ALTERNATING_CALLS} single runs (alt); ratio = ns / baseline ns in the same rounds; vs percpu = max(rep, alt) ns / the per-CPU variant's"
    );
    print!("{:<16}", "path");
    for l in loaded {
        print!(
            " | {:<11} {:>6} {:>6} {:>6} {:>6}",
            l.variant.name(),
            "rep ns",
            "ratio",
            "alt ns",
            "ratio"
        );
    }
    for l in &loaded[1..] {
        print!(" | {:>16}", format!("{} vs percpu", l.variant.name()));
    }
    println!();
    let mut worst = vec![0f64; loaded.len()];
    let mut json = Vec::new();
    for (pi, p) in paths.iter().enumerate() {
        print!("{:<16}", p.name);
        let pc = &pkt[&(0, pi)];
        let mut fields = Vec::new();
        let mut vs_line = String::new();
        for (vi, l) in loaded.iter().enumerate() {
            let r = &pkt[&(vi, pi)];
            print!(
                " | {:<11} {:>6.0} {:>5.2}x {:>6.0} {:>5.2}x",
                "", r.rep, r.rep_ratio, r.alt, r.alt_ratio
            );
            let vs = (r.rep / pc.rep).max(r.alt / pc.alt);
            worst[vi] = worst[vi].max(vs);
            if vi > 0 {
                let _ = write!(vs_line, " | {vs:>15.2}x");
            }
            fields.push(format!(
                "\"{}\":{{\"rep_ns\":{:.1},\"rep_ratio\":{:.2},\"alt_ns\":{:.1},\"alt_ratio\":{:.2},\"vs_percpu\":{vs:.2}}}",
                l.variant.name(), r.rep, r.rep_ratio, r.alt, r.alt_ratio
            ));
        }
        println!("{vs_line}");
        json.push(format!("\"{}\":{{{}}}", p.name, fields.join(",")));
    }
    for (vi, l) in loaded.iter().enumerate().skip(1) {
        println!(
            "{}: worst path vs percpu {:.2}x (limit {MAX_COST_RATIO}x): {}",
            l.variant.name(),
            worst[vi],
            if worst[vi] <= MAX_COST_RATIO {
                "within"
            } else {
                "over"
            }
        );
    }
    let worst_json = loaded
        .iter()
        .zip(&worst)
        .map(|(l, w)| format!("\"{}\":{w:.2}", l.variant.name()))
        .collect::<Vec<_>>()
        .join(",");
    let worst_by_name = loaded
        .iter()
        .zip(&worst)
        .map(|(l, w)| (l.variant.name(), *w))
        .collect();
    (json.join(","), worst_json, worst_by_name)
}

/// Part 2 on every path's two flows; the JSON members of `contention`.
fn report_contention(
    loaded: &[Loaded],
    base: &Baseline,
    paths: &[Path],
) -> (String, BTreeMap<&'static str, f64>) {
    println!();
    println!(
        "2. contention: threads pinned to CPUs 0 and 1 with real-time priority, {CONTENTION_REPEAT} runs each, medians of {CONTENTION_ROUNDS} rounds (programs interleaved in each round, so they see the same machine); ns per packet, kernel-timed, mean of the two threads. 1t = one thread alone; one flow = both threads hit the path's first flow; two flows = each hits its own (what the CPUs share besides the entry); vs percpu = one-flow ns / the per-CPU variant's one-flow ns; overlap = the share of the longer thread's time the other ran too"
    );
    println!(
        "{:<16} {:<12} {:>8} {:>10} {:>10} {:>9} {:>10} {:>8}",
        "path", "program", "1t ns", "one flow", "two flows", "one/two", "vs percpu", "overlap"
    );
    let mut names = vec!["baseline"];
    names.extend(loaded.iter().map(|l| l.variant.name()));
    let before: Vec<u64> = loaded.iter().map(|l| packets(&l.dp)).collect();
    let mut json = Vec::new();
    let mut worst: BTreeMap<&'static str, f64> = BTreeMap::new();
    for path in paths {
        let run_of = |who: usize, f: &[u8]| -> f64 {
            let run = if who == 0 {
                base.test_run(f, CONTENTION_REPEAT)
            } else {
                loaded[who - 1].dp.test_run(path.dir, f, CONTENTION_REPEAT)
            };
            ns(run.expect("test-run").duration)
        };
        let mut stats: Vec<Contention> = names.iter().map(|_| Contention::default()).collect();
        for _ in 0..CONTENTION_ROUNDS {
            for (who, c) in stats.iter_mut().enumerate() {
                let first = || run_of(who, &path.frames[0]);
                let second = || run_of(who, &path.frames[1]);
                c.alone.push(alone(&first));
                let (one, overlap) = side_by_side([&first, &first]);
                c.one_flow.push(one);
                c.overlap.push(overlap);
                c.two_flows.push(side_by_side([&first, &second]).0);
            }
        }
        let rows: Vec<(f64, f64, f64, f64)> = stats
            .into_iter()
            .map(|c| {
                (
                    median(c.alone),
                    median(c.one_flow),
                    median(c.two_flows),
                    median(c.overlap),
                )
            })
            .collect();
        let percpu_one = rows[1].1;
        let mut fields = Vec::new();
        for (name, (a, one, two, overlap)) in names.iter().zip(rows) {
            let vs = one / percpu_one;
            if *name != "baseline" {
                let w = worst.entry(name).or_default();
                *w = w.max(vs);
            }
            println!(
                "{:<16} {name:<12} {a:>8.1} {one:>10.1} {two:>10.1} {:>8.2}x {vs:>9.2}x {overlap:>8.2}",
                path.name,
                one / two
            );
            fields.push(format!(
                "\"{name}\":{{\"one_thread_ns\":{a:.1},\"one_flow_ns\":{one:.1},\"two_flows_ns\":{two:.1},\"one_flow_vs_percpu\":{vs:.2},\"overlap\":{overlap:.2}}}"
            ));
        }
        json.push(format!("\"{}\":{{{}}}", path.name, fields.join(",")));
    }
    // Exact under concurrency: every run of every thread counted once.
    let runs = paths.len() as u64 * CONTENTION_ROUNDS as u64 * 5;
    for (l, before) in loaded.iter().zip(before) {
        assert_eq!(
            packets(&l.dp) - before,
            runs * u64::from(CONTENTION_REPEAT),
            "{}: packets counted while two CPUs hit one flow",
            l.variant.name()
        );
    }
    println!(
        "every variant's flows grew by exactly {runs} thread-runs × {CONTENTION_REPEAT} packets (checked)"
    );
    for (name, w) in &worst {
        println!(
            "{name}: worst one-flow cost vs percpu {w:.2}x (limit {MAX_COST_RATIO}x): {}",
            if *w <= MAX_COST_RATIO {
                "within"
            } else {
                "over"
            }
        );
    }
    let worst_json: Vec<String> = worst
        .iter()
        .map(|(n, w)| format!("\"{n}\":{w:.2}"))
        .collect();
    let json = format!(
        "\"paths\":{{{}}},\"worst_one_flow_vs_percpu\":{{{}}}",
        json.join(","),
        worst_json.join(",")
    );
    (json, worst)
}

/// Packets in `flows`, all entries summed.
fn packets(dp: &Datapath) -> u64 {
    let mut buf = DrainBuffer::new();
    dp.drain(&mut buf).expect("drain");
    buf.entries.iter().map(|(_, v)| v.packets).sum()
}

/// Part 3; the JSON members of `drain`.
fn report_drain(refused: &BTreeMap<&'static str, String>, cpus: u64) -> String {
    println!();
    println!(
        "3. drain of {DRAIN_ENTRIES} entries, medians of {DRAIN_ROUNDS}; bytes = copied to userspace ({cpus} CPUs measured; at 64/256 CPUs computed: batch = entries × (20 + 56) for by_cpu, × (18 + slots × 32) for percpu, × (18 + 32) for shared; iterator = active × 56, whose kernel side still copies entries × CPUs × 32 bytes)"
    );
    println!(
        "{:<12} {:>7} {:>9} {:>8} {:>12} {:>9} {:>14} {:>14}",
        "variant", "active", "ms", "entries", "bytes", "syscalls", "bytes@64cpu", "bytes@256cpu"
    );
    let mut json = Vec::new();
    for v in ORDER {
        if let Some(why) = refused.get(v.name()) {
            println!("{:<12} refused by this kernel (above)", v.name());
            json.push(format!(
                "\"{}\":{{\"refused\":\"{}\"}}",
                v.name(),
                json_str(why)
            ));
            continue;
        }
        let mut fields = Vec::new();
        for (label, every) in [("1%", ACTIVE_EVERY), ("100%", 1)] {
            let l = try_load(v, DRAIN_ENTRIES, "drain").expect("loaded before");
            let d = drain(&l, every);
            let at = |n: u64| match v {
                FlowsVariant::PerCpuIter => {
                    d.entries as u64 * size_of::<lachesis_abi::DrainRecord>() as u64
                }
                _ => u64::from(DRAIN_ENTRIES) * batch_bytes_per_entry(v, n),
            };
            println!(
                "{:<12} {:>7} {:>9.2} {:>8} {:>12} {:>9} {:>14} {:>14}",
                v.name(),
                label,
                d.ms,
                d.entries,
                d.bytes,
                d.calls,
                at(64),
                at(256)
            );
            fields.push(format!(
                "\"{}\":{{\"ms\":{:.3},\"entries\":{},\"bytes\":{},\"syscalls\":{},\"bytes_64cpu\":{},\"bytes_256cpu\":{}}}",
                if every == 1 { "all_active" } else { "one_percent_active" },
                d.ms, d.entries, d.bytes, d.calls, at(64), at(256)
            ));
        }
        json.push(format!("\"{}\":{{{}}}", v.name(), fields.join(",")));
    }
    json.join(",")
}

/// Part 4; the JSON members of `capacity`.
fn report_capacity(cpus: u64) -> (String, BTreeMap<&'static str, u64>) {
    println!();
    println!(
        "4. entries within the {} MiB budget, from the kernel's own accounting: fdinfo memlock of preallocated maps of {SIZE_A}, {SIZE_B} and {SIZE_C} entries with 32- and 64-byte values on this machine's {cpus} possible CPUs. elem = Δmemlock/Δentries between the two sizes with equal bucket counts; bucket = the rest of the step that doubles them; value part = the per-entry Δ for 32 more value bytes (all value copies of an entry); fixed = elem − value part; const = what no entry explains. At N CPUs an entry costs fixed + value part × N/{cpus} (per-CPU: one copy per possible CPU) or fixed + value part (shared), plus a power-of-two bucket array. raw = the most entries within the budget; clamped = raw within [{FLOWS_MIN_ENTRIES}, {FLOWS_MAX_ENTRIES}] (the floor overruns the budget when raw is below it)",
        DEFAULT_FLOWS_MEMORY_BUDGET >> 20
    );
    println!(
        "{:<12} {:>8} {:>8} {:>8} {:>9}   {:>9} {:>9} {:>9}   {:>9} {:>9} {:>9}",
        "variant",
        "fixed B",
        "value B",
        "bucket",
        "const B",
        "raw@2",
        "raw@64",
        "raw@256",
        "clamped@2",
        "clamped@64",
        "clamped@256"
    );
    let mut json = Vec::new();
    let mut at_256 = BTreeMap::new();
    for v in ORDER {
        let (map_type, key, value) = match v {
            FlowsVariant::ByCpu
            | FlowsVariant::ByCpuAtomic
            | FlowsVariant::ByCpuNoCache
            | FlowsVariant::ByCpuVerdict1
            | FlowsVariant::ByCpuGenFetch => (MapType::Hash, ENTRY_KEY_SIZE, FLOW_VALUE_SIZE),
            FlowsVariant::Shared => (MapType::Hash, FLOW_KEY_SIZE, FLOW_COUNTERS_SIZE),
            FlowsVariant::PerCpu | FlowsVariant::PerCpuIter => {
                (MapType::PercpuHash, FLOW_KEY_SIZE, FLOW_COUNTERS_SIZE)
            }
        };
        let acc = accounting(
            map_type,
            u32::try_from(key).expect("a key size"),
            u32::try_from(value).expect("a value size"),
        );
        let raw = CPU_COUNTS.map(|n| acc.fit(cpus, n, DEFAULT_FLOWS_MEMORY_BUDGET));
        let clamped =
            raw.map(|r| r.clamp(u64::from(FLOWS_MIN_ENTRIES), u64::from(FLOWS_MAX_ENTRIES)));
        at_256.insert(v.name(), raw[2]);
        println!(
            "{:<12} {:>8.1} {:>8.1} {:>8.1} {:>9.0}   {:>9} {:>9} {:>9}   {:>9} {:>9} {:>9}",
            v.name(),
            acc.elem_fixed,
            acc.value_part,
            acc.bucket,
            acc.constant,
            raw[0],
            raw[1],
            raw[2],
            clamped[0],
            clamped[1],
            clamped[2]
        );
        json.push(format!(
            "\"{}\":{{\"elem_fixed_bytes\":{:.1},\"value_part_bytes\":{:.1},\"bucket_bytes\":{:.1},\"raw_2cpu\":{},\"raw_64cpu\":{},\"raw_256cpu\":{},\"clamped_2cpu\":{},\"clamped_64cpu\":{},\"clamped_256cpu\":{}}}",
            v.name(), acc.elem_fixed, acc.value_part, acc.bucket, raw[0], raw[1], raw[2], clamped[0], clamped[1], clamped[2]
        ));
    }
    // What the agent configures: the (flow key, CPU) hash's sub-entries, by
    // `flows_max_entries` (this accounting plus fixed headroom for the map
    // itself).
    let sized = CPU_COUNTS.map(|n| {
        flows_max_entries(
            DEFAULT_FLOWS_MEMORY_BUDGET,
            u32::try_from(n).expect("a CPU count"),
        )
    });
    println!(
        "the agent's sizing ((flow key, CPU) hash, flows_max_entries, sub-entries): {} at 2 CPUs, {} at 64, {} at 256",
        sized[0], sized[1], sized[2]
    );
    json.push(format!(
        "\"agent_sizing\":{{\"2cpu\":{},\"64cpu\":{},\"256cpu\":{}}}",
        sized[0], sized[1], sized[2]
    ));
    (json.join(","), at_256)
}
