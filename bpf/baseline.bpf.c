// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Benchmark baseline (DESIGN §16): the least a per-flow counter can do —
 * read the MACs, then one per-CPU hash lookup + update. `make bench-packet`
 * measures the classifier against this program on the same frames.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>

#include "lachesis.h"

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__type(key, struct flow_key);
	__type(value, struct flow_counters);
	__uint(max_entries, 65536);
} baseline_flows SEC(".maps");

SEC("tc")
int baseline(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct flow_key key;

	if ((void *)(eth + 1) > data_end)
		return -1;
	__builtin_memset(&key, 0, sizeof(key));
	__builtin_memcpy(key.src_mac, eth->h_source, 6);
	__builtin_memcpy(key.dst_mac, eth->h_dest, 6);

	struct flow_counters *c = bpf_map_lookup_elem(&baseline_flows, &key);
	if (c) {
		c->bytes += skb->len;
		c->packets += 1;
		return -1;
	}
	struct flow_counters init = { .bytes = skb->len, .packets = 1 };
	bpf_map_update_elem(&baseline_flows, &key, &init, BPF_NOEXIST);
	return -1;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
