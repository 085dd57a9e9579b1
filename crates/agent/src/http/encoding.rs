//! `/metrics` compression: gzip when the scraper's `Accept-Encoding` allows
//! it (Prometheus sends `Accept-Encoding: gzip` on every scrape), the body
//! as it is otherwise. A node's billing families are thousands of lines
//! that repeat the same label names and ids; gzip takes them to a fraction
//! of their size on the wire (docs/agent-http.md, "Compression").

use std::io::Write as _;

use flate2::write::GzEncoder;
use flate2::Compression;

use super::negotiate::weighted;

/// Whether a request whose `Accept-Encoding` header values are `values`
/// (several headers read as one comma-separated list) takes a gzip body.
///
/// RFC 9110 §12.5.3: `gzip` (or its alias `x-gzip`) with a non-zero
/// quality, or — when neither is named — `*` with a non-zero quality. A
/// coding named with `q=0` is refused even when `*` allows everything. No
/// header, or one that names only other codings, means the plain body.
#[must_use]
pub fn accepts_gzip<'a>(values: impl IntoIterator<Item = &'a str>) -> bool {
    let mut gzip: Option<bool> = None;
    let mut any: Option<bool> = None;
    for (coding, q) in weighted(values) {
        let slot = match coding.as_str() {
            "gzip" | "x-gzip" => &mut gzip,
            "*" => &mut any,
            _ => continue,
        };
        *slot = Some(slot.unwrap_or(false) || q > 0);
    }
    gzip.or(any).unwrap_or(false)
}

/// `body` as one gzip member, at level 1 (the fastest): the demo's
/// exposition shrinks 8× at it (70 127 → 8 711 bytes) against about 11×
/// at the default level 6, which takes about four times as long
/// (docs/agent-http.md, "Compression"); the compression is on every
/// scrape's critical path, and a node's exposition grows with its VMs.
#[must_use]
pub fn gzip(body: &[u8]) -> Vec<u8> {
    let mut enc = GzEncoder::new(Vec::with_capacity(body.len() / 8 + 64), Compression::fast());
    // Writing into a Vec cannot fail.
    enc.write_all(body).expect("gzip into memory");
    enc.finish().expect("gzip into memory")
}

#[cfg(test)]
mod tests {
    use std::io::Read as _;

    use super::*;

    #[test]
    fn what_prometheus_sends_takes_gzip() {
        for header in [
            "gzip",
            "GZIP",
            "x-gzip",
            "gzip, deflate, br",
            "deflate, gzip;q=0.5",
            "*",
            "identity, *;q=0.1",
            "gzip;q=1.000",
        ] {
            assert!(accepts_gzip([header]), "{header}");
        }
    }

    #[test]
    fn no_header_or_a_refusal_stays_plain() {
        for header in [
            "",
            "identity",
            "deflate, br",
            "gzip;q=0",
            "gzip;q=0.000, *",
            "*;q=0",
            "gzip;q=high",
            "gzip;q=2",
        ] {
            assert!(!accepts_gzip([header]), "{header}");
        }
        assert!(!accepts_gzip([]));
    }

    #[test]
    fn several_headers_are_one_list() {
        assert!(accepts_gzip(["identity", "gzip"]));
        assert!(!accepts_gzip(["*", "gzip;q=0"]));
    }

    #[test]
    fn gzip_round_trips() {
        let text = "lachesis_bytes_total{zone=\"external\"} 1\n".repeat(1000);
        let packed = gzip(text.as_bytes());
        assert!(packed.len() < text.len() / 10, "{}", packed.len());
        let mut out = String::new();
        flate2::read::GzDecoder::new(packed.as_slice())
            .read_to_string(&mut out)
            .unwrap();
        assert_eq!(out, text);
    }
}
