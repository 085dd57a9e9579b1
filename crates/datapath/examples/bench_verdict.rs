//! `make bench-verdict` (issue 24 part 4; decision record 0011): the
//! per-CPU verdict cache of DESIGN §4.2 with one slot and with the 256
//! direct-mapped slots the agent runs, beside the classifier without it,
//! as ratios to the one-lookup baseline in the same rounds, on every `make
//! bench-packet` path: one flow repeated (medians of 7 × 200 000), two
//! flows alternating and 64 flows interleaved (the path's first frame with
//! 64 remote addresses; medians of 12 800 single runs). Last line: one
//! JSON object. Root required.

#[expect(
    dead_code,
    reason = "shared with bench_packet and bench_cores; not every item is used by each"
)]
#[path = "common/paths.rs"]
mod paths;
#[path = "../tests/common/topology.rs"]
mod topology;

use std::path::PathBuf;

use lachesis_datapath::{baseline_object, AttachMode, Datapath, DatapathConfig, FlowsVariant};
use paths::{interleaved, map_test_run_tap, median, paths};
use topology::populate;

const REPEAT: u32 = 200_000;
const ROUNDS: usize = 7;
const CALLS: usize = 12_800;
const FLOWS: usize = 64;

fn main() {
    lachesis_lab::require_root();
    let variants = [
        FlowsVariant::ByCpuNoCache,
        FlowsVariant::ByCpuVerdict1,
        FlowsVariant::ByCpu,
    ];
    let mut loaded = Vec::new();
    for v in variants {
        let dir = PathBuf::from(format!(
            "/sys/fs/bpf/lachesis-bench-verdict-{}-{}",
            v.name(),
            std::process::id()
        ));
        let cfg = DatapathConfig {
            bpffs_dir: dir.clone(),
            flows_max_entries: Some(65_536),
            attach_mode: AttachMode::Auto,
            ..DatapathConfig::default()
        };
        let (dp, _, _) = Datapath::load_variant(&cfg, v).expect("load");
        let net = populate(&dp);
        map_test_run_tap(&dp, &net);
        loaded.push((v, dp, dir, net));
    }
    let base = baseline_object().expect("baseline");
    let ns = |d: std::time::Duration| d.as_secs_f64() * 1e9;
    let net = &loaded[0].3;
    println!(
        "{:<16} {:<18} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "path", "program", "rep ns", "ratio", "alt ns", "ratio", "64 ns", "ratio"
    );
    let mut json = Vec::new();
    for path in paths(net) {
        let frames64 = interleaved(&path, FLOWS);
        // base
        let run_base = |f: &[u8], r: u32| ns(base.test_run(f, r).expect("run").duration);
        let measure = |run: &dyn Fn(&[u8], u32) -> f64| {
            for f in frames64.iter().chain(path.frames.iter()) {
                run(f, 1);
            }
            let rep = median((0..ROUNDS).map(|_| run(&path.frames[0], REPEAT)).collect());
            let alt = median((0..CALLS).map(|i| run(&path.frames[i % 2], 1)).collect());
            let i64s = median((0..CALLS).map(|i| run(&frames64[i % FLOWS], 1)).collect());
            (rep, alt, i64s)
        };
        let b = measure(&run_base);
        let mut fields = Vec::new();
        for (v, dp, _, _) in &loaded {
            let run = |f: &[u8], r: u32| ns(dp.test_run(path.dir, f, r).expect("run").duration);
            let m = measure(&run);
            println!(
                "{:<16} {:<18} {:>8.1} {:>7.2}x {:>8.1} {:>7.2}x {:>8.1} {:>7.2}x",
                path.name,
                v.name(),
                m.0,
                m.0 / b.0,
                m.1,
                m.1 / b.1,
                m.2,
                m.2 / b.2
            );
            fields.push(format!(
                "\"{}\":{{\"rep_ratio\":{:.3},\"alt_ratio\":{:.3},\"i64_ratio\":{:.3}}}",
                v.name(),
                m.0 / b.0,
                m.1 / b.1,
                m.2 / b.2
            ));
        }
        json.push(format!("\"{}\":{{{}}}", path.name, fields.join(",")));
    }
    println!("{{{}}}", json.join(","));
    for (_, dp, dir, _) in loaded {
        drop(dp);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
