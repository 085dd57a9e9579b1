//! `make bench-drain`: time to read a full `flows` map of 65 536 entries with
//! the kernel's batch lookup, and the same with one key at a time
//! (`get_next_key` + lookup per entry) for contrast. Root required.

use std::path::PathBuf;
use std::time::Instant;

#[expect(
    dead_code,
    reason = "shared with bench_cores, which alone checks entries by index"
)]
#[path = "common/fill.rs"]
mod fill;

use lachesis_datapath::{AttachMode, Datapath, DatapathConfig, DrainBuffer};

const ENTRIES: u32 = 65_536;
const ROUNDS: usize = 9;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    lachesis_lab::require_root();
    let dir = PathBuf::from(format!(
        "/sys/fs/bpf/lachesis-bench-drain-{}",
        std::process::id()
    ));
    let cfg = DatapathConfig {
        bpffs_dir: dir.clone(),
        flows_max_entries: Some(ENTRIES),
        attach_mode: AttachMode::Auto,
        ..DatapathConfig::default()
    };
    let (dp, _, _) = Datapath::load(&cfg).expect("load the classifier");
    eprintln!(
        "filling flows with {ENTRIES} entries on {} possible CPUs…",
        dp.possible_cpus()
    );
    fill::fill(&dp, ENTRIES, |_| 1);
    let mut buf = DrainBuffer::new();
    let mut batched = Vec::new();
    let mut calls = 0;
    for _ in 0..ROUNDS {
        let t = Instant::now();
        dp.drain(&mut buf).expect("drain");
        batched.push(t.elapsed().as_secs_f64() * 1e3);
        assert_eq!(
            buf.entries.len(),
            ENTRIES as usize,
            "batched drain must see every entry"
        );
        calls = buf.calls;
    }
    let mut iterated = Vec::new();
    for _ in 0..ROUNDS.min(5) {
        let t = Instant::now();
        dp.drain_iterated(&mut buf).expect("drain");
        iterated.push(t.elapsed().as_secs_f64() * 1e3);
        assert_eq!(
            buf.entries.len(),
            ENTRIES as usize,
            "iterated drain must see every entry"
        );
    }
    let (b, it) = (median(batched), median(iterated));
    println!(
        "drain of a full flows map ({ENTRIES} entries, {} possible CPUs), medians",
        dp.possible_cpus()
    );
    println!("{:<28} {:>10} {:>12}", "method", "ms", "syscalls");
    println!("{:<28} {:>10.2} {:>12}", "batch lookup", b, calls);
    println!(
        "{:<28} {:>10.2} {:>12}",
        "one key at a time",
        it,
        2 * ENTRIES
    );
    println!("speed-up: {:.1}x", it / b);
    println!("{{\"drain_batched_65536_ms\":{b:.3},\"drain_iterated_65536_ms\":{it:.3},\"batched_syscalls\":{calls},\"speedup\":{:.2}}}", it / b);
    drop(dp);
    let _ = std::fs::remove_dir_all(&dir);
}
