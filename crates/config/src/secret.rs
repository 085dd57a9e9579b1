//! Values that must never be printed: one wrapper, [`Secret`], from the
//! file to the one place that hands the value to a broker. `Debug`,
//! `Display` and `Serialize` show [`REDACTED`]; the value is reached only
//! through [`Secret::expose`].
//!
//! A reload must still see a rotated password (to warn that it needs a
//! restart) without holding it in a comparable form: inside [`comparing`],
//! a secret serializes as a keyed hash of itself, whose key is drawn once
//! per process — equal for equal secrets, useless to anyone reading it.

use std::cell::Cell;
use std::fmt;
use std::hash::{BuildHasher, RandomState};
use std::sync::OnceLock;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::form::deserialize_scalar;

/// What a secret shows instead of itself.
pub const REDACTED: &str = "REDACTED";

/// A secret string.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    #[must_use]
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The secret itself, for the one place that hands it to a broker.
    #[must_use]
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether it is the empty string (a check that needs no exposure).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

/// Any scalar, as text (a numeric password is still text), taken verbatim
/// from the environment; never quoted back in an error.
impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        deserialize_scalar(d, "=secret", |v| Ok(Secret(v.text())))
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_redacted(REDACTED, &self.0, s)
    }
}

thread_local! {
    static COMPARING: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with every secret serializing as its fingerprint instead of
/// [`REDACTED`], for comparing two configurations.
pub fn comparing<R>(f: impl FnOnce() -> R) -> R {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            COMPARING.set(self.0);
        }
    }
    let _reset = Reset(COMPARING.replace(true));
    f()
}

/// Serializes `shown` (a redacted form of `secret`), or inside
/// [`comparing`] the fingerprint of `secret`.
pub fn serialize_redacted<S: Serializer>(
    shown: &str,
    secret: &str,
    s: S,
) -> Result<S::Ok, S::Error> {
    if COMPARING.get() {
        static KEY: OnceLock<RandomState> = OnceLock::new();
        let hash = KEY.get_or_init(RandomState::new).hash_one(secret);
        s.serialize_str(&format!("{REDACTED}#{hash:016x}"))
    } else {
        s.serialize_str(shown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_never_shows_itself() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s} {s:?}"), "REDACTED REDACTED");
        assert_eq!(s.expose(), "hunter2");
        assert_eq!(serde_json::to_value(&s).unwrap(), "REDACTED");
    }

    #[test]
    fn compared_secrets_differ_where_the_secret_does_and_never_show_it() {
        let a = Secret::new("hunter2");
        let b = Secret::new("hunter3");
        let (fa, fa2, fb) = comparing(|| {
            (
                serde_json::to_string(&a).unwrap(),
                serde_json::to_string(&a.clone()).unwrap(),
                serde_json::to_string(&b).unwrap(),
            )
        });
        assert_eq!(fa, fa2);
        assert_ne!(fa, fb);
        assert!(!fa.contains("hunter"), "{fa}");
        // Outside, redacted again.
        assert_eq!(serde_json::to_string(&a).unwrap(), "\"REDACTED\"");
    }

    #[test]
    fn a_secret_reads_any_scalar_as_text() {
        let s: Secret = serde_json::from_value(serde_json::json!(1234)).unwrap();
        assert_eq!(s.expose(), "1234");
        let s: Secret = serde_json::from_value(serde_json::json!("")).unwrap();
        assert!(s.is_empty());
    }
}
