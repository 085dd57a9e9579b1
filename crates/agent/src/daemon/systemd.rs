//! systemd's service notifications (`sd_notify(3)`) for the unit's
//! `Type=notify` and `WatchdogSec=` (deploy/systemd/lachesis.service;
//! issue 19 items 8 and 9), spoken directly: one datagram per message to
//! the socket `$NOTIFY_SOCKET` names, no library.
//!
//! - `READY=1` once the configuration and everything it refers to are
//!   resolved, the locks held and the metrics listener answers: the agent
//!   is observable (`/readyz` says when boot reaches `running`). Not at
//!   `running`: with Neutron down and no state file boot waits as long as
//!   it must, and a start job that waited with it would time out and
//!   restart an agent that is doing the right thing.
//! - `STATUS=…`, what `systemctl status` shows: the boot phase, what cold
//!   start is waiting for, a failing sync (credentials refused: which
//!   cloud entry of which file), a stalled drain.
//! - `WATCHDOG=1` while the agent is alive — the supervisor's loop turns
//!   and drains succeed (the `/healthz` rule) — so systemd restarts an
//!   agent whose drains stopped; the next instance drains the pinned map,
//!   losing nothing.
//! - `STOPPING=1` when a stop begins.
//!
//! [`Notifier`] says these from the daemon's state; [`Systemd`] speaks them.

use std::os::linux::net::SocketAddrExt as _;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tracing::debug;

use super::health::Health;
use super::metrics::{DaemonMetrics, Families};
use crate::boot::{BootGate, BootState, Phase};
use crate::config::SharedTunables;
use crate::reconcile::{PassResult, ReconcileMetrics};

/// How often the status is refreshed when systemd set no watchdog.
const STATUS_EVERY: Duration = Duration::from_secs(5);
/// The longest error text put in a status line (`systemctl status` shows
/// one line; the journal has the whole error).
const STATUS_ERROR_CHARS: usize = 300;

/// The notification socket systemd gave this process.
#[derive(Debug)]
pub(crate) struct Systemd {
    socket: UnixDatagram,
    addr: SocketAddr,
    watchdog: Option<Duration>,
}

impl Systemd {
    /// From `$NOTIFY_SOCKET`, `$WATCHDOG_USEC` and `$WATCHDOG_PID`; `None`
    /// when the process was not started by systemd as `Type=notify` (or
    /// the socket cannot be used, which is logged).
    pub(crate) fn from_env() -> Option<Systemd> {
        let path = std::env::var_os("NOTIFY_SOCKET")?;
        let addr = socket_addr(&path.to_string_lossy())
            .map_err(|e| debug!(error = %e, "NOTIFY_SOCKET unusable"))
            .ok()?;
        let socket = UnixDatagram::unbound()
            .map_err(|e| debug!(error = %e, "no datagram socket for NOTIFY_SOCKET"))
            .ok()?;
        let watchdog = watchdog(
            std::env::var("WATCHDOG_USEC").ok().as_deref(),
            std::env::var("WATCHDOG_PID").ok().as_deref(),
            std::process::id(),
        );
        Some(Systemd {
            socket,
            addr,
            watchdog,
        })
    }

    /// Sends one notification; a failure is logged, never fatal (the
    /// agent counts bytes whether or not systemd listens).
    pub(crate) fn send(&self, message: &str) {
        if let Err(e) = self.socket.send_to_addr(message.as_bytes(), &self.addr) {
            debug!(error = %e, message, "sd_notify failed");
        }
    }

    /// How often [`Systemd::tick`] should run: a third of the watchdog
    /// period (two pings may be late before systemd acts), else
    /// [`STATUS_EVERY`].
    pub(crate) fn period(&self) -> Duration {
        self.watchdog.map_or(STATUS_EVERY, |w| w / 3)
    }

    /// The periodic message: the status, and a watchdog ping when
    /// `alive` and systemd watches.
    pub(crate) fn tick(&self, status: &str, alive: bool) {
        let mut message = format!("STATUS={status}");
        if alive && self.watchdog.is_some() {
            message.push_str("\nWATCHDOG=1");
        }
        self.send(&message);
    }
}

/// `$NOTIFY_SOCKET`: a path, or `@name` for an abstract socket.
fn socket_addr(text: &str) -> std::io::Result<SocketAddr> {
    match text.strip_prefix('@') {
        Some(name) => SocketAddr::from_abstract_name(name.as_bytes()),
        None => SocketAddr::from_pathname(text),
    }
}

/// The watchdog period, when systemd set one for this process
/// (`$WATCHDOG_PID`, when set, must be ours: a child must not ping for its
/// parent).
fn watchdog(usec: Option<&str>, pid: Option<&str>, own: u32) -> Option<Duration> {
    let usec: u64 = usec?.trim().parse().ok().filter(|u| *u > 0)?;
    if let Some(pid) = pid {
        if pid.trim().parse::<u32>().ok() != Some(own) {
            return None;
        }
    }
    Some(Duration::from_micros(usec))
}

/// What the status line is made of.
#[derive(Debug, Clone, Default)]
pub(crate) struct StatusInput {
    /// The boot gate.
    pub state: Option<BootState>,
    /// Booted from the state file's plan and not yet synced since.
    pub degraded: bool,
    /// Cold start's last failure, while it waits for OpenStack.
    pub waiting: Option<String>,
    /// The last reconcile pass, once running: its result and error.
    pub last_pass: Option<(PassResult, Option<String>)>,
    /// Why `/healthz` calls the agent stalled; `None` while alive.
    pub stalled: Option<String>,
}

/// The one line `systemctl status` shows for the agent.
pub(crate) fn status_line(s: &StatusInput) -> String {
    let short = |text: &str| -> String {
        let one_line = text.replace('\n', " ");
        if one_line.chars().count() > STATUS_ERROR_CHARS {
            let cut: String = one_line.chars().take(STATUS_ERROR_CHARS).collect();
            format!("{cut}…")
        } else {
            one_line
        }
    };
    let failing_pass = s.last_pass.as_ref().and_then(|(result, error)| {
        (*result != PassResult::Ok).then(|| {
            format!(
                "last reconcile pass {}: {}",
                result.label(),
                short(error.as_deref().unwrap_or("no detail"))
            )
        })
    });
    match &s.state {
        None | Some(BootState::Starting) => "starting".to_owned(),
        Some(BootState::Failed(reason)) => format!("boot failed: {}", short(reason)),
        Some(BootState::At(Phase::Running)) => {
            let mut line = match &s.stalled {
                None => "running".to_owned(),
                Some(why) => format!("running, but {}", short(why)),
            };
            if s.degraded {
                line.push_str(
                    "; degraded: counting under the state file's plan until a sync succeeds",
                );
            }
            if let Some(pass) = failing_pass {
                line.push_str("; ");
                line.push_str(&pass);
            }
            line
        }
        Some(BootState::At(phase)) => match &s.waiting {
            Some(error) => format!(
                "booting ({}): waiting for OpenStack, nothing new attached yet: {}",
                phase.label(),
                short(error)
            ),
            None => format!("booting ({})", phase.label()),
        },
    }
}

/// What systemd is told, from the daemon's own state; does nothing when
/// the process was not started by systemd as `Type=notify`.
pub(super) struct Notifier {
    systemd: Option<Systemd>,
    gate: Arc<BootGate>,
    daemon: DaemonMetrics,
    reconcile: ReconcileMetrics,
    health: Health,
    /// Cold start's last failure while it waits for OpenStack.
    waiting: Mutex<Option<String>>,
}

impl Notifier {
    pub(super) fn new(
        gate: &Arc<BootGate>,
        families: &Families,
        tunables: &Arc<SharedTunables>,
    ) -> Self {
        Notifier {
            systemd: Systemd::from_env(),
            gate: gate.clone(),
            daemon: families.daemon.clone(),
            reconcile: families.reconcile.clone(),
            health: Health {
                gate: gate.clone(),
                order: families.order.clone(),
                tunables: tunables.clone(),
                running_since: std::sync::OnceLock::new(),
            },
            waiting: Mutex::new(None),
        }
    }

    pub(super) fn active(&self) -> bool {
        self.systemd.is_some()
    }

    /// How often [`Notifier::tick`] runs (an hour when inactive: the
    /// branch is off then anyway).
    pub(super) fn period(&self) -> Duration {
        self.systemd
            .as_ref()
            .map_or(Duration::from_hours(1), Systemd::period)
    }

    pub(super) fn ready(&self) {
        if let Some(s) = &self.systemd {
            s.send(&format!("READY=1\nSTATUS={}", self.status().0));
        }
    }

    pub(super) fn stopping(&self) {
        if let Some(s) = &self.systemd {
            s.send("STOPPING=1\nSTATUS=stopping: final drain and flush; programs stay attached");
        }
    }

    pub(super) fn waiting(&self, error: Option<String>) {
        *self.waiting.lock().unwrap_or_else(PoisonError::into_inner) = error;
        self.tick();
    }

    /// The status line and whether the agent is alive.
    fn status(&self) -> (String, bool) {
        let alive = crate::http::Readiness::alive(&self.health);
        let input = StatusInput {
            state: Some(self.gate.state()),
            degraded: self.daemon.is_degraded(),
            waiting: self
                .waiting
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
            last_pass: self.reconcile.last_pass().map(|p| (p.result, p.error)),
            stalled: alive.clone().err(),
        };
        (status_line(&input), alive.is_ok())
    }

    /// The status, with a watchdog ping while alive. Called from the
    /// supervisor's own loop, so a loop that stopped turning stops the
    /// pings too.
    pub(super) fn tick(&self) {
        if let Some(s) = &self.systemd {
            let (line, alive) = self.status();
            s.tick(&line, alive);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watchdog_is_ours_only_when_systemd_says_so() {
        assert_eq!(
            watchdog(Some("90000000"), None, 7),
            Some(Duration::from_secs(90))
        );
        assert_eq!(
            watchdog(Some("90000000"), Some("7"), 7),
            Some(Duration::from_secs(90))
        );
        assert_eq!(watchdog(Some("90000000"), Some("8"), 7), None);
        assert_eq!(watchdog(Some("0"), None, 7), None);
        assert_eq!(watchdog(Some("soon"), None, 7), None);
        assert_eq!(watchdog(None, Some("7"), 7), None);
    }

    #[test]
    fn status_lines_say_what_an_operator_must_know() {
        let mut s = StatusInput::default();
        assert_eq!(status_line(&s), "starting");
        s.state = Some(BootState::At(Phase::BpfLoaded));
        assert_eq!(status_line(&s), "booting (bpf_loaded)");
        s.waiting = Some("OpenStack refused the credentials of cloud \"prod\" in /etc/openstack/clouds.yaml: HTTP 401".into());
        assert_eq!(
            status_line(&s),
            "booting (bpf_loaded): waiting for OpenStack, nothing new attached yet: OpenStack refused \
             the credentials of cloud \"prod\" in /etc/openstack/clouds.yaml: HTTP 401"
        );
        s.state = Some(BootState::At(Phase::Running));
        assert_eq!(status_line(&s), "running");
        s.degraded = true;
        s.last_pass = Some((PassResult::SyncError, Some("x\ny".into())));
        assert_eq!(
            status_line(&s),
            "running; degraded: counting under the state file's plan until a sync succeeds; \
             last reconcile pass sync_error: x y"
        );
        s.degraded = false;
        s.last_pass = Some((PassResult::Ok, None));
        s.stalled = Some("no successful drain for 45s".into());
        assert_eq!(status_line(&s), "running, but no successful drain for 45s");
        let long = "e".repeat(400);
        s.state = Some(BootState::Failed(long.into()));
        let line = status_line(&s);
        assert_eq!(
            line.chars().count(),
            "boot failed: ".len() + STATUS_ERROR_CHARS + 1
        );
    }

    #[test]
    fn messages_reach_the_socket_systemd_names() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let listener = UnixDatagram::bind(&path).unwrap();
        let systemd = Systemd {
            socket: UnixDatagram::unbound().unwrap(),
            addr: socket_addr(path.to_str().unwrap()).unwrap(),
            watchdog: Some(Duration::from_secs(3)),
        };
        assert_eq!(systemd.period(), Duration::from_secs(1));
        systemd.tick("running", true);
        systemd.tick("running, but stalled", false);
        let mut buf = [0u8; 256];
        let n = listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"STATUS=running\nWATCHDOG=1");
        let n = listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"STATUS=running, but stalled");
        // An abstract socket, as systemd may name one.
        let name = format!("lachesis-test-{}", std::process::id());
        let abstract_listener =
            UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap())
                .unwrap();
        let systemd = Systemd {
            socket: UnixDatagram::unbound().unwrap(),
            addr: socket_addr(&format!("@{name}")).unwrap(),
            watchdog: None,
        };
        assert_eq!(systemd.period(), STATUS_EVERY);
        systemd.send("READY=1");
        let n = abstract_listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");
    }
}
