//! What the link watcher knows about each matching tap, published after
//! every change for the debug pages (`/debug/ui/node`): a snapshot they
//! read without waiting for the watcher's task.

use std::sync::{Arc, PoisonError, RwLock};
use std::time::SystemTime;

use lachesis_abi::Mac;

/// One matching interface as the watcher tracks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TapStatus {
    /// Interface index.
    pub index: u32,
    /// Interface name.
    pub name: String,
    /// Whether both programs are on it.
    pub state: TapState,
    /// When it entered that state.
    pub since: SystemTime,
    /// The port MAC the kernel holds for it (`tap_ports`, written before
    /// the attach): the binding it names is the port behind the tap.
    /// `None`: no binding's port names it (Nova's rule), or the write
    /// was refused (retried at each presence check).
    pub port_mac: Option<Mac>,
    /// Times a presence check found it without our programs, unannounced
    /// by any event, and re-attached them.
    pub heals: u64,
    /// When the last of those heals happened.
    pub last_heal: Option<SystemTime>,
}

/// Whether a matching interface carries our programs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TapState {
    /// Both programs attached.
    Attached,
    /// The last attach failed (the kernel's words); the next presence
    /// check retries.
    Failed(String),
}

/// Every matching tap the watcher tracks, and its last presence check.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TapBoard {
    /// By interface index.
    pub taps: Vec<TapStatus>,
    /// When the last presence check listed the interfaces.
    pub last_check: Option<SystemTime>,
}

/// The watcher's published [`TapBoard`]; clones share it.
#[derive(Debug, Clone, Default)]
pub struct TapBoardHandle(Arc<RwLock<Arc<TapBoard>>>);

impl TapBoardHandle {
    /// The board as the watcher last published it.
    #[must_use]
    pub fn get(&self) -> Arc<TapBoard> {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(super) fn publish(&self, board: TapBoard) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(board);
    }
}
