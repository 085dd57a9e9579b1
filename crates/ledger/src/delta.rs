//! The in-band entry-identity rule (DESIGN §4.3): how much of a cumulative
//! kernel reading is new, given what the ledger read last time.
//!
//! Nobody who deletes a kernel entry notifies the ledger; whether a reading
//! comes from the same entry as the stored baseline is decided only by the
//! entry's `created_ns` stamp.

use lachesis_abi::FlowCounters;
use serde::{Deserialize, Serialize};

use crate::counts::Counts;
use crate::state::u64_string;

/// What the ledger last read from one kernel entry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Baseline {
    /// Raw cumulative counters of the last reading.
    pub last: Counts,
    /// `created_ns` of the entry that reading came from; 0 = unknown (restored
    /// from a format that did not record it).
    #[serde(with = "u64_string")]
    pub stamp: u64,
}

impl Baseline {
    /// The baseline a reading leaves behind.
    #[must_use]
    pub fn of(reading: &FlowCounters) -> Baseline {
        Baseline {
            last: Counts::new(reading.bytes, reading.packets),
            stamp: reading.created_ns,
        }
    }
}

/// Which branch of the rule a reading took (for tests and anomaly counting).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeltaCase {
    /// No baseline at all: every byte in the entry is new.
    FirstSight,
    /// Stored stamp unknown: difference once (or the whole reading if it is
    /// smaller than the baseline), then the stamp is adopted.
    AdoptStamp,
    /// Stamps differ: the entry was deleted and recreated; the whole reading is new.
    NewEntry,
    /// Stamps equal, counters did not go back: plain difference.
    SameEntry,
    /// Stamps equal and a counter went back across the top of u64: modular difference.
    Wrapped,
    /// Stamps equal and a counter went back without a plausible wrap: nothing
    /// is added (never double count) and the reading becomes the baseline.
    Regressed,
}

impl DeltaCase {
    /// Whether this case is an anomaly worth a health counter.
    #[must_use]
    pub fn anomaly_label(self) -> Option<&'static str> {
        match self {
            DeltaCase::Wrapped => Some("wrap"),
            DeltaCase::Regressed => Some("regression"),
            _ => None,
        }
    }
}

/// Half the u64 range: a real wrap needs the old value in the upper half and
/// the new one in the lower half.
const HALF: u64 = 1 << 63;

fn same_entry(last: u64, current: u64) -> (u64, DeltaCase) {
    if current >= last {
        (current - last, DeltaCase::SameEntry)
    } else if last >= HALF && current < HALF {
        (current.wrapping_sub(last), DeltaCase::Wrapped)
    } else {
        (0, DeltaCase::Regressed)
    }
}

fn worst(a: DeltaCase, b: DeltaCase) -> DeltaCase {
    let rank = |c| match c {
        DeltaCase::Regressed => 2,
        DeltaCase::Wrapped => 1,
        _ => 0,
    };
    if rank(b) > rank(a) {
        b
    } else {
        a
    }
}

/// New bytes and packets in `reading` relative to `baseline`, and the case taken.
/// The caller stores [`Baseline::of`]`(reading)` afterwards in every case.
#[must_use]
pub fn delta(baseline: Option<&Baseline>, reading: &FlowCounters) -> (Counts, DeltaCase) {
    let Some(base) = baseline else {
        return (
            Counts::new(reading.bytes, reading.packets),
            DeltaCase::FirstSight,
        );
    };
    if base.stamp == 0 {
        // Either counter going back proves a different entry: the whole
        // reading is new for both, never a difference for one and a restart
        // for the other (which would drop the larger counter's bytes).
        let restarted = reading.bytes < base.last.bytes || reading.packets < base.last.packets;
        let add = if restarted {
            Counts::new(reading.bytes, reading.packets)
        } else {
            Counts::new(
                reading.bytes - base.last.bytes,
                reading.packets - base.last.packets,
            )
        };
        return (add, DeltaCase::AdoptStamp);
    }
    if base.stamp != reading.created_ns {
        return (
            Counts::new(reading.bytes, reading.packets),
            DeltaCase::NewEntry,
        );
    }
    let (bytes, cb) = same_entry(base.last.bytes, reading.bytes);
    let (packets, cp) = same_entry(base.last.packets, reading.packets);
    (Counts::new(bytes, packets), worst(cb, cp))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(bytes: u64, packets: u64, created_ns: u64) -> FlowCounters {
        FlowCounters {
            bytes,
            packets,
            last_seen_ns: created_ns + 1,
            created_ns,
        }
    }

    fn base(bytes: u64, packets: u64, stamp: u64) -> Baseline {
        Baseline {
            last: Counts::new(bytes, packets),
            stamp,
        }
    }

    #[test]
    fn delta_rule_table() {
        let cases: &[(&str, Option<Baseline>, FlowCounters, Counts, DeltaCase)] = &[
            (
                "first sight counts everything",
                None,
                reading(500, 5, 7),
                Counts::new(500, 5),
                DeltaCase::FirstSight,
            ),
            (
                "unknown stamp, grown",
                Some(base(100, 1, 0)),
                reading(150, 3, 9),
                Counts::new(50, 2),
                DeltaCase::AdoptStamp,
            ),
            (
                "unknown stamp, smaller means a new entry",
                Some(base(100, 10, 0)),
                reading(40, 2, 9),
                Counts::new(40, 2),
                DeltaCase::AdoptStamp,
            ),
            (
                "unknown stamp, unchanged",
                Some(base(100, 1, 0)),
                reading(100, 1, 9),
                Counts::new(0, 0),
                DeltaCase::AdoptStamp,
            ),
            (
                "unknown stamp, packets went back: both counters restart",
                Some(base(5000, 50, 0)),
                reading(6000, 40, 9),
                Counts::new(6000, 40),
                DeltaCase::AdoptStamp,
            ),
            (
                "unknown stamp, bytes went back: both counters restart",
                Some(base(5000, 50, 0)),
                reading(4000, 60, 9),
                Counts::new(4000, 60),
                DeltaCase::AdoptStamp,
            ),
            (
                "different stamp: whole reading is new",
                Some(base(1000, 10, 5)),
                reading(1200, 12, 6),
                Counts::new(1200, 12),
                DeltaCase::NewEntry,
            ),
            (
                "different stamp, smaller",
                Some(base(1000, 10, 5)),
                reading(3, 1, 6),
                Counts::new(3, 1),
                DeltaCase::NewEntry,
            ),
            (
                "same stamp: difference",
                Some(base(1000, 10, 5)),
                reading(1500, 14, 5),
                Counts::new(500, 4),
                DeltaCase::SameEntry,
            ),
            (
                "same stamp, idle",
                Some(base(1000, 10, 5)),
                reading(1000, 10, 5),
                Counts::new(0, 0),
                DeltaCase::SameEntry,
            ),
            (
                "same stamp, wrapped bytes",
                Some(base(u64::MAX - 9, 10, 5)),
                reading(20, 11, 5),
                Counts::new(30, 1),
                DeltaCase::Wrapped,
            ),
            (
                "same stamp, regression is not a wrap",
                Some(base(1000, 10, 5)),
                reading(900, 11, 5),
                Counts::new(0, 1),
                DeltaCase::Regressed,
            ),
            (
                "same stamp, regression in the upper half",
                Some(base(HALF + 100, 10, 5)),
                reading(HALF + 50, 10, 5),
                Counts::new(0, 0),
                DeltaCase::Regressed,
            ),
        ];
        for (name, b, r, want, case) in cases {
            assert_eq!(delta(b.as_ref(), r), (*want, *case), "{name}");
        }
    }

    #[test]
    fn baseline_adopts_the_reading_stamp() {
        let r = reading(10, 1, 42);
        assert_eq!(Baseline::of(&r), base(10, 1, 42));
    }
}
