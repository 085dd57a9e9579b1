//! What the state file's `plan` section holds (docs/state-file.md): the
//! committed plan and the ghosts of the attribution swapped in with it,
//! each with the wall-clock time it was ghosted, so a restart restores the
//! attribution the ledger's rows were written under — ghosts included —
//! and sweeps them on their schedule (DESIGN §9, §11, §12).
//!
//! The ghosts ride inside the plan's JSON object as one extra member,
//! `ghosts`, absent when there are none: a file without it (older builds)
//! reads back with no ghosts, and an older build reading a newer file
//! ignores the member (the planner's `Plan` takes unknown members).

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lachesis_abi::Mac;
use lachesis_ledger::CommittedPlan;
use lachesis_planner::{Binding, Plan};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::table::{BindingTable, Ghost};

/// One ghost as the state file keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GhostRecord {
    /// The binding as it was when its port disappeared.
    pub binding: Binding,
    /// When it was ghosted, in milliseconds since the Unix epoch (a
    /// monotonic instant does not survive a reboot).
    pub ghosted_at_ms: u64,
}

#[derive(Serialize)]
struct Encoded<'a> {
    #[serde(flatten)]
    plan: &'a Plan,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    ghosts: Vec<GhostRecord>,
}

#[derive(Deserialize)]
struct GhostsOnly {
    #[serde(default)]
    ghosts: Vec<GhostRecord>,
}

/// The wall-clock time of `at`, measured against `now` (both clocks read
/// together).
fn wall_time(at: Instant, now: (Instant, SystemTime)) -> SystemTime {
    let ago = now.0.saturating_duration_since(at);
    now.1.checked_sub(ago).unwrap_or(UNIX_EPOCH)
}

fn unix_ms(t: SystemTime) -> u64 {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Encodes `plan` with `ghosts` (their bindings and since when), for the
/// state file. `now` is the monotonic and the wall clock read together.
///
/// # Errors
/// Serialization failed (not expected for these types).
pub fn encode(
    plan: &Plan,
    ghosts: &BTreeMap<Mac, Ghost>,
    now: (Instant, SystemTime),
) -> Result<CommittedPlan, serde_json::Error> {
    let ghosts = ghosts
        .values()
        .map(|g| GhostRecord {
            binding: g.binding.clone(),
            ghosted_at_ms: unix_ms(wall_time(g.since, now)),
        })
        .collect();
    CommittedPlan::encode(&Encoded { plan, ghosts })
}

/// The plan and the ghosts of a state file's `plan` section; `None` when
/// the file had no plan.
///
/// # Errors
/// The section is not a plan this build reads.
pub fn decode(c: &CommittedPlan) -> Result<Option<(Plan, Vec<GhostRecord>)>, serde_json::Error> {
    if c.is_none() {
        return Ok(None);
    }
    let plan: Plan = c.decode()?;
    let GhostsOnly { ghosts } = c.decode()?;
    Ok(Some((plan, ghosts)))
}

/// The ghosts of a restored file as the table keeps them: each `since`
/// placed so that the time that passed on the wall clock (the agent was
/// down meanwhile) counts against its grace. A ghosting time in the future
/// (the clock went back) counts as now; one further back than the
/// monotonic clock reaches (a reboot) as far back as it reaches, which is
/// past any grace the host has been up for.
#[must_use]
pub fn restore_ghosts(
    records: Vec<GhostRecord>,
    now: (Instant, SystemTime),
) -> BTreeMap<Mac, Ghost> {
    records
        .into_iter()
        .map(|r| {
            let at = UNIX_EPOCH + Duration::from_millis(r.ghosted_at_ms);
            let ago = now.1.duration_since(at).unwrap_or(Duration::ZERO);
            let since = earliest(now.0, ago);
            (
                r.binding.mac,
                Ghost {
                    binding: r.binding,
                    since,
                },
            )
        })
        .collect()
}

/// The binding table of a state file's plan section (boot, DESIGN §12):
/// the plan's bindings live, its ghosts restored with the grace they have
/// left; the plan itself beside it (`None`: the file had none, the table is
/// empty). `ghost_gauge` follows the table's ghosts.
///
/// # Errors
/// The section is not a plan this build reads.
pub fn file_table(
    c: &CommittedPlan,
    now: (Instant, SystemTime),
    ghost_gauge: prometheus_client::metrics::gauge::Gauge,
) -> Result<(Option<Plan>, BindingTable), serde_json::Error> {
    let (plan, ghosts) = match decode(c)? {
        None => (None, BTreeMap::new()),
        Some((plan, records)) => (Some(plan), restore_ghosts(records, now)),
    };
    let table = BindingTable::from_plan(
        plan.as_ref().unwrap_or(&Plan::default()),
        &[],
        &[],
        ghost_gauge,
    )
    .with_ghosts(ghosts);
    Ok((plan, table))
}

/// `now - ago`, or the earliest instant the clock can represent on the way.
fn earliest(now: Instant, ago: Duration) -> Instant {
    let mut ago = ago;
    loop {
        if let Some(t) = now.checked_sub(ago) {
            return t;
        }
        ago /= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ghost(n: u8, since: Instant) -> (Mac, Ghost) {
        let mac = Mac([2, 0, 0, 0, 0, n]);
        (
            mac,
            Ghost {
                binding: Binding {
                    mac,
                    tenant: "t-a".into(),
                    server: "s".into(),
                    port: format!("p-{n}"),
                    external_network: Some("pub-a".into()),
                    amphora: false,
                },
                since,
            },
        )
    }

    #[test]
    fn ghosts_round_trip_with_the_time_that_passed_meanwhile() {
        let now = (Instant::now(), SystemTime::now());
        let ghosts = BTreeMap::from([ghost(1, now.0 - Duration::from_secs(20))]);
        let plan = Plan::default();
        let c = encode(&plan, &ghosts, now).unwrap();
        let (back, records) = decode(&c).unwrap().unwrap();
        assert_eq!(back, plan);
        assert_eq!(records.len(), 1);
        // Restored 30 s later (the agent was down for 30 s): 50 s old.
        let later = (
            now.0 + Duration::from_secs(1),
            now.1 + Duration::from_secs(30),
        );
        let restored = restore_ghosts(records, later);
        let g = &restored[&Mac([2, 0, 0, 0, 0, 1])];
        assert_eq!(g.binding, ghosts[&Mac([2, 0, 0, 0, 0, 1])].binding);
        let age = later.0.duration_since(g.since).as_secs();
        assert!((49..=51).contains(&age), "{age}");
    }

    #[test]
    fn a_plan_without_ghosts_is_written_as_before_and_an_old_plan_reads_with_none() {
        let now = (Instant::now(), SystemTime::now());
        let plan = Plan::default();
        let c = encode(&plan, &BTreeMap::new(), now).unwrap();
        assert_eq!(c, CommittedPlan::encode(&plan).unwrap());
        let (_, records) = decode(&c).unwrap().unwrap();
        assert!(records.is_empty());
        assert!(decode(&CommittedPlan::none()).unwrap().is_none());
    }

    #[test]
    fn a_clock_gone_back_counts_from_now_and_a_reboot_from_the_earliest_instant() {
        let now = (Instant::now(), SystemTime::now());
        let future = GhostRecord {
            binding: ghost(1, now.0).1.binding,
            ghosted_at_ms: unix_ms(now.1 + Duration::from_mins(10)),
        };
        let ancient = GhostRecord {
            binding: ghost(2, now.0).1.binding,
            ghosted_at_ms: 0,
        };
        let r = restore_ghosts(vec![future, ancient], now);
        assert_eq!(r[&Mac([2, 0, 0, 0, 0, 1])].since, now.0);
        assert!(r[&Mac([2, 0, 0, 0, 0, 2])].since <= now.0);
    }
}
