//! Scrapes render while drains, settles and flushes run on other threads
//! (the settler drains before each settle batch, as the protocol demands,
//! racing the drainer: readings arrive out of order).
//! Scrapes show the durable view, so every flush must copy a whole state and
//! publish it whole: drains add 1, 10, 100 and 1000 bytes to four flows, so
//! any total that is not a multiple of 1111 is a drain copied half-applied;
//! a settle copied half-applied (row zeroed, bucket not yet filled, or
//! labels swapped before the fold), or an older copy published over a newer
//! one, makes some series go down between two scrapes.

use crate::common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;

use common::{family, key, mac, parse, reading, world, Labels};
use lachesis_abi::{Direction::*, L4Class::*, Zone::*};
use lachesis_ledger::memory::{OwnedBinding, SwapSource};
use lachesis_ledger::state::{StateFile, StatePaths};
use lachesis_ledger::{
    DrainError, Exporter, Format, Ledger, Selector, SettleError, SettleMode, UnresolvedLimits,
};

const DRAINS: u64 = 1500;

#[test]
fn scrapes_never_see_a_drain_or_a_fold_half_applied() {
    let source = Arc::new(SwapSource::new(world()));
    let ledger = Arc::new(Ledger::new(UnresolvedLimits::default(), source.clone()));
    let done = Arc::new(AtomicBool::new(false));
    let scrape_count = Arc::new(AtomicUsize::new(0));
    let settles = Arc::new(AtomicUsize::new(0));
    let keys = [
        key(mac(1), mac(100), Tx, External, Tcp),
        key(mac(1), mac(2), Rx, SameTenant, Udp),
        key(mac(2), mac(100), Tx, External, Udp),
        key(mac(3), mac(1), Rx, OtherTenant, Icmp),
    ];

    let dir = tempfile::tempdir().unwrap();
    let file = Arc::new(StateFile::new(StatePaths::new(
        dir.path().join("state.json"),
    )));
    let flush = {
        let (ledger, file) = (ledger.clone(), file.clone());
        move || {
            file.flush(&ledger).unwrap();
        }
    };

    // The kernel: round `i` has counted `unit * i` bytes on each flow.
    let kernel = Arc::new(AtomicU64::new(0));
    let read_kernel = move |i: u64| -> Vec<_> {
        keys.iter()
            .zip([1, 10, 100, 1000])
            .map(|(k, unit)| (*k, reading(unit * i, i, 7)))
            .collect()
    };

    let drainer = {
        let (ledger, kernel) = (ledger.clone(), kernel.clone());
        thread::spawn(move || {
            for i in 1..=DRAINS {
                kernel.store(i, Ordering::SeqCst);
                let readings = read_kernel(i);
                // Refused while a settle waits for its flush: retry the
                // same full-map reading, as the scraper task would (by then
                // the settler may have applied a newer one: this one is
                // then outdated, and stale where it is older).
                while let Err(DrainError::SettleNotDurable { .. }) =
                    ledger.apply_drain(&readings, i)
                {
                    thread::yield_now();
                }
            }
        })
    };

    let flusher = {
        let (done, flush) = (done.clone(), flush.clone());
        thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                flush();
            }
        })
    };

    let settler = spawn_settler(
        ledger.clone(),
        source.clone(),
        (done.clone(), settles.clone()),
        flush.clone(),
        move || {
            let i = kernel.load(Ordering::SeqCst);
            (read_kernel(i), i)
        },
    );

    let scraper_threads: Vec<_> = (0..2)
        .map(|_| {
            let exporter = Exporter::new(ledger.clone(), file.clone());
            let (done, scrape_count) = (done.clone(), scrape_count.clone());
            thread::spawn(move || scrape_until(&exporter, &done, &scrape_count))
        })
        .collect();

    drainer.join().unwrap();
    // Let the scrapers and the settler overlap with the final state too.
    // A scraper or the settler that stopped early has panicked: stop waiting
    // and let the joins below report it.
    while (scrape_count.load(Ordering::Relaxed) < 20 || settles.load(Ordering::Relaxed) < 20)
        && !settler.is_finished()
        && !scraper_threads.iter().any(thread::JoinHandle::is_finished)
    {
        thread::yield_now();
    }
    done.store(true, Ordering::Relaxed);
    settler.join().unwrap();
    flusher.join().unwrap();
    flush();
    for s in scraper_threads {
        s.join().unwrap();
    }
    let mut out = String::new();
    Exporter::new(ledger, file)
        .render(Format::PrometheusText, &mut out)
        .unwrap();
    let total: u64 = family(&parse(&out), "lachesis_bytes_total").values().sum();
    assert_eq!(total, 1111 * DRAINS, "every drained byte, exactly once");
}

/// Renders until `done`, checking every scrape for a torn state.
fn scrape_until(exporter: &Exporter, done: &AtomicBool, scrape_count: &AtomicUsize) {
    let mut prev: BTreeMap<(String, Labels), u64> = BTreeMap::new();
    let mut out = String::new();
    while !done.load(Ordering::Relaxed) {
        out.clear();
        exporter.render(Format::OpenMetrics, &mut out).unwrap();
        let s = parse(&out);
        let sum = |f: &str| family(&s, f).values().sum::<u64>();
        let total = sum("lachesis_bytes_total");
        assert_eq!(
            total % 1111,
            0,
            "a drain was observed half-applied: {total}"
        );
        // No evictions or prunes here: every tier holds every byte.
        for f in [
            "lachesis_tenant_bytes_total",
            "lachesis_server_bytes_total",
            "lachesis_port_bytes_total",
            "lachesis_port_proto_bytes_total",
        ] {
            assert_eq!(sum(f), total, "{f} disagrees with the total in one scrape");
        }
        for f in [
            "lachesis_bytes_total",
            "lachesis_tenant_bytes_total",
            "lachesis_port_proto_bytes_total",
        ] {
            for (labels, v) in family(&s, f) {
                let before = prev.insert((f.to_owned(), labels.clone()), v).unwrap_or(0);
                assert!(v >= before, "{f}{labels:?} went down {before} → {v}");
            }
        }
        scrape_count.fetch_add(1, Ordering::Relaxed);
    }
}

type Reading = Vec<(lachesis_abi::FlowKey, lachesis_abi::FlowCounters)>;

/// Flips mac(1)'s tenant and router 100's network back and forth, one
/// settle batch each (drain, flush, settle, flush), until `done`.
fn spawn_settler(
    ledger: Arc<Ledger>,
    source: Arc<SwapSource>,
    (done, settles): (Arc<AtomicBool>, Arc<AtomicUsize>),
    flush: impl Fn() + Send + 'static,
    read_kernel: impl Fn() -> (Reading, u64) + Send + 'static,
) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let mut flip = false;
        while !done.load(Ordering::Relaxed) {
            flip = !flip;
            let old = source.current();
            let mut next = (*old).clone();
            next.bindings.insert(
                mac(1),
                OwnedBinding::new(if flip { "t-c" } else { "t-a" }, "s-1", "p-1"),
            );
            settle_batch(
                &ledger,
                &flush,
                &read_kernel,
                SettleMode::Rebase(Selector::VmMac(mac(1))),
                || {
                    source.store(next.clone());
                },
            );
            let old = source.current();
            let mut next = (*old).clone();
            next.routers.insert(
                mac(100),
                if flip { "public-2" } else { "public" }.to_owned(),
            );
            settle_batch(
                &ledger,
                &flush,
                &read_kernel,
                SettleMode::Rebase(Selector::RouterPeer(mac(100))),
                || {
                    source.store(next.clone());
                },
            );
            settles.fetch_add(2, Ordering::Relaxed);
            thread::sleep(std::time::Duration::from_micros(200));
        }
    })
}

/// Drains, flushes, settles, flushes. A drain that slipped in between makes
/// the ledger refuse the settle, and so does a periodic flush that closed
/// nothing; the batch is tried again from its drain.
fn settle_batch(
    ledger: &Ledger,
    flush: &impl Fn(),
    read_kernel: &impl Fn() -> (Reading, u64),
    mode: SettleMode,
    swap: impl Fn(),
) {
    loop {
        let (readings, now) = read_kernel();
        match ledger.apply_drain(&readings, now) {
            Ok(_) | Err(DrainError::SettleNotDurable { .. }) => {}
            Err(e) => panic!("{e}"),
        }
        flush();
        match ledger.settle(mode, &swap) {
            Ok(_) => {
                flush();
                return;
            }
            Err(SettleError::DrainsNotDurable { .. } | SettleError::NotDrained) => {
                thread::yield_now();
            }
        }
    }
}
