//! No root, no services.

mod harness;
mod relay_sim;
