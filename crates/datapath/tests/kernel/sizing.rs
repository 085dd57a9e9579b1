//! The sizing model (`flows_kernel_bytes`) against the kernel's own
//! accounting of the loaded `flows` map (fdinfo `memlock`): the budget the
//! agent is given is the memory the kernel charges, never less.

use crate::common;

use lachesis_datapath::{
    flows_kernel_bytes, flows_max_entries, Datapath, DatapathConfig, FLOWS_MAP_OVERHEAD,
};

fn memlock_at(entries: Option<u32>, budget: u64) -> (u32, u64, u32) {
    let pins = common::PinDir::new("sizing");
    let config = DatapathConfig {
        flows_max_entries: entries,
        flows_memory_budget: budget,
        ..pins.config()
    };
    let (dp, _, _) = Datapath::load(&config).expect("load");
    let cpus = u32::try_from(dp.possible_cpus()).unwrap();
    (dp.flows_max_entries(), dp.flows_memlock().unwrap(), cpus)
}

#[test]
fn the_model_covers_what_the_kernel_charges_with_little_to_spare() {
    for entries in [4096, 5000, 8192, 12_345] {
        let (n, memlock, cpus) = memlock_at(Some(entries), 0);
        assert_eq!(n, entries);
        let model = flows_kernel_bytes(n, cpus);
        assert!(
            memlock <= model,
            "{n} entries on {cpus} CPUs: the kernel charges {memlock}, the model {model}"
        );
        assert!(
            model - memlock <= FLOWS_MAP_OVERHEAD,
            "{n} entries on {cpus} CPUs: the model ({model}) overestimates the kernel ({memlock}) by more than its fixed headroom"
        );
    }
}

#[test]
fn a_budget_sized_map_stays_within_its_budget() {
    for budget in [2u64 << 20, 8 << 20] {
        let (n, memlock, cpus) = memlock_at(None, budget);
        assert_eq!(n, flows_max_entries(budget, cpus));
        assert!(
            memlock <= budget,
            "{n} entries: the kernel charges {memlock} for a budget of {budget}"
        );
    }
}
