//! Parsers and renderers for the value forms of the file: durations, byte
//! sizes, addresses, names, numbers. Each parser takes one [`Scalar`] and
//! says what it expected; the caller adds the key's path.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::raw::Scalar;

/// A duration: `200ms`, `10s`, `5m`, `1h`, `1h 30m`. A bare number is
/// refused: `10` could mean seconds or milliseconds.
pub(crate) fn duration(v: &Scalar) -> Result<Duration, String> {
    const EXPECTED: &str = "expected e.g. 200ms, 10s, 5m";
    match v {
        Scalar::Str(s) => humantime::parse_duration(s.trim())
            .map_err(|_| format!("{} is not a duration; {EXPECTED}", v.shown())),
        Scalar::Int(_) | Scalar::Float(_) => Err(format!("{} has no unit; {EXPECTED}", v.shown())),
        Scalar::Bool(_) => Err(format!("{} is not a duration; {EXPECTED}", v.shown())),
    }
}

/// The shortest spelling [`duration`] reads back to the same value.
pub(crate) fn show_duration(d: Duration) -> String {
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
pub(crate) fn size(v: &Scalar) -> Result<u64, String> {
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
pub(crate) fn show_size(bytes: u64) -> String {
    for (name, m) in UNITS.iter().filter(|(name, _)| name.ends_with("iB")) {
        if bytes != 0 && bytes.is_multiple_of(*m) {
            return format!("{}{name}", bytes / m);
        }
    }
    format!("{bytes}B")
}

/// An IP socket address. Host names are refused: a listener binds an
/// address, and resolving a name at start is a failure mode of its own.
pub(crate) fn address(v: &Scalar) -> Result<SocketAddr, String> {
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
pub(crate) fn broker(v: &Scalar) -> Result<String, String> {
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
pub(crate) fn interface(v: &Scalar) -> Result<String, String> {
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
pub(crate) fn exchange(v: &Scalar) -> Result<String, String> {
    word(
        v,
        1..=255,
        |c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'),
        "an exchange name; expected letters, digits and - _ . :",
    )
}

/// A Kafka topic name (the broker's rule: 1–249 of `[a-zA-Z0-9._-]`).
pub(crate) fn topic(v: &Scalar) -> Result<String, String> {
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
pub(crate) fn path(v: &Scalar) -> Result<PathBuf, String> {
    match v {
        Scalar::Str(s) if s.starts_with('/') => Ok(PathBuf::from(s)),
        _ => Err(format!(
            "{} is not an absolute path; expected a path starting with /",
            v.shown()
        )),
    }
}

/// Non-empty text.
pub(crate) fn text(v: &Scalar) -> Result<String, String> {
    let t = v.text();
    if t.is_empty() {
        Err("is empty; expected some text".into())
    } else {
        Ok(t)
    }
}

/// `true` or `false` (a quoted `"true"` is accepted, as from the
/// environment; `yes`/`on` are not).
pub(crate) fn boolean(v: &Scalar) -> Result<bool, String> {
    match v {
        Scalar::Bool(b) => Ok(*b),
        Scalar::Str(s) if s == "true" => Ok(true),
        Scalar::Str(s) if s == "false" => Ok(false),
        _ => Err(format!("{} is not true or false", v.shown())),
    }
}

/// A finite number (range checks are the caller's).
pub(crate) fn ratio(v: &Scalar) -> Result<f64, String> {
    let n = match v {
        #[allow(clippy::cast_precision_loss)] // a ratio is a small number
        Scalar::Int(i) => Some(*i as f64),
        Scalar::Float(f) => Some(*f),
        Scalar::Str(s) => s.trim().parse::<f64>().ok(),
        Scalar::Bool(_) => None,
    };
    n.filter(|f| f.is_finite())
        .ok_or_else(|| format!("{} is not a number; expected e.g. 0.8", v.shown()))
}

/// A whole number from 1 to `max`.
pub(crate) fn count(v: &Scalar, max: u64) -> Result<u64, String> {
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

/// One of `words`.
pub(crate) fn choice(v: &Scalar, words: &'static [&'static str]) -> Result<&'static str, String> {
    let found = match v {
        Scalar::Str(s) => words.iter().find(|w| **w == s.as_str()),
        _ => None,
    };
    found
        .copied()
        .ok_or_else(|| format!("{} is not one of {}", v.shown(), words.join(", ")))
}

#[cfg(test)]
mod tests {
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
        assert_eq!(choice(&s("tcx"), &["auto", "tcx", "tc"]).unwrap(), "tcx");
        assert_eq!(
            choice(&s("xdp"), &["auto", "tcx", "tc"]).unwrap_err(),
            "\"xdp\" is not one of auto, tcx, tc"
        );
    }
}
