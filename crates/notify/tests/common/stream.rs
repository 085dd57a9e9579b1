//! The state-stream tests' and `make bench-stream`'s shared pieces (the
//! example includes this file by path): the test broker's stream config,
//! a run's stream names, records of a lean port's size, publishing,
//! reading, deleting.

use std::time::Duration;

use lachesis_lab::services::RABBITMQ_PORT;
use lachesis_notify::rabbitmq::stream::{Delivery, StreamConfig, StreamReader, StreamWriter};
use lachesis_notify::RabbitUrl;

/// The size of a lean port record (DESIGN §5's fields, JSON).
pub const RECORD_BYTES: usize = 600;

pub fn config(stream: &str) -> StreamConfig {
    config_as("guest:guest", stream)
}

pub fn config_as(login: &str, stream: &str) -> StreamConfig {
    let url = format!("rabbit://{login}@127.0.0.1:{RABBITMQ_PORT}/");
    let mut c = StreamConfig::new(RabbitUrl::parse(&url).unwrap());
    stream.clone_into(&mut c.stream);
    c.max_age = Duration::from_mins(10);
    c
}

/// A stream name of this test run's own.
pub fn name(what: &str) -> String {
    format!("lt-{what}-{}", std::process::id())
}

/// Records `from..to`: key `port/<n>`, a body of [`RECORD_BYTES`] that
/// names it.
pub fn records(from: usize, to: usize) -> Vec<(String, Vec<u8>)> {
    (from..to)
        .map(|i| {
            let mut body = format!("{{\"n\":{i},\"pad\":\"").into_bytes();
            body.resize(RECORD_BYTES - 2, b'x');
            body.extend_from_slice(b"\"}");
            (format!("port/{i:08}"), body)
        })
        .collect()
}

/// Publishes `records` in batches of `batch`.
pub async fn publish(w: &StreamWriter, records: &[(String, Vec<u8>)], batch: usize) {
    for chunk in records.chunks(batch) {
        w.publish_batch(chunk).await.unwrap();
    }
}

/// The next `n` records within `limit`.
pub async fn read(r: &mut StreamReader, n: usize, limit: Duration) -> Vec<Delivery> {
    let mut got = Vec::with_capacity(n);
    let until = tokio::time::Instant::now() + limit;
    while got.len() < n {
        match tokio::time::timeout_at(until, r.next()).await {
            Ok(Ok(d)) => got.push(d),
            Ok(Err(e)) => panic!("after {} of {n} records: {e}", got.len()),
            Err(elapsed) => panic!("only {} of {n} records: {elapsed}", got.len()),
        }
    }
    got
}

/// Deletes a stream.
pub async fn delete(stream: &str) {
    let url = format!("amqp://guest:guest@127.0.0.1:{RABBITMQ_PORT}/%2f");
    let conn = lapin::Connection::connect(&url, lapin::ConnectionProperties::default())
        .await
        .unwrap();
    let chan = conn.create_channel().await.unwrap();
    chan.queue_delete(stream.into(), lapin::options::QueueDeleteOptions::default())
        .await
        .unwrap();
}
