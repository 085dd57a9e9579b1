//! The sandboxing directives of a unit file.

use std::path::PathBuf;

/// The sandboxing directives of a unit's `[Service]` section that this
/// module reproduces.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
#[allow(
    clippy::struct_excessive_bools,
    reason = "one field per directive, as the unit spells them"
)]
pub struct Directives {
    /// `ProtectSystem=strict`.
    pub protect_system_strict: bool,
    /// `ReadWritePaths=`.
    pub read_write_paths: Vec<PathBuf>,
    /// `StateDirectory=` is set (its directory stays writable).
    pub state_directory: bool,
    /// `ProtectHome=yes`.
    pub protect_home: bool,
    /// `PrivateTmp=yes`.
    pub private_tmp: bool,
    /// `RestrictAddressFamilies=` (an allow list), when set.
    pub address_families: Option<Vec<String>>,
    /// `SystemCallFilter=` (an allow list of names and `@groups`, a later
    /// `~` line's items kept as `~item`), when set.
    pub system_call_filter: Option<Vec<String>>,
    /// `SystemCallArchitectures=native`.
    pub native_only: bool,
    /// `MemoryDenyWriteExecute=yes`.
    pub memory_deny_write_execute: bool,
    /// `LockPersonality=yes`.
    pub lock_personality: bool,
    /// `RestrictNamespaces=yes`.
    pub restrict_namespaces: bool,
    /// `ProtectKernelTunables=yes`.
    pub protect_kernel_tunables: bool,
    /// `PrivateDevices=yes`.
    pub private_devices: bool,
    /// `PrivateMounts=yes` (every sandbox here has a mount namespace of its
    /// own, with mounts propagating from the host only).
    pub private_mounts: bool,
    /// `CapabilityBoundingSet=` (names), when set; empty: no capability.
    pub capability_bounding_set: Option<Vec<String>>,
    /// `NoNewPrivileges=yes`.
    pub no_new_privileges: bool,
}

impl Directives {
    /// The directives of `unit`'s `[Service]` section.
    ///
    /// # Errors
    /// A line that is not `key=value`, or a value of a directive above
    /// that this module does not reproduce (`ProtectSystem=full`, a deny
    /// list `~…`, `RestrictNamespaces=net`, …), named with its line.
    pub fn parse(unit: &str) -> Result<Directives, String> {
        let mut d = Directives::default();
        let mut section = "";
        for (n, raw) in unit.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            if line.starts_with('[') {
                section = line;
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                return Err(format!("line {}: {line:?} is not key=value", n + 1));
            };
            if section != "[Service]" {
                continue;
            }
            let (key, value) = (key.trim(), value.trim());
            let at = |e: String| format!("line {}: {e}", n + 1);
            let words = || value.split_whitespace().map(str::to_owned);
            match key {
                "ProtectSystem" => {
                    d.protect_system_strict = match value {
                        "strict" => true,
                        "" | "no" | "false" => false,
                        other => return Err(at(unsupported(key, other, "strict or no"))),
                    };
                }
                "ReadWritePaths" if value.is_empty() => d.read_write_paths.clear(),
                "ReadWritePaths" => d.read_write_paths.extend(
                    value
                        .split_whitespace()
                        .map(|p| PathBuf::from(p.trim_start_matches(['-', '+']))),
                ),
                "StateDirectory" => d.state_directory = !value.is_empty(),
                "ProtectHome" => d.protect_home = yes(key, value).map_err(at)?,
                "PrivateTmp" => d.private_tmp = yes(key, value).map_err(at)?,
                "MemoryDenyWriteExecute" => {
                    d.memory_deny_write_execute = yes(key, value).map_err(at)?;
                }
                "LockPersonality" => d.lock_personality = yes(key, value).map_err(at)?,
                "RestrictNamespaces" => d.restrict_namespaces = yes(key, value).map_err(at)?,
                "ProtectKernelTunables" => {
                    d.protect_kernel_tunables = yes(key, value).map_err(at)?;
                }
                "PrivateDevices" => d.private_devices = yes(key, value).map_err(at)?,
                "PrivateMounts" => d.private_mounts = yes(key, value).map_err(at)?,
                "NoNewPrivileges" => d.no_new_privileges = yes(key, value).map_err(at)?,
                "CapabilityBoundingSet" if value.starts_with('~') => {
                    return Err(at(unsupported(
                        key,
                        value,
                        "a list of capabilities to keep",
                    )));
                }
                "CapabilityBoundingSet" if value.is_empty() => {
                    d.capability_bounding_set = Some(Vec::new());
                }
                "CapabilityBoundingSet" => {
                    d.capability_bounding_set
                        .get_or_insert_with(Vec::new)
                        .extend(words());
                }
                "AmbientCapabilities" if !value.is_empty() => {
                    return Err(at(unsupported(key, value, "none")));
                }
                "SystemCallArchitectures" => {
                    d.native_only = match value {
                        "native" => true,
                        "" => false,
                        other => return Err(at(unsupported(key, other, "native"))),
                    };
                }
                "SystemCallFilter" if value.starts_with('~') && d.system_call_filter.is_some() => {
                    // After an allow list: those calls taken away again.
                    let list = d.system_call_filter.get_or_insert_with(Vec::new);
                    let taken = value.trim_start_matches('~').split_whitespace();
                    list.extend(taken.map(|w| format!("~{w}")));
                }
                "RestrictAddressFamilies" | "SystemCallFilter" if value.starts_with('~') => {
                    return Err(at(unsupported(key, value, "an allow list")));
                }
                "RestrictAddressFamilies" if value.is_empty() => d.address_families = None,
                "RestrictAddressFamilies" => {
                    d.address_families
                        .get_or_insert_with(Vec::new)
                        .extend(words());
                }
                "SystemCallFilter" if value.is_empty() => d.system_call_filter = None,
                "SystemCallFilter" => {
                    d.system_call_filter
                        .get_or_insert_with(Vec::new)
                        .extend(words());
                }
                _ => {}
            }
        }
        Ok(d)
    }
}

fn unsupported(key: &str, value: &str, expected: &str) -> String {
    format!("{key}={value}: not reproduced here (expected {expected})")
}

fn yes(key: &str, value: &str) -> Result<bool, String> {
    match value {
        "yes" | "true" | "on" | "1" => Ok(true),
        "" | "no" | "false" | "off" | "0" => Ok(false),
        other => Err(unsupported(key, other, "yes or no")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::seccomp::family_numbers;

    const UNIT: &str = include_str!("../../../../deploy/systemd/lachesis.service");

    #[test]
    fn the_agent_unit_s_directives_are_all_reproduced() {
        let d = Directives::parse(UNIT).unwrap();
        assert!(d.protect_system_strict && d.state_directory && d.protect_home && d.private_tmp);
        assert_eq!(d.read_write_paths, [PathBuf::from("/sys/fs/bpf")]);
        let families = d.address_families.as_deref().unwrap();
        assert_eq!(families, ["AF_UNIX", "AF_INET", "AF_INET6", "AF_NETLINK"]);
        assert_eq!(family_numbers(families).unwrap(), [1, 2, 10, 16]);
        assert!(d.system_call_filter.is_some(), "{d:?}");
        assert!(d.native_only && d.memory_deny_write_execute && d.lock_personality);
        assert!(d.restrict_namespaces && d.protect_kernel_tunables);
        assert!(d.private_devices && d.private_mounts && d.no_new_privileges);
        let caps = d.capability_bounding_set.unwrap();
        assert_eq!(caps, ["CAP_BPF", "CAP_NET_ADMIN", "CAP_PERFMON"]);
    }

    #[test]
    fn the_relay_unit_s_directives_are_all_reproduced() {
        let unit = include_str!("../../../../deploy/systemd/lachesis-relay.service");
        let d = Directives::parse(unit).unwrap();
        let filter = d.system_call_filter.as_deref().unwrap();
        assert_eq!(filter, ["@system-service", "~@privileged", "~@resources"]);
        assert!(d.protect_system_strict && !d.state_directory && d.read_write_paths.is_empty());
        assert_eq!(d.capability_bounding_set, Some(Vec::new()));
    }

    #[test]
    fn a_value_it_cannot_reproduce_is_refused_naming_its_line() {
        for (unit, want) in [
            (
                "[Service]\nProtectSystem=full\n",
                "line 2: ProtectSystem=full",
            ),
            (
                "[Service]\nSystemCallFilter=~@mount\n",
                "line 2: SystemCallFilter=~@mount",
            ),
            (
                "[Service]\n\nRestrictNamespaces=net\n",
                "line 3: RestrictNamespaces=net",
            ),
            (
                "[Service]\nPrivateTmp\n",
                "line 2: \"PrivateTmp\" is not key=value",
            ),
        ] {
            let err = Directives::parse(unit).unwrap_err();
            assert!(err.starts_with(want), "{unit:?}: {err}");
        }
        // Other sections, and directives it does not reproduce, pass by.
        let d = Directives::parse("[Unit]\nPrivateTmp=maybe\n[Service]\nProtectProc=invisible\n");
        assert_eq!(d.unwrap(), Directives::default());
        // An empty assignment resets a list, as in systemd.
        let d = Directives::parse("[Service]\nSystemCallFilter=read\nSystemCallFilter=~@a b\n");
        assert_eq!(
            d.unwrap().system_call_filter.unwrap(),
            ["read", "~@a", "~b"]
        );
        let d = Directives::parse("[Service]\nSystemCallFilter=read\nSystemCallFilter=\n");
        assert_eq!(d.unwrap().system_call_filter, None);
    }
}
