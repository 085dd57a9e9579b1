//! The link watcher (DESIGN §4.4, §12 step 3; docs/agent.md): keeps both
//! programs attached to every interface whose name matches
//! `datapath.interface_prefixes` / `datapath.interfaces`.
//!
//! - [`Matcher`] — the naming rule.
//! - [`TapPorts`] — which port (MAC) is behind which tap, by Nova's rule
//!   ([`tap_name`]), written before each attach.
//! - [`Watcher`] — the pure state machine — link events and listings in,
//!   calls on the [`Attacher`] seam out (the real one is the loaded
//!   `Datapath`; tests use a recording fake).
//! - [`run`] — the task — a `NETLINK_ROUTE` subscription to the link group,
//!   a replay of existing links, and the periodic presence check.
//! - [`TapBoard`] — what the watcher knows about each tap (state, port
//!   MAC, heals), published for the debug pages.
//! - [`LinkMetrics`] — `lachesis_attached_interfaces`,
//!   `lachesis_attach_failures_total{reason}`, `lachesis_attach_heals_total`,
//!   `lachesis_attach_presence_checks_total`,
//!   `lachesis_netlink_events_total{kind}`.
//!
//! ```no_run
//! # async fn boot(dp: std::sync::Arc<lachesis_datapath::Datapath>,
//! #               config: &lachesis_agent::config::Config) {
//! use lachesis_agent::links::{run, LinkMetrics, Matcher, TapPorts, Watcher};
//! use prometheus_client::registry::Registry;
//! use tokio_util::sync::CancellationToken;
//!
//! let mut registry = Registry::default();
//! let metrics = LinkMetrics::new(&mut registry);
//! let watcher = Watcher::new(dp, Matcher::from_settings(&config.datapath), metrics);
//! // The committed plan's taps and ports; send a new value at each commit.
//! let (ports, ports_rx) = tokio::sync::watch::channel(TapPorts::default());
//! let cancel = CancellationToken::new();
//! // Only after the cold start wrote the trie (DESIGN §12).
//! let interval = std::time::Duration::from_secs(30);
//! let task = tokio::spawn(run(watcher, interval, ports_rx, cancel.clone()));
//! // … at shutdown:
//! cancel.cancel();
//! let _watcher = task.await;
//! drop(ports);
//! # }
//! ```

mod datapath;
#[cfg(test)]
mod fake;
mod matcher;
mod message;
mod metrics;
mod netlink;
mod ports;
mod run;
mod status;
mod watcher;

pub use matcher::Matcher;
pub use message::LinkEvent;
/// The datagram parser and what it yields, for the fuzz targets
/// (`crates/fuzzing`); the watcher reads them through [`run`].
#[doc(hidden)]
pub use message::{parse_datagram, Frame, Message};
pub use metrics::{EventKind, Failure, LinkMetrics};
pub(crate) use netlink::dump_links;
pub use ports::{tap_name, TapPorts};
pub use run::run;
pub use status::{TapBoard, TapBoardHandle, TapState, TapStatus};
pub use watcher::{AttachError, Attacher, Outcome, PresenceReport, Watcher};
