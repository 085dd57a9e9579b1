//! What every component's configuration is made of (DESIGN §13).
//!
//! A component owns one typed section: a serde struct that refuses unknown
//! fields, one field per key with its doc comment, its default
//! (`#[serde_inline_default(…)]`) and its value form
//! (`#[serde_as(as = "form::Duration")]`):
//!
//! ```
//! use std::time::Duration;
//! use lachesis_config::{form, Schema};
//! use serde_inline_default::serde_inline_default;
//!
//! #[serde_inline_default]
//! #[serde_with::serde_as]
//! #[derive(Debug, serde::Serialize, serde::Deserialize)]
//! #[serde(deny_unknown_fields, expecting = "a mapping of probe keys")]
//! struct Probe {
//!     /// How often the probe runs.
//!     #[serde_inline_default(Duration::from_secs(10))]
//!     #[serde_as(as = "form::Duration")]
//!     interval: Duration,
//! }
//!
//! let probe: Probe = lachesis_config::defaults();
//! assert_eq!(probe.interval, Duration::from_secs(10));
//! let schema = Schema::of::<Probe>();
//! assert_eq!(schema.keys()[0].path, "interval");
//! assert_eq!(schema.keys()[0].label, "duration");
//! ```
//!
//! [`form`] holds the value forms (how a duration, a size, an address… is
//! written, read and shown, with the error an operator sees), [`secret`] the
//! one wrapper a secret stays in until the place that connects, and
//! [`schema`] the walk that lists a configuration's keys, their forms and
//! its sections from the types alone — what the environment layer, the
//! reference check and a reload compare by. [`layered`] reads a whole
//! configuration from its layers (file, environment, flags) with every
//! problem at once.

pub mod form;
pub mod layered;
pub mod schema;
pub mod secret;

pub use form::{Choice, Scalar};
pub use schema::{defaults, Key, Schema, Section, Shape};
pub use secret::{Secret, REDACTED};
