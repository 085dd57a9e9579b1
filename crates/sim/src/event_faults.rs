//! Notification faults (`settings.notification_faults`): events dropped,
//! duplicated, reordered or delayed, chosen by event type and probability
//! from a seeded generator, so a run is repeatable: the same seed and the
//! same changes lose, repeat and swap the same events. Pure: it decides
//! what leaves and when; the transports do the sending.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::notify::Event;

/// What happens to an event a rule picks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultAction {
    /// Never sent.
    Drop,
    /// Sent twice in a row.
    Duplicate,
    /// Held back and sent right after the next event (the two swap); held
    /// until some event follows.
    Reorder,
    /// Sent `delay_ms` after the change; later events do not wait for it.
    Delay,
}

/// One rule: which events, how likely, what happens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RuleInput")]
pub struct NotificationFault {
    /// `port.update.end`, a prefix ending in `*` (`port.*`), or `*`.
    pub event_type: String,
    /// The chance, from 0 to 1, that a matching event is hit.
    pub probability: f64,
    /// What a hit does.
    pub action: FaultAction,
    /// How long a `delay` holds the event; only with `delay`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
}

/// A rule as written, before its fields are checked together.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleInput {
    #[serde(default = "every")]
    event_type: String,
    #[serde(default = "always")]
    probability: f64,
    action: FaultAction,
    #[serde(default)]
    delay_ms: Option<u64>,
}

fn every() -> String {
    "*".into()
}

fn always() -> f64 {
    1.0
}

/// A rule the simulator refuses (`PUT /sim/settings` answers 400).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RuleError {
    /// Not a chance.
    #[error("probability {0} is not between 0 and 1")]
    Probability(f64),
    /// A delay needs its length, and only a delay has one.
    #[error("delay_ms goes with action delay, and action delay needs delay_ms > 0")]
    Delay,
}

impl TryFrom<RuleInput> for NotificationFault {
    type Error = RuleError;

    fn try_from(r: RuleInput) -> Result<Self, RuleError> {
        if !(0.0..=1.0).contains(&r.probability) {
            return Err(RuleError::Probability(r.probability));
        }
        let is_delay = r.action == FaultAction::Delay;
        if is_delay != r.delay_ms.is_some() || r.delay_ms == Some(0) {
            return Err(RuleError::Delay);
        }
        Ok(Self {
            event_type: r.event_type,
            probability: r.probability,
            action: r.action,
            delay_ms: r.delay_ms,
        })
    }
}

impl NotificationFault {
    fn matches(&self, event_type: &str) -> bool {
        match self.event_type.strip_suffix('*') {
            Some(prefix) => event_type.starts_with(prefix),
            None => event_type == self.event_type,
        }
    }
}

/// `settings.notification_faults`: no rules, no faults.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotificationFaults {
    /// Seeds the draws; setting the faults starts the draws over from it.
    #[serde(default)]
    pub seed: u64,
    /// Tried in order for each event; the first that matches its type and
    /// wins its draw applies (one draw per matching rule tried).
    #[serde(default)]
    pub rules: Vec<NotificationFault>,
}

/// What the faults did (`/sim/stats` `notifications`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotificationCounts {
    /// Envelopes handed to the transports (a duplicate counts twice).
    pub sent: u64,
    /// Events dropped.
    pub dropped: u64,
    /// Events sent twice.
    pub duplicated: u64,
    /// Events held back behind the next one.
    pub reordered: u64,
    /// Events sent late.
    pub delayed: u64,
}

/// One event to send, after `delay`.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    /// The event.
    pub event: Event,
    /// Zero for at once.
    pub delay: Duration,
}

/// `SplitMix64`: small, fast, and the same sequence everywhere for a seed.
#[derive(Debug, Clone)]
struct Draws(u64);

impl Draws {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// True with probability `p`: a uniform draw in [0, 1) below `p`.
    fn chance(&mut self, p: f64) -> bool {
        // The top 53 bits are exactly representable in an f64.
        #[expect(
            clippy::cast_precision_loss,
            reason = "53-bit values convert to f64 exactly"
        )]
        let unit = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        unit < p
    }
}

/// The faults' state between events: the draws and an event held back.
#[derive(Debug, Clone)]
pub struct FaultState {
    draws: Draws,
    held: Option<Event>,
}

impl Default for FaultState {
    fn default() -> Self {
        Self::new(0)
    }
}

impl FaultState {
    /// Draws from `seed`, nothing held.
    #[must_use]
    pub fn new(seed: u64) -> Self {
        Self {
            draws: Draws(seed),
            held: None,
        }
    }

    /// Starts the draws over from `seed`. An event held back stays held:
    /// it still goes out right after the next event.
    pub fn reseed(&mut self, seed: u64) {
        self.draws = Draws(seed);
    }

    /// What leaves, and when, for `events` (one change's, in order) under
    /// `rules`; `counts` tallies what the faults did.
    pub fn schedule(
        &mut self,
        rules: &[NotificationFault],
        events: Vec<Event>,
        counts: &mut NotificationCounts,
    ) -> Vec<Delivery> {
        let mut out = Vec::new();
        let now = |event| Delivery {
            event,
            delay: Duration::ZERO,
        };
        for event in events {
            let hit = rules
                .iter()
                .filter(|r| r.matches(&event.event_type))
                .find(|r| self.draws.chance(r.probability));
            let mut held_now = false;
            match hit.map(|r| (r.action, r.delay_ms.unwrap_or(0))) {
                Some((FaultAction::Drop, _)) => counts.dropped += 1,
                Some((FaultAction::Duplicate, _)) => {
                    counts.duplicated += 1;
                    out.push(now(event.clone()));
                    out.push(now(event));
                }
                Some((FaultAction::Delay, ms)) => {
                    counts.delayed += 1;
                    out.push(Delivery {
                        event,
                        delay: Duration::from_millis(ms),
                    });
                }
                Some((FaultAction::Reorder, _)) if self.held.is_none() => {
                    counts.reordered += 1;
                    self.held = Some(event);
                    held_now = true;
                }
                // No fault, or a second reorder picked while the first
                // waits (one held at a time): out in its turn.
                None | Some((FaultAction::Reorder, _)) => out.push(now(event)),
            }
            if !held_now {
                if let Some(h) = self.held.take() {
                    out.push(now(h));
                }
            }
        }
        counts.sent += out.len() as u64;
        out
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    fn ev(t: &str, n: u32) -> Event {
        Event {
            exchange: "neutron",
            event_type: t.into(),
            publisher_id: None,
            payload: json!({"n": n}),
            project_id: None,
        }
    }

    fn rule(event_type: &str, action: FaultAction) -> NotificationFault {
        NotificationFault {
            event_type: event_type.into(),
            probability: 1.0,
            action,
            delay_ms: (action == FaultAction::Delay).then_some(250),
        }
    }

    fn ns(out: &[Delivery]) -> Vec<Value> {
        out.iter().map(|d| d.event.payload["n"].clone()).collect()
    }

    #[test]
    fn each_action_does_what_it_says_to_the_matching_events_only() {
        let events = || vec![ev("port.update.end", 1), ev("network.update.end", 2)];
        let mut c = NotificationCounts::default();
        let mut run = |r: NotificationFault| FaultState::new(1).schedule(&[r], events(), &mut c);
        assert_eq!(ns(&run(rule("port.*", FaultAction::Drop))), [json!(2)]);
        assert_eq!(
            ns(&run(rule("port.update.end", FaultAction::Duplicate))),
            [json!(1), json!(1), json!(2)]
        );
        assert_eq!(
            ns(&run(rule("port.*", FaultAction::Reorder))),
            [json!(2), json!(1)]
        );
        let delayed = run(rule("*", FaultAction::Delay));
        assert_eq!(delayed[0].delay, Duration::from_millis(250));
        assert_eq!(
            ns(&run(rule("router.*", FaultAction::Drop))),
            [json!(1), json!(2)],
            "no rule matches: untouched"
        );
        assert_eq!(
            c,
            NotificationCounts {
                sent: 1 + 3 + 2 + 2 + 2,
                dropped: 1,
                duplicated: 1,
                reordered: 1,
                delayed: 2
            }
        );
    }

    #[test]
    fn a_held_event_waits_for_the_next_change_and_only_one_is_held() {
        let mut s = FaultState::new(0);
        let mut c = NotificationCounts::default();
        let r = [rule("port.*", FaultAction::Reorder)];
        assert!(s.schedule(&r, vec![ev("port.a", 1)], &mut c).is_empty());
        s.reseed(9);
        // A second pick while one is held goes out in its turn, then the held.
        let out = s.schedule(&r, vec![ev("port.b", 2)], &mut c);
        assert_eq!(ns(&out), [json!(2), json!(1)]);
    }

    #[test]
    fn the_same_seed_picks_the_same_events_and_another_seed_others() {
        let r = [NotificationFault {
            probability: 0.5,
            ..rule("*", FaultAction::Drop)
        }];
        let kept = |seed| {
            let events = (0..64).map(|n| ev("port.update.end", n)).collect();
            ns(&FaultState::new(seed).schedule(&r, events, &mut NotificationCounts::default()))
        };
        assert_eq!(kept(42), kept(42));
        assert_ne!(kept(42), kept(43));
        let n = kept(42).len();
        assert!(n > 16 && n < 48, "about half of 64 kept: {n}");
    }

    #[test]
    fn rules_are_checked_as_written() {
        let parse = |v: Value| serde_json::from_value::<NotificationFault>(v);
        let r = parse(json!({"action": "drop"})).unwrap();
        assert_eq!((r.event_type.as_str(), r.probability), ("*", 1.0));
        for bad in [
            json!({"action": "drop", "probability": 1.5}),
            json!({"action": "delay"}),
            json!({"action": "drop", "delay_ms": 5}),
            json!({"action": "explode"}),
            json!({"action": "drop", "evnt_type": "x"}),
        ] {
            assert!(parse(bad.clone()).is_err(), "{bad}");
        }
        let d = parse(json!({"action": "delay", "delay_ms": 10})).unwrap();
        assert_eq!(
            serde_json::to_value(&d).unwrap(),
            json!({"event_type": "*", "probability": 1.0, "action": "delay", "delay_ms": 10})
        );
    }
}
