// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `make bench-cores` diagnostic: two empty BPF iterator programs. When the
 * kernel refuses the classifier's map-element iterator drain, the benchmark
 * loads each of these alone to tell a refusal of the iterator kind (the
 * empty bpf_map_elem program fails too) from a refusal of our program's
 * content (only ours fails). bpf_map iterates the list of maps and takes no
 * map at attach; bpf_map_elem iterates one map's elements.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct bpf_iter__bpf_map {
	void *meta;
} __attribute__((preserve_access_index));

struct bpf_iter__bpf_map_elem {
	void *meta;
} __attribute__((preserve_access_index));

SEC("iter/bpf_map")
int probe_bpf_map(struct bpf_iter__bpf_map *ctx)
{
	return 0;
}

SEC("iter/bpf_map_elem")
int probe_bpf_map_elem(struct bpf_iter__bpf_map_elem *ctx)
{
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
