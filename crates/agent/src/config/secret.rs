//! Values that must never be printed: the `RabbitMQ` URL's password and the
//! Kafka SASL password. `Debug` and `Display` show [`REDACTED`]; the value is
//! reached only through an explicit `expose`.

use std::fmt;

use url::Url;

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

/// An `amqp://` or `amqps://` URL whose password is a secret.
#[derive(Clone, PartialEq, Eq)]
pub struct AmqpUrl(Url);

impl AmqpUrl {
    /// Parses and checks the scheme and host. The error never quotes the
    /// input: it may hold a password.
    pub fn parse(text: &str) -> Result<Self, String> {
        const EXPECTED: &str =
            "expected amqp://user:password@host:5672/vhost or amqps://… (value not shown: it may hold a password)";
        let url = Url::parse(text).map_err(|e| format!("not a URL ({e}); {EXPECTED}"))?;
        if !matches!(url.scheme(), "amqp" | "amqps") {
            return Err(format!(
                "scheme {:?} is not amqp or amqps; {EXPECTED}",
                url.scheme()
            ));
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(format!("no host; {EXPECTED}"));
        }
        Ok(AmqpUrl(url))
    }

    /// The URL with its password, for the one place that connects.
    #[must_use]
    pub fn expose(&self) -> &Url {
        &self.0
    }

    /// `amqps://`: the connection uses TLS.
    #[must_use]
    pub fn is_tls(&self) -> bool {
        self.0.scheme() == "amqps"
    }

    /// The URL with any password replaced by [`REDACTED`].
    #[must_use]
    pub fn redacted(&self) -> String {
        let mut shown = self.0.clone();
        if shown.password().is_some() {
            // Cannot fail: the URL has a host (checked at parse), so it can
            // carry credentials.
            let _ = shown.set_password(Some(REDACTED));
        }
        shown.into()
    }
}

impl fmt::Debug for AmqpUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AmqpUrl({})", self.redacted())
    }
}

impl fmt::Display for AmqpUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
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

    #[test]
    fn amqp_url_password_redacted_everywhere_but_expose() {
        let u = AmqpUrl::parse("amqps://lachesis:s3cr%40t@mq.example:5671/openstack").unwrap();
        assert!(u.is_tls());
        assert_eq!(
            u.redacted(),
            "amqps://lachesis:REDACTED@mq.example:5671/openstack"
        );
        assert_eq!(u.to_string(), u.redacted());
        assert!(!format!("{u:?}").contains("s3cr"));
        assert_eq!(u.expose().password(), Some("s3cr%40t"));
        // No password: nothing to hide, nothing changed.
        let plain = AmqpUrl::parse("amqp://guest@localhost/").unwrap();
        assert!(!plain.is_tls());
        assert_eq!(plain.redacted(), "amqp://guest@localhost/");
    }

    #[test]
    fn amqp_url_errors_never_quote_the_input() {
        for bad in [
            "http://u:topsecret@host/",
            "amqp://u:topsecret@",
            "u:topsecret@host:5672",
            "amqp://u:topsecret@host:99999/",
        ] {
            let err = AmqpUrl::parse(bad).unwrap_err();
            assert!(!err.contains("topsecret"), "{bad} → {err}");
            assert!(err.contains("expected amqp://"), "{bad} → {err}");
        }
    }
}
