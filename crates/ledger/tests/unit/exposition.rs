//! The exact exposition of a small known ledger, compared whole.

use crate::common;

use common::{key, mac, reading, world, Rig};
use lachesis_abi::{Direction::*, L4Class::*, Zone::*};
use std::collections::BTreeMap;

use lachesis_ledger::{
    Counts, Exporter, Format, PortTotals, Selector, SettleMode, UnresolvedLimits,
};

/// mac(1) (t-a/s-1/p-1) sent 1000 B to the internet through router mac(100)
/// and was then rebased; mac(3) (t-b/s-3/p-3) received 200 B from mac(2);
/// an unbound MAC's 77 B were evicted to `unknown`.
fn known() -> Exporter {
    let l = known_rig();
    Exporter::new(l.ledger.clone(), l.state.clone())
}

/// The ledger behind [`known`].
fn known_rig() -> Rig {
    let attr = world();
    let l = Rig::new(UnresolvedLimits {
        capacity: 10,
        ttl_ns: 5,
    });
    l.apply_drain(
        &attr,
        &[
            (
                key(mac(1), mac(100), Tx, External, Tcp),
                reading(1000, 10, 1),
            ),
            (
                key(mac(3), mac(2), Rx, OtherTenant, Udp),
                reading(200, 2, 1),
            ),
            (key(mac(60), mac(100), Tx, Miss, Icmp), reading(77, 1, 1)),
        ],
        0,
    );
    l.settle(&attr, SettleMode::Rebase(Selector::VmMac(mac(1))), || {});
    l.apply_drain(
        &attr,
        &[
            (
                key(mac(1), mac(100), Tx, External, Tcp),
                reading(1040, 11, 1),
            ),
            (
                key(mac(3), mac(2), Rx, OtherTenant, Udp),
                reading(200, 2, 1),
            ),
        ],
        10,
    );
    l.use_attr(&attr);
    l.commit();
    l
}

const BILLING_OPENMETRICS: &str = include_str!("../fixtures/known.openmetrics");
const BILLING_PROMETHEUS: &str = include_str!("../fixtures/known.prom");

/// The billing and info part (everything before the health families, whose
/// histogram buckets are long and covered by the catalogue test).
fn billing_part(text: &str) -> &str {
    let end = text
        .find("# HELP lachesis_ledger_rows")
        .expect("health follows billing");
    &text[..end]
}

#[test]
fn openmetrics_exposition_is_exactly_the_expected_text() {
    let mut out = String::new();
    known().render(Format::OpenMetrics, &mut out).unwrap();
    assert_eq!(billing_part(&out), BILLING_OPENMETRICS);
    assert!(out.ends_with("# EOF\n"));
}

#[test]
fn prometheus_text_exposition_is_exactly_the_expected_text() {
    let mut out = String::new();
    known().render(Format::PrometheusText, &mut out).unwrap();
    assert_eq!(billing_part(&out), BILLING_PROMETHEUS);
    assert!(!out.contains("# EOF"));
}

/// `text` with the flush-phase histogram's values cut off: they are the
/// flushes' own durations, different on every run.
fn without_timings(text: &str) -> String {
    text.lines()
        .map(|l| match l.rsplit_once(' ') {
            Some((series, _)) if l.starts_with("lachesis_state_flush_phase_seconds") => series,
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every family, health and state ones included (the fixtures above pin
/// only the billing part): each series' labels are the catalogue's in its
/// order, a bucket's `le` last in both formats, and a ledger built again
/// in the same state renders the same text.
#[test]
fn every_series_has_its_documented_labels_and_a_rebuilt_ledger_the_same_text() {
    for format in [Format::OpenMetrics, Format::PrometheusText] {
        let (mut first, mut again) = (String::new(), String::new());
        known().render(format, &mut first).unwrap();
        known().render(format, &mut again).unwrap();
        assert!(
            first.contains("_bucket{phase=\"copy\",le=\""),
            "{format:?}: {first}"
        );
        assert_eq!(
            lachesis_lab::catalogue::series_off_catalogue(&first),
            Vec::<String>::new(),
            "{format:?}"
        );
        assert_eq!(
            without_timings(&first),
            without_timings(&again),
            "{format:?}"
        );
    }
}

#[test]
fn content_types_name_the_format() {
    assert!(Format::OpenMetrics
        .content_type()
        .starts_with("application/openmetrics-text"));
    assert!(Format::PrometheusText
        .content_type()
        .contains("version=0.0.4"));
}

/// What the agent's node page shows per port is the port tier of the
/// export summed by port and direction — the durable view: a drain not
/// yet flushed moves neither.
#[test]
fn durable_port_totals_are_the_port_series_summed() {
    let l = known_rig();
    let exporter = Exporter::new(l.ledger.clone(), l.state.clone());
    let mut text = String::new();
    exporter.render(Format::PrometheusText, &mut text).unwrap();
    let mut want: BTreeMap<String, PortTotals> = BTreeMap::new();
    for sample in lachesis_lab::exposition::parse(&text).samples() {
        let bytes = match sample.name.as_str() {
            "lachesis_port_bytes_total" => true,
            "lachesis_port_packets_total" => false,
            _ => continue,
        };
        let value = sample.count();
        let t = want
            .entry(sample.label("port_id").unwrap().to_owned())
            .or_default();
        let c = match sample.label("direction").unwrap() {
            "tx" => &mut t.tx,
            "rx" => &mut t.rx,
            other => panic!("direction {other}"),
        };
        let add = if bytes {
            Counts::new(value, 0)
        } else {
            Counts::new(0, value)
        };
        c.add(add);
    }
    assert_eq!(want.len(), 2, "{text}");
    assert_eq!(l.durable_port_totals(), want);
    assert_eq!(want["p-1"].tx, Counts::new(1040, 11));

    // Counted but not flushed: not in the durable view yet.
    l.apply_drain(
        &world(),
        &[(
            key(mac(1), mac(100), Tx, External, Tcp),
            reading(5000, 20, 1),
        )],
        20,
    );
    assert_eq!(l.durable_port_totals(), want);
    l.commit();
    assert_eq!(l.durable_port_totals()["p-1"].tx, Counts::new(5000, 20));
}
