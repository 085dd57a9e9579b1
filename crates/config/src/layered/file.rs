//! Reading the layers: the file (a default path or `--config`), the
//! process environment and the flags. The only I/O of a configuration.

use std::ffi::OsString;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::error::{ConfigError, Issue};
use super::layers::{self, Layout, Override, FILE_KEY};
use crate::Schema;

/// The configuration file, and whether the operator named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigFile {
    path: PathBuf,
    explicit: bool,
}

impl ConfigFile {
    /// `--config`'s value, or `default`.
    #[must_use]
    pub fn new(explicit: Option<PathBuf>, default: &str) -> Self {
        match explicit {
            Some(path) => ConfigFile {
                path,
                explicit: true,
            },
            None => ConfigFile::implicit(PathBuf::from(default)),
        }
    }

    /// A file at a default location: absent means all defaults.
    #[must_use]
    pub fn implicit(path: PathBuf) -> Self {
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
    #[must_use]
    pub fn name_issues(&self, mut e: ConfigError) -> ConfigError {
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

/// What [`load`] read: the configuration, the layers over the file, and
/// whether the file existed.
#[derive(Debug, Clone)]
pub struct Layered<T> {
    /// The configuration.
    pub config: T,
    /// The environment and flag values set over the file.
    pub overrides: Vec<Override>,
    /// Whether the file existed (`false`: defaults, the default path was absent).
    pub file_found: bool,
}

/// File, then environment (`env` is the process's, or a test's), then
/// flags, read by `build` (the tree → the configuration, its rules
/// included). Every problem of every layer is reported.
pub fn load<T, I>(
    layout: &Layout,
    file: &ConfigFile,
    env: I,
    flags: &Flags,
    build: impl FnOnce(Value) -> Result<T, Vec<Issue>>,
) -> Result<Layered<T>, ConfigError>
where
    I: IntoIterator<Item = (OsString, OsString)>,
{
    let (mut overrides, mut issues) = layers::from_env(layout, env);
    let (flag_overrides, flag_issues) =
        layers::from_flags(layout, &flags.set, flags.log_level.as_deref());
    overrides.extend(flag_overrides);
    issues.extend(flag_issues);
    let text = match file.read() {
        Ok(text) => text,
        Err(e) => {
            issues.extend(e.issues);
            return Err(issues.into());
        }
    };
    match parse(layout.schema, text.as_deref(), &overrides, build) {
        Ok(config) if issues.is_empty() => Ok(Layered {
            config,
            overrides,
            file_found: text.is_some(),
        }),
        Ok(_) => Err(issues.into()),
        Err(e) => {
            issues.extend(file.name_issues(e).issues);
            Err(issues.into())
        }
    }
}

/// Defaults, `text`, then `overrides`, read by `build`. Problems with a
/// value that an override set name the variable or flag that set it.
pub fn parse<T>(
    schema: &Schema,
    text: Option<&str>,
    overrides: &[Override],
    build: impl FnOnce(Value) -> Result<T, Vec<Issue>>,
) -> Result<T, ConfigError> {
    layers::tree(schema, text, overrides)
        .and_then(build)
        .map_err(|mut issues| {
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
            issues.into()
        })
}
