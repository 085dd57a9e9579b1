//! `clouds.yaml` + `secure.yaml`: the file format every `OpenStack` tool reads.
//!
//! Unknown keys are ignored on purpose: the file is shared with the
//! `openstack` CLI and SDKs, which define many keys this agent has no use for.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use super::{
    AppCredRef, CloudConfig, ConfigError, Credentials, DomainRef, ProjectRef, TlsVerify, UserRef,
};

/// The candidate files, in priority order (first existing one wins).
#[derive(Debug, Clone)]
pub struct SearchPaths {
    /// Candidate `clouds.yaml` files; only the first existing one is read.
    pub clouds: Vec<PathBuf>,
    /// Candidate `secure.yaml` files (the secrets kept apart); the first
    /// existing one is merged over the `clouds.yaml`, key by key.
    pub secure: Vec<PathBuf>,
}

impl SearchPaths {
    /// `./`, `~/.config/openstack/`, `/etc/openstack/` — the SDK's order.
    #[must_use]
    pub fn standard(cwd: &Path, home: Option<&Path>) -> Self {
        let mut dirs = vec![cwd.to_path_buf()];
        if let Some(home) = home {
            dirs.push(home.join(".config/openstack"));
        }
        dirs.push(PathBuf::from("/etc/openstack"));
        Self::in_dirs(&dirs)
    }

    /// The standard order for this process (cwd and `$HOME`).
    #[must_use]
    pub fn for_process() -> Self {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
        let home = std::env::var_os("HOME").map(PathBuf::from);
        Self::standard(&cwd, home.as_deref())
    }

    /// `clouds.yaml` and `secure.yaml` in each directory, in order.
    #[must_use]
    pub fn in_dirs(dirs: &[PathBuf]) -> Self {
        Self {
            clouds: dirs.iter().map(|d| d.join("clouds.yaml")).collect(),
            secure: dirs.iter().map(|d| d.join("secure.yaml")).collect(),
        }
    }

    /// The `clouds.yaml` that is read: the first candidate that exists.
    #[must_use]
    pub fn first_clouds_file(&self) -> Option<&Path> {
        self.clouds
            .iter()
            .find(|p| p.is_file())
            .map(PathBuf::as_path)
    }

    /// One explicit file; its sibling `secure.yaml` is merged if present.
    #[must_use]
    pub fn explicit(file: PathBuf) -> Self {
        let secure = file.with_file_name("secure.yaml");
        Self {
            clouds: vec![file],
            secure: vec![secure],
        }
    }
}

/// Reads the first existing clouds.yaml, merges the first existing
/// secure.yaml over it, and builds the named entry.
pub fn load_clouds_entry(paths: &SearchPaths, cloud: &str) -> Result<CloudConfig, ConfigError> {
    let Some(clouds_path) = paths.first_clouds_file() else {
        return Err(ConfigError::NoCloudsFile {
            cloud: cloud.to_owned(),
            searched: paths.clouds.clone(),
        });
    };
    let secure = || {
        paths
            .secure
            .iter()
            .find(|p| p.is_file())
            .map(|p| Ok((p.clone(), read_yaml(p)?)))
            .transpose()
    };
    entry_of(clouds_path, read_yaml(clouds_path)?, secure, cloud)
}

/// [`load_clouds_entry`] of texts rather than files: `clouds` read as a
/// `clouds.yaml`, `secure` as its `secure.yaml`, errors naming the paths
/// `clouds.yaml` and `secure.yaml`. No file or environment is read.
///
/// It exists for the fuzz targets (`crates/fuzzing`), which feed it
/// arbitrary text; it is not part of this crate's API.
#[doc(hidden)]
pub fn clouds_entry_from_str(
    clouds: &str,
    secure: Option<&str>,
    cloud: &str,
) -> Result<CloudConfig, ConfigError> {
    let clouds_path = Path::new("clouds.yaml");
    let secure = || {
        secure
            .map(|text| {
                let path = PathBuf::from("secure.yaml");
                let doc = parse_yaml(&path, text)?;
                Ok((path, doc))
            })
            .transpose()
    };
    entry_of(clouds_path, parse_yaml(clouds_path, clouds)?, secure, cloud)
}

/// Builds the entry `cloud` of the clouds.yaml `doc` read from
/// `clouds_path`, with the secure.yaml `secure` gives (when the clouds.yaml
/// is not empty) merged over it.
fn entry_of(
    clouds_path: &Path,
    mut doc: Value,
    secure: impl FnOnce() -> Result<Option<(PathBuf, Value)>, ConfigError>,
    cloud: &str,
) -> Result<CloudConfig, ConfigError> {
    // An empty file (or only comments) is YAML null.
    if doc.is_null() {
        return Err(ConfigError::EmptyFile {
            path: clouds_path.to_path_buf(),
        });
    }
    let mut source_name = clouds_path.display().to_string();
    if let Some((secure_path, secure)) = secure()? {
        // An empty secure.yaml overrides nothing (merging null would
        // replace the whole document).
        if !secure.is_null() {
            merge(&mut doc, secure);
            source_name = format!("{source_name} (+ {})", secure_path.display());
        }
    }
    let clouds = doc
        .get("clouds")
        .and_then(Value::as_object)
        .ok_or_else(|| ConfigError::BadKey {
            source_name: source_name.clone(),
            key: "clouds".into(),
            expected: "a mapping of cloud names to entries".into(),
        })?;
    let Some(entry) = clouds.get(cloud) else {
        return Err(ConfigError::UnknownCloud {
            path: clouds_path.to_path_buf(),
            cloud: cloud.to_owned(),
            known: clouds.keys().cloned().collect(),
        });
    };
    let entry = Entry {
        source: &source_name,
        prefix: format!("clouds.{cloud}"),
        value: entry,
    };
    entry.build()
}

fn read_yaml(path: &Path) -> Result<Value, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
        path: path.to_path_buf(),
        error,
    })?;
    parse_yaml(path, &text)
}

fn parse_yaml(path: &Path, text: &str) -> Result<Value, ConfigError> {
    serde_saphyr::from_str::<Value>(text).map_err(|e| ConfigError::Yaml {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// secure.yaml wins key by key, at any depth (the SDK's semantics).
fn merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(&k) {
                    Some(slot) => merge(slot, v),
                    None => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (slot, v) => *slot = v,
    }
}

struct Entry<'a> {
    source: &'a str,
    prefix: String,
    value: &'a Value,
}

impl Entry<'_> {
    fn bad(&self, key: &str, expected: &str) -> ConfigError {
        ConfigError::BadKey {
            source_name: self.source.to_owned(),
            key: format!("{}.{key}", self.prefix),
            expected: expected.to_owned(),
        }
    }

    fn obj(&self) -> Result<&Map<String, Value>, ConfigError> {
        self.value.as_object().ok_or_else(|| ConfigError::BadKey {
            source_name: self.source.to_owned(),
            key: self.prefix.clone(),
            expected: "a mapping with an `auth` section".into(),
        })
    }

    fn build(&self) -> Result<CloudConfig, ConfigError> {
        let top = self.obj()?;
        let auth = top
            .get("auth")
            .and_then(Value::as_object)
            .ok_or_else(|| self.bad("auth", "a mapping with auth_url and credentials"))?;
        let a = Fields {
            entry: self,
            map: auth,
            prefix: "auth",
        };
        let t = Fields {
            entry: self,
            map: top,
            prefix: "",
        };
        let auth_url = a
            .string("auth_url")?
            .ok_or_else(|| self.bad("auth.auth_url", "a Keystone URL"))?;
        super::check_auth_url(&auth_url)
            .map_err(|expected| self.bad("auth.auth_url", &expected))?;
        let auth_type = t.string("auth_type")?;
        let credentials = credentials(&a, auth_type.as_deref(), self)?;
        let mut cfg = CloudConfig::new(auth_url, credentials);
        cfg.region = t.string("region_name")?;
        if let Some(iface) = t.string("interface")?.or(t.string("endpoint_type")?) {
            cfg.interface = interface(&iface)
                .ok_or_else(|| self.bad("interface", "one of public, internal, admin"))?;
        }
        cfg.tls = tls(&t)?;
        if let Some(v) = top.get("api_timeout") {
            // Refused too: a number too large for a Duration (1e300, where
            // `from_secs_f64` panics) and one that rounds to 0 ns (1e-10).
            cfg.timeout = v
                .as_f64()
                .filter(|s| s.is_finite() && *s > 0.0)
                .and_then(|s| Duration::try_from_secs_f64(s).ok())
                .filter(|d| !d.is_zero())
                .ok_or_else(|| self.bad("api_timeout", "a positive number of seconds"))?;
        }
        Ok(cfg)
    }
}

/// Accepts the SDK's spellings (`internalURL` is the legacy form).
pub(super) fn interface(raw: &str) -> Option<String> {
    let s = raw.strip_suffix("URL").unwrap_or(raw);
    matches!(s, "public" | "internal" | "admin").then(|| s.to_owned())
}

struct Fields<'a, 'b> {
    entry: &'a Entry<'b>,
    map: &'a Map<String, Value>,
    prefix: &'static str,
}

impl Fields<'_, '_> {
    fn key(&self, key: &str) -> String {
        if self.prefix.is_empty() {
            key.to_owned()
        } else {
            format!("{}.{key}", self.prefix)
        }
    }

    fn string(&self, key: &str) -> Result<Option<String>, ConfigError> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.is_empty() => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            // YAML turns unquoted digits into numbers; ids like 12345 are still ids.
            Some(Value::Number(n)) => Ok(Some(n.to_string())),
            Some(_) => Err(self.entry.bad(&self.key(key), "a string")),
        }
    }

    fn boolean(&self, key: &str) -> Result<Option<bool>, ConfigError> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(self.entry.bad(&self.key(key), "true or false")),
        }
    }

    fn domain(&self, id_key: &str, name_key: &str) -> Result<Option<DomainRef>, ConfigError> {
        Ok(match (self.string(id_key)?, self.string(name_key)?) {
            (Some(id), _) => Some(DomainRef::Id(id)),
            (None, Some(name)) => Some(DomainRef::Name(name)),
            (None, None) => None,
        })
    }
}

fn default_domain(f: &Fields<'_, '_>) -> Result<DomainRef, ConfigError> {
    // `domain_id`/`domain_name` are the SDK's fallback for both user and
    // project domains; Keystone's own default domain has the id `default`.
    Ok(f.domain("domain_id", "domain_name")?
        .unwrap_or_else(|| DomainRef::Id("default".into())))
}

fn user(f: &Fields<'_, '_>) -> Result<Option<UserRef>, ConfigError> {
    if let Some(id) = f.string("user_id")? {
        return Ok(Some(UserRef::Id(id)));
    }
    let Some(name) = f.string("username")? else {
        return Ok(None);
    };
    let domain = match f.domain("user_domain_id", "user_domain_name")? {
        Some(d) => d,
        None => default_domain(f)?,
    };
    Ok(Some(UserRef::Name { name, domain }))
}

fn credentials(
    a: &Fields<'_, '_>,
    auth_type: Option<&str>,
    entry: &Entry<'_>,
) -> Result<Credentials, ConfigError> {
    let app_secret = a.string("application_credential_secret")?;
    let kind = match auth_type {
        Some("v3applicationcredential" | "application_credential") => "appcred",
        None if app_secret.is_some() => "appcred",
        None | Some("password" | "v3password") => "password",
        Some(_) => {
            return Err(entry.bad(
                "auth_type",
                "password, v3password or v3applicationcredential",
            ))
        }
    };
    if kind == "appcred" {
        let secret = app_secret.ok_or_else(|| {
            entry.bad(
                "auth.application_credential_secret",
                "the application credential's secret",
            )
        })?;
        let credential = if let Some(id) = a.string("application_credential_id")? {
            AppCredRef::Id(id)
        } else if let Some(name) = a.string("application_credential_name")? {
            let user = user(a)?.ok_or_else(|| {
                entry.bad(
                    "auth.username",
                    "the owner (username or user_id) of a credential named by name",
                )
            })?;
            AppCredRef::Name { name, user }
        } else {
            return Err(entry.bad(
                "auth.application_credential_id",
                "application_credential_id or application_credential_name",
            ));
        };
        return Ok(Credentials::ApplicationCredential { credential, secret });
    }
    let user = user(a)?.ok_or_else(|| entry.bad("auth.username", "username or user_id"))?;
    let password = a
        .string("password")?
        .ok_or_else(|| entry.bad("auth.password", "a password"))?;
    let project = if let Some(id) = a.string("project_id")?.or(a.string("tenant_id")?) {
        ProjectRef::Id(id)
    } else if let Some(name) = a.string("project_name")?.or(a.string("tenant_name")?) {
        let domain = match a.domain("project_domain_id", "project_domain_name")? {
            Some(d) => d,
            None => default_domain(a)?,
        };
        ProjectRef::Name { name, domain }
    } else {
        return Err(entry.bad(
            "auth.project_name",
            "project_name or project_id (the token's scope)",
        ));
    };
    Ok(Credentials::Password {
        user,
        password,
        project,
    })
}

fn tls(t: &Fields<'_, '_>) -> Result<TlsVerify, ConfigError> {
    let verify = t.boolean("verify")?;
    let insecure = t.boolean("insecure")?;
    if verify == Some(false) || insecure == Some(true) {
        return Ok(TlsVerify::Insecure);
    }
    Ok(TlsVerify::Verify {
        ca_file: t.string("cacert")?.map(PathBuf::from),
    })
}
