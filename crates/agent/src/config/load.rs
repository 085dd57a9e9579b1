//! Reading the agent's layers (`lachesis_config::layered`): the file
//! ([`DEFAULT_CONFIG_PATH`] or `--config`), the process environment and
//! the flags.

use std::ffi::OsString;

use lachesis_config::layered::{self, ConfigError, ConfigFile, Flags, Issue, Override};

use super::model::{Config, LAYOUT, SCHEMA};
use super::validate;

/// Where the file is looked for when `--config` is not given.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/lachesis/lachesis.yaml";

/// `--config`'s value, or [`DEFAULT_CONFIG_PATH`].
#[must_use]
pub fn config_file(explicit: Option<std::path::PathBuf>) -> ConfigFile {
    ConfigFile::new(explicit, DEFAULT_CONFIG_PATH)
}

/// A loaded configuration and where it came from.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The configuration.
    pub config: Config,
    /// The file a reload reads again.
    pub file: ConfigFile,
    /// Whether the file existed (`false`: defaults, the default path was absent).
    pub file_found: bool,
}

/// File, then environment (`env` is the process's, or a test's), then
/// flags. Every problem of every layer is reported.
pub fn load<I>(file: ConfigFile, env: I, flags: &Flags) -> Result<Loaded, ConfigError>
where
    I: IntoIterator<Item = (OsString, OsString)>,
{
    let read = layered::load(&LAYOUT, &file, env, flags, validate::config)?;
    let mut config = read.config;
    config.overrides = read.overrides;
    Ok(Loaded {
        config,
        file,
        file_found: read.file_found,
    })
}

/// [`load`] with the file's text given instead of read (`None`: no file),
/// so the layers are read without I/O: for the fuzz targets
/// (`crates/fuzzing`), not for the daemon. Problems with the file as a
/// whole keep the key `(file)` instead of the file's path.
#[doc(hidden)]
pub fn load_text<I>(text: Option<&str>, env: I, flags: &Flags) -> Result<Config, ConfigError>
where
    I: IntoIterator<Item = (OsString, OsString)>,
{
    let (mut overrides, mut issues) = layered::layers::from_env(&LAYOUT, env);
    let (flag_overrides, flag_issues) =
        layered::layers::from_flags(&LAYOUT, &flags.set, flags.log_level.as_deref());
    overrides.extend(flag_overrides);
    issues.extend(flag_issues);
    match Config::parse(text, overrides) {
        Ok(config) if issues.is_empty() => Ok(config),
        Ok(_) => Err(issues.into()),
        Err(e) => {
            issues.extend(e.issues);
            Err(issues.into())
        }
    }
}

impl Config {
    /// A configuration from YAML text alone (no environment, no flags).
    pub fn from_yaml(text: &str) -> Result<Config, ConfigError> {
        Config::parse(Some(text), Vec::new())
    }

    /// Defaults, `text`, then `overrides`. Problems with a value that an
    /// override set name the variable or flag that set it.
    pub(crate) fn parse(
        text: Option<&str>,
        overrides: Vec<Override>,
    ) -> Result<Config, ConfigError> {
        let mut config = layered::parse(&SCHEMA, text, &overrides, validate::config)?;
        config.overrides = overrides;
        Ok(config)
    }

    /// Allowed but questionable settings, for the log and `--check-config`.
    #[must_use]
    pub fn warnings(&self) -> Vec<Issue> {
        validate::warnings(self)
    }

    /// The keys the environment and flags set, with the variable or flag.
    #[must_use]
    pub fn overridden(&self) -> Vec<(&'static str, &str)> {
        self.overrides
            .iter()
            .map(|o| (o.key.path.as_str(), o.origin.as_str()))
            .collect()
    }
}
