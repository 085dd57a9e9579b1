//! Which Neutron port is behind which tap (pure; docs/agent.md "Tap ports").
//!
//! A group frame (broadcast, multicast) a tap delivers to its VM names no
//! VM: its destination is the group. The classifier keys it by the MAC of
//! the port behind the tap instead (`tap_ports`, docs/datapath.md), which
//! the watcher writes before it attaches the tap. The rule that ties a tap
//! to its port is Nova's: a VIF's host device is named `tap` followed by
//! the Neutron port id, cut to 14 characters (Linux allows 15; Nova keeps
//! one spare), i.e. `tap` + the port id's first 11 characters — the same
//! rule Neutron's own agents use to find a port's device. The port's MAC
//! then comes from the plan's bindings.

use std::collections::BTreeMap;

use lachesis_abi::Mac;
use lachesis_planner::Plan;

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

/// Tap device name → the MAC of the port behind it, from a plan's
/// bindings. A name two bindings with different MACs would claim (their
/// ids agree on 11 characters) is left out: better no attribution than a
/// wrong one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TapPorts(BTreeMap<String, Mac>);

impl TapPorts {
    /// The mapping for every binding of `plan`.
    #[must_use]
    pub fn from_plan(plan: &Plan) -> TapPorts {
        Self::from_ports(plan.bindings.iter().map(|b| (b.port.as_str(), b.mac)))
    }

    /// The mapping for `(port id, MAC)` pairs.
    pub fn from_ports<'a>(ports: impl IntoIterator<Item = (&'a str, Mac)>) -> TapPorts {
        let mut names: BTreeMap<String, Option<Mac>> = BTreeMap::new();
        for (port, mac) in ports {
            names
                .entry(tap_name(port))
                .and_modify(|seen| {
                    if *seen != Some(mac) {
                        *seen = None;
                    }
                })
                .or_insert(Some(mac));
        }
        let ambiguous: Vec<&String> = names
            .iter()
            .filter(|(_, m)| m.is_none())
            .map(|(n, _)| n)
            .collect();
        if !ambiguous.is_empty() {
            tracing::warn!(
                ?ambiguous,
                "tap names claimed by ports with different MACs; their received group frames stay unattributed"
            );
        }
        TapPorts(
            names
                .into_iter()
                .filter_map(|(n, m)| m.map(|m| (n, m)))
                .collect(),
        )
    }

    /// The port MAC behind tap `name`, if a binding names it.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<Mac> {
        self.0.get(name).copied()
    }

    /// Taps named by the bindings.
    #[must_use]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// No binding names a tap.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mac(s: &str) -> Mac {
        s.parse().unwrap()
    }

    #[test]
    fn nova_names_the_tap_after_the_first_eleven_characters_of_the_port_id() {
        assert_eq!(
            tap_name("3f1e0e2c-8a57-4c4f-9d4e-0b1d2c3e4f50"),
            "tap3f1e0e2c-8a"
        );
        assert_eq!(tap_name("3f1e0e2c-8a57-4c4f-9d4e-0b1d2c3e4f50").len(), 14);
        // A short id is taken whole.
        assert_eq!(tap_name("p-a"), "tapp-a");
    }

    #[test]
    fn each_port_maps_its_tap_and_an_ambiguous_name_maps_nothing() {
        let ports = TapPorts::from_ports([
            (
                "3f1e0e2c-8a57-4c4f-9d4e-0b1d2c3e4f50",
                mac("fa:16:3e:00:00:01"),
            ),
            (
                "7b2d9c41-0e6f-4a1b-8c3d-5e6f7a8b9c0d",
                mac("fa:16:3e:00:00:02"),
            ),
            // Same first 11 characters as the next one, another MAC.
            (
                "aaaaaaaa-bbb1-0000-0000-000000000000",
                mac("fa:16:3e:00:00:03"),
            ),
            (
                "aaaaaaaa-bbb2-0000-0000-000000000000",
                mac("fa:16:3e:00:00:04"),
            ),
        ]);
        assert_eq!(ports.get("tap3f1e0e2c-8a"), Some(mac("fa:16:3e:00:00:01")));
        assert_eq!(ports.get("tap7b2d9c41-0e"), Some(mac("fa:16:3e:00:00:02")));
        assert_eq!(ports.get("tapaaaaaaaa-bb"), None, "ambiguous");
        assert_eq!(ports.get("tap3f1e0e2c-8a57"), None, "not a Nova name");
        assert_eq!(ports.len(), 2);
    }

    #[test]
    fn the_same_port_twice_is_not_ambiguous() {
        let m = mac("fa:16:3e:00:00:01");
        let ports = TapPorts::from_ports([("p-a", m), ("p-a", m)]);
        assert_eq!(ports.get("tapp-a"), Some(m));
    }
}
