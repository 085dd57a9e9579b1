//! Holds every family the ledger registers against `docs/metrics.md`: a family
//! missing from the catalogue, documented with another type or labels, or
//! named against the conventions (prefix, base units, `_total`) fails here.

use crate::common;

use std::collections::BTreeMap;

use common::{world, Rig};
use lachesis_lab::catalogue::Family;
use lachesis_ledger::export::families::{Kind, ALL};
use lachesis_ledger::{Exporter, Format};

fn catalogue() -> BTreeMap<String, Family> {
    lachesis_lab::catalogue::documented()
}

/// Families as they actually come out of a render: (`# TYPE` name, type).
fn rendered() -> Vec<(String, String)> {
    let rig = Rig::default();
    rig.use_attr(&world());
    let exporter = Exporter::new(rig.ledger.clone(), rig.state.clone());
    let mut out = String::new();
    exporter.render(Format::OpenMetrics, &mut out).unwrap();
    out.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| {
            let (n, t) = l.split_once(' ').unwrap();
            (n.to_owned(), t.to_owned())
        })
        .collect()
}

#[test]
fn every_rendered_family_is_in_the_family_table() {
    let want: Vec<(String, String)> = ALL
        .iter()
        .map(|f| (f.descriptor_name().to_owned(), f.kind.label().to_owned()))
        .collect();
    assert_eq!(rendered(), want);
}

#[test]
fn every_registered_family_is_documented_exactly() {
    let docs = catalogue();
    for f in ALL {
        let doc = docs
            .get(f.name)
            .unwrap_or_else(|| panic!("{} is registered but missing from docs/metrics.md", f.name));
        assert_eq!(doc.kind, f.kind.label(), "{}: documented type", f.name);
        assert_eq!(doc.labels, f.labels, "{}: documented labels", f.name);
        assert_eq!(doc.owner, "ledger", "{}: owner", f.name);
    }
    for (name, doc) in &docs {
        if doc.owner == "ledger" {
            assert!(
                ALL.iter().any(|f| f.name == name),
                "{name} is documented as the ledger's but not registered"
            );
        }
    }
}

#[test]
fn names_follow_the_conventions() {
    const NON_BASE_UNITS: &[&str] = &[
        "_milliseconds",
        "_microseconds",
        "_nanoseconds",
        "_ms",
        "_kilobytes",
        "_megabytes",
        "_kb",
        "_mb",
        "_minutes",
        "_hours",
        "_percent",
        "_bits",
    ];
    let docs = catalogue();
    assert!(docs.len() >= ALL.len());
    for name in docs.keys() {
        let kind = &docs[name].kind;
        assert!(name.starts_with("lachesis_"), "{name}: prefix");
        assert!(
            name.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
            "{name}: snake case"
        );
        for u in NON_BASE_UNITS {
            assert!(!name.contains(u), "{name}: not a base unit ({u})");
        }
        match kind.as_str() {
            "counter" => assert!(name.ends_with("_total"), "{name}: counters end in _total"),
            "info" => assert!(name.ends_with("_info"), "{name}: info ends in _info"),
            "gauge" | "histogram" => {
                assert!(
                    !name.ends_with("_total"),
                    "{name}: only counters end in _total"
                );
            }
            other => panic!("{name}: unknown type {other}"),
        }
        if kind == "histogram" {
            assert!(
                name.ends_with("_seconds") || name.ends_with("_bytes"),
                "{name}: unit suffix"
            );
        }
    }
    for f in ALL {
        assert!(
            !f.descriptor_name().ends_with("_total"),
            "{}: _total would be doubled",
            f.name
        );
        if f.kind == Kind::Counter {
            assert_ne!(f.descriptor_name(), f.name);
        }
    }
}
