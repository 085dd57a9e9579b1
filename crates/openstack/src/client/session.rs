//! One authenticated HTTP session: token cache, one re-auth on 401, paging.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use serde_json::Value;
use tokio::sync::Mutex;
use url::Url;

use super::auth::{self, Token, TokenError};
use super::catalog::{self, CatalogError};
use super::metrics::ApiMetrics;
use super::paginate::{self, PageError};
use crate::config::{CloudConfig, TlsVerify};

/// A failed API interaction; every variant names the call. The text of a
/// wrapped error is part of the message, never also a `source()` (so a
/// chain printer shows it once).
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The HTTP client could not be built: the configured CA file is
    /// unreadable, not PEM, or holds no certificate (an empty bundle would
    /// silently trust the system roots alone), or the TLS stack refused.
    /// Nothing was sent.
    #[error("cannot build the HTTP client: {0}")]
    Setup(String),
    /// No complete HTTP response: connection refused or reset (also while
    /// reading the body), DNS or TLS failure, or the per-request timeout. Counted with code `network`.
    #[error("{service} {endpoint}: {url}: no response: {message}")]
    Network {
        /// The catalog service type (`network`, `identity`, …), the
        /// `service` label of the error counter.
        service: String,
        /// The collection (`ports`, …) or `auth`, the `endpoint` label.
        endpoint: String,
        /// The URL requested, query included (never a token).
        url: String,
        /// `timed out: …` or `failed: …`, then the transport's cause chain.
        message: String,
    },
    /// The service answered with a status that is not success: any non-2xx
    /// on a list (a 401 only after one re-authentication was also refused),
    /// or anything but 201 on a token request (wrong credentials, unknown
    /// project). Counted with the status as `code`.
    #[error("{service} {endpoint}: {url}: HTTP {status}: {body}")]
    Status {
        /// The catalog service type (`network`, `identity`, …), the
        /// `service` label of the error counter.
        service: String,
        /// The collection (`ports`, …) or `auth`, the `endpoint` label.
        endpoint: String,
        /// The URL requested, query included (never a token).
        url: String,
        /// The HTTP status code.
        status: u16,
        /// The start of the response body (at most 512 characters, `…` when
        /// cut): services put the reason there.
        body: String,
    },
    /// A 2xx answer whose body is not JSON. Counted with code `body`.
    #[error("{service} {endpoint}: {url}: unexpected body: {message}")]
    Body {
        /// The catalog service type (`network`, `identity`, …), the
        /// `service` label of the error counter.
        service: String,
        /// The list's collection (`ports`, …), the `endpoint` label.
        endpoint: String,
        /// The URL requested, query included (never a token).
        url: String,
        /// The JSON parser's message.
        message: String,
    },
    /// A JSON page that cannot be part of a complete list: no collection
    /// array, Keystone's `truncated`, or malformed links. Counted with code
    /// `body`.
    #[error("{service} {endpoint}: {url}: {error}")]
    Page {
        /// The catalog service type (`network`, `identity`, …), the
        /// `service` label of the error counter.
        service: String,
        /// The list's collection (`ports`, …), the `endpoint` label.
        endpoint: String,
        /// The page's URL.
        url: String,
        /// What is wrong with the page.
        error: PageError,
    },
    /// Keystone answered 201 but the token is unusable (no header, a body
    /// of another shape, an unreadable expiry). Counted as
    /// `identity`/`auth`/`body`.
    #[error("identity: token: {0}")]
    Token(TokenError),
    /// No single endpoint for a service in the token's catalog. Nothing
    /// was requested, so nothing is counted.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// A `next` link led back to a page already fetched in this list: the
    /// service's links cycle, and following them would never end. Counted
    /// with code `body`.
    #[error("{service} {endpoint}: pagination revisited {url}: the service's links loop")]
    LinkLoop {
        /// The catalog service type (`network`, `identity`, …), the
        /// `service` label of the error counter.
        service: String,
        /// The list's collection (`ports`, …), the `endpoint` label.
        endpoint: String,
        /// The page URL seen twice.
        url: String,
    },
}

impl From<TokenError> for ApiError {
    fn from(e: TokenError) -> Self {
        Self::Token(e)
    }
}

impl ApiError {
    /// The HTTP status, when the failure was an HTTP answer.
    #[must_use]
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// A list call: which service and collection, where, and with what filters.
#[derive(Debug, Clone)]
pub(crate) struct ListCall<'a> {
    pub service: &'a str,
    pub collection: &'a str,
    pub url: Url,
}

/// What the list calls of a session have received so far: every page
/// answered (any status), and the bytes of their bodies as they came off
/// the wire. A sync's figures are the difference of two readings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Traffic {
    /// List GETs answered, one per page (a 401 retried counts twice).
    pub requests: u64,
    /// Bytes of those answers' bodies.
    pub bytes: u64,
}

impl std::ops::Sub for Traffic {
    type Output = Traffic;

    fn sub(self, earlier: Traffic) -> Traffic {
        Traffic {
            requests: self.requests - earlier.requests,
            bytes: self.bytes - earlier.bytes,
        }
    }
}

/// Keystone token + HTTP client, shared by every call of a sync.
#[derive(Debug)]
pub struct Session {
    http: reqwest::Client,
    cfg: CloudConfig,
    metrics: ApiMetrics,
    token: Mutex<Option<Token>>,
    auth_count: AtomicU64,
    /// Response-body bytes received, by endpoint label.
    received: std::sync::Mutex<BTreeMap<String, u64>>,
    list_requests: AtomicU64,
}

const MAX_ERROR_BODY: usize = 512;

impl Session {
    /// A session for one cloud; no request is made until the first call.
    ///
    /// With [`TlsVerify::Insecure`] it logs a WARN, once per session, since
    /// anyone on the path could then read the credentials and forge the
    /// topology.
    pub fn new(cfg: CloudConfig, metrics: ApiMetrics) -> Result<Self, ApiError> {
        let mut builder = reqwest::Client::builder()
            .timeout(cfg.timeout)
            .use_rustls_tls();
        match &cfg.tls {
            TlsVerify::Verify {
                ca_file: Some(path),
            } => {
                let pem = std::fs::read(path)
                    .map_err(|e| ApiError::Setup(format!("CA file {}: {e}", path.display())))?;
                let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
                    ApiError::Setup(format!("CA file {}: not PEM: {e}", path.display()))
                })?;
                // An empty bundle would silently fall back to the system
                // roots alone: the operator asked for a CA, so refuse.
                if certs.is_empty() {
                    return Err(ApiError::Setup(format!(
                        "CA file {}: no PEM certificate in it",
                        path.display()
                    )));
                }
                for cert in certs {
                    builder = builder.add_root_certificate(cert);
                }
            }
            TlsVerify::Verify { ca_file: None } => {}
            TlsVerify::Insecure => {
                tracing::warn!(
                    auth_url = %cfg.auth_url,
                    "TLS CERTIFICATE VERIFICATION IS DISABLED for OpenStack API calls: \
                     anyone on the path can read the credentials and forge the topology"
                );
                builder = builder.danger_accept_invalid_certs(true);
            }
        }
        let http = builder
            .build()
            .map_err(|e| ApiError::Setup(e.to_string()))?;
        Ok(Self {
            http,
            cfg,
            metrics,
            token: Mutex::new(None),
            auth_count: AtomicU64::new(0),
            received: std::sync::Mutex::default(),
            list_requests: AtomicU64::new(0),
        })
    }

    /// The configuration the session was built with.
    #[must_use]
    pub fn config(&self) -> &CloudConfig {
        &self.cfg
    }

    /// How many times a token was requested (tests and the debug endpoint).
    #[must_use]
    pub fn auth_count(&self) -> u64 {
        self.auth_count.load(Ordering::Relaxed)
    }

    /// Response-body bytes received since the session began, by endpoint
    /// (`auth`, or a list's collection such as `ports`), every answer
    /// counted, failures included: the load this client put on the cloud's
    /// links, for tests and benchmarks.
    #[must_use]
    pub fn response_bytes(&self) -> BTreeMap<String, u64> {
        self.received
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn received(&self, endpoint: &str, bytes: usize) {
        let mut map = self
            .received
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *map.entry(endpoint.to_owned()).or_default() += bytes as u64;
    }

    /// What the list calls have received since the session began (the sync
    /// benchmark reads it before and after a sync): their requests, and the
    /// bytes of every endpoint but `auth`.
    #[must_use]
    pub fn traffic(&self) -> Traffic {
        let bytes = self
            .received
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .filter(|(endpoint, _)| endpoint.as_str() != "auth")
            .map(|(_, b)| *b)
            .sum();
        Traffic {
            requests: self.list_requests.load(Ordering::Relaxed),
            bytes,
        }
    }

    /// A token valid for at least the renew margin, reused when possible.
    pub async fn token(&self) -> Result<Token, ApiError> {
        let mut slot = self.token.lock().await;
        if let Some(t) = slot.as_ref() {
            if SystemTime::now() + self.cfg.token_renew_margin < t.expires_at {
                return Ok(t.clone());
            }
        }
        let fresh = self.authenticate().await?;
        *slot = Some(fresh.clone());
        Ok(fresh)
    }

    /// Drops `stale` (if it is still the cached one) and fetches a new token.
    /// Concurrent callers that saw the same 401 share one re-authentication.
    async fn reauthenticate(&self, stale: &str) -> Result<Token, ApiError> {
        let mut slot = self.token.lock().await;
        if let Some(t) = slot.as_ref() {
            if t.value != stale {
                return Ok(t.clone());
            }
        }
        let fresh = self.authenticate().await?;
        *slot = Some(fresh.clone());
        Ok(fresh)
    }

    fn identity_url(&self) -> String {
        let base = self.cfg.auth_url.trim_end_matches('/');
        if base.ends_with("/v3") {
            format!("{base}/auth/tokens")
        } else {
            format!("{base}/v3/auth/tokens")
        }
    }

    async fn authenticate(&self) -> Result<Token, ApiError> {
        self.auth_count.fetch_add(1, Ordering::Relaxed);
        let url = self.identity_url();
        let body = auth::request_body(&self.cfg.credentials);
        let resp = self
            .http
            .post(&url)
            .header("Content-Type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .map_err(|e| self.network("identity", "auth", &url, &e))?;
        let status = resp.status().as_u16();
        let header = resp
            .headers()
            .get("X-Subject-Token")
            .and_then(|h| h.to_str().ok())
            .map(str::to_owned);
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| self.network("identity", "auth", &url, &e))?;
        self.received("auth", bytes.len());
        if status != 201 {
            self.metrics.count("identity", "auth", &status.to_string());
            return Err(ApiError::Status {
                service: "identity".into(),
                endpoint: "auth".into(),
                url,
                status,
                body: excerpt(&bytes),
            });
        }
        auth::parse_token(header.as_deref(), status, &bytes)
            .inspect_err(|_| {
                self.metrics.count("identity", "auth", "body");
            })
            .map_err(ApiError::from)
    }

    fn network(&self, service: &str, endpoint: &str, url: &str, e: &reqwest::Error) -> ApiError {
        self.metrics.count(service, endpoint, "network");
        let kind = if e.is_timeout() {
            "timed out"
        } else {
            "failed"
        };
        ApiError::Network {
            service: service.into(),
            endpoint: endpoint.into(),
            url: url.into(),
            message: format!("{kind}: {}", error_chain(e)),
        }
    }

    /// The endpoint URL of `service_type` from the current token's catalog.
    pub async fn endpoint(&self, service_type: &str) -> Result<String, ApiError> {
        let token = self.token().await?;
        Ok(catalog::select(
            &token.catalog,
            service_type,
            &self.cfg.interface,
            self.cfg.region.as_deref(),
        )?)
    }

    /// GET one JSON body; on a 401 re-authenticates once and retries.
    async fn get_json(&self, service: &str, endpoint: &str, url: &Url) -> Result<Value, ApiError> {
        self.get(service, endpoint, url, false)
            .await
            .map(|body| body.unwrap_or(Value::Null))
    }

    /// GET one resource by id: `None` when the service answers 404, which
    /// is an answer (the resource is gone), not a failure, so it is not
    /// counted as an error.
    pub(crate) async fn show(
        &self,
        service: &str,
        endpoint: &str,
        url: &Url,
    ) -> Result<Option<Value>, ApiError> {
        self.get(service, endpoint, url, true).await
    }

    /// [`Self::get_json`], and with `absent_ok` a 404 is `Ok(None)`.
    async fn get(
        &self,
        service: &str,
        endpoint: &str,
        url: &Url,
        absent_ok: bool,
    ) -> Result<Option<Value>, ApiError> {
        let mut token = self.token().await?;
        let mut retried = false;
        loop {
            let resp = self
                .http
                .get(url.clone())
                .header("X-Auth-Token", &token.value)
                .header("Accept", "application/json")
                .send()
                .await
                .map_err(|e| self.network(service, endpoint, url.as_str(), &e))?;
            let status = resp.status().as_u16();
            let bytes = resp
                .bytes()
                .await
                .map_err(|e| self.network(service, endpoint, url.as_str(), &e))?;
            self.received(endpoint, bytes.len());
            self.list_requests.fetch_add(1, Ordering::Relaxed);
            if status == 401 && !retried {
                // Tokens can be revoked or expire early (clock skew, a
                // Keystone restart with new fernet keys): one fresh token,
                // then a second 401 is a real authorization failure.
                self.metrics.count(service, endpoint, "401");
                retried = true;
                token = self.reauthenticate(&token.value).await?;
                continue;
            }
            if status == 404 && absent_ok {
                return Ok(None);
            }
            if !(200..300).contains(&status) {
                self.metrics.count(service, endpoint, &status.to_string());
                return Err(ApiError::Status {
                    service: service.into(),
                    endpoint: endpoint.into(),
                    url: url.to_string(),
                    status,
                    body: excerpt(&bytes),
                });
            }
            return serde_json::from_slice(&bytes).map(Some).map_err(|e| {
                self.metrics.count(service, endpoint, "body");
                ApiError::Body {
                    service: service.into(),
                    endpoint: endpoint.into(),
                    url: url.to_string(),
                    message: e.to_string(),
                }
            });
        }
    }

    /// Fetches every page of a list, handing each page's items to
    /// `on_page` as the page arrives (in order, an empty last page
    /// included), so that no list is held whole. An error may come after
    /// some pages were handed over: the list is then incomplete and the
    /// caller must not use what it got of it.
    pub(crate) async fn list(
        &self,
        call: &ListCall<'_>,
        mut on_page: impl FnMut(Vec<Value>),
    ) -> Result<(), ApiError> {
        let mut url = call.url.clone();
        if let Some(limit) = self.cfg.page_size {
            if !url.query_pairs().any(|(k, _)| k == "limit") {
                url.query_pairs_mut()
                    .append_pair("limit", &limit.to_string());
            }
        }
        let first = url.clone();
        let mut seen = std::collections::HashSet::new();
        let page_err = |url: &Url, error: PageError| {
            self.metrics.count(call.service, call.collection, "body");
            ApiError::Page {
                service: call.service.into(),
                endpoint: call.collection.into(),
                url: url.to_string(),
                error,
            }
        };
        loop {
            if !seen.insert(url.to_string()) {
                self.metrics.count(call.service, call.collection, "body");
                return Err(ApiError::LinkLoop {
                    service: call.service.into(),
                    endpoint: call.collection.into(),
                    url: url.to_string(),
                });
            }
            let body = self.get_json(call.service, call.collection, &url).await?;
            let (items, next) =
                paginate::read_page(body, call.collection).map_err(|e| page_err(&url, e))?;
            // Neutron links a next page whenever this one is full, so the
            // last page may be empty: an empty page ends the list too.
            let empty = items.is_empty();
            on_page(items);
            match next {
                Some(href) if !empty => {
                    url = paginate::next_url(&first, &href).ok_or_else(|| {
                        page_err(
                            &url,
                            PageError::BadLinks {
                                field: "next".into(),
                                found: href.clone(),
                            },
                        )
                    })?;
                }
                _ => break,
            }
        }
        Ok(())
    }
}

fn excerpt(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut s: String = text.chars().take(MAX_ERROR_BODY).collect();
    if text.chars().count() > MAX_ERROR_BODY {
        s.push('…');
    }
    s
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(src) = cur {
        out.push_str(": ");
        out.push_str(&src.to_string());
        cur = src.source();
    }
    out
}
