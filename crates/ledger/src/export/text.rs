//! Two fixes to `prometheus-client`'s text output, so that one series
//! always prints the same labels in the same place:
//!
//! - its `OpenMetrics` encoder writes a histogram bucket's `le` *before*
//!   the series' own labels (`_bucket{le="0.1",phase="copy"}` beside
//!   `_sum{phase="copy"}`), its Prometheus text encoder after them: every
//!   bucket is rewritten with `le` last, as both formats' examples and the
//!   other clients write it;
//! - a `Family` keeps its series in a `HashMap` with a per-process random
//!   seed, so a registry of families came out in another series order on
//!   every start, and could reorder as a family grew:
//!   [`sort_series`] sorts each family's series by their labels. The
//!   ledger's collector writes its own families in a fixed order already
//!   and is not re-sorted.

/// A sample line split at its label set.
struct Sample<'a> {
    /// The metric name (`lachesis_x_bucket`).
    name: &'a str,
    /// Each `name="value"` pair, as written.
    pairs: Vec<&'a str>,
    /// Everything after the closing `}`: value, timestamp, line end.
    after: &'a str,
}

impl<'a> Sample<'a> {
    /// `None` for a comment, or a sample without a label set. Values may
    /// hold `,`, `}` and escaped quotes: only a `,` or `}` outside quotes
    /// ends a pair.
    fn split(line: &'a str) -> Option<Sample<'a>> {
        if line.starts_with('#') {
            return None;
        }
        let open = line
            .find([' ', '{'])
            .filter(|i| line[*i..].starts_with('{'))?;
        let body = &line[open + 1..];
        let mut pairs = Vec::new();
        let (mut start, mut quoted, mut escaped) = (0, false, false);
        for (i, c) in body.char_indices() {
            match c {
                _ if escaped => escaped = false,
                '\\' if quoted => escaped = true,
                '"' => quoted = !quoted,
                ',' | '}' if !quoted => {
                    if i > start {
                        pairs.push(&body[start..i]);
                    }
                    if c == '}' {
                        return Some(Sample {
                            name: &line[..open],
                            pairs,
                            after: &body[i + 1..],
                        });
                    }
                    start = i + 1;
                }
                _ => {}
            }
        }
        None
    }

    /// A bucket whose `le` is not its last label.
    fn le_misplaced(&self) -> bool {
        self.name.ends_with("_bucket")
            && self
                .pairs
                .iter()
                .position(|p| is_le(p))
                .is_some_and(|i| i + 1 < self.pairs.len())
    }

    /// The series' own labels: every pair but a bucket's bound.
    fn series_labels(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.pairs.iter().copied().filter(|p| !is_le(p))
    }
}

fn is_le(pair: &str) -> bool {
    pair.starts_with("le=\"")
}

/// Rewrites the bucket lines of `out[from..]` whose `le` is not the last
/// label with it last.
pub(super) fn le_last(out: &mut String, from: usize) {
    // Only `OpenMetrics` needs it, where every such line has `le` first:
    // start at the first one, so a large billing part is only searched.
    let Some(hit) = out[from..].find("_bucket{le=\"") else {
        return;
    };
    let line_start = out[..from + hit].rfind('\n').map_or(0, |i| i + 1).max(from);
    let tail = out.split_off(line_start);
    for line in tail.split_inclusive('\n') {
        match Sample::split(line).filter(Sample::le_misplaced) {
            Some(s) => {
                out.push_str(s.name);
                out.push('{');
                let le = s.pairs.iter().copied().filter(|p| is_le(p));
                for (i, pair) in s.series_labels().chain(le).enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(pair);
                }
                out.push('}');
                out.push_str(s.after);
            }
            None => out.push_str(line),
        }
    }
}

/// One family's samples as [`sort_series`] orders them: the series'
/// labels, then the position in the family.
type Keyed<'a> = Vec<(Vec<&'a str>, usize, &'a str)>;

/// `text` (one registry's exposition) with each family's series sorted by
/// their labels, as each series writes them. Comment lines (`# HELP`,
/// `# TYPE`, `# UNIT`, `# EOF`) stay where they are and bound the
/// families; a histogram's `_sum`, `_count` and buckets, one label set,
/// stay together in the order written.
#[must_use]
pub fn sort_series(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut family: Keyed = Vec::new();
    for (i, line) in text.split_inclusive('\n').enumerate() {
        if line.starts_with('#') {
            write_sorted(&mut out, &mut family);
            out.push_str(line);
        } else {
            let key = Sample::split(line).map_or_else(Vec::new, |s| s.series_labels().collect());
            family.push((key, i, line));
        }
    }
    write_sorted(&mut out, &mut family);
    out
}

/// Appends `family`'s lines in order and empties it.
fn write_sorted(out: &mut String, family: &mut Keyed) {
    // The position breaks ties: equal label sets keep their order.
    family.sort_unstable();
    for (_, _, line) in family.drain(..) {
        out.push_str(line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_splits_with_quotes_and_escapes_respected() {
        assert!(Sample::split("# TYPE a counter\n").is_none());
        assert!(Sample::split("a_total 1\n").is_none());
        let s = Sample::split("a{} 1\n").unwrap();
        assert_eq!((s.name, s.pairs.len(), s.after), ("a", 0, " 1\n"));
        let s = Sample::split("a{x=\"1,2}\",y=\"q\\\"}\"} 3\n").unwrap();
        assert_eq!(s.pairs, ["x=\"1,2}\"", "y=\"q\\\"}\""]);
        assert_eq!(s.after, " 3\n");
        let s = Sample::split("h_bucket{le=\"0.5\",step=\"fetch\"} 3\n").unwrap();
        assert_eq!(s.series_labels().collect::<Vec<_>>(), ["step=\"fetch\""]);
    }

    #[test]
    fn every_bucket_gets_its_le_last_and_nothing_else_moves() {
        let text = "\
# TYPE c counter
c_total{le=\"x\",a=\"1\"} 1
# TYPE h histogram
h_sum{phase=\"copy\"} 1.0
h_count{phase=\"copy\"} 1
h_bucket{le=\"0.5\",phase=\"copy\"} 1
h_bucket{le=\"+Inf\",phase=\"copy\"} 1
# TYPE n histogram
n_bucket{le=\"+Inf\"} 0
";
        let mut out = "kept as is: x_bucket{le=\"1\",a=\"b\"} 0\n".to_owned();
        let from = out.len();
        out.push_str(text);
        le_last(&mut out, from);
        assert_eq!(
            out,
            "kept as is: x_bucket{le=\"1\",a=\"b\"} 0\n\
# TYPE c counter
c_total{le=\"x\",a=\"1\"} 1
# TYPE h histogram
h_sum{phase=\"copy\"} 1.0
h_count{phase=\"copy\"} 1
h_bucket{phase=\"copy\",le=\"0.5\"} 1
h_bucket{phase=\"copy\",le=\"+Inf\"} 1
# TYPE n histogram
n_bucket{le=\"+Inf\"} 0
"
        );
    }

    #[test]
    fn each_familys_series_are_sorted_and_a_histograms_lines_stay_together() {
        let text = "\
# HELP c A counter.
# TYPE c counter
c_total{reason=\"ttl\"} 1
c_total{reason=\"capacity\"} 2
# HELP h A histogram.
# TYPE h histogram
h_sum{step=\"plan\"} 1.0
h_count{step=\"plan\"} 1
h_bucket{step=\"plan\",le=\"0.5\"} 1
h_bucket{step=\"plan\",le=\"+Inf\"} 1
h_sum{step=\"fetch\"} 2.0
h_count{step=\"fetch\"} 1
h_bucket{step=\"fetch\",le=\"0.5\"} 0
h_bucket{step=\"fetch\",le=\"+Inf\"} 1
# HELP g A gauge.
# TYPE g gauge
g 7
# EOF
";
        assert_eq!(
            sort_series(text),
            "\
# HELP c A counter.
# TYPE c counter
c_total{reason=\"capacity\"} 2
c_total{reason=\"ttl\"} 1
# HELP h A histogram.
# TYPE h histogram
h_sum{step=\"fetch\"} 2.0
h_count{step=\"fetch\"} 1
h_bucket{step=\"fetch\",le=\"0.5\"} 0
h_bucket{step=\"fetch\",le=\"+Inf\"} 1
h_sum{step=\"plan\"} 1.0
h_count{step=\"plan\"} 1
h_bucket{step=\"plan\",le=\"0.5\"} 1
h_bucket{step=\"plan\",le=\"+Inf\"} 1
# HELP g A gauge.
# TYPE g gauge
g 7
# EOF
"
        );
    }
}
