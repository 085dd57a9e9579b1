//! The exporter toolkit's web-configuration file, read (the same file an
//! operator gives `node_exporter --web.config.file`): YAML, every key of
//! the toolkit's format known, an unknown key refused. Paths are relative
//! to the file's directory, as the toolkit reads them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFile {
    #[serde(default)]
    pub tls_server_config: Option<RawTls>,
    #[serde(default)]
    pub http_server_config: Option<RawHttp>,
    #[serde(default)]
    pub basic_auth_users: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub rate_limit: Option<RawRateLimit>,
}

/// `tls_server_config`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTls {
    pub cert: Option<String>,
    pub key: Option<String>,
    pub client_ca: Option<String>,
    pub cert_file: Option<String>,
    pub key_file: Option<String>,
    pub client_auth_type: Option<String>,
    pub client_ca_file: Option<String>,
    pub client_allowed_sans: Option<Vec<String>>,
    pub min_version: Option<String>,
    pub max_version: Option<String>,
    pub cipher_suites: Option<Vec<String>>,
    pub prefer_server_cipher_suites: Option<bool>,
    pub curve_preferences: Option<Vec<String>>,
}

/// `http_server_config`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawHttp {
    /// HTTP/2 is not served here (HTTP/1.1 only); the key is accepted so
    /// a toolkit file reads, and ignored.
    #[expect(
        dead_code,
        reason = "read so a toolkit file parses; HTTP/1.1 only here"
    )]
    pub http2: Option<bool>,
    pub headers: Option<BTreeMap<String, String>>,
}

/// `rate_limit`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRateLimit {
    pub interval: Option<Scalar>,
    pub burst: Option<u64>,
}

/// A YAML scalar read as text (`interval: 0` and `interval: "1s"`).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum Scalar {
    Int(u64),
    Text(String),
}

/// Reads the file's text. An empty file (or one of comments only) is the
/// toolkit's "nothing configured".
pub(crate) fn parse(text: &str) -> Result<RawFile, String> {
    let meaningful = text
        .lines()
        .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#') && l.trim() != "---");
    if !meaningful {
        return Ok(RawFile::default());
    }
    serde_saphyr::from_str::<Option<RawFile>>(text)
        .map(Option::unwrap_or_default)
        .map_err(|e| {
            format!(
                "{e}; expected the exporter toolkit's web configuration \
                 (tls_server_config, http_server_config, basic_auth_users, rate_limit)"
            )
        })
}

/// `name` of the file, relative to `dir` unless absolute.
pub(crate) fn resolve(dir: &Path, name: &str) -> PathBuf {
    let p = Path::new(name);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        dir.join(p)
    }
}

/// A Go duration as the toolkit writes it (`0`, `500ms`, `1s`, `1m30s`).
pub(crate) fn duration(v: &Scalar) -> Result<Duration, String> {
    match v {
        Scalar::Int(0) => Ok(Duration::ZERO),
        Scalar::Int(n) => Err(format!("{n} has no unit; expected e.g. 1s or 500ms")),
        Scalar::Text(s) if s.trim() == "0" => Ok(Duration::ZERO),
        Scalar::Text(s) => humantime::parse_duration(s.trim())
            .map_err(|_| format!("{s:?} is not a duration; expected e.g. 1s or 500ms")),
    }
}

/// The response headers the toolkit lets a file set, and the values it
/// accepts for them (`None`: any).
pub(crate) const HEADERS: &[(&str, Option<&[&str]>)] = &[
    ("Content-Security-Policy", None),
    ("X-Frame-Options", Some(&["deny", "sameorigin"])),
    ("X-Content-Type-Options", Some(&["nosniff"])),
    ("X-XSS-Protection", None),
    ("Strict-Transport-Security", None),
];

/// `http_server_config.headers`: the set ones (a blank value is unset),
/// each named exactly as the toolkit names it.
pub(crate) fn headers(
    raw: &BTreeMap<String, String>,
) -> Result<Vec<(hyper::header::HeaderName, hyper::header::HeaderValue)>, String> {
    let mut out = Vec::new();
    for (name, value) in raw {
        let Some((canonical, allowed)) = HEADERS.iter().find(|(h, _)| h.eq_ignore_ascii_case(name))
        else {
            let known: Vec<&str> = HEADERS.iter().map(|(h, _)| *h).collect();
            return Err(format!(
                "http_server_config.headers: {name:?} cannot be set; expected one of {}",
                known.join(", ")
            ));
        };
        if value.trim().is_empty() {
            continue;
        }
        if let Some(allowed) = allowed {
            if !allowed.iter().any(|a| a.eq_ignore_ascii_case(value.trim())) {
                return Err(format!(
                    "http_server_config.headers.{canonical}: {value:?} is not accepted; expected {}",
                    allowed.join(" or ")
                ));
            }
        }
        let header_value = hyper::header::HeaderValue::from_str(value.trim()).map_err(|_| {
            format!("http_server_config.headers.{canonical}: {value:?} is not a valid header value")
        })?;
        out.push((
            hyper::header::HeaderName::from_static(static_lower(canonical)),
            header_value,
        ));
    }
    Ok(out)
}

/// The lower-case spelling hyper wants for a static header name.
fn static_lower(canonical: &str) -> &'static str {
    match canonical {
        "Content-Security-Policy" => "content-security-policy",
        "X-Frame-Options" => "x-frame-options",
        "X-Content-Type-Options" => "x-content-type-options",
        "X-XSS-Protection" => "x-xss-protection",
        _ => "strict-transport-security",
    }
}
