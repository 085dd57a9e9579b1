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

use lachesis_datapath::{baseline_object, FlowsVariant};
use paths::{interleaved, load, measure, paths};

const CALLS: usize = 12_800;
const FLOWS: usize = 64;

fn main() {
    lachesis_lab::require_root();
    let variants = [
        FlowsVariant::ByCpuNoCache,
        FlowsVariant::ByCpuVerdict1,
        FlowsVariant::ByCpu,
    ];
    let loaded: Vec<_> = variants
        .into_iter()
        .map(|v| {
            let (dp, dir, net) = load(v);
            (v, dp, dir, net)
        })
        .collect();
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
        let run_base = |f: &[u8], r: u32| ns(base.test_run(f, r).expect("run").duration);
        let b = measure(&run_base, &path, &frames64, CALLS);
        let mut fields = Vec::new();
        for (v, dp, _, _) in &loaded {
            let run = |f: &[u8], r: u32| ns(dp.test_run(path.dir, f, r).expect("run").duration);
            let m = measure(&run, &path, &frames64, CALLS);
            let (rep, alt, i64s) = m.over(&b);
            println!(
                "{:<16} {:<18} {:>8.1} {:>7.2}x {:>8.1} {:>7.2}x {:>8.1} {:>7.2}x",
                path.name,
                v.name(),
                m.repeated,
                rep,
                m.alternating,
                alt,
                m.interleaved,
                i64s
            );
            fields.push(format!(
                "\"{}\":{{\"rep_ratio\":{rep:.3},\"alt_ratio\":{alt:.3},\"i64_ratio\":{i64s:.3}}}",
                v.name(),
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
