//! Value forms: how a key's value is written in the file, read (with the
//! error an operator sees, which never needs the key: the caller names it)
//! and shown again by `--check-config`.
//!
//! A field names its form with `#[serde_as(as = "form::Duration")]`; an
//! optional one with `as = "Option<form::Path>"`. Every form reads one
//! [`Scalar`] as written (or a list of them) and parses it itself, so a
//! number where text belongs is still text (a cloud named `123`) and a
//! bare `10` for a duration is refused with its reason, not serde's.
//!
//! A form hands serde its *name* (`deserialize_newtype_struct`), which
//! self-describing formats pass over and [`crate::schema`] reads: the
//! reference's type label, after `=` for text taken verbatim from the
//! environment (never read as YAML: a password starting with `*` is no
//! alias) and after `[` for a list (`a,b` in the environment).

use std::fmt;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration as StdDuration;

use serde::de::{self, DeserializeSeed, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use serde_with::{DeserializeAs, SerializeAs};

/// One YAML scalar, kept as written.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    /// `true`, `false`.
    Bool(bool),
    /// A whole number.
    Int(i128),
    /// A number with a fraction.
    Float(f64),
    /// Text.
    Str(String),
}

/// What a scalar form expects when it finds a list or a mapping.
const SCALAR_EXPECTED: &str = "a single value (text, number or true/false)";

impl Scalar {
    /// The value as an operator wrote it, for error messages.
    #[must_use]
    pub fn shown(&self) -> String {
        match self {
            Scalar::Str(s) => format!("{s:?}"),
            other => other.text(),
        }
    }

    /// The text of a scalar where text is expected (a numeric password or
    /// cloud name is still text).
    #[must_use]
    pub fn text(&self) -> String {
        match self {
            Scalar::Str(s) => s.clone(),
            Scalar::Bool(b) => b.to_string(),
            Scalar::Int(i) => i.to_string(),
            Scalar::Float(f) => f.to_string(),
        }
    }
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(Then {
            parse: |v: &Scalar| Ok(v.clone()),
        })
    }
}

/// Reads one scalar under the form's `name` and parses it; a parse error
/// becomes the value's error, worded by `parse`.
pub fn deserialize_scalar<'de, D, T>(
    d: D,
    name: &'static str,
    parse: impl FnOnce(&Scalar) -> Result<T, String>,
) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
{
    d.deserialize_newtype_struct(name, Then { parse })
}

/// A scalar, then `parse`.
struct Then<F> {
    parse: F,
}

impl<F> Then<F> {
    fn done<T, E: de::Error>(self, v: &Scalar) -> Result<T, E>
    where
        F: FnOnce(&Scalar) -> Result<T, String>,
    {
        (self.parse)(v).map_err(E::custom)
    }
}

impl<'de, T, F> Visitor<'de> for Then<F>
where
    F: FnOnce(&Scalar) -> Result<T, String>,
{
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(SCALAR_EXPECTED)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<T, D::Error> {
        let v = d.deserialize_any(Then {
            parse: |v: &Scalar| Ok(v.clone()),
        })?;
        self.done(&v)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<T, E> {
        self.done(&Scalar::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        self.done(&Scalar::Int(v.into()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        self.done(&Scalar::Int(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
        self.done(&Scalar::Float(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        self.done(&Scalar::Str(v.to_owned()))
    }
}

/// One form of a single value: its name (the reference's label, see the
/// module doc), how it is read and how it is shown.
macro_rules! scalar_form {
    ($(#[$doc:meta])* $form:ident: $ty:ty = $name:literal, $parse:expr, $show:expr) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $form;

        impl<'de> DeserializeAs<'de, $ty> for $form {
            fn deserialize_as<D: Deserializer<'de>>(d: D) -> Result<$ty, D::Error> {
                deserialize_scalar(d, $name, $parse)
            }
        }

        impl SerializeAs<$ty> for $form {
            fn serialize_as<S: Serializer>(v: &$ty, s: S) -> Result<S::Ok, S::Error> {
                ($show)(v).serialize(s)
            }
        }
    };
}

scalar_form!(
    /// `200ms`, `10s`, `5m`, `1h 30m`: see [`duration`].
    Duration: StdDuration = "duration", duration, |d: &StdDuration| show_duration(*d)
);
scalar_form!(
    /// `64MiB`, `512KiB`, `1048576`: see [`size`].
    Size: u64 = "size", size, |b: &u64| show_size(*b)
);
scalar_form!(
    /// `0.0.0.0:9847`, `[::1]:9848`: see [`address`].
    Address: SocketAddr = "address", address, ToString::to_string
);
scalar_form!(
    /// An absolute path: see [`path`].
    Path: PathBuf = "=path", path, |p: &PathBuf| p.display().to_string()
);
scalar_form!(
    /// Non-empty text: see [`text`].
    Text: String = "=string", text, Clone::clone
);
scalar_form!(
    /// A Kafka topic name: see [`topic`].
    Topic: String = "=topic", topic, Clone::clone
);
scalar_form!(
    /// A number such as `0.8` (its range is a rule of the section).
    Ratio: f64 = "ratio", ratio, |r: &f64| *r
);
scalar_form!(
    /// `true` or `false`: see [`boolean`].
    Bool: bool = "bool", boolean, |b: &bool| *b
);

/// A whole number from 1 to `MAX`: see [`count`].
#[derive(Debug)]
pub struct Count<const MAX: u64>;

impl<'de, const MAX: u64> DeserializeAs<'de, u64> for Count<MAX> {
    fn deserialize_as<D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        deserialize_scalar(d, "integer", |v| count(v, MAX))
    }
}

impl<'de, const MAX: u64> DeserializeAs<'de, u32> for Count<MAX> {
    fn deserialize_as<D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
        let n = <Count<MAX> as DeserializeAs<u64>>::deserialize_as(d)?;
        u32::try_from(n).map_err(|_| de::Error::custom(format!("{n} does not fit")))
    }
}

impl<'de, const MAX: u64> DeserializeAs<'de, usize> for Count<MAX> {
    fn deserialize_as<D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
        let n = <Count<MAX> as DeserializeAs<u64>>::deserialize_as(d)?;
        usize::try_from(n).map_err(|_| de::Error::custom(format!("{n} does not fit")))
    }
}

impl<T: Serialize, const MAX: u64> SerializeAs<T> for Count<MAX> {
    fn serialize_as<S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
        v.serialize(s)
    }
}

/// A key whose value is one of a few words (an enum).
pub trait Choice: Copy + 'static {
    /// Every value, in the order the reference lists them.
    const ALL: &'static [Self];
    /// The reference's type label: the words joined by ` | ` (each
    /// implementor's tests hold it to [`Choice::words`]).
    const LABEL: &'static str;

    /// The configuration spelling.
    fn word(self) -> &'static str;

    /// Every spelling, in order.
    #[must_use]
    fn words() -> Vec<&'static str> {
        Self::ALL.iter().map(|c| c.word()).collect()
    }

    /// The value a word names.
    fn pick(v: &Scalar) -> Result<Self, String> {
        match v {
            Scalar::Str(s) => Self::ALL.iter().copied().find(|c| c.word() == s),
            _ => None,
        }
        .ok_or_else(|| format!("{} is not one of {}", v.shown(), Self::words().join(", ")))
    }
}

/// The form of every [`Choice`].
#[derive(Debug)]
pub struct OneOf;

impl<'de, T: Choice> DeserializeAs<'de, T> for OneOf {
    fn deserialize_as<D: Deserializer<'de>>(d: D) -> Result<T, D::Error> {
        deserialize_scalar(d, T::LABEL, T::pick)
    }
}

impl<T: Choice> SerializeAs<T> for OneOf {
    fn serialize_as<S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(v.word())
    }
}

/// An item of a [`List`].
pub trait Item {
    /// The list's name (see the module doc: `[` and its label).
    const NAME: &'static str;
    /// One item, checked.
    fn parse(v: &Scalar) -> Result<String, String>;
}

/// Interface names or name prefixes: see [`interface`].
#[derive(Debug)]
pub struct Interface;
/// `RabbitMQ` exchange names: see [`exchange`].
#[derive(Debug)]
pub struct Exchange;
/// Broker addresses `host:port`: see [`broker`].
#[derive(Debug)]
pub struct Broker;

impl Item for Interface {
    const NAME: &'static str = "[list of names";
    fn parse(v: &Scalar) -> Result<String, String> {
        interface(v)
    }
}

impl Item for Exchange {
    const NAME: &'static str = "[list of exchanges";
    fn parse(v: &Scalar) -> Result<String, String> {
        exchange(v)
    }
}

impl Item for Broker {
    const NAME: &'static str = "[list of host:port";
    fn parse(v: &Scalar) -> Result<String, String> {
        broker(v)
    }
}

/// A list of items, each checked (its error is the item's, at `key[i]`),
/// none twice.
#[derive(Debug)]
pub struct List<I>(PhantomData<I>);

impl<'de, I: Item> DeserializeAs<'de, Vec<String>> for List<I> {
    fn deserialize_as<D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
        d.deserialize_newtype_struct(I::NAME, Items::<I>(PhantomData))
    }
}

impl<I> SerializeAs<Vec<String>> for List<I> {
    fn serialize_as<S: Serializer>(v: &Vec<String>, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(v)
    }
}

struct Items<I>(PhantomData<I>);

impl<'de, I: Item> Visitor<'de> for Items<I> {
    type Value = Vec<String>;

    /// serde's own word, which the configuration's error wording turns into
    /// "a list, e.g. [a, b]".
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a sequence")
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Vec<String>, D::Error> {
        d.deserialize_seq(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<String>, A::Error> {
        let mut out = Vec::new();
        while let Some(item) = seq.next_element_seed(ItemSeed::<I> {
            seen: &out,
            item: PhantomData,
        })? {
            out.push(item);
        }
        Ok(out)
    }
}

/// One item, refused when it is already in the list.
struct ItemSeed<'a, I> {
    seen: &'a [String],
    item: PhantomData<I>,
}

impl<'de, I: Item> DeserializeSeed<'de> for ItemSeed<'_, I> {
    type Value = String;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        let v = Scalar::deserialize(d)?;
        let item = I::parse(&v).map_err(de::Error::custom)?;
        if self.seen.contains(&item) {
            return Err(de::Error::custom(format!("{} is listed twice", v.shown())));
        }
        Ok(item)
    }
}

/// A duration: `200ms`, `10s`, `5m`, `1h`, `1h 30m`. A bare number is
/// refused: `10` could mean seconds or milliseconds.
pub fn duration(v: &Scalar) -> Result<StdDuration, String> {
    const EXPECTED: &str = "expected e.g. 200ms, 10s, 5m";
    match v {
        Scalar::Str(s) => humantime::parse_duration(s.trim())
            .map_err(|_| format!("{} is not a duration; {EXPECTED}", v.shown())),
        Scalar::Int(_) | Scalar::Float(_) => Err(format!("{} has no unit; {EXPECTED}", v.shown())),
        Scalar::Bool(_) => Err(format!("{} is not a duration; {EXPECTED}", v.shown())),
    }
}

/// The shortest spelling [`duration`] reads back to the same value.
#[must_use]
pub fn show_duration(d: StdDuration) -> String {
    if d.is_zero() {
        return "0s".into();
    }
    humantime::format_duration(d).to_string()
}

const KIB: u64 = 1 << 10;
const UNITS: &[(&str, u64)] = &[
    ("TiB", KIB * KIB * KIB * KIB),
    ("GiB", KIB * KIB * KIB),
    ("MiB", KIB * KIB),
    ("KiB", KIB),
    ("TB", 1_000_000_000_000),
    ("GB", 1_000_000_000),
    ("MB", 1_000_000),
    ("kB", 1_000),
    ("KB", 1_000),
    ("B", 1),
];

/// A byte size: plain bytes (`1048576`) or a whole number with a unit
/// (`512KiB`, `64MiB`, `1GiB`; decimal `kB`, `MB`, `GB` are 1000-based).
pub fn size(v: &Scalar) -> Result<u64, String> {
    let bad = || {
        format!(
            "{} is not a size; expected bytes or e.g. 512KiB, 64MiB, 1GiB",
            v.shown()
        )
    };
    match v {
        Scalar::Int(n) => u64::try_from(*n).map_err(|_| bad()),
        Scalar::Str(s) => {
            let s = s.trim();
            let digits_end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
            let (number, unit) = s.split_at(digits_end);
            let number: u64 = number.parse().map_err(|_| bad())?;
            let unit = unit.trim_start();
            let multiplier = if unit.is_empty() {
                1
            } else {
                UNITS
                    .iter()
                    .find(|(name, _)| *name == unit)
                    .map(|(_, m)| *m)
                    .ok_or_else(bad)?
            };
            number
                .checked_mul(multiplier)
                .ok_or_else(|| format!("{} is too large", v.shown()))
        }
        Scalar::Float(_) | Scalar::Bool(_) => Err(bad()),
    }
}

/// The largest binary unit that divides the size exactly (`64MiB`), else
/// bytes (`1000B`).
#[must_use]
pub fn show_size(bytes: u64) -> String {
    for (name, m) in UNITS.iter().filter(|(name, _)| name.ends_with("iB")) {
        if bytes != 0 && bytes.is_multiple_of(*m) {
            return format!("{}{name}", bytes / m);
        }
    }
    format!("{bytes}B")
}

/// An IP socket address. Host names are refused: a listener binds an
/// address, and resolving a name at start is a failure mode of its own.
pub fn address(v: &Scalar) -> Result<SocketAddr, String> {
    match v {
        Scalar::Str(s) => s.trim().parse().map_err(|_| ()),
        _ => Err(()),
    }
    .map_err(|()| {
        format!(
            "{} is not an address; expected IP:port, e.g. 0.0.0.0:9847 or [::1]:9848",
            v.shown()
        )
    })
}

/// A broker address `host:port` (a name, an IPv4 address or a bracketed
/// IPv6 address, and a non-zero port).
pub fn broker(v: &Scalar) -> Result<String, String> {
    let bad = || {
        format!(
            "{} is not a broker address; expected host:port, e.g. kafka1:9092 or [fd00::1]:9092",
            v.shown()
        )
    };
    let Scalar::Str(s) = v else { return Err(bad()) };
    let (host, port) = s.rsplit_once(':').ok_or_else(bad)?;
    let port_ok = port.parse::<u16>().is_ok_and(|p| p != 0);
    let host_ok = if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        inner.parse::<std::net::Ipv6Addr>().is_ok()
    } else {
        !host.is_empty()
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
    };
    if port_ok && host_ok {
        Ok(s.clone())
    } else {
        Err(bad())
    }
}

/// An interface name or name prefix as the kernel accepts it: 1–15 bytes,
/// no `/`, `:` or white space, not `.` or `..`.
pub fn interface(v: &Scalar) -> Result<String, String> {
    word(
        v,
        1..=15,
        |c| c != '/' && c != ':' && !c.is_whitespace(),
        "an interface name; expected 1 to 15 characters without '/', ':' or spaces",
    )
    .and_then(|s| {
        if s == "." || s == ".." {
            Err(format!("{} is not an interface name", v.shown()))
        } else {
            Ok(s)
        }
    })
}

/// A `RabbitMQ` exchange name.
pub fn exchange(v: &Scalar) -> Result<String, String> {
    word(
        v,
        1..=255,
        |c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'),
        "an exchange name; expected letters, digits and - _ . :",
    )
}

/// A Kafka topic name (the broker's rule: 1–249 of `[a-zA-Z0-9._-]`).
pub fn topic(v: &Scalar) -> Result<String, String> {
    word(
        v,
        1..=249,
        |c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'),
        "a Kafka topic name; expected 1 to 249 letters, digits and . _ -",
    )
}

/// Text of `len` bytes made of `allowed` characters; else "… is not `what`".
fn word(
    v: &Scalar,
    len: std::ops::RangeInclusive<usize>,
    allowed: impl Fn(char) -> bool,
    what: &str,
) -> Result<String, String> {
    match v {
        Scalar::Str(s) if len.contains(&s.len()) && s.chars().all(allowed) => Ok(s.clone()),
        _ => Err(format!("{} is not {what}", v.shown())),
    }
}

/// An absolute path: the daemon's working directory is no reference point.
pub fn path(v: &Scalar) -> Result<PathBuf, String> {
    match v {
        Scalar::Str(s) if s.starts_with('/') => Ok(PathBuf::from(s)),
        _ => Err(format!(
            "{} is not an absolute path; expected a path starting with /",
            v.shown()
        )),
    }
}

/// Non-empty text.
pub fn text(v: &Scalar) -> Result<String, String> {
    let t = v.text();
    if t.is_empty() {
        Err("is empty; expected some text".into())
    } else {
        Ok(t)
    }
}

/// `true` or `false` (a quoted `"true"` is accepted, as from the
/// environment; `yes`/`on` are not).
pub fn boolean(v: &Scalar) -> Result<bool, String> {
    match v {
        Scalar::Bool(b) => Ok(*b),
        Scalar::Str(s) if s == "true" => Ok(true),
        Scalar::Str(s) if s == "false" => Ok(false),
        _ => Err(format!("{} is not true or false", v.shown())),
    }
}

/// A finite number (range checks are the caller's).
pub fn ratio(v: &Scalar) -> Result<f64, String> {
    let n = match v {
        #[expect(clippy::cast_precision_loss, reason = "a ratio is a small number")]
        Scalar::Int(i) => Some(*i as f64),
        Scalar::Float(f) => Some(*f),
        Scalar::Str(s) => s.trim().parse::<f64>().ok(),
        Scalar::Bool(_) => None,
    };
    n.filter(|f| f.is_finite())
        .ok_or_else(|| format!("{} is not a number; expected e.g. 0.8", v.shown()))
}

/// A whole number from 1 to `max`.
pub fn count(v: &Scalar, max: u64) -> Result<u64, String> {
    let n = match v {
        Scalar::Int(i) => Some(*i),
        Scalar::Str(s) => s.trim().parse::<i128>().ok(),
        Scalar::Float(_) | Scalar::Bool(_) => None,
    };
    let n = n.ok_or_else(|| format!("{} is not a whole number", v.shown()))?;
    u64::try_from(n)
        .ok()
        .filter(|n| (1..=max).contains(n))
        .ok_or_else(|| format!("{n} is out of range; expected 1 to {max}"))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn s(text: &str) -> Scalar {
        Scalar::Str(text.into())
    }

    #[test]
    fn durations() {
        for (text, want) in [
            ("200ms", Duration::from_millis(200)),
            ("10s", Duration::from_secs(10)),
            ("5m", Duration::from_mins(5)),
            ("1h", Duration::from_hours(1)),
            ("1h 30m", Duration::from_mins(90)),
            ("0s", Duration::ZERO),
        ] {
            assert_eq!(duration(&s(text)).unwrap(), want, "{text}");
            // What is shown reads back to the same value.
            assert_eq!(duration(&s(&show_duration(want))).unwrap(), want);
        }
        assert_eq!(show_duration(Duration::from_mins(5)), "5m");
        assert_eq!(show_duration(Duration::from_millis(1500)), "1s 500ms");
        assert_eq!(
            duration(&s("10 parsecs")).unwrap_err(),
            "\"10 parsecs\" is not a duration; expected e.g. 200ms, 10s, 5m"
        );
        assert_eq!(
            duration(&Scalar::Int(10)).unwrap_err(),
            "10 has no unit; expected e.g. 200ms, 10s, 5m"
        );
        for bad in ["", "-5s", "s", "ten seconds", "5 m s"] {
            assert!(duration(&s(bad)).is_err(), "{bad}");
        }
        assert!(duration(&Scalar::Bool(true)).is_err());
    }

    #[test]
    fn sizes() {
        for (v, want) in [
            (s("64MiB"), 64 << 20),
            (s("512KiB"), 512 << 10),
            (s("1GiB"), 1 << 30),
            (s("2TiB"), 2 << 40),
            (s("64 MiB"), 64 << 20),
            (s("1048576"), 1 << 20),
            (s("100B"), 100),
            (s("5MB"), 5_000_000),
            (s("3kB"), 3000),
            (Scalar::Int(4096), 4096),
        ] {
            assert_eq!(size(&v).unwrap(), want, "{v:?}");
        }
        for (bytes, shown) in [
            (64 << 20, "64MiB"),
            (1 << 30, "1GiB"),
            (3072, "3KiB"),
            (1536, "1536B"),
            (1000, "1000B"),
            (0, "0B"),
        ] {
            assert_eq!(show_size(bytes), shown);
            assert_eq!(size(&s(shown)).unwrap(), bytes);
        }
        assert_eq!(
            size(&s("64M")).unwrap_err(),
            "\"64M\" is not a size; expected bytes or e.g. 512KiB, 64MiB, 1GiB"
        );
        for bad in [
            s("1.5GiB"),
            s("MiB"),
            s("-1MiB"),
            s("64 parsecs"),
            s(""),
            Scalar::Int(-1),
            Scalar::Float(1.5),
            Scalar::Bool(false),
        ] {
            assert!(size(&bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            size(&s("99999999TiB")).unwrap_err(),
            "\"99999999TiB\" is too large"
        );
    }

    #[test]
    fn addresses() {
        assert_eq!(
            address(&s("0.0.0.0:9847")).unwrap(),
            "0.0.0.0:9847".parse().unwrap()
        );
        assert_eq!(
            address(&s("[::1]:9848")).unwrap(),
            "[::1]:9848".parse().unwrap()
        );
        for bad in [
            "localhost:9848",
            "127.0.0.1",
            "::1:9848",
            "1.2.3.4:70000",
            "",
        ] {
            let e = address(&s(bad)).unwrap_err();
            assert!(e.contains("is not an address; expected IP:port"), "{e}");
        }
        assert!(address(&Scalar::Int(9847)).is_err());
    }

    #[test]
    fn brokers() {
        for ok in [
            "kafka1:9092",
            "10.0.0.5:9093",
            "[fd00::1]:9092",
            "k_1.example.org:1",
        ] {
            assert_eq!(broker(&s(ok)).unwrap(), ok);
        }
        for bad in [
            "kafka1",
            ":9092",
            "kafka1:0",
            "kafka1:x",
            "[fd00::1",
            "fd00::1:9092",
            "a b:1",
        ] {
            assert!(broker(&s(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn names() {
        assert_eq!(interface(&s("tap")).unwrap(), "tap");
        assert_eq!(interface(&s("vnet-long-name1")).unwrap(), "vnet-long-name1");
        for bad in ["", "sixteen-chars-xx", "a/b", "eth0:1", "a b", ".", ".."] {
            assert!(interface(&s(bad)).is_err(), "{bad}");
        }
        assert!(interface(&Scalar::Int(0)).is_err());
        assert_eq!(exchange(&s("neutron")).unwrap(), "neutron");
        assert!(exchange(&s("")).is_err());
        assert!(exchange(&s("bad name")).is_err());
        assert_eq!(
            topic(&s("notifications.info")).unwrap(),
            "notifications.info"
        );
        assert!(topic(&s("no/slashes")).is_err());
        assert!(topic(&s(&"x".repeat(250))).is_err());
    }

    #[test]
    fn paths_text_booleans() {
        assert_eq!(path(&s("/var/lib/x")).unwrap(), PathBuf::from("/var/lib/x"));
        assert!(path(&s("state.json")).is_err());
        assert!(path(&Scalar::Int(1)).is_err());
        assert_eq!(text(&Scalar::Int(42)).unwrap(), "42");
        assert!(text(&s("")).is_err());
        assert!(boolean(&Scalar::Bool(true)).unwrap());
        assert!(!boolean(&s("false")).unwrap());
        for bad in [s("yes"), s("on"), Scalar::Int(1)] {
            assert!(boolean(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn numbers_and_choices() {
        assert!((ratio(&Scalar::Float(0.8)).unwrap() - 0.8).abs() < f64::EPSILON);
        assert!((ratio(&s("0.75")).unwrap() - 0.75).abs() < f64::EPSILON);
        assert!(ratio(&s("NaN")).is_err());
        assert!(ratio(&s("80%")).is_err());
        assert_eq!(count(&Scalar::Int(1000), 1_000_000).unwrap(), 1000);
        assert_eq!(count(&s("16"), 255).unwrap(), 16);
        assert_eq!(
            count(&Scalar::Int(0), 255).unwrap_err(),
            "0 is out of range; expected 1 to 255"
        );
        assert!(count(&Scalar::Int(256), 255).is_err());
        assert!(count(&Scalar::Float(1.5), 255).is_err());
        assert_eq!(Mode::pick(&s("tcx")).unwrap(), Mode::Tcx);
        assert_eq!(
            Mode::pick(&s("xdp")).unwrap_err(),
            "\"xdp\" is not one of auto, tcx, tc"
        );
        assert_eq!(Mode::LABEL, Mode::words().join(" | "));
    }

    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Mode {
        Auto,
        Tcx,
        Tc,
    }

    impl Choice for Mode {
        const ALL: &'static [Self] = &[Mode::Auto, Mode::Tcx, Mode::Tc];
        const LABEL: &'static str = "auto | tcx | tc";
        fn word(self) -> &'static str {
            match self {
                Mode::Auto => "auto",
                Mode::Tcx => "tcx",
                Mode::Tc => "tc",
            }
        }
    }

    /// The forms through serde, as a section reads them: each error is the
    /// form's own, every item of a list is checked and none may repeat.
    #[test]
    fn forms_read_through_serde() {
        #[serde_with::serde_as]
        #[derive(Debug, serde::Deserialize, serde::Serialize)]
        struct Probe {
            #[serde_as(as = "super::Duration")]
            every: StdDuration,
            #[serde_as(as = "List<Interface>")]
            names: Vec<String>,
            #[serde_as(as = "Option<Path>")]
            file: Option<PathBuf>,
            #[serde_as(as = "OneOf")]
            mode: Mode,
        }
        let read = |json: serde_json::Value| {
            serde_json::from_value::<Probe>(json).map_err(|e| e.to_string())
        };
        let p = read(serde_json::json!({
            "every": "90s", "names": ["tap", "vnet"], "file": null, "mode": "tc"
        }))
        .unwrap();
        assert_eq!(p.every, StdDuration::from_secs(90));
        assert_eq!(p.names, ["tap", "vnet"]);
        assert_eq!((p.file, p.mode), (None, Mode::Tc));
        assert_eq!(
            serde_json::to_value(
                read(serde_json::json!({
                    "every": "1500ms", "names": [], "file": "/x", "mode": "auto"
                }))
                .unwrap()
            )
            .unwrap(),
            serde_json::json!({"every": "1s 500ms", "names": [], "file": "/x", "mode": "auto"})
        );
        let e = read(serde_json::json!({"every": 10, "names": [], "mode": "tc"})).unwrap_err();
        assert_eq!(e, "10 has no unit; expected e.g. 200ms, 10s, 5m");
        let e = read(serde_json::json!({"every": "1s", "names": ["tap", "tap"], "mode": "tc"}))
            .unwrap_err();
        assert_eq!(e, "\"tap\" is listed twice");
        let e = read(serde_json::json!({"every": "1s", "names": "tap", "mode": "tc"})).unwrap_err();
        assert_eq!(e, "invalid type: string \"tap\", expected a sequence");
        let e = read(serde_json::json!({"every": ["1s"], "names": [], "mode": "tc"})).unwrap_err();
        assert_eq!(
            e,
            "invalid type: sequence, expected a single value (text, number or true/false)"
        );
    }
}
