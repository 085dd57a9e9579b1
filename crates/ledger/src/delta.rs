//! The in-band entry-identity rule (DESIGN §4.3): how much of a cumulative
//! kernel reading is new, given what the ledger read last time.
//!
//! Nobody who deletes a kernel entry notifies the ledger; whether a reading
//! comes from the same entry as the stored baseline is decided only by the
//! entry's `created_ns` stamp.

use lachesis_abi::FlowCounters;

use crate::counts::Counts;

/// What the ledger last read from one kernel entry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Baseline {
    /// Raw cumulative counters of the last reading.
    pub last: Counts,
    /// `created_ns` of the entry that reading came from; 0 = unknown (restored
    /// from a format that did not record it).
    pub stamp: u64,
    /// That reading was the entry's last: the entry no longer exists
    /// (lookup-and-delete, a retired map). Nothing is left to delete, and a
    /// later reading of the same key is a new entry.
    pub gone: bool,
}

impl Baseline {
    /// The baseline a reading leaves behind.
    #[must_use]
    pub fn of(reading: &FlowCounters) -> Baseline {
        Baseline {
            last: Counts::new(reading.bytes, reading.packets),
            stamp: reading.created_ns,
            gone: false,
        }
    }
}

/// Which full drain last showed an entry: bookkeeping of this process, not
/// state. Two books that differ only in it are equal, and the state file
/// leaves it out. A row or waiting row not shown by the latest full drain
/// has no kernel entry left, so evicting it releases nothing for deletion.
#[derive(Debug, Clone, Copy, Default)]
pub struct DrainMark(pub(crate) u64);

impl PartialEq for DrainMark {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for DrainMark {}

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
    /// Stamps equal and a counter went back: an older reading of the entry
    /// applied after a newer one (a retried drain). Nothing is added and the
    /// baseline stays the newer reading; 64-bit counters do not wrap in
    /// practice, so this is never read as a reset.
    Stale,
}

impl DeltaCase {
    /// Whether the reading becomes the new baseline: every case but
    /// [`DeltaCase::Stale`], whose baseline is newer than the reading.
    #[must_use]
    pub fn adopts_reading(self) -> bool {
        self != DeltaCase::Stale
    }
}

/// New bytes and packets in `reading` relative to `baseline`, and the case taken.
/// The caller stores [`Baseline::of`]`(reading)` afterwards unless the case
/// is [`DeltaCase::Stale`] ([`DeltaCase::adopts_reading`]).
#[must_use]
pub fn delta(baseline: Option<&Baseline>, reading: &FlowCounters) -> (Counts, DeltaCase) {
    let whole = Counts::new(reading.bytes, reading.packets);
    let Some(base) = baseline else {
        return (whole, DeltaCase::FirstSight);
    };
    let went_back = reading.bytes < base.last.bytes || reading.packets < base.last.packets;
    if base.stamp == 0 {
        // Either counter going back proves a different entry: the whole
        // reading is new for both, never a difference for one and a restart
        // for the other (which would drop the larger counter's bytes).
        let add = if went_back {
            whole
        } else {
            Counts::new(
                reading.bytes - base.last.bytes,
                reading.packets - base.last.packets,
            )
        };
        return (add, DeltaCase::AdoptStamp);
    }
    if base.stamp != reading.created_ns {
        return (whole, DeltaCase::NewEntry);
    }
    if went_back {
        return (Counts::default(), DeltaCase::Stale);
    }
    (
        Counts::new(
            reading.bytes - base.last.bytes,
            reading.packets - base.last.packets,
        ),
        DeltaCase::SameEntry,
    )
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
            gone: false,
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
                "same stamp, older reading: stale, nothing added",
                Some(base(5000, 50, 5)),
                reading(2000, 20, 5),
                Counts::new(0, 0),
                DeltaCase::Stale,
            ),
            (
                "same stamp, only packets went back: stale as a whole",
                Some(base(1000, 10, 5)),
                reading(1100, 9, 5),
                Counts::new(0, 0),
                DeltaCase::Stale,
            ),
            (
                "same stamp, near the top of u64 going back: stale, never a wrap",
                Some(base(u64::MAX - 9, 10, 5)),
                reading(20, 11, 5),
                Counts::new(0, 0),
                DeltaCase::Stale,
            ),
        ];
        for (name, b, r, want, case) in cases {
            assert_eq!(delta(b.as_ref(), r), (*want, *case), "{name}");
        }
    }

    #[test]
    fn only_a_stale_reading_keeps_the_baseline() {
        let b = base(5000, 50, 5);
        let (_, stale) = delta(Some(&b), &reading(2000, 20, 5));
        assert!(!stale.adopts_reading());
        for r in [reading(6000, 60, 5), reading(1, 1, 6), reading(5000, 50, 5)] {
            assert!(delta(Some(&b), &r).1.adopts_reading());
        }
    }

    #[test]
    fn baseline_adopts_the_reading_stamp() {
        let r = reading(10, 1, 42);
        assert_eq!(Baseline::of(&r), base(10, 1, 42));
    }
}
