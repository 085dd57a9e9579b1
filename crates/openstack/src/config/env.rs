//! `OS_*` environment variables: the `openrc` convention.

use std::path::PathBuf;
use std::time::Duration;

use super::{
    clouds::interface, AppCredRef, CloudConfig, ConfigError, Credentials, DomainRef, ProjectRef,
    TlsVerify, UserRef,
};

fn bad(key: &str, expected: &str) -> ConfigError {
    ConfigError::BadKey {
        source_name: "environment".into(),
        key: key.into(),
        expected: expected.into(),
    }
}

/// Builds a configuration from `OS_*` variables alone.
pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Result<CloudConfig, ConfigError> {
    let get = |k: &str| env(k).filter(|v| !v.is_empty());
    let auth_url = get("OS_AUTH_URL").ok_or_else(|| bad("OS_AUTH_URL", "a Keystone URL"))?;
    super::check_auth_url(&auth_url).map_err(|expected| bad("OS_AUTH_URL", &expected))?;
    let domain = |id: &str, name: &str| -> DomainRef {
        get(id)
            .map(DomainRef::Id)
            .or_else(|| get(name).map(DomainRef::Name))
            .or_else(|| get("OS_DOMAIN_ID").map(DomainRef::Id))
            .or_else(|| get("OS_DOMAIN_NAME").map(DomainRef::Name))
            .unwrap_or_else(|| DomainRef::Id("default".into()))
    };
    let user = get("OS_USER_ID").map(UserRef::Id).or_else(|| {
        get("OS_USERNAME").map(|name| UserRef::Name {
            name,
            domain: domain("OS_USER_DOMAIN_ID", "OS_USER_DOMAIN_NAME"),
        })
    });
    let auth_type = get("OS_AUTH_TYPE");
    let app_secret = get("OS_APPLICATION_CREDENTIAL_SECRET");
    let is_app = match auth_type.as_deref() {
        Some("v3applicationcredential" | "application_credential") => true,
        Some("password" | "v3password") => false,
        None => app_secret.is_some(),
        Some(_) => {
            return Err(bad(
                "OS_AUTH_TYPE",
                "password, v3password or v3applicationcredential",
            ))
        }
    };
    let credentials = if is_app {
        let secret = app_secret.ok_or_else(|| {
            bad(
                "OS_APPLICATION_CREDENTIAL_SECRET",
                "the application credential's secret",
            )
        })?;
        let credential = if let Some(id) = get("OS_APPLICATION_CREDENTIAL_ID") {
            AppCredRef::Id(id)
        } else if let Some(name) = get("OS_APPLICATION_CREDENTIAL_NAME") {
            let user = user.ok_or_else(|| bad("OS_USERNAME", "the credential owner's name"))?;
            AppCredRef::Name { name, user }
        } else {
            return Err(bad(
                "OS_APPLICATION_CREDENTIAL_ID",
                "a credential id (or OS_APPLICATION_CREDENTIAL_NAME)",
            ));
        };
        Credentials::ApplicationCredential { credential, secret }
    } else {
        let user = user.ok_or_else(|| bad("OS_USERNAME", "a user name (or OS_USER_ID)"))?;
        let password = get("OS_PASSWORD").ok_or_else(|| bad("OS_PASSWORD", "a password"))?;
        let project = if let Some(id) = get("OS_PROJECT_ID").or_else(|| get("OS_TENANT_ID")) {
            ProjectRef::Id(id)
        } else if let Some(name) = get("OS_PROJECT_NAME").or_else(|| get("OS_TENANT_NAME")) {
            ProjectRef::Name {
                name,
                domain: domain("OS_PROJECT_DOMAIN_ID", "OS_PROJECT_DOMAIN_NAME"),
            }
        } else {
            return Err(bad(
                "OS_PROJECT_NAME",
                "the project to scope the token to (or OS_PROJECT_ID)",
            ));
        };
        Credentials::Password {
            user,
            password,
            project,
        }
    };
    let mut cfg = CloudConfig::new(auth_url, credentials);
    cfg.region = get("OS_REGION_NAME");
    if let Some(raw) = get("OS_INTERFACE").or_else(|| get("OS_ENDPOINT_TYPE")) {
        cfg.interface =
            interface(&raw).ok_or_else(|| bad("OS_INTERFACE", "one of public, internal, admin"))?;
    }
    let insecure = match get("OS_INSECURE").as_deref() {
        Some("1" | "true" | "True" | "yes") => true,
        None | Some("0" | "false" | "False" | "no") => false,
        Some(_) => return Err(bad("OS_INSECURE", "true or false")),
    };
    cfg.tls = if insecure {
        TlsVerify::Insecure
    } else {
        TlsVerify::Verify {
            ca_file: get("OS_CACERT").map(PathBuf::from),
        }
    };
    if let Some(raw) = get("OS_API_TIMEOUT") {
        // Refused too: a number too large for a Duration (1e300, where
        // `from_secs_f64` panics) and one that rounds to 0 ns (1e-10).
        cfg.timeout = raw
            .parse()
            .ok()
            .filter(|s: &f64| s.is_finite() && *s > 0.0)
            .and_then(|s| Duration::try_from_secs_f64(s).ok())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| bad("OS_API_TIMEOUT", "a positive number of seconds"))?;
    }
    Ok(cfg)
}
