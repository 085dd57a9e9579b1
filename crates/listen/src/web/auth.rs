//! `basic_auth_users` and `rate_limit`: who may ask, and how often.
//!
//! A bcrypt check costs tens of milliseconds of CPU by design (cost 10:
//! ~70 ms), so a result is remembered (by a SHA-256 of the user and
//! password, never the password) and checks run one at a time off the
//! async workers: a flood of wrong passwords costs one core at most and
//! never delays a scrape whose credentials were already checked.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use base64::Engine as _;
use hyper::header::HeaderValue;
use tokio::sync::Semaphore;
use tokio::time::Instant;

/// Results remembered at most; the memory is emptied when full.
const REMEMBERED: usize = 1024;

/// The users and their bcrypt hashes.
#[derive(Debug)]
pub(crate) struct Users {
    hashes: BTreeMap<String, String>,
    remembered: Mutex<HashMap<[u8; 32], bool>>,
}

impl Users {
    /// Checks every hash now, so a typo is an error naming its user rather
    /// than a lock-out found by the next scrape.
    pub(crate) fn new(hashes: BTreeMap<String, String>) -> Result<Users, String> {
        for (user, hash) in &hashes {
            if user.contains(':') {
                return Err(format!(
                    "basic_auth_users: user {user:?} contains ':', which basic authentication cannot carry"
                ));
            }
            hash.parse::<bcrypt::HashParts>().map_err(|e| {
                format!(
                    "basic_auth_users.{user}: not a bcrypt hash ({e}); expected e.g. the output of htpasswd -nBC 10 \"\" | tr -d ':\\n'"
                )
            })?;
        }
        Ok(Users {
            hashes,
            remembered: Mutex::new(HashMap::new()),
        })
    }

    /// Whether `authorization` (the request's header) names a user and its
    /// password. `gate` serialises the bcrypt checks.
    pub(crate) async fn allows(
        &self,
        authorization: Option<&HeaderValue>,
        gate: &Semaphore,
    ) -> bool {
        let Some((user, password)) = authorization.and_then(credentials) else {
            return false;
        };
        let digest = {
            let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
            ctx.update(user.as_bytes());
            ctx.update(&[0]);
            ctx.update(password.as_bytes());
            let mut out = [0u8; 32];
            out.copy_from_slice(ctx.finish().as_ref());
            out
        };
        if let Some(known) = self.remembered.lock().expect("not poisoned").get(&digest) {
            return *known;
        }
        // An unknown user costs what a known one does (no user oracle).
        let (hash, known_user) = match self.hashes.get(&user) {
            Some(h) => (h.clone(), true),
            None => match self.hashes.values().next() {
                Some(h) => (h.clone(), false),
                None => return false,
            },
        };
        let Ok(_permit) = gate.acquire().await else {
            return false;
        };
        let verified = tokio::task::spawn_blocking(move || bcrypt::verify(password, &hash))
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or(false);
        let allowed = verified && known_user;
        let mut remembered = self.remembered.lock().expect("not poisoned");
        if remembered.len() >= REMEMBERED {
            remembered.clear();
        }
        remembered.insert(digest, allowed);
        allowed
    }
}

/// `Basic <base64(user:password)>`, decoded.
fn credentials(v: &HeaderValue) -> Option<(String, String)> {
    let v = v.to_str().ok()?;
    let (scheme, encoded) = v.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
}

/// A token bucket: one request per `every`, `burst` at once (the toolkit's
/// `rate_limit`, Go's `rate.Limiter`).
#[derive(Debug)]
pub(crate) struct Bucket {
    every: Duration,
    burst: f64,
    state: Mutex<(f64, Instant)>,
}

impl Bucket {
    pub(crate) fn new(every: Duration, burst: u32) -> Bucket {
        Bucket {
            every,
            burst: f64::from(burst),
            state: Mutex::new((f64::from(burst), Instant::now())),
        }
    }

    /// Takes a token if there is one.
    pub(crate) fn allow(&self) -> bool {
        let mut state = self.state.lock().expect("not poisoned");
        let now = Instant::now();
        let refill = now.duration_since(state.1).as_secs_f64() / self.every.as_secs_f64();
        state.0 = (state.0 + refill).min(self.burst);
        state.1 = now;
        if state.0 >= 1.0 {
            state.0 -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_read_from_the_header_and_nothing_else() {
        let h = |s: &str| HeaderValue::from_str(s).unwrap();
        // "alice:pa:ss" — the password may contain ':'.
        assert_eq!(
            credentials(&h("Basic YWxpY2U6cGE6c3M=")),
            Some(("alice".into(), "pa:ss".into()))
        );
        assert_eq!(
            credentials(&h("basic YWxpY2U6cGE6c3M=")).unwrap().0,
            "alice"
        );
        assert_eq!(credentials(&h("Bearer YWxpY2U6cGE6c3M=")), None);
        assert_eq!(credentials(&h("Basic !!!")), None);
        // No ':' at all.
        assert_eq!(credentials(&h("Basic YWxpY2U=")), None);
    }

    #[tokio::test(start_paused = true)]
    async fn the_bucket_allows_its_burst_then_one_per_interval() {
        let b = Bucket::new(Duration::from_secs(1), 3);
        assert!(b.allow() && b.allow() && b.allow());
        assert!(!b.allow());
        tokio::time::advance(Duration::from_millis(999)).await;
        assert!(!b.allow());
        tokio::time::advance(Duration::from_millis(2)).await;
        assert!(b.allow());
        assert!(!b.allow());
        tokio::time::advance(Duration::from_mins(1)).await;
        assert!(b.allow() && b.allow() && b.allow() && !b.allow());
    }
}
