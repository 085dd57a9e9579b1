//! A snapshot kept up to date one entry at a time (relay mode, DESIGN
//! §17): a relay-mode agent holds the cloud as keyed records and changes a
//! few of them per event, so it parses what changed, not the whole cloud
//! again at every pass.

use std::collections::BTreeMap;

use serde_json::Value;

use super::model::Snapshot;
use super::parse::{self, parse_item, Identified, Item};
use super::report::{ParseReport, Skipped};
use crate::bodies::Resource;
use crate::sources::{SourceStatus, Sources};

/// A [`Snapshot`] changed entry by entry: [`LiveSnapshot::upsert`] parses
/// one list element and files it under its id, replacing what that id held;
/// [`LiveSnapshot::remove`] takes an id out. After any sequence of them,
/// the snapshot and the report are those [`super::parse_snapshot`] gives
/// for the element last upserted under each id still present: lists sorted
/// by id, the same entries, the same skip lines.
#[derive(Debug, Clone)]
pub struct LiveSnapshot {
    snapshot: Snapshot,
    /// The skip lines of each filed element, by list and id.
    skipped: BTreeMap<(Resource, String), Vec<Skipped>>,
    /// How many lines `skipped` holds.
    lines: usize,
}

/// Runs `$body` with `$list` (the snapshot's list for `$resource`, `None`
/// when that list was not fetched) and `$build` (its entries' builder).
macro_rules! on_list {
    ($snapshot:expr, $resource:expr, |$list:ident, $build:ident| $body:expr) => {
        match $resource {
            Resource::Networks => {
                on_list!(@ Some(&mut $snapshot.networks), parse::network, $list, $build, $body)
            }
            Resource::Subnets => {
                on_list!(@ Some(&mut $snapshot.subnets), parse::subnet, $list, $build, $body)
            }
            Resource::Ports => {
                on_list!(@ Some(&mut $snapshot.ports), parse::port, $list, $build, $body)
            }
            Resource::Routers => {
                on_list!(@ Some(&mut $snapshot.routers), parse::router, $list, $build, $body)
            }
            Resource::FloatingIps => on_list!(@
                Some(&mut $snapshot.floating_ips), parse::floating_ip, $list, $build, $body),
            Resource::Projects => {
                on_list!(@ Some(&mut $snapshot.projects), parse::project, $list, $build, $body)
            }
            Resource::Servers => {
                on_list!(@ $snapshot.servers.as_mut(), parse::server, $list, $build, $body)
            }
            Resource::LoadBalancers => on_list!(@
                $snapshot.load_balancers.as_mut(), parse::load_balancer, $list, $build, $body),
            Resource::Amphorae => {
                on_list!(@ $snapshot.amphorae.as_mut(), parse::amphora, $list, $build, $body)
            }
        }
    };
    (@ $get:expr, $builder:expr, $list:ident, $build:ident, $body:expr) => {{
        let $list = $get;
        let $build = $builder;
        $body
    }};
}

impl LiveSnapshot {
    /// An empty snapshot whose best-effort lists are present as `sources`
    /// says they were fetched; an element of a list that was not is
    /// ignored, as [`super::SnapshotParser::finish`] leaves such a list out.
    #[must_use]
    pub fn new(sources: Sources) -> Self {
        fn fetched<T>(status: SourceStatus) -> Option<Vec<T>> {
            (status == SourceStatus::Ok).then(Vec::new)
        }
        LiveSnapshot {
            snapshot: Snapshot {
                networks: Vec::new(),
                subnets: Vec::new(),
                ports: Vec::new(),
                routers: Vec::new(),
                floating_ips: Vec::new(),
                projects: Vec::new(),
                servers: fetched(sources.servers),
                load_balancers: fetched(sources.loadbalancers),
                amphorae: fetched(sources.amphorae),
                sources,
            },
            skipped: BTreeMap::new(),
            lines: 0,
        }
    }

    /// Parses `item`, an element of `resource`'s list, and files it under
    /// its id: its entry replaces the one that id held (or takes that one
    /// out, when the whole of `item` is dropped) and its skip lines replace
    /// that id's.
    ///
    /// # Errors
    ///
    /// An element that is not an object or has no usable id cannot be
    /// filed: its skip line is returned and nothing changes.
    pub fn upsert(&mut self, resource: Resource, item: &Value) -> Result<(), Skipped> {
        on_list!(self.snapshot, resource, |list, build| {
            match parse_item(resource.collection(), build, item, None) {
                Item::Unkeyed(line) => Err(line),
                Item::Keyed { id, entry, skipped } => {
                    if let Some(list) = list {
                        match entry {
                            Some(entry) => put(list, entry),
                            None => take(list, &id),
                        }
                        self.set_skipped(resource, id, skipped);
                    }
                    Ok(())
                }
            }
        })
    }

    /// Takes `id` out of `resource`'s list, entry and skip lines.
    pub fn remove(&mut self, resource: Resource, id: &str) {
        on_list!(self.snapshot, resource, |list, _build| {
            if let Some(list) = list {
                take(list, id);
            }
        });
        self.set_skipped(resource, id.to_owned(), Vec::new());
    }

    /// The snapshot as it stands.
    #[must_use]
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// The skip lines of every filed element, sorted.
    #[must_use]
    pub fn report(&self) -> ParseReport {
        let mut skipped: Vec<Skipped> = self.skipped.values().flatten().cloned().collect();
        skipped.sort();
        ParseReport { skipped }
    }

    /// How many lines [`LiveSnapshot::report`] holds.
    #[must_use]
    pub fn skipped(&self) -> usize {
        self.lines
    }

    fn set_skipped(&mut self, resource: Resource, id: String, lines: Vec<Skipped>) {
        let key = (resource, id);
        let old = if lines.is_empty() {
            self.skipped.remove(&key)
        } else {
            let n = lines.len();
            self.lines += n;
            self.skipped.insert(key, lines)
        };
        self.lines -= old.map_or(0, |o| o.len());
    }
}

/// Files `entry` in `list` (sorted by id, one entry per id).
fn put<T: Identified>(list: &mut Vec<T>, entry: T) {
    match list.binary_search_by(|e| e.id().cmp(entry.id())) {
        Ok(at) => list[at] = entry,
        Err(at) => list.insert(at, entry),
    }
}

/// Takes `id`'s entry out of `list` (sorted by id), if it holds one.
fn take<T: Identified>(list: &mut Vec<T>, id: &str) {
    if let Ok(at) = list.binary_search_by(|e| e.id().cmp(id)) {
        list.remove(at);
    }
}
