//! The agent's configuration (DESIGN §13).
//!
//! Defaults (each field's own, in [`model`] and the datapath's and
//! notification consumers' sections), then the YAML file
//! ([`DEFAULT_CONFIG_PATH`] or `--config`), then `LACHESIS_*` environment
//! variables, then flags (`--set key.path=value`, `--log-level`). Every layer
//! is applied to the YAML tree, read into typed sections that refuse
//! unknown keys, then checked by the rules that involve several keys; every
//! problem names the key's dotted path (and the variable or flag that set
//! it) and the expected form. The keys themselves are read off the types
//! (`lachesis_config::Schema`), and `docs/configuration.md` is checked
//! against them.
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
mod load;
mod model;
mod reload;
mod validate;

#[cfg(test)]
mod tests;

pub use cli::{check_config, check_report, AgentArgs, CheckReport};
pub use lachesis_config::layered::{env_name, ENV_PREFIX};
pub use lachesis_config::layered::{ConfigError, ConfigFile, Flags, Issue};
pub use lachesis_config::{Secret, REDACTED};
pub use lachesis_datapath::DatapathConfig;
pub use lachesis_notify::{KafkaConfig, KafkaTls, RabbitMqConfig, Sasl, SaslMechanism};
#[doc(hidden)]
pub use load::load_text;
pub use load::{config_file, load, Loaded, DEFAULT_CONFIG_PATH};
pub use model::{
    parse_log_level, Config, ListenSettings, LogFormat, LogLevel, LogSettings, MetadataSettings,
    MetadataSource, NotificationSettings, OpenStackSettings, StateSettings, Tunables,
    DEFAULT_LOOKBACK, HOT, ROUTE_HOP_LIMIT_MAX, UNRESOLVED_CAP_MAX,
};
pub use reload::{reload, reload_file, ReloadOutcome, ReloadResult, SharedTunables};
pub use validate::{KICK_DEBOUNCE_CAP, RELAY_KICK_DEBOUNCE};
