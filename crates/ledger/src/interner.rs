//! Project UUID ↔ small u32 used in kernel keys (DESIGN §2). Persisted in the
//! state file so a restart never re-numbers a tenant whose id is still in the
//! kernel tries.

use std::collections::BTreeMap;

/// Id 0 means "every tenant" (global trie rows) and is never handed out.
pub const GLOBAL_TENANT_ID: u32 = 0;

/// The interner ran out of ids.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "tenant id space exhausted interning {project:?}: all {} ids are taken",
    u32::MAX
)]
pub struct InternerFull {
    /// The project that could not be interned.
    pub project: String,
}

/// Restoring would give a kernel tenant id already handed out a second
/// meaning (or a project a second id).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "tenant id conflict restoring the state file: {project:?} already has kernel id \
     {live_id} in this process, but in the file {}; expected the file's interner to be \
     restored before any project is interned (docs/ledger.md, boot)",
    match (file_id, file_project) {
        (Some(id), _) => format!("it has id {id}"),
        (None, Some(other)) => format!("id {live_id} belongs to {other:?}"),
        (None, None) => "nothing conflicts".to_owned(),
    }
)]
pub struct InternerConflict {
    /// The project interned in this process.
    pub project: String,
    /// Its id in this process (possibly already in kernel trie rows).
    pub live_id: u32,
    /// The project's id in the file, when different.
    pub file_id: Option<u32>,
    /// The file's project holding `live_id`, when another one.
    pub file_project: Option<String>,
}

/// Bidirectional project ↔ id map. Ids are never reused: a released id may
/// still sit in a kernel key, and u32 is far beyond any cloud's project count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantInterner {
    by_project: BTreeMap<String, u32>,
    next: u32,
}

impl Default for TenantInterner {
    fn default() -> Self {
        TenantInterner {
            by_project: BTreeMap::new(),
            next: GLOBAL_TENANT_ID + 1,
        }
    }
}

impl TenantInterner {
    /// The id of `project`, allocating one if it has none.
    pub fn intern(&mut self, project: &str) -> Result<u32, InternerFull> {
        if let Some(id) = self.by_project.get(project) {
            return Ok(*id);
        }
        let id = self.next.max(GLOBAL_TENANT_ID + 1);
        if id == u32::MAX {
            return Err(InternerFull {
                project: project.to_owned(),
            });
        }
        self.next = id + 1;
        self.by_project.insert(project.to_owned(), id);
        Ok(id)
    }

    /// The id of `project`, if interned.
    #[must_use]
    pub fn get(&self, project: &str) -> Option<u32> {
        self.by_project.get(project).copied()
    }

    /// The project of `id`, if any (linear: for diagnostics, not the hot path).
    #[must_use]
    pub fn project(&self, id: u32) -> Option<&str> {
        self.by_project
            .iter()
            .find(|(_, v)| **v == id)
            .map(|(k, _)| k.as_str())
    }

    /// Number of interned projects.
    #[must_use]
    pub fn len(&self) -> usize {
        self.by_project.len()
    }

    /// Nothing interned yet.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.by_project.is_empty()
    }

    /// All (project, id) pairs, sorted by project.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u32)> {
        self.by_project.iter().map(|(k, v)| (k.as_str(), *v))
    }

    /// Adds to `self` (restored from the file) every pair of `live` (ids
    /// this process already handed out), or changes nothing and reports the
    /// first pair that would give an id or a project a second meaning.
    pub fn merge_live(&mut self, live: &TenantInterner) -> Result<(), InternerConflict> {
        for (project, id) in live.iter() {
            let file_id = self.get(project);
            let file_project = self.project(id);
            let same = file_id == Some(id);
            let free = file_id.is_none() && file_project.is_none();
            if !same && !free {
                return Err(InternerConflict {
                    project: project.to_owned(),
                    live_id: id,
                    file_id: file_id.filter(|f| *f != id),
                    file_project: file_project.filter(|p| *p != project).map(str::to_owned),
                });
            }
        }
        for (project, id) in live.iter() {
            self.by_project.insert(project.to_owned(), id);
        }
        self.next = self.next.max(live.next);
        Ok(())
    }

    /// Rebuilds from persisted pairs; the next id continues after the largest.
    pub fn from_pairs(
        pairs: impl IntoIterator<Item = (String, u32)>,
        next: u32,
    ) -> Result<Self, InvalidInterner> {
        let mut by_project = BTreeMap::new();
        let mut seen = std::collections::BTreeSet::new();
        let mut max = 0;
        for (project, id) in pairs {
            if id == GLOBAL_TENANT_ID || !seen.insert(id) {
                return Err(InvalidInterner { project, id });
            }
            max = max.max(id);
            if by_project.insert(project.clone(), id).is_some() {
                return Err(InvalidInterner { project, id });
            }
        }
        Ok(TenantInterner {
            by_project,
            next: next.max(max.saturating_add(1)),
        })
    }

    /// The next id to be handed out (persisted so ids are never reused).
    #[must_use]
    pub fn next_id(&self) -> u32 {
        self.next.max(GLOBAL_TENANT_ID + 1)
    }
}

/// A persisted interner entry that would break the bijection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid tenant interner entry {project:?} → {id}: expected a unique non-zero id per unique project")]
pub struct InvalidInterner {
    /// The offending project.
    pub project: String,
    /// The offending id.
    pub id: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_start_at_one_are_stable_and_never_reused() {
        let mut i = TenantInterner::default();
        assert_eq!(i.intern("p-a"), Ok(1));
        assert_eq!(i.intern("p-b"), Ok(2));
        assert_eq!(i.intern("p-a"), Ok(1));
        assert_eq!(i.project(2), Some("p-b"));
        let restored =
            TenantInterner::from_pairs(i.iter().map(|(p, id)| (p.to_owned(), id)), i.next_id())
                .unwrap();
        assert_eq!(restored, i);
        let mut r = restored;
        assert_eq!(r.intern("p-c"), Ok(3));
    }

    #[test]
    fn rejects_zero_and_duplicate_ids() {
        assert!(TenantInterner::from_pairs([("a".to_owned(), 0)], 1).is_err());
        assert!(TenantInterner::from_pairs([("a".to_owned(), 4), ("b".to_owned(), 4)], 1).is_err());
    }

    #[test]
    fn exhaustion_is_an_error_not_a_wrap() {
        let mut i = TenantInterner::from_pairs([("a".to_owned(), u32::MAX - 1)], 0).unwrap();
        assert_eq!(
            i.intern("b"),
            Err(InternerFull {
                project: "b".to_owned()
            })
        );
    }
}
