//! Keystone v3 token requests and responses (pure: bodies in, token out).

use std::time::SystemTime;

use serde_json::{json, Value};

use crate::config::{AppCredRef, Credentials, DomainRef, ProjectRef, UserRef};

/// A token with the parts of the response the client uses.
#[derive(Debug, Clone)]
pub struct Token {
    /// The opaque token from the `X-Subject-Token` response header (the body
    /// never carries it); sent back as `X-Auth-Token` on every API call.
    pub value: String,
    /// `token.expires_at`: from this instant services answer 401 (earlier if
    /// the token is revoked).
    pub expires_at: SystemTime,
    /// `token.catalog`: the services and their endpoints. A body without one
    /// reads as empty, and every endpoint lookup then fails.
    pub catalog: Vec<CatalogService>,
}

/// One `token.catalog[]` entry.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct CatalogService {
    /// The service type (`type` on the wire): `network`, `identity`,
    /// `compute`, `load-balancer`. Endpoints are chosen by type, never by
    /// the deployment-specific service `name`.
    #[serde(rename = "type")]
    pub service_type: String,
    /// Every endpoint of the service, across interfaces and regions.
    #[serde(default)]
    pub endpoints: Vec<CatalogEndpoint>,
}

/// One endpoint; Keystone may send `region_id`, `region`, or both.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct CatalogEndpoint {
    /// `public`, `internal` or `admin`: which network the URL is reachable on.
    pub interface: String,
    /// The service root as the operator registered it, sometimes with a
    /// version (`/v2.1`) or a project id in the path, sometimes without.
    pub url: String,
    /// The region's id (`null` for an endpoint registered without a region).
    #[serde(default)]
    pub region_id: Option<String>,
    /// The same region under its older, deprecated key; matched like
    /// `region_id`, for catalogs that carry only this one.
    #[serde(default)]
    pub region: Option<String>,
}

/// Why a token response could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// The response had no (or an empty) `X-Subject-Token` header, so there
    /// is no token to send whatever the body says (a proxy in front of
    /// Keystone that drops headers is one cause).
    #[error("Keystone answered {status} without an X-Subject-Token header")]
    MissingHeader {
        /// The HTTP status of that response.
        status: u16,
    },
    /// The body is not JSON of the form `{"token": {"expires_at": …}}`; the
    /// text is the JSON parser's message.
    #[error("token body is not a Keystone v3 token: {0}")]
    Body(String),
    /// `token.expires_at` (quoted as received) is not a UTC RFC 3339
    /// timestamp, so the token's lifetime is unknown.
    #[error("token.expires_at {0:?} is not an RFC 3339 UTC timestamp")]
    ExpiresAt(String),
}

fn domain(d: &DomainRef) -> Value {
    match d {
        DomainRef::Id(id) => json!({"id": id}),
        DomainRef::Name(name) => json!({"name": name}),
    }
}

fn user(u: &UserRef) -> Value {
    match u {
        UserRef::Id(id) => json!({"id": id}),
        UserRef::Name { name, domain: d } => json!({"name": name, "domain": domain(d)}),
    }
}

/// The `POST /v3/auth/tokens` body for these credentials.
#[must_use]
pub(crate) fn request_body(creds: &Credentials) -> Value {
    match creds {
        Credentials::Password {
            user: u,
            password,
            project,
        } => {
            let mut pw_user = user(u);
            pw_user["password"] = json!(password);
            let scope = match project {
                ProjectRef::Id(id) => json!({"project": {"id": id}}),
                ProjectRef::Name { name, domain: d } => {
                    json!({"project": {"name": name, "domain": domain(d)}})
                }
            };
            json!({"auth": {
                "identity": {"methods": ["password"], "password": {"user": pw_user}},
                "scope": scope,
            }})
        }
        // An application credential is already scoped: sending a scope is an error.
        Credentials::ApplicationCredential { credential, secret } => {
            let mut ac = match credential {
                AppCredRef::Id(id) => json!({"id": id}),
                AppCredRef::Name { name, user: u } => json!({"name": name, "user": user(u)}),
            };
            ac["secret"] = json!(secret);
            json!({"auth": {"identity": {
                "methods": ["application_credential"],
                "application_credential": ac,
            }}})
        }
    }
}

/// Builds a [`Token`] from the `X-Subject-Token` header value and the body.
pub(crate) fn parse_token(
    header: Option<&str>,
    status: u16,
    body: &[u8],
) -> Result<Token, TokenError> {
    #[derive(serde::Deserialize)]
    struct Body {
        token: Inner,
    }
    #[derive(serde::Deserialize)]
    struct Inner {
        expires_at: String,
        #[serde(default)]
        catalog: Vec<CatalogService>,
    }
    let value = header
        .filter(|h| !h.is_empty())
        .ok_or(TokenError::MissingHeader { status })?
        .to_owned();
    let body: Body = serde_json::from_slice(body).map_err(|e| TokenError::Body(e.to_string()))?;
    let expires_at = parse_expiry(&body.token.expires_at)?;
    Ok(Token {
        value,
        expires_at,
        catalog: body.token.catalog,
    })
}

/// Keystone writes `2015-08-27T09:49:58.000000Z`; `+00:00` is accepted too.
pub(crate) fn parse_expiry(raw: &str) -> Result<SystemTime, TokenError> {
    let normalized = raw
        .strip_suffix("+00:00")
        .map_or_else(|| raw.to_owned(), |s| format!("{s}Z"));
    humantime::parse_rfc3339_weak(&normalized).map_err(|_| TokenError::ExpiresAt(raw.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn expiry_formats_keystone_uses() {
        let t = parse_expiry("2015-08-27T09:49:58.000000Z").unwrap();
        assert_eq!(
            t.duration_since(UNIX_EPOCH).unwrap(),
            Duration::from_secs(1_440_668_998)
        );
        assert_eq!(parse_expiry("2015-08-27T09:49:58+00:00").unwrap(), t);
        assert!(parse_expiry("yesterday").is_err());
    }

    #[test]
    fn app_credential_body_has_no_scope() {
        let body = request_body(&Credentials::ApplicationCredential {
            credential: AppCredRef::Id("ac1".into()),
            secret: "s".into(),
        });
        assert!(body["auth"].get("scope").is_none());
        assert_eq!(
            body["auth"]["identity"]["application_credential"],
            json!({"id": "ac1", "secret": "s"})
        );
    }

    #[test]
    fn password_body_scopes_to_project_by_name() {
        let body = request_body(&Credentials::Password {
            user: UserRef::Name {
                name: "u".into(),
                domain: DomainRef::Name("Default".into()),
            },
            password: "p".into(),
            project: ProjectRef::Name {
                name: "admin".into(),
                domain: DomainRef::Id("default".into()),
            },
        });
        assert_eq!(
            body["auth"]["identity"]["password"]["user"],
            json!({"name": "u", "domain": {"name": "Default"}, "password": "p"})
        );
        assert_eq!(
            body["auth"]["scope"],
            json!({"project": {"name": "admin", "domain": {"id": "default"}}})
        );
    }

    #[test]
    fn token_without_header_is_refused() {
        let err = parse_token(
            None,
            201,
            br#"{"token":{"expires_at":"2030-01-01T00:00:00Z"}}"#,
        )
        .unwrap_err();
        assert_eq!(err, TokenError::MissingHeader { status: 201 });
    }
}
