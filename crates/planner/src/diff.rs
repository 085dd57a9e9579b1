//! The delta between two plans: what a reconcile pass (DESIGN §7) applies.

use std::cmp::Ordering;

use serde::Serialize;

use crate::plan::{AmphoraIp, Binding, Plan, RouterMac, TrieRow};

/// An entry whose key stayed but whose value changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change<T> {
    /// The value in the old plan.
    pub old: T,
    /// The value in the new plan.
    pub new: T,
}

/// Everything that differs between an old (committed) and a new plan.
/// Every list is sorted by its key (the plan's own sort order).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PlanDelta {
    /// Rows that are new or whose zone changed (the new row): upsert first.
    pub trie_upsert: Vec<TrieRow>,
    /// Rows whose (tenant, prefix) is gone (the old row): delete only after
    /// every upsert succeeded.
    pub trie_delete: Vec<TrieRow>,
    /// MACs newly bound.
    pub bindings_added: Vec<Binding>,
    /// MACs whose attribution changed (tenant, server, port, external
    /// network or amphora flag): settle under `old` before learning `new`.
    pub bindings_changed: Vec<Change<Binding>>,
    /// MACs no longer desired (to be ghosted).
    pub bindings_removed: Vec<Binding>,
    /// Router MACs new in the new plan.
    pub router_macs_added: Vec<RouterMac>,
    /// Router MACs whose router or external network changed.
    pub router_macs_changed: Vec<Change<RouterMac>>,
    /// Router MACs gone.
    pub router_macs_removed: Vec<RouterMac>,
    /// Amphora addresses to insert (the map is insert-only, DESIGN §7).
    pub amphora_ips_added: Vec<AmphoraIp>,
    /// Amphora addresses no longer desired (informational: not deleted).
    pub amphora_ips_removed: Vec<AmphoraIp>,
}

impl PlanDelta {
    /// True when applying the delta would change nothing.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.trie_upsert.is_empty()
            && self.trie_delete.is_empty()
            && self.bindings_added.is_empty()
            && self.bindings_changed.is_empty()
            && self.bindings_removed.is_empty()
            && self.router_macs_added.is_empty()
            && self.router_macs_changed.is_empty()
            && self.router_macs_removed.is_empty()
            && self.amphora_ips_added.is_empty()
            && self.amphora_ips_removed.is_empty()
    }
}

/// Computes the delta from `old` to `new`. Linear in the plan sizes when
/// both are sorted as [`crate::plan`] produces them; plans from elsewhere
/// (e.g. a state file) are sorted first.
#[must_use]
pub fn diff(old: &Plan, new: &Plan) -> PlanDelta {
    let mut d = PlanDelta::default();
    let (add, chg, del) = merge(&old.trie, &new.trie, |a, b| {
        (&a.tenant, a.prefix).cmp(&(&b.tenant, b.prefix))
    });
    d.trie_upsert = add;
    d.trie_upsert.extend(chg.into_iter().map(|c| c.new));
    d.trie_upsert
        .sort_by(|a, b| (&a.tenant, a.prefix).cmp(&(&b.tenant, b.prefix)));
    d.trie_delete = del;
    let (add, chg, del) = merge(&old.bindings, &new.bindings, |a, b| a.mac.cmp(&b.mac));
    (d.bindings_added, d.bindings_changed, d.bindings_removed) = (add, chg, del);
    let (add, chg, del) = merge(&old.router_macs, &new.router_macs, |a, b| a.mac.cmp(&b.mac));
    (
        d.router_macs_added,
        d.router_macs_changed,
        d.router_macs_removed,
    ) = (add, chg, del);
    let (add, _, del) = merge(&old.amphora_ips, &new.amphora_ips, Ord::cmp);
    (d.amphora_ips_added, d.amphora_ips_removed) = (add, del);
    d
}

type Merged<T> = (Vec<T>, Vec<Change<T>>, Vec<T>);

/// Merge-join of two key-sorted lists: (only in new, changed, only in old).
fn merge<T: Clone + PartialEq>(
    old: &[T],
    new: &[T],
    key_cmp: impl Fn(&T, &T) -> Ordering,
) -> Merged<T> {
    let sorted = |v: &[T]| {
        v.windows(2)
            .all(|w| key_cmp(&w[0], &w[1]) != Ordering::Greater)
    };
    let (old_sorted, new_sorted);
    let old = if sorted(old) {
        old
    } else {
        let mut v = old.to_vec();
        v.sort_by(&key_cmp);
        old_sorted = v;
        &old_sorted[..]
    };
    let new = if sorted(new) {
        new
    } else {
        let mut v = new.to_vec();
        v.sort_by(&key_cmp);
        new_sorted = v;
        &new_sorted[..]
    };
    let (mut added, mut changed, mut removed) = (Vec::new(), Vec::new(), Vec::new());
    let (mut i, mut j) = (0, 0);
    while i < old.len() && j < new.len() {
        match key_cmp(&old[i], &new[j]) {
            Ordering::Less => {
                removed.push(old[i].clone());
                i += 1;
            }
            Ordering::Greater => {
                added.push(new[j].clone());
                j += 1;
            }
            Ordering::Equal => {
                if old[i] != new[j] {
                    changed.push(Change {
                        old: old[i].clone(),
                        new: new[j].clone(),
                    });
                }
                i += 1;
                j += 1;
            }
        }
    }
    removed.extend_from_slice(&old[i..]);
    added.extend_from_slice(&new[j..]);
    (added, changed, removed)
}
