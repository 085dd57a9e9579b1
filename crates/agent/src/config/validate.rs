//! The layered tree → [`Config`]: every value read by its key's form
//! (`lachesis_config::layered::read`, every problem at once), then the
//! rules that involve several keys or a bound, the only code outside the
//! fields.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use lachesis_config::form::{show_duration, show_size};
use lachesis_config::layered::{check_spans, in_file_order, read, Issue, Span};
use lachesis_notify::SaslMechanism;
use serde_json::Value;

use super::model::{Config, MetadataSource, SCHEMA};

/// The reconciler never debounces a kick longer than this (issue 8: "quiet
/// window `kick_debounce`, cap 5 s").
pub const KICK_DEBOUNCE_CAP: Duration = Duration::from_secs(5);
/// Longest a swept port's series may be retained (30 days).
pub const PORT_SERIES_RETENTION_MAX: Duration = Duration::from_hours(30 * 24);

/// `tunables.kick_debounce` in relay mode when no layer sets it: there a
/// pass asks nothing of OpenStack and parses only what changed, and the
/// relay has already coalesced the notifications, so a shorter window
/// buys fresher plans for little (docs/fleet.md "Running").
pub const RELAY_KICK_DEBOUNCE: Duration = Duration::from_millis(250);

/// Reads the layered tree: the configuration, or every problem found.
pub(crate) fn config(tree: Value) -> Result<Config, Vec<Issue>> {
    let mut read = read::<Config>(&SCHEMA, tree)?;
    mode_defaults(&mut read.config, &read.tree);
    let mut issues = read.issues;
    let rules = Rules {
        config: &read.config,
        tree: &read.tree,
        bad: &read.bad,
        issues: &mut issues,
    };
    rules.check();
    in_file_order(&SCHEMA, &mut issues);
    if issues.is_empty() {
        Ok(read.config)
    } else {
        Err(issues)
    }
}

/// The defaults that depend on `metadata.source`, for the keys no layer
/// set (`tree` is the layered tree as read).
fn mode_defaults(config: &mut Config, tree: &Value) {
    let set = |pointer: &str| tree.pointer(pointer).is_some_and(|v| !v.is_null());
    if config.metadata.source == MetadataSource::Relay && !set("/tunables/kick_debounce") {
        config.tunables.kick_debounce = RELAY_KICK_DEBOUNCE;
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
        check_spans(SPANS, self.tree, self.bad, self.issues);
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
    if !config.listen.metrics.ip().is_loopback() && config.listen.web_config_file.is_none() {
        out.push(Issue::new(
            "listen.metrics",
            format!(
                "{} is not a loopback address and listen.web_config_file is not set: every \
                 project's and server's traffic is readable in plain HTTP by anyone who can \
                 reach the port (docs/operations.md \"Protecting the metrics\")",
                config.listen.metrics
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
