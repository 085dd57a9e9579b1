//! The layered tree → [`Config`]: every value read by its key's form, then
//! the rules that involve several keys or a bound. All problems are
//! collected, not just the first, in file order.
//!
//! serde stops at the first bad value, so the tree is read again after
//! each one with that value taken out (its default, or for a required key
//! its section, stands in); the rules then skip every key that was bad.
//! An unknown key is reported and taken out the same way. Problems of the
//! file's structure (a list where a section or a single value belongs) end
//! the reading at the first one, alone.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::Duration;

use lachesis_config::form::{duration, show_duration, show_size};
use lachesis_config::{Key, Scalar, Shape};
use lachesis_notify::SaslMechanism;
use serde::Deserialize as _;
use serde_json::Value;

use super::error::Issue;
use super::layers;
use super::model::{Config, MetadataSource, SCHEMA};

/// The reconciler never debounces a kick longer than this (issue 8: "quiet
/// window `kick_debounce`, cap 5 s").
pub const KICK_DEBOUNCE_CAP: Duration = Duration::from_secs(5);
/// Longest a swept port's series may be retained (30 days).
pub const PORT_SERIES_RETENTION_MAX: Duration = Duration::from_hours(30 * 24);

/// Reads the layered tree: the configuration, or every problem found.
pub(crate) fn config(tree: Value) -> Result<Config, Vec<Issue>> {
    // serde reads a list as a struct's fields in order; a configuration
    // section must be a mapping.
    for section in SCHEMA.sections() {
        if layers::get(&tree, &section.path).is_some_and(Value::is_array) {
            let name = section.path.rsplit('.').next().unwrap_or(&section.path);
            return Err(vec![Issue::new(
                &section.path,
                format!("found sequence; expected a mapping of {name} keys"),
            )]);
        }
    }
    let mut read = Read {
        tree,
        issues: Vec::new(),
        bad: BTreeSet::new(),
        kept: BTreeMap::new(),
        stood_in: BTreeSet::new(),
    };
    let config = read.values()?;
    let mut issues = read.issues;
    let rules = Rules {
        config: &config,
        tree: &read.tree,
        bad: &read.bad,
        issues: &mut issues,
    };
    rules.check();
    // File order; a problem the rules found about a key stays after the
    // key's own.
    issues.sort_by_key(|i| order(key_of(&i.key)));
    if issues.is_empty() {
        Ok(config)
    } else {
        Err(issues)
    }
}

/// Where a problem about `key` is listed: a key's in the schema's (file)
/// order, an unknown key's after the known keys of its section.
fn order(key: &str) -> (usize, bool) {
    if let Some(at) = SCHEMA.position(key) {
        return (at, false);
    }
    let section = key.rsplit_once('.').map_or("", |(s, _)| s);
    let last = SCHEMA
        .keys()
        .iter()
        .rposition(|k| !section.is_empty() && k.path.starts_with(&format!("{section}.")));
    (last.unwrap_or(usize::MAX), true)
}

/// `datapath.interfaces[2]` → `datapath.interfaces`.
fn key_of(path: &str) -> &str {
    path.split_once('[').map_or(path, |(key, _)| key)
}

/// The tree as it is read again and again.
struct Read {
    tree: Value,
    issues: Vec<Issue>,
    /// Keys (and sections) that were bad: the rules leave them alone.
    bad: BTreeSet<String>,
    /// For a list an item was taken out of: the original index of every
    /// item still in it, so the next bad item is named where it was written.
    kept: BTreeMap<String, Vec<usize>>,
    /// Required keys given a stand-in (once each).
    stood_in: BTreeSet<String>,
}

impl Read {
    /// Reads until the tree is valid; a structural problem ends it alone.
    fn values(&mut self) -> Result<Config, Vec<Issue>> {
        loop {
            let e = match serde_path_to_error::deserialize::<_, Config>(self.tree.clone()) {
                Ok(config) => return Ok(config),
                Err(e) => e,
            };
            let message = e.inner().to_string();
            let mut keys = Vec::new();
            let mut index = None;
            for segment in e.path() {
                match segment {
                    serde_path_to_error::Segment::Map { key } => keys.push(key.as_str()),
                    serde_path_to_error::Segment::Seq { index: i } => index = Some(*i),
                    _ => {}
                }
            }
            let path = keys.join(".");
            let taken = if let Some(field) = missing_field(&message) {
                self.missing(&path, field)
            } else if message.starts_with("unknown field `") && !path.is_empty() {
                self.unknown(&path, &message)
            } else if SCHEMA.key(&path).is_some() && !message.starts_with("invalid type: ") {
                // A value of the key's form that does not read. A list or a
                // mapping where a value belongs (serde's "invalid type") is
                // the file's structure, like a list where a section belongs.
                self.bad_value(&path, index, &message)
            } else {
                false
            };
            if !taken {
                let key = if path.is_empty() {
                    "(top level)".to_owned()
                } else {
                    e.path().to_string()
                };
                return Err(vec![Issue::new(key, explain_serde(&message))]);
            }
        }
    }

    /// A required key of a present section: reported (unless its value was
    /// reported bad already). A stand-in of its form takes its place, so
    /// the section's other keys are still read (serde names one missing
    /// key at a time); without one, the section is taken out.
    fn missing(&mut self, section: &str, field: &str) -> bool {
        let key = format!("{section}.{field}");
        if self.bad.insert(key.clone()) {
            self.issues.push(Issue::new(
                &key,
                format!("is required when {section} is set"),
            ));
        }
        let stand_in = SCHEMA.key(&key).and_then(stand_in);
        match stand_in {
            Some(value) if self.stood_in.insert(key.clone()) => {
                layers::set(&mut self.tree, &key, value).is_ok()
            }
            _ => {
                self.bad.insert(section.to_owned());
                layers::remove(&mut self.tree, section)
            }
        }
    }

    /// A key no section has (a typo, a key of another version): reported
    /// and taken out, so the rest of the file is still read.
    fn unknown(&mut self, key: &str, message: &str) -> bool {
        if !self.bad.insert(key.to_owned()) {
            return false;
        }
        self.issues.push(Issue::new(key, explain_serde(message)));
        layers::remove(&mut self.tree, key)
    }

    /// A bad value, or a bad item of a list: reported and taken out.
    fn bad_value(&mut self, key: &str, index: Option<usize>, message: &str) -> bool {
        if self.stood_in.contains(key) {
            // A stand-in that does not read: the section goes instead.
            let section = key.rsplit_once('.').map_or("", |(s, _)| s);
            self.bad.insert(section.to_owned());
            return layers::remove(&mut self.tree, section);
        }
        self.bad.insert(key.to_owned());
        let Some(i) = index else {
            self.issues.push(Issue::new(key, explain_serde(message)));
            return layers::remove(&mut self.tree, key);
        };
        let Some(Value::Array(items)) = layers::get_mut(&mut self.tree, key) else {
            return false;
        };
        let kept = self
            .kept
            .entry(key.to_owned())
            .or_insert_with(|| (0..items.len()).collect());
        if i >= items.len() || i >= kept.len() {
            return false;
        }
        items.remove(i);
        let written_at = kept.remove(i);
        self.issues.push(Issue::new(
            format!("{key}[{written_at}]"),
            explain_serde(message),
        ));
        true
    }
}

/// A value of a required key's form that reads well, standing in for it
/// while the rest of its section is read (the key itself is reported, and
/// the rules leave it alone). `None`: the section is taken out instead.
fn stand_in(key: &Key) -> Option<Value> {
    match (key.shape, key.label) {
        (Shape::List, "list of host:port") => Some(Value::from(vec!["stand-in:1"])),
        (Shape::List, _) => Some(Value::from(vec!["stand-in"])),
        (Shape::Text, "broker URL (secret passwords)") => Some(Value::from("amqp://stand-in/")),
        (Shape::Text, _) => Some(Value::from("stand-in")),
        (Shape::Scalar, choice) if choice.contains(" | ") => {
            choice.split(" | ").next().map(Value::from)
        }
        (Shape::Scalar, _) => None,
    }
}

/// The field of serde's "missing field `x`".
fn missing_field(message: &str) -> Option<&str> {
    message
        .strip_prefix("missing field `")
        .and_then(|r| r.strip_suffix('`'))
}

/// serde's wording, in the words of a configuration file.
fn explain_serde(message: &str) -> String {
    if let Some(rest) = message.strip_prefix("unknown field `") {
        let expected = rest.split_once("`, ").map_or("", |(_, e)| e);
        let expected = expected.replace('`', "");
        return if expected.is_empty() || expected == "there are no fields" {
            "unknown key".into()
        } else {
            format!("unknown key; {expected}")
        };
    }
    if let Some(rest) = message.strip_prefix("invalid type: ") {
        if let Some((found, expected)) = rest.split_once(", expected ") {
            let expected = if expected == "a sequence" {
                "a list, e.g. [a, b]"
            } else {
                expected
            };
            return format!("found {}; expected {expected}", found.replace('`', ""));
        }
    }
    message.to_owned()
}

/// The values a duration tunable accepts, and why its ends are where they
/// are: an error names both ends and the reason for the one crossed.
#[derive(Debug, Clone, Copy)]
pub struct Span {
    /// The shortest value accepted.
    pub min: Duration,
    /// Why nothing shorter.
    pub below: &'static str,
    /// The longest value accepted.
    pub max: Duration,
    /// Why nothing longer.
    pub above: &'static str,
}

impl Span {
    /// `Err` with the message for a value outside the span; `written` is
    /// the value as the operator wrote it.
    pub fn check(&self, d: Duration, written: &str) -> Result<Duration, String> {
        let show = show_duration;
        let range = format!("expected {} to {}", show(self.min), show(self.max));
        if d < self.min {
            let (min, why) = (show(self.min), self.below);
            Err(format!("{written} is below {min} ({why}); {range}"))
        } else if d > self.max {
            let (max, why) = (show(self.max), self.above);
            Err(format!("{written} is above {max} ({why}); {range}"))
        } else {
            Ok(d)
        }
    }
}

/// The span of each bounded duration, by key (docs/configuration.md
/// "Bounds" lists the same).
pub const SPANS: &[(&str, Span)] = &[
    (
        "metadata.lookback",
        Span {
            min: Duration::from_mins(1),
            below: "a boot must find a relay's snapshot start in it; with none, the agent reads the whole stream after twice this",
            max: Duration::from_hours(24),
            above: "a boot reads every record of this window, and the stream keeps 2h unless configured otherwise",
        },
    ),
    (
        "tunables.scrape_interval",
        Span {
            min: Duration::from_millis(100),
            below: "a drain of a full flows map takes tens of milliseconds: a shorter interval spends a CPU on draining",
            max: Duration::from_mins(10),
            above: "the billing series lag the kernel by up to one interval, and a stalled drain shows on /healthz only after three",
        },
    ),
    (
        "tunables.reconcile_interval",
        Span {
            min: Duration::from_secs(1),
            below: "every pass is a full OpenStack sync",
            max: Duration::from_hours(24),
            above: "with the notification bus down, a change in OpenStack reaches the kernel only at the next pass",
        },
    ),
    (
        "tunables.kick_debounce",
        Span {
            min: Duration::ZERO,
            below: "",
            max: KICK_DEBOUNCE_CAP,
            above: "the reconciler caps the debounce there",
        },
    ),
    (
        "tunables.ghost_grace",
        Span {
            min: Duration::from_secs(1),
            below: "a deleted port's last packets are read after its deletion, and a MAC moved between ports in two steps must not lose its binding in between",
            max: Duration::from_hours(7 * 24),
            above: "every ghost keeps its binding in the 16 384-entry endpoints map and its rows in the ledger until swept",
        },
    ),
    (
        "tunables.ghost_sweep_interval",
        Span {
            min: Duration::from_millis(100),
            below: "each sweep takes the ledger's order: drain, flush, settle, flush",
            max: Duration::from_hours(1),
            above: "a ghost past its grace outlives it by up to one interval",
        },
    ),
    (
        "tunables.state_flush_interval",
        Span {
            min: Duration::from_millis(100),
            below: "each flush writes and fsyncs the whole state file",
            max: Duration::from_hours(1),
            above: "a host reboot loses up to one interval of counted bytes, and the billing series lag by as much",
        },
    ),
    (
        "tunables.unresolved_ttl",
        Span {
            min: Duration::from_secs(1),
            below: "a row of a MAC not yet learned must be able to wait for the reconcile pass its notification kicks",
            max: Duration::from_hours(1),
            above: "bytes of an unknown MAC stay out of every series (even tenant \"unknown\") that long",
        },
    ),
    (
        "tunables.resync_spread",
        Span {
            min: Duration::ZERO,
            below: "",
            max: Duration::from_mins(10),
            above: "a gap's pass waits up to this long, and changes missed in the gap reach the kernel only then",
        },
    ),
    (
        "tunables.port_series_retention",
        Span {
            min: Duration::ZERO,
            below: "",
            max: PORT_SERIES_RETENTION_MAX,
            above: "a retained series is exported all along",
        },
    ),
];

/// The smallest `datapath.flows_memory_budget`: below it every budget gives
/// the map's floor of 8 192 entries anyway.
pub const FLOWS_BUDGET_MIN: u64 = 1 << 20;
/// The largest: the map's ceiling of 262 144 entries needs under 9 GiB
/// even at 1 024 possible CPUs.
pub const FLOWS_BUDGET_MAX: u64 = 16 << 30;

/// Below this, `tunables.reconcile_interval` is accepted with a warning:
/// every pass is a full sync of the cloud, from every node.
pub const RECONCILE_INTERVAL_WARN: Duration = Duration::from_mins(1);

/// The rules over read values: each runs only when none of its keys was bad.
struct Rules<'a> {
    config: &'a Config,
    tree: &'a Value,
    bad: &'a BTreeSet<String>,
    issues: &'a mut Vec<Issue>,
}

impl Rules<'_> {
    fn error(&mut self, key: impl Into<String>, message: impl Into<String>) {
        self.issues.push(Issue::new(key, message));
    }

    /// Whether every key (or section) named was read well.
    fn good(&self, keys: &[&str]) -> bool {
        keys.iter().all(|k| !self.bad.contains(*k))
    }

    /// A list that must hold something (an empty one is valid YAML).
    fn not_empty(&mut self, key: &str, list: &[String], message: &str) {
        if self.good(&[key]) && list.is_empty() {
            self.error(key, message);
        }
    }

    fn check(mut self) {
        self.spans();
        self.metadata();
        self.listen();
        self.datapath();
        self.rabbitmq();
        self.kafka();
        self.watermarks();
    }

    /// Each bounded duration within its span, named as written.
    fn spans(&mut self) {
        for (key, span) in SPANS {
            let written = layers::get(self.tree, key).and_then(|v| Scalar::deserialize(v).ok());
            let (Some(written), true) = (written, self.good(&[key])) else {
                continue;
            };
            let checked = duration(&written).and_then(|d| span.check(d, written.text().trim()));
            if let Err(message) = checked {
                self.error(*key, message);
            }
        }
    }

    /// Relay mode needs its stream; the stream's CA file needs TLS.
    fn metadata(&mut self) {
        const STREAM: &str = "metadata.stream";
        let m = &self.config.metadata;
        if !self.good(&["metadata.source", STREAM]) {
            return;
        }
        match &m.stream {
            None if m.source == MetadataSource::Relay => self.error(
                STREAM,
                "is required when metadata.source is relay: the agent reads its desired state from \
                 that stream; expected a mapping with at least url",
            ),
            Some(stream)
                if self.good(&["metadata.stream.url", "metadata.stream.ca_file"])
                    && stream.ca_file.is_some()
                    && !stream.url.is_tls() =>
            {
                self.error(
                    "metadata.stream.ca_file",
                    "is set but metadata.stream.url has no TLS; use amqps://, or ?ssl=1 in a rabbit:// URL",
                );
            }
            _ => {}
        }
    }

    fn listen(&mut self) {
        const METRICS: &str = "listen.metrics";
        const DEBUG: &str = "listen.debug";
        let (metrics, debug) = (self.config.listen.metrics, self.config.listen.debug);
        if self.good(&[METRICS, DEBUG])
            && metrics.port() != 0
            && metrics.port() == debug.port()
            && overlaps(metrics, debug)
        {
            self.error(
                DEBUG,
                format!("{debug} collides with listen.metrics ({metrics}); use another port"),
            );
        }
    }

    fn datapath(&mut self) {
        const BUDGET: &str = "datapath.flows_memory_budget";
        const PREFIXES: &str = "datapath.interface_prefixes";
        let d = &self.config.datapath;
        let b = d.flows_memory_budget;
        let (min, max) = (show_size(FLOWS_BUDGET_MIN), show_size(FLOWS_BUDGET_MAX));
        if !self.good(&[BUDGET]) {
            // Its own error said enough.
        } else if b < FLOWS_BUDGET_MIN {
            self.error(
                BUDGET,
                format!(
                    "{} is below {min} (every smaller budget gives the flows map's floor of 8 192 entries); \
                     expected {min} to {max}",
                    show_size(b)
                ),
            );
        } else if b > FLOWS_BUDGET_MAX {
            self.error(
                BUDGET,
                format!(
                    "{} is above {max} (the flows map's ceiling of 262 144 entries needs less at any CPU count); \
                     expected {min} to {max}",
                    show_size(b)
                ),
            );
        }
        if self.good(&[PREFIXES, "datapath.interfaces"])
            && d.interface_prefixes.is_empty()
            && d.interfaces.is_empty()
        {
            self.error(
                PREFIXES,
                "is empty and so is datapath.interfaces: no interface would be metered",
            );
        }
    }

    fn rabbitmq(&mut self) {
        const P: &str = "notifications.rabbitmq";
        let Some(r) = &self.config.notifications.rabbitmq else {
            return;
        };
        self.not_empty(
            &format!("{P}.exchanges"),
            &r.exchanges,
            "is empty: the agent's queue would receive nothing",
        );
        if self.good(&[&format!("{P}.url"), &format!("{P}.ca_file")])
            && r.ca_file.is_some()
            && !r.url.is_tls()
        {
            self.error(
                format!("{P}.ca_file"),
                format!(
                    "is set but {P}.url has no TLS; use amqps://, or ?ssl=1 in a rabbit:// URL"
                ),
            );
        }
    }

    fn kafka(&mut self) {
        const P: &str = "notifications.kafka";
        const TLS: &str = "notifications.kafka.tls";
        let Some(k) = &self.config.notifications.kafka else {
            return;
        };
        self.not_empty(
            &format!("{P}.brokers"),
            &k.brokers,
            "is empty; expected at least one host:port",
        );
        // A file key that was bad reads as unset here.
        let files = [
            ("ca_file", k.tls.ca_file.is_some()),
            ("cert_file", k.tls.cert_file.is_some()),
            ("key_file", k.tls.key_file.is_some()),
        ];
        if self.good(&[&format!("{TLS}.enabled")]) {
            if !k.tls.enabled {
                for (name, set) in files {
                    if set {
                        self.error(
                            format!("{TLS}.{name}"),
                            format!("is set but {TLS}.enabled is false"),
                        );
                    }
                }
            } else if files[1].1 && !files[2].1 {
                self.error(
                    format!("{TLS}.key_file"),
                    format!("is required with {TLS}.cert_file"),
                );
            } else if files[2].1 && !files[1].1 {
                self.error(
                    format!("{TLS}.cert_file"),
                    format!("is required with {TLS}.key_file"),
                );
            }
        }
        if let Some(sasl) = &k.sasl {
            let key = format!("{P}.sasl.password");
            // Never echo it, even in an error.
            if self.good(&[&key]) && sasl.password.is_empty() {
                self.error(key, "is empty; expected the SASL password");
            }
        }
    }

    /// 0 < low < high < 1.0 (DESIGN §9: a full `flows` map drops new flows,
    /// so relief must start before it is full).
    fn watermarks(&mut self) {
        const HIGH: &str = "tunables.pressure_high_watermark";
        const LOW: &str = "tunables.pressure_low_watermark";
        if !self.good(&[HIGH, LOW]) {
            return;
        }
        let t = self.config.tunables;
        let (high, low) = (t.pressure_high_watermark, t.pressure_low_watermark);
        if high >= 1.0 {
            self.error(HIGH, format!("{high} must be below 1.0"));
        } else if high <= 0.0 {
            self.error(HIGH, format!("{high} must be above 0"));
        }
        if low <= 0.0 {
            self.error(LOW, format!("{low} must be above 0"));
        } else if low >= high {
            self.error(LOW, format!("{low} must be below {HIGH} ({high})"));
        }
    }
}

/// Two listeners on one port conflict when their addresses are equal or
/// either is the unspecified address of the same family.
fn overlaps(a: SocketAddr, b: SocketAddr) -> bool {
    a.ip() == b.ip()
        || (a.is_ipv4() == b.is_ipv4() && (a.ip().is_unspecified() || b.ip().is_unspecified()))
}

/// Warnings: allowed, but worth an operator's look.
pub(crate) fn warnings(config: &Config) -> Vec<Issue> {
    let mut out = Vec::new();
    if !config.listen.debug.ip().is_loopback() {
        out.push(Issue::new(
            "listen.debug",
            format!(
                "{} is not a loopback address: the debug endpoints (configuration, plan, flows) \
                 are reachable from the network",
                config.listen.debug
            ),
        ));
    }
    if config.tunables.reconcile_interval < RECONCILE_INTERVAL_WARN {
        out.push(Issue::new(
            "tunables.reconcile_interval",
            format!(
                "{} is under {}: every pass lists every port, network, router and server \
                 of the cloud, from every node; notifications already kick a pass within seconds of a change",
                show_duration(config.tunables.reconcile_interval),
                show_duration(RECONCILE_INTERVAL_WARN)
            ),
        ));
    }
    if let Some(kafka) = &config.notifications.kafka {
        if !kafka.tls.enabled
            && kafka
                .sasl
                .as_ref()
                .is_some_and(|s| s.mechanism == SaslMechanism::Plain)
        {
            out.push(Issue::new(
                "notifications.kafka.sasl.mechanism",
                "plain without notifications.kafka.tls: the password crosses the network in clear",
            ));
        }
    }
    out
}
