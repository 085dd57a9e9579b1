//! `flows` sizing from a kernel-memory budget (DESIGN §4.5), by the
//! kernel's own accounting of a preallocated per-CPU hash (what its fdinfo
//! reports as `memlock`; `make bench-cores` measures it, and
//! `tests/sizing.rs` holds this model against it on the running kernel).

use lachesis_abi::FLOW_COUNTERS_SIZE;
use libbpf_rs::MapType;

/// Smallest `flows` size ever configured, whatever the budget. At 254 or
/// more possible CPUs the budget's default 64 MiB holds fewer entries than
/// this: the floor wins and the map takes a little more (1.3 % at 256).
pub const FLOWS_MIN_ENTRIES: u32 = 8_192;
/// Largest `flows` size ever configured, whatever the budget.
pub const FLOWS_MAX_ENTRIES: u32 = 262_144;
/// Default kernel-memory budget for `flows`: 64 MiB.
pub const DEFAULT_FLOWS_MEMORY_BUDGET: u64 = 64 << 20;

/// What the kernel charges one preallocated per-CPU hash element apart
/// from its values: the element header (48 bytes), the 18-byte key rounded
/// up to 8 (24) and the pointer to the per-CPU values (8).
pub const FLOWS_ELEMENT_BYTES: u64 = 80;
/// One hash bucket; the kernel allocates the smallest power of two of them
/// not below `max_entries`.
pub const FLOWS_BUCKET_BYTES: u64 = 16;
/// Room for what does not grow with the entries: the map structure and its
/// per-CPU lock counters (under 1 KiB at 2 CPUs, about 9 KiB at 256).
pub const FLOWS_MAP_OVERHEAD: u64 = 64 << 10;

/// Kernel memory a `flows` map of `entries` takes on `possible_cpus` CPUs,
/// rounded up: the map's own overhead, every element with one counters
/// value per possible CPU, and the bucket array.
#[must_use]
pub fn flows_kernel_bytes(entries: u32, possible_cpus: u32) -> u64 {
    let per_cpu_value = (FLOW_COUNTERS_SIZE as u64).next_multiple_of(8);
    let element = FLOWS_ELEMENT_BYTES + u64::from(possible_cpus.max(1)) * per_cpu_value;
    FLOWS_MAP_OVERHEAD
        + u64::from(entries) * element
        + u64::from(entries.max(1)).next_power_of_two() * FLOWS_BUCKET_BYTES
}

/// The most entries whose [`flows_kernel_bytes`] fits `budget_bytes`,
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

/// Values per entry a lookup of a `flows` map of this type copies out:
/// one per possible CPU for a per-CPU hash, one for a shared hash. Here,
/// beside the sizing, so that both the loader (`object.rs`) and the drain
/// (`drain.rs`) read it without one importing the other.
pub(crate) fn slots_per_entry(map_type: MapType, possible_cpus: usize) -> usize {
    if map_type.is_percpu() {
        possible_cpus
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_budget_by_cpu_count() {
        // 2 CPUs: 144 bytes an entry, 407 000 fit → the ceiling.
        assert_eq!(flows_max_entries(DEFAULT_FLOWS_MEMORY_BUDGET, 2), 262_144);
        // 64 CPUs: (64 MiB − 64 KiB − 32 768 buckets × 16) / (80 + 64·32).
        assert_eq!(flows_max_entries(DEFAULT_FLOWS_MEMORY_BUDGET, 64), 31_258);
        // 256 CPUs: 8 088 fit → the floor.
        assert_eq!(flows_max_entries(DEFAULT_FLOWS_MEMORY_BUDGET, 256), 8_192);
    }

    #[test]
    fn the_size_chosen_is_the_largest_within_the_budget() {
        for cpus in [1, 2, 8, 64, 96, 128, 200] {
            for budget in [16 << 20, 64 << 20, 256 << 20] {
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
        let one = FLOWS_ELEMENT_BYTES + 2 * 32;
        assert_eq!(
            flows_kernel_bytes(4096, 2),
            FLOWS_MAP_OVERHEAD + 4096 * one + 4096 * FLOWS_BUCKET_BYTES
        );
        assert_eq!(
            flows_kernel_bytes(4097, 2),
            FLOWS_MAP_OVERHEAD + 4097 * one + 8192 * FLOWS_BUCKET_BYTES
        );
    }

    #[test]
    fn clamps_and_never_divides_by_zero() {
        assert_eq!(flows_max_entries(0, 0), FLOWS_MIN_ENTRIES);
        assert_eq!(flows_max_entries(u64::MAX, 1), FLOWS_MAX_ENTRIES);
        // 16 MiB on 8 CPUs: (16 MiB − 64 KiB − 65 536 buckets × 16) / 336.
        assert_eq!(flows_max_entries(16 << 20, 8), 46_616);
    }
}
