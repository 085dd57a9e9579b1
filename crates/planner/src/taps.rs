//! Nova's tap naming rule and the bindings it cannot tell apart
//! (docs/agent.md "Tap ports", DESIGN §6.6).
//!
//! A VIF's host device is named `tap` followed by the Neutron port id, cut
//! to 14 characters (Linux allows 15; Nova keeps one spare), i.e. `tap` +
//! the port id's first 11 characters — the rule Neutron's own agents use to
//! find a port's device. The agent ties each tap to its port by it, so that
//! a received group frame (broadcast, multicast), which names no VM, is
//! keyed by the port behind the tap.

use std::collections::{BTreeMap, BTreeSet};

use crate::plan::{Anomaly, AnomalyClass, Binding};

/// Port ids an anomaly's detail names at most.
const SHOWN: usize = 3;

/// Characters Nova keeps of `tap` + port id for a VIF's device name.
const NOVA_DEVICE_NAME_LEN: usize = 14;

/// The host device name Nova gives the tap of port `port_id`.
#[must_use]
pub fn tap_name(port_id: &str) -> String {
    format!("tap{port_id}")
        .chars()
        .take(NOVA_DEVICE_NAME_LEN)
        .collect()
}

/// One anomaly per tap name that bound ports of different ids share (the
/// MACs of one port, its own and its address pairs', are one claimant).
pub(crate) fn collisions(bindings: &[Binding], anomalies: &mut Vec<Anomaly>) {
    let mut ports: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
    for b in bindings {
        ports.entry(tap_name(&b.port)).or_default().insert(&b.port);
    }
    for (name, ids) in ports.into_iter().filter(|(_, ids)| ids.len() > 1) {
        // A bounded detail: a handful of ids name the case.
        let shown: Vec<&str> = ids.iter().take(SHOWN).copied().collect();
        let more = match ids.len().saturating_sub(SHOWN) {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        anomalies.push(Anomaly {
            class: AnomalyClass::TapNameCollision,
            detail: format!(
                "ports {}{more} share the tap name {name}: received broadcast and multicast on it stays unattributed",
                shown.join(", ")
            ),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lachesis_abi::Mac;

    fn bind(port: &str, mac: u8) -> Binding {
        Binding {
            mac: Mac([0xfa, 0x16, 0x3e, 0, 0, mac]),
            tenant: "t".into(),
            server: "s".into(),
            port: port.into(),
            external_network: None,
            amphora: false,
        }
    }

    #[test]
    fn nova_names_the_tap_after_the_first_eleven_characters_of_the_port_id() {
        assert_eq!(
            tap_name("3f1e0e2c-8a57-4c4f-9d4e-0b1d2c3e4f50"),
            "tap3f1e0e2c-8a"
        );
        assert_eq!(tap_name("p-a"), "tapp-a", "a short id is taken whole");
    }

    #[test]
    fn one_port_with_address_pair_macs_is_no_collision_two_ports_are() {
        let mut a = Vec::new();
        collisions(
            &[bind("aaaaaaaa-bbb1-0", 1), bind("aaaaaaaa-bbb1-0", 2)],
            &mut a,
        );
        assert!(a.is_empty(), "{a:?}");
        collisions(
            &[bind("aaaaaaaa-bbb1-0", 1), bind("aaaaaaaa-bbb2-0", 2)],
            &mut a,
        );
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].class, AnomalyClass::TapNameCollision);
        assert!(a[0].detail.contains("aaaaaaaa-bbb1-0, aaaaaaaa-bbb2-0"));
        let many: Vec<Binding> = (0..10u8)
            .map(|i| bind(&format!("aaaaaaaa-bbb{i}"), i))
            .collect();
        let mut a = Vec::new();
        collisions(&many, &mut a);
        assert!(
            a[0].detail
                .starts_with("ports aaaaaaaa-bbb0, aaaaaaaa-bbb1, aaaaaaaa-bbb2 and 7 more share"),
            "{}",
            a[0].detail
        );
    }
}
