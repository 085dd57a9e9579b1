//! The real [`Attacher`]: the loaded classifier (DESIGN §4.4; docs/datapath.md).

use std::collections::{BTreeMap, BTreeSet};

use lachesis_abi::{Direction, Mac};
use lachesis_datapath::{AttachOutcome, Datapath};

use super::matcher::Matcher;
use super::watcher::{AttachError, Attacher, Outcome};

/// A failed call on an interface that no longer exists is a vanished tap,
/// whatever error the kernel chose to say it with; anything else failed.
fn classify(name: &str, e: &lachesis_datapath::Error) -> AttachError {
    if lachesis_datapath::ifindex(name).is_err() {
        AttachError::Vanished
    } else {
        AttachError::Failed(e.to_string())
    }
}

fn failed(e: &lachesis_datapath::Error) -> AttachError {
    AttachError::Failed(e.to_string())
}

/// Another agent's programs on a tap we just attached (another bpffs
/// dir): left in place, counting into their own maps beside ours
/// (docs/datapath.md, "Two agents on one host"). Said once per attach: a
/// node billed from two agents' series would bill those bytes twice.
fn warn_foreign(dp: &Datapath, name: &str) {
    match dp.foreign_attachments(name) {
        Ok(foreign) if !foreign.is_empty() => {
            let programs: Vec<u32> = foreign.iter().map(|a| a.prog_id).collect();
            tracing::warn!(
                ifname = name,
                ?programs,
                "the tap also carries another agent's programs (another bpffs dir): left in place, \
                 both count; bill a node from one agent only"
            );
        }
        Ok(_) => {}
        Err(e) => tracing::debug!(ifname = name, error = %e, "listing other agents' programs"),
    }
}

impl Attacher for Datapath {
    fn attach(&self, name: &str) -> Result<Outcome, AttachError> {
        let outcome = match Datapath::attach(self, name) {
            Ok(hooks) if hooks.contains(&AttachOutcome::Attached) => Outcome::Attached,
            Ok(_) => Outcome::Replaced,
            Err(e) => return Err(classify(name, &e)),
        };
        warn_foreign(self, name);
        Ok(outcome)
    }

    fn detach(&self, name: &str) -> Result<bool, AttachError> {
        Datapath::detach(self, name).map_err(|e| classify(name, &e))
    }

    fn interfaces(&self) -> Result<Vec<(u32, String)>, AttachError> {
        lachesis_datapath::interfaces().map_err(|e| failed(&e))
    }

    fn attached(&self) -> Result<BTreeSet<String>, AttachError> {
        // (tx, rx) seen per interface; only both count as attached.
        let mut hooks: BTreeMap<String, (bool, bool)> = BTreeMap::new();
        for a in self.attachments().map_err(|e| failed(&e))? {
            let Some(name) = a.ifname else { continue };
            let seen = hooks.entry(name).or_default();
            match a.direction {
                Direction::Tx => seen.0 = true,
                Direction::Rx => seen.1 = true,
            }
        }
        Ok(hooks
            .into_iter()
            .filter(|(_, (tx, rx))| *tx && *rx)
            .map(|(name, _)| name)
            .collect())
    }

    fn set_port(&self, index: u32, mac: Option<Mac>) -> Result<(), AttachError> {
        match mac {
            Some(mac) => self.set_tap_port(index, mac),
            None => self.delete_tap_port(index).map(drop),
        }
        .map_err(|e| failed(&e))
    }

    fn remove_unmatched(&self, matcher: &Matcher) -> Result<Vec<String>, AttachError> {
        let removed = self
            .remove_unqualified(|name| matcher.matches(name))
            .map_err(|e| failed(&e))?;
        let names: BTreeSet<String> = removed
            .into_iter()
            .map(|a| a.ifname.unwrap_or_else(|| format!("ifindex {}", a.ifindex)))
            .collect();
        Ok(names.into_iter().collect())
    }
}
