//! The agent's two HTTP listeners (DESIGN §10, §13; docs/agent-http.md).
//!
//! - **metrics** (`listen.metrics`, default `0.0.0.0:9847`): `/metrics`
//!   (the ledger's families, then the agent registry's, `OpenMetrics` or
//!   Prometheus text by `Accept`, gzip by `Accept-Encoding`), `/healthz`,
//!   `/readyz`.
//! - **debug** (`listen.debug`, default `127.0.0.1:9848`): `/debug/config`,
//!   `GET`/`PUT /debug/log-level`, `/debug/plan`, `/debug/anomalies`,
//!   `/debug/flows`, `/debug/lookup`; and pages for a browser under
//!   `/debug/ui/` (index, this node, plan, anomalies, lookup, flows,
//!   topology), each with a health strip.
//!
//! Each listener is a [`Routes`] value — a pure function of the request,
//! tested without sockets — served by [`serve`] until its cancellation
//! token fires. The daemon supplies the live state through
//! [`DebugSource`], [`LogLevelControl`] and [`Readiness`].
//!
//! ```no_run
//! # async fn wire(
//! #     exporter: std::sync::Arc<lachesis_ledger::Exporter>,
//! #     source: std::sync::Arc<dyn lachesis_agent::http::DebugSource>,
//! #     config: &lachesis_agent::config::Config,
//! # ) -> std::io::Result<()> {
//! use std::sync::Arc;
//! use lachesis_agent::http::{serve, DebugRoutes, MetricsRoutes};
//! use lachesis_listen::Endpoint;
//! use prometheus_client::registry::Registry;
//! use tokio_util::sync::CancellationToken;
//!
//! let (ready_tx, ready_rx) = tokio::sync::watch::channel(false);
//! let readiness = move || if *ready_rx.borrow() { Ok(()) } else { Err("booting".to_owned()) };
//! let metrics = MetricsRoutes::new(exporter, Registry::default(), Arc::new(readiness));
//! let debug = DebugRoutes::new(source, Arc::new(|_level| Ok(())));
//! let cancel = CancellationToken::new();
//! let m = tokio::net::TcpListener::bind(config.listen.metrics).await?;
//! let d = tokio::net::TcpListener::bind(config.listen.debug).await?;
//! // Plain HTTP; `lachesis_listen::Web::load` for `listen.web_config_file`.
//! let (em, ed) = (Endpoint::plain("metrics"), Endpoint::plain("debug"));
//! tokio::spawn(serve(m, em, Arc::new(metrics), cancel.clone()));
//! tokio::spawn(serve(d, ed, Arc::new(debug), cancel.clone()));
//! ready_tx.send_replace(true); // boot reached `running`
//! # Ok(()) }
//! ```

mod debug;
mod encoding;
pub mod lookup;
mod metrics;
mod negotiate;
mod params;
mod reply;
mod server;
mod source;
mod ui;

pub use debug::{DebugRoutes, FLOWS_DEFAULT_LIMIT, FLOWS_MAX_LIMIT, PATHS as DEBUG_PATHS};
pub use encoding::{accepts_gzip, gzip};
pub use metrics::{MetricsRoutes, RenderError, COLLECT_DURATION, PATHS as METRICS_PATHS};
pub use negotiate::negotiate;
pub use params::{BadParam, BadParams};
/// The query-string reader of every debug page, for the fuzz targets
/// (`crates/fuzzing`).
#[doc(hidden)]
pub use params::{Params, MAX_PARAMS};
pub use reply::Reply;
pub use server::{serve, Routes, MAX_BODY_BYTES};
pub use source::{
    AgentHealth, DebugSource, FlowEntry, FlowListing, LiveBinding, LogFilter, LogLevelControl,
    NodeTaps, Readiness, TrackedLevel,
};
