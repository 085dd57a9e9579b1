//! Every metric family the ledger registers: the single list the collector
//! renders from and the catalogue test holds against `docs/metrics.md`.

/// Metric type, as written in the catalogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Monotone counter; the sample name ends in `_total`.
    Counter,
    /// Gauge.
    Gauge,
    /// Info (value 1); the sample name ends in `_info`.
    Info,
    /// Histogram.
    Histogram,
}

impl Kind {
    /// The catalogue's word for this type.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Info => "info",
            Kind::Histogram => "histogram",
        }
    }
}

/// One family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Family {
    /// Name as documented and as it appears in samples (with `_total` / `_info`).
    pub name: &'static str,
    /// Type.
    pub kind: Kind,
    /// Label names, in exposition order.
    pub labels: &'static [&'static str],
    /// HELP text.
    pub help: &'static str,
}

impl Family {
    /// The name handed to `prometheus-client`, which appends `_total` to
    /// counters and `_info` to info metrics itself.
    #[must_use]
    pub fn descriptor_name(&self) -> &'static str {
        match self.kind {
            Kind::Counter => self.name.strip_suffix("_total").unwrap_or(self.name),
            Kind::Info => self.name.strip_suffix("_info").unwrap_or(self.name),
            Kind::Gauge | Kind::Histogram => self.name,
        }
    }
}

const TOTAL_L: &[&str] = &["zone", "external_network", "direction"];
const TENANT_L: &[&str] = &["tenant_id", "zone", "external_network", "direction"];
const SERVER_L: &[&str] = &[
    "server_id",
    "tenant_id",
    "zone",
    "external_network",
    "direction",
];
const PORT_L: &[&str] = &[
    "server_id",
    "port_id",
    "tenant_id",
    "zone",
    "external_network",
    "direction",
];
const PORT_PROTO_L: &[&str] = &["server_id", "port_id", "tenant_id", "proto", "direction"];

macro_rules! fam {
    ($id:ident, $name:literal, $kind:ident, $labels:expr, $help:literal) => {
        /// See `docs/metrics.md`.
        pub const $id: Family = Family {
            name: $name,
            kind: Kind::$kind,
            labels: $labels,
            help: $help,
        };
    };
}

fam!(
    BYTES,
    "lachesis_bytes_total",
    Counter,
    TOTAL_L,
    "L2 bytes (skb->len: Ethernet header included, FCS and preamble not) crossing VM taps, by zone, external network and direction (tx: sent by the VM, which the tap counts as its rx; rx: received by the VM). The durable view: as of the last state-file flush."
);
fam!(
    PACKETS,
    "lachesis_packets_total",
    Counter,
    TOTAL_L,
    "Packets crossing VM taps, counted as the kernel sees them: one per skb, so a GSO/GRO aggregate is one however many frames it is on the wire; by zone, external network and direction (tx: sent by the VM, which the tap counts as its rx; rx: received by the VM). The durable view: as of the last state-file flush."
);
fam!(
    TENANT_BYTES,
    "lachesis_tenant_bytes_total",
    Counter,
    TENANT_L,
    "L2 bytes (skb->len) per Keystone project (tenant_id; unknown: a VM MAC with no binding), by zone, external network and direction (tx: sent by the VM, which the tap counts as its rx; rx: received by the VM). The durable view: as of the last state-file flush."
);
fam!(
    TENANT_PACKETS,
    "lachesis_tenant_packets_total",
    Counter,
    TENANT_L,
    "Packets (skbs, not wire frames) per Keystone project, by zone, external network and direction (tx: sent by the VM, which the tap counts as its rx; rx: received by the VM). The durable view: as of the last state-file flush."
);
fam!(
    SERVER_BYTES,
    "lachesis_server_bytes_total",
    Counter,
    SERVER_L,
    "L2 bytes (skb->len) per Nova server, by zone, external network and direction (tx: sent by the VM, which the tap counts as its rx; rx: received by the VM). The durable view: as of the last state-file flush."
);
fam!(
    SERVER_PACKETS,
    "lachesis_server_packets_total",
    Counter,
    SERVER_L,
    "Packets (skbs, not wire frames) per Nova server, by zone, external network and direction (tx: sent by the VM, which the tap counts as its rx; rx: received by the VM). The durable view: as of the last state-file flush."
);
fam!(
    PORT_BYTES,
    "lachesis_port_bytes_total",
    Counter,
    PORT_L,
    "L2 bytes (skb->len) per Neutron port binding, by zone, external network and direction (tx: sent by the VM, which the tap counts as its rx; rx: received by the VM). The durable view: as of the last state-file flush."
);
fam!(
    PORT_PACKETS,
    "lachesis_port_packets_total",
    Counter,
    PORT_L,
    "Packets (skbs, not wire frames) per Neutron port binding, by zone, external network and direction (tx: sent by the VM, which the tap counts as its rx; rx: received by the VM). The durable view: as of the last state-file flush."
);
fam!(
    PORT_PROTO_BYTES,
    "lachesis_port_proto_bytes_total",
    Counter,
    PORT_PROTO_L,
    "L2 bytes (skb->len) per Neutron port binding and L4 class, by direction (tx: sent by the VM, which the tap counts as its rx; rx: received by the VM). The durable view: as of the last state-file flush."
);
fam!(
    PORT_PROTO_PACKETS,
    "lachesis_port_proto_packets_total",
    Counter,
    PORT_PROTO_L,
    "Packets (skbs, not wire frames) per Neutron port binding and L4 class, by direction (tx: sent by the VM, which the tap counts as its rx; rx: received by the VM). The durable view: as of the last state-file flush."
);
fam!(
    TENANT_INFO,
    "lachesis_tenant_info",
    Info,
    &["tenant_id", "name"],
    "Project names of projects with billing series."
);
fam!(
    SERVER_INFO,
    "lachesis_server_info",
    Info,
    &["server_id", "name", "tenant_id"],
    "Server names of servers with billing series."
);
fam!(
    LEDGER_ROWS,
    "lachesis_ledger_rows",
    Gauge,
    &[],
    "Ledger rows (one per kernel flow key of a bound VM MAC)."
);
fam!(
    UNRESOLVED_ROWS,
    "lachesis_ledger_unresolved_rows",
    Gauge,
    &[],
    "Rows waiting in the unresolved buffer."
);
fam!(
    ABSORBER_BUCKETS,
    "lachesis_ledger_absorber_buckets",
    Gauge,
    &["tier"],
    "Absorber buckets per tier."
);
fam!(
    RESOLUTIONS,
    "lachesis_ledger_unresolved_resolutions_total",
    Counter,
    &[],
    "Unresolved rows moved to the ledger when their MAC got bound."
);
fam!(
    EVICTIONS,
    "lachesis_ledger_unresolved_evictions_total",
    Counter,
    &["reason"],
    "Unresolved rows folded into the unknown tenant."
);
fam!(
    ANOMALIES,
    "lachesis_ledger_delta_anomalies_total",
    Counter,
    &["kind"],
    "Readings that took an unusual branch of the delta rule."
);
fam!(
    LOST_FINAL_READINGS,
    "lachesis_ledger_lost_final_readings_total",
    Counter,
    &[],
    "Kernel entries deleted before their final reading reached the state file."
);
fam!(
    SETTLED,
    "lachesis_ledger_settled_rows_total",
    Counter,
    &["mode"],
    "Rows folded into absorbers, by settle mode."
);
fam!(
    PRUNED,
    "lachesis_ledger_pruned_buckets_total",
    Counter,
    &["tier"],
    "Absorber buckets ended by a prune and folded into the tier above."
);
fam!(
    PRUNES_DEFERRED,
    "lachesis_ledger_prunes_deferred_total",
    Counter,
    &[],
    "Prunes postponed because the owner still had live series."
);
fam!(
    FLUSH_PHASE,
    "lachesis_state_flush_phase_seconds",
    Histogram,
    &["phase"],
    "Duration of each state-file flush phase."
);
fam!(
    FLUSH_FAILURES,
    "lachesis_state_flush_failures_total",
    Counter,
    &["phase"],
    "State-file flushes that failed, by the phase that failed."
);
fam!(
    LOAD_FALLBACKS,
    "lachesis_state_load_fallbacks_total",
    Counter,
    &["reason"],
    "State loads that did not use the current file."
);
fam!(
    QUARANTINED,
    "lachesis_state_quarantined_files_total",
    Counter,
    &[],
    "Unreadable state files moved aside."
);

/// Every family the ledger's collector renders, in rendering order.
pub const ALL: &[Family] = &[
    BYTES,
    PACKETS,
    TENANT_BYTES,
    TENANT_PACKETS,
    SERVER_BYTES,
    SERVER_PACKETS,
    PORT_BYTES,
    PORT_PACKETS,
    PORT_PROTO_BYTES,
    PORT_PROTO_PACKETS,
    TENANT_INFO,
    SERVER_INFO,
    LEDGER_ROWS,
    UNRESOLVED_ROWS,
    ABSORBER_BUCKETS,
    RESOLUTIONS,
    EVICTIONS,
    ANOMALIES,
    LOST_FINAL_READINGS,
    SETTLED,
    PRUNED,
    PRUNES_DEFERRED,
    FLUSH_PHASE,
    FLUSH_FAILURES,
    LOAD_FALLBACKS,
    QUARANTINED,
];

/// `tier` label values of `lachesis_ledger_absorber_buckets`, in
/// [`crate::Absorbers::bucket_counts`] order.
pub const ABSORBER_TIERS: [&str; 6] = crate::absorbers::TIERS;
