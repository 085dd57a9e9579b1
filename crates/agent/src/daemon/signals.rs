//! The signals the daemon answers (docs/operations.md "Stop", "Reload"):
//! SIGTERM and SIGINT stop it, SIGHUP reloads the tunables once running.
//! Installed before boot, so a stop during boot is seen.

use anyhow::Context as _;
use tokio::signal::unix::{signal, Signal, SignalKind};
use tracing::warn;

/// SIGTERM, SIGINT and SIGHUP, installed before boot.
pub(super) struct Signals {
    term: Signal,
    int: Signal,
    hup: Signal,
}

/// What arrived.
pub(super) enum Received {
    /// SIGTERM or SIGINT, by name.
    Stop(&'static str),
    /// SIGHUP.
    Hangup,
}

impl Signals {
    pub(super) fn install() -> anyhow::Result<Signals> {
        let s = |k| signal(k).context("installing a signal handler");
        Ok(Signals {
            term: s(SignalKind::terminate())?,
            int: s(SignalKind::interrupt())?,
            hup: s(SignalKind::hangup())?,
        })
    }

    pub(super) async fn next(&mut self) -> Received {
        tokio::select! {
            _ = self.term.recv() => Received::Stop("SIGTERM"),
            _ = self.int.recv() => Received::Stop("SIGINT"),
            _ = self.hup.recv() => Received::Hangup,
        }
    }

    /// The next stop signal, during boot: a SIGHUP then has no tunables to
    /// swap into running tasks yet, so it is ignored (and said so).
    pub(super) async fn stop(&mut self) -> &'static str {
        loop {
            match self.next().await {
                Received::Stop(name) => return name,
                Received::Hangup => warn!("SIGHUP during boot ignored: reload once running"),
            }
        }
    }
}
