use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use lachesis_abi::{EndpointValue, Mac, Prefix, Zone, ENDPOINT_FLAG_AMPHORA};
use lachesis_ledger::{Exporter, InternerFull, GLOBAL_TENANT_ID};
use lachesis_notify::backoff;
use lachesis_planner::{AmphoraIp, Binding, Plan, Scope, TrieRow};

use super::metrics::Families;
use super::{cold_writes, Phase};
use crate::config::Config;
use crate::http::MetricsRoutes;
use crate::reconcile::Write;

fn binding(mac: u8, tenant: &str, amphora: bool) -> Binding {
    Binding {
        mac: Mac([2, 0, 0, 0, 0, mac]),
        tenant: tenant.to_owned(),
        server: format!("server-{mac}"),
        port: format!("port-{mac}"),
        external_network: None,
        amphora,
    }
}

fn row(tenant: Scope, prefix: &str, zone: Zone) -> TrieRow {
    TrieRow {
        tenant,
        prefix: prefix.parse().unwrap(),
        zone,
    }
}

#[test]
fn cold_writes_are_trie_rows_then_bindings_then_amphora_addresses_with_interned_ids() {
    let plan = Plan {
        trie: vec![
            row(Scope::Global, "0.0.0.0/0", Zone::External),
            row(Scope::Tenant("t-b".into()), "10.0.0.0/24", Zone::Infra),
        ],
        bindings: vec![binding(1, "t-a", false), binding(2, "t-b", true)],
        amphora_ips: vec![AmphoraIp {
            tenant: "t-b".into(),
            address: "10.0.0.9".parse::<IpAddr>().unwrap(),
        }],
        ..Plan::default()
    };
    let mut ids = BTreeMap::new();
    let writes = cold_writes(&plan, |p| {
        let next = u32::try_from(ids.len()).unwrap() + 1;
        Ok(*ids.entry(p.to_owned()).or_insert(next))
    })
    .unwrap();
    let (a, b) = (ids["t-a"], ids["t-b"]);
    assert_eq!(
        writes,
        vec![
            Write::UpsertZone {
                tenant_id: GLOBAL_TENANT_ID,
                prefix: "0.0.0.0/0".parse::<Prefix>().unwrap(),
                zone: Zone::External,
            },
            Write::UpsertZone {
                tenant_id: b,
                prefix: "10.0.0.0/24".parse::<Prefix>().unwrap(),
                zone: Zone::Infra,
            },
            Write::UpsertEndpoint {
                mac: Mac([2, 0, 0, 0, 0, 1]),
                value: EndpointValue {
                    tenant_id: a,
                    flags: 0
                },
            },
            Write::UpsertEndpoint {
                mac: Mac([2, 0, 0, 0, 0, 2]),
                value: EndpointValue {
                    tenant_id: b,
                    flags: ENDPOINT_FLAG_AMPHORA
                },
            },
            Write::InsertAmphora {
                tenant_id: b,
                addr: "10.0.0.9".parse().unwrap(),
            },
        ]
    );
    assert_ne!(a, b);
}

#[test]
fn a_full_interner_fails_cold_writes() {
    let plan = Plan {
        bindings: vec![binding(1, "t-a", false)],
        ..Plan::default()
    };
    let full = cold_writes(&plan, |p| {
        Err(InternerFull {
            project: p.to_owned(),
        })
    });
    assert_eq!(full.unwrap_err().project, "t-a");
}

#[test]
fn backoff_doubles_from_one_second_and_caps_at_thirty() {
    let waits: Vec<u64> = (0..8).map(|n| backoff(n).as_secs()).collect();
    assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30, 30]);
    assert_eq!(backoff(u32::MAX), Duration::from_secs(30));
}

#[test]
fn debug_flows_list_the_largest_entries_first_attributed_by_their_vm_mac() {
    use lachesis_abi::{Direction, FlowCounters, FlowKey, L4Class};

    use super::listing;
    use crate::reconcile::AttributionSnapshot;

    let (a, peer) = (Mac([2, 0, 0, 0, 0, 1]), Mac([2, 0, 0, 0, 0, 9]));
    let key = |src: Mac, dst: Mac, direction: Direction| FlowKey {
        src_mac: src.0,
        dst_mac: dst.0,
        eth_proto: 0x0800,
        direction: direction.code(),
        zone: Zone::External.code(),
        l4: L4Class::Tcp.code(),
        pad: 0,
    };
    let counters = |bytes| FlowCounters {
        bytes,
        packets: 1,
        ..FlowCounters::default()
    };
    // One sub-entry per CPU that counted a flow (DESIGN §4.7): a flow's
    // are summed into one line.
    let at = |k, cpu| lachesis_abi::EntryKey::new(k, cpu);
    let entries = vec![
        (at(key(a, peer, Direction::Tx), 0), counters(10)),
        (at(key(peer, a, Direction::Rx), 0), counters(200)),
        (at(key(peer, a, Direction::Rx), 3), counters(300)),
        (at(key(peer, a, Direction::Tx), 1), counters(70)),
    ];
    let mut snap = AttributionSnapshot::default();
    snap.live.insert(a, binding(1, "t-a", false));

    let page = listing(&entries, &snap, 2);
    assert_eq!(page.total, 3, "flows, not sub-entries");
    let shown: Vec<(u64, Option<&str>)> = page
        .flows
        .iter()
        .map(|f| (f.bytes, f.tenant.as_deref()))
        .collect();
    // Rx to A is A's; Tx from the unbound peer is nobody's.
    assert_eq!(shown, [(500, Some("t-a")), (70, None)]);
}

/// `/metrics` of a fresh agent with both notification transports (so
/// their families have two series each), its boot at `running` and every
/// metadata map's fill shown: the ledger's families (empty) and every one
/// the daemon registers, many of them with several series.
fn fresh_metrics() -> String {
    use lachesis_ledger::memory::{MemoryAttribution, SwapSource};
    use lachesis_ledger::state::{StateFile, StatePaths};
    use lachesis_ledger::{Format, Ledger, UnresolvedLimits};

    let config = Config::from_yaml(
        "notifications:
  rabbitmq: {url: \"amqp://u:pw@rabbit:5672/\", exchanges: [neutron]}
  kafka: {brokers: [\"k1:9092\"], topic: os.notifications}
",
    )
    .unwrap();
    let (families, _) = Families::register(&config, &lachesis_listen::Web::plain());
    families.daemon.phase(Phase::Running);
    families.order.metadata_fill(&[
        lachesis_datapath::MapFill {
            name: "zones_v6",
            entries: 3,
            capacity: 64,
        },
        lachesis_datapath::MapFill {
            name: "endpoints",
            entries: 9,
            capacity: 128,
        },
        lachesis_datapath::MapFill {
            name: "amphora_ips",
            entries: 1,
            capacity: 32,
        },
    ]);
    let source = Arc::new(SwapSource::new(MemoryAttribution::default()));
    let ledger = Arc::new(Ledger::new(UnresolvedLimits::default(), source));
    let state = Arc::new(StateFile::new(StatePaths::new("/nonexistent/state.json")));
    let routes = MetricsRoutes::new(
        Arc::new(Exporter::new(ledger, state)),
        families.registry,
        Arc::new(|| Ok(())),
    );
    routes.render(Format::OpenMetrics).unwrap()
}

/// Issue 19 item 22: the agent's families came out in another series
/// order on every start (each family a `HashMap` with its own random
/// seed), so two agents in the same state, or one agent before and after
/// a restart, rendered different text.
#[test]
fn every_series_has_its_documented_labels_in_order_and_one_place_in_its_family() {
    let text = fresh_metrics();
    assert_eq!(
        lachesis_lab::catalogue::series_off_catalogue(&text),
        Vec::<String>::new()
    );
    // Built again from scratch (other seeds, other insertion history):
    // the same bytes.
    assert_eq!(fresh_metrics(), text);
    // And the order is the labels' own: within each family, series by
    // their label text (a histogram's bucket bound aside).
    let agent = &text[text.find("# HELP lachesis_boot_phase ").unwrap()..];
    let mut families = 0;
    for block in agent.split("# HELP ").skip(1) {
        let series: Vec<String> = block
            .lines()
            .filter(|l| !l.starts_with('#') && l.contains('{'))
            .map(|l| {
                let labels = &l[l.find('{').unwrap() + 1..l.rfind('}').unwrap()];
                labels
                    .split(',')
                    .filter(|p| !p.starts_with("le="))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .collect();
        let mut sorted = series.clone();
        sorted.sort();
        assert_eq!(series, sorted, "# HELP {block}");
        families += usize::from(sorted.windows(2).any(|w| w[0] != w[1]));
    }
    assert!(
        families >= 20,
        "only {families} families with several series"
    );
}
