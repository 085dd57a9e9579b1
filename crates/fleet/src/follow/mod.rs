//! What a relay does for one notification (DESIGN §8 and §17; docs/fleet.md,
//! "Following notifications").
//!
//! The payload shapes are the ones the simulator emits
//! (`crates/sim/src/notify.rs`), which the real-cloud tier holds against
//! real Neutron 21 and Keystone 22 (`crates/agent/tests/services/real_cloud/shapes.rs`):
//! Neutron's `*.create.end` / `*.update.end` carry `{"<singular>": <the
//! resource, revision_number included>}`, `*.delete.end` adds
//! `"<singular>_id"`; `router.interface.*` and `rbac_policy.*` carry ids
//! only; Keystone's project events (CADF) the id only, as `target.id` and
//! `resource_info`. Nova's legacy events carry `instance_id`
//! (`notify.rs`), its versioned ones `nova_object.data.uuid`. Octavia
//! sends the load balancer as its provider dictionary, keyed
//! `loadbalancer_id` (openstack/octavia,
//! `controller/worker/v2/tasks/notification_tasks.py`); the simulator
//! sends the API object, keyed `id`: both are read.
//!
//! Who sent a notification (its `publisher_id`) is the caller's check
//! (`lachesis_notify::classify`); this reads the event type and payload.

use lachesis_planner::Resource;
use serde_json::Value;

use crate::record::{Entry, Key};

/// What the relay does.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Apply this record under the guard and publish it if it applied.
    Publish(Entry),
    /// Publish a tombstone: at `rev` when the payload had the resource's
    /// revision, else at the revision the relay holds for it.
    Delete {
        /// The list.
        kind: Resource,
        /// The deleted resource's id.
        id: String,
        /// Its last revision, from the payload.
        rev: Option<u64>,
    },
    /// GET these by id and publish what comes back (a 404 is a delete).
    Fetch(Vec<Key>),
    /// Nothing to do.
    Ignore(Ignored),
}

/// Why a notification needs nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ignored {
    /// A `.start` event: sent before the change is committed.
    Start,
    /// An event that moves no list the planner reads.
    Unrelated,
    /// An event that would matter, but its payload names no id.
    NoId,
}

/// Neutron's resources, by the singular their events and payloads use.
const NEUTRON: [(&str, Resource); 5] = [
    ("network", Resource::Networks),
    ("subnet", Resource::Subnets),
    ("port", Resource::Ports),
    ("router", Resource::Routers),
    ("floatingip", Resource::FloatingIps),
];

/// What a relay does for the notification `event_type` with `payload`.
#[must_use]
#[expect(
    clippy::case_sensitive_file_extension_comparisons,
    reason = "event types, not file names: the services spell them in lower case"
)]
pub fn follow(event_type: &str, payload: &Value) -> Action {
    if event_type.ends_with(".start") {
        return Action::Ignore(Ignored::Start);
    }
    if let Some(action) = neutron(event_type, payload) {
        return action;
    }
    let (kind, ids): (Resource, Vec<Option<&str>>) = match event_type {
        "router.interface.create" | "router.interface.delete" => {
            // The router's revision rose and its interface port is one
            // Neutron owns, which sends no port event of its own.
            let info = &payload["router_interface"];
            return fetch(vec![
                (Resource::Routers, info["id"].as_str()),
                (Resource::Ports, info["port_id"].as_str()),
            ]);
        }
        et if et.starts_with("rbac_policy.") && et.ends_with(".end") => {
            // Sharing a network, or making it external, changes the
            // network's `shared` / `router:external`.
            let policy = &payload["rbac_policy"];
            if policy["object_type"] != "network" {
                return Action::Ignore(Ignored::Unrelated);
            }
            (Resource::Networks, vec![policy["object_id"].as_str()])
        }
        et if et.starts_with("identity.project.") => (
            Resource::Projects,
            vec![payload["target"]["id"]
                .as_str()
                .or(payload["resource_info"].as_str())],
        ),
        // Nova's periodic audit: nothing changed.
        "compute.instance.exists" | "instance.exists" => return Action::Ignore(Ignored::Unrelated),
        et if et.starts_with("compute.instance.") => {
            (Resource::Servers, vec![payload["instance_id"].as_str()])
        }
        et if et.starts_with("instance.") => (
            Resource::Servers,
            vec![payload["nova_object.data"]["uuid"].as_str()],
        ),
        et if et.starts_with("octavia.loadbalancer.") && et.ends_with(".end") => (
            Resource::LoadBalancers,
            vec![payload["loadbalancer_id"]
                .as_str()
                .or(payload["id"].as_str())],
        ),
        _ => return Action::Ignore(Ignored::Unrelated),
    };
    fetch(ids.into_iter().map(|id| (kind, id)).collect())
}

/// `<singular>.<create|update|delete>.end` of a Neutron resource.
fn neutron(event_type: &str, payload: &Value) -> Option<Action> {
    let rest = event_type.strip_suffix(".end")?;
    let (singular, verb) = rest.split_once('.')?;
    let kind = NEUTRON.iter().find(|(s, _)| *s == singular)?.1;
    let body = &payload[singular];
    let action = match verb {
        "create" | "update" => match (body["id"].as_str(), body["revision_number"].as_u64()) {
            (Some(id), Some(rev)) if !id.is_empty() => {
                Action::Publish(Entry::live(kind, id, rev, body))
            }
            // No revision to guard with: ask for the resource.
            (Some(id), None) => fetch(vec![(kind, Some(id))]),
            _ => Action::Ignore(Ignored::NoId),
        },
        "delete" => {
            let id = payload[format!("{singular}_id")]
                .as_str()
                .or(body["id"].as_str());
            match id {
                Some(id) if !id.is_empty() => Action::Delete {
                    kind,
                    id: id.to_owned(),
                    rev: body["revision_number"].as_u64(),
                },
                _ => Action::Ignore(Ignored::NoId),
            }
        }
        _ => Action::Ignore(Ignored::Unrelated),
    };
    Some(action)
}

/// A fetch of the ids present (non-empty strings); none is `NoId`.
fn fetch(ids: Vec<(Resource, Option<&str>)>) -> Action {
    let keys: Vec<Key> = ids
        .into_iter()
        .filter_map(|(kind, id)| id.filter(|i| !i.is_empty()).map(|i| Key::new(kind, i)))
        .collect();
    if keys.is_empty() {
        Action::Ignore(Ignored::NoId)
    } else {
        Action::Fetch(keys)
    }
}

#[cfg(test)]
mod tests;
