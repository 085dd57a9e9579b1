//! SIGHUP (DESIGN §13, docs/operations.md "Reload"): the file re-read with
//! the same environment and flags, the tunables swapped in whole, or
//! nothing changed when the file is unreadable or invalid; then
//! `listen.web_config_file` re-read on its own terms.

use std::sync::{Arc, PoisonError};

use tracing::{info, warn};

use super::debug::LiveConfig;
use super::metrics::DaemonMetrics;
use crate::config::{reload_file, Config, ConfigFile, ReloadResult, SharedTunables};
use crate::http::LogLevelControl;

/// The configuration in effect, and what a SIGHUP reads and swaps.
pub(super) struct Reloader {
    pub(super) current: Config,
    pub(super) file: ConfigFile,
    pub(super) tunables: Arc<SharedTunables>,
    pub(super) metrics: DaemonMetrics,
    pub(super) log: Arc<dyn LogLevelControl>,
    /// What `/debug/config` shows.
    pub(super) live: LiveConfig,
    /// `listen.web_config_file`, re-read by the same SIGHUP (its own
    /// counter; a bad web file does not reject the tunables, nor the
    /// reverse).
    pub(super) web: Arc<lachesis_listen::Web>,
}

impl Reloader {
    /// One SIGHUP: the file re-read, the tunables swapped whole, or nothing
    /// changed; the debug listener shows the configuration now in effect.
    pub(super) fn reload(&mut self) {
        match reload_file(&self.file, &self.current) {
            Ok(outcome) => {
                self.tunables.set(outcome.tunables());
                self.metrics.reload(ReloadResult::Ok);
                if !outcome.restart_required.is_empty() {
                    warn!(keys = ?outcome.restart_required, "changed keys take effect only at restart");
                }
                if outcome.log_level() != self.current.log.level {
                    if let Err(e) = self.log.set_level(outcome.log_level()) {
                        warn!(error = e, "log.level not applied");
                    }
                }
                info!(applied = ?outcome.applied, "configuration reloaded");
                self.current = outcome.config;
            }
            Err((result, e)) => {
                self.metrics.reload(result);
                warn!(result = result.label(), error = %e, "configuration reload rejected; the old tunables stay");
            }
        }
        *self.live.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(self.current.clone());
        // Logged and counted by the web configuration itself.
        let _ = self.web.reload();
    }
}
