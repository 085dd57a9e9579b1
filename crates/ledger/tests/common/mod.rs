//! Helpers shared by the integration tests.
#![allow(dead_code)]

use lachesis_abi::{Direction, FlowCounters, FlowKey, L4Class, Mac, Zone};
use lachesis_ledger::memory::{MemoryAttribution, OwnedBinding};

pub const ETH_IPV4: u16 = 0x0800;

pub fn mac(n: u8) -> Mac {
    Mac([2, 0, 0, 0, 0, n])
}

/// A key seen from `vm` talking to `peer`, laid out like the wire.
pub fn key(vm: Mac, peer: Mac, dir: Direction, zone: Zone, l4: L4Class) -> FlowKey {
    let (src, dst) = match dir {
        Direction::Tx => (vm, peer),
        Direction::Rx => (peer, vm),
    };
    FlowKey {
        src_mac: src.0,
        dst_mac: dst.0,
        eth_proto: ETH_IPV4,
        direction: dir.code(),
        zone: zone.code(),
        l4: l4.code(),
        pad: 0,
    }
}

pub fn reading(bytes: u64, packets: u64, created_ns: u64) -> FlowCounters {
    FlowCounters {
        bytes,
        packets,
        last_seen_ns: created_ns,
        created_ns,
    }
}

/// Two tenants, three VMs, one router to network `public`.
pub fn world() -> MemoryAttribution {
    let mut a = MemoryAttribution::default();
    a.bindings.insert(
        mac(1),
        OwnedBinding::new("t-a", "s-1", "p-1").with_fallback("fip-net"),
    );
    a.bindings
        .insert(mac(2), OwnedBinding::new("t-a", "s-2", "p-2"));
    a.bindings
        .insert(mac(3), OwnedBinding::new("t-b", "s-3", "p-3"));
    a.routers.insert(mac(100), "public".to_owned());
    a.tenant_names.insert("t-a".to_owned(), "alpha".to_owned());
    a.tenant_names.insert("t-b".to_owned(), "beta".to_owned());
    a.server_names.insert("s-1".to_owned(), "web-1".to_owned());
    a.server_names.insert("s-3".to_owned(), "db-1".to_owned());
    a
}

use std::collections::BTreeMap;
use std::sync::Arc;

use lachesis_ledger::memory::SwapSource;
use lachesis_ledger::{Exporter, Format, Ledger};

/// Label pairs of one sample, in exposition order.
pub type Labels = Vec<(String, String)>;
/// Sample name → labels → value text.
pub type Samples = BTreeMap<String, BTreeMap<Labels, String>>;

/// Parses sample lines of either text format. Label values in these tests
/// never contain quotes, commas or braces.
pub fn parse(text: &str) -> Samples {
    let mut out = Samples::new();
    for line in text.lines() {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let (head, value) = line.rsplit_once(' ').expect("sample has a value");
        let (name, labels) = match head.split_once('{') {
            Some((n, rest)) => {
                let body = rest.strip_suffix('}').expect("closing brace");
                let labels = body
                    .split(',')
                    .filter(|p| !p.is_empty())
                    .map(|p| {
                        let (k, v) = p.split_once('=').expect("k=v");
                        (k.to_owned(), v.trim_matches('"').to_owned())
                    })
                    .collect();
                (n, labels)
            }
            None => (head, Vec::new()),
        };
        let prev = out
            .entry(name.to_owned())
            .or_default()
            .insert(labels, value.to_owned());
        assert!(prev.is_none(), "duplicate sample in {line}");
    }
    out
}

/// Renders the ledger as `OpenMetrics` text under `attr`.
pub fn render(ledger: &Arc<Ledger>, attr: &MemoryAttribution) -> String {
    let source = Arc::new(SwapSource::new(attr.clone()));
    let exporter = Exporter::new(ledger.clone(), source);
    let mut out = String::new();
    exporter.render(Format::OpenMetrics, &mut out).unwrap();
    out
}

/// One billing family's series as (labels → value).
pub fn family(samples: &Samples, name: &str) -> BTreeMap<Labels, u64> {
    samples
        .get(name)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.parse().expect("integer counter")))
                .collect()
        })
        .unwrap_or_default()
}

/// Builds a label list from pairs.
pub fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// Value of one series, 0 if absent... no: `None` if absent.
pub fn value(samples: &Samples, name: &str, pairs: &[(&str, &str)]) -> Option<u64> {
    family(samples, name).get(&labels(pairs)).copied()
}
