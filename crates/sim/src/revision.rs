//! What each resource's history shows on the wire: `revision_number`,
//! `created_at`, `updated_at`, and the servers Nova still reports after
//! their deletion. Pure bookkeeping; the store says when something changed.
//!
//! Only resources changed since the store was built have an entry: the
//! rest show their kind's revision at creation and the load instant, so a
//! benchmark-size topology costs nothing here until it changes.

use std::collections::{BTreeMap, HashMap};

use lachesis_planner::Resource;

use crate::clock::Stamp;
use crate::topology::Server;

/// One resource's history as the services show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    /// Neutron's `revision_number`: rises on every change of the resource,
    /// including those another resource's change causes.
    pub revision_number: u64,
    /// When it was created (or loaded).
    pub created_at: Stamp,
    /// When it last changed.
    pub updated_at: Stamp,
}

/// The `revision_number` a fresh resource of `kind` shows, as Neutron 21
/// answers a create (checked on the real-cloud tier): a network, port or
/// router has already been written twice, a subnet or floating IP once.
#[must_use]
pub fn initial_revision(kind: Resource) -> u64 {
    match kind {
        Resource::Networks | Resource::Ports | Resource::Routers => 1,
        _ => 0,
    }
}

/// A server Nova lists after its deletion (`changes-since` shows it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deleted {
    /// The server as it was.
    pub server: Server,
    /// Its history; `updated_at` is the deletion.
    pub meta: Meta,
}

/// Every resource's [`Meta`] and the deleted servers.
#[derive(Debug, Clone, Default)]
pub struct Revisions {
    /// When the store was built: the creation stamp of what it loaded.
    loaded_at: Option<Stamp>,
    changed: HashMap<Resource, HashMap<String, Meta>>,
    deleted_servers: BTreeMap<String, Deleted>,
}

impl Revisions {
    /// Bookkeeping for a store loaded at `now`.
    #[must_use]
    pub fn loaded(now: Stamp) -> Self {
        Self {
            loaded_at: Some(now),
            ..Self::default()
        }
    }

    /// The history of `kind` `id` (a resource that was never changed shows
    /// its creation revision at the load instant).
    #[must_use]
    pub fn meta(&self, kind: Resource, id: &str) -> Meta {
        self.changed
            .get(&kind)
            .and_then(|m| m.get(id))
            .copied()
            .unwrap_or_else(|| {
                let at = self.loaded_at.unwrap_or(crate::clock::DEFAULT_START);
                Meta {
                    revision_number: initial_revision(kind),
                    created_at: at,
                    updated_at: at,
                }
            })
    }

    /// `kind` `id` was created at `now` (again, if the id was used before).
    pub fn created(&mut self, kind: Resource, id: &str, now: Stamp) {
        let meta = Meta {
            revision_number: initial_revision(kind),
            created_at: now,
            updated_at: now,
        };
        self.changed
            .entry(kind)
            .or_default()
            .insert(id.to_owned(), meta);
        if kind == Resource::Servers {
            self.deleted_servers.remove(id);
        }
    }

    /// `kind` `id` changed at `now`: one more revision.
    pub fn bumped(&mut self, kind: Resource, id: &str, now: Stamp) {
        let mut meta = self.meta(kind, id);
        meta.revision_number += 1;
        meta.updated_at = now;
        self.changed
            .entry(kind)
            .or_default()
            .insert(id.to_owned(), meta);
    }

    /// `kind` `id` is gone. A server is kept, as Nova keeps it, for
    /// `changes-since`: `server` is what it was.
    pub fn deleted(&mut self, kind: Resource, id: &str, now: Stamp, server: Option<Server>) {
        let mut meta = self.meta(kind, id);
        if let Some(m) = self.changed.get_mut(&kind) {
            m.remove(id);
        }
        if let Some(server) = server {
            meta.updated_at = now;
            self.deleted_servers
                .insert(id.to_owned(), Deleted { server, meta });
        }
    }

    /// Servers deleted since the store was built, by id.
    #[must_use]
    pub fn deleted_servers(&self) -> &BTreeMap<String, Deleted> {
        &self.deleted_servers
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loaded_resources_show_their_creation_revision_until_they_change() {
        let mut r = Revisions::loaded(Stamp(100));
        let m = r.meta(Resource::Subnets, "s1");
        assert_eq!((m.revision_number, m.updated_at), (0, Stamp(100)));
        r.bumped(Resource::Subnets, "s1", Stamp(105));
        r.bumped(Resource::Subnets, "s1", Stamp(107));
        let m = r.meta(Resource::Subnets, "s1");
        assert_eq!(
            (m.revision_number, m.created_at, m.updated_at),
            (2, Stamp(100), Stamp(107))
        );
    }

    #[test]
    fn a_deleted_server_is_kept_with_its_deletion_time_until_recreated() {
        let mut r = Revisions::loaded(Stamp(100));
        let vm = Server {
            id: "vm".into(),
            name: String::new(),
            tenant_id: "t".into(),
            status: "ACTIVE".into(),
            availability_zone: "nova".into(),
        };
        r.deleted(Resource::Servers, "vm", Stamp(110), Some(vm));
        assert_eq!(r.deleted_servers()["vm"].meta.updated_at, Stamp(110));
        r.created(Resource::Servers, "vm", Stamp(120));
        assert!(r.deleted_servers().is_empty());
        r.deleted(Resource::Ports, "p", Stamp(130), None);
        assert_eq!(r.meta(Resource::Ports, "p").created_at, Stamp(100));
    }
}
