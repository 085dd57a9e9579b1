//! What the live view says, as text: the banner, the agent's health, the
//! per-tenant table, the revenue-leak line (pure formatting), and the plain
//! periodic output used when standard output is not a terminal.

use std::fmt::Write as _;
use std::io::BufRead as _;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::metrics::{human_bytes, human_rate, Health, Row};
use crate::scenario::{Step, SCRIPT};
use crate::session::Demo;

/// Where everything is.
#[must_use]
pub fn banner(demo: &Demo) -> String {
    banner_text(
        demo.fixed.urls.metrics,
        demo.fixed.urls.debug,
        &demo.fixed.run.dir().display().to_string(),
        &demo.done(),
    )
}

/// [`banner`] from its parts; every line fits 120 columns (a run directory
/// path aside).
#[must_use]
pub fn banner_text(
    m: std::net::SocketAddr,
    d: std::net::SocketAddr,
    dir: &str,
    done: &std::collections::BTreeSet<char>,
) -> String {
    format!(
        "lachesis demo: a simulated cloud on this machine — tenants acme and globex, a shared network,\n\
         \x20 two routers, an internet behind two external networks, a load balancer\n\
         \x20 metrics  http://{m}/metrics\n\
         \x20 debug    http://{d}/debug/ui/  (in a browser: plan, anomalies, lookup, topology)\n\
         \x20          http://{d}/debug/plan  /debug/flows  /debug/anomalies  /debug/config\n\
         \x20          http://{d}/debug/lookup?mac=fa:16:3e:a1:00:05&ip=198.51.100.7\n\
         \x20 files    {dir}  (agent log, config, state file)\n\
         \x20 keys     {}  q quit",
        // Two steps a line: all four (with their done marks) pass 120.
        keys_line(done).replacen(" · m ", "\n           m ", 1)
    )
}

/// What `--check` prints first: a report's heading for a log. No keys
/// (nothing reads them) and no URLs (the agent and its listeners are gone
/// by the time a log is read; a failure prints the end of the agent's log
/// instead).
#[must_use]
pub fn check_banner(step_every: Duration) -> String {
    let steps: Vec<&str> = SCRIPT.iter().map(|s| s.label()).collect();
    format!(
        "lachesis demo --check: a simulated cloud on this machine, the agent counting its taps in the kernel\n\
         \x20 steps  every {} s: {}\n\
         \x20 then   every tenant and port series against the taps' own counters; no series may go down",
        step_every.as_secs_f64(),
        steps.join("; ")
    )
}

/// The line saying the demo is up: what was built, and how often `reader`
/// (the live table, or the check) reads the agent's `/metrics`.
#[must_use]
pub fn ready_line(
    took: Duration,
    hosts: usize,
    taps: usize,
    reader: &str,
    every: Duration,
) -> String {
    let every = if every < Duration::from_secs(1) {
        format!("{} ms", every.as_millis())
    } else {
        format!("{:.1} s", every.as_secs_f64())
    };
    format!(
        "ready in {:.1} s: {hosts} hosts, {taps} taps, {} flows; the agent counts in the kernel \
         and {reader} reads its /metrics every {every}",
        took.as_secs_f64(),
        crate::traffic::FLOWS.len(),
    )
}

/// The scenario keys, used ones marked done.
#[must_use]
pub fn keys_line(done: &std::collections::BTreeSet<char>) -> String {
    SCRIPT
        .iter()
        .map(|s: &Step| {
            let mark = if done.contains(&s.key()) { " ✓" } else { "" };
            format!("{} {}{mark}", s.key(), s.label())
        })
        .collect::<Vec<_>>()
        .join(" · ")
}

/// What the view says for a key that is no step (`q` quits).
#[must_use]
pub fn unknown_key(c: char) -> String {
    let keys: String = SCRIPT.iter().map(|s| s.key()).collect();
    format!("key {c:?} does nothing: the steps are {keys}, q quits")
}

/// The agent's health in one line (`up`: /metrics answered): boot phase,
/// attached taps, age of the last drain and of the last sync, ghosts.
#[must_use]
pub fn health_line(h: &Health, up: bool, pid: Option<u32>) -> String {
    let pid = pid.map_or("?".to_owned(), |p| p.to_string());
    if !up {
        return format!("agent {pid} not answering (starting, or killed)");
    }
    let secs = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.1} s"));
    format!(
        "agent {pid} {}{} · taps {} · drain {} ago · sync {} ago · ghosts {}",
        h.phase.as_deref().unwrap_or("?"),
        if h.degraded { " (degraded)" } else { "" },
        h.attached.map_or("?".to_owned(), |a| a.to_string()),
        secs(h.drain_age),
        secs(h.sync_age.filter(|s| *s >= 0.0)),
        h.ghosts,
    )
}

/// Bytes nobody can bill.
#[must_use]
pub fn leak_line(h: &Health) -> String {
    // Two views of the leak: zone `miss` (no zone could be decided) and
    // tenant `unknown` (no port owns the MAC). A MAC no port owns is always
    // classified miss, so here they are the same bytes; they part when a
    // known VM's packet finds no trie row (a boot-order bug).
    format!(
        "leak: zone miss {} · tenant unknown {} (the same bytes: unknown MACs are misses) · \
         {} waiting",
        human_bytes(crate::metrics::approx(h.miss_bytes)),
        human_bytes(crate::metrics::approx(h.unknown_bytes)),
        h.unresolved_rows
    )
}

/// The live table as text: totals and rates.
#[must_use]
pub fn table(rows: &[Row]) -> String {
    table_of(rows, true)
}

/// The table of `--check`'s report: totals only. A report is read after
/// the run, when a rate says nothing.
#[must_use]
pub fn totals_table(rows: &[Row]) -> String {
    table_of(rows, false)
}

fn table_of(rows: &[Row], rates: bool) -> String {
    let head = ["TENANT", "ZONE", "TX", "TX RATE", "RX", "RX RATE"].map(str::to_owned);
    let lines = rows.iter().map(|r| {
        [
            r.tenant.clone(),
            r.zone.clone(),
            human_bytes(crate::metrics::approx(r.tx)),
            human_rate(r.tx_rate),
            human_bytes(crate::metrics::approx(r.rx)),
            human_rate(r.rx_rate),
        ]
    });
    std::iter::once(head)
        .chain(lines)
        .map(|[tenant, zone, tx, tx_rate, rx, rx_rate]| {
            if rates {
                format!("{tenant:<10} {zone:<22} {tx:>11} {tx_rate:>13} {rx:>11} {rx_rate:>13}")
            } else {
                format!("{tenant:<10} {zone:<22} {tx:>11} {rx:>11}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Where to start showing `events` so the newest ones fit in `height`
/// lines of `width` columns once wrapped; the newest one always shows.
#[must_use]
pub fn newest_that_fit(events: &[String], width: usize, height: usize) -> usize {
    let mut room = height;
    let mut first = events.len();
    while first > 0 {
        let need = events[first - 1]
            .chars()
            .count()
            .div_ceil(width.max(1))
            .max(1);
        if need > room {
            break;
        }
        room -= need;
        first -= 1;
    }
    first.min(events.len().saturating_sub(1))
}

/// The flows in one line.
#[must_use]
pub fn flows_line(demo: &Demo) -> String {
    let stats = &demo.traffic.stats;
    let failing: Vec<&str> = crate::traffic::FLOWS
        .iter()
        .zip(stats)
        .filter(|(_, s)| s.failed.load(Ordering::Relaxed) > 0)
        .map(|(f, _)| f.name)
        .collect();
    let exchanges: u64 = stats.iter().map(|s| s.ok.load(Ordering::Relaxed)).sum();
    if failing.is_empty() {
        format!(
            "flows: {} · {exchanges} exchanges, none failed",
            stats.len()
        )
    } else {
        format!(
            "flows: {} · {exchanges} exchanges · with failures: {}",
            stats.len(),
            failing.join(", ")
        )
    }
}

/// One refresh of the plain output.
#[must_use]
pub fn plain_block(demo: &Demo) -> String {
    let o = demo.observed();
    let t = demo.uptime().as_secs_f64();
    let Some(now) = o.latest() else {
        return format!("[{t:6.1}s] waiting for the agent's first /metrics");
    };
    let h = crate::metrics::health(now);
    let rows = crate::metrics::rows(now, o.rate_base());
    let mut out = format!("[{t:6.1}s] {}\n", health_line(&h, o.up, demo.agent_pid()));
    for line in table(&rows).lines() {
        let _ = writeln!(out, "           {line}");
    }
    let _ = write!(
        out,
        "           {}\n           {}",
        leak_line(&h),
        flows_line(demo)
    );
    out
}

/// Plain periodic lines until stopped; keys arrive as lines on standard
/// input (`d`, `g`, `m`, `k`, `q`).
pub fn plain(demo: &Demo, steps: &std::sync::mpsc::Sender<Step>) {
    let stop = demo.stop.clone();
    let steps = steps.clone();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { return };
            match line.trim().chars().next() {
                Some('q') => stop.store(true, Ordering::SeqCst),
                Some(c) => match Step::from_key(c) {
                    Some(wanted) => {
                        let _ = steps.send(wanted);
                    }
                    None => println!("{}", unknown_key(c)),
                },
                None => {}
            }
        }
    });
    while !demo.stop.load(Ordering::SeqCst) {
        println!("{}", plain_block(demo));
        let until = std::time::Instant::now() + Duration::from_secs(1);
        while std::time::Instant::now() < until && !demo.stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_events_that_fit_once_wrapped_are_shown_and_the_newest_always() {
        let e: Vec<String> = ["a".repeat(10), "b".repeat(25), "c".repeat(5)]
            .into_iter()
            .collect();
        // width 10: the events need 1, 3 and 1 lines.
        assert_eq!(newest_that_fit(&e, 10, 5), 0);
        assert_eq!(newest_that_fit(&e, 10, 4), 1);
        assert_eq!(newest_that_fit(&e, 10, 3), 2);
        assert_eq!(newest_that_fit(&e, 10, 0), 2);
        assert_eq!(newest_that_fit(&[], 10, 3), 0);
    }

    /// Issue 19 item 22: the banner wrapped at 120 columns.
    #[test]
    fn the_banner_and_the_leak_line_fit_120_columns() {
        let a: std::net::SocketAddr = "127.0.0.1:9848".parse().unwrap();
        let all: std::collections::BTreeSet<char> = SCRIPT.iter().map(|s| s.key()).collect();
        for done in [std::collections::BTreeSet::new(), all] {
            let text = banner_text(a, a, "/run/lachesis-demo-12345", &done);
            for line in text.lines() {
                assert!(
                    line.chars().count() <= 120,
                    "{} columns: {line}",
                    line.chars().count()
                );
            }
        }
        let h = Health {
            miss_bytes: 1 << 40,
            unknown_bytes: 1 << 40,
            unresolved_rows: 10_000,
            ..Health::default()
        };
        let line = format!("           {}", leak_line(&h));
        assert!(line.chars().count() <= 120, "{line}");
        assert_eq!(
            unknown_key('x'),
            "key 'x' does nothing: the steps are dgmk, q quits"
        );
    }

    fn row(tenant: &str, zone: &str, tx: u64, rx: u64, rate: Option<f64>) -> Row {
        Row {
            tenant: tenant.to_owned(),
            zone: zone.to_owned(),
            tx,
            rx,
            tx_rate: rate,
            rx_rate: rate,
        }
    }

    /// Issue 19 item 22: `--check` printed the live view's banner (keys,
    /// "q quit", URLs to open) and a table with rate columns of `—`.
    #[test]
    fn the_check_report_has_no_hint_for_a_person_at_the_keys_and_no_rate() {
        let rows = [
            row("acme", "external (public)", 1_468_006, 878_490, None),
            row("unknown", "miss", 147_251, 0, None),
        ];
        let report = [
            check_banner(Duration::from_secs(2)),
            ready_line(
                Duration::from_millis(2900),
                13,
                11,
                "the check",
                Duration::from_millis(250),
            ),
            totals_table(&rows),
        ]
        .join("\n");
        for hint in [
            "key", "quit", "press", "http://", "/debug", "watch", "RATE", "/s", "—",
        ] {
            assert!(!report.contains(hint), "{hint:?} in:\n{report}");
        }
        // The heading and the table are the report's own lines (the
        // ready line is an event, as long as the live view's).
        for line in check_banner(Duration::from_secs(2))
            .lines()
            .chain(totals_table(&rows).lines())
        {
            assert!(line.chars().count() <= 120, "{line}");
        }
        assert_eq!(
            totals_table(&rows),
            "TENANT     ZONE                            TX          RX\n\
             acme       external (public)          1.4 MiB   857.9 KiB\n\
             unknown    miss                     143.8 KiB         0 B"
        );
        assert!(report.contains(
            "steps  every 2 s: delete VM b-worker; re-gateway globex-router; move a-batch to globex; \
             kill -9 the agent, restart it"
        ));
        assert!(report.contains("the check reads its /metrics every 250 ms"));
        // The live view keeps its rates (`—` until a second scrape).
        let live = table(&[row("acme", "shared", 2048, 1024, Some(512.0))]);
        assert!(live.starts_with("TENANT     ZONE                            TX       TX RATE"));
        assert!(
            live.ends_with("2.0 KiB       512 B/s     1.0 KiB       512 B/s"),
            "{live}"
        );
        assert!(table(&rows).contains('—'));
    }

    #[test]
    fn the_health_line_says_phase_taps_ages_and_a_silent_agent() {
        let h = Health {
            phase: Some("running".into()),
            attached: Some(11),
            drain_age: Some(0.25),
            sync_age: Some(-1.0),
            ghosts: 1,
            ..Health::default()
        };
        assert_eq!(
            health_line(&h, true, Some(42)),
            "agent 42 running · taps 11 · drain 0.2 s ago · sync - ago · ghosts 1"
        );
        assert_eq!(
            health_line(&h, false, Some(42)),
            "agent 42 not answering (starting, or killed)"
        );
    }
}
