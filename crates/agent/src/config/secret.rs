//! Values that must never be printed: the Kafka SASL password here, the
//! `RabbitMQ` URL's passwords in [`lachesis_notify::RabbitUrl`], which
//! parses that URL for the consumer and shows it redacted the same way.
//! `Debug` and `Display` show [`REDACTED`]; the value is reached only
//! through an explicit `expose`.

use std::fmt;

/// What a secret shows instead of itself (the same word as in a redacted
/// broker URL).
pub use lachesis_notify::REDACTED;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_never_shows_itself() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s} {s:?}"), "REDACTED REDACTED");
        assert_eq!(s.expose(), "hunter2");
    }
}
