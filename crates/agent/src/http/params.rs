//! Query-string parameters of the debug pages: each page names the ones it
//! accepts, so a typo (`?mca=`) is a 400 naming the parameter instead of a
//! silently ignored filter.

use std::fmt;

/// A rejected request parameter: which one, what was wrong, the form expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadParam {
    /// The parameter's name as the request spells it.
    pub name: String,
    /// What was wrong (`missing`, `"zz" is not …`, `given twice`, …).
    pub problem: String,
    /// The accepted form, e.g. `a MAC address like 02:00:00:00:00:01`.
    pub expected: String,
}

impl fmt::Display for BadParam {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "parameter `{}`: {}; expected {}",
            self.name, self.problem, self.expected
        )
    }
}

impl std::error::Error for BadParam {}

/// Every parameter a request got wrong, in the order found: a caller
/// fixes them all from one answer instead of one per request. Never
/// empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadParams(Vec<BadParam>);

impl BadParams {
    /// Each rejected parameter.
    #[must_use]
    pub fn each(&self) -> &[BadParam] {
        &self.0
    }
}

/// One line per parameter, so a single problem reads as it always did.
impl fmt::Display for BadParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, bad) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{bad}")?;
        }
        Ok(())
    }
}

impl std::error::Error for BadParams {}

/// Most `name=value` pairs a query may carry: every page accepts a few.
pub const MAX_PARAMS: usize = 16;

/// The decoded `name=value` pairs of one query string, checked against the
/// names a page accepts. Reading a value records what is wrong with it
/// instead of stopping; [`Params::finish`] then answers with every problem.
#[derive(Debug)]
pub struct Params {
    pairs: Vec<(String, String)>,
    /// Names given twice: their value is ambiguous, so it is not checked.
    repeated: Vec<String>,
    /// The query was refused whole (too many pairs): nothing else is read.
    refused: bool,
    problems: Vec<BadParam>,
}

impl Params {
    /// Decodes `query` (`None`: no `?`), noting each name outside
    /// `accepted` and each name given more than once (once per name). A
    /// query of more than [`MAX_PARAMS`] pairs is refused whole, after
    /// decoding one pair past the limit: what a long query costs is bounded
    /// by that, not by its length.
    #[must_use]
    pub fn parse(query: Option<&str>, accepted: &[&str]) -> Params {
        let mut decoded = query
            .map(|q| url::form_urlencoded::parse(q.as_bytes()))
            .into_iter()
            .flatten();
        let pairs: Vec<(String, String)> = decoded
            .by_ref()
            .take(MAX_PARAMS)
            .map(|(n, v)| (n.into_owned(), v.into_owned()))
            .collect();
        if decoded.next().is_some() {
            return Params {
                pairs: Vec::new(),
                repeated: Vec::new(),
                refused: true,
                problems: vec![BadParam {
                    name: "query".to_owned(),
                    problem: format!("more than {MAX_PARAMS} parameters"),
                    expected: format!("at most {MAX_PARAMS}, each one of: {}", accepted.join(", ")),
                }],
            };
        }
        let mut out = Params {
            pairs: Vec::new(),
            repeated: Vec::new(),
            refused: false,
            problems: Vec::new(),
        };
        for (i, (name, _)) in pairs.iter().enumerate() {
            let earlier = pairs[..i].iter().filter(|(n, _)| n == name).count();
            if !accepted.contains(&name.as_str()) {
                if earlier == 0 {
                    out.problems.push(BadParam {
                        name: name.clone(),
                        problem: "unknown parameter".to_owned(),
                        expected: format!("one of: {}", accepted.join(", ")),
                    });
                }
            } else if earlier == 1 {
                out.repeated.push(name.clone());
                out.problems.push(BadParam {
                    name: name.clone(),
                    problem: "given twice".to_owned(),
                    expected: "each parameter at most once".to_owned(),
                });
            }
        }
        out.pairs = pairs;
        out
    }

    /// The value of `name`, if given (an empty value counts as given).
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The value of `name` parsed with `parse`; `None` when absent, given
    /// twice or invalid. An invalid value is recorded as a problem naming
    /// the parameter, the value and `expected`.
    pub fn optional<T>(
        &mut self,
        name: &str,
        expected: &str,
        parse: impl FnOnce(&str) -> Option<T>,
    ) -> Option<T> {
        if self.refused || self.repeated.iter().any(|n| n == name) {
            return None;
        }
        let text = self.get(name)?;
        let value = parse(text);
        if value.is_none() {
            let problem = format!("{text:?} is not valid");
            self.problems.push(BadParam {
                name: name.to_owned(),
                problem,
                expected: expected.to_owned(),
            });
        }
        value
    }

    /// [`Params::optional`] for a parameter that must be given: its
    /// absence is recorded too.
    pub fn required<T>(
        &mut self,
        name: &str,
        expected: &str,
        parse: impl FnOnce(&str) -> Option<T>,
    ) -> Option<T> {
        if self.refused {
            return None;
        }
        if self.get(name).is_none() {
            self.problems.push(BadParam {
                name: name.to_owned(),
                problem: "missing".to_owned(),
                expected: expected.to_owned(),
            });
            return None;
        }
        self.optional(name, expected, parse)
    }

    /// `value` (built from what was read) when no parameter had a
    /// problem, else every problem. `value` is `None` only when a required
    /// parameter was absent or invalid, which is a recorded problem.
    pub fn finish<T>(self, value: Option<T>) -> Result<T, BadParams> {
        match value {
            Some(v) if self.problems.is_empty() => Ok(v),
            _ => Err(BadParams(self.problems)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(t: &str) -> Option<u32> {
        t.parse().ok()
    }

    /// What `finish` reports for `query` read as a page with a required
    /// `mac` and an optional `limit` would read it.
    fn problems(query: &str) -> Vec<(String, String)> {
        let mut p = Params::parse(Some(query), &["mac", "limit"]);
        let mac = p.required("mac", "a word", |t| (!t.is_empty()).then(|| t.to_owned()));
        let limit = p.optional("limit", "an integer", int);
        match p.finish(mac.map(|m| (m, limit))) {
            Ok(_) => Vec::new(),
            Err(bad) => bad
                .each()
                .iter()
                .map(|b| (b.name.clone(), b.problem.clone()))
                .collect(),
        }
    }

    #[test]
    fn a_query_of_too_many_pairs_is_refused_whole_after_decoding_one_past_the_limit() {
        let long = "mac=x&".repeat(10_000);
        assert_eq!(
            problems(&long),
            vec![(
                "query".to_owned(),
                format!("more than {MAX_PARAMS} parameters")
            )]
        );
        let p = Params::parse(Some(&long), &["mac"]);
        assert!(p.pairs.is_empty() && p.repeated.is_empty() && p.refused);
        // At the limit it is read as usual.
        let at = vec!["limit=1"; MAX_PARAMS].join("&");
        let got = problems(&at);
        assert!(
            got.contains(&("limit".to_owned(), "given twice".to_owned())),
            "{got:?}"
        );
    }

    fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
        expected
            .iter()
            .map(|(n, p)| ((*n).to_owned(), (*p).to_owned()))
            .collect()
    }

    #[test]
    fn decodes_percent_escapes_and_plus() {
        let p = Params::parse(Some("ip=fe80%3A%3A1&peer=a+b"), &["ip", "peer"]);
        assert_eq!(p.get("ip"), Some("fe80::1"));
        assert_eq!(p.get("peer"), Some("a b"));
        assert_eq!(p.get("absent"), None);
        assert_eq!(p.finish(Some(())), Ok(()));
    }

    #[test]
    fn no_query_is_no_parameter() {
        let mut p = Params::parse(None, &["limit"]);
        assert_eq!(p.get("limit"), None);
        assert_eq!(p.optional("limit", "n", int), None);
        assert_eq!(p.finish(Some(())), Ok(()));
    }

    #[test]
    fn unknown_names_the_parameter_and_the_accepted_ones() {
        let err = Params::parse(Some("mca=1"), &["mac", "ip"])
            .finish(Some(()))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "parameter `mca`: unknown parameter; expected one of: mac, ip"
        );
    }

    #[test]
    fn each_kind_of_problem_alone() {
        assert_eq!(problems("mac=a&limit=3"), []);
        assert_eq!(problems("mac=a"), [], "an optional one may be absent");
        assert_eq!(problems("limit=3"), pairs(&[("mac", "missing")]));
        assert_eq!(problems("mac="), pairs(&[("mac", "\"\" is not valid")]));
        assert_eq!(
            problems("mac=a&limit=ten"),
            pairs(&[("limit", "\"ten\" is not valid")])
        );
        assert_eq!(
            problems("mac=a&limit=1&limit=2&limit=3"),
            pairs(&[("limit", "given twice")]),
            "once per name, however many times"
        );
        assert_eq!(
            problems("mac=a&top=1&top=2"),
            pairs(&[("top", "unknown parameter")]),
            "an unknown name given twice is one problem"
        );
    }

    #[test]
    fn every_problem_is_reported_together_in_the_order_found() {
        assert_eq!(
            problems("top=1&limit=ten"),
            pairs(&[
                ("top", "unknown parameter"),
                ("mac", "missing"),
                ("limit", "\"ten\" is not valid"),
            ])
        );
        assert_eq!(
            problems("mac=a&mac=b&zone=x&limit=x"),
            pairs(&[
                ("mac", "given twice"),
                ("zone", "unknown parameter"),
                ("limit", "\"x\" is not valid"),
            ]),
            "a repeated required one is not also missing or invalid"
        );
        assert_eq!(
            problems("mac=&limit=-1&x=1&y=2"),
            pairs(&[
                ("x", "unknown parameter"),
                ("y", "unknown parameter"),
                ("mac", "\"\" is not valid"),
                ("limit", "\"-1\" is not valid"),
            ])
        );
    }

    #[test]
    fn the_answer_names_each_parameter_problem_and_form_on_its_own_line() {
        let mut p = Params::parse(Some("limit=ten&other=1&limit=9"), &["mac", "limit"]);
        let mac = p.required("mac", "a MAC address", |t| Some(t.to_owned()));
        let _ = p.optional("limit", "an integer", int);
        let err = p.finish(mac).unwrap_err();
        assert_eq!(
            err.to_string(),
            "parameter `other`: unknown parameter; expected one of: mac, limit\n\
             parameter `limit`: given twice; expected each parameter at most once\n\
             parameter `mac`: missing; expected a MAC address"
        );
    }
}
