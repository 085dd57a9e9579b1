//! `lachesis relay` as a child process against the simulator and the
//! services tier's RabbitMQ, and what the relay tests read back: the
//! simulator's own lists, the clock records carry, the run's stream.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use lachesis_fleet::{decode, Assembler, Record};
use lachesis_lab::services::RABBITMQ_PORT;
use lachesis_notify::rabbitmq::stream::{Start, StreamConfig, StreamReader};
use lachesis_planner::Resource;

use super::{Sim, LACHESIS};

/// The services tier's RabbitMQ, as the relay, the simulator and the
/// agents are pointed at it (from the namespace they run in).
pub const BROKER: &str = "amqp://guest:guest@127.0.0.1:16672/%2f";

/// Milliseconds since the epoch, the records' clock.
pub fn now_ms() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

/// A relay process and its files.
pub struct Relay {
    child: Child,
    log: PathBuf,
    /// Its `listen.metrics`.
    pub metrics: SocketAddr,
}

impl Relay {
    pub fn start(config: &Path, log: PathBuf, metrics: SocketAddr) -> Relay {
        Relay::start_in(Path::new(LACHESIS), config, log, metrics, None)
    }

    /// [`Relay::start`] of `binary`, in `sandbox` (its unit's sandboxing
    /// and privileges: no capability, no new privileges) when given.
    pub fn start_in(
        binary: &Path,
        config: &Path,
        log: PathBuf,
        metrics: SocketAddr,
        sandbox: Option<&lachesis_lab::sandbox::Sandbox>,
    ) -> Relay {
        let mut cmd = Command::new(binary);
        if let Some(sandbox) = sandbox {
            sandbox.apply(&mut cmd);
        }
        lachesis_lab::agent::scrub_env(&mut cmd);
        let child = cmd
            .args(["relay", "--config"])
            .arg(config)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start lachesis relay");
        Relay {
            child,
            log,
            metrics,
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Sends `sig`.
    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's PID.
        let rc = unsafe { libc::kill(i32::try_from(self.child.id()).unwrap(), sig) };
        assert_eq!(rc, 0, "kill({sig})");
    }

    /// Whether it is still running.
    pub fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// SIGKILL, then reaped.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The relay's configuration for `stream`, against `sim`'s `sim` cloud,
/// with a digest every `digest` (`2s`, `10m`) and a snapshot every 5 s,
/// written to `dir/relay-<digest>.yaml`.
pub fn write_config(
    dir: &Path,
    sim: &Sim,
    stream: &str,
    metrics: SocketAddr,
    digest: &str,
) -> PathBuf {
    let clouds = sim.clouds_yaml(dir, |t| t);
    let text = format!(
        "openstack:\n  cloud: sim\n  clouds_file: {clouds}\n\
         listen:\n  metrics: {metrics}\n\
         notifications:\n  rabbitmq:\n    url: \"{BROKER}\"\n\
         stream:\n  url: \"{BROKER}\"\n  stream: {stream}\n  max_age: 10m\n\
         relay:\n  name: test-relay\n  digest_interval: {digest}\n  snapshot_interval: 5s\n\
         log:\n  level: info\n",
        clouds = clouds.display()
    );
    let path = dir.join(format!("relay-{digest}.yaml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// The ids the simulator holds for `kind` (its control API's topology).
pub fn listed(sim: &Sim, kind: Resource) -> BTreeSet<String> {
    let body = lachesis_lab::http::get(sim.addr.parse().unwrap(), "/sim/topology")
        .expect("GET /sim/topology")
        .1;
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    v[kind.collection()]
        .as_array()
        .unwrap_or_else(|| panic!("no {} in the topology", kind.collection()))
        .iter()
        .map(|o| o["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Deletes the run's stream (it is durable: it would stay on the broker).
pub async fn delete_stream(stream: &str) -> Result<(), lapin::Error> {
    let conn = lapin::Connection::connect(
        &format!("amqp://guest:guest@127.0.0.1:{RABBITMQ_PORT}/%2f"),
        lapin::ConnectionProperties::default(),
    )
    .await?;
    let chan = conn.create_channel().await?;
    chan.queue_delete(stream.into(), lapin::options::QueueDeleteOptions::default())
        .await?;
    Ok(())
}

/// The run's stream, deleted however the test ends (a failure to delete
/// is only reported: the broker may be what failed).
pub struct StreamGuard(pub String);

impl Drop for StreamGuard {
    fn drop(&mut self) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        if let Err(e) = runtime.block_on(delete_stream(&self.0)) {
            eprintln!("warning: the stream {} was not deleted: {e}", self.0);
        }
    }
}

/// Reads the stream into an assembler until `done` holds (or fails after
/// `limit`, naming what was read).
pub async fn read_until(
    reader: &mut StreamReader,
    asm: &mut Assembler,
    limit: Duration,
    what: &str,
    relay: &Relay,
    mut done: impl FnMut(&Assembler, &Record) -> bool,
) {
    let until = Instant::now() + limit;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "{what}: not within {limit:?}; ready {}, {:?}; relay log:\n{}",
            asm.ready(),
            asm.counts(),
            relay.log_text()
        );
        let Ok(delivery) = tokio::time::timeout(left, reader.next()).await else {
            continue;
        };
        let delivery = delivery.expect("reading the stream");
        let record = decode(&delivery.body).expect("the relay writes v1 records");
        asm.feed(delivery.offset, &record, now_ms());
        if done(asm, &record) {
            return;
        }
    }
}

/// The ids the assembler holds live for `kind`.
pub fn held(asm: &Assembler, kind: Resource) -> BTreeSet<String> {
    asm.state()
        .pages()
        .remove(&kind)
        .unwrap_or_default()
        .iter()
        .map(|b| b["id"].as_str().unwrap().to_owned())
        .collect()
}

/// A reader of `cfg`'s stream from its first record, once the relay has
/// declared it (at its first batch); fails after `limit` with its log.
pub async fn open_when_declared(
    cfg: &StreamConfig,
    limit: Duration,
    relay: &Relay,
) -> StreamReader {
    let until = Instant::now() + limit;
    loop {
        match StreamReader::open(cfg, Start::First).await {
            Ok(r) => return r,
            Err(e) => {
                assert!(
                    Instant::now() < until,
                    "no stream {}: {e}\nrelay log:\n{}",
                    cfg.stream,
                    relay.log_text()
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}
