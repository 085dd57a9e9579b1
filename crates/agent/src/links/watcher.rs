//! The link watcher's decisions (pure: every kernel effect goes through the
//! [`Attacher`] seam). DESIGN §4.4: attach/replace on matching names, forget
//! vanished taps, detach from taps renamed away, and a periodic presence
//! check so a missed event never becomes a silent undercount. Before a tap
//! is attached, the MAC of the port behind it is written (see
//! [`TapPorts`]), and kept current as the plan changes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::SystemTime;

use lachesis_abi::Mac;

use super::matcher::Matcher;
use super::message::LinkEvent;
use super::metrics::{Failure, LinkMetrics};
use super::ports::TapPorts;
use super::status::{TapBoard, TapBoardHandle, TapState, TapStatus};

/// What an attach did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// At least one of the two programs was not there and was attached.
    Attached,
    /// Both were ours already and now run the new program (atomic swap).
    Replaced,
}

/// Why an [`Attacher`] call did not succeed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttachError {
    /// The interface no longer exists (it vanished between the event and
    /// the call — a VM migrated away): nothing to do, not a failure.
    #[error("the interface vanished")]
    Vanished,
    /// The kernel refused; the message says what and where.
    #[error("{0}")]
    Failed(String),
}

/// The kernel side of the watcher: the real `Datapath`, or a recording fake
/// in tests. Calls are synchronous and short (a few system calls each).
pub trait Attacher {
    /// Attaches both programs to `name`, replacing ours if present.
    fn attach(&self, name: &str) -> Result<Outcome, AttachError>;
    /// Removes ours from `name`; `true` if anything was there.
    fn detach(&self, name: &str) -> Result<bool, AttachError>;
    /// The interfaces that exist now: (index, name).
    fn interfaces(&self) -> Result<Vec<(u32, String)>, AttachError>;
    /// Names of the interfaces that carry both of our programs.
    fn attached(&self) -> Result<BTreeSet<String>, AttachError>;
    /// Removes ours from every interface `matcher` rejects (and state left
    /// by interfaces that are gone); the names it removed ours from.
    fn remove_unmatched(&self, matcher: &Matcher) -> Result<Vec<String>, AttachError>;
    /// Records the MAC of the port behind interface `index` (`None`:
    /// forgets it), which keys the group frames it delivers.
    fn set_port(&self, index: u32, mac: Option<Mac>) -> Result<(), AttachError>;
}

impl<T: Attacher + ?Sized> Attacher for Arc<T> {
    fn attach(&self, name: &str) -> Result<Outcome, AttachError> {
        (**self).attach(name)
    }
    fn detach(&self, name: &str) -> Result<bool, AttachError> {
        (**self).detach(name)
    }
    fn interfaces(&self) -> Result<Vec<(u32, String)>, AttachError> {
        (**self).interfaces()
    }
    fn attached(&self) -> Result<BTreeSet<String>, AttachError> {
        (**self).attached()
    }
    fn remove_unmatched(&self, matcher: &Matcher) -> Result<Vec<String>, AttachError> {
        (**self).remove_unmatched(matcher)
    }
    fn set_port(&self, index: u32, mac: Option<Mac>) -> Result<(), AttachError> {
        (**self).set_port(index, mac)
    }
}

/// What the watcher believes about one matching link.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Tracked {
    name: String,
    state: State,
    /// When it entered `state`.
    since: SystemTime,
    /// Heals of this link (the presence check re-attached it), and the last.
    heals: u64,
    last_heal: Option<SystemTime>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Both programs attached.
    Attached,
    /// The last attach failed (the kernel's words); the next presence
    /// check retries.
    Failed(String),
}

impl State {
    fn is_failed(&self) -> bool {
        matches!(self, State::Failed(_))
    }
}

/// What one presence check did, for logs and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PresenceReport {
    /// Matching interfaces found without our programs though no event said
    /// so (missed event, removed behind our back), re-attached.
    pub healed: Vec<String>,
    /// Interfaces whose earlier attach had failed, attached now.
    pub retried: Vec<String>,
    /// Matching interfaces still without our programs (attach failed).
    pub failed: Vec<String>,
    /// Non-matching interfaces ours were removed from.
    pub removed: Vec<String>,
    /// The listing itself failed: nothing was checked.
    pub skipped: bool,
}

/// The link watcher's state machine.
#[derive(Debug)]
pub struct Watcher<A> {
    attacher: A,
    matcher: Matcher,
    /// Matching links by index. Non-matching links are not tracked: an
    /// event that renames one into a matching name reads as a new link.
    links: BTreeMap<u32, Tracked>,
    /// Which port is behind which tap name, from the latest plan.
    ports: TapPorts,
    /// The port MAC the kernel holds per interface index (what was written
    /// last with success).
    written: BTreeMap<u32, Mac>,
    metrics: LinkMetrics,
    /// What the debug pages read, republished with the gauges.
    board: TapBoardHandle,
    last_check: Option<SystemTime>,
}

impl<A: Attacher> Watcher<A> {
    /// A watcher that knows no link yet. Start it only once the trie is
    /// populated (DESIGN §12): its first replay attaches every matching tap.
    pub fn new(attacher: A, matcher: Matcher, metrics: LinkMetrics) -> Watcher<A> {
        Watcher {
            attacher,
            matcher,
            links: BTreeMap::new(),
            ports: TapPorts::default(),
            written: BTreeMap::new(),
            metrics,
            board: TapBoardHandle::default(),
            last_check: None,
        }
    }

    /// The same watcher knowing which port is behind which tap from the
    /// start (boot: the cold start's plan, before the first attach).
    #[must_use]
    pub fn with_ports(mut self, ports: TapPorts) -> Watcher<A> {
        self.ports = ports;
        self
    }

    /// A new plan's taps and ports: every tracked link whose port MAC
    /// changed (learned, gone, another port) gets it written now.
    pub fn set_ports(&mut self, ports: TapPorts) {
        self.ports = ports;
        let links: Vec<(u32, String)> = self
            .links
            .iter()
            .map(|(i, t)| (*i, t.name.clone()))
            .collect();
        for (index, name) in links {
            self.write_port(index, &name);
        }
        self.publish();
    }

    /// The seam (tests inspect their fake through it).
    pub fn attacher(&self) -> &A {
        &self.attacher
    }

    /// The metrics handles.
    pub fn metrics(&self) -> &LinkMetrics {
        &self.metrics
    }

    /// What the watcher knows about each tap, as published after every
    /// change (the handle stays current after the watcher moves into its
    /// task).
    #[must_use]
    pub fn board(&self) -> TapBoardHandle {
        self.board.clone()
    }

    /// Applies one link event.
    pub fn apply(&mut self, event: &LinkEvent) {
        match event {
            LinkEvent::Present { index, name } => self.present(*index, name),
            LinkEvent::Gone { index } => {
                // Deleted or moved away (live migration): the kernel took
                // our programs with the interface. Nothing to retry; its
                // port MAC is forgotten.
                if let Some(t) = self.links.remove(index) {
                    tracing::debug!(ifname = %t.name, ifindex = index, "tap gone; forgotten");
                }
                self.forget_port(*index);
            }
        }
        self.publish();
    }

    /// Applies a full listing (a replay dump): every listed link as
    /// present, and every tracked link missing from it as gone.
    pub fn replay(&mut self, links: &[(u32, String)]) {
        let listed: BTreeSet<u32> = links.iter().map(|(i, _)| *i).collect();
        self.retain_links(|i| listed.contains(&i));
        for (index, name) in links {
            self.present(*index, name);
        }
        self.publish();
    }

    fn present(&mut self, index: u32, name: &str) {
        let ours = self.matcher.matches(name);
        match self.links.get_mut(&index) {
            Some(t) if ours => {
                // Renamed within the rule, or a state change (up/down,
                // carrier): the attachment is on the index and survives.
                // A failed one waits for the presence check. A new name
                // may name another port.
                name.clone_into(&mut t.name);
                self.write_port(index, name);
            }
            Some(_) => {
                // Renamed to a name that is not ours.
                self.links.remove(&index);
                self.forget_port(index);
                match self.attacher.detach(name) {
                    Ok(_) | Err(AttachError::Vanished) => {
                        tracing::info!(
                            ifname = name,
                            ifindex = index,
                            "renamed out of the rule; detached"
                        );
                    }
                    Err(AttachError::Failed(e)) => {
                        self.metrics.failed(Failure::Detach);
                        tracing::warn!(ifname = name, ifindex = index, error = %e, "detach failed; the presence check retries");
                    }
                }
            }
            None if ours => {
                self.attach(index, name);
            }
            None => {}
        }
    }

    /// Attaches and records the result; `true` when attached. The port
    /// MAC goes first: a group frame counted before it would keep its
    /// group address for good.
    fn attach(&mut self, index: u32, name: &str) -> bool {
        self.write_port(index, name);
        match self.attacher.attach(name) {
            Ok(outcome) => {
                tracing::info!(ifname = name, ifindex = index, ?outcome, "attached");
                self.track(index, name, State::Attached);
                true
            }
            Err(AttachError::Vanished) => {
                self.links.remove(&index);
                self.forget_port(index);
                false
            }
            Err(AttachError::Failed(e)) => {
                self.metrics.failed(Failure::Attach);
                tracing::warn!(ifname = name, ifindex = index, error = %e, "attach failed; the presence check retries");
                self.track(index, name, State::Failed(e));
                false
            }
        }
    }

    /// Writes the port MAC `name` maps to for `index` if the kernel holds
    /// another (or none); forgets it if the name maps to none. A refusal is
    /// counted and retried by the next presence check; the tap is attached
    /// anyway (counted, its received group frames unattributed meanwhile).
    fn write_port(&mut self, index: u32, name: &str) {
        let want = self.ports.get(name);
        if self.written.get(&index).copied() == want {
            return;
        }
        match self.attacher.set_port(index, want) {
            Ok(()) => {
                match want {
                    Some(mac) => self.written.insert(index, mac),
                    None => self.written.remove(&index),
                };
                tracing::debug!(ifname = name, ifindex = index, port_mac = ?want, "tap port written");
            }
            Err(AttachError::Vanished) => {}
            Err(AttachError::Failed(e)) => {
                self.metrics.failed(Failure::TapPort);
                tracing::warn!(ifname = name, ifindex = index, error = %e, "writing the tap's port MAC failed; the presence check retries");
            }
        }
    }

    /// The interface is gone or no longer ours: its port MAC goes too (an
    /// index may be handed to a new interface later).
    fn forget_port(&mut self, index: u32) {
        if self.written.contains_key(&index) {
            match self.attacher.set_port(index, None) {
                Ok(()) | Err(AttachError::Vanished) => {
                    self.written.remove(&index);
                }
                Err(AttachError::Failed(e)) => {
                    self.metrics.failed(Failure::TapPort);
                    tracing::warn!(ifindex = index, error = %e, "forgetting a tap's port MAC failed; the presence check retries");
                }
            }
        }
    }

    /// Keeps the tracked links whose index passes `keep`; the others'
    /// port MACs are forgotten.
    fn retain_links(&mut self, keep: impl Fn(u32) -> bool) {
        let dropped: Vec<u32> = self.links.keys().copied().filter(|i| !keep(*i)).collect();
        for index in dropped {
            self.links.remove(&index);
            self.forget_port(index);
        }
    }

    /// Records `state` for the link; its heals stay with it, and `since`
    /// moves only when the state does.
    fn track(&mut self, index: u32, name: &str, state: State) {
        let now = SystemTime::now();
        match self.links.get_mut(&index) {
            Some(t) => {
                name.clone_into(&mut t.name);
                if t.state != state {
                    t.state = state;
                    t.since = now;
                }
            }
            None => {
                self.links.insert(
                    index,
                    Tracked {
                        name: name.to_owned(),
                        state,
                        since: now,
                        heals: 0,
                        last_heal: None,
                    },
                );
            }
        }
    }

    /// Compares the interfaces that exist and match with those carrying
    /// our programs, attaches any that lacks them, and removes ours from
    /// interfaces that no longer match (DESIGN §4.4).
    pub fn presence_check(&mut self) -> PresenceReport {
        let mut report = PresenceReport::default();
        let (existing, attached) = match self.listing() {
            Ok(l) => l,
            Err(e) => {
                self.metrics.failed(Failure::PresenceCheck);
                tracing::warn!(error = %e, "presence check could not list interfaces");
                report.skipped = true;
                return report;
            }
        };
        self.last_check = Some(SystemTime::now());
        let matching: BTreeMap<u32, &str> = existing
            .iter()
            .filter(|(_, n)| self.matcher.matches(n))
            .map(|(i, n)| (*i, n.as_str()))
            .collect();
        // Links whose removal or rename out of the rule was missed, and
        // port MACs written for interfaces no longer matching.
        self.retain_links(|i| matching.contains_key(&i));
        let stale: Vec<u32> = self
            .written
            .keys()
            .copied()
            .filter(|i| !matching.contains_key(i))
            .collect();
        for index in stale {
            self.forget_port(index);
        }
        for (&index, &name) in &matching {
            if attached.contains(name) {
                self.track(index, name, State::Attached);
                // Retries a refused write.
                self.write_port(index, name);
                continue;
            }
            let known_failed = self.links.get(&index).is_some_and(|t| t.state.is_failed());
            if self.attach(index, name) {
                if known_failed {
                    report.retried.push(name.to_owned());
                } else {
                    self.metrics.healed();
                    if let Some(t) = self.links.get_mut(&index) {
                        // Uncounted until now: attached again from here.
                        let now = SystemTime::now();
                        t.heals += 1;
                        t.last_heal = Some(now);
                        t.since = now;
                    }
                    tracing::warn!(
                        ifname = name,
                        ifindex = index,
                        "presence check healed a tap that had no programs"
                    );
                    report.healed.push(name.to_owned());
                }
            } else if self.links.contains_key(&index) {
                report.failed.push(name.to_owned());
            }
        }
        match self.attacher.remove_unmatched(&self.matcher) {
            Ok(removed) => report.removed = removed,
            Err(e) => {
                self.metrics.failed(Failure::Detach);
                tracing::warn!(error = %e, "removing ours from non-matching interfaces failed");
            }
        }
        self.metrics.checked();
        self.publish();
        report
    }

    /// The interfaces that exist (index, name) and the names carrying our
    /// programs.
    #[expect(clippy::type_complexity, reason = "two listings, named where used")]
    fn listing(&self) -> Result<(Vec<(u32, String)>, BTreeSet<String>), AttachError> {
        Ok((self.attacher.interfaces()?, self.attacher.attached()?))
    }

    fn publish(&self) {
        let attached: Vec<u32> = self
            .links
            .iter()
            .filter(|(_, t)| t.state == State::Attached)
            .map(|(i, _)| *i)
            .collect();
        self.board.publish(TapBoard {
            taps: self
                .links
                .iter()
                .map(|(index, t)| TapStatus {
                    index: *index,
                    name: t.name.clone(),
                    state: match &t.state {
                        State::Attached => TapState::Attached,
                        State::Failed(e) => TapState::Failed(e.clone()),
                    },
                    since: t.since,
                    port_mac: self.written.get(index).copied(),
                    heals: t.heals,
                    last_heal: t.last_heal,
                })
                .collect(),
            last_check: self.last_check,
        });
        self.metrics.set_attached(attached.len());
        self.metrics.set_without_port(
            attached
                .iter()
                .filter(|i| !self.written.contains_key(i))
                .count(),
        );
    }
}

#[cfg(test)]
#[path = "watcher_tests.rs"]
mod tests;
