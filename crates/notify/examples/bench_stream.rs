//! `make bench-stream` (root: the services tier's RabbitMQ): decision
//! 0008's figures. 20 000 records of a lean port's size published to a
//! stream queue in batches, then read from the first record with several
//! prefetch and acknowledgement paces; medians of three runs. Prints,
//! asserts nothing on time; each run's streams are deleted.

#[path = "../tests/common/stream.rs"]
mod stream;

use std::time::{Duration, Instant};

use lachesis_notify::rabbitmq::stream::{Start, StreamReader, StreamWriter, Tuning};
use stream::{config, delete, name, publish, read, records, RECORD_BYTES};

fn main() {
    lachesis_lab::require_root_for("the services tier's RabbitMQ");
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(measure());
}

async fn measure() {
    const N: usize = 20_000;
    const RUNS: usize = 3;
    const BATCHES: [usize; 2] = [100, 1000];
    const TUNINGS: [(u16, u16); 5] = [
        (100, 50),
        (1000, 1),
        (1000, 500),
        (5000, 2500),
        (20000, 10000),
    ];
    let _broker = lachesis_lab::Services::rabbitmq();
    let sent = records(0, N);
    let bytes: usize = sent.iter().map(|(k, b)| k.len() + b.len()).sum();
    let mut publish_secs = vec![Vec::new(); BATCHES.len()];
    let mut read_secs = vec![Vec::new(); TUNINGS.len()];
    for run in 0..RUNS {
        for (b, batch) in BATCHES.iter().enumerate() {
            let stream = name(&format!("measure-{run}-{batch}"));
            let c = config(&stream);
            let w = StreamWriter::open(&c).await.unwrap();
            let t0 = Instant::now();
            publish(&w, &sent, *batch).await;
            publish_secs[b].push(t0.elapsed().as_secs_f64());
            drop(w);
            if b + 1 < BATCHES.len() {
                delete(&stream).await;
                continue;
            }
            for (i, (prefetch, ack_every)) in TUNINGS.iter().enumerate() {
                let tuning = Tuning {
                    prefetch: *prefetch,
                    ack_every: *ack_every,
                };
                let t0 = Instant::now();
                let mut r = StreamReader::open_tuned(&c, Start::First, tuning)
                    .await
                    .unwrap();
                let got = read(&mut r, N, Duration::from_mins(2)).await;
                read_secs[i].push(t0.elapsed().as_secs_f64());
                assert_eq!(got.last().unwrap().key, sent[N - 1].0);
            }
            delete(&stream).await;
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    #[expect(clippy::cast_precision_loss, reason = "figures for a person to read")]
    let (n, mb) = (N as f64, bytes as f64 / 1e6);
    println!("{N} records of {RECORD_BYTES} B ({mb:.1} MB), medians of {RUNS} runs");
    for (b, batch) in BATCHES.iter().enumerate() {
        let s = median(&mut publish_secs[b]);
        println!(
            "publish, batches of {batch:>5}: {s:6.3} s  {:>8.0} records/s  {:6.1} MB/s",
            n / s,
            mb / s
        );
    }
    for (i, (prefetch, ack_every)) in TUNINGS.iter().enumerate() {
        let s = median(&mut read_secs[i]);
        println!(
            "read from first, prefetch {prefetch:>5}, ack every {ack_every:>5}: {s:6.3} s  {:>8.0} records/s  {:6.1} MB/s",
            n / s,
            mb / s
        );
    }
}
