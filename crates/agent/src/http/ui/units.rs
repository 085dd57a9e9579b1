//! Numbers and times as people read them on the pages: byte sizes in
//! binary units beside the exact count, ages relative to now beside the
//! UTC time (in the tooltip).

use std::time::{Duration, SystemTime};

use super::html::Html;

/// `n` bytes in binary units, one decimal from KiB up: `999 B`,
/// `1.5 KiB`, `12.3 MiB`.
pub(super) fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    #[expect(
        clippy::cast_precision_loss,
        reason = "an f64's 53 bits are far more than one decimal needs"
    )]
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// A duration in its two largest units, a zero second one left out:
/// `300 ms`, `7 s`, `3 min 20 s`, `1 min`, `2 h 5 min`, `3 d 4 h`.
pub(super) fn duration(d: Duration) -> String {
    let s = d.as_secs();
    let (major, unit, minor, minor_unit) = match s {
        0 => return format!("{} ms", d.as_millis()),
        1..60 => return format!("{s} s"),
        60..3600 => (s / 60, "min", s % 60, "s"),
        3600..86_400 => (s / 3600, "h", s % 3600 / 60, "min"),
        _ => (s / 86_400, "d", s % 86_400 / 3600, "h"),
    };
    if minor == 0 {
        format!("{major} {unit}")
    } else {
        format!("{major} {unit} {minor} {minor_unit}")
    }
}

/// How long before `now` `then` was (`just now` when it is not before:
/// a clock set back).
pub(super) fn ago(then: SystemTime, now: SystemTime) -> String {
    match now.duration_since(then) {
        Ok(d) if d.as_secs() > 0 => format!("{} ago", duration(d)),
        _ => "just now".to_owned(),
    }
}

/// `then` relative to now, its UTC time in the tooltip.
pub(super) fn when(h: &mut Html, then: SystemTime) {
    h.raw("<span")
        .attr("title", humantime::format_rfc3339_seconds(then))
        .raw(">")
        .text(ago(then, SystemTime::now()))
        .raw("</span>");
}

/// How long since `then` (`for 3 min`), its UTC time in the tooltip.
pub(super) fn lasting(h: &mut Html, then: SystemTime) {
    let d = SystemTime::now()
        .duration_since(then)
        .unwrap_or(Duration::ZERO);
    h.raw("<span")
        .attr(
            "title",
            format_args!("since {}", humantime::format_rfc3339_seconds(then)),
        )
        .raw(">for ")
        .text(duration(Duration::from_secs(d.as_secs())))
        .raw("</span>");
}

/// The exact count (what billing compares) over its size in binary units.
pub(super) fn bytes_cell(h: &mut Html, attr: &'static str, n: u64, packets: u64) {
    h.raw("<td class=\"num\"")
        .attr(attr, n)
        .raw(">")
        .text(format_args!("{n} B"))
        .raw("<br><span class=\"muted\">");
    // Below 1 KiB the exact count is the size already.
    if n >= 1024 {
        h.text(bytes(n)).raw(" · ");
    }
    let s = if packets == 1 { "" } else { "s" };
    h.text(format_args!("{packets} packet{s}"))
        .raw("</span></td>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_in_binary_units() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1024), "1.0 KiB");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(5 * 1024 * 1024 + 300 * 1024), "5.3 MiB");
        assert_eq!(bytes(u64::MAX), "16.0 EiB");
    }

    #[test]
    fn durations_in_their_two_largest_units() {
        let s = Duration::from_secs;
        assert_eq!(duration(s(0)), "0 ms");
        assert_eq!(duration(Duration::from_millis(300)), "300 ms");
        assert_eq!(duration(s(1)), "1 s");
        assert_eq!(duration(s(59)), "59 s");
        assert_eq!(duration(s(200)), "3 min 20 s");
        assert_eq!(duration(s(60)), "1 min");
        assert_eq!(duration(s(7200)), "2 h");
        assert_eq!(duration(s(7500)), "2 h 5 min");
        assert_eq!(duration(s(3 * 86_400 + 4 * 3600 + 59)), "3 d 4 h");
    }

    #[test]
    fn ages_count_back_from_now() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        assert_eq!(ago(now - Duration::from_secs(42), now), "42 s ago");
        assert_eq!(ago(now, now), "just now");
        assert_eq!(ago(now + Duration::from_secs(5), now), "just now");
    }
}
