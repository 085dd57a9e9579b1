//! The cold-start kernel writes of a plan (DESIGN §12 step 2), computed
//! without touching the kernel: every trie row, binding and amphora
//! address, in that order.

use lachesis_abi::{EndpointValue, ENDPOINT_FLAG_AMPHORA};
use lachesis_ledger::{InternerFull, GLOBAL_TENANT_ID};
use lachesis_planner::{diff, Plan, Scope};

use crate::reconcile::Write;

/// Every write that brings empty metadata maps to `plan`: trie rows first
/// (a binding before its rows would let a tap's packets be keyed `miss`),
/// then bindings, then amphora addresses. `tenant_id` interns a project.
///
/// # Errors
/// The interner is full.
pub fn cold_writes(
    plan: &Plan,
    mut tenant_id: impl FnMut(&str) -> Result<u32, InternerFull>,
) -> Result<Vec<Write>, InternerFull> {
    let delta = diff(&Plan::default(), plan);
    let mut out = Vec::with_capacity(
        delta.trie_upsert.len() + plan.bindings.len() + delta.amphora_ips_added.len(),
    );
    for row in &delta.trie_upsert {
        let tenant_id = match &row.tenant {
            Scope::Global => GLOBAL_TENANT_ID,
            Scope::Tenant(project) => tenant_id(project)?,
        };
        out.push(Write::UpsertZone {
            tenant_id,
            prefix: row.prefix,
            zone: row.zone,
        });
    }
    for b in &plan.bindings {
        let flags = if b.amphora { ENDPOINT_FLAG_AMPHORA } else { 0 };
        out.push(Write::UpsertEndpoint {
            mac: b.mac,
            value: EndpointValue {
                tenant_id: tenant_id(&b.tenant)?,
                flags,
            },
        });
    }
    for ip in &delta.amphora_ips_added {
        out.push(Write::InsertAmphora {
            tenant_id: tenant_id(&ip.tenant)?,
            addr: ip.address,
        });
    }
    Ok(out)
}
