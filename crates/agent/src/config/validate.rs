//! The raw tree → [`Config`]: every value parsed with its key's path in the
//! error, then the checks that involve several keys. All problems are
//! collected, not just the first.

use std::net::SocketAddr;
use std::time::Duration;

use lachesis_datapath::FLOWS_MAX_ENTRIES;
use lachesis_notify::RabbitUrl;
use serde_json::Value;

use super::error::Issue;
use super::keys::{self, ATTACH_MODES, LOG_FORMATS, LOG_LEVELS, SASL_MECHANISMS};
use super::layers;
use super::model::{
    ClientCert, Config, DatapathSettings, KafkaSasl, KafkaSettings, KafkaTls, ListenSettings,
    LogFormat, LogLevel, LogSettings, NotificationSettings, OpenStackSettings, RabbitMqSettings,
    SaslMechanism, StateSettings, Tunables, ATTACH_MODES_ALL,
};
use super::raw::{
    RawConfig, RawDatapath, RawKafka, RawKafkaSasl, RawKafkaTls, RawListen, RawRabbitMq,
    RawTunables, Scalar,
};
use super::secret::Secret;
use super::values;

/// The reconciler never debounces a kick longer than this (issue 8: "quiet
/// window `kick_debounce`, cap 5 s").
pub const KICK_DEBOUNCE_CAP: Duration = Duration::from_secs(5);
/// Most router hops a static route may be configured to take.
pub const ROUTE_HOP_LIMIT_MAX: u64 = 255;
/// Longest a swept port's series may be retained (30 days).
pub const PORT_SERIES_RETENTION_MAX: Duration = Duration::from_hours(30 * 24);
/// Most rows the unresolved buffer may be configured to hold.
pub const UNRESOLVED_CAP_MAX: u64 = 10_000_000;

/// Reads the layered tree into the raw structs: unknown keys and wrong
/// shapes (a list where a section belongs) end here, with their path.
pub(crate) fn read_raw(tree: Value) -> Result<RawConfig, Issue> {
    // serde reads a list as a struct's fields in order; a configuration
    // section must be a mapping.
    for section in keys::sections() {
        if layers::get(&tree, &section).is_some_and(Value::is_array) {
            let name = section.rsplit('.').next().unwrap_or(&section);
            return Err(Issue::new(
                &section,
                format!("found sequence; expected a mapping of {name} keys"),
            ));
        }
    }
    serde_path_to_error::deserialize(tree).map_err(|e| {
        let path = e.path().to_string();
        let key = if path == "." {
            "(top level)".to_owned()
        } else {
            path
        };
        Issue::new(key, explain_serde(&e.inner().to_string()))
    })
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

/// Raw → typed, or every problem found.
pub(crate) fn config(raw: RawConfig) -> Result<Config, Vec<Issue>> {
    let mut c = Check::default();
    let openstack = raw.openstack.unwrap_or_default();
    let openstack = OpenStackSettings {
        cloud: c.opt("openstack.cloud", openstack.cloud.as_ref(), values::text),
        clouds_file: c.opt(
            "openstack.clouds_file",
            openstack.clouds_file.as_ref(),
            values::path,
        ),
    };
    let listen = listen(&mut c, &raw.listen.unwrap_or_default());
    let datapath = datapath(&mut c, &raw.datapath.unwrap_or_default());
    let state_path = c.req(
        "state.path",
        raw.state.unwrap_or_default().path.as_ref(),
        values::path,
    );
    let notifications = raw.notifications.unwrap_or_default();
    // Outer `None`: invalid; inner `None`: the transport is off.
    let rabbitmq = match notifications.rabbitmq {
        None => Some(None),
        Some(r) => rabbitmq(&mut c, &r).map(Some),
    };
    let kafka = match notifications.kafka {
        None => Some(None),
        Some(k) => kafka(&mut c, &k).map(Some),
    };
    let tunables = tunables(&mut c, &raw.tunables.unwrap_or_default());
    let log = raw.log.unwrap_or_default();
    let level = c.req("log.level", log.level.as_ref(), |v| {
        pick(v, LOG_LEVELS, &LogLevel::ALL)
    });
    let format = c.req("log.format", log.format.as_ref(), |v| {
        pick(v, LOG_FORMATS, &LogFormat::ALL)
    });
    let built = match (
        listen, datapath, state_path, rabbitmq, kafka, tunables, level, format,
    ) {
        (
            Some(listen),
            Some(datapath),
            Some(path),
            Some(rabbitmq),
            Some(kafka),
            Some(tunables),
            Some(level),
            Some(format),
        ) => Some(Config {
            openstack,
            listen,
            datapath,
            state: StateSettings { path },
            notifications: NotificationSettings { rabbitmq, kafka },
            tunables,
            log: LogSettings { level, format },
            overrides: Vec::new(),
        }),
        _ => None,
    };
    match built {
        Some(config) if c.issues.is_empty() => Ok(config),
        _ => Err(c.issues),
    }
}

/// One of `words`, as the variant at the same position of `all`.
fn pick<T: Copy>(v: &Scalar, words: &'static [&'static str], all: &[T]) -> Result<T, String> {
    let word = values::choice(v, words)?;
    let at = words
        .iter()
        .position(|w| *w == word)
        .expect("choice returns one of the words");
    Ok(all[at])
}

/// Parses a `log.level` spelling (the `PUT /debug/log-level` body).
pub fn parse_log_level(text: &str) -> Result<LogLevel, String> {
    pick(
        &Scalar::Str(text.trim().to_owned()),
        LOG_LEVELS,
        &LogLevel::ALL,
    )
}

fn listen(c: &mut Check, raw: &RawListen) -> Option<ListenSettings> {
    let metrics = c.req("listen.metrics", raw.metrics.as_ref(), values::address);
    let debug = c.req("listen.debug", raw.debug.as_ref(), values::address);
    let (metrics, debug) = (metrics?, debug?);
    if metrics.port() != 0 && metrics.port() == debug.port() && overlaps(metrics, debug) {
        c.error(
            "listen.debug",
            format!("{debug} collides with listen.metrics ({metrics}); use another port"),
        );
    }
    Some(ListenSettings { metrics, debug })
}

/// Two listeners on one port conflict when their addresses are equal or
/// either is the unspecified address of the same family.
fn overlaps(a: SocketAddr, b: SocketAddr) -> bool {
    a.ip() == b.ip()
        || (a.is_ipv4() == b.is_ipv4() && (a.ip().is_unspecified() || b.ip().is_unspecified()))
}

fn datapath(c: &mut Check, raw: &RawDatapath) -> Option<DatapathSettings> {
    let prefixes = c.list(
        "datapath.interface_prefixes",
        raw.interface_prefixes.as_ref(),
        values::interface,
    );
    let interfaces = c.list(
        "datapath.interfaces",
        raw.interfaces.as_ref(),
        values::interface,
    );
    let bpffs_dir = c.req("datapath.bpffs_dir", raw.bpffs_dir.as_ref(), values::path);
    let budget = c.req(
        "datapath.flows_memory_budget",
        raw.flows_memory_budget.as_ref(),
        values::size,
    );
    if let Some(b) = budget {
        let (min, max) = (
            values::show_size(FLOWS_BUDGET_MIN),
            values::show_size(FLOWS_BUDGET_MAX),
        );
        if b < FLOWS_BUDGET_MIN {
            c.error(
                "datapath.flows_memory_budget",
                format!(
                    "{} is below {min} (every smaller budget gives the flows map's floor of 8 192 entries); \
                     expected {min} to {max}",
                    values::show_size(b)
                ),
            );
        } else if b > FLOWS_BUDGET_MAX {
            c.error(
                "datapath.flows_memory_budget",
                format!(
                    "{} is above {max} (the flows map's ceiling of 262 144 entries needs less at any CPU count); \
                     expected {min} to {max}",
                    values::show_size(b)
                ),
            );
        }
    }
    let attach_mode = c.req("datapath.attach_mode", raw.attach_mode.as_ref(), |v| {
        pick(v, ATTACH_MODES, &ATTACH_MODES_ALL)
    });
    let (interface_prefixes, interfaces) = (prefixes?, interfaces?);
    if interface_prefixes.is_empty() && interfaces.is_empty() {
        c.error(
            "datapath.interface_prefixes",
            "is empty and so is datapath.interfaces: no interface would be metered",
        );
    }
    Some(DatapathSettings {
        interface_prefixes,
        interfaces,
        bpffs_dir: bpffs_dir?,
        flows_memory_budget: budget?,
        attach_mode: attach_mode?,
    })
}

fn rabbitmq(c: &mut Check, raw: &RawRabbitMq) -> Option<RabbitMqSettings> {
    let url = c.req(
        "notifications.rabbitmq.url",
        raw.url.as_ref().map(|s| &s.0),
        |v| RabbitUrl::parse(&v.text()).map_err(|e| e.to_string()),
    );
    let exchanges = c.list(
        "notifications.rabbitmq.exchanges",
        raw.exchanges.as_ref(),
        values::exchange,
    );
    let durable = c.req(
        "notifications.rabbitmq.durable",
        raw.durable.as_ref(),
        values::boolean,
    );
    let ca_file = c.opt(
        "notifications.rabbitmq.ca_file",
        raw.ca_file.as_ref(),
        values::path,
    );
    if exchanges.as_ref().is_some_and(Vec::is_empty) {
        c.error(
            "notifications.rabbitmq.exchanges",
            "is empty: the agent's queue would receive nothing",
        );
    }
    if ca_file.is_some() && url.as_ref().is_some_and(|u| !u.is_tls()) {
        c.error(
            "notifications.rabbitmq.ca_file",
            "is set but notifications.rabbitmq.url has no TLS; use amqps://, or ?ssl=1 in a rabbit:// URL",
        );
    }
    Some(RabbitMqSettings {
        url: url?,
        exchanges: exchanges?,
        durable: durable?,
        ca_file,
    })
}

fn kafka(c: &mut Check, raw: &RawKafka) -> Option<KafkaSettings> {
    let brokers = c.list(
        "notifications.kafka.brokers",
        raw.brokers.as_ref(),
        values::broker,
    );
    if brokers.as_ref().is_some_and(Vec::is_empty) {
        c.error(
            "notifications.kafka.brokers",
            "is empty; expected at least one host:port",
        );
    }
    let topic = c.req(
        "notifications.kafka.topic",
        raw.topic.as_ref(),
        values::topic,
    );
    // Outer `None`: invalid; inner `None`: off.
    let tls = match raw.tls.as_ref() {
        None => Some(None),
        Some(t) => kafka_tls(c, t).ok(),
    };
    let sasl = match raw.sasl.as_ref() {
        None => Some(None),
        Some(s) => kafka_sasl(c, s).map(Some),
    };
    Some(KafkaSettings {
        brokers: brokers?,
        topic: topic?,
        tls: tls?,
        sasl: sasl?,
    })
}

/// `Ok(None)` when TLS is present but off; `Err` when invalid (reported).
fn kafka_tls(c: &mut Check, raw: &RawKafkaTls) -> Result<Option<KafkaTls>, ()> {
    const P: &str = "notifications.kafka.tls";
    let enabled = c.req(
        "notifications.kafka.tls.enabled",
        raw.enabled.as_ref(),
        values::boolean,
    );
    let ca_file = c.opt(
        "notifications.kafka.tls.ca_file",
        raw.ca_file.as_ref(),
        values::path,
    );
    let cert_file = c.opt(
        "notifications.kafka.tls.cert_file",
        raw.cert_file.as_ref(),
        values::path,
    );
    let key_file = c.opt(
        "notifications.kafka.tls.key_file",
        raw.key_file.as_ref(),
        values::path,
    );
    let enabled = enabled.ok_or(())?;
    if !enabled {
        for (name, set) in [
            ("ca_file", ca_file.is_some()),
            ("cert_file", cert_file.is_some()),
            ("key_file", key_file.is_some()),
        ] {
            if set {
                c.error(
                    format!("{P}.{name}"),
                    format!("is set but {P}.enabled is false"),
                );
            }
        }
        return Ok(None);
    }
    let client = match (cert_file, key_file) {
        (Some(cert_file), Some(key_file)) => Some(ClientCert {
            cert_file,
            key_file,
        }),
        (None, None) => None,
        (Some(_), None) => {
            c.error(
                format!("{P}.key_file"),
                format!("is required with {P}.cert_file"),
            );
            None
        }
        (None, Some(_)) => {
            c.error(
                format!("{P}.cert_file"),
                format!("is required with {P}.key_file"),
            );
            None
        }
    };
    Ok(Some(KafkaTls { ca_file, client }))
}

fn kafka_sasl(c: &mut Check, raw: &RawKafkaSasl) -> Option<KafkaSasl> {
    let mechanism = c.req(
        "notifications.kafka.sasl.mechanism",
        raw.mechanism.as_ref(),
        |v| pick(v, SASL_MECHANISMS, &SaslMechanism::ALL),
    );
    let username = c.req(
        "notifications.kafka.sasl.username",
        raw.username.as_ref(),
        values::text,
    );
    let password = c.req(
        "notifications.kafka.sasl.password",
        raw.password.as_ref().map(|s| &s.0),
        // Never echo it, even in an error.
        |v| {
            values::text(v)
                .map(Secret::new)
                .map_err(|_| "is empty; expected the SASL password".to_owned())
        },
    );
    Some(KafkaSasl {
        mechanism: mechanism?,
        username: username?,
        password: password?,
    })
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
        let show = values::show_duration;
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

/// The span of each bounded duration tunable (docs/configuration.md
/// "Bounds" lists the same).
pub const SPANS: &[(&str, Span)] = &[
    (
        "scrape_interval",
        Span {
            min: Duration::from_millis(100),
            below: "a drain of a full flows map takes tens of milliseconds: a shorter interval spends a CPU on draining",
            max: Duration::from_mins(10),
            above: "the billing series lag the kernel by up to one interval, and a stalled drain shows on /healthz only after three",
        },
    ),
    (
        "reconcile_interval",
        Span {
            min: Duration::from_secs(1),
            below: "every pass is a full OpenStack sync",
            max: Duration::from_hours(24),
            above: "with the notification bus down, a change in OpenStack reaches the kernel only at the next pass",
        },
    ),
    (
        "kick_debounce",
        Span {
            min: Duration::ZERO,
            below: "",
            max: KICK_DEBOUNCE_CAP,
            above: "the reconciler caps the debounce there",
        },
    ),
    (
        "ghost_grace",
        Span {
            min: Duration::from_secs(1),
            below: "a deleted port's last packets are read after its deletion, and a MAC moved between ports in two steps must not lose its binding in between",
            max: Duration::from_hours(7 * 24),
            above: "every ghost keeps its binding in the 16 384-entry endpoints map and its rows in the ledger until swept",
        },
    ),
    (
        "ghost_sweep_interval",
        Span {
            min: Duration::from_millis(100),
            below: "each sweep takes the ledger's order: drain, flush, settle, flush",
            max: Duration::from_hours(1),
            above: "a ghost past its grace outlives it by up to one interval",
        },
    ),
    (
        "state_flush_interval",
        Span {
            min: Duration::from_millis(100),
            below: "each flush writes and fsyncs the whole state file",
            max: Duration::from_hours(1),
            above: "a host reboot loses up to one interval of counted bytes, and the billing series lag by as much",
        },
    ),
    (
        "unresolved_ttl",
        Span {
            min: Duration::from_secs(1),
            below: "a row of a MAC not yet learned must be able to wait for the reconcile pass its notification kicks",
            max: Duration::from_hours(1),
            above: "bytes of an unknown MAC stay out of every series (even tenant \"unknown\") that long",
        },
    ),
    (
        "resync_spread",
        Span {
            min: Duration::ZERO,
            below: "",
            max: Duration::from_mins(10),
            above: "a gap's pass waits up to this long, and changes missed in the gap reach the kernel only then",
        },
    ),
    (
        "port_series_retention",
        Span {
            min: Duration::ZERO,
            below: "",
            max: PORT_SERIES_RETENTION_MAX,
            above: "a retained series is exported all along",
        },
    ),
];

/// The span of `tunables.<name>`.
fn span(name: &str) -> &'static Span {
    &SPANS
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no span for tunables.{name}"))
        .1
}

/// The smallest `datapath.flows_memory_budget`: below it every budget gives
/// the map's floor of 8 192 entries anyway.
pub const FLOWS_BUDGET_MIN: u64 = 1 << 20;
/// The largest: the map's ceiling of 262 144 entries needs under 9 GiB
/// even at 1 024 possible CPUs.
pub const FLOWS_BUDGET_MAX: u64 = 16 << 30;

/// Below this, `tunables.reconcile_interval` is accepted with a warning:
/// every pass is a full sync of the cloud, from every node.
pub const RECONCILE_INTERVAL_WARN: Duration = Duration::from_mins(1);

fn tunables(c: &mut Check, raw: &RawTunables) -> Option<Tunables> {
    const P: &str = "tunables";
    fn bounded(c: &mut Check, name: &str, v: Option<&Scalar>) -> Option<Duration> {
        let span = span(name);
        c.req(&format!("{P}.{name}"), v, |v| {
            span.check(values::duration(v)?, v.text().trim())
        })
    }
    let scrape_interval = bounded(c, "scrape_interval", raw.scrape_interval.as_ref());
    let reconcile_interval = bounded(c, "reconcile_interval", raw.reconcile_interval.as_ref());
    let ghost_sweep_interval =
        bounded(c, "ghost_sweep_interval", raw.ghost_sweep_interval.as_ref());
    let state_flush_interval =
        bounded(c, "state_flush_interval", raw.state_flush_interval.as_ref());
    let unresolved_ttl = bounded(c, "unresolved_ttl", raw.unresolved_ttl.as_ref());
    let kick_debounce = bounded(c, "kick_debounce", raw.kick_debounce.as_ref());
    let ghost_grace = bounded(c, "ghost_grace", raw.ghost_grace.as_ref());
    let high = c.req(
        "tunables.pressure_high_watermark",
        raw.pressure_high_watermark.as_ref(),
        values::ratio,
    );
    let low = c.req(
        "tunables.pressure_low_watermark",
        raw.pressure_low_watermark.as_ref(),
        values::ratio,
    );
    if let (Some(high), Some(low)) = (high, low) {
        watermarks(c, high, low);
    }
    let max_evictions = c.req(
        "tunables.pressure_max_evictions",
        raw.pressure_max_evictions.as_ref(),
        |v| values::count(v, u64::from(FLOWS_MAX_ENTRIES)),
    );
    let unresolved_cap = c.req(
        "tunables.unresolved_cap",
        raw.unresolved_cap.as_ref(),
        |v| values::count(v, UNRESOLVED_CAP_MAX),
    );
    let port_series_retention = bounded(
        c,
        "port_series_retention",
        raw.port_series_retention.as_ref(),
    );
    let resync_spread = bounded(c, "resync_spread", raw.resync_spread.as_ref());
    let hop_limit = c.req(
        "tunables.route_hop_limit",
        raw.route_hop_limit.as_ref(),
        |v| values::count(v, ROUTE_HOP_LIMIT_MAX),
    );
    Some(Tunables {
        scrape_interval: scrape_interval?,
        reconcile_interval: reconcile_interval?,
        kick_debounce: kick_debounce?,
        ghost_grace: ghost_grace?,
        ghost_sweep_interval: ghost_sweep_interval?,
        state_flush_interval: state_flush_interval?,
        pressure_high_watermark: high?,
        pressure_low_watermark: low?,
        // The maxima above fit the target types.
        pressure_max_evictions: max_evictions? as u32,
        unresolved_cap: unresolved_cap? as usize,
        unresolved_ttl: unresolved_ttl?,
        route_hop_limit: hop_limit? as u32,
        port_series_retention: port_series_retention?,
        resync_spread: resync_spread?,
    })
}

/// 0 < low < high < 1.0 (DESIGN §9: a full `flows` map drops new flows, so
/// relief must start before it is full).
fn watermarks(c: &mut Check, high: f64, low: f64) {
    const HIGH: &str = "tunables.pressure_high_watermark";
    const LOW: &str = "tunables.pressure_low_watermark";
    if high >= 1.0 {
        c.error(HIGH, format!("{high} must be below 1.0"));
    } else if high <= 0.0 {
        c.error(HIGH, format!("{high} must be above 0"));
    }
    if low <= 0.0 {
        c.error(LOW, format!("{low} must be above 0"));
    } else if low >= high {
        c.error(LOW, format!("{low} must be below {HIGH} ({high})"));
    }
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
                values::show_duration(config.tunables.reconcile_interval),
                values::show_duration(RECONCILE_INTERVAL_WARN)
            ),
        ));
    }
    if let Some(kafka) = &config.notifications.kafka {
        if kafka.tls.is_none()
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

/// Collects problems while values are parsed.
#[derive(Default)]
struct Check {
    issues: Vec<Issue>,
}

impl Check {
    fn error(&mut self, key: impl Into<String>, message: impl Into<String>) {
        self.issues.push(Issue::new(key, message));
    }

    fn missing(&mut self, path: &str) {
        let section = path.rsplit_once('.').map_or(path, |(s, _)| s);
        self.error(path, format!("is required when {section} is set"));
    }

    /// A key that must have a value (defaults are already layered in, so
    /// only a required key of an optional section can be missing).
    fn req<T>(
        &mut self,
        path: &str,
        v: Option<&Scalar>,
        parse: impl FnOnce(&Scalar) -> Result<T, String>,
    ) -> Option<T> {
        let Some(v) = v else {
            self.missing(path);
            return None;
        };
        parse(v).map_err(|m| self.error(path, m)).ok()
    }

    /// A key that may stay unset. An invalid value is reported and treated
    /// as unset (the whole config is rejected anyway).
    fn opt<T>(
        &mut self,
        path: &str,
        v: Option<&Scalar>,
        parse: impl FnOnce(&Scalar) -> Result<T, String>,
    ) -> Option<T> {
        v.and_then(|v| parse(v).map_err(|m| self.error(path, m)).ok())
    }

    /// A list: each item checked (its error names `path[i]`), duplicates
    /// refused.
    fn list<T: PartialEq>(
        &mut self,
        path: &str,
        v: Option<&Vec<Scalar>>,
        parse: impl Fn(&Scalar) -> Result<T, String>,
    ) -> Option<Vec<T>> {
        let Some(items) = v else {
            self.missing(path);
            return None;
        };
        let mut out = Vec::with_capacity(items.len());
        let mut ok = true;
        for (i, item) in items.iter().enumerate() {
            match parse(item) {
                Ok(v) if out.contains(&v) => {
                    ok = false;
                    self.error(
                        format!("{path}[{i}]"),
                        format!("{} is listed twice", item.shown()),
                    );
                }
                Ok(v) => out.push(v),
                Err(m) => {
                    ok = false;
                    self.error(format!("{path}[{i}]"), m);
                }
            }
        }
        ok.then_some(out)
    }
}
