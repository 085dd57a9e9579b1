//! A recording fake of the [`Attacher`] seam: a host in miniature.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

use lachesis_abi::Mac;

use super::matcher::Matcher;
use super::watcher::{AttachError, Attacher, Outcome};
use Call::{Attach, Detach, Interfaces, RemoveUnmatched};

/// One call on the seam, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Call {
    Attach(String),
    Detach(String),
    Interfaces,
    Attached,
    RemoveUnmatched,
}

/// A host in miniature: interfaces by index, the names carrying our
/// programs, names whose attach the "kernel" refuses, and the `tap_ports`
/// map with what it held when each attach came.
#[derive(Debug, Default)]
pub(crate) struct Host {
    pub(crate) interfaces: BTreeMap<u32, String>,
    pub(crate) ours: BTreeSet<String>,
    pub(crate) refuse: BTreeSet<String>,
    pub(crate) listing_fails: bool,
    pub(crate) ports: BTreeMap<u32, Mac>,
    pub(crate) ports_fail: bool,
    /// Per attach call: the name and the port MAC its index held then.
    pub(crate) port_at_attach: Vec<(String, Option<Mac>)>,
}

#[derive(Debug, Default)]
pub(crate) struct Fake {
    pub(crate) host: RefCell<Host>,
    pub(crate) calls: RefCell<Vec<Call>>,
}

impl Fake {
    fn exists(&self, name: &str) -> bool {
        self.host.borrow().interfaces.values().any(|n| n == name)
    }
}

impl Attacher for Fake {
    fn attach(&self, name: &str) -> Result<Outcome, AttachError> {
        self.calls.borrow_mut().push(Attach(name.into()));
        if !self.exists(name) {
            return Err(AttachError::Vanished);
        }
        let mut h = self.host.borrow_mut();
        let index = h
            .interfaces
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(i, _)| *i);
        let port = index.and_then(|i| h.ports.get(&i).copied());
        h.port_at_attach.push((name.into(), port));
        if h.refuse.contains(name) {
            return Err(AttachError::Failed(format!("attach {name}: EBUSY")));
        }
        Ok(if h.ours.insert(name.into()) {
            Outcome::Attached
        } else {
            Outcome::Replaced
        })
    }

    fn detach(&self, name: &str) -> Result<bool, AttachError> {
        self.calls.borrow_mut().push(Detach(name.into()));
        if !self.exists(name) {
            return Err(AttachError::Vanished);
        }
        let mut h = self.host.borrow_mut();
        if h.refuse.contains(name) {
            return Err(AttachError::Failed(format!("detach {name}: EBUSY")));
        }
        Ok(h.ours.remove(name))
    }

    fn interfaces(&self) -> Result<Vec<(u32, String)>, AttachError> {
        self.calls.borrow_mut().push(Interfaces);
        let h = self.host.borrow();
        if h.listing_fails {
            return Err(AttachError::Failed("list /sys/class/net: EIO".into()));
        }
        Ok(h.interfaces.iter().map(|(i, n)| (*i, n.clone())).collect())
    }

    fn attached(&self) -> Result<BTreeSet<String>, AttachError> {
        self.calls.borrow_mut().push(Call::Attached);
        Ok(self.host.borrow().ours.clone())
    }

    /// Not in `calls`: the sequences of attach calls stay what they were;
    /// `ports` and `port_at_attach` say what the map held and when.
    fn set_port(&self, index: u32, mac: Option<Mac>) -> Result<(), AttachError> {
        let mut h = self.host.borrow_mut();
        if h.ports_fail {
            return Err(AttachError::Failed("update tap_ports: ENOMEM".into()));
        }
        match mac {
            Some(m) => h.ports.insert(index, m),
            None => h.ports.remove(&index),
        };
        Ok(())
    }

    fn remove_unmatched(&self, matcher: &Matcher) -> Result<Vec<String>, AttachError> {
        self.calls.borrow_mut().push(RemoveUnmatched);
        let mut h = self.host.borrow_mut();
        let gone: Vec<String> = h
            .ours
            .iter()
            .filter(|n| !matcher.matches(n))
            .cloned()
            .collect();
        for n in &gone {
            h.ours.remove(n);
        }
        Ok(gone)
    }
}
