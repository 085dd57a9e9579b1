//! The state stream (DESIGN §17, decision 0008) against Debian's
//! RabbitMQ 3.10 (`scripts/real-cloud up-rabbitmq`): a stream queue
//! written with confirms and read over AMQP 0-9-1. Each test uses a stream
//! of its own and deletes it at the end. Root only; fails loudly when the
//! broker cannot run.

use crate::common;
use common::stream::{config, config_as, delete, name, publish, read, records};

use std::time::{Duration, Instant, SystemTime};

use lachesis_lab::services::RABBITMQ_PORT;
use lachesis_notify::rabbitmq::stream::{
    Delivery, Start, Step, StreamConfig, StreamError, StreamReader, StreamWriter,
};

fn keys(got: &[Delivery]) -> Vec<String> {
    got.iter().map(|d| d.key.clone()).collect()
}

fn keys_of(records: &[(String, Vec<u8>)]) -> Vec<String> {
    records.iter().map(|(k, _)| k.clone()).collect()
}

/// Nothing more arrives within `wait`.
async fn nothing_more(r: &mut StreamReader, wait: Duration) {
    if let Ok(more) = tokio::time::timeout(wait, r.next()).await {
        panic!("expected nothing more, got {more:?}");
    }
}

fn assert_increasing(got: &[Delivery]) {
    for pair in got.windows(2) {
        assert!(
            pair[0].offset < pair[1].offset,
            "offsets must increase: {} then {}",
            pair[0].offset,
            pair[1].offset
        );
    }
}

/// A test's broker, stream of its own and a writer to it.
struct Fixture {
    broker: lachesis_lab::Services,
    stream: String,
    config: StreamConfig,
    writer: StreamWriter,
}

impl Fixture {
    async fn new(what: &str) -> Fixture {
        common::logs();
        let broker = lachesis_lab::Services::rabbitmq();
        let stream = name(what);
        let config = config(&stream);
        let writer = StreamWriter::open(&config).await.unwrap();
        Fixture {
            broker,
            stream,
            config,
            writer,
        }
    }

    async fn reader(&self, start: Start) -> StreamReader {
        StreamReader::open(&self.config, start).await.unwrap()
    }

    /// Deletes the stream (a stream is durable: it would stay on the
    /// broker's disk between runs).
    async fn delete(self) {
        delete(&self.stream).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_come_back_in_order_from_the_first_and_from_an_offset() {
    let f = Fixture::new("order").await;
    // Opening again declares the same stream: a no-op.
    drop(StreamWriter::open(&f.config).await.unwrap());
    let sent = records(0, 50);
    publish(&f.writer, &sent, 10).await;

    let before = SystemTime::now() - Duration::from_mins(1);
    let mut r = f.reader(Start::First).await;
    let got = read(&mut r, 50, Duration::from_secs(10)).await;
    assert_eq!(keys(&got), keys_of(&sent), "every record, in order");
    assert_increasing(&got);
    assert!(got.iter().zip(&sent).all(|(d, (_, body))| &d.body == body));
    assert!(got.iter().all(|d| d.timestamp.is_some_and(|t| t > before)));
    nothing_more(&mut r, Duration::from_millis(300)).await;

    // From an offset in the middle of a chunk (batches of 10 are written
    // as chunks of up to 10): the reader skips what comes before it.
    let k = got[17].offset;
    let mut r = f.reader(Start::Offset(k)).await;
    let from_k = read(&mut r, 33, Duration::from_secs(10)).await;
    assert_eq!(from_k[0].offset, k, "starts at the offset asked for");
    assert_eq!(keys(&from_k), keys_of(&sent[17..]));
    let mut r = f.reader(Start::after(k)).await;
    assert_eq!(
        read(&mut r, 1, Duration::from_secs(10)).await[0].key,
        sent[18].0
    );
    f.delete().await;
}

/// What this proves: a reader from a time gets none of the records written
/// (and confirmed) two seconds before it, and gets the first record written
/// after it first. What it cannot prove: the broker starts at the first
/// *chunk* written at or after the time, and a chunk is whatever the
/// broker wrote together, so a record a few milliseconds older than the
/// time can come first when it shares a chunk with newer ones; the time is
/// sent in whole seconds. Readers must not rely on a timestamp start for
/// exactness: the relay's snapshot markers are what an agent starts from.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timestamp_start_skips_chunks_written_well_before_it() {
    let f = Fixture::new("time").await;
    publish(&f.writer, &records(0, 20), 10).await;
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let t = SystemTime::now();
    let new = records(20, 30);
    publish(&f.writer, &new, 10).await;

    let mut r = f.reader(Start::Timestamp(t)).await;
    let got = read(&mut r, 10, Duration::from_secs(10)).await;
    assert_eq!(keys(&got), keys_of(&new), "only what was written after t");
    nothing_more(&mut r, Duration::from_millis(300)).await;
    f.delete().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_stream_or_a_refused_login_is_a_typed_error() {
    common::logs();
    let _broker = lachesis_lab::Services::rabbitmq();
    let stream = name("missing");
    let e = StreamReader::open(&config(&stream), Start::First)
        .await
        .unwrap_err();
    assert!(matches!(e, StreamError::MissingStream { .. }), "{e:?}");
    let text = e.to_string();
    assert!(
        text.contains(&stream) && text.contains(&format!("127.0.0.1:{RABBITMQ_PORT}")),
        "{text}"
    );
    assert!(text.contains("relay"), "{text}");

    let e = StreamReader::open(&config_as("guest:wrong", &stream), Start::First)
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            StreamError::Refused {
                doing: Step::Login,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(!e.to_string().contains("wrong"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn next_sees_only_what_is_written_after_it_subscribed() {
    let f = Fixture::new("next").await;
    publish(&f.writer, &records(0, 5), 5).await;
    let mut r = f.reader(Start::Next).await;
    nothing_more(&mut r, Duration::from_millis(300)).await;
    let after = records(5, 10);
    publish(&f.writer, &after, 5).await;
    let got = read(&mut r, 5, Duration::from_secs(10)).await;
    assert_eq!(keys(&got), keys_of(&after));
    nothing_more(&mut r, Duration::from_millis(300)).await;
    f.delete().await;
}

/// Opens `open` until it succeeds, for up to a minute: after a restart the
/// broker accepts connections before its streams are back.
async fn retry<T, F, Fut>(what: &str, mut open: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, StreamError>>,
{
    let until = Instant::now() + Duration::from_mins(1);
    loop {
        match open().await {
            Ok(t) => return t,
            Err(e) if Instant::now() < until => {
                tracing::info!(error = %e, "{what}: not yet");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => panic!("{what}: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_restart_loses_nothing_confirmed_and_a_reader_resumes_exactly() {
    let f = Fixture::new("restart").await;
    let config = f.config.clone();
    let first = records(0, 100);
    publish(&f.writer, &first, 25).await;
    let mut reader = f.reader(Start::First).await;
    let seen = read(&mut reader, 40, Duration::from_secs(10)).await;
    let last = seen.last().unwrap().offset;

    f.broker.stop_broker();
    let ended = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            // What the reader had buffered may still come; then the end.
            if let Err(e) = reader.next().await {
                return e;
            }
        }
    })
    .await
    .expect("the reader sees the broker go");
    assert!(
        matches!(
            ended,
            StreamError::Closed { .. } | StreamError::Consume { .. }
        ),
        "{ended:?}"
    );
    assert!(f.writer.publish_batch(&records(100, 101)).await.is_err());
    drop(reader);
    f.broker.start_broker();

    let writer = retry("the writer reopens", || StreamWriter::open(&config)).await;
    let second = records(100, 130);
    publish(&writer, &second, 10).await;
    let mut r = retry("the reader reopens", || {
        StreamReader::open(&config, Start::after(last))
    })
    .await;
    let resumed = read(&mut r, 90, Duration::from_secs(10)).await;
    let want: Vec<String> = keys_of(&first[40..])
        .into_iter()
        .chain(keys_of(&second))
        .collect();
    assert_eq!(keys(&resumed), want, "continues right after the last seen");
    assert!(resumed[0].offset > last);
    nothing_more(&mut r, Duration::from_millis(300)).await;

    let mut all = f.reader(Start::First).await;
    let everything = read(&mut all, 130, Duration::from_secs(10)).await;
    let want: Vec<String> = keys_of(&first)
        .into_iter()
        .chain(keys_of(&second))
        .collect();
    assert_eq!(keys(&everything), want, "every confirmed record survived");
    assert_increasing(&everything);
    f.delete().await;
}

/// The words of one shell command line, single quotes honoured (the
/// `rabbitmqctl` lines of docs/fleet.md).
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    let mut any = false;
    for c in line.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                any = true;
            }
            c if c.is_whitespace() && !quoted => {
                if any {
                    out.push(std::mem::take(&mut word));
                    any = false;
                }
            }
            c => {
                word.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(word);
    }
    out
}

/// docs/fleet.md "Broker permissions", run as written (users and stream
/// renamed to this run's own): with them the relay declares the stream and
/// writes it but cannot read it; an agent reads it but can neither write
/// nor declare it, and before the relay has created it is told that the
/// relay creates it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_permissions_let_the_relay_write_and_the_agents_only_read() {
    common::logs();
    let broker = lachesis_lab::Services::rabbitmq();
    let stream = name("perms");
    let (relay, agent) = (name("relay"), name("agent"));
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/fleet.md"))
        .unwrap();
    let section = doc
        .split("### Broker permissions")
        .nth(1)
        .and_then(|s| s.split("\n### ").next())
        .expect("docs/fleet.md has a Broker permissions section");
    let commands: Vec<Vec<String>> = section
        .lines()
        .filter(|l| l.starts_with("rabbitmqctl "))
        .map(|l| {
            let line = l
                .replace("lachesis-relay", &relay)
                .replace("lachesis-agent", &agent)
                .replace("lachesis\\.state", &stream.replace('-', "\\-"))
                .replace('…', "s3cret");
            words(&line)[1..].to_vec()
        })
        .collect();
    assert_eq!(
        commands.len(),
        4,
        "two users, two permission sets: {commands:?}"
    );
    let _users = Users {
        broker: &broker,
        names: [relay.clone(), agent.clone()],
    };
    for args in &commands {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        broker.rabbitmqctl(&args);
    }
    let as_user = |user: &str| config_as(&format!("{user}:s3cret"), &stream);

    // Before the relay: the agent is told the relay creates the stream.
    let e = StreamReader::open(&as_user(&agent), Start::First)
        .await
        .unwrap_err();
    assert!(
        matches!(e, StreamError::MissingStream { .. }),
        "an agent before any relay: {e:?}"
    );
    // The relay declares and writes.
    let writer = StreamWriter::open(&as_user(&relay)).await.unwrap();
    publish(&writer, &records(0, 10), 10).await;
    // The agent reads, and may not write.
    let mut reader = StreamReader::open(&as_user(&agent), Start::First)
        .await
        .unwrap();
    assert_eq!(
        read(&mut reader, 10, Duration::from_secs(10)).await.len(),
        10
    );
    let refused = StreamWriter::open(&as_user(&agent)).await.unwrap_err();
    assert!(
        refused.to_string().contains("refused") || refused.to_string().contains("ACCESS_REFUSED"),
        "an agent's write: {refused}"
    );
    // The relay may not read.
    let refused = StreamReader::open(&as_user(&relay), Start::First)
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("refused") || refused.to_string().contains("ACCESS_REFUSED"),
        "the relay's read: {refused}"
    );
    drop((reader, writer));
    delete(&stream).await;
}

/// The test's broker users, deleted however the test ends.
struct Users<'a> {
    broker: &'a lachesis_lab::Services,
    names: [String; 2],
}

impl Drop for Users<'_> {
    fn drop(&mut self) {
        for user in &self.names {
            if let Err(e) = self.broker.try_rabbitmqctl(&["delete_user", user]) {
                eprintln!("could not delete broker user {user}: {e}");
            }
        }
    }
}
