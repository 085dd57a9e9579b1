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

use std::collections::{BTreeMap, BTreeSet};

use lachesis_abi::Mac;
pub use lachesis_planner::tap_name;
use lachesis_planner::Plan;

/// The IANA VRRP virtual router MACs (`00:00:5e:00:01:xx` for IPv4,
/// `00:00:5e:00:02:xx` for IPv6): keepalived's address-pair MACs, which
/// move between VMs on a failover.
fn vrrp(m: Mac) -> bool {
    matches!(m.0, [0x00, 0x00, 0x5e, 0x00, 0x01 | 0x02, _])
}

/// Tap device name → the MAC of the port behind it, from a plan's
/// bindings. A port's own MAC and its address-pair MACs are one claimant:
/// every one of them binds to the port, so whichever keys its received
/// group frames bills the same port; the one chosen is the smallest
/// outside the VRRP range (the port's own MAC, in practice), so the key
/// stays put across a keepalived failover. A name bindings of *different*
/// ports claim (their ids agree on 11 characters) is left out — better no
/// attribution than a wrong one — and reported by the planner as anomaly
/// `tap_name_collision`.
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
        let mut names: BTreeMap<String, (BTreeSet<&'a str>, Vec<Mac>)> = BTreeMap::new();
        for (port, mac) in ports {
            let (ids, macs) = names.entry(tap_name(port)).or_default();
            ids.insert(port);
            macs.push(mac);
        }
        TapPorts(
            names
                .into_iter()
                .filter(|(_, (ids, _))| ids.len() == 1)
                .filter_map(|(n, (_, macs))| {
                    let mac = macs.iter().copied().min_by_key(|m| (vrrp(*m), *m))?;
                    Some((n, mac))
                })
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

    /// Issue 19 item 17: a keepalived VM's port lists a VRRP MAC in its
    /// address pairs; both bind to the port. The name was taken for a
    /// conflict (a warning at every pass, the VM's received VRRP multicast
    /// unattributed); it is the same claimant, keyed by the port's own MAC.
    #[test]
    fn a_port_with_an_address_pair_mac_keeps_its_tap_under_its_own_mac() {
        let own = mac("fa:16:3e:00:00:07");
        let vrrp = mac("00:00:5e:00:01:33");
        let ports = TapPorts::from_ports([("p-keepalived", vrrp), ("p-keepalived", own)]);
        assert_eq!(ports.get("tapp-keepalive"), Some(own));
        let other = mac("fa:16:3e:00:00:02");
        let ports = TapPorts::from_ports([("p-x", other), ("p-x", mac("fa:16:3e:00:00:09"))]);
        assert_eq!(ports.get("tapp-x"), Some(other), "the smallest otherwise");
    }

    #[test]
    fn the_same_port_twice_is_not_ambiguous() {
        let m = mac("fa:16:3e:00:00:01");
        let ports = TapPorts::from_ports([("p-a", m), ("p-a", m)]);
        assert_eq!(ports.get("tapp-a"), Some(m));
    }
}
