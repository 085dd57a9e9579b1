//! The agent's `/metrics` read back: one parser for both text formats it
//! serves, Prometheus text 0.0.4 and `OpenMetrics` 1.0 (`# EOF`, `_created`
//! samples, `info` families, `# UNIT`), with label values unescaped (`\\`,
//! `\"`, `\n`) so a project or server name holding a quote, comma, brace or
//! newline reads back as it was.
//!
//! Ours, not a crate's: `prometheus-parse` splits labels at every `,` and
//! `=` (a name holding either is torn) and reads no `OpenMetrics`;
//! `openmetrics-parser` unescapes but sorts label names (the catalogue
//! tests hold their order), refuses a text without `# EOF` (tests read
//! parts of one) and is LGPL-3.0.

use std::fmt;

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The sample's name as written (`lachesis_tenant_bytes_total`).
    pub name: String,
    /// Label names and unescaped values, in the order written.
    pub labels: Vec<(String, String)>,
    /// The value (`+Inf`, `-Inf` and `NaN` included).
    pub value: f64,
    /// The value as written (`1040`, `0.5`, `+Inf`).
    pub text: String,
}

impl Sample {
    /// The value of label `name`, `None` when the sample has none.
    #[must_use]
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The label names, in the order written.
    #[must_use]
    pub fn label_names(&self) -> Vec<String> {
        self.labels.iter().map(|(n, _)| n.clone()).collect()
    }

    /// The series as the formats write it: `name{a="x",b="y"}` (labels in
    /// their order, values escaped again), `name` when it has none.
    #[must_use]
    pub fn series(&self) -> String {
        if self.labels.is_empty() {
            return self.name.clone();
        }
        let labels: Vec<String> = self
            .labels
            .iter()
            .map(|(n, v)| format!("{n}=\"{}\"", escape(v)))
            .collect();
        format!("{}{{{}}}", self.name, labels.join(","))
    }

    /// The value as a whole count (counters render as integers).
    ///
    /// # Panics
    /// The value is not a non-negative integer.
    #[must_use]
    pub fn count(&self) -> u64 {
        self.text
            .parse()
            .unwrap_or_else(|e| panic!("{}: not a count ({e})", self.series()))
    }

    /// Whether this sample is the series `series` (`name{a="x"}` or
    /// `name`): same name, same labels and values in any order.
    #[must_use]
    pub fn is(&self, series: &Series) -> bool {
        self.name == series.name
            && self.labels.len() == series.labels.len()
            && series
                .labels
                .iter()
                .all(|(n, v)| self.label(n) == Some(v.as_str()))
    }
}

/// A series without a value (`name{a="x"}`), as a test names one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Series {
    /// The sample name.
    pub name: String,
    /// Label names and unescaped values.
    pub labels: Vec<(String, String)>,
}

impl std::str::FromStr for Series {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self, Error> {
        let (name, labels, rest) =
            name_and_labels(text).map_err(|reason| Error::at(0, text, reason))?;
        if !rest.trim().is_empty() {
            return Err(Error::at(0, text, "text after the series"));
        }
        Ok(Series {
            name: name.to_owned(),
            labels,
        })
    }
}

/// A family: its `# TYPE`, `# HELP` and `# UNIT` and the samples that
/// belong to it (in `OpenMetrics` a counter `x` holds `x_total` and
/// `x_created`, a histogram its `_bucket`, `_count`, `_sum`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Family {
    /// The family name as `# TYPE` gives it (a sample's name when it has
    /// no `# TYPE`).
    pub name: String,
    /// `counter`, `gauge`, `histogram`, `info`, …; `None` when undeclared.
    pub kind: Option<String>,
    /// `# HELP`, unescaped.
    pub help: Option<String>,
    /// `# UNIT` (`OpenMetrics`).
    pub unit: Option<String>,
    /// The family's samples, in order.
    pub samples: Vec<Sample>,
}

impl Family {
    /// Whether a sample named `sample` belongs to this family.
    fn holds(&self, sample: &str) -> bool {
        let Some(suffix) = sample.strip_prefix(self.name.as_str()) else {
            return false;
        };
        suffix.is_empty()
            || self.kind.is_some()
                && [
                    "_total", "_created", "_bucket", "_count", "_sum", "_info", "_gcount", "_gsum",
                ]
                .contains(&suffix)
    }
}

/// A whole exposition.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Exposition {
    /// Every family, in order.
    pub families: Vec<Family>,
    /// Whether it ended with `OpenMetrics`' `# EOF`.
    pub eof: bool,
}

impl Exposition {
    /// Parses either text format; a line neither can hold is an error that
    /// names it.
    pub fn parse(text: &str) -> Result<Exposition, Error> {
        let mut out = Exposition::default();
        for (i, line) in text.lines().enumerate() {
            let at = |reason| Error::at(i + 1, line, reason);
            if out.eof {
                return Err(at("text after # EOF"));
            }
            if line.trim().is_empty() {
                continue;
            }
            if line == "# EOF" {
                out.eof = true;
                continue;
            }
            if let Some(comment) = line.strip_prefix('#') {
                let mut words = comment.trim_start().splitn(3, ' ');
                let (Some(keyword), Some(name)) = (words.next(), words.next()) else {
                    continue;
                };
                let rest = words.next().unwrap_or("");
                if !matches!(keyword, "TYPE" | "HELP" | "UNIT") {
                    continue;
                }
                let family = out.family_for_comment(name);
                match keyword {
                    "TYPE" => family.kind = Some(rest.trim().to_owned()),
                    "HELP" => family.help = Some(unescape(rest).map_err(at)?),
                    _ => family.unit = Some(rest.trim().to_owned()),
                }
                continue;
            }
            let sample = parse_sample(line).map_err(|e| Error::at(i + 1, line, e.reason))?;
            match out.families.last_mut() {
                Some(family) if family.holds(&sample.name) => family.samples.push(sample),
                _ => out.families.push(Family {
                    name: sample.name.clone(),
                    samples: vec![sample],
                    ..Family::default()
                }),
            }
        }
        Ok(out)
    }

    /// The family a `# TYPE`/`# HELP`/`# UNIT` line of `name` describes:
    /// the last one when it is `name` and has no sample yet, else a new one.
    fn family_for_comment(&mut self, name: &str) -> &mut Family {
        let reuse = self
            .families
            .last()
            .is_some_and(|f| f.name == name && f.samples.is_empty());
        if !reuse {
            self.families.push(Family {
                name: name.to_owned(),
                ..Family::default()
            });
        }
        self.families.last_mut().expect("pushed or kept")
    }

    /// Every sample, in order.
    pub fn samples(&self) -> impl Iterator<Item = &Sample> {
        self.families.iter().flat_map(|f| &f.samples)
    }

    /// The samples named `name` exactly (`lachesis_tenant_bytes_total`).
    pub fn named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Sample> + 'a {
        self.samples().filter(move |s| s.name == name)
    }

    /// The value of `series` (`name{a="x"}`, labels in any order); `None`
    /// when absent.
    ///
    /// # Panics
    /// `series` is not a series.
    #[must_use]
    pub fn value(&self, series: &str) -> Option<f64> {
        let series: Series = series
            .parse()
            .unwrap_or_else(|e| panic!("{series:?} is not a series: {e}"));
        self.samples().find(|s| s.is(&series)).map(|s| s.value)
    }
}

/// [`Exposition::parse`], failing the test with the line it cannot read.
///
/// # Panics
/// A line neither format can hold.
#[must_use]
pub fn parse(text: &str) -> Exposition {
    Exposition::parse(text).unwrap_or_else(|e| panic!("{e}\nin:\n{text}"))
}

/// One sample line: `name{labels} value [timestamp] [# exemplar]`.
pub fn parse_sample(line: &str) -> Result<Sample, Error> {
    let (name, labels, rest) = name_and_labels(line).map_err(|r| Error::at(0, line, r))?;
    let mut words = rest.split_whitespace();
    let text = words
        .next()
        .ok_or_else(|| Error::at(0, line, "no value"))?
        .to_owned();
    let value = text
        .parse()
        .map_err(|_| Error::at(0, line, "the value is not a number"))?;
    // A timestamp, then an OpenMetrics exemplar (`# {…} value`), may follow.
    match words.next() {
        None | Some("#") => {}
        Some(ts) if ts.parse::<f64>().is_ok() => {
            if words.next().is_some_and(|w| w != "#") {
                return Err(Error::at(0, line, "text after the timestamp"));
            }
        }
        Some(_) => return Err(Error::at(0, line, "text after the value")),
    }
    Ok(Sample {
        name: name.to_owned(),
        labels,
        value,
        text,
    })
}

type Labels = Vec<(String, String)>;

/// The name, the labels and what follows them.
fn name_and_labels(line: &str) -> Result<(&str, Labels, &str), &'static str> {
    let end = line.find(['{', ' ', '\t']).unwrap_or(line.len());
    let name = &line[..end];
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_:".contains(c))
    {
        return Err("not a metric name");
    }
    let mut rest = &line[end..];
    let mut labels = Vec::new();
    if let Some(mut inner) = rest.strip_prefix('{') {
        loop {
            inner = inner.trim_start();
            if let Some(after) = inner.strip_prefix('}') {
                rest = after;
                break;
            }
            let (label, after) = inner.split_once('=').ok_or("a label without `=`")?;
            let label = label.trim();
            if label.is_empty() || !label.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err("not a label name");
            }
            let after = after
                .strip_prefix('"')
                .ok_or("a label value without quotes")?;
            let (value, after) = quoted(after)?;
            labels.push((label.to_owned(), value));
            inner = after.trim_start();
            inner = inner.strip_prefix(',').unwrap_or(inner);
            if !inner.trim_start().starts_with('}') && !after.trim_start().starts_with(',') {
                return Err("labels not separated by `,`");
            }
        }
    }
    Ok((name, labels, rest))
}

/// The unescaped value up to the closing quote, and the text after it.
fn quoted(text: &str) -> Result<(String, &str), &'static str> {
    let mut value = String::new();
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Ok((value, &text[i + 1..])),
            '\\' => match chars.next() {
                Some((_, '\\')) => value.push('\\'),
                Some((_, '"')) => value.push('"'),
                Some((_, 'n')) => value.push('\n'),
                _ => return Err("an unknown escape in a label value"),
            },
            c => value.push(c),
        }
    }
    Err("an unterminated label value")
}

/// `# HELP` text unescaped (`\\`, `\n`, and `OpenMetrics`' `\"`).
fn unescape(text: &str) -> Result<String, &'static str> {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('\\') => out.push('\\'),
            Some('"') => out.push('"'),
            Some('n') => out.push('\n'),
            _ => return Err("an unknown escape in HELP"),
        }
    }
    Ok(out)
}

/// A label value escaped as both formats write it.
#[must_use]
pub fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A line neither format can hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// 1-based line number (0: a single line parsed alone).
    pub line: usize,
    /// The line.
    pub text: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl Error {
    fn at(line: usize, text: &str, reason: &'static str) -> Error {
        Error {
            line,
            text: text.to_owned(),
            reason,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}: {:?}", self.line, self.reason, self.text)
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    /// A name holding every character the formats escape or that ends a
    /// label in a naive parser.
    const NASTY: &str = "a,b=\"c}\" d\\e\nf";

    #[test]
    fn escaped_label_values_read_back_as_they_were() {
        let line = format!(
            "lachesis_server_info{{server_id=\"s\",name=\"{}\",tenant_id=\"t\"}} 1",
            escape(NASTY)
        );
        assert_eq!(
            line,
            r#"lachesis_server_info{server_id="s",name="a,b=\"c}\" d\\e\nf",tenant_id="t"} 1"#
        );
        let s = parse_sample(&line).unwrap();
        assert_eq!(s.name, "lachesis_server_info");
        assert_eq!(s.label("name"), Some(NASTY));
        assert_eq!(s.label_names(), ["server_id", "name", "tenant_id"]);
        assert_eq!((s.text.as_str(), s.count()), ("1", 1));
        assert_eq!(s.series() + " 1", line);
    }

    #[test]
    fn broken_escapes_and_quotes_are_errors_not_guesses() {
        for (line, reason) in [
            (r#"a{b="x\t"} 1"#, "an unknown escape in a label value"),
            (r#"a{b="x} 1"#, "an unterminated label value"),
            (r"a{b=x} 1", "a label value without quotes"),
            (r#"a{b="x" c="y"} 1"#, "labels not separated by `,`"),
            (r#"a{b="x"}"#, "no value"),
            ("a one", "the value is not a number"),
            ("{a=\"b\"} 1", "not a metric name"),
        ] {
            assert_eq!(
                parse_sample(line).map_err(|e| e.reason),
                Err(reason),
                "{line}"
            );
        }
    }

    #[test]
    fn values_timestamps_and_exemplars() {
        let s = parse_sample("h_bucket{le=\"+Inf\"} 3 1700000000000").unwrap();
        assert_eq!(
            (s.label("le"), s.value, s.text.as_str()),
            (Some("+Inf"), 3.0, "3")
        );
        let s = parse_sample("c_total 7 # {trace_id=\"abc\"} 1.0").unwrap();
        assert_eq!(s.count(), 7);
        assert!(parse_sample("g NaN").unwrap().value.is_nan());
        let minus_inf = parse_sample("g -Inf").unwrap().value;
        assert!(minus_inf.is_infinite() && minus_inf.is_sign_negative());
        assert_eq!(parse_sample("g{} 0.5").unwrap().labels, Vec::new());
    }

    #[test]
    fn openmetrics_families_hold_their_suffixed_samples_and_end_at_eof() {
        let text = "# HELP lachesis_bytes L2 \\\"bytes\\\"\\n2nd line\n\
                    # TYPE lachesis_bytes counter\n\
                    lachesis_bytes_total{zone=\"miss\"} 77\n\
                    lachesis_bytes_created{zone=\"miss\"} 1.7e9\n\
                    # TYPE lachesis_tenant info\n\
                    lachesis_tenant_info{tenant_id=\"t\",name=\"alpha\"} 1\n\
                    # TYPE lachesis_flush_seconds histogram\n\
                    # UNIT lachesis_flush_seconds seconds\n\
                    lachesis_flush_seconds_bucket{le=\"0.5\"} 1\n\
                    lachesis_flush_seconds_bucket{le=\"+Inf\"} 2\n\
                    lachesis_flush_seconds_sum 0.7\n\
                    lachesis_flush_seconds_count 2\n\
                    # TYPE lachesis_empty gauge\n\
                    # EOF\n";
        let e = parse(text);
        assert!(e.eof);
        let names: Vec<(&str, Option<&str>, usize)> = e
            .families
            .iter()
            .map(|f| (f.name.as_str(), f.kind.as_deref(), f.samples.len()))
            .collect();
        assert_eq!(
            names,
            [
                ("lachesis_bytes", Some("counter"), 2),
                ("lachesis_tenant", Some("info"), 1),
                ("lachesis_flush_seconds", Some("histogram"), 4),
                ("lachesis_empty", Some("gauge"), 0),
            ]
        );
        assert_eq!(
            e.families[0].help.as_deref(),
            Some("L2 \"bytes\"\n2nd line")
        );
        assert_eq!(e.families[2].unit.as_deref(), Some("seconds"));
        assert_eq!(e.value("lachesis_bytes_total{zone=\"miss\"}"), Some(77.0));
        assert_eq!(
            e.value("lachesis_bytes_created{zone=\"miss\"}"),
            Some(1.7e9)
        );
        assert_eq!(
            Exposition::parse(&format!("{text}x 1\n")).map_err(|e| (e.line, e.reason)),
            Err((15, "text after # EOF"))
        );
    }

    #[test]
    fn prometheus_text_families_and_series_lookup_in_any_label_order() {
        let text = "# HELP lachesis_tenant_bytes_total Bytes.\n\
                    # TYPE lachesis_tenant_bytes_total counter\n\
                    lachesis_tenant_bytes_total{tenant_id=\"a\",direction=\"tx\"} 1500\n\
                    lachesis_tenant_bytes_total{tenant_id=\"a\",direction=\"rx\"} 20\n\
                    lachesis_degraded 0\n";
        let e = parse(text);
        assert!(!e.eof);
        assert_eq!(e.families.len(), 2, "{e:?}");
        assert_eq!(e.families[1].kind, None);
        assert_eq!(e.named("lachesis_tenant_bytes_total").count(), 2);
        assert_eq!(
            e.value("lachesis_tenant_bytes_total{direction=\"rx\",tenant_id=\"a\"}"),
            Some(20.0)
        );
        assert_eq!(
            e.value("lachesis_tenant_bytes_total{direction=\"rx\"}"),
            None
        );
        assert_eq!(e.value("lachesis_degraded"), Some(0.0));
        assert_eq!(e.value("lachesis_missing"), None);
    }
}
