//! The kernel-writer seam: the metadata maps the reconciler (and the ghost
//! sweeper) write (DESIGN §4.1).

use std::error::Error as StdError;
use std::net::IpAddr;
use std::sync::Arc;

use lachesis_abi::{EndpointValue, Mac, Prefix, Zone};
use lachesis_datapath::Datapath;

/// One metadata-map write, as the writers name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    /// A trie row (tenant id 0: global).
    UpsertZone {
        /// Interned tenant id.
        tenant_id: u32,
        /// The row's prefix.
        prefix: Prefix,
        /// Its zone.
        zone: Zone,
    },
    /// A trie row removed.
    DeleteZone {
        /// Interned tenant id.
        tenant_id: u32,
        /// The row's prefix.
        prefix: Prefix,
    },
    /// A binding written.
    UpsertEndpoint {
        /// The VM MAC.
        mac: Mac,
        /// Tenant id and flags.
        value: EndpointValue,
    },
    /// A binding removed (the ghost sweep's, never the reconciler's).
    DeleteEndpoint {
        /// The VM MAC.
        mac: Mac,
    },
    /// An amphora data-port address (insert-only).
    InsertAmphora {
        /// The load balancer owner's tenant id.
        tenant_id: u32,
        /// The address.
        addr: IpAddr,
    },
}

/// A kernel map write failed.
#[derive(Debug, thiserror::Error)]
#[error("kernel write {write:?} failed")]
pub struct WriteError {
    /// What was being written.
    pub write: Write,
    /// Why it failed.
    #[source]
    pub source: Box<dyn StdError + Send + Sync>,
}

/// Writes the metadata maps. Consumer-owned: the real one is
/// [`lachesis_datapath::Datapath`]; tests record the calls. Every write is
/// idempotent (an upsert of what is there, a delete of what is not, succeed),
/// which is what lets a failed pass be retried whole.
pub trait KernelWriter: Send + Sync {
    /// Applies one write.
    fn write(&self, write: Write) -> Result<(), WriteError>;
}

impl<T: KernelWriter + ?Sized> KernelWriter for Arc<T> {
    fn write(&self, write: Write) -> Result<(), WriteError> {
        (**self).write(write)
    }
}

impl KernelWriter for Datapath {
    fn write(&self, write: Write) -> Result<(), WriteError> {
        let done = match write {
            Write::UpsertZone {
                tenant_id,
                prefix,
                zone,
            } => self.upsert_zone(tenant_id, prefix, zone),
            Write::DeleteZone { tenant_id, prefix } => {
                self.delete_zone(tenant_id, prefix).map(drop)
            }
            Write::UpsertEndpoint { mac, value } => self.upsert_endpoint(mac, value),
            Write::DeleteEndpoint { mac } => self.delete_endpoint(mac).map(drop),
            Write::InsertAmphora { tenant_id, addr } => self.upsert_amphora(tenant_id, addr),
        };
        done.map_err(|e| WriteError {
            write,
            source: Box::new(e),
        })
    }
}
