//! The simulator's time, which stamps `created_at` / `updated_at` and
//! answers `changes-since` / `changed_since`. Tokens expire on the system
//! clock regardless (a client decides renewal by its own clock).
//!
//! By default the clock stands still at one instant and moves only when a
//! test steps it, so every stamp, and so every answer, is the same on every
//! run; `wall` follows the system clock for a simulator left running.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// An instant in whole seconds since the Unix epoch: Neutron keeps its
/// timestamps at that granularity, so two changes within a second share
/// one stamp there too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Stamp(pub u64);

/// Where the fixed clock starts unless told otherwise.
pub const DEFAULT_START: Stamp = Stamp(1_767_225_600); // 2026-01-01T00:00:00Z

impl Stamp {
    fn system_time(self) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(self.0)
    }

    /// `2026-01-01T00:00:00Z`: how Neutron, Nova and Octavia write it.
    #[must_use]
    pub fn rfc3339(self) -> String {
        humantime::format_rfc3339_seconds(self.system_time()).to_string()
    }

    /// Whether this stamp is at or after `since` (`updated_at >= T`, as both
    /// Nova's `changes-since` and Neutron's `changed_since` compare).
    #[must_use]
    pub fn at_or_after(self, since: SystemTime) -> bool {
        self.system_time() >= since
    }
}

impl fmt::Display for Stamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.rfc3339())
    }
}

/// A time the services would refuse: not an ISO 8601 instant in UTC.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a date-time such as 2026-01-01T00:00:00Z (UTC; `T` or a space, `Z` or `+00:00` optional)")]
pub struct BadTime {
    /// The text as given.
    pub text: String,
}

/// Parses a query's instant (`changes-since`, `changed_since`) or a
/// setting's, keeping any fraction of a second.
pub fn parse_time(text: &str) -> Result<SystemTime, BadTime> {
    humantime::parse_rfc3339_weak(text).map_err(|_| BadTime { text: text.into() })
}

/// The simulator's clock setting (`settings.clock`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Clock {
    /// Stands at this instant until set or stepped.
    Fixed(Stamp),
    /// The system clock (`wall`), which cannot be stepped.
    Wall,
}

impl Default for Clock {
    fn default() -> Self {
        Self::Fixed(DEFAULT_START)
    }
}

/// A clock change the simulator refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClockError {
    /// Only a fixed clock moves when told.
    #[error("the clock follows the system clock (`wall`): set an instant first to step it")]
    WallCannotStep,
    /// Stepping past what a stamp can hold.
    #[error("stepping the clock by {0} s overflows")]
    Overflow(u64),
}

impl Clock {
    /// The simulator's now.
    #[must_use]
    pub fn now(self) -> Stamp {
        match self {
            Self::Fixed(s) => s,
            Self::Wall => Stamp(
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs()),
            ),
        }
    }

    /// Moves a fixed clock `secs` forward.
    pub fn step(&mut self, secs: u64) -> Result<(), ClockError> {
        match self {
            Self::Fixed(s) => {
                s.0 = s.0.checked_add(secs).ok_or(ClockError::Overflow(secs))?;
                Ok(())
            }
            Self::Wall => Err(ClockError::WallCannotStep),
        }
    }
}

impl TryFrom<String> for Clock {
    type Error = BadTime;

    fn try_from(text: String) -> Result<Self, BadTime> {
        if text == "wall" {
            return Ok(Self::Wall);
        }
        let t = parse_time(&text)?;
        // Whole seconds, as every stamp the clock hands out.
        let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        Ok(Self::Fixed(Stamp(secs)))
    }
}

impl From<Clock> for String {
    fn from(c: Clock) -> String {
        match c {
            Clock::Fixed(s) => s.rfc3339(),
            Clock::Wall => "wall".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixed_clock_moves_only_when_stepped_and_a_wall_clock_refuses() {
        let mut c = Clock::default();
        assert_eq!(c.now().rfc3339(), "2026-01-01T00:00:00Z");
        c.step(61).unwrap();
        assert_eq!(c.now().rfc3339(), "2026-01-01T00:01:01Z");
        let mut w = Clock::Wall;
        assert_eq!(w.step(1), Err(ClockError::WallCannotStep));
    }

    #[test]
    fn the_setting_reads_wall_or_an_instant_and_writes_it_back() {
        let c: Clock = serde_json::from_str("\"2026-03-04 05:06:07.9\"").unwrap();
        assert_eq!(
            serde_json::to_string(&c).unwrap(),
            "\"2026-03-04T05:06:07Z\""
        );
        let w: Clock = serde_json::from_str("\"wall\"").unwrap();
        assert_eq!(w, Clock::Wall);
        let e = serde_json::from_str::<Clock>("\"yesterday\"").unwrap_err();
        assert!(
            e.to_string().contains("\"yesterday\" is not a date-time"),
            "{e}"
        );
    }

    #[test]
    fn at_or_after_compares_whole_second_stamps_with_fractional_instants() {
        let s = Stamp(DEFAULT_START.0 + 10);
        let at = parse_time("2026-01-01T00:00:10Z").unwrap();
        let just_after = parse_time("2026-01-01T00:00:10.5").unwrap();
        assert!(s.at_or_after(at));
        assert!(!s.at_or_after(just_after));
        assert!(parse_time("2026-01-01T00:00:10+02:00").is_err());
    }
}
