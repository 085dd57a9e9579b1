//! `make bench-packet`: ns per packet through the kernel's program test-run
//! facility for every classifier path, beside a minimal program (one per-CPU
//! hash lookup + update, `bpf/baseline.bpf.c`) on the same frame in the same
//! run. Two runs: one flow repeated (the kernel loops over one frame) and two
//! flows of the path alternating (one frame per call), so a per-flow cache
//! would show its real effect. Root required.

#[expect(
    dead_code,
    reason = "shared with bench_verdict, which alone varies each path's first frame"
)]
#[path = "common/paths.rs"]
mod paths;
#[path = "../tests/common/topology.rs"]
mod topology;

use std::path::PathBuf;

use lachesis_abi::Direction;
use lachesis_datapath::{baseline_object, AttachMode, Datapath, DatapathConfig};
use paths::{map_test_run_tap, median, paths};
use topology::populate;

const REPEAT: u32 = 200_000;
const ROUNDS: usize = 7;
const ALTERNATING_CALLS: usize = 20_000;

fn main() {
    lachesis_lab::require_root();
    let dir = PathBuf::from(format!("/sys/fs/bpf/lachesis-bench-{}", std::process::id()));
    let cfg = DatapathConfig {
        bpffs_dir: dir.clone(),
        flows_max_entries: Some(65_536),
        attach_mode: AttachMode::Auto,
        ..DatapathConfig::default()
    };
    let (dp, _, _) = Datapath::load(&cfg).expect("load the classifier");
    let base = baseline_object().expect("load the baseline");
    let net = populate(&dp);
    map_test_run_tap(&dp, &net);

    let run_dp = |d: Direction, f: &[u8], r: u32| {
        dp.test_run(d, f, r)
            .expect("test-run")
            .duration
            .as_secs_f64()
            * 1e9
    };
    let run_base = |f: &[u8], r: u32| {
        base.test_run(f, r)
            .expect("test-run")
            .duration
            .as_secs_f64()
            * 1e9
    };

    println!("per-packet cost, program test-run; medians of {ROUNDS} rounds × {REPEAT} repeats (repeated) and {ALTERNATING_CALLS} single runs (alternating)");
    println!(
        "{:<16} {:>10} {:>10} {:>7} {:>12} {:>12} {:>7} {:>7}",
        "path", "rep ns", "base ns", "ratio", "alt ns", "alt base", "ratio", "target"
    );
    let mut json = Vec::new();
    let mut worst_ok = true;
    for path in paths(&net) {
        // Warm: both flows exist, so every measured run is a steady-state hit.
        for f in &path.frames {
            run_dp(path.dir, f, 1);
            run_base(f, 1);
        }
        let mut rep = Vec::new();
        let mut rep_base = Vec::new();
        for _ in 0..ROUNDS {
            rep.push(run_dp(path.dir, &path.frames[0], REPEAT));
            rep_base.push(run_base(&path.frames[0], REPEAT));
        }
        let mut alt = Vec::with_capacity(ALTERNATING_CALLS);
        let mut alt_base = Vec::with_capacity(ALTERNATING_CALLS);
        for i in 0..ALTERNATING_CALLS {
            let f = &path.frames[i % 2];
            alt.push(run_dp(path.dir, f, 1));
            alt_base.push(run_base(f, 1));
        }
        let (r, rb, a, ab) = (median(rep), median(rep_base), median(alt), median(alt_base));
        let target = path.target();
        let (ratio, alt_ratio) = (r / rb, a / ab);
        let ok = ratio <= target && alt_ratio <= target;
        worst_ok &= ok;
        println!(
            "{:<16} {:>10.1} {:>10.1} {:>6.2}x {:>12.1} {:>12.1} {:>6.2}x {:>5.0}x{}",
            path.name,
            r,
            rb,
            ratio,
            a,
            ab,
            alt_ratio,
            target,
            if ok { "" } else { "  ← over target" }
        );
        json.push(format!(
            "\"{}\":{{\"repeated_ns\":{r:.1},\"repeated_baseline_ns\":{rb:.1},\"repeated_ratio\":{ratio:.2},\"alternating_ns\":{a:.1},\"alternating_baseline_ns\":{ab:.1},\"alternating_ratio\":{alt_ratio:.2},\"target_ratio\":{target}}}",
            path.name
        ));
    }
    println!("all paths within target: {worst_ok}");
    println!("{{{}}}", json.join(","));
    drop(dp);
    let _ = std::fs::remove_dir_all(&dir);
}
