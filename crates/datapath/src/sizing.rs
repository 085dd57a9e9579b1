//! `flows` sizing from a kernel-memory budget (DESIGN §4.5, §4.7), by the
//! kernel's own accounting of a preallocated hash (`htab_map_mem_usage`,
//! what its fdinfo reports as `memlock`; `tests/sizing.rs` holds this model
//! against it on the running kernel). `flows` is keyed by (flow key, CPU):
//! its size counts sub-entries, and an element costs the same whatever the
//! CPU count.

use lachesis_abi::{ENTRY_KEY_SIZE, FLOW_VALUE_SIZE};

/// Smallest `flows` size ever configured, whatever the budget.
pub const FLOWS_MIN_ENTRIES: u32 = 8_192;
/// Largest `flows` size ever configured, whatever the budget (sub-entries:
/// 128 MiB of elements).
pub const FLOWS_MAX_ENTRIES: u32 = 1 << 20;
/// Default kernel-memory budget for `flows`: 64 MiB.
pub const DEFAULT_FLOWS_MEMORY_BUDGET: u64 = 64 << 20;

/// The kernel's element header (`struct htab_elem`).
const HTAB_ELEM_HEADER: u64 = 48;
/// What the kernel charges one preallocated element: the header, the
/// 20-byte key rounded up to 8 (24) and the 56-byte value: 128 bytes, two
/// cache lines of its own.
pub const FLOWS_ELEMENT_BYTES: u64 = HTAB_ELEM_HEADER
    + (ENTRY_KEY_SIZE as u64).next_multiple_of(8)
    + (FLOW_VALUE_SIZE as u64).next_multiple_of(8);
/// One hash bucket; the kernel allocates the smallest power of two of them
/// not below `max_entries`.
pub const FLOWS_BUCKET_BYTES: u64 = 16;
/// What each possible CPU adds: one spare element the preallocated
/// freelist keeps per CPU, its pointer, and the map's per-CPU lock
/// counters (8 ints).
pub const FLOWS_PER_CPU_BYTES: u64 = FLOWS_ELEMENT_BYTES + 8 + 8 * 4;
/// Room for what grows with nothing: the map structure (under 1 KiB).
pub const FLOWS_MAP_OVERHEAD: u64 = 64 << 10;

/// Kernel memory a `flows` map of `entries` sub-entries takes on
/// `possible_cpus` CPUs, rounded up.
#[must_use]
pub fn flows_kernel_bytes(entries: u32, possible_cpus: u32) -> u64 {
    FLOWS_MAP_OVERHEAD
        + u64::from(possible_cpus.max(1)) * FLOWS_PER_CPU_BYTES
        + u64::from(entries) * FLOWS_ELEMENT_BYTES
        + u64::from(entries.max(1)).next_power_of_two() * FLOWS_BUCKET_BYTES
}

/// The most sub-entries whose [`flows_kernel_bytes`] fits `budget_bytes`,
/// clamped to [`FLOWS_MIN_ENTRIES`, `FLOWS_MAX_ENTRIES`].
#[must_use]
pub fn flows_max_entries(budget_bytes: u64, possible_cpus: u32) -> u32 {
    let fits = |n: u32| flows_kernel_bytes(n, possible_cpus) <= budget_bytes;
    // The cost grows with the size: bisect for the last size that fits.
    let (mut lo, mut hi) = (0u32, FLOWS_MAX_ENTRIES);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo.max(FLOWS_MIN_ENTRIES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_element_is_two_cache_lines() {
        assert_eq!(FLOWS_ELEMENT_BYTES, 128);
    }

    #[test]
    fn default_budget_by_cpu_count() {
        // (64 MiB − 64 KiB − CPUs × 168 − 2^19 buckets × 16) / 128: the
        // same ~458 000 sub-entries whatever the CPU count.
        assert_eq!(flows_max_entries(DEFAULT_FLOWS_MEMORY_BUDGET, 2), 458_237);
        assert_eq!(flows_max_entries(DEFAULT_FLOWS_MEMORY_BUDGET, 64), 458_156);
        assert_eq!(flows_max_entries(DEFAULT_FLOWS_MEMORY_BUDGET, 256), 457_904);
        for cpus in [2, 64, 256, 384, 1024] {
            assert!(flows_max_entries(DEFAULT_FLOWS_MEMORY_BUDGET, cpus) >= 400_000);
        }
    }

    #[test]
    fn the_size_chosen_is_the_largest_within_the_budget() {
        for cpus in [1, 2, 8, 64, 96, 128, 200, 256] {
            for budget in [2 << 20, 16 << 20, 64 << 20, 256 << 20] {
                let n = flows_max_entries(budget, cpus);
                if n > FLOWS_MIN_ENTRIES && n < FLOWS_MAX_ENTRIES {
                    assert!(
                        flows_kernel_bytes(n, cpus) <= budget,
                        "{cpus} CPUs, {budget}"
                    );
                    assert!(
                        flows_kernel_bytes(n + 1, cpus) > budget,
                        "{cpus} CPUs, {budget}"
                    );
                }
            }
        }
    }

    #[test]
    fn buckets_come_in_powers_of_two() {
        let fixed = FLOWS_MAP_OVERHEAD + 2 * FLOWS_PER_CPU_BYTES;
        assert_eq!(
            flows_kernel_bytes(4096, 2),
            fixed + 4096 * 128 + 4096 * FLOWS_BUCKET_BYTES
        );
        assert_eq!(
            flows_kernel_bytes(4097, 2),
            fixed + 4097 * 128 + 8192 * FLOWS_BUCKET_BYTES
        );
    }

    #[test]
    fn clamps_and_never_divides_by_zero() {
        assert_eq!(flows_max_entries(0, 0), FLOWS_MIN_ENTRIES);
        assert_eq!(flows_max_entries(u64::MAX, 1), FLOWS_MAX_ENTRIES);
        // 16 MiB on 8 CPUs: (16 MiB − 64 KiB − 8 × 168 − 131 072 × 16) / 128.
        assert_eq!(flows_max_entries(16 << 20, 8), 114_165);
    }
}
