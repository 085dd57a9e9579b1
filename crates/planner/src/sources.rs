//! Which best-effort lists a plan was built from (the plan's `sources` key).

use serde::{Deserialize, Serialize};

use crate::bodies::{ApiBodies, OptionalBody};

/// What became of one best-effort list.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceStatus {
    /// Fetched and parsed.
    Ok,
    /// The service is deployed but the fetch failed: the list is unknown.
    Failed,
    /// The service is not deployed: the list is empty by nature.
    #[default]
    Absent,
}

impl SourceStatus {
    /// The JSON label: `ok`, `failed` or `absent`.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            SourceStatus::Ok => "ok",
            SourceStatus::Failed => "failed",
            SourceStatus::Absent => "absent",
        }
    }

    /// The status of a body as handed to the parser.
    #[must_use]
    pub fn of(body: &OptionalBody) -> SourceStatus {
        match body {
            OptionalBody::Fetched(_) => SourceStatus::Ok,
            OptionalBody::Failed => SourceStatus::Failed,
            OptionalBody::NotDeployed => SourceStatus::Absent,
        }
    }
}

/// The status of each best-effort list (the required ones are all-or-nothing
/// and so always fetched in a plan). Key order is the documented JSON order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sources {
    /// Nova `servers`.
    pub servers: SourceStatus,
    /// Octavia `loadbalancers`.
    pub loadbalancers: SourceStatus,
    /// Octavia `amphorae`.
    pub amphorae: SourceStatus,
}

impl Sources {
    /// The status of each best-effort body as handed to the parser.
    #[must_use]
    pub fn of(bodies: &ApiBodies) -> Sources {
        Sources {
            servers: SourceStatus::of(&bodies.servers),
            loadbalancers: SourceStatus::of(&bodies.loadbalancers),
            amphorae: SourceStatus::of(&bodies.amphorae),
        }
    }

    /// Each list's name (the JSON key) and status, in the JSON's key order.
    #[must_use]
    pub fn by_list(self) -> [(&'static str, SourceStatus); 3] {
        [
            ("servers", self.servers),
            ("loadbalancers", self.loadbalancers),
            ("amphorae", self.amphorae),
        ]
    }

    /// True when either Octavia list failed: the amphora attribution is
    /// unknown, as opposed to empty.
    #[must_use]
    pub fn octavia_failed(&self) -> bool {
        self.loadbalancers == SourceStatus::Failed || self.amphorae == SourceStatus::Failed
    }
}
