//! `flows` sizing from a kernel-memory budget (DESIGN §4.5).

use lachesis_abi::{FLOW_COUNTERS_SIZE, FLOW_KEY_SIZE};

/// Smallest `flows` size ever configured, whatever the budget.
pub const FLOWS_MIN_ENTRIES: u32 = 8_192;
/// Largest `flows` size ever configured, whatever the budget.
pub const FLOWS_MAX_ENTRIES: u32 = 262_144;
/// Default kernel-memory budget for `flows`: 64 MiB.
pub const DEFAULT_FLOWS_MEMORY_BUDGET: u64 = 64 << 20;

/// Entries that fit `budget_bytes` when each costs its key plus one
/// counters slot per possible CPU (a per-CPU hash preallocates all of them),
/// clamped to [`FLOWS_MIN_ENTRIES`, `FLOWS_MAX_ENTRIES`].
#[must_use]
pub fn flows_max_entries(budget_bytes: u64, possible_cpus: u32) -> u32 {
    let per_entry =
        FLOW_KEY_SIZE as u64 + u64::from(possible_cpus.max(1)) * FLOW_COUNTERS_SIZE as u64;
    let fit = budget_bytes / per_entry;
    fit.clamp(u64::from(FLOWS_MIN_ENTRIES), u64::from(FLOWS_MAX_ENTRIES)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_budget_by_cpu_count() {
        // 64 MiB / (18 + 2·32) = 818 400 → clamped to the ceiling.
        assert_eq!(flows_max_entries(DEFAULT_FLOWS_MEMORY_BUDGET, 2), 262_144);
        // 64 MiB / (18 + 64·32) = 32 482.
        assert_eq!(flows_max_entries(DEFAULT_FLOWS_MEMORY_BUDGET, 64), 32_482);
        // 64 MiB / (18 + 256·32) = 8 174 → clamped to the floor.
        assert_eq!(flows_max_entries(DEFAULT_FLOWS_MEMORY_BUDGET, 256), 8_192);
    }

    #[test]
    fn clamps_and_never_divides_by_zero() {
        assert_eq!(flows_max_entries(0, 0), FLOWS_MIN_ENTRIES);
        assert_eq!(flows_max_entries(u64::MAX, 1), FLOWS_MAX_ENTRIES);
        // 16 MiB on 8 CPUs: 16 777 216 / 274 = 61 230.
        assert_eq!(flows_max_entries(16 << 20, 8), 61_230);
    }
}
