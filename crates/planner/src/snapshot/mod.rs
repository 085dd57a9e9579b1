//! The snapshot model and its parser.

mod live;
mod model;
mod parse;
mod report;

pub use live::LiveSnapshot;
pub use model::{
    AddressPair, Amphora, FixedIp, FloatingIp, LoadBalancer, Network, Port, Project, Route, Router,
    Server, Snapshot, Subnet,
};
pub use parse::{parse_snapshot, ParseError, SnapshotParser};
pub use report::{ParseReport, SkipReason, Skipped};
