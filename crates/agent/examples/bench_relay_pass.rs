//! `make bench-relay-pass` (no root, no broker): what one relay-mode pass
//! costs an agent's node (DESIGN §17, docs/fleet.md "Running"): the
//! benchmarks' generated cloud (`lachesis_sim::generate`, 20 000 ports)
//! published as a relay publishes it (each resource cut to the planner's
//! fields, its revision, one snapshot) and fed to the assembler the
//! daemon's stream task feeds, then planned by [`RelaySource`].
//!
//! Cases: the first pass (every body parsed); a pass after one port
//! changed, and one after 100 ports changed, by the source that parses
//! only what changed, and, in the same round, by a source that has parsed
//! nothing (the whole state parsed again, what every pass cost before).
//! Medians of several rounds, the ratio within each round; a table, then
//! one JSON line. Nothing is asserted on time; the exit status is 1 when
//! the two sources' plans differ.

mod common;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use common::{json_line, median, ms};
use lachesis_agent::reconcile::{MetadataSource as _, RelaySource, SharedAssembler};
use lachesis_fleet::{revision_of, Entry, Marker, Phase, Record};
use lachesis_planner::{Plan, PlanOptions, Resource};
use lachesis_sim::{generate, Store};
use serde_json::Value;

const ROUNDS: usize = 9;
/// When the relay observed the lists without `revision_number`.
const OBSERVED_MS: u64 = 1_700_000_000_000;

fn marker(phase: Phase) -> Record {
    Record::Marker(Marker {
        relay: "bench".into(),
        snapshot: "bench-1".into(),
        phase,
    })
}

/// Feeds `records` after what the assembler read.
fn feed(shared: &SharedAssembler, records: &[Record]) {
    shared.with(|a| {
        let from = a.offset().map_or(0, |o| o + 1);
        for (offset, record) in (from..).zip(records) {
            a.feed(offset, record, OBSERVED_MS);
        }
    });
}

/// Ports `0..n` of `ports` again, renamed, at a newer revision.
fn changed(ports: &[(String, u64, Value)], n: usize, version: u64) -> Vec<Record> {
    ports
        .iter()
        .take(n)
        .map(|(id, rev, body)| {
            let mut body = body.clone();
            body["name"] = Value::String(format!("bench-{version}"));
            let rev = rev + version;
            Record::Entry(Entry::live(Resource::Ports, id.clone(), rev, &body))
        })
        .collect()
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let store = Store::from_topology(&generate::large()).expect("the generated cloud is valid");
    let bodies = generate::bodies(&store).kept();
    let mut records = vec![marker(Phase::Start)];
    let mut ports = Vec::new();
    for kind in Resource::ALL {
        for item in bodies.items(kind).unwrap_or_default() {
            let id = item["id"]
                .as_str()
                .expect("every resource has an id")
                .to_owned();
            let rev = revision_of(kind, item, OBSERVED_MS).expect("a revision");
            if kind == Resource::Ports {
                ports.push((id.clone(), rev, item.clone()));
            }
            records.push(Record::Entry(
                Entry::live(kind, id, rev, item).in_snapshot("bench-1"),
            ));
        }
    }
    let count = records.len() as u64 - 1;
    records.push(marker(Phase::End { records: count }));
    let shared = SharedAssembler::new();
    feed(&shared, &records);
    assert!(shared.is_ready(), "one whole snapshot was fed");

    let options = PlanOptions::default();
    let source = RelaySource::new(shared.clone());
    let started = Instant::now();
    let mut previous: Arc<Plan> = source.sync(None, options).await.expect("ready").plan;
    let first = ms(started.elapsed());

    let mut same = true;
    let mut rows = Vec::new();
    let mut version = 0;
    for n in [1, 100] {
        let (mut incremental, mut whole, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            version += 1;
            feed(&shared, &changed(&ports, n, version));
            let started = Instant::now();
            let got = source
                .sync(Some(previous.clone()), options)
                .await
                .expect("ready");
            let inc = ms(started.elapsed());
            let started = Instant::now();
            let fresh = RelaySource::new(shared.clone())
                .sync(Some(previous.clone()), options)
                .await
                .expect("ready");
            let all = ms(started.elapsed());
            same &= got.plan == fresh.plan;
            previous = got.plan;
            incremental.push(inc);
            whole.push(all);
            ratio.push(all / inc);
        }
        rows.push((n, median(&incremental), median(&whole), median(&ratio)));
    }

    println!(
        "bench-relay-pass: {} records ({} ports); medians of {ROUNDS} rounds",
        count,
        ports.len()
    );
    println!("first pass (every body parsed)       {first:8.1} ms");
    let mut json = vec![("first_pass_ms".to_owned(), first)];
    for (n, inc, whole, ratio) in &rows {
        println!(
            "after {n:>3} port(s) changed: parsing what changed {inc:8.1} ms | parsing everything {whole:8.1} ms | {ratio:.2}x"
        );
        json.push((format!("changed_{n}_incremental_ms"), *inc));
        json.push((format!("changed_{n}_whole_ms"), *whole));
        json.push((format!("changed_{n}_ratio"), *ratio));
    }
    println!("{}", json_line(&json));
    if same {
        ExitCode::SUCCESS
    } else {
        eprintln!("bench-relay-pass: the two sources planned different plans");
        ExitCode::FAILURE
    }
}
