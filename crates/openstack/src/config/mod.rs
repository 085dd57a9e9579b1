//! Where a cloud's credentials and endpoints come from (DESIGN §5): a
//! `clouds.yaml` entry (with `secure.yaml` merged over it) or `OS_*`
//! environment variables — the conventions operators already use.

mod clouds;
mod env;
mod section;

use std::path::PathBuf;
use std::time::Duration;

#[doc(hidden)]
pub use clouds::clouds_entry_from_str;
pub use clouds::{load_clouds_entry, SearchPaths};
pub use env::from_env;
pub use section::OpenStackSettings;

/// `a, b, c`, or `none` for nothing: a list in a message, for people.
fn listed(items: impl Iterator<Item = String>) -> String {
    let all: Vec<String> = items.collect();
    if all.is_empty() {
        "none".to_owned()
    } else {
        all.join(", ")
    }
}

/// Errors reading cloud configuration; each names where and what was expected.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A cloud was named (`--cloud`, the agent config or `OS_CLOUD`) but no
    /// candidate `clouds.yaml` exists.
    #[error(
        "no clouds.yaml found (searched {}); cloud {cloud:?} cannot be resolved: expected a clouds.yaml at one of those paths (docs/openstack.md)",
        listed(searched.iter().map(|p| p.display().to_string()))
    )]
    NoCloudsFile {
        /// The cloud asked for.
        cloud: String,
        /// Every candidate path, in search order.
        searched: Vec<PathBuf>,
    },
    /// A `clouds.yaml` or `secure.yaml` exists but cannot be read
    /// (permissions, I/O error, not UTF-8).
    #[error("{path}: cannot read: {error}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        error: std::io::Error,
    },
    /// A `clouds.yaml` or `secure.yaml` is not YAML.
    #[error("{path}: not valid YAML: {message}")]
    Yaml {
        /// The file.
        path: PathBuf,
        /// The YAML parser's message, with line and column.
        message: String,
    },
    /// The `clouds.yaml` found first is empty or only comments (YAML
    /// `null`); a later candidate is not tried.
    #[error("{path} is empty: expected a `clouds:` mapping with one entry per cloud (format: docs/openstack.md)")]
    EmptyFile {
        /// The file.
        path: PathBuf,
    },
    /// The cloud is not a key under `clouds:` in the file found.
    #[error(
        "{path}: cloud {cloud:?} not found under `clouds` (it defines {})",
        listed(known.iter().cloned())
    )]
    UnknownCloud {
        /// The `clouds.yaml` read.
        path: PathBuf,
        /// The cloud asked for.
        cloud: String,
        /// The clouds the file does define.
        known: Vec<String>,
    },
    /// A setting is missing, of the wrong type or an unknown value: no
    /// credentials for the chosen `auth_type`, an `auth_url` that is not an
    /// http(s) URL, an interface other than public/internal/admin, a
    /// timeout that is not a positive number of seconds, …
    #[error("{source_name}: key `{key}`: expected {expected}")]
    BadKey {
        /// Where the setting came from: the `clouds.yaml` path (with
        /// `(+ <secure.yaml>)` when one was merged over it), or
        /// `environment`.
        source_name: String,
        /// The dotted key (`clouds.prod.auth.password`) or the variable
        /// (`OS_PASSWORD`).
        key: String,
        /// What would have been accepted.
        expected: String,
    },
    /// No cloud was named and `OS_AUTH_URL` is unset: nothing says which
    /// cloud to talk to.
    #[error("no cloud selected: pass --cloud NAME, set OS_CLOUD, or set OS_AUTH_URL and the other OS_* variables")]
    NothingConfigured,
}

/// Keystone v3 identity used to obtain a token.
#[derive(Clone, PartialEq, Eq)]
pub enum Credentials {
    /// `password` method, scoped to a project.
    Password {
        /// Who authenticates.
        user: UserRef,
        /// The user's password (redacted in `Debug`).
        password: String,
        /// The project the token is scoped to. The user's roles in it decide
        /// what the lists return: other projects' ports, servers and load
        /// balancers only with an admin role.
        project: ProjectRef,
    },
    /// `application_credential` method; the credential carries its own scope.
    ApplicationCredential {
        /// Which credential.
        credential: AppCredRef,
        /// The secret shown once when the credential was created (redacted
        /// in `Debug`).
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
    /// The domain's id; Keystone's built-in domain has the id `default`.
    Id(String),
    /// The domain's name (the built-in one is `Default`).
    Name(String),
}

/// A user: by id (globally unique) or by name within a domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UserRef {
    /// The user's id.
    Id(String),
    /// A user name, which Keystone resolves only within its domain.
    Name {
        /// The user name.
        name: String,
        /// The domain that owns the user.
        domain: DomainRef,
    },
}

/// A project scope: by id or by name within a domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProjectRef {
    /// The project's id.
    Id(String),
    /// A project name, unique only within its domain.
    Name {
        /// The project name.
        name: String,
        /// The domain that owns the project.
        domain: DomainRef,
    },
}

/// An application credential: by id, or by name owned by a user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppCredRef {
    /// The credential's id.
    Id(String),
    /// A credential name, unique only among its owner's credentials.
    Name {
        /// The credential's name.
        name: String,
        /// The user who created (owns) the credential.
        user: UserRef,
    },
}

/// TLS verification. On unless explicitly disabled (and then logged loudly).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsVerify {
    /// System roots, plus this PEM CA file when given.
    Verify {
        /// A PEM bundle (`cacert`, `OS_CACERT`) trusted in addition to the
        /// system store, for a cloud signed by a private CA.
        ca_file: Option<PathBuf>,
    },
    /// No certificate verification at all.
    Insecure,
}

/// Everything the client needs to talk to one cloud.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloudConfig {
    /// Keystone URL as configured (with or without a trailing `/v3`).
    pub auth_url: String,
    /// The identity a token is requested for.
    pub credentials: Credentials,
    /// Catalog region (matched against `region_id` or `region`).
    pub region: Option<String>,
    /// Catalog interface: `internal` unless configured.
    pub interface: String,
    /// Certificate checking for every call, Keystone's included.
    pub tls: TlsVerify,
    /// Per-request timeout.
    pub timeout: Duration,
    /// `limit` sent on every list call; `None` lets the service choose.
    pub page_size: Option<u32>,
    /// A token is renewed this long before its `expires_at`.
    pub token_renew_margin: Duration,
}

/// The catalog interface unless one is configured: `internal`, the
/// endpoints a compute node reaches on the management network (DESIGN §5).
pub const DEFAULT_INTERFACE: &str = "internal";
/// The per-request timeout unless one is configured: 30 s, from connecting
/// to the last byte of the body, for one page (not a whole list).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long before `expires_at` a cached token is replaced: 2 minutes, so a
/// sync that starts with it does not see it expire half-way.
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

/// [`origin`] for this process.
#[must_use]
pub fn origin_for_process(selection: &Selection) -> String {
    origin(selection, &SearchPaths::for_process(), &|k| {
        std::env::var(k).ok()
    })
}

/// Where [`resolve`] takes the cloud from, in the words an operator needs
/// to find what to fix: `cloud "prod" in /etc/openstack/clouds.yaml`, or
/// `the OS_* environment variables (OS_AUTH_URL …)`.
#[must_use]
pub fn origin(
    selection: &Selection,
    paths: &SearchPaths,
    env: &dyn Fn(&str) -> Option<String>,
) -> String {
    if let Some((name, paths)) = named_cloud(selection, paths, env) {
        return match paths.first_clouds_file() {
            Some(file) => format!("cloud {name:?} in {}", file.display()),
            None => format!("cloud {name:?} (no clouds.yaml found)"),
        };
    }
    match env("OS_AUTH_URL") {
        Some(url) => format!("the OS_* environment variables (OS_AUTH_URL {url})"),
        None => "no cloud (openstack.cloud, OS_CLOUD and OS_AUTH_URL are all unset)".to_owned(),
    }
}

/// The cloud named by the selection or `OS_CLOUD`, and the clouds.yaml
/// candidates to read it from; `None` when no cloud is named.
fn named_cloud(
    selection: &Selection,
    paths: &SearchPaths,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<(String, SearchPaths)> {
    let name = selection
        .cloud
        .clone()
        .or_else(|| env("OS_CLOUD").filter(|s| !s.is_empty()))?;
    let paths = match &selection.clouds_file {
        Some(file) => SearchPaths::explicit(file.clone()),
        None => paths.clone(),
    };
    Some((name, paths))
}

/// Resolves a cloud the way operators expect: an explicit or `OS_CLOUD` name
/// reads clouds.yaml; otherwise `OS_AUTH_URL` and friends are used.
pub fn resolve(
    selection: &Selection,
    paths: &SearchPaths,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<CloudConfig, ConfigError> {
    if let Some((name, paths)) = named_cloud(selection, paths, env) {
        return load_clouds_entry(&paths, &name);
    }
    if env("OS_AUTH_URL").is_some() {
        return from_env(env);
    }
    Err(ConfigError::NothingConfigured)
}
