//! The durable view per port: `lachesis_port_bytes_total` and
//! `lachesis_port_packets_total` summed over every other label (zone,
//! external network, server, tenant), by port and direction — what the
//! agent's debug page shows beside each tap. The same tiers the export
//! renders, so the page and `/metrics` agree after any flush.

use std::collections::BTreeMap;

use lachesis_abi::Direction;

use crate::counts::Counts;
use crate::ledger::Ledger;

/// One port's cumulative counts in the durable view.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortTotals {
    /// Sent by the VM (`direction="tx"`).
    pub tx: Counts,
    /// Received by the VM (`direction="rx"`).
    pub rx: Counts,
}

impl Ledger {
    /// Every port of the durable view (the last successful flush) with its
    /// counts per direction, by port id.
    #[must_use]
    pub fn durable_port_totals(&self) -> BTreeMap<String, PortTotals> {
        let (tiers, _, _) = self.scrape_view();
        let mut out: BTreeMap<String, PortTotals> = BTreeMap::new();
        // `[server_id, port_id, tenant_id, zone, external_network, direction]`
        for (k, c) in &tiers.port {
            let totals = out.entry(tiers.strings.get(k[1]).to_owned()).or_default();
            match u8::try_from(k[5]).ok().map(Direction::from_code) {
                Some(Ok(Direction::Tx)) => totals.tx.add(*c),
                Some(Ok(Direction::Rx)) => totals.rx.add(*c),
                // The export labels it `invalid`; no direction to add it to.
                _ => {}
            }
        }
        out
    }
}
