//! The `OpenStack` API client: Keystone auth, catalog, paging, one sync.

pub mod auth;
mod bodies_io;
pub mod catalog;
mod metrics;
pub mod paginate;
mod session;
mod sync;
mod watch;

pub use bodies_io::{load_bodies, save_bodies, LoadError, SaveError};
pub use metrics::ApiMetrics;
pub use session::{ApiError, Session, Traffic};
pub use sync::{fetch, Client, PageSink, ServiceStatus, Services, SyncError, SyncResult};
pub use watch::Revisions;
