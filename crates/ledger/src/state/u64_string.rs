//! u64 as a decimal JSON string (DESIGN §11): `jq` and most JSON tools read
//! numbers as doubles and would silently round anything above 2^53.

use std::fmt;

use serde::de::{self, Visitor};
use serde::{Deserializer, Serializer};

/// Writes the value as a string.
#[allow(clippy::trivially_copy_pass_by_ref)] // the signature serde's `with` requires
pub fn serialize<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

struct U64Visitor;

impl Visitor<'_> for U64Visitor {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a u64 as a decimal string")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<u64, E> {
        v.parse()
            .map_err(|_| E::invalid_value(de::Unexpected::Str(v), &self))
    }

    // Hand-edited files may carry plain numbers; small ones are exact.
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
        Ok(v)
    }
}

/// Reads a decimal string (or a plain JSON integer).
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    d.deserialize_any(U64Visitor)
}
