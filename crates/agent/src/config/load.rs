//! Reading the layers: the file (default path or `--config`), the process
//! environment and the flags. The only I/O of the configuration.

use std::ffi::OsString;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use super::error::{ConfigError, Issue};
use super::layers::{self, Override, FILE_KEY};
use super::model::Config;
use super::validate;

/// Where the file is looked for when `--config` is not given.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/lachesis/lachesis.yaml";

/// The configuration file, and whether the operator named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigFile {
    path: PathBuf,
    explicit: bool,
}

impl ConfigFile {
    /// `--config`'s value, or the default path.
    #[must_use]
    pub fn new(explicit: Option<PathBuf>) -> Self {
        match explicit {
            Some(path) => ConfigFile {
                path,
                explicit: true,
            },
            None => ConfigFile {
                path: PathBuf::from(DEFAULT_CONFIG_PATH),
                explicit: false,
            },
        }
    }

    /// A file at a default location other than [`DEFAULT_CONFIG_PATH`]
    /// (tests).
    #[cfg(test)]
    pub(crate) fn default_at(path: PathBuf) -> Self {
        ConfigFile {
            path,
            explicit: false,
        }
    }

    /// The file's path.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's text; `None` when the default file does not exist (all
    /// defaults). A missing file named by `--config` is an error: the
    /// operator meant a file, and running on defaults would hide the typo.
    pub fn read(&self) -> Result<Option<String>, ConfigError> {
        match std::fs::read_to_string(&self.path) {
            Ok(text) => Ok(Some(text)),
            Err(e) if e.kind() == ErrorKind::NotFound && !self.explicit => Ok(None),
            Err(e) => Err(vec![Issue::new(
                self.path.display().to_string(),
                format!("cannot read the configuration file: {e}"),
            )]
            .into()),
        }
    }

    /// Names this file in problems with the file as a whole.
    pub(crate) fn name_issues(&self, mut e: ConfigError) -> ConfigError {
        for issue in &mut e.issues {
            if issue.key == FILE_KEY {
                issue.key = self.path.display().to_string();
            }
        }
        e
    }
}

/// The flag layer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Flags {
    /// `--set key.path=value`, in order.
    pub set: Vec<String>,
    /// `--log-level`.
    pub log_level: Option<String>,
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
    let (mut overrides, mut issues) = layers::from_env(env);
    let (flag_overrides, flag_issues) = layers::from_flags(&flags.set, flags.log_level.as_deref());
    overrides.extend(flag_overrides);
    issues.extend(flag_issues);
    let text = match file.read() {
        Ok(text) => text,
        Err(e) => {
            issues.extend(e.issues);
            return Err(issues.into());
        }
    };
    match Config::parse(text.as_deref(), overrides) {
        Ok(config) if issues.is_empty() => Ok(Loaded {
            config,
            file_found: text.is_some(),
            file,
        }),
        Ok(_) => Err(issues.into()),
        Err(e) => {
            issues.extend(file.name_issues(e).issues);
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
        let built = layers::tree(text, &overrides).and_then(validate::config);
        match built {
            Ok(mut config) => {
                config.overrides = overrides;
                Ok(config)
            }
            Err(mut issues) => {
                for issue in &mut issues {
                    let setter = overrides.iter().rev().find(|o| {
                        issue.key == o.key.path
                            || issue
                                .key
                                .strip_prefix(o.key.path.as_str())
                                .is_some_and(|r| r.starts_with('['))
                    });
                    if let Some(o) = setter {
                        issue.message = format!("{} (set by {})", issue.message, o.origin);
                    }
                }
                Err(issues.into())
            }
        }
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
