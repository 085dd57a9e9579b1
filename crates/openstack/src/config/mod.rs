//! Where a cloud's credentials and endpoints come from (DESIGN §5): a
//! `clouds.yaml` entry (with `secure.yaml` merged over it) or `OS_*`
//! environment variables — the conventions operators already use.

mod clouds;
mod env;

use std::path::PathBuf;
use std::time::Duration;

pub use clouds::{load_clouds_entry, SearchPaths};
pub use env::from_env;

/// Errors reading cloud configuration; each names where and what was expected.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("no clouds.yaml found (searched {searched:?}); cloud {cloud:?} cannot be resolved")]
    NoCloudsFile {
        cloud: String,
        searched: Vec<PathBuf>,
    },
    #[error("{path}: cannot read: {error}")]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{path}: not valid YAML: {message}")]
    Yaml { path: PathBuf, message: String },
    #[error("{path} is empty: expected a `clouds:` mapping with one entry per cloud (format: docs/openstack.md)")]
    EmptyFile { path: PathBuf },
    #[error("{path}: cloud {cloud:?} not found under `clouds` (known: {known:?})")]
    UnknownCloud {
        path: PathBuf,
        cloud: String,
        known: Vec<String>,
    },
    #[error("{source_name}: key `{key}`: expected {expected}")]
    BadKey {
        source_name: String,
        key: String,
        expected: String,
    },
    #[error("no cloud selected: pass --cloud NAME, set OS_CLOUD, or set OS_AUTH_URL and the other OS_* variables")]
    NothingConfigured,
}

/// Keystone v3 identity used to obtain a token.
#[derive(Clone, PartialEq, Eq)]
pub enum Credentials {
    /// `password` method, scoped to a project.
    Password {
        user: UserRef,
        password: String,
        project: ProjectRef,
    },
    /// `application_credential` method; the credential carries its own scope.
    ApplicationCredential {
        credential: AppCredRef,
        secret: String,
    },
}

// Secrets never reach logs or `/debug/config` through a derived Debug.
impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Password { user, project, .. } => f
                .debug_struct("Password")
                .field("user", user)
                .field("password", &"<redacted>")
                .field("project", project)
                .finish(),
            Self::ApplicationCredential { credential, .. } => f
                .debug_struct("ApplicationCredential")
                .field("credential", credential)
                .field("secret", &"<redacted>")
                .finish(),
        }
    }
}

/// A Keystone domain, by id or by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DomainRef {
    Id(String),
    Name(String),
}

/// A user: by id (globally unique) or by name within a domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UserRef {
    Id(String),
    Name { name: String, domain: DomainRef },
}

/// A project scope: by id or by name within a domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProjectRef {
    Id(String),
    Name { name: String, domain: DomainRef },
}

/// An application credential: by id, or by name owned by a user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppCredRef {
    Id(String),
    Name { name: String, user: UserRef },
}

/// TLS verification. On unless explicitly disabled (and then logged loudly).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsVerify {
    /// System roots, plus this PEM CA file when given.
    Verify { ca_file: Option<PathBuf> },
    /// No certificate verification at all.
    Insecure,
}

/// Everything the client needs to talk to one cloud.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloudConfig {
    /// Keystone URL as configured (with or without a trailing `/v3`).
    pub auth_url: String,
    pub credentials: Credentials,
    /// Catalog region (matched against `region_id` or `region`).
    pub region: Option<String>,
    /// Catalog interface: `internal` unless configured.
    pub interface: String,
    pub tls: TlsVerify,
    /// Per-request timeout.
    pub timeout: Duration,
    /// `limit` sent on every list call; `None` lets the service choose.
    pub page_size: Option<u32>,
    /// A token is renewed this long before its `expires_at`.
    pub token_renew_margin: Duration,
}

/// Defaults shared by every way of building a [`CloudConfig`].
pub const DEFAULT_INTERFACE: &str = "internal";
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
pub const DEFAULT_RENEW_MARGIN: Duration = Duration::from_mins(2);

impl CloudConfig {
    /// A configuration with the defaults for everything but the identity.
    #[must_use]
    pub fn new(auth_url: impl Into<String>, credentials: Credentials) -> Self {
        Self {
            auth_url: auth_url.into(),
            credentials,
            region: None,
            interface: DEFAULT_INTERFACE.to_owned(),
            tls: TlsVerify::Verify { ca_file: None },
            timeout: DEFAULT_TIMEOUT,
            page_size: None,
            token_renew_margin: DEFAULT_RENEW_MARGIN,
        }
    }
}

/// The form `auth_url` must have, for error messages.
const AUTH_URL_FORM: &str =
    "an http:// or https:// URL of Keystone, e.g. https://keystone.example.com:5000/v3";

/// Checks an `auth_url` when the configuration is loaded, so a typo is
/// reported against its key rather than as a failed request later. The
/// error is the `expected` text of [`ConfigError::BadKey`].
pub(crate) fn check_auth_url(raw: &str) -> Result<(), String> {
    let ok = url::Url::parse(raw)
        .is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some());
    if ok {
        Ok(())
    } else {
        Err(format!("{AUTH_URL_FORM} (found {raw:?})"))
    }
}

/// How the caller wants the cloud chosen.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// `--cloud` or the agent config's `openstack.cloud`; wins over `OS_CLOUD`.
    pub cloud: Option<String>,
    /// An explicit clouds.yaml path (agent config `openstack.clouds_file`).
    pub clouds_file: Option<PathBuf>,
}

/// [`resolve`] for this process: its environment, cwd and `$HOME` (what
/// `lachesis plan --cloud` and the agent use).
pub fn resolve_for_process(selection: &Selection) -> Result<CloudConfig, ConfigError> {
    resolve(selection, &SearchPaths::for_process(), &|k| {
        std::env::var(k).ok()
    })
}

/// Resolves a cloud the way operators expect: an explicit or `OS_CLOUD` name
/// reads clouds.yaml; otherwise `OS_AUTH_URL` and friends are used.
pub fn resolve(
    selection: &Selection,
    paths: &SearchPaths,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<CloudConfig, ConfigError> {
    let name = selection
        .cloud
        .clone()
        .or_else(|| env("OS_CLOUD").filter(|s| !s.is_empty()));
    if let Some(name) = name {
        let paths = match &selection.clouds_file {
            Some(file) => SearchPaths::explicit(file.clone()),
            None => paths.clone(),
        };
        return load_clouds_entry(&paths, &name);
    }
    if env("OS_AUTH_URL").is_some() {
        return from_env(env);
    }
    Err(ConfigError::NothingConfigured)
}
