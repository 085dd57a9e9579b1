//! What is wrong with a configuration: one [`Issue`] per problem, each naming
//! the key (dotted path, environment variable or flag) it is about.

use std::fmt;

/// One problem (an error, or a warning that does not stop the program).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    /// The dotted key path (`tunables.scrape_interval`), or the environment
    /// variable, flag or file the problem is in.
    pub key: String,
    /// What is wrong and what was expected. Never quotes a secret.
    pub message: String,
}

impl Issue {
    /// A problem about `key`.
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        Issue {
            key: key.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Issue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}

/// An invalid configuration: every problem found, each once.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// The problems, in the order found (file order for values).
    pub issues: Vec<Issue>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("invalid configuration: ")?;
        for (i, issue) in self.issues.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{issue}")?;
        }
        Ok(())
    }
}

impl From<Vec<Issue>> for ConfigError {
    fn from(issues: Vec<Issue>) -> Self {
        ConfigError { issues }
    }
}
