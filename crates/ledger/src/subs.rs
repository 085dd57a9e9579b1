//! A row's kernel sub-entries (DESIGN §4.7): `flows` is keyed by (flow key,
//! CPU), so one row — one flow key, one bill — is fed by one kernel entry
//! per CPU that counted the flow. Identity (§4.3) holds per sub-entry: each
//! keeps its own baseline, and a CPU's first packet is a new sub-entry of
//! the row, never a new entry of the whole key.

use smallvec::SmallVec;

use crate::delta::{Baseline, DrainMark};

/// What the ledger last read from one sub-entry of a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sub {
    /// The CPU whose sub-entry this is, or [`lachesis_abi::FOLDED_CPU`] for a
    /// whole entry of the previous (per-CPU hash) layout.
    pub cpu: u16,
    /// Its last raw reading and stamp.
    pub base: Baseline,
    /// The full drain that last showed it.
    pub(crate) seen: DrainMark,
}

/// A row's sub-entries, sorted by CPU (so two books holding the same ones
/// compare equal); inline up to two, the common fan-out of a flow.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subs(SmallVec<[Sub; 2]>);

impl Subs {
    /// One sub-entry.
    #[must_use]
    pub fn one(cpu: u16, base: Baseline) -> Subs {
        Subs(smallvec::smallvec![Sub {
            cpu,
            base,
            seen: DrainMark::default(),
        }])
    }

    pub(crate) fn one_seen(cpu: u16, base: Baseline, seen: DrainMark) -> Subs {
        Subs(smallvec::smallvec![Sub { cpu, base, seen }])
    }

    fn position(&self, cpu: u16) -> Result<usize, usize> {
        self.0.binary_search_by_key(&cpu, |s| s.cpu)
    }

    /// CPU `cpu`'s sub-entry.
    #[must_use]
    pub fn get(&self, cpu: u16) -> Option<&Sub> {
        self.position(cpu).ok().map(|i| &self.0[i])
    }

    pub(crate) fn get_mut(&mut self, cpu: u16) -> Option<&mut Sub> {
        self.position(cpu).ok().map(|i| &mut self.0[i])
    }

    /// Every sub-entry, by CPU.
    pub fn iter(&self) -> impl Iterator<Item = &Sub> {
        self.0.iter()
    }

    /// How many.
    #[must_use]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// None at all: no kernel entry of the row is known to exist.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Records a reading's baseline: an existing sub-entry takes `base`
    /// (and `full`'s mark when a full drain showed it); a new one is added
    /// with `seen`.
    pub(crate) fn record(
        &mut self,
        cpu: u16,
        base: Baseline,
        full: Option<DrainMark>,
        seen: DrainMark,
    ) {
        match self.position(cpu) {
            Ok(i) => {
                let s = &mut self.0[i];
                s.base = base;
                if let Some(mark) = full {
                    s.seen = mark;
                }
            }
            Err(i) => self.0.insert(i, Sub { cpu, base, seen }),
        }
    }

    /// Adds a restored sub-entry (the state file holds each CPU once).
    pub(crate) fn push_restored(&mut self, cpu: u16, base: Baseline) {
        if let Err(i) = self.position(cpu) {
            self.0.insert(
                i,
                Sub {
                    cpu,
                    base,
                    seen: DrainMark::default(),
                },
            );
        }
    }

    /// Drops the sub-entries the full drain `mark` did not show: their
    /// kernel entries no longer exist, and a later entry of the same (key,
    /// CPU) carries a new stamp, so its baseline would never be used again.
    /// Returns how many were dropped.
    pub(crate) fn drop_unseen(&mut self, mark: DrainMark) -> usize {
        let before = self.0.len();
        self.0.retain(|s| s.seen.0 == mark.0);
        before - self.0.len()
    }

    /// Takes them out, leaving none.
    pub(crate) fn take(&mut self) -> Subs {
        std::mem::take(self)
    }
}

impl<'a> IntoIterator for &'a Subs {
    type Item = &'a Sub;
    type IntoIter = std::slice::Iter<'a, Sub>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counts::Counts;

    fn base(bytes: u64, stamp: u64) -> Baseline {
        Baseline {
            last: Counts::new(bytes, 1),
            stamp,
            gone: false,
        }
    }

    #[test]
    fn sub_entries_stay_sorted_by_cpu_and_are_replaced_in_place() {
        let mut s = Subs::default();
        s.record(3, base(30, 1), None, DrainMark(1));
        s.record(0, base(10, 2), None, DrainMark(1));
        s.record(7, base(70, 3), None, DrainMark(1));
        assert_eq!(s.iter().map(|x| x.cpu).collect::<Vec<_>>(), vec![0, 3, 7]);
        s.record(3, base(35, 1), Some(DrainMark(2)), DrainMark(9));
        assert_eq!(s.len(), 3);
        assert_eq!(s.get(3).unwrap().base, base(35, 1));
        assert_eq!(s.get(3).unwrap().seen.0, 2);
        // Not a full drain: the mark stays.
        s.record(0, base(11, 2), None, DrainMark(9));
        assert_eq!(s.get(0).unwrap().seen.0, 1);
    }

    #[test]
    fn a_full_drain_drops_what_it_did_not_show() {
        let mut s = Subs::default();
        s.record(0, base(10, 1), None, DrainMark(4));
        s.record(1, base(10, 2), None, DrainMark(5));
        s.record(2, base(10, 3), None, DrainMark(5));
        assert_eq!(s.drop_unseen(DrainMark(5)), 1);
        assert!(s.get(0).is_none());
        assert_eq!(s.len(), 2);
    }
}
