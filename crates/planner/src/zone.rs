//! `zone_for` of DESIGN §6.1.

use lachesis_abi::Zone;

use crate::snapshot::Network;

/// The zone of a remote in `network`, owned by `owner`, seen from a VM of
/// `source`: external network → `external`; shared → `shared`; same
/// project → `same_tenant`; else `other_tenant`.
pub(crate) fn zone_for(owner: &str, source: &str, network: Option<&Network>) -> Zone {
    match network {
        Some(n) if n.external => Zone::External,
        Some(n) if n.shared => Zone::Shared,
        _ if !owner.is_empty() && owner == source => Zone::SameTenant,
        _ => Zone::OtherTenant,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(shared: bool, external: bool) -> Network {
        Network {
            id: "n".into(),
            name: None,
            project: "o".into(),
            shared,
            external,
        }
    }

    #[test]
    fn external_beats_shared_beats_ownership() {
        assert_eq!(zone_for("a", "a", Some(&net(true, true))), Zone::External);
        assert_eq!(zone_for("a", "a", Some(&net(true, false))), Zone::Shared);
        assert_eq!(
            zone_for("a", "a", Some(&net(false, false))),
            Zone::SameTenant
        );
        assert_eq!(
            zone_for("a", "b", Some(&net(false, false))),
            Zone::OtherTenant
        );
        assert_eq!(zone_for("", "", None), Zone::OtherTenant);
    }
}
