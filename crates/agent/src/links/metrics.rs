//! The link watcher's health families (DESIGN §4.4, §10; docs/metrics.md).

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// One bounded label (`reason` or `kind`) with a static value.
type Label = [(&'static str, &'static str); 1];

/// Which step of the watcher failed (`reason` of
/// `lachesis_attach_failures_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// Attaching or replacing our programs on a matching interface; retried
    /// at the next presence check.
    Attach,
    /// Removing ours from an interface that stopped matching.
    Detach,
    /// Listing the interfaces or our attachments for a presence check.
    PresenceCheck,
    /// Writing or forgetting the port MAC behind a tap (`tap_ports`);
    /// retried at the next presence check.
    TapPort,
}

impl Failure {
    /// Every value, seeded at zero.
    pub const ALL: [Failure; 4] = [
        Failure::Attach,
        Failure::Detach,
        Failure::PresenceCheck,
        Failure::TapPort,
    ];

    /// The label value.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Failure::Attach => "attach",
            Failure::Detach => "detach",
            Failure::PresenceCheck => "presence_check",
            Failure::TapPort => "tap_port",
        }
    }
}

/// What arrived on the netlink sockets (`kind` of
/// `lachesis_netlink_events_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// `RTM_NEWLINK`: a link appeared, was renamed or changed state.
    NewLink,
    /// `RTM_DELLINK`: a link vanished.
    DelLink,
    /// A link listed by a replay dump.
    DumpLink,
    /// The socket overflowed (`ENOBUFS`) and events were lost: a replay
    /// and a presence check follow at once.
    Overrun,
    /// A message that could not be read; skipped.
    Malformed,
    /// A message of no use to the watcher (another family, an ack).
    Ignored,
    /// Subscribing, receiving or dumping failed; retried at the next
    /// presence check.
    SocketError,
}

impl EventKind {
    /// Every value, seeded at zero.
    pub const ALL: [EventKind; 7] = [
        EventKind::NewLink,
        EventKind::DelLink,
        EventKind::DumpLink,
        EventKind::Overrun,
        EventKind::Malformed,
        EventKind::Ignored,
        EventKind::SocketError,
    ];

    /// The label value.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::NewLink => "new_link",
            EventKind::DelLink => "del_link",
            EventKind::DumpLink => "dump_link",
            EventKind::Overrun => "overrun",
            EventKind::Malformed => "malformed",
            EventKind::Ignored => "ignored",
            EventKind::SocketError => "socket_error",
        }
    }
}

/// The watcher's counters and gauge. Cheap to clone; clones share them.
#[derive(Debug, Clone, Default)]
pub struct LinkMetrics {
    attached: Gauge,
    without_port: Gauge,
    failures: Family<Label, Counter>,
    heals: Counter,
    presence_checks: Counter,
    events: Family<Label, Counter>,
}

impl LinkMetrics {
    /// Creates the families, every label value at zero, and registers them
    /// (the registry appends `_total` to counters).
    pub fn new(registry: &mut Registry) -> LinkMetrics {
        let m = LinkMetrics::default();
        for f in Failure::ALL {
            let _ = m.failures.get_or_create(&[("reason", f.as_str())]);
        }
        for k in EventKind::ALL {
            let _ = m.events.get_or_create(&[("kind", k.as_str())]);
        }
        registry.register(
            "lachesis_attached_interfaces",
            "Matching interfaces with both of our programs attached",
            m.attached.clone(),
        );
        registry.register(
            "lachesis_attached_interfaces_without_port",
            "Attached interfaces no binding's port names (Nova's tap + port id rule): their received broadcast and multicast is counted but attributed to no port",
            m.without_port.clone(),
        );
        registry.register(
            "lachesis_attach_failures",
            "Failed link-watcher steps: attach (retried at the next presence check), detach, presence_check, tap_port (writing a tap's port MAC; retried)",
            m.failures.clone(),
        );
        registry.register(
            "lachesis_attach_heals",
            "Matching interfaces the presence check found without our programs, unannounced by any event, and re-attached",
            m.heals.clone(),
        );
        registry.register(
            "lachesis_attach_presence_checks",
            "Presence checks that listed the interfaces and our attachments",
            m.presence_checks.clone(),
        );
        registry.register(
            "lachesis_netlink_events",
            "Messages on the link watcher's netlink sockets, by kind",
            m.events.clone(),
        );
        m
    }

    pub(crate) fn failed(&self, step: Failure) {
        self.failures
            .get_or_create(&[("reason", step.as_str())])
            .inc();
    }

    pub(crate) fn healed(&self) {
        self.heals.inc();
    }

    pub(crate) fn checked(&self) {
        self.presence_checks.inc();
    }

    pub(crate) fn event(&self, kind: EventKind) {
        self.events_by(kind, 1);
    }

    pub(crate) fn events_by(&self, kind: EventKind, n: u64) {
        self.events
            .get_or_create(&[("kind", kind.as_str())])
            .inc_by(n);
    }

    pub(crate) fn set_attached(&self, n: usize) {
        self.attached.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    pub(crate) fn set_without_port(&self, n: usize) {
        self.without_port.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// `lachesis_attached_interfaces`.
    #[must_use]
    pub fn attached(&self) -> i64 {
        self.attached.get()
    }

    /// `lachesis_attached_interfaces_without_port`.
    #[must_use]
    pub fn without_port(&self) -> i64 {
        self.without_port.get()
    }

    /// `lachesis_attach_failures_total{reason}`.
    #[must_use]
    pub fn failures(&self, step: Failure) -> u64 {
        self.failures
            .get(&[("reason", step.as_str())])
            .map_or(0, |c| c.get())
    }

    /// `lachesis_attach_heals_total`.
    #[must_use]
    pub fn heals(&self) -> u64 {
        self.heals.get()
    }

    /// `lachesis_attach_presence_checks_total`.
    #[must_use]
    pub fn presence_checks(&self) -> u64 {
        self.presence_checks.get()
    }

    /// `lachesis_netlink_events_total{kind}`.
    #[must_use]
    pub fn events(&self, kind: EventKind) -> u64 {
        self.events
            .get(&[("kind", kind.as_str())])
            .map_or(0, |c| c.get())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lachesis_lab::catalogue::{self, Family};
    use std::collections::BTreeMap;

    /// The watcher's families as rendered (OpenMetrics).
    fn rendered() -> BTreeMap<String, Family> {
        let mut registry = Registry::default();
        let _m = LinkMetrics::new(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        catalogue::rendered(&text, "agent")
    }

    #[test]
    fn every_family_is_documented_exactly() {
        let rendered = rendered();
        assert_eq!(rendered.len(), 6, "{rendered:?}");
        catalogue::assert_documented(&rendered);
    }

    #[test]
    fn label_values_are_seeded_at_zero() {
        let mut registry = Registry::default();
        let _m = LinkMetrics::new(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for f in Failure::ALL {
            let line = format!(
                "lachesis_attach_failures_total{{reason=\"{}\"}} 0",
                f.as_str()
            );
            assert!(text.contains(&line), "{line} in\n{text}");
        }
        for k in EventKind::ALL {
            let line = format!("lachesis_netlink_events_total{{kind=\"{}\"}} 0", k.as_str());
            assert!(text.contains(&line), "{line} in\n{text}");
        }
    }
}
