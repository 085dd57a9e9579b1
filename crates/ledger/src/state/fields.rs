//! JSON field encodings that keep the state file readable with `jq`: MACs as
//! `aa:bb:…`, zone/direction/L4 as their stable labels (DESIGN §3).

use std::fmt;

use lachesis_abi::{Direction, L4Class, Mac, Zone};
use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A MAC written as text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MacField(pub Mac);

impl Serialize for MacField {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
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
