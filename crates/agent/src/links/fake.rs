//! A recording fake of the [`Attacher`] seam: a host in miniature.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

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
/// programs, and names whose attach the "kernel" refuses.
#[derive(Debug, Default)]
pub(crate) struct Host {
    pub(crate) interfaces: BTreeMap<u32, String>,
    pub(crate) ours: BTreeSet<String>,
    pub(crate) refuse: BTreeSet<String>,
    pub(crate) listing_fails: bool,
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
