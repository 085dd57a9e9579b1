//! No root, no services.

mod catalogue;
mod concurrency;
mod defects;
mod exposition;
mod model_defects;
mod monotonicity;
mod paths;
mod state_file;
mod sub_entries;
