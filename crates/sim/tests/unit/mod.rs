//! No root, no services: the simulator in-process on loopback.

mod sim_api;
mod sim_events;
mod sim_revisions;
mod sim_topology_file;
