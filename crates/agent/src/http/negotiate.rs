//! `/metrics` content negotiation (DESIGN §10): `OpenMetrics` 1.0 when the
//! scraper asks for `application/openmetrics-text`, else Prometheus text
//! 0.0.4, which every scraper reads. Never a 406: a scraper that accepts
//! nothing we know still gets the text format.

use lachesis_ledger::Format;

/// The format for a request whose `Accept` header values are `accept`
/// (several headers are read as one comma-separated list).
///
/// `OpenMetrics` wins when some `application/openmetrics-text` range has a
/// non-zero quality and no range matching `text/plain` has a strictly
/// higher one; a tie goes to `OpenMetrics`, the richer format. Prometheus
/// itself sends `application/openmetrics-text;…;q=0.5,…,text/plain;…;q=0.4`.
#[must_use]
pub fn negotiate<'a>(accept: impl IntoIterator<Item = &'a str>) -> Format {
    let mut openmetrics: Option<u16> = None;
    let mut text: Option<u16> = None;
    for (media, q) in weighted(accept) {
        let slot = match media.as_str() {
            "application/openmetrics-text" => &mut openmetrics,
            "text/plain" | "text/*" | "*/*" => &mut text,
            _ => continue,
        };
        *slot = Some(slot.map_or(q, |s| s.max(q)));
    }
    match openmetrics {
        Some(om) if om > 0 && om >= text.unwrap_or(0) => Format::OpenMetrics,
        _ => Format::PrometheusText,
    }
}

/// The elements of an RFC 9110 weighted list (`Accept`, `Accept-Encoding`)
/// spread over header values `values` (several headers read as one
/// comma-separated list): each name in lower case with its quality in
/// thousandths (1000 without a `q`). An element whose quality cannot be
/// read is dropped, as RFC 9110 would a malformed one.
pub(super) fn weighted<'a>(values: impl IntoIterator<Item = &'a str>) -> Vec<(String, u16)> {
    values
        .into_iter()
        .flat_map(|h| h.split(','))
        .filter_map(|element| {
            let mut parts = element.split(';');
            let name = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            let q = parts
                .filter_map(|p| p.split_once('='))
                .find(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
                .map_or(Some(1000), |(_, v)| quality(v.trim()))?;
            Some((name, q))
        })
        .collect()
}

/// An RFC 9110 `qvalue` (`0`, `0.5`, `1.000`) in thousandths.
fn quality(v: &str) -> Option<u16> {
    let (int, frac) = v.split_once('.').unwrap_or((v, ""));
    if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let thousandths = match int {
        "0" => format!("{frac:0<3}").parse::<u16>().ok()?,
        "1" if frac.bytes().all(|b| b == b'0') => 1000,
        _ => return None,
    };
    Some(thousandths)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What Prometheus 2.x sends by default.
    const PROMETHEUS: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

    #[test]
    fn no_accept_header_gets_prometheus_text() {
        assert_eq!(negotiate([]), Format::PrometheusText);
        assert_eq!(negotiate([""]), Format::PrometheusText);
    }

    #[test]
    fn a_scraper_asking_for_openmetrics_gets_it() {
        for accept in [
            PROMETHEUS,
            "application/openmetrics-text",
            "Application/OpenMetrics-Text; version=1.0.0; charset=utf-8",
            "text/plain;q=0.4, application/openmetrics-text;q=0.6",
            // A tie goes to OpenMetrics.
            "text/plain;q=0.5,application/openmetrics-text;q=0.5",
        ] {
            assert_eq!(negotiate([accept]), Format::OpenMetrics, "{accept}");
        }
    }

    #[test]
    fn text_wins_without_openmetrics_or_with_a_higher_quality() {
        for accept in [
            "text/plain",
            "text/plain;version=0.0.4",
            "*/*",
            "application/json",
            "application/openmetrics-text;q=0",
            "application/openmetrics-text;q=0.000, */*",
            "application/openmetrics-text;q=0.2, text/plain;q=0.9",
            "application/openmetrics-text;q=0.2, text/*;q=0.3",
        ] {
            assert_eq!(negotiate([accept]), Format::PrometheusText, "{accept}");
        }
    }

    #[test]
    fn several_accept_headers_are_one_list() {
        assert_eq!(
            negotiate(["text/plain;q=0.1", "application/openmetrics-text"]),
            Format::OpenMetrics
        );
    }

    #[test]
    fn a_malformed_quality_drops_only_its_range() {
        assert_eq!(
            negotiate(["application/openmetrics-text;q=high, text/plain"]),
            Format::PrometheusText
        );
        assert_eq!(
            negotiate(["text/plain;q=2, application/openmetrics-text;q=0.1"]),
            Format::OpenMetrics
        );
    }

    #[test]
    fn qualities_read_as_thousandths() {
        for (text, want) in [
            ("0", Some(0)),
            ("0.5", Some(500)),
            ("0.05", Some(50)),
            ("0.123", Some(123)),
            ("1", Some(1000)),
            ("1.000", Some(1000)),
            ("1.5", None),
            ("0.1234", None),
            ("2", None),
            ("", None),
            ("0.x", None),
        ] {
            assert_eq!(quality(text), want, "{text:?}");
        }
    }
}
