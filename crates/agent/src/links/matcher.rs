//! Which interfaces are metered (`datapath.interface_prefixes`,
//! `datapath.interfaces`; DESIGN §4.4).

use crate::config::DatapathConfig;

/// The naming rule: an interface is ours when its name starts with one of
/// the prefixes or equals one of the exact names.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Matcher {
    prefixes: Vec<String>,
    names: Vec<String>,
}

impl Matcher {
    /// Builds the rule. An empty prefix is dropped: it would match every
    /// interface of the host (`lo`, the uplinks) — configuration validation
    /// already refuses one, and this rule must not depend on that.
    #[must_use]
    pub fn new<P, N>(prefixes: P, names: N) -> Matcher
    where
        P: IntoIterator,
        P::Item: Into<String>,
        N: IntoIterator,
        N::Item: Into<String>,
    {
        Matcher {
            prefixes: prefixes
                .into_iter()
                .map(Into::into)
                .filter(|p: &String| !p.is_empty())
                .collect(),
            names: names.into_iter().map(Into::into).collect(),
        }
    }

    /// The rule of the `datapath.*` settings.
    #[must_use]
    pub fn from_settings(settings: &DatapathConfig) -> Matcher {
        Matcher::new(
            settings.interface_prefixes.iter().cloned(),
            settings.interfaces.iter().cloned(),
        )
    }

    /// Whether an interface of this name is metered.
    #[must_use]
    pub fn matches(&self, ifname: &str) -> bool {
        self.names.iter().any(|n| n == ifname)
            || self.prefixes.iter().any(|p| ifname.starts_with(p.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn prefixes_and_exact_names() {
        let m = Matcher::new(["tap", "vnet"], ["eth7"]);
        for ours in ["tap", "tap0", "tapa1b2c3d4-e5", "vnet12", "eth7"] {
            assert!(m.matches(ours), "{ours}");
        }
        // Exact means exact: no prefix use of a name, no substring use of a prefix.
        for not in ["eth70", "eth", "xtap0", "Tap0", "ta", "lo", ""] {
            assert!(!m.matches(not), "{not}");
        }
    }

    #[test]
    fn an_empty_prefix_matches_nothing() {
        let m = Matcher::new([""], Vec::<String>::new());
        assert!(!m.matches("lo"));
        assert!(!m.matches("eth0"));
        assert!(!m.matches(""));
    }

    #[test]
    fn the_default_configuration_meters_taps_only() {
        let config = Config::from_yaml("").unwrap();
        let m = Matcher::from_settings(&config.datapath);
        assert!(m.matches("tap0"));
        assert!(!m.matches("eth0"));
        assert!(!m.matches("vnet0"));
    }

    #[test]
    fn configured_names_are_read() {
        let config =
            Config::from_yaml("datapath:\n  interface_prefixes: [vnet]\n  interfaces: [veth-x]\n")
                .unwrap();
        let m = Matcher::from_settings(&config.datapath);
        assert!(m.matches("vnet3"));
        assert!(m.matches("veth-x"));
        assert!(!m.matches("tap0"));
        assert!(!m.matches("veth-xy"));
    }
}
