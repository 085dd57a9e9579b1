//! The pass of DESIGN §7, step by step, against the fakes. The fake kernel
//! applies every write, so "the kernel equals the plan" is checked against
//! maps built from the plan alone.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use lachesis_abi::{EndpointValue, Zone, ENDPOINT_FLAG_AMPHORA};
use lachesis_planner::{Anomaly, AnomalyClass, FallbackReason, SourceStatus};

use super::super::fakes::{endpoint_value, BatchFailure, InForce, KernelMaps, LedgerEvent, Mark};
use super::super::{KernelWriter, PassResult, Settle, Trigger, Write};
use super::{amphora_ip, base, mac, plan, router, row, synced, vm, Rig};

fn settles(events: &[LedgerEvent]) -> Vec<&Settle> {
    events
        .iter()
        .filter_map(|e| match e {
            LedgerEvent::Settled { settle, .. } => Some(settle),
            _ => None,
        })
        .collect()
}

fn swaps(events: &[LedgerEvent]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e, LedgerEvent::Swapped(_)))
        .count()
}

fn endpoint_writes(calls: &[Write]) -> Vec<Write> {
    calls
        .iter()
        .copied()
        .filter(|w| {
            matches!(
                w,
                Write::UpsertEndpoint { .. } | Write::DeleteEndpoint { .. }
            )
        })
        .collect()
}

/// `base()` with the trie changed three ways: a zone changed, a row added, a
/// row removed; one row unchanged.
fn trie_changed() -> lachesis_planner::Plan {
    let mut p = base();
    p.trie = plan(
        vec![
            row(None, "0.0.0.0/0", Zone::External),
            row(None, "10.0.1.1/32", Zone::Shared),
            row(Some("p-a"), "10.0.1.0/24", Zone::SameTenant),
            row(Some("p-c"), "10.0.3.0/24", Zone::SameTenant),
        ],
        vec![],
        vec![],
        vec![],
    )
    .trie;
    p
}

#[tokio::test]
async fn an_unchanged_cloud_writes_nothing_and_settles_nothing() {
    let mut rig = Rig::new(&base());
    assert_eq!(rig.reconciler.pass(Trigger::Tick).await, PassResult::Ok);
    assert_eq!(rig.kernel.take_calls(), []);
    assert_eq!(rig.ledger.batches(), 0);
    assert_eq!(rig.kernel.maps(), KernelMaps::of(&base(), &rig.ledger));
}

#[tokio::test]
async fn trie_rows_are_upserted_before_any_is_deleted() {
    let mut rig = Rig::new(&base());
    let new = trie_changed();
    rig.source.set(synced(new.clone()));
    assert_eq!(rig.reconciler.pass(Trigger::Kick).await, PassResult::Ok);
    let calls = rig.kernel.take_calls();
    let (b, c) = (rig.id("p-b"), rig.id("p-c"));
    assert_eq!(
        calls,
        [
            Write::UpsertZone {
                tenant_id: 0,
                prefix: "10.0.1.1/32".parse().unwrap(),
                zone: Zone::Shared,
            },
            Write::UpsertZone {
                tenant_id: c,
                prefix: "10.0.3.0/24".parse().unwrap(),
                zone: Zone::SameTenant,
            },
            Write::DeleteZone {
                tenant_id: b,
                prefix: "10.0.2.0/24".parse().unwrap(),
            },
        ],
        "unchanged rows skipped, upserts first, the delete last"
    );
    assert_eq!(rig.kernel.maps(), KernelMaps::of(&new, &rig.ledger));
    assert_eq!(*rig.committed(), new);
}

#[tokio::test]
async fn a_failed_write_commits_nothing_and_the_next_pass_retries_the_same_delta() {
    let mut rig = Rig::new(&base());
    let new = trie_changed();
    rig.source.set(synced(new.clone()));
    rig.kernel.fail_nth(2);
    assert_eq!(
        rig.reconciler.pass(Trigger::Tick).await,
        PassResult::ApplyError
    );
    let failed = rig.kernel.take_calls();
    assert_eq!(failed.len(), 2, "stopped at the failed upsert: {failed:?}");
    assert!(failed.iter().all(|w| matches!(w, Write::UpsertZone { .. })));
    assert_eq!(*rig.committed(), base(), "not committed");
    assert_eq!(rig.ledger.batches(), 0, "stopped before the bindings");

    assert_eq!(rig.reconciler.pass(Trigger::Tick).await, PassResult::Ok);
    let retried = rig.kernel.take_calls();
    assert_eq!(retried.len(), 3, "the whole delta again: {retried:?}");
    assert_eq!(
        retried[..2],
        failed[..],
        "the same upserts, in the same order"
    );
    assert!(matches!(retried[2], Write::DeleteZone { .. }));
    assert_eq!(rig.kernel.maps(), KernelMaps::of(&new, &rig.ledger));
    assert_eq!(*rig.committed(), new);
    assert_eq!(rig.reconciler.metrics().runs(PassResult::ApplyError), 1);
    assert_eq!(rig.reconciler.metrics().runs(PassResult::Ok), 1);
}

#[tokio::test]
async fn a_failed_binding_write_is_written_by_the_next_pass_without_a_second_batch() {
    let mut rig = Rig::new(&base());
    let mut new = base();
    new.bindings.push(vm(3, "p-a", "s-3", "port-3"));
    rig.source.set(synced(new.clone()));
    rig.kernel.fail_nth(1);
    assert_eq!(
        rig.reconciler.pass(Trigger::Tick).await,
        PassResult::ApplyError
    );
    assert_eq!(rig.ledger.batches(), 1, "userspace learned it first");
    assert!(rig.ledger.in_force().live.contains_key(&mac(3)));
    assert_eq!(*rig.committed(), base());

    rig.kernel.take_calls();
    assert_eq!(rig.reconciler.pass(Trigger::Tick).await, PassResult::Ok);
    assert_eq!(rig.ledger.batches(), 1, "userspace already holds it");
    assert_eq!(
        rig.kernel.take_calls(),
        [Write::UpsertEndpoint {
            mac: mac(3),
            value: EndpointValue {
                tenant_id: rig.id("p-a"),
                flags: 0,
            },
        }]
    );
    assert_eq!(rig.kernel.maps(), KernelMaps::of(&new, &rig.ledger));
}

#[tokio::test]
async fn a_port_recreated_with_the_same_mac_is_learned_and_never_ghosted() {
    let mut rig = Rig::new(&base());
    // Port 1 deleted and recreated with MAC 1 between two passes; port 2
    // deleted; port 3 new.
    let mut new = base();
    new.bindings = vec![
        vm(1, "p-a", "s-1", "port-1-reborn"),
        vm(3, "p-b", "s-3", "port-3"),
    ];
    rig.source.set(synced(new.clone()));
    assert_eq!(rig.reconciler.pass(Trigger::Kick).await, PassResult::Ok);

    let events = rig.ledger.take_events();
    assert_eq!(rig.ledger.batches(), 1);
    assert_eq!(
        events[0],
        LedgerEvent::Settled {
            settle: Settle::RebaseMac {
                mac: mac(1),
                from: vm(1, "p-a", "s-1", "port-1"),
                to: vm(1, "p-a", "s-1", "port-1-reborn"),
            },
            in_force: InForce::Binding(Some(vm(1, "p-a", "s-1", "port-1"))),
        },
        "the old port's bytes stay with the old port"
    );
    let LedgerEvent::Swapped(attr) = &events[1] else {
        panic!("{events:?}")
    };
    assert_eq!(attr.live[&mac(1)].port, "port-1-reborn");
    assert!(!attr.ghosts.contains_key(&mac(1)), "never a ghost");
    assert_eq!(attr.ghosts.keys().collect::<Vec<_>>(), [&mac(2)]);

    let calls = rig.kernel.take_calls();
    assert_eq!(
        endpoint_writes(&calls),
        [Write::UpsertEndpoint {
            mac: mac(3),
            value: endpoint_value(&vm(3, "p-b", "s-3", "port-3"), &rig.ledger),
        }],
        "MAC 1 keeps its kernel entry (same tenant); MAC 2 stays until the sweep"
    );
    let endpoints = rig.kernel.maps().endpoints;
    assert_eq!(
        endpoints.keys().copied().collect::<Vec<_>>(),
        [mac(1), mac(2), mac(3)]
    );
    let table = rig.reconciler.bindings();
    let table = table.lock().await;
    assert_eq!(table.ghosts().keys().collect::<Vec<_>>(), [&mac(2)]);
    assert_eq!(rig.reconciler.metrics().ghosts(), 1);
}

#[tokio::test]
async fn a_live_binding_moved_to_another_project_is_settled_before_the_swap_then_rewritten() {
    let mut rig = Rig::new(&base());
    let mut new = base();
    new.bindings[0] = vm(1, "p-c", "s-9", "port-1");
    rig.source.set(synced(new.clone()));
    rig.kernel.take_calls();
    assert_eq!(rig.reconciler.pass(Trigger::Kick).await, PassResult::Ok);
    let moved = Write::UpsertEndpoint {
        mac: mac(1),
        value: endpoint_value(&new.bindings[0], &rig.ledger),
    };
    assert_eq!(
        rig.ledger.timeline.take(),
        [Mark::Swap, Mark::Kernel(moved)],
        "userspace first, then the kernel"
    );
    let events = rig.ledger.take_events();
    assert!(matches!(
        &events[0],
        LedgerEvent::Settled { in_force: InForce::Binding(Some(b)), .. } if b.tenant == "p-a"
    ));
    assert!(matches!(&events[1], LedgerEvent::Swapped(a) if a.live[&mac(1)].tenant == "p-c"));
    assert_eq!(
        endpoint_writes(&rig.kernel.take_calls()),
        [Write::UpsertEndpoint {
            mac: mac(1),
            value: EndpointValue {
                tenant_id: rig.id("p-c"),
                flags: 0,
            },
        }]
    );
    assert_eq!(rig.kernel.maps(), KernelMaps::of(&new, &rig.ledger));
}

/// Pass 1 ghosts MAC 2; returns the rig after it.
async fn with_mac2_ghosted() -> Rig {
    let mut rig = Rig::new(&base());
    let mut gone = base();
    gone.bindings.retain(|b| b.mac != mac(2));
    rig.source.set(synced(gone));
    assert_eq!(rig.reconciler.pass(Trigger::Kick).await, PassResult::Ok);
    assert!(rig.ledger.in_force().ghosts.contains_key(&mac(2)));
    rig.ledger.take_events();
    rig.ledger.timeline.take();
    rig.kernel.take_calls();
    rig
}

#[tokio::test]
async fn a_ghost_revived_under_another_project_is_settled_under_the_ghost_first() {
    let mut rig = with_mac2_ghosted().await;
    let mut reborn = base();
    reborn.bindings[1] = vm(2, "p-c", "s-7", "port-7");
    rig.source.set(synced(reborn.clone()));
    assert_eq!(rig.reconciler.pass(Trigger::Kick).await, PassResult::Ok);
    let events = rig.ledger.take_events();
    assert_eq!(
        events[0],
        LedgerEvent::Settled {
            settle: Settle::RebaseMac {
                mac: mac(2),
                from: vm(2, "p-b", "s-2", "port-2"),
                to: vm(2, "p-c", "s-7", "port-7"),
            },
            in_force: InForce::Binding(Some(vm(2, "p-b", "s-2", "port-2"))),
        },
        "settled while the ghost's attribution was in force"
    );
    let LedgerEvent::Swapped(attr) = &events[1] else {
        panic!("{events:?}")
    };
    assert_eq!(attr.live[&mac(2)].tenant, "p-c");
    assert!(attr.ghosts.is_empty());
    let marks = rig.ledger.timeline.take();
    assert_eq!(marks.len(), 2, "{marks:?}");
    assert_eq!(marks[0], Mark::Swap, "userspace first, then the kernel");
    assert_eq!(
        endpoint_writes(&rig.kernel.take_calls()),
        [Write::UpsertEndpoint {
            mac: mac(2),
            value: EndpointValue {
                tenant_id: rig.id("p-c"),
                flags: 0,
            },
        }]
    );
    assert_eq!(rig.reconciler.metrics().ghosts(), 0);
}

#[tokio::test]
async fn a_ghost_revived_unchanged_is_revived_in_place_without_a_settle() {
    let mut rig = with_mac2_ghosted().await;
    rig.source.set(synced(base()));
    assert_eq!(rig.reconciler.pass(Trigger::Kick).await, PassResult::Ok);
    let events = rig.ledger.take_events();
    assert_eq!(settles(&events), Vec::<&Settle>::new());
    assert_eq!(swaps(&events), 1);
    assert_eq!(rig.kernel.take_calls(), [], "its kernel entry never left");
    assert!(rig.ledger.in_force().live.contains_key(&mac(2)));
    assert_eq!(rig.reconciler.metrics().ghosts(), 0);
}

#[tokio::test]
async fn a_ghost_whose_kernel_entry_the_sweep_deleted_is_written_back_when_revived() {
    let mut rig = with_mac2_ghosted().await;
    {
        let table = rig.reconciler.bindings();
        let mut table = table.lock().await;
        // The sweep's first step (the test plays the sweeper).
        rig.kernel
            .write(Write::DeleteEndpoint { mac: mac(2) })
            .unwrap();
        table.kernel_entry_deleted(mac(2));
    }
    rig.kernel.take_calls();
    rig.source.set(synced(base()));
    assert_eq!(rig.reconciler.pass(Trigger::Kick).await, PassResult::Ok);
    assert_eq!(
        rig.kernel.take_calls(),
        [Write::UpsertEndpoint {
            mac: mac(2),
            value: endpoint_value(&vm(2, "p-b", "s-2", "port-2"), &rig.ledger),
        }]
    );
    assert_eq!(rig.kernel.maps(), KernelMaps::of(&base(), &rig.ledger));
}

#[tokio::test]
async fn one_settle_batch_per_pass_settles_first_and_none_when_nothing_changed() {
    let mut rig = Rig::new(&base());
    let mut new = base();
    new.bindings = vec![vm(1, "p-c", "s-1", "port-1"), vm(3, "p-a", "s-3", "port-3")];
    new.bindings[0].external_network = Some("public".to_owned());
    new.router_macs = vec![router(0xfe, Some("public-2")), router(0xfd, None)];
    rig.source.set(synced(new.clone()));
    assert_eq!(rig.reconciler.pass(Trigger::Kick).await, PassResult::Ok);
    assert_eq!(rig.ledger.batches(), 1);
    let events = rig.ledger.take_events();
    let batch: Vec<_> = events
        .iter()
        .filter(|e| matches!(e, LedgerEvent::Settled { .. } | LedgerEvent::Swapped(_)))
        .collect();
    assert_eq!(batch.len(), 3, "{batch:?}");
    assert!(matches!(
        batch[0],
        LedgerEvent::Settled { settle: Settle::RebaseMac { mac: m, .. }, .. } if *m == mac(1)
    ));
    assert_eq!(
        *batch[1],
        LedgerEvent::Settled {
            settle: Settle::RebaseRouterPeer {
                mac: mac(0xfe),
                from: Some("public".to_owned()),
                to: Some("public-2".to_owned()),
            },
            in_force: InForce::Router(Some("public".to_owned())),
        },
        "the router's old flows settle under the old network, before the swap"
    );
    let LedgerEvent::Swapped(attr) = batch[2] else {
        panic!()
    };
    assert_eq!(attr.routers[&mac(0xfe)], "public-2");
    assert!(
        !attr.routers.contains_key(&mac(0xfd)),
        "a router without a gateway attributes nothing"
    );

    rig.kernel.take_calls();
    assert_eq!(rig.reconciler.pass(Trigger::Tick).await, PassResult::Ok);
    assert_eq!(rig.ledger.batches(), 1, "nothing changed: no batch");
    assert_eq!(rig.kernel.take_calls(), []);
    let events = rig.ledger.take_events();
    assert_eq!(swaps(&events) + settles(&events).len(), 0, "{events:?}");
}

#[tokio::test]
async fn a_batch_not_applied_stops_the_pass_and_the_next_pass_repeats_it() {
    let mut rig = Rig::new(&base());
    let mut new = base();
    new.bindings[0] = vm(1, "p-c", "s-1", "port-1");
    rig.source.set(synced(new.clone()));
    rig.ledger.fail_next_batch(BatchFailure::NotApplied);
    rig.kernel.take_calls();
    assert_eq!(
        rig.reconciler.pass(Trigger::Kick).await,
        PassResult::ApplyError
    );
    assert_eq!(
        endpoint_writes(&rig.kernel.take_calls()),
        [],
        "kernel follows userspace"
    );
    assert_eq!(rig.ledger.in_force().live[&mac(1)].tenant, "p-a");
    assert_eq!(*rig.committed(), base());

    assert_eq!(rig.reconciler.pass(Trigger::Kick).await, PassResult::Ok);
    assert_eq!(rig.ledger.batches(), 2);
    let events = rig.ledger.take_events();
    assert_eq!(settles(&events).len(), 1, "the same settle, once applied");
    assert_eq!(rig.kernel.maps(), KernelMaps::of(&new, &rig.ledger));
}

#[tokio::test]
async fn a_batch_swapped_but_not_yet_flushed_lets_the_pass_finish() {
    let mut rig = Rig::new(&base());
    let mut new = base();
    new.bindings[0] = vm(1, "p-c", "s-1", "port-1");
    rig.source.set(synced(new.clone()));
    rig.ledger.fail_next_batch(BatchFailure::NotDurable);
    assert_eq!(rig.reconciler.pass(Trigger::Kick).await, PassResult::Ok);
    assert_eq!(rig.kernel.maps(), KernelMaps::of(&new, &rig.ledger));
    assert_eq!(*rig.committed(), new);
}

#[tokio::test]
async fn amphora_addresses_are_only_ever_inserted() {
    let mut rig = Rig::new(&base());
    let mut new = base();
    new.amphora_ips = vec![amphora_ip("p-a", "10.0.1.60")];
    let mut amp = vm(4, "p-a", "amphora-1", "port-4");
    amp.amphora = true;
    new.bindings.push(amp);
    rig.source.set(synced(new.clone()));
    rig.kernel.take_calls();
    assert_eq!(rig.reconciler.pass(Trigger::Kick).await, PassResult::Ok);
    let calls = rig.kernel.take_calls();
    let a = rig.id("p-a");
    assert_eq!(
        calls,
        [
            Write::UpsertEndpoint {
                mac: mac(4),
                value: EndpointValue {
                    tenant_id: a,
                    flags: ENDPOINT_FLAG_AMPHORA,
                },
            },
            Write::InsertAmphora {
                tenant_id: a,
                addr: "10.0.1.60".parse().unwrap(),
            },
        ]
    );
    let kept: BTreeSet<_> = [
        (a, "10.0.1.50".parse().unwrap()),
        (a, "10.0.1.60".parse().unwrap()),
    ]
    .into();
    assert_eq!(rig.kernel.maps().amphora, kept, "the old address stays");
    assert_eq!(rig.reconciler.metrics().amphora_ports(), 1);
}

#[tokio::test]
async fn prunes_need_a_successful_non_empty_nova_list() {
    let mut rig = Rig::new(&base());
    let pruned = |events: &[LedgerEvent]| {
        let servers = events.iter().find_map(|e| match e {
            LedgerEvent::PrunedServers(s) => Some(s.clone()),
            _ => None,
        });
        let tenants = events.iter().find_map(|e| match e {
            LedgerEvent::PrunedTenants(s) => Some(s.clone()),
            _ => None,
        });
        (servers, tenants)
    };
    let set = |ids: &[&str]| ids.iter().map(|s| (*s).to_owned()).collect::<BTreeSet<_>>();

    // Nova answered.
    assert_eq!(rig.reconciler.pass(Trigger::Tick).await, PassResult::Ok);
    assert_eq!(
        pruned(&rig.ledger.take_events()),
        (Some(set(&["s-1", "s-2"])), Some(set(&["p-a", "p-b"])))
    );

    // Nova failed: its list is unknown, not empty.
    let mut failed = synced(base());
    failed.servers = None;
    Arc::make_mut(&mut failed.plan).sources.servers = SourceStatus::Failed;
    rig.source.set(failed);
    assert_eq!(rig.reconciler.pass(Trigger::Tick).await, PassResult::Ok);
    assert_eq!(
        pruned(&rig.ledger.take_events()),
        (None, Some(set(&["p-a", "p-b"])))
    );

    // Nova answered with no server at all: never trusted for a prune.
    let mut empty = synced(base());
    empty.servers = Some(Vec::new());
    empty.projects.clear();
    rig.source.set(empty);
    assert_eq!(rig.reconciler.pass(Trigger::Tick).await, PassResult::Ok);
    assert_eq!(pruned(&rig.ledger.take_events()), (None, None));

    // A failed sync prunes nothing either.
    rig.source.fail_next(1);
    assert_eq!(
        rig.reconciler.pass(Trigger::Tick).await,
        PassResult::SyncError
    );
    assert_eq!(rig.ledger.take_events(), []);
}

#[tokio::test]
async fn runs_total_counts_every_outcome_from_zero() {
    let mut rig = Rig::new(&base());
    for result in ["ok", "sync_error", "apply_error"] {
        let line = format!("lachesis_reconcile_runs_total{{result=\"{result}\"}} 0");
        assert!(rig.render().contains(&line), "{line} seeded");
    }
    assert_eq!(rig.reconciler.metrics().last_pass(), None);
    rig.source.fail_next(1);
    assert_eq!(
        rig.reconciler.pass(Trigger::Tick).await,
        PassResult::SyncError
    );
    // The last pass, for the debug pages' health strip: which, and why.
    let last = rig.reconciler.metrics().last_pass().unwrap();
    assert_eq!(
        (last.result, last.trigger),
        (PassResult::SyncError, Trigger::Tick)
    );
    assert!(last.error.as_deref().is_some_and(|e| !e.is_empty()));
    assert_eq!(rig.kernel.take_calls(), [], "a failed sync touches nothing");
    assert_eq!(rig.ledger.take_events(), []);
    assert_eq!(rig.reconciler.pass(Trigger::Tick).await, PassResult::Ok);
    rig.source.set(synced(trie_changed()));
    rig.kernel.fail_nth(1);
    assert_eq!(
        rig.reconciler.pass(Trigger::Kick).await,
        PassResult::ApplyError
    );
    let last = rig.reconciler.metrics().last_pass().unwrap();
    assert_eq!(
        (last.result, last.trigger),
        (PassResult::ApplyError, Trigger::Kick)
    );
    let text = rig.render();
    for (result, n) in [("ok", 1), ("sync_error", 1), ("apply_error", 1)] {
        let line = format!("lachesis_reconcile_runs_total{{result=\"{result}\"}} {n}");
        assert!(text.contains(&line), "{line} in\n{text}");
    }
    assert!(text.contains("lachesis_reconcile_duration_seconds_count{trigger=\"tick\"} 2"));
    assert!(text.contains("lachesis_reconcile_duration_seconds_count{trigger=\"kick\"} 1"));
}

#[tokio::test(start_paused = true)]
async fn ghosts_expire_after_the_live_grace_and_leave_the_table_when_forgotten() {
    let rig = with_mac2_ghosted().await;
    let table = rig.reconciler.bindings();
    let mut table = table.lock().await;
    let grace = Duration::from_mins(1);
    let now = tokio::time::Instant::now();
    assert!(table.expired_ghosts(now, grace).is_empty());
    tokio::time::advance(grace).await;
    let now = tokio::time::Instant::now();
    let expired = table.expired_ghosts(now, grace);
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0].1.binding, vm(2, "p-b", "s-2", "port-2"));
    let without = table.without_ghost(mac(2)).unwrap();
    assert!(without.binding(mac(2)).is_none());
    assert!(
        table.without_ghost(mac(1)).is_none(),
        "MAC 1 is live, not a ghost"
    );
    assert!(table.forget_ghost(mac(2)).is_some());
    assert!(table.attribution().binding(mac(2)).is_none());
    assert_eq!(rig.reconciler.metrics().ghosts(), 0);
}

#[tokio::test]
async fn the_syncs_topology_is_committed_with_its_plan_and_only_then() {
    let mut rig = Rig::new(&base());
    assert!(
        rig.reconciler.committed().borrow().topology.is_none(),
        "boot handed none"
    );
    let drawn = |name: &str| {
        Arc::new(lachesis_planner::Topology {
            projects: [("p-a".to_owned(), name.to_owned())].into(),
            ..Default::default()
        })
    };
    let first = drawn("first");
    let mut s = synced(trie_changed());
    s.topology = first.clone();
    rig.source.set(s.clone());
    rig.kernel.fail_nth(1);
    assert_eq!(
        rig.reconciler.pass(Trigger::Tick).await,
        PassResult::ApplyError
    );
    assert!(
        rig.reconciler.committed().borrow().topology.is_none(),
        "a pass that did not commit its plan does not commit its topology"
    );
    assert_eq!(rig.reconciler.pass(Trigger::Tick).await, PassResult::Ok);
    let committed = rig.reconciler.committed().borrow().clone();
    assert!(Arc::ptr_eq(committed.topology.as_ref().unwrap(), &first));
    assert_eq!(*committed.plan, trie_changed());
}

#[tokio::test]
async fn the_plan_gauges_follow_the_committed_plan_and_each_pass_times_its_diff() {
    let anomaly = |class, detail: &str| Anomaly {
        class,
        detail: detail.to_owned(),
    };
    let diffs = |rig: &Rig| {
        let text = rig.render();
        let series = "lachesis_plan_step_duration_seconds_count{step=\"diff\"} ";
        text.lines()
            .find_map(|l| l.strip_prefix(series))
            .unwrap_or_else(|| panic!("no {series}in\n{text}"))
            .to_owned()
    };
    let mut initial = base();
    initial.anomalies = vec![anomaly(AnomalyClass::Cycle, "r-1 → r-2 → r-1")];
    initial.route_fallbacks = FallbackReason::ALL.iter().map(|r| (*r, 0)).collect();
    initial.route_fallbacks.insert(FallbackReason::Cycle, 1);
    let mut rig = Rig::new(&initial);
    let m = rig.reconciler.metrics().plan().clone();
    // Boot's plan, before any pass: every class and reason has a value.
    assert_eq!(m.anomalies(AnomalyClass::Cycle), 1);
    assert_eq!(m.anomalies(AnomalyClass::MaxHops), 0);
    assert_eq!(m.route_fallbacks(FallbackReason::Cycle), 1);
    assert_eq!(diffs(&rig), "0");

    // `base()` has no fallback reason at all (a plan stored before the key
    // existed): every reason reads 0.
    let mut next = base();
    next.anomalies = vec![
        anomaly(AnomalyClass::MaxHops, "10.9.0.0/16 via r-1"),
        anomaly(AnomalyClass::MaxHops, "10.8.0.0/16 via r-1"),
    ];
    rig.source.set(synced(next));
    assert_eq!(rig.reconciler.pass(Trigger::Tick).await, PassResult::Ok);
    assert_eq!(m.anomalies(AnomalyClass::Cycle), 0);
    assert_eq!(m.anomalies(AnomalyClass::MaxHops), 2);
    assert_eq!(m.route_fallbacks(FallbackReason::Cycle), 0);
    assert_eq!(diffs(&rig), "1");

    // A failed pass keeps the gauges of the plan the kernel still holds.
    rig.source.set(synced(initial));
    rig.source.fail_next(1);
    assert_eq!(
        rig.reconciler.pass(Trigger::Tick).await,
        PassResult::SyncError
    );
    assert_eq!(m.anomalies(AnomalyClass::MaxHops), 2);
    assert_eq!(m.route_fallbacks(FallbackReason::Cycle), 0);
    assert_eq!(diffs(&rig), "1", "a failed sync is not diffed");
}
