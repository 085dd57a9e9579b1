//! No root, no services.

mod client_sim;
mod clouds_yaml;
mod fixtures;
