//! A configuration's keys, read from its types: every section (a struct,
//! and whether it is optional), every key (a field with a value form),
//! in declaration order, which is the file's order.
//!
//! The walk runs the type's own `Deserialize` against a deserializer that
//! holds no data: a struct tells it its field names, an `Option` is
//! followed into, and a form tells it its name ([`crate::form`]) and stops
//! there. One run follows one path (a struct's deserializer reads its
//! fields one after another, so a stopped field would hide the rest), so
//! a type with `n` keys takes about `n` runs, once per process.
//!
//! A field that names no form is listed with an empty label, which the
//! agent's tests refuse: every key has a form.

use std::cell::RefCell;
use std::collections::BTreeMap;

use serde::de::value::{Error, MapDeserializer};
use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, Visitor,
};
use serde::forward_to_deserialize_any;

/// How the environment and `--set` give a key its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// One value, read as YAML (`0.9` a number, `10s` text).
    Scalar,
    /// Text taken verbatim (a path, a password: never read as YAML).
    Text,
    /// A list: `a,b` or `[a, b]`.
    List,
}

/// One key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    /// Dotted path, exactly as in the file (`tunables.scrape_interval`).
    pub path: String,
    /// The reference's type label (`duration`, `list of names`, `auto | tcx | tc`).
    pub label: &'static str,
    /// How a layer above the file writes it.
    pub shape: Shape,
}

/// One section (a mapping of keys).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// Dotted path (`notifications.kafka`).
    pub path: String,
    /// Off unless present (an `Option` of a struct): its keys' defaults
    /// apply only then.
    pub optional: bool,
    /// The names directly under it, in order.
    pub children: &'static [&'static str],
}

/// Every key and section of a configuration type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schema {
    keys: Vec<Key>,
    sections: Vec<Section>,
}

impl Schema {
    /// The keys and sections of `T`.
    ///
    /// # Panics
    /// If `T` is not a struct.
    #[must_use]
    pub fn of<T: DeserializeOwned>() -> Schema {
        let found = RefCell::new(Found::default());
        let mut targets: Vec<Vec<&'static str>> = vec![Vec::new()];
        while let Some(target) = targets.pop() {
            let tracer = Tracer {
                found: &found,
                path: String::new(),
                rest: &target,
                optional: false,
            };
            // The run always stops, at the target.
            let _ = T::deserialize(tracer);
            let path = target.join(".");
            if let Some((children, _)) = found.borrow().structs.get(&path) {
                for child in *children {
                    let mut next = target.clone();
                    next.push(child);
                    targets.push(next);
                }
            }
        }
        let found = found.into_inner();
        assert!(
            found.structs.contains_key(""),
            "a configuration is a struct"
        );
        let mut schema = Schema {
            keys: Vec::new(),
            sections: Vec::new(),
        };
        schema.collect(&found, "");
        schema
    }

    /// Sections and keys under `path`, depth first in declaration order.
    fn collect(&mut self, found: &Found, path: &str) {
        let (children, _) = found.structs[path];
        for child in children {
            let child_path = if path.is_empty() {
                (*child).to_owned()
            } else {
                format!("{path}.{child}")
            };
            if let Some((grand, optional)) = found.structs.get(&child_path) {
                self.sections.push(Section {
                    path: child_path.clone(),
                    optional: *optional,
                    children: grand,
                });
                self.collect(found, &child_path);
            } else {
                let name = found.leaves.get(&child_path).copied().unwrap_or_default();
                let (shape, label) = match name.as_bytes().first() {
                    Some(b'=') => (Shape::Text, &name[1..]),
                    Some(b'[') => (Shape::List, &name[1..]),
                    _ => (Shape::Scalar, name),
                };
                self.keys.push(Key {
                    path: child_path,
                    label,
                    shape,
                });
            }
        }
    }

    /// Every key, in file order.
    #[must_use]
    pub fn keys(&self) -> &[Key] {
        &self.keys
    }

    /// Every section below the top level, in file order.
    #[must_use]
    pub fn sections(&self) -> &[Section] {
        &self.sections
    }

    /// The key at `path`.
    #[must_use]
    pub fn key(&self, path: &str) -> Option<&Key> {
        self.keys.iter().find(|k| k.path == path)
    }

    /// Where `path` stands in file order.
    #[must_use]
    pub fn position(&self, path: &str) -> Option<usize> {
        self.keys.iter().position(|k| k.path == path)
    }

    /// The names directly under `section` (`""` for the top level), in
    /// file order; empty when it is no section.
    #[must_use]
    pub fn children(&self, section: &str) -> Vec<&str> {
        if section.is_empty() {
            let mut out: Vec<&str> = Vec::new();
            for k in &self.keys {
                let first = k.path.split('.').next().unwrap_or_default();
                if !out.contains(&first) {
                    out.push(first);
                }
            }
            return out;
        }
        self.sections
            .iter()
            .find(|s| s.path == section)
            .map(|s| s.children.to_vec())
            .unwrap_or_default()
    }
}

/// A value of `T` from no input at all: every field's default. The
/// `Default` of a section whose every key has one.
///
/// # Panics
/// If `T` has a key without a default.
#[must_use]
pub fn defaults<T: DeserializeOwned>() -> T {
    let empty = std::iter::empty::<(&str, &str)>();
    T::deserialize(MapDeserializer::<_, Error>::new(empty))
        .unwrap_or_else(|e| panic!("a key without a default: {e}"))
}

/// What the runs found: each struct's fields (and whether it sits in an
/// `Option`), each leaf's form name.
#[derive(Default)]
struct Found {
    structs: BTreeMap<String, (&'static [&'static str], bool)>,
    leaves: BTreeMap<String, &'static str>,
}

/// A deserializer with no data that follows `rest` down from `path`.
struct Tracer<'a> {
    found: &'a RefCell<Found>,
    path: String,
    rest: &'a [&'static str],
    optional: bool,
}

/// How every run ends.
fn stop() -> Error {
    de::Error::custom("the schema walk stops here")
}

impl<'de> Deserializer<'de> for Tracer<'_> {
    type Error = Error;

    /// A field with no form.
    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Error> {
        self.found
            .borrow_mut()
            .leaves
            .entry(self.path)
            .or_insert("");
        Err(stop())
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_some(Tracer {
            optional: true,
            ..self
        })
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        _: V,
    ) -> Result<V::Value, Error> {
        self.found.borrow_mut().leaves.insert(self.path, name);
        Err(stop())
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.found
            .borrow_mut()
            .structs
            .entry(self.path.clone())
            .or_insert((fields, self.optional));
        let Some((next, rest)) = self.rest.split_first() else {
            return Err(stop());
        };
        let path = if self.path.is_empty() {
            (*next).to_owned()
        } else {
            format!("{}.{next}", self.path)
        };
        visitor.visit_map(OneField {
            name: Some(next),
            value: Some(Tracer {
                found: self.found,
                path,
                rest,
                optional: false,
            }),
        })
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple tuple_struct map enum
        identifier ignored_any
    }
}

/// A struct's input holding the one field a run follows.
struct OneField<'a> {
    name: Option<&'static str>,
    value: Option<Tracer<'a>>,
}

impl<'de> MapAccess<'de> for OneField<'_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        self.name
            .take()
            .map(|name| seed.deserialize(name.into_deserializer()))
            .transpose()
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        seed.deserialize(self.value.take().ok_or_else(stop)?)
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Duration;

    use serde_inline_default::serde_inline_default;

    use super::*;
    use crate::form;

    #[serde_inline_default]
    #[serde_with::serde_as]
    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Outer {
        #[serde(default)]
        inner: Inner,
        extra: Option<Extra>,
        #[serde_inline_default(1)]
        #[serde_as(as = "form::Count<9>")]
        last: u32,
    }

    #[serde_inline_default]
    #[serde_with::serde_as]
    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Inner {
        #[serde_inline_default(Duration::from_secs(1))]
        #[serde_as(as = "form::Duration")]
        every: Duration,
        #[serde_as(as = "Option<form::Path>")]
        file: Option<PathBuf>,
    }

    impl Default for Inner {
        fn default() -> Self {
            defaults()
        }
    }

    #[serde_with::serde_as]
    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[expect(dead_code, reason = "the walk reads the type, not its values")]
    struct Extra {
        #[serde_as(as = "form::List<form::Broker>")]
        brokers: Vec<String>,
        #[serde(default)]
        no_form: bool,
    }

    #[test]
    fn keys_and_sections_in_declaration_order() {
        let s = Schema::of::<Outer>();
        let keys: Vec<(&str, &str, Shape)> = s
            .keys()
            .iter()
            .map(|k| (k.path.as_str(), k.label, k.shape))
            .collect();
        assert_eq!(
            keys,
            [
                ("inner.every", "duration", Shape::Scalar),
                ("inner.file", "path", Shape::Text),
                ("extra.brokers", "list of host:port", Shape::List),
                ("extra.no_form", "", Shape::Scalar),
                ("last", "integer", Shape::Scalar),
            ]
        );
        let sections: Vec<(&str, bool)> = s
            .sections()
            .iter()
            .map(|s| (s.path.as_str(), s.optional))
            .collect();
        assert_eq!(sections, [("inner", false), ("extra", true)]);
        assert_eq!(s.children(""), ["inner", "extra", "last"]);
        assert_eq!(s.children("extra"), ["brokers", "no_form"]);
        assert!(s.children("inner.every").is_empty());
        assert_eq!(s.position("last"), Some(4));
    }

    #[test]
    fn defaults_are_every_field_default() {
        let o: Outer = defaults();
        assert_eq!(o.inner.every, Duration::from_secs(1));
        assert_eq!((o.inner.file, o.extra.is_none(), o.last), (None, true, 1));
    }

    #[test]
    #[should_panic(expected = "a key without a default: missing field `brokers`")]
    fn defaults_of_a_section_with_a_required_key_is_a_bug() {
        let _: Extra = defaults();
    }
}
