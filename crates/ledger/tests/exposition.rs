//! The exact exposition of a small known ledger, compared whole.

mod common;

use common::{key, mac, reading, world, Rig};
use lachesis_abi::{Direction::*, L4Class::*, Zone::*};
use lachesis_ledger::{Exporter, Format, Selector, SettleMode, UnresolvedLimits};

/// mac(1) (t-a/s-1/p-1) sent 1000 B to the internet through router mac(100)
/// and was then rebased; mac(3) (t-b/s-3/p-3) received 200 B from mac(2);
/// an unbound MAC's 77 B were evicted to `unknown`.
fn known() -> Exporter {
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
    Exporter::new(l.ledger.clone(), l.state.clone())
}

const BILLING_OPENMETRICS: &str = include_str!("fixtures/known.openmetrics");
const BILLING_PROMETHEUS: &str = include_str!("fixtures/known.prom");

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

#[test]
fn content_types_name_the_format() {
    assert!(Format::OpenMetrics
        .content_type()
        .starts_with("application/openmetrics-text"));
    assert!(Format::PrometheusText
        .content_type()
        .contains("version=0.0.4"));
}
