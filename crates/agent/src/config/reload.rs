//! Hot reload as pure logic (DESIGN §13): a new file is parsed with the same
//! environment and flags as at start; the tunables and `log.level` take
//! effect as one snapshot, restart-only changes are reported (to be warned
//! about), and an invalid file is rejected whole. SIGHUP and the
//! `lachesis_config_reloads_total{result}` counter belong to the daemon.
//!
//! Which keys changed is read off the two configurations as the effective
//! YAML shows them (secrets as fingerprints: a rotated password is a
//! change), key by key of the schema; whether a change applies follows
//! [`super::model::HOT`].

use std::collections::BTreeMap;
use std::sync::{PoisonError, RwLock};

use lachesis_config::Schema;
use serde::Serialize;
use serde_json::Value;

use lachesis_config::layered::{layers, ConfigError, ConfigFile};

use super::model::{is_hot, Config, LogLevel, Tunables, SCHEMA};

/// The `result` label of `lachesis_config_reloads_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReloadResult {
    /// Parsed and applied (restart-only changes, if any, were not).
    Ok,
    /// The file was read but is not a valid configuration; nothing changed.
    Invalid,
    /// The file could not be read; nothing changed.
    Unreadable,
}

impl ReloadResult {
    /// Every outcome, to seed the counter's series at zero.
    pub const ALL: [ReloadResult; 3] = [
        ReloadResult::Ok,
        ReloadResult::Invalid,
        ReloadResult::Unreadable,
    ];

    /// The label value.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            ReloadResult::Ok => "ok",
            ReloadResult::Invalid => "invalid",
            ReloadResult::Unreadable => "unreadable",
        }
    }
}

/// A successful reload.
#[derive(Debug, Clone)]
pub struct ReloadOutcome {
    /// What now runs: the new hot values over the old restart-only ones (so
    /// `/debug/config` shows what is in effect, and the next reload warns
    /// again about a restart-only change still pending).
    pub config: Config,
    /// Hot keys whose value changed.
    pub applied: Vec<&'static str>,
    /// Restart-only keys whose value changed: not applied, to be warned about.
    pub restart_required: Vec<&'static str>,
}

impl ReloadOutcome {
    /// The new tunables snapshot, for [`SharedTunables::set`].
    #[must_use]
    pub fn tunables(&self) -> Tunables {
        self.config.tunables
    }

    /// The new log level.
    #[must_use]
    pub fn log_level(&self) -> LogLevel {
        self.config.log.level
    }
}

/// Parses `new_text` (the re-read file; empty means all defaults) with
/// `old`'s environment and flag layers and compares it with `old`.
pub fn reload(old: &Config, new_text: &str) -> Result<ReloadOutcome, ConfigError> {
    let new = Config::parse(Some(new_text), old.overrides.clone())?;
    let (applied, restart_required) = changed(&SCHEMA, old, &new)
        .into_iter()
        .partition(|path| is_hot(path));
    let mut config = old.clone();
    config.take_hot(&new);
    Ok(ReloadOutcome {
        config,
        applied,
        restart_required,
    })
}

/// The keys of `schema` whose values differ between `old` and `new`, in
/// file order.
pub(crate) fn changed<'s, T: Serialize>(schema: &'s Schema, old: &T, new: &T) -> Vec<&'s str> {
    let (before, after) = (compared(old), compared(new));
    schema
        .keys()
        .iter()
        .map(|k| k.path.as_str())
        .filter(|path| before.get(*path) != after.get(*path))
        .collect()
}

/// Every set key's value as the effective YAML shows it, with each secret
/// as its fingerprint.
pub(crate) fn compared<T: Serialize>(config: &T) -> BTreeMap<String, Value> {
    let tree = lachesis_config::secret::comparing(|| serde_json::to_value(config))
        .expect("plain structs serialize");
    layers::leaves(&tree).into_iter().collect()
}

/// Reads `file` again and reloads; the error carries the counter's label.
pub fn reload_file(
    file: &ConfigFile,
    old: &Config,
) -> Result<ReloadOutcome, (ReloadResult, ConfigError)> {
    let text = file
        .read()
        .map_err(|e| (ReloadResult::Unreadable, e))?
        .unwrap_or_default();
    reload(old, &text).map_err(|e| (ReloadResult::Invalid, file.name_issues(e)))
}

/// The live tunables: one snapshot, swapped whole, read at each use (a
/// reader never sees half of a reload).
#[derive(Debug)]
pub struct SharedTunables(RwLock<Tunables>);

impl SharedTunables {
    /// Starts with `initial`.
    #[must_use]
    pub fn new(initial: Tunables) -> Self {
        SharedTunables(RwLock::new(initial))
    }

    /// The current snapshot.
    #[must_use]
    pub fn get(&self) -> Tunables {
        // A writer cannot panic half-way through a plain copy, so a poisoned
        // lock still holds a whole snapshot.
        *self.0.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Replaces the snapshot.
    pub fn set(&self, next: Tunables) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = next;
    }
}
