//! The agent's configuration (DESIGN §13).
//!
//! Defaults ([`keys::KEYS`], the one table), then the YAML file
//! ([`DEFAULT_CONFIG_PATH`] or `--config`), then `LACHESIS_*` environment
//! variables, then flags (`--set key.path=value`, `--log-level`). Every layer
//! is applied to the YAML tree, read into serde structs that reject unknown
//! keys, and validated into [`Config`]; every problem names the
//! key's dotted path (or the variable or flag) and the expected form.
//! `docs/configuration.md` is the reference, checked against the table.
//!
//! ```
//! use lachesis_agent::config::{reload, Config};
//!
//! let config = Config::from_yaml("tunables:\n  scrape_interval: 5s\n").unwrap();
//! assert_eq!(config.tunables.scrape_interval.as_secs(), 5);
//! let outcome = reload(&config, "tunables:\n  scrape_interval: 2s\n").unwrap();
//! assert_eq!(outcome.applied, ["tunables.scrape_interval"]);
//! assert!(outcome.restart_required.is_empty());
//! ```

mod cli;
mod error;
pub mod keys;
mod layers;
mod load;
mod model;
mod raw;
mod reload;
mod render;
mod secret;
mod validate;
mod values;

#[cfg(test)]
mod tests;

pub use cli::{check_config, check_report, AgentArgs, CheckReport};
pub use error::{ConfigError, Issue};
pub use layers::{env_name, ENV_PREFIX};
pub use load::{load, ConfigFile, Flags, Loaded, DEFAULT_CONFIG_PATH};
pub use model::{
    attach_mode_str, ClientCert, Config, DatapathSettings, KafkaSasl, KafkaSettings, KafkaTls,
    ListenSettings, LogFormat, LogLevel, LogSettings, NotificationSettings, OpenStackSettings,
    RabbitMqSettings, SaslMechanism, StateSettings, Tunables,
};
pub use reload::{reload, reload_file, ReloadOutcome, ReloadResult, SharedTunables};
pub use secret::{Secret, REDACTED};
pub use validate::{parse_log_level, KICK_DEBOUNCE_CAP, ROUTE_HOP_LIMIT_MAX, UNRESOLVED_CAP_MAX};
