//! No root, no services: the CLI and the HTTP listeners against the
//! simulator and fixtures on loopback.

mod config_cmd;
mod http;
mod layout;
mod plan_cloud;
mod plan_cmd;
mod plan_first_run;
mod relay_cmd;
mod sim_cmd;
mod version;
