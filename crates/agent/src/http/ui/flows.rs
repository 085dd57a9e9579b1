//! `/debug/ui/flows`: the largest flows as a table — the same listing
//! as `/debug/flows` (same source, same `limit`), with names from the
//! topology and the VM's side of each frame picked out.

use bytes::Bytes;
use hyper::{Request, StatusCode};
use lachesis_abi::Direction;

use super::html::{Html, CODE_TD, P, TD};
use super::units::bytes_cell;
use super::{bad_request, document, named_cell, tenant_cell, zone_badge, Form};
use crate::http::debug::flows_limit;
use crate::http::reply::Reply;
use crate::http::source::{DebugSource, FlowEntry};
use crate::http::{FLOWS_DEFAULT_LIMIT, FLOWS_MAX_LIMIT};

const TITLE: &str = "Flows";
pub(super) const PATH: &str = "/debug/ui/flows";

pub(super) fn page(source: &dyn DebugSource, req: &Request<Bytes>) -> Reply {
    let form = Form::new(req.uri().query());
    let mut h = Html::new();
    limit_form(&mut h, &form);
    let limit = match flows_limit(form.filled().as_deref()) {
        Ok(limit) => limit,
        Err(e) => return bad_request(source, TITLE, PATH, &e, h),
    };
    let mut listing = source.flows(limit);
    listing.flows.truncate(limit);
    let topology = source.topology();
    let topology = topology.as_deref();
    h.raw("<p>")
        .text(format_args!(
            "The {} largest of {} flows by bytes",
            listing.flows.len(),
            listing.total
        ))
        .raw(": the kernel's <code>flows</code> map as it is now (read, never cleared), cumulative since each entry was created. They run ahead of <code>/metrics</code>, which shows the durable view. As JSON: ")
        .link(format_args!("/debug/flows?limit={limit}"), "/debug/flows")
        .raw(".</p>");
    if listing.flows.is_empty() {
        h.element(P, "No flow to show.");
    } else {
        table(&mut h, &listing.flows, topology);
    }
    document(source, StatusCode::OK, TITLE, PATH, h)
}

fn limit_form(h: &mut Html, form: &Form) {
    h.raw("<form class=\"filters\" method=\"get\" action=\"/debug/ui/flows\"><label>limit<input name=\"limit\" inputmode=\"numeric\"")
        .attr("value", form.value("limit"))
        .attr(
            "placeholder",
            format_args!("{FLOWS_DEFAULT_LIMIT} (0 to {FLOWS_MAX_LIMIT})"),
        )
        .raw("></label><button type=\"submit\">Show</button></form>");
}

fn table(h: &mut Html, flows: &[FlowEntry], topology: Option<&lachesis_planner::Topology>) {
    h.raw("<table id=\"flows\"><thead><tr><th>bytes</th><th>dir</th><th>zone</th><th>L4</th><th>family</th><th>VM MAC</th><th>peer MAC</th><th>tenant</th><th>server</th><th>port</th></tr></thead><tbody>");
    for f in flows {
        // The VM is the source of what it sends, the destination of what
        // it receives (the kernel keys frames as they are).
        let (vm, peer) = match f.direction {
            Direction::Tx => (f.src_mac, f.dst_mac),
            Direction::Rx => (f.dst_mac, f.src_mac),
        };
        h.raw("<tr>");
        bytes_cell(h, "data-bytes", f.bytes, f.packets);
        h.element(TD, f.direction).raw("<td>");
        zone_badge(h, f.zone);
        h.raw("</td>").element(TD, f.l4).element(
            TD,
            match f.eth_proto {
                0x0800 => "IPv4".to_owned(),
                0x86dd => "IPv6".to_owned(),
                other => format!("0x{other:04x}"),
            },
        );
        h.raw("<td>")
            .link(format_args!("/debug/ui/plan?mac={vm}"), vm)
            .raw("</td>")
            .element(CODE_TD, peer);
        match &f.tenant {
            Some(tenant) => {
                tenant_cell(h, topology, tenant);
                let server = f.server.as_deref().unwrap_or("");
                named_cell(
                    h,
                    topology
                        .and_then(|t| t.servers.get(server))
                        .map(String::as_str),
                    server,
                );
                h.element(CODE_TD, f.port.as_deref().unwrap_or(""));
            }
            None => {
                h.raw("<td colspan=\"3\" class=\"muted\">")
                    .raw("unresolved: no binding for the VM MAC yet (billed <code>unknown</code> if none comes)")
                    .raw("</td>");
            }
        }
        h.raw("</tr>");
    }
    h.raw("</tbody></table>");
}
