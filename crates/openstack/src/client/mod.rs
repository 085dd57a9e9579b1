//! The `OpenStack` API client: Keystone auth, catalog, paging, one sync.

pub mod auth;
pub mod catalog;
mod metrics;
pub mod paginate;
mod session;
mod sync;

pub use metrics::{ApiErrorLabels, ApiMetrics};
pub use session::{ApiError, ListCall, Session};
pub use sync::{fetch, save_bodies, Client, SaveError, ServiceStatus, SyncError, SyncResult};
