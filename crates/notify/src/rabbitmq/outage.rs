//! When a consumer that cannot subscribe says so. A broker that refuses
//! the password refuses it at every round, every few seconds to 30 s: one
//! error line when the failure starts or changes reason, then one every
//! [`REMINDER`] with the count of failed rounds, is what an operator can
//! read; the rest go to debug.

use std::time::Duration;

use tokio::time::Instant;

use crate::metrics::SubscribeFailure;

/// How often an outage that has not changed is logged again.
pub(crate) const REMINDER: Duration = Duration::from_mins(10);

/// What a failed round or a subscription should log at error or info
/// level; `None` from [`OutageLog::round_failed`]: debug only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Said {
    /// The first failed round since the consumer started or subscribed.
    Started,
    /// Failing, but for another reason than before.
    Changed {
        /// The reason before.
        from: SubscribeFailure,
    },
    /// The same reason, [`REMINDER`] after the last line.
    Still {
        /// Failed rounds since the outage started.
        rounds: u64,
        /// Since the outage started.
        down_for: Duration,
    },
    /// Subscribed after an outage.
    Recovered {
        /// Failed rounds before the subscription.
        rounds: u64,
        /// How long it lasted.
        down_for: Duration,
    },
}

#[derive(Debug, Clone, Copy)]
struct Outage {
    reason: SubscribeFailure,
    since: Instant,
    rounds: u64,
    logged: Instant,
}

/// The current outage, if any.
#[derive(Debug, Default)]
pub(crate) struct OutageLog {
    current: Option<Outage>,
}

impl OutageLog {
    /// A round in which no host could be subscribed on, for `reason`.
    pub(crate) fn round_failed(&mut self, reason: SubscribeFailure, now: Instant) -> Option<Said> {
        let Some(o) = self.current.as_mut() else {
            self.current = Some(Outage {
                reason,
                since: now,
                rounds: 1,
                logged: now,
            });
            return Some(Said::Started);
        };
        o.rounds += 1;
        if o.reason != reason {
            let from = o.reason;
            o.reason = reason;
            o.logged = now;
            return Some(Said::Changed { from });
        }
        if now.duration_since(o.logged) >= REMINDER {
            o.logged = now;
            return Some(Said::Still {
                rounds: o.rounds,
                down_for: now.duration_since(o.since),
            });
        }
        None
    }

    /// Subscribed: the outage, if there was one, is over.
    pub(crate) fn subscribed(&mut self, now: Instant) -> Option<Said> {
        self.current.take().map(|o| Said::Recovered {
            rounds: o.rounds,
            down_for: now.duration_since(o.since),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use SubscribeFailure::{Auth, Unreachable, Vhost};

    #[test]
    fn one_line_per_change_and_a_reminder_with_the_count() {
        let t0 = Instant::now();
        let at = |secs| t0 + Duration::from_secs(secs);
        let mut log = OutageLog::default();
        assert_eq!(log.subscribed(t0), None, "nothing to recover from");
        assert_eq!(log.round_failed(Auth, t0), Some(Said::Started));
        // The same refusal every 30 s: silent until the reminder.
        for s in (30..600).step_by(30) {
            assert_eq!(log.round_failed(Auth, at(s)), None, "{s}");
        }
        assert_eq!(
            log.round_failed(Auth, at(600)),
            Some(Said::Still {
                rounds: 21,
                down_for: Duration::from_mins(10)
            })
        );
        assert_eq!(log.round_failed(Auth, at(630)), None);
        // Another reason is a change, said at once.
        assert_eq!(
            log.round_failed(Vhost, at(640)),
            Some(Said::Changed { from: Auth })
        );
        assert_eq!(log.round_failed(Vhost, at(650)), None);
        assert_eq!(
            log.subscribed(at(660)),
            Some(Said::Recovered {
                rounds: 24,
                down_for: Duration::from_mins(11)
            })
        );
        // A later outage starts over.
        assert_eq!(log.round_failed(Unreachable, at(700)), Some(Said::Started));
    }
}
