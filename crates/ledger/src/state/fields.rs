//! JSON field encodings that keep the state file readable with `jq`: u64
//! values as decimal strings, MACs as `aa:bb:…`, zone/direction/L4 as their
//! stable labels (DESIGN §3, §11). They live with the serialised types: the
//! ledger's own types know nothing of how they are written.

use std::fmt;

use lachesis_abi::{Direction, L4Class, Mac, Zone};
use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// u64 as a decimal JSON string (DESIGN §11): `jq` and most JSON tools read
/// numbers as doubles and would silently round anything above 2^53.
pub(super) mod u64_string {
    use std::fmt;

    use serde::de::{self, Visitor};
    use serde::{Deserializer, Serializer};

    /// Writes the value as a string.
    #[expect(
        clippy::trivially_copy_pass_by_ref,
        reason = "the signature serde's `with` requires"
    )]
    pub fn serialize<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
        // itoa straight into a stack buffer: the fmt machinery dominated flush time.
        s.serialize_str(itoa::Buffer::new().format(*v))
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
}

/// [`crate::Counts`] as `{"bytes": "…", "packets": "…"}`.
pub(super) mod counts {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::counts::Counts;

    #[derive(Serialize, Deserialize)]
    struct Repr {
        #[serde(with = "super::u64_string")]
        bytes: u64,
        #[serde(with = "super::u64_string")]
        packets: u64,
    }

    /// Writes both parts as decimal strings.
    pub fn serialize<S: Serializer>(c: &Counts, s: S) -> Result<S::Ok, S::Error> {
        Repr {
            bytes: c.bytes,
            packets: c.packets,
        }
        .serialize(s)
    }

    /// Reads both parts.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Counts, D::Error> {
        let r = Repr::deserialize(d)?;
        Ok(Counts::new(r.bytes, r.packets))
    }
}

/// [`counts`] for a member that older schemas have and newer ones omit.
pub(super) mod opt_counts {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::counts::Counts;

    /// Writes the counts when present (a skipped `None` never gets here).
    #[expect(clippy::ref_option, reason = "the signature serde's `with` requires")]
    pub fn serialize<S: Serializer>(c: &Option<Counts>, s: S) -> Result<S::Ok, S::Error> {
        match c {
            Some(c) => super::counts::serialize(c, s),
            None => s.serialize_none(),
        }
    }

    /// Reads the counts; absent members take the field's default (`None`).
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Counts>, D::Error> {
        #[derive(Deserialize)]
        struct Wrap(#[serde(with = "super::counts")] Counts);
        Ok(Some(Wrap::deserialize(d)?.0))
    }
}

/// A MAC written as text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MacField(pub Mac);

impl Serialize for MacField {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // Same text as `Mac`'s Display, without the fmt machinery (hot in flushes).
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut buf = [b':'; 17];
        for (i, b) in self.0 .0.iter().enumerate() {
            buf[i * 3] = HEX[usize::from(b >> 4)];
            buf[i * 3 + 1] = HEX[usize::from(b & 0xf)];
        }
        // Only ASCII hex digits and colons were written.
        s.serialize_str(std::str::from_utf8(&buf).unwrap_or_default())
    }
}

struct MacVisitor;

impl Visitor<'_> for MacVisitor {
    type Value = MacField;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a MAC address like \"02:00:00:00:00:01\"")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<MacField, E> {
        v.parse()
            .map(MacField)
            .map_err(|_| E::invalid_value(de::Unexpected::Str(v), &self))
    }
}

impl<'de> Deserialize<'de> for MacField {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(MacVisitor)
    }
}

macro_rules! code_field {
    ($field:ident, $ty:ty, $what:literal) => {
        /// A stable code written as its label.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $field(pub $ty);

        impl Serialize for $field {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.0.label())
            }
        }

        impl<'de> Deserialize<'de> for $field {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl Visitor<'_> for V {
                    type Value = $field;
                    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                        f.write_str($what)
                    }
                    fn visit_str<E: de::Error>(self, v: &str) -> Result<$field, E> {
                        <$ty>::from_label(v)
                            .map($field)
                            .ok_or_else(|| E::invalid_value(de::Unexpected::Str(v), &self))
                    }
                }
                d.deserialize_str(V)
            }
        }
    };
}

code_field!(
    ZoneField,
    Zone,
    "a zone label (external, same_tenant, other_tenant, infra, miss, shared, multicast)"
);
code_field!(DirectionField, Direction, "a direction label (tx, rx)");
code_field!(
    L4Field,
    L4Class,
    "an L4 class label (reserved, tcp, udp, icmp, other)"
);
