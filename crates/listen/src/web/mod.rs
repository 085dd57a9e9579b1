//! `listen.web_config_file`: TLS, basic authentication, response headers
//! and a rate limit for a listener, from the exporter toolkit's
//! web-configuration file — the file an operator already gives
//! `node_exporter` (docs/operations.md "Protecting the metrics").
//!
//! The file, and every file it names, is re-read on [`Web::reload`] (the
//! process's SIGHUP) and when [`Web::watch`] sees one of them change, with
//! the listener kept open: a new connection gets the new certificate, a
//! new request the new users. A file that does not read or does not
//! build keeps the previous configuration in force and is counted
//! ([`Reloads`]).

mod auth;
mod file;
mod tls;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use hyper::header::{HeaderName, HeaderValue};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

pub(crate) use auth::{Bucket, Users};
pub(crate) use tls::{sans_allowed, Tls};

/// How often [`Web::watch`] looks at the files.
pub const WATCH_INTERVAL: Duration = Duration::from_secs(1);

/// Why a web configuration was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebConfigError {
    /// The file itself cannot be read.
    #[error("{path}: {message}")]
    Unreadable {
        /// The web configuration file.
        path: String,
        /// The system's error.
        message: String,
    },
    /// The file reads but is not a configuration this listener can serve:
    /// bad YAML, an unknown key, a certificate or key that does not load.
    #[error("{path}: {message}")]
    Invalid {
        /// The web configuration file.
        path: String,
        /// What is wrong, naming the key.
        message: String,
    },
}

/// What one configuration makes a listener do.
#[derive(Debug, Default)]
pub(crate) struct Active {
    pub tls: Option<Tls>,
    pub users: Option<Users>,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub bucket: Option<Bucket>,
}

/// A loaded file: its configuration, the files it named, and what it
/// asked for that is ignored here.
struct Loaded {
    active: Active,
    files: Vec<PathBuf>,
    warnings: Vec<String>,
}

fn load(path: &Path) -> Result<Loaded, WebConfigError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| WebConfigError::Unreadable {
        path: shown.clone(),
        message: e.to_string(),
    })?;
    let invalid = |message: String| WebConfigError::Invalid {
        path: shown.clone(),
        message,
    };
    let raw = file::parse(&text).map_err(invalid)?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut files = vec![path.to_path_buf()];
    let mut warnings = Vec::new();
    let tls = raw
        .tls_server_config
        .as_ref()
        .map(|t| tls::build(t, dir, &mut files, &mut warnings))
        .transpose()
        .map_err(invalid)?;
    let active = Active {
        tls,
        ..settings(raw).map_err(invalid)?
    };
    Ok(Loaded {
        active,
        files,
        warnings,
    })
}

/// Everything a parsed file configures but TLS (which reads the files it
/// names): its users, headers and rate limit.
fn settings(raw: file::RawFile) -> Result<Active, String> {
    let users = raw
        .basic_auth_users
        .filter(|u| !u.is_empty())
        .map(Users::new)
        .transpose()?;
    let headers = raw
        .http_server_config
        .and_then(|h| h.headers)
        .map(|h| file::headers(&h))
        .transpose()?
        .unwrap_or_default();
    let bucket = match raw.rate_limit {
        None => None,
        Some(r) => {
            let every = r
                .interval
                .as_ref()
                .map(file::duration)
                .transpose()
                .map_err(|e| format!("rate_limit.interval: {e}"))?
                .unwrap_or(Duration::ZERO);
            let burst = u32::try_from(r.burst.unwrap_or(0)).map_err(|_| {
                "rate_limit.burst: too large; expected at most 4294967295".to_owned()
            })?;
            if every.is_zero() {
                None
            } else if burst == 0 {
                return Err(
                    "rate_limit.burst: 0 with a non-zero interval would refuse every request; \
                     expected 1 or more (or interval 0 to turn the limit off)"
                        .into(),
                );
            } else {
                Some(Bucket::new(every, burst))
            }
        }
    };
    Ok(Active {
        tls: None,
        users,
        headers,
        bucket,
    })
}

/// The fuzz target `web_config` (crates/fuzzing): a file's text through
/// what [`Web::load`] does with it, short of reading a file — the YAML,
/// the TLS section when it names no file (inline `cert`, `key`,
/// `client_ca`), the users' bcrypt hashes, the headers, the rate limit.
///
/// # Errors
/// Why a file of this text would be refused.
#[doc(hidden)]
pub fn fuzz_parse(text: &str) -> Result<(), String> {
    let raw = file::parse(text)?;
    if let Some(t) = &raw.tls_server_config {
        if t.cert_file.is_none() && t.key_file.is_none() && t.client_ca_file.is_none() {
            tls::build(t, Path::new("."), &mut Vec::new(), &mut Vec::new())?;
        }
    }
    settings(raw).map(drop)
}

/// Checks `path` as a start would load it: `Ok` with the warnings a start
/// would log, or why it cannot be served (`--check-config`).
pub fn check(path: &Path) -> Result<Vec<String>, WebConfigError> {
    load(path).map(|l| l.warnings)
}

/// Reloads by result.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reloads {
    /// Taken.
    pub ok: u64,
    /// Read, but not a configuration that can be served; the previous one
    /// stays.
    pub invalid: u64,
    /// Not readable; the previous one stays.
    pub unreadable: u64,
}

/// What the watcher last saw of a file: (modified, length, inode).
type Seen = Vec<Option<(SystemTime, u64, u64)>>;

fn seen(files: &[PathBuf]) -> Seen {
    use std::os::unix::fs::MetadataExt as _;
    files
        .iter()
        .map(|f| {
            std::fs::metadata(f).ok().map(|m| {
                (
                    m.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                    m.len(),
                    m.ino(),
                )
            })
        })
        .collect()
}

/// What the watcher knows.
#[derive(Debug, Default)]
struct Watched {
    /// The files of the configuration in force (and the file itself).
    files: Vec<PathBuf>,
    /// How they were when last loaded or last tried.
    settled: Seen,
    /// How they were at the previous look, when that differed from
    /// `settled`: a change is loaded once it holds still for a look.
    moving: Option<Seen>,
}

/// A listener's web configuration: none (plain HTTP, anyone may ask), or
/// the one a file gives, reloadable.
#[derive(Debug)]
pub struct Web {
    path: Option<PathBuf>,
    active: RwLock<Arc<Active>>,
    watched: Mutex<Watched>,
    /// One bcrypt check at a time.
    pub(crate) gate: Semaphore,
    ok: AtomicU64,
    invalid: AtomicU64,
    unreadable: AtomicU64,
}

impl Web {
    /// Plain HTTP, no authentication: the default.
    #[must_use]
    pub fn plain() -> Arc<Web> {
        Arc::new(Web {
            path: None,
            active: RwLock::new(Arc::new(Active::default())),
            watched: Mutex::new(Watched::default()),
            gate: Semaphore::new(1),
            ok: AtomicU64::new(0),
            invalid: AtomicU64::new(0),
            unreadable: AtomicU64::new(0),
        })
    }

    /// The configuration of the file at `path`; its warnings are logged.
    ///
    /// # Errors
    /// The file does not read or cannot be served.
    pub fn load(path: &Path) -> Result<Arc<Web>, WebConfigError> {
        let before = seen(&[path.to_path_buf()]);
        let loaded = load(path)?;
        for w in &loaded.warnings {
            tracing::warn!(web_config = %path.display(), "{w}");
        }
        let mut settled = seen(&loaded.files);
        settled[0] = before[0];
        Ok(Arc::new(Web {
            path: Some(path.to_path_buf()),
            active: RwLock::new(Arc::new(loaded.active)),
            watched: Mutex::new(Watched {
                files: loaded.files,
                settled,
                moving: None,
            }),
            gate: Semaphore::new(1),
            ok: AtomicU64::new(0),
            invalid: AtomicU64::new(0),
            unreadable: AtomicU64::new(0),
        }))
    }

    /// [`Web::load`] when `path` is set, else [`Web::plain`].
    ///
    /// # Errors
    /// As [`Web::load`].
    pub fn from_setting(path: Option<&Path>) -> Result<Arc<Web>, WebConfigError> {
        path.map_or_else(|| Ok(Web::plain()), Web::load)
    }

    /// The file, if any.
    #[must_use]
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Whether connections are encrypted (a TLS configuration is in force).
    #[must_use]
    pub fn is_tls(&self) -> bool {
        self.current().tls.is_some()
    }

    /// Whether requests must carry a user and password.
    #[must_use]
    pub fn requires_credentials(&self) -> bool {
        self.current().users.is_some()
    }

    /// What a new connection's TLS handshake uses, and the client SANs it
    /// must show; `None` for plain HTTP.
    pub(crate) fn acceptor(&self) -> Option<(tokio_rustls::TlsAcceptor, Option<Vec<String>>)> {
        self.current().tls.as_ref().map(|t| {
            (
                tokio_rustls::TlsAcceptor::from(t.config.clone()),
                t.allowed_sans.clone(),
            )
        })
    }

    pub(crate) fn current(&self) -> Arc<Active> {
        self.active.read().expect("not poisoned").clone()
    }

    /// Re-reads the file and what it names; on success the new
    /// configuration serves every new connection and request, otherwise
    /// the previous one stays. Counted either way; nothing to do without a
    /// file.
    ///
    /// # Errors
    /// Why the file was not taken.
    pub fn reload(&self) -> Result<(), WebConfigError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let before = seen(std::slice::from_ref(path));
        let result = load(path);
        let mut watched = self.watched.lock().expect("not poisoned");
        match result {
            Ok(loaded) => {
                for w in &loaded.warnings {
                    tracing::warn!(web_config = %path.display(), "{w}");
                }
                let mut settled = seen(&loaded.files);
                settled[0] = before[0];
                *watched = Watched {
                    files: loaded.files,
                    settled,
                    moving: None,
                };
                *self.active.write().expect("not poisoned") = Arc::new(loaded.active);
                self.ok.fetch_add(1, Ordering::Relaxed);
                tracing::info!(web_config = %path.display(), "web configuration reloaded");
                Ok(())
            }
            Err(e) => {
                watched.settled = seen(&watched.files);
                watched.moving = None;
                match e {
                    WebConfigError::Unreadable { .. } => &self.unreadable,
                    WebConfigError::Invalid { .. } => &self.invalid,
                }
                .fetch_add(1, Ordering::Relaxed);
                tracing::error!(error = %e, "web configuration not reloaded; the previous one stays in force");
                Err(e)
            }
        }
    }

    /// Reloads by result so far.
    #[must_use]
    pub fn reloads(&self) -> Reloads {
        Reloads {
            ok: self.ok.load(Ordering::Relaxed),
            invalid: self.invalid.load(Ordering::Relaxed),
            unreadable: self.unreadable.load(Ordering::Relaxed),
        }
    }

    /// One look at the files: reloads when they changed and then held
    /// still since the previous look (a certificate and its key written
    /// one after the other are taken together).
    fn look(&self) {
        let due = {
            let mut w = self.watched.lock().expect("not poisoned");
            let now = seen(&w.files);
            if now == w.settled {
                w.moving = None;
                false
            } else if w.moving.as_ref() == Some(&now) {
                true
            } else {
                w.moving = Some(now);
                false
            }
        };
        if due {
            let _ = self.reload();
        }
    }

    /// Looks at the file and the files it names every [`WATCH_INTERVAL`]
    /// until `cancel`, reloading on a change; returns at once without a
    /// file.
    pub async fn watch(self: Arc<Self>, cancel: CancellationToken) {
        if self.path.is_none() {
            return;
        }
        let mut tick = tokio::time::interval(WATCH_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                _ = tick.tick() => {
                    let web = self.clone();
                    // stat() and a reload read files: off the workers.
                    let _ = tokio::task::spawn_blocking(move || web.look()).await;
                }
            }
        }
    }
}
