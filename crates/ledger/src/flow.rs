//! Decoding a kernel flow key into what labels need.

use lachesis_abi::{Direction, FlowKey, L4Class, Mac, Zone};

/// A flow key with its codes decoded and the MACs swapped into VM/peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Decoded {
    pub vm_mac: Mac,
    pub peer_mac: Mac,
    pub zone: Zone,
    pub direction: Direction,
    pub l4: L4Class,
}

/// `None` when a code is outside this build's tables (an ABI mismatch; such
/// keys never enter the ledger, see [`crate::Ledger::apply_drain`]).
pub(crate) fn decode(key: &FlowKey) -> Option<Decoded> {
    Some(Decoded {
        vm_mac: key.vm_mac().ok()?,
        peer_mac: key.peer_mac().ok()?,
        zone: key.zone().ok()?,
        direction: key.direction().ok()?,
        l4: key.l4().ok()?,
    })
}
