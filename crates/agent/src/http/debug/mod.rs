//! The debug listener (DESIGN §13; loopback unless configured otherwise):
//! what the daemon believes, and the log level.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use hyper::{Request, StatusCode};
use serde::Serialize;

use super::lookup::{explain, Query};
use super::params::{BadParams, Params};
use super::reply::{json, not_found, reply, text, Reply, Verb};
use super::server::{Page, Routes};
use super::source::{DebugSource, FlowEntry, LogFilter, LogLevelControl};
use super::ui;
use crate::config::{parse_log_level, LogLevel};

/// The pages of the debug listener.
pub const PATHS: &[&str] = &[
    "/debug/config",
    "/debug/log-level",
    "/debug/plan",
    "/debug/anomalies",
    "/debug/flows",
    "/debug/lookup",
    // The pages for a browser (`super::ui`).
    "/debug/ui/",
    "/debug/ui/plan",
    "/debug/ui/anomalies",
    "/debug/ui/lookup",
    "/debug/ui/topology",
    "/debug/ui/node",
    "/debug/ui/flows",
];

/// `/debug/flows` without `?limit=`.
pub const FLOWS_DEFAULT_LIMIT: usize = 100;
/// The largest `?limit=` accepted.
pub const FLOWS_MAX_LIMIT: usize = 10_000;

const NO_PLAN: &str = "no committed plan yet: boot has not finished its first sync";

/// The debug pages over a [`DebugSource`] and a [`LogLevelControl`].
pub struct DebugRoutes {
    source: Arc<dyn DebugSource>,
    log: Arc<dyn LogLevelControl>,
}

impl fmt::Debug for DebugRoutes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DebugRoutes").finish_non_exhaustive()
    }
}

impl DebugRoutes {
    /// Pages reading `source`; `PUT /debug/log-level` applies through `log`.
    #[must_use]
    pub fn new(source: Arc<dyn DebugSource>, log: Arc<dyn LogLevelControl>) -> Self {
        DebugRoutes { source, log }
    }

    fn config(&self, _: &Request<Bytes>) -> Reply {
        // Redacted by the config module itself (the `--check-config` text).
        reply(
            StatusCode::OK,
            "application/yaml; charset=utf-8",
            self.source.config().to_yaml(),
        )
    }

    fn log_level(&self, req: &Request<Bytes>) -> Reply {
        if req.method() != hyper::Method::PUT {
            return self.current_log_level();
        }
        let level = std::str::from_utf8(req.body())
            .map_err(|_| "the body is not UTF-8 text".to_owned())
            .and_then(parse_log_level);
        let level = match level {
            Ok(level) => level,
            Err(e) => {
                let words = LogLevel::ALL.map(LogLevel::as_str).join(", ");
                return text(
                    StatusCode::BAD_REQUEST,
                    format!("log level: {e}; send one of {words} as the body"),
                );
            }
        };
        match self.log.set_level(level) {
            Ok(()) => {
                tracing::info!(
                    level = level.as_str(),
                    "log level set through the debug listener"
                );
                text(
                    StatusCode::OK,
                    format!("log level is now {}", level.as_str()),
                )
            }
            Err(e) => text(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("could not apply log level {}: {e}", level.as_str()),
            ),
        }
    }

    /// `GET /debug/log-level`: the filter in force, in the words `PUT`
    /// takes (so the answer's last word can be sent back as it is).
    fn current_log_level(&self) -> Reply {
        match self.log.current() {
            Some(LogFilter::Level(level)) => {
                text(StatusCode::OK, format!("log level is {}", level.as_str()))
            }
            Some(LogFilter::Directives(d)) => {
                let words = LogLevel::ALL.map(LogLevel::as_str).join(", ");
                text(
                    StatusCode::OK,
                    format!(
                        "log filter is RUST_LOG's {d:?} (not one level); PUT one of {words} to replace it"
                    ),
                )
            }
            None => text(
                StatusCode::NOT_IMPLEMENTED,
                "this agent's log control does not report its level",
            ),
        }
    }

    fn plan(&self, _: &Request<Bytes>) -> Reply {
        match self.source.committed_plan() {
            // Byte for byte the plan JSON of `lachesis plan` (docs/plan-schema.md).
            Some(plan) => reply(StatusCode::OK, super::reply::JSON, plan.to_json()),
            None => text(StatusCode::SERVICE_UNAVAILABLE, NO_PLAN),
        }
    }

    fn anomalies(&self, _: &Request<Bytes>) -> Reply {
        let anomalies = self.source.anomalies();
        json(&serde_json::json!({ "count": anomalies.len(), "anomalies": anomalies }))
    }

    fn flows(&self, req: &Request<Bytes>) -> Reply {
        let limit = match flows_limit(req.uri().query()) {
            Ok(limit) => limit,
            Err(e) => return bad_param(&e),
        };
        let mut listing = self.source.flows(limit);
        // The source is trusted to bound itself; the page guarantees it.
        listing.flows.truncate(limit);
        json(&FlowsPage {
            total: listing.total,
            limit,
            shown: listing.flows.len(),
            flows: listing.flows,
        })
    }

    fn lookup(&self, req: &Request<Bytes>) -> Reply {
        let query = match Query::parse(req.uri().query()) {
            Ok(q) => q,
            Err(e) => return bad_param(&e),
        };
        let Some(plan) = self.source.committed_plan() else {
            return text(StatusCode::SERVICE_UNAVAILABLE, NO_PLAN);
        };
        let bindings = self.source.bindings();
        json(&explain(&query, &plan.trie, &bindings, &plan.amphora_ips))
    }
}

/// The `/debug/flows` answer.
#[derive(Serialize)]
struct FlowsPage {
    total: usize,
    limit: usize,
    shown: usize,
    flows: Vec<FlowEntry>,
}

/// `?limit=` of `/debug/flows`: 0 to [`FLOWS_MAX_LIMIT`], default
/// [`FLOWS_DEFAULT_LIMIT`].
pub(crate) fn flows_limit(query: Option<&str>) -> Result<usize, BadParams> {
    let mut p = Params::parse(query, &["limit"]);
    let expected = format!("an integer from 0 to {FLOWS_MAX_LIMIT}");
    let limit = p.optional("limit", &expected, |t| {
        t.parse::<usize>().ok().filter(|n| *n <= FLOWS_MAX_LIMIT)
    });
    p.finish(Some(limit.unwrap_or(FLOWS_DEFAULT_LIMIT)))
}

/// One line per bad parameter (one line in all for the usual single one).
fn bad_param(e: &BadParams) -> Reply {
    text(StatusCode::BAD_REQUEST, e.to_string())
}

impl Routes for DebugRoutes {
    const LISTENER: &'static str = "debug";

    fn handle(&self, req: &Request<Bytes>) -> Reply {
        let path = req.uri().path();
        if let Some(page) = ui::page_for(path) {
            return Verb::Read
                .refuse(req.method())
                .unwrap_or_else(|| page(self.source.as_ref(), req));
        }
        let (verb, page): (Verb, Page<Self>) = match path {
            "/debug/config" => (Verb::Read, Self::config),
            "/debug/log-level" => (Verb::ReadPut, Self::log_level),
            "/debug/plan" => (Verb::Read, Self::plan),
            "/debug/anomalies" => (Verb::Read, Self::anomalies),
            "/debug/flows" => (Verb::Read, Self::flows),
            "/debug/lookup" => (Verb::Read, Self::lookup),
            _ => return not_found(path, PATHS),
        };
        verb.refuse(req.method()).unwrap_or_else(|| page(self, req))
    }
}

#[cfg(test)]
mod tests;
