//! `notifications.rabbitmq.url`: the brokers the consumer fails over
//! between, in either form an operator has at hand (DESIGN §8, §13;
//! docs/notifications.md "The broker URL").
//!
//! * oslo.messaging's `transport_url`, copied from any service's
//!   configuration: `rabbit://user:pass@host1:5672,user:pass@host2:5672/`
//!   (`kombu://` is oslo's other name for the same driver). Read as oslo
//!   reads it: the path after its first `/`, percent-decoded, names the
//!   vhost, and an empty one is the broker's default vhost `/` (oslo hands
//!   kombu an empty vhost and kombu puts `/` in its place), so `…:5672`,
//!   `…:5672/`, `…:5672//` and `…:5672/%2F` all mean `/`. The port
//!   defaults to 5672, with TLS too, as in oslo. TLS is oslo's `ssl`
//!   option, which oslo also takes from the query (`?ssl=1`).
//! * AMQP URIs, `amqp://` and `amqps://` (default ports 5672 and 5671).
//!   The AMQP URI rule makes an empty path the *empty* vhost, which no
//!   broker has and no operator means: here it is `/` as well. A vhost
//!   named explicitly (`%2F` included) is used as named. Several
//!   comma-separated hosts are read as in the oslo form.
//!
//! A user or password left out is `guest`, as with oslo (through kombu)
//! and the AMQP URI defaults.
//!
//! Parsed here rather than by lapin, whose URI parser takes one host, keeps
//! the empty vhost, and (amq-protocol-uri 10.6) replaces an IP address by
//! `localhost`: it reads the host with `Url::domain`, which has no value
//! for an IP.
//!
//! The text may hold passwords: no error quotes it, and [`RabbitUrl`]
//! shows itself with every password replaced by [`REDACTED`].

use std::borrow::Cow;
use std::fmt;
use std::net::Ipv6Addr;

use lachesis_config::form;
use lapin::uri::{AMQPAuthority, AMQPQueryString, AMQPScheme, AMQPUri, AMQPUserInfo};
use percent_encoding::percent_decode_str;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What a password shows instead of itself (the word every secret of the
/// configuration shows).
pub use lachesis_config::REDACTED;

/// The user and password of a host that names none (oslo and the AMQP URI
/// defaults).
const DEFAULT_CREDENTIAL: &str = "guest";

/// The forms every error recalls.
const FORMS: &str = "expected an oslo.messaging transport_url, \
     rabbit://user:pass@host1:5672[,user:pass@host2:5672,…]/[vhost][?ssl=1], \
     or amqp://user:pass@host:5672/[vhost] (amqps:// for TLS); \
     a / ? # , or % in a user or password percent-encoded \
     (the value is not shown: it may hold a password)";

/// A broker list with its vhost and TLS setting, as the consumer connects
/// to it. Equal when the text is.
#[derive(Clone)]
pub struct RabbitUrl {
    text: String,
    redacted: String,
    hosts: Vec<BrokerHost>,
    vhost: String,
    tls: bool,
    heartbeat: Option<u16>,
}

impl PartialEq for RabbitUrl {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for RabbitUrl {}

/// One broker node of the list and the credentials it is reached with.
/// Shown as `host:port` only.
#[derive(Clone, PartialEq, Eq)]
pub struct BrokerHost {
    /// A name or an IP address; IPv6 without brackets.
    host: String,
    port: u16,
    user: String,
    password: String,
}

/// Why a URL was refused. Never quotes the URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{problem}; {FORMS}")]
pub struct UrlError {
    /// What is wrong.
    pub problem: Problem,
}

/// What is wrong with a URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// No `scheme://`.
    #[error("not a URL (no scheme://)")]
    NoScheme,
    /// A scheme of neither form (shown when it is a plain word).
    #[error("scheme {} is not rabbit or kombu (oslo.messaging) nor amqp or amqps", shown(.0.as_deref()))]
    Scheme(Option<String>),
    /// oslo's Kafka driver.
    #[error("kafka:// is not a RabbitMQ URL: Kafka notifications go under notifications.kafka, and fleet mode's state stream is a RabbitMQ stream only (docs/decisions/0009)")]
    Kafka,
    /// A fragment, which no broker URL has: most likely an unencoded `#`
    /// in a password.
    #[error("a URL with a fragment (#)")]
    Fragment,
    /// No host at all.
    #[error("no host")]
    NoHost,
    /// One host of the list.
    #[error("host {position} of {count}: {what}")]
    Host {
        /// 1-based.
        position: usize,
        /// Hosts in the list.
        count: usize,
        /// What is wrong with it.
        what: HostProblem,
    },
    /// The vhost does not decode to text, or is longer than AMQP allows.
    #[error("the vhost is not 1 to 255 bytes of UTF-8 once percent-decoded")]
    Vhost,
    /// A query parameter this consumer does not take.
    #[error("query parameter {} is not supported (accepted: {accepted}){hint}", shown(.name.as_deref()))]
    Parameter {
        /// The parameter's name, when it is a plain word.
        name: Option<String>,
        /// What the form accepts.
        accepted: &'static str,
        /// Where the setting goes instead, if anywhere.
        hint: &'static str,
    },
    /// A query parameter with a value of the wrong kind, or none, or twice.
    #[error("query parameter {name} {expected}")]
    Value {
        /// The parameter.
        name: &'static str,
        /// What it takes.
        expected: &'static str,
    },
}

/// What is wrong with one host of the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HostProblem {
    /// `user:pass@` without a host after it.
    #[error("no host name or address")]
    Empty,
    /// Not a host name, an IPv4 address or a (bracketed) IPv6 address.
    #[error("not a host name or IP address (IPv6 with a port in brackets: [::1]:5672)")]
    Address,
    /// Not 1 to 65535.
    #[error("the port is not a number from 1 to 65535")]
    Port,
    /// The user or password does not decode to text.
    #[error("the user or password is not UTF-8 once percent-decoded")]
    Credentials,
}

impl From<Problem> for UrlError {
    fn from(problem: Problem) -> Self {
        UrlError { problem }
    }
}

fn shown(word: Option<&str>) -> String {
    word.map_or_else(|| "(not shown)".to_owned(), |w| format!("{w:?}"))
}

/// `text` when it is a plain word that cannot be a piece of a password
/// split off by an unencoded delimiter.
fn plain_word(text: &str, extra: &[char]) -> Option<String> {
    let ok = !text.is_empty()
        && text.len() <= 40
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || extra.contains(&c));
    ok.then(|| text.to_owned())
}

fn decode(text: &str) -> Option<String> {
    percent_decode_str(text)
        .decode_utf8()
        .ok()
        .map(Cow::into_owned)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    /// `rabbit://`, `kombu://`.
    Oslo,
    /// `amqp://` or, with `tls`, `amqps://`.
    Amqp { tls: bool },
}

impl RabbitUrl {
    /// Parses either form.
    ///
    /// # Errors
    /// What is wrong, and the accepted forms; never the text itself.
    pub fn parse(text: &str) -> Result<RabbitUrl, UrlError> {
        let (scheme, rest) = text.split_once("://").ok_or(Problem::NoScheme)?;
        let form = match scheme.to_ascii_lowercase().as_str() {
            "rabbit" | "kombu" => Form::Oslo,
            "amqp" => Form::Amqp { tls: false },
            "amqps" => Form::Amqp { tls: true },
            "kafka" => return Err(Problem::Kafka.into()),
            _ => return Err(Problem::Scheme(plain_word(scheme, &['+', '-', '.'])).into()),
        };
        if rest.contains('#') {
            return Err(Problem::Fragment.into());
        }
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        let (path, query) = tail.split_once('?').unwrap_or((tail, ""));
        // oslo skips empty entries (a trailing comma).
        let entries: Vec<&str> = authority.split(',').filter(|e| !e.is_empty()).collect();
        if entries.is_empty() {
            return Err(Problem::NoHost.into());
        }
        let default_port = if form == (Form::Amqp { tls: true }) {
            5671
        } else {
            5672
        };
        let hosts = entries
            .iter()
            .enumerate()
            .map(|(i, entry)| {
                BrokerHost::parse(entry, default_port).map_err(|what| Problem::Host {
                    position: i + 1,
                    count: entries.len(),
                    what,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let vhost = vhost(path)?;
        let options = Options::parse(form, query)?;
        let redacted: Vec<String> = entries.iter().map(|e| redact_entry(e)).collect();
        Ok(RabbitUrl {
            text: text.to_owned(),
            redacted: format!("{scheme}://{}{tail}", redacted.join(",")),
            hosts,
            vhost,
            tls: options.tls,
            heartbeat: options.heartbeat,
        })
    }

    /// The brokers, in the order given.
    #[must_use]
    pub fn hosts(&self) -> &[BrokerHost] {
        &self.hosts
    }

    /// The vhost, decoded (`/` when the URL names none).
    #[must_use]
    pub fn vhost(&self) -> &str {
        &self.vhost
    }

    /// Whether connections use TLS (`amqps://`, or `ssl` in the query of
    /// the oslo form).
    #[must_use]
    pub fn is_tls(&self) -> bool {
        self.tls
    }

    /// The text with every password replaced by [`REDACTED`].
    #[must_use]
    pub fn redacted(&self) -> &str {
        &self.redacted
    }

    /// The text as given, passwords included: only for comparing two
    /// configurations, never for showing.
    #[must_use]
    pub fn expose(&self) -> &str {
        &self.text
    }

    /// What lapin connects to for `host`, one of [`RabbitUrl::hosts`].
    #[must_use]
    pub fn amqp_uri(&self, host: &BrokerHost) -> AMQPUri {
        AMQPUri {
            scheme: if self.tls {
                AMQPScheme::AMQPS
            } else {
                AMQPScheme::AMQP
            },
            authority: AMQPAuthority {
                userinfo: AMQPUserInfo {
                    username: host.user.clone(),
                    password: host.password.clone(),
                },
                host: host.host.clone(),
                port: host.port,
            },
            vhost: self.vhost.clone(),
            query: AMQPQueryString {
                heartbeat: self.heartbeat,
                ..AMQPQueryString::default()
            },
        }
    }
}

/// `notifications.rabbitmq.url`: any scalar as text, verbatim from the
/// environment; an error describes the URL, never quotes it.
impl<'de> Deserialize<'de> for RabbitUrl {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        form::deserialize_scalar(d, "=broker URL (secret passwords)", |v| {
            RabbitUrl::parse(&v.text()).map_err(|e| e.to_string())
        })
    }
}

/// Shown with every password redacted, like a [`lachesis_config::Secret`].
impl Serialize for RabbitUrl {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        lachesis_config::secret::serialize_redacted(&self.redacted, &self.text, s)
    }
}

impl fmt::Debug for RabbitUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RabbitUrl({})", self.redacted)
    }
}

impl fmt::Display for RabbitUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted)
    }
}

/// `user:pass@host` with the password replaced; an entry without a
/// password as it is.
fn redact_entry(entry: &str) -> String {
    match entry.rsplit_once('@') {
        Some((userinfo, location)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{user}:{REDACTED}@{location}"),
            None => entry.to_owned(),
        },
        None => entry.to_owned(),
    }
}

/// The path after its first `/`, decoded; empty is the default vhost.
fn vhost(path: &str) -> Result<String, Problem> {
    let name = path.strip_prefix('/').unwrap_or(path);
    let decoded = decode(name).ok_or(Problem::Vhost)?;
    if decoded.len() > 255 {
        return Err(Problem::Vhost);
    }
    Ok(if decoded.is_empty() {
        "/".to_owned()
    } else {
        decoded
    })
}

/// The query parameters a form takes.
struct Options {
    tls: bool,
    heartbeat: Option<u16>,
}

impl Options {
    fn parse(form: Form, query: &str) -> Result<Options, Problem> {
        let mut options = Options {
            tls: matches!(form, Form::Amqp { tls: true }),
            heartbeat: None,
        };
        let mut seen: Vec<&str> = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let known = match (form, name) {
                (Form::Oslo, "ssl") => {
                    options.tls = oslo_bool(value).ok_or(Problem::Value {
                        name: "ssl",
                        expected: "takes true or false (also 1/0, yes/no, on/off)",
                    })?;
                    "ssl"
                }
                (Form::Amqp { .. }, "heartbeat") => {
                    options.heartbeat = Some(value.parse().map_err(|_| Problem::Value {
                        name: "heartbeat",
                        expected: "takes a number of seconds from 0 to 65535",
                    })?);
                    "heartbeat"
                }
                _ => return Err(unsupported(form, name)),
            };
            if seen.contains(&known) {
                return Err(Problem::Value {
                    name: known,
                    expected: "is given twice",
                });
            }
            seen.push(known);
        }
        Ok(options)
    }
}

/// oslo.config's boolean words, case-insensitive.
fn oslo_bool(value: &str) -> Option<bool> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Some(true),
        "false" | "0" | "no" | "off" => Some(false),
        _ => None,
    }
}

fn unsupported(form: Form, name: &str) -> Problem {
    let (accepted, hint) = match (form, name) {
        (Form::Oslo, "ssl_ca_file") => ("ssl", ": set notifications.rabbitmq.ca_file"),
        (Form::Oslo, "amqp_durable_queues") => ("ssl", ": set notifications.rabbitmq.durable"),
        (Form::Oslo, n) if n.starts_with("ssl_") => (
            "ssl",
            ": the agent verifies the broker against notifications.rabbitmq.ca_file and sends no client certificate",
        ),
        (Form::Oslo, _) => (
            "ssl",
            ": other oslo.messaging options do not apply to this consumer; leave them out",
        ),
        (Form::Amqp { .. }, "ssl") => ("heartbeat", ": use amqps:// for TLS"),
        (Form::Amqp { .. }, _) => ("heartbeat", ""),
    };
    Problem::Parameter {
        name: plain_word(name, &[]),
        accepted,
        hint,
    }
}

impl BrokerHost {
    /// `[user[:pass]@]host[:port]` (oslo splits the credentials at the
    /// last `@`, the password at the first `:`).
    fn parse(entry: &str, default_port: u16) -> Result<BrokerHost, HostProblem> {
        let (userinfo, location) = match entry.rsplit_once('@') {
            Some((userinfo, location)) => (Some(userinfo), location),
            None => (None, entry),
        };
        let (user, password) = match userinfo.map(|u| u.split_once(':').unwrap_or((u, ""))) {
            Some((user, password)) => (user, password),
            None => ("", ""),
        };
        let credential = |text: &str| {
            if text.is_empty() {
                Ok(DEFAULT_CREDENTIAL.to_owned())
            } else {
                decode(text).ok_or(HostProblem::Credentials)
            }
        };
        let (host, port) = location_parts(location)?;
        let port = match port {
            None => default_port,
            Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => p
                .parse::<u16>()
                .ok()
                .filter(|&p| p != 0)
                .ok_or(HostProblem::Port)?,
            Some(_) => return Err(HostProblem::Port),
        };
        Ok(BrokerHost {
            host: host.to_owned(),
            port,
            user: credential(user)?,
            password: credential(password)?,
        })
    }

    /// The host name or address (IPv6 without brackets).
    #[must_use]
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The port.
    #[must_use]
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The user it logs in as.
    #[must_use]
    pub fn user(&self) -> &str {
        &self.user
    }
}

/// Host and port text of `host`, `host:port`, `[v6]`, `[v6]:port` or a
/// bare IPv6 address (no port: its colons leave none to tell apart).
fn location_parts(location: &str) -> Result<(&str, Option<&str>), HostProblem> {
    if location.is_empty() {
        return Err(HostProblem::Empty);
    }
    if let Some(rest) = location.strip_prefix('[') {
        let (inside, after) = rest.split_once(']').ok_or(HostProblem::Address)?;
        inside
            .parse::<Ipv6Addr>()
            .map_err(|_| HostProblem::Address)?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or(HostProblem::Address)?),
        };
        return Ok((inside, port));
    }
    let (host, port) = match location.matches(':').count() {
        0 => (location, None),
        1 => location
            .split_once(':')
            .map(|(h, p)| (h, Some(p)))
            .ok_or(HostProblem::Address)?,
        _ => {
            location
                .parse::<Ipv6Addr>()
                .map_err(|_| HostProblem::Address)?;
            return Ok((location, None));
        }
    };
    if host.is_empty() {
        return Err(HostProblem::Empty);
    }
    let name_like = host
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
    if !name_like {
        return Err(HostProblem::Address);
    }
    Ok((host, port))
}

impl fmt::Display for BrokerHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

impl fmt::Debug for BrokerHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BrokerHost({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> RabbitUrl {
        RabbitUrl::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    /// host:port of each host, the vhost, TLS.
    fn summary(url: &RabbitUrl) -> (Vec<String>, &str, bool) {
        let hosts = url.hosts().iter().map(ToString::to_string).collect();
        (hosts, url.vhost(), url.is_tls())
    }

    #[test]
    fn the_vhost_is_read_as_oslo_reads_it_and_empty_means_the_default() {
        for (text, vhost) in [
            // oslo.messaging: every spelling of "no vhost" and of "/".
            ("rabbit://u:p@h:5672/", "/"),
            ("rabbit://u:p@h:5672", "/"),
            ("rabbit://u:p@h:5672//", "/"),
            ("rabbit://u:p@h:5672/%2F", "/"),
            ("rabbit://u:p@h:5672/%2f", "/"),
            ("rabbit://u:p@h:5672/openstack", "openstack"),
            ("rabbit://u:p@h:5672/a%2Fb", "a/b"),
            ("rabbit://u:p@h:5672/a/b", "a/b"),
            ("rabbit://u:p@h:5672/?ssl=0", "/"),
            // AMQP URIs: empty is `/` here too, a named vhost as named.
            ("amqp://u:p@h:5672/", "/"),
            ("amqp://u:p@h:5672", "/"),
            ("amqp://u:p@h:5672/%2F", "/"),
            ("amqp://u:p@h:5672/nova", "nova"),
            ("amqps://u:p@h/%2Fprod", "/prod"),
        ] {
            assert_eq!(parsed(text).vhost(), vhost, "{text}");
        }
    }

    #[test]
    fn an_oslo_transport_url_is_taken_as_it_is() {
        let url = parsed(
            "rabbit://nova:s3cr%40t@ctl1:5672,nova:p@ss:w0rd@ctl2,guest@192.0.2.3:5673,[2001:db8::7]:5674/",
        );
        assert_eq!(
            summary(&url),
            (
                vec![
                    "ctl1:5672".to_owned(),
                    "ctl2:5672".to_owned(),
                    "192.0.2.3:5673".to_owned(),
                    "[2001:db8::7]:5674".to_owned()
                ],
                "/",
                false
            )
        );
        let h = url.hosts();
        assert_eq!((h[0].user(), h[0].password.as_str()), ("nova", "s3cr@t"));
        // Split at the last `@`, then at the first `:`, as oslo does.
        assert_eq!((h[1].user(), h[1].password.as_str()), ("nova", "p@ss:w0rd"));
        // Missing credentials are guest's.
        assert_eq!((h[2].user(), h[2].password.as_str()), ("guest", "guest"));
        assert_eq!(h[3].host(), "2001:db8::7");
        // kombu:// is the same driver; a trailing comma is skipped.
        assert_eq!(summary(&parsed("kombu://u:p@a,/")).0, ["a:5672"]);
        // A bare IPv6 address takes the default port.
        assert_eq!(summary(&parsed("rabbit://u:p@::1/")).0, ["[::1]:5672"]);
    }

    #[test]
    fn tls_follows_the_scheme_or_oslos_ssl_option() {
        for (text, tls, port) in [
            ("rabbit://u:p@h/", false, 5672),
            ("rabbit://u:p@h/?ssl=1", true, 5672),
            ("rabbit://u:p@h/?ssl=True", true, 5672),
            ("rabbit://u:p@h/?ssl=off", false, 5672),
            ("rabbit://u:p@h//?ssl=yes", true, 5672),
            ("amqp://u:p@h/", false, 5672),
            ("amqps://u:p@h/", true, 5671),
            ("amqps://u:p@h:5999/?heartbeat=30", true, 5999),
        ] {
            let url = parsed(text);
            assert_eq!((url.is_tls(), url.hosts()[0].port()), (tls, port), "{text}");
        }
        assert_eq!(parsed("amqp://h/?heartbeat=30").heartbeat, Some(30));
    }

    #[test]
    fn lapin_gets_each_host_as_written_ip_addresses_included() {
        let url = parsed("amqps://a:b%2Cc@10.1.2.3:5671,a:b%2Cc@[fd00::1]/%2Fos?heartbeat=9");
        let uris: Vec<AMQPUri> = url.hosts().iter().map(|h| url.amqp_uri(h)).collect();
        assert_eq!(uris[0].authority.host, "10.1.2.3");
        assert_eq!(uris[1].authority.host, "fd00::1");
        assert_eq!(uris[1].authority.port, 5671);
        for uri in &uris {
            assert_eq!(uri.scheme, AMQPScheme::AMQPS);
            assert_eq!(uri.vhost, "/os");
            assert_eq!(uri.authority.userinfo.password, "b,c");
            assert_eq!(uri.query.heartbeat, Some(9));
        }
    }

    #[test]
    fn every_password_of_every_host_is_redacted() {
        let url = parsed("rabbit://a:pw-one@h1:5672,b:pw%2Ctwo@h2:5672,c@h3/nova?ssl=1");
        let shown = [
            url.redacted().to_owned(),
            url.to_string(),
            format!("{url:?}"),
            format!("{:?}", url.hosts()),
        ];
        for s in &shown {
            assert!(!s.contains("pw-one") && !s.contains("pw%2Ctwo"), "{s}");
        }
        assert_eq!(
            url.redacted(),
            "rabbit://a:REDACTED@h1:5672,b:REDACTED@h2:5672,c@h3/nova?ssl=1"
        );
        assert_eq!(
            shown[3],
            "[BrokerHost(h1:5672), BrokerHost(h2:5672), BrokerHost(h3:5672)]"
        );
        // The redacted text is still a URL of the same brokers.
        assert_eq!(summary(&parsed(url.redacted())), summary(&url));
        assert_eq!(
            url.expose(),
            "rabbit://a:pw-one@h1:5672,b:pw%2Ctwo@h2:5672,c@h3/nova?ssl=1"
        );
    }

    #[test]
    fn errors_say_what_is_wrong_and_never_quote_the_url() {
        for (text, problem) in [
            ("u:topsecret@h:5672", "not a URL (no scheme://)"),
            ("http://u:topsecret@h/", "scheme \"http\" is not rabbit or kombu (oslo.messaging) nor amqp or amqps"),
            ("rabbit+ssl://u:topsecret@h/", "scheme \"rabbit+ssl\" is not rabbit"),
            ("u:topsecret@h://x", "scheme (not shown) is not rabbit"),
            ("kafka://h:9092/", "kafka:// is not a RabbitMQ URL: Kafka notifications go under notifications.kafka, and fleet mode's state stream is a RabbitMQ stream only (docs/decisions/0009)"),
            ("rabbit://", "no host"),
            ("rabbit://u:topsecret@/", "host 1 of 1: no host name or address"),
            ("rabbit://u:p@a,u:topsecret@h:99999/", "host 2 of 2: the port is not a number from 1 to 65535"),
            ("rabbit://u:p@a,u:topsecret@h:0/", "host 2 of 2: the port is not a number"),
            ("rabbit://u:top/secret@h/", "host 1 of 1: the port is not a number"),
            ("rabbit://u:top,secret@h/", "host 1 of 2: the port is not a number"),
            ("rabbit://u:topsecret@h:x:y/", "host 1 of 1: not a host name or IP address"),
            ("rabbit://u:topsecret@h%20x/", "host 1 of 1: not a host name or IP address"),
            ("rabbit://u:top%FFsecret@h/", "host 1 of 1: the user or password is not UTF-8"),
            ("rabbit://u:top#secret@h/", "a URL with a fragment (#)"),
            ("amqp://u:topsecret@h/%FF", "the vhost is not 1 to 255 bytes"),
            ("rabbit://u:topsecret@h/?ssl=maybe", "query parameter ssl takes true or false (also 1/0, yes/no, on/off)"),
            ("rabbit://u:topsecret@h/?ssl=1&ssl=0", "query parameter ssl is given twice"),
            ("rabbit://u:topsecret@h/?ssl_ca_file=/ca.pem", "query parameter \"ssl_ca_file\" is not supported (accepted: ssl): set notifications.rabbitmq.ca_file"),
            ("rabbit://u:topsecret@h/?amqp_durable_queues=true", "query parameter \"amqp_durable_queues\" is not supported (accepted: ssl): set notifications.rabbitmq.durable"),
            ("rabbit://u:topsecret@h/?heartbeat_timeout_threshold=60", "query parameter \"heartbeat_timeout_threshold\" is not supported (accepted: ssl): other oslo.messaging options"),
            ("amqp://u:topsecret@h/?ssl=1", "query parameter \"ssl\" is not supported (accepted: heartbeat): use amqps:// for TLS"),
            ("amqp://u:topsecret@h/?heartbeat=-1", "query parameter heartbeat takes a number of seconds"),
            // A password of digits before an unencoded `?`: the rest of it
            // would be the parameter's name, so the name is not shown.
            ("rabbit://u:1234?top@secret@h/", "query parameter (not shown) is not supported"),
        ] {
            let e = RabbitUrl::parse(text).unwrap_err().to_string();
            assert!(e.starts_with(problem), "{text}: {e}");
            assert!(!e.contains("topsecret") && !e.contains("top@secret"), "{text}: {e}");
            assert!(e.contains("expected an oslo.messaging transport_url"), "{text}: {e}");
            assert!(e.ends_with("(the value is not shown: it may hold a password)"), "{text}: {e}");
        }
    }
}
