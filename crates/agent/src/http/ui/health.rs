//! The health strip at the top of every page: boot phase, degraded mode,
//! sync age, the last reconcile pass and the build — what an operator
//! checks before trusting anything below it. The same facts as
//! `lachesis_boot_phase`, `lachesis_degraded`,
//! `lachesis_openstack_sync_age_seconds`, `lachesis_reconcile_runs_total`
//! and `lachesis_build_info`.

use std::time::SystemTime;

use super::html::{clip, Html};
use super::units::ago;
use crate::http::source::AgentHealth;
use crate::reconcile::PassResult;

/// The build, as `lachesis_build_info` labels it.
pub(super) const VERSION: &str = env!("CARGO_PKG_VERSION");
pub(super) const REVISION: &str = env!("LACHESIS_REVISION");

/// Characters of a failed pass's error shown in the strip (all of it is
/// in the tooltip).
const ERROR_CHARS: usize = 120;

/// Whether anything in `h` asks for attention: boot not done, degraded,
/// or the last pass failed.
fn attention(h: &AgentHealth) -> bool {
    h.phase != Some("running")
        || h.degraded
        || h.last_pass
            .as_ref()
            .is_some_and(|p| p.result != PassResult::Ok)
}

pub(super) fn strip(out: &mut Html, h: &AgentHealth) {
    let now = SystemTime::now();
    let class = if attention(h) {
        "health warn"
    } else {
        "health ok"
    };
    out.raw("<div id=\"health\" class=\"")
        .raw(class)
        .raw("\"")
        .attr("data-phase", h.phase.unwrap_or("none"))
        .attr("data-degraded", h.degraded)
        .raw(">");
    item(out, "boot phase", h.phase.unwrap_or("not started"));
    if h.degraded {
        out.raw("<span class=\"item bad\"><span class=\"k\">degraded</span> <b>yes</b>: counting under the state file's plan until a sync succeeds</span>");
    } else {
        item(out, "degraded", "no");
    }
    match h.synced_at {
        Some(t) => {
            out.raw("<span class=\"item\" id=\"sync-age\"><span class=\"k\">last sync</span> <b")
                .attr("title", humantime::format_rfc3339_seconds(t))
                .raw(">")
                .text(ago(t, now))
                .raw("</b></span>");
        }
        None => item(out, "last sync", "none yet"),
    }
    match &h.last_pass {
        Some(p) => {
            let bad = p.result != PassResult::Ok;
            out.raw(if bad {
                "<span class=\"item bad\" id=\"last-reconcile\""
            } else {
                "<span class=\"item\" id=\"last-reconcile\""
            })
            .attr("data-result", p.result.label())
            .raw("><span class=\"k\">last reconcile</span> <b>")
            .text(p.result.label())
            .raw("</b> ")
            .text(format_args!(
                "{} ({})",
                ago(p.ended, now),
                p.trigger.label()
            ));
            if let Some(e) = &p.error {
                out.raw(": <span")
                    .attr("title", e)
                    .raw(">")
                    .text(clip(e, ERROR_CHARS))
                    .raw("</span>");
            }
            out.raw("</span>");
        }
        None => item(out, "last reconcile", "none since start"),
    }
    out.raw("<span class=\"item\" id=\"version\"><span class=\"k\">version</span> <b>")
        .text(VERSION)
        .raw("</b> <code>")
        .text(REVISION)
        .raw("</code></span></div>");
}

fn item(out: &mut Html, key: &'static str, value: &str) {
    out.raw("<span class=\"item\"><span class=\"k\">")
        .raw(key)
        .raw("</span> <b>")
        .text(value)
        .raw("</b></span>");
}
