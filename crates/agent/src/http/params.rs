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

/// The decoded `name=value` pairs of one query string, checked against the
/// names a page accepts.
#[derive(Debug)]
pub struct Params {
    pairs: Vec<(String, String)>,
}

impl Params {
    /// Decodes `query` (`None`: no `?`) and rejects a name outside
    /// `accepted` or a name given twice.
    pub fn parse(query: Option<&str>, accepted: &[&str]) -> Result<Params, BadParam> {
        let pairs: Vec<(String, String)> = query
            .map(|q| {
                url::form_urlencoded::parse(q.as_bytes())
                    .into_owned()
                    .collect()
            })
            .unwrap_or_default();
        for (i, (name, _)) in pairs.iter().enumerate() {
            if !accepted.contains(&name.as_str()) {
                return Err(BadParam {
                    name: name.clone(),
                    problem: "unknown parameter".to_owned(),
                    expected: format!("one of: {}", accepted.join(", ")),
                });
            }
            if pairs[..i].iter().any(|(n, _)| n == name) {
                return Err(BadParam {
                    name: name.clone(),
                    problem: "given twice".to_owned(),
                    expected: "each parameter at most once".to_owned(),
                });
            }
        }
        Ok(Params { pairs })
    }

    /// The value of `name`, if given (an empty value counts as given).
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The value of `name` parsed with `parse`; `None` when absent. A parse
    /// failure names the parameter, the value and `expected`.
    pub fn optional<T>(
        &self,
        name: &str,
        expected: &str,
        parse: impl FnOnce(&str) -> Option<T>,
    ) -> Result<Option<T>, BadParam> {
        let Some(text) = self.get(name) else {
            return Ok(None);
        };
        parse(text).map(Some).ok_or_else(|| BadParam {
            name: name.to_owned(),
            problem: format!("{text:?} is not valid"),
            expected: expected.to_owned(),
        })
    }

    /// [`Params::optional`] for a parameter that must be given.
    pub fn required<T>(
        &self,
        name: &str,
        expected: &str,
        parse: impl FnOnce(&str) -> Option<T>,
    ) -> Result<T, BadParam> {
        self.optional(name, expected, parse)?
            .ok_or_else(|| BadParam {
                name: name.to_owned(),
                problem: "missing".to_owned(),
                expected: expected.to_owned(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_percent_escapes_and_plus() {
        let p = Params::parse(Some("ip=fe80%3A%3A1&peer=a+b"), &["ip", "peer"]).unwrap();
        assert_eq!(p.get("ip"), Some("fe80::1"));
        assert_eq!(p.get("peer"), Some("a b"));
        assert_eq!(p.get("absent"), None);
    }

    #[test]
    fn no_query_is_no_parameter() {
        let p = Params::parse(None, &["limit"]).unwrap();
        assert_eq!(p.get("limit"), None);
        assert_eq!(
            p.optional("limit", "n", |t| t.parse::<u32>().ok()),
            Ok(None)
        );
    }

    #[test]
    fn unknown_names_the_parameter_and_the_accepted_ones() {
        let err = Params::parse(Some("mca=1"), &["mac", "ip"]).unwrap_err();
        assert_eq!(err.name, "mca");
        assert_eq!(
            err.to_string(),
            "parameter `mca`: unknown parameter; expected one of: mac, ip"
        );
    }

    #[test]
    fn a_parameter_given_twice_is_refused() {
        let err = Params::parse(Some("ip=1.1.1.1&ip=2.2.2.2"), &["ip"]).unwrap_err();
        assert_eq!(
            (err.name.as_str(), err.problem.as_str()),
            ("ip", "given twice")
        );
    }

    #[test]
    fn required_and_optional_name_the_value_and_the_form() {
        let p = Params::parse(Some("limit=ten"), &["limit", "other"]).unwrap();
        let err = p
            .required("limit", "an integer", |t| t.parse::<u32>().ok())
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "parameter `limit`: \"ten\" is not valid; expected an integer"
        );
        let err = p
            .required("other", "a word", |t| Some(t.to_owned()))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "parameter `other`: missing; expected a word"
        );
    }
}
