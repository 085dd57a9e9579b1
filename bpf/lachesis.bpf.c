// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Lachesis classifier (DESIGN §4.2): counts every skb crossing a tap, keyed by
 * (MACs, inner ethertype, direction, zone, L4 class). It never drops or
 * modifies a packet.
 *
 * Compile-time variants of `flows` (one source; `make bench-cores` builds
 * and measures each, docs/decisions/0010-flows-keyed-by-cpu.md):
 *   default                a preallocated hash keyed by (flow key, CPU):
 *                          each CPU creates and writes only its own
 *                          sub-entry, plain adds (DESIGN §4.7);
 *   LACHESIS_FLOWS_ATOMIC  the same, adds atomic: the build a PREEMPT_RT
 *                          kernel gets, where a TC program can be preempted
 *                          by another task on the same CPU;
 *   LACHESIS_FLOWS_PERCPU  the previous layout: a per-CPU hash keyed by the
 *                          flow key, plain adds into this CPU's slot (what
 *                          an upgrade retires; benchmarks and tests);
 *   LACHESIS_FLOWS_SHARED  one shared hash keyed by the flow key, atomic
 *                          adds on bytes/packets (benchmark only);
 *   LACHESIS_FLOWS_ITER    the per-CPU hash plus a map-element iterator that
 *                          folds the CPU slots in the kernel and emits only
 *                          entries seen since a threshold (benchmark only);
 *
 * Independently, LACHESIS_VERDICT_SLOTS=N sizes the per-CPU verdict cache
 * (lachesis.h: 256 by default; 0 builds without it, 1 is the one-slot
 * cache `make bench-verdict` measures), and LACHESIS_VERDICT_GEN_FETCH
 * (build.rs defines it for every target but x86-64) reads the cache's
 * generation with an ordered atomic.
 *
 * Return value: -1 is TC_ACT_UNSPEC for cls_bpf (continue with the next
 * filter) and TCX_NEXT for TCX (continue with the next program). Returning
 * 0 would be TCX_PASS, which ends the chain and silently disables any other
 * tool's program attached after ours.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "lachesis.h"

#define CONTINUE (-1)

#define ETH_P_8021Q_ 0x8100
#define ETH_P_8021AD_ 0x88A8
#define ETH_P_IP_ 0x0800
#define ETH_P_IPV6_ 0x86DD
#define ETH_HLEN_ 14
#define VLAN_HLEN_ 4
#define IPV4_HLEN 20
#define IPV6_HLEN 40
/* Ethernet + one tag + the IPv6 fixed header: the most a parse ever reads. */
#define PARSE_MAX (ETH_HLEN_ + VLAN_HLEN_ + IPV6_HLEN)

#define IPPROTO_ICMP_ 1
#define IPPROTO_TCP_ 6
#define IPPROTO_UDP_ 17
#define IPPROTO_ICMPV6_ 58

#if defined(LACHESIS_FLOWS_ITER) && !defined(LACHESIS_FLOWS_PERCPU)
#define LACHESIS_FLOWS_PERCPU
#endif
#if defined(LACHESIS_FLOWS_SHARED) || defined(LACHESIS_FLOWS_PERCPU)
#define FLOWS_BY_KEY 1 /* keyed by the flow key alone */
#else
#define FLOWS_BY_KEY 0 /* keyed by (flow key, CPU) */
#endif
#if defined(LACHESIS_FLOWS_SHARED) || defined(LACHESIS_FLOWS_ATOMIC)
#define FLOWS_ATOMIC_ADDS 1
#else
#define FLOWS_ATOMIC_ADDS 0
#endif

#if FLOWS_BY_KEY
#ifdef LACHESIS_FLOWS_SHARED
#define FLOWS_MAP_TYPE BPF_MAP_TYPE_HASH
#else
#define FLOWS_MAP_TYPE BPF_MAP_TYPE_PERCPU_HASH
#endif
struct {
	__uint(type, FLOWS_MAP_TYPE);
	__type(key, struct flow_key);
	__type(value, struct flow_counters);
	__uint(max_entries, FLOWS_DEFAULT_ENTRIES);
} flows SEC(".maps");
#else
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct flow_entry_key);
	__type(value, struct flow_value);
	__uint(max_entries, FLOWS_DEFAULT_ENTRIES);
} flows SEC(".maps");
#endif

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u64);
	__type(value, struct endpoint_value);
	__uint(max_entries, 16384);
} endpoints SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct zone_key_v4);
	__type(value, __u8);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} zones_v4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct zone_key_v6);
	__type(value, __u8);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} zones_v6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct amphora_key);
	__type(value, __u8);
	__uint(max_entries, 8192);
} amphora_ips SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, STAT_COUNT);
} stats SEC(".maps");

/* Tap ifindex -> the MAC of the Neutron port behind it, written by the agent
 * before it attaches the tap: a group frame the tap delivers to its VM is
 * keyed by the port that received it, not by the group address. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, struct tap_port);
	__uint(max_entries, TAP_PORTS_ENTRIES);
} tap_ports SEC(".maps");

#if LACHESIS_VERDICT_SLOTS > 0
#if LACHESIS_VERDICT_SLOTS & (LACHESIS_VERDICT_SLOTS - 1)
#error "LACHESIS_VERDICT_SLOTS must be a power of two"
#endif
#define VERDICT_CACHE 1
#else
#define VERDICT_CACHE 0
#endif
/* Torn slots are possible only where a TC program can be preempted on its
 * CPU by another task running it: the PREEMPT_RT (atomic) build. */
#if VERDICT_CACHE && defined(LACHESIS_FLOWS_ATOMIC)
#define VERDICT_SEQ 1
#else
#define VERDICT_SEQ 0
#endif

#if VERDICT_CACHE
/* Verdict cache (DESIGN §4.2; docs/decisions/0011-verdict-cache.md): per
 * CPU, direct-mapped, LACHESIS_VERDICT_SLOTS slots of 64 bytes holding the
 * zone of a verdict_key, filled under this CPU's generation + 1. Multicast
 * frames bypass it; an unknown VM's `miss` is cached like any verdict. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct verdict_slot);
	__uint(max_entries, LACHESIS_VERDICT_SLOTS);
} verdicts SEC(".maps");

/* One generation per CPU, each on its own cache line. Userspace sizes it
 * to the possible CPUs, maps it, and stores generation + 1 into every
 * line (a release store) after each write to `endpoints`, `zones_v4`,
 * `zones_v6` or `amphora_ips`: every slot filled before that write stops
 * matching at once (crates/datapath/src/verdict.rs). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct verdict_gen_line);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
} verdict_gen SEC(".maps");

#define compiler_barrier() asm volatile("" ::: "memory")

/* The generation must be read before the metadata maps the classification
 * then reads (acquire), or a CPU that reorders loads could cache a verdict
 * of the old metadata under the new generation. x86 never reorders two
 * loads: a plain load. Elsewhere (arm64) the build defines
 * LACHESIS_VERDICT_GEN_FETCH: an atomic fetch, which the BPF JITs emit
 * fully ordered (clang 14 has no BPF load-acquire); the line is this CPU's
 * own, so the atomic costs no contention. */
static __always_inline __u64 load_gen(__u64 *p)
{
#ifdef LACHESIS_VERDICT_GEN_FETCH
	return __sync_fetch_and_add(p, 0);
#else
	return *(volatile __u64 *)p;
#endif
}

/* Multiply-shift: the top bits of a 64-bit product depend on every bit of
 * the folded key (the low bits would not see the address's last byte). */
static __always_inline __u32 verdict_index(const struct verdict_key *k)
{
	const __u64 *w = (const __u64 *)k;
	__u64 h = w[0] ^ w[1] ^ w[2] ^ w[3] ^ w[4] ^ w[5];

	h ^= h >> 29;
	h *= 0x9e3779b97f4a7c15ULL;
#if LACHESIS_VERDICT_SLOTS > 1
	return (__u32)(h >> (64 - __builtin_ctz(LACHESIS_VERDICT_SLOTS)));
#else
	return 0;
#endif
}

static __always_inline int verdict_eq(const struct verdict_key *a, const struct verdict_key *b)
{
	const __u64 *x = (const __u64 *)a, *y = (const __u64 *)b;

	return ((x[0] ^ y[0]) | (x[1] ^ y[1]) | (x[2] ^ y[2]) | (x[3] ^ y[3]) |
		(x[4] ^ y[4]) | (x[5] ^ y[5])) == 0;
}

/* The cached zone of `k` under generation `gen` (+ 1), if this slot holds
 * it. PREEMPT_RT: a slot is read only between two equal, even `seq`
 * readings, so a fill that preempted this read (or that this read
 * preempted) makes it a miss, never a torn verdict. */
static __always_inline int verdict_lookup(struct verdict_slot *vs, __u64 gen,
					  const struct verdict_key *k, __u8 *zone)
{
#if VERDICT_SEQ
	__u32 seq = *(volatile __u32 *)&vs->seq;

	if (seq & 1)
		return 0;
	compiler_barrier();
#endif
	if (vs->gen != gen || !verdict_eq(&vs->key, k))
		return 0;
	__u8 z = vs->zone;
#if VERDICT_SEQ
	compiler_barrier();
	if (*(volatile __u32 *)&vs->seq != seq)
		return 0;
#endif
	*zone = z;
	return 1;
}

/* Fills the slot. PREEMPT_RT: only the task whose compare-and-swap makes
 * `seq` odd writes; another finding it odd (or losing the swap) leaves the
 * slot alone. `seq` only grows, so a reader cannot see the same even value
 * around a fill. */
static __always_inline void verdict_fill(struct verdict_slot *vs, __u64 gen,
					 const struct verdict_key *k, __u8 zone)
{
#if VERDICT_SEQ
	__u32 seq = *(volatile __u32 *)&vs->seq;

	if ((seq & 1) || __sync_val_compare_and_swap(&vs->seq, seq, seq + 1) != seq)
		return;
	compiler_barrier();
#endif
	vs->gen = gen;
	vs->key = *k;
	vs->zone = zone;
#if VERDICT_SEQ
	compiler_barrier();
	*(volatile __u32 *)&vs->seq = seq + 2;
#endif
}
#endif

static __always_inline void stat_inc(__u32 reason)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &reason);

	if (v)
		*v += 1;
}

static __always_inline __u64 mac_key(const __u8 *m)
{
	return ((__u64)m[0] << 40) | ((__u64)m[1] << 32) | ((__u64)m[2] << 24) |
	       ((__u64)m[3] << 16) | ((__u64)m[4] << 8) | (__u64)m[5];
}

static __always_inline __u8 l4_class(__u8 proto)
{
	switch (proto) {
	case IPPROTO_TCP_:
		return L4_TCP;
	case IPPROTO_UDP_:
		return L4_UDP;
	case IPPROTO_ICMP_:
	case IPPROTO_ICMPV6_:
		return L4_ICMP;
	default:
		return L4_OTHER;
	}
}

/* Both addresses in 16-byte form; IPv4 as ::ffff:a.b.c.d (the amphora_ips
 * convention), so one code path serves both families. */
struct addrs {
	__u8 local[16];
	__u8 remote[16];
};

static __always_inline __u8 trie_zone(int v6, __u32 tenant, const __u8 *remote)
{
	__u8 *z;

	if (v6) {
		struct zone_key_v6 k = { .prefixlen = 32 + 128, .tenant_id = tenant };

		__builtin_memcpy(k.addr, remote, 16);
		z = bpf_map_lookup_elem(&zones_v6, &k);
		if (z)
			return *z;
		k.tenant_id = 0;
		z = bpf_map_lookup_elem(&zones_v6, &k);
	} else {
		struct zone_key_v4 k = { .prefixlen = 32 + 32, .tenant_id = tenant };

		__builtin_memcpy(k.addr, remote + 12, 4);
		z = bpf_map_lookup_elem(&zones_v4, &k);
		if (z)
			return *z;
		k.tenant_id = 0;
		z = bpf_map_lookup_elem(&zones_v4, &k);
	}
	/* No global catch-all row: a boot-order bug, visible as zone miss. */
	return z ? *z : ZONE_MISS;
}

static __always_inline int is_amphora_addr(__u32 tenant, const __u8 *addr)
{
	struct amphora_key k = { .tenant_id = tenant };

	__builtin_memcpy(k.addr, addr, 16);
	return bpf_map_lookup_elem(&amphora_ips, &k) != 0;
}

/* Adds one packet to an existing entry. (key, CPU) and per-CPU: this
 * CPU's own sub-entry or slot, which no other CPU writes; TC programs run
 * with bottom halves disabled, so nothing on this CPU interleaves either
 * (on a PREEMPT_RT kernel something can: the atomic build). Shared: every
 * CPU writes the same value, so the counters are atomic adds (exact under
 * concurrency); last_seen_ns is a plain store, where a racing older stamp
 * may win by one coarse tick (it only orders pressure relief). */
static __always_inline void bump(struct flow_counters *c, __u32 len, __u64 now)
{
#if FLOWS_ATOMIC_ADDS
	__sync_fetch_and_add(&c->bytes, len);
	__sync_fetch_and_add(&c->packets, 1);
#else
	c->bytes += len;
	c->packets += 1;
#endif
	c->last_seen_ns = now;
}

#if !FLOWS_BY_KEY
/* (key, CPU): only this CPU creates its sub-entry, so a refused insert
 * means the map is full (counted, never silent); on a PREEMPT_RT kernel
 * another task on this CPU may have created it meanwhile, hence the second
 * lookup. */
static __always_inline void add_bytes(struct flow_key *fk, __u32 len)
{
	struct flow_entry_key key;

	__builtin_memset(&key, 0, sizeof(key));
	__builtin_memcpy(&key.key, fk, sizeof(key.key));
	key.cpu = (__u16)bpf_get_smp_processor_id();
	struct flow_value *v = bpf_map_lookup_elem(&flows, &key);
	__u64 now = bpf_ktime_get_coarse_ns();

	if (v) {
		bump(&v->counters, len, now);
		return;
	}
	/* created_ns uses the precise clock: it is the sub-entry's identity
	 * (DESIGN §4.3), and a delete + recreate within one coarse tick must
	 * still read as a new entry. It is paid once per sub-entry. */
	struct flow_value init;

	__builtin_memset(&init, 0, sizeof(init));
	init.counters.bytes = len;
	init.counters.packets = 1;
	init.counters.created_ns = bpf_ktime_get_ns();
	init.counters.last_seen_ns = init.counters.created_ns;
	if (bpf_map_update_elem(&flows, &key, &init, BPF_NOEXIST) == 0)
		return;
	v = bpf_map_lookup_elem(&flows, &key);
	if (v) {
		bump(&v->counters, len, now);
		return;
	}
	stat_inc(STAT_UPDATE_FAILURE);
}
#else
static __always_inline void add_bytes(struct flow_key *key, __u32 len)
{
	struct flow_counters *c = bpf_map_lookup_elem(&flows, key);
	__u64 now = bpf_ktime_get_coarse_ns();

	if (c) {
		bump(c, len, now);
		return;
	}
	/* created_ns uses the precise clock: it is the entry's identity
	 * (DESIGN §4.3), and a delete + recreate within one coarse tick must
	 * still read as a new entry. It is paid once per entry. */
	struct flow_counters init = {
		.bytes = len,
		.packets = 1,
		.created_ns = bpf_ktime_get_ns(),
	};
	init.last_seen_ns = init.created_ns;
	if (bpf_map_update_elem(&flows, key, &init, BPF_NOEXIST) == 0)
		return;
	/* Another CPU created it between our lookup and insert. */
	c = bpf_map_lookup_elem(&flows, key);
	if (c) {
		bump(c, len, now);
		return;
	}
	stat_inc(STAT_UPDATE_FAILURE);
}
#endif

static __always_inline int account(struct __sk_buff *skb, const __u8 direction)
{
#if VERDICT_CACHE
	struct verdict_slot *vs = 0;
	__u64 gen = 0;
	struct verdict_key vk;
#endif
	__u32 len = skb->len;
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;

	/* Pull only when the linear area is shorter than what we read and the
	 * packet is longer than the linear area: the helper costs more than
	 * this check. */
	__u32 want = len < PARSE_MAX ? len : PARSE_MAX;
	if (data + want > data_end) {
		bpf_skb_pull_data(skb, want);
		data = (void *)(long)skb->data;
		data_end = (void *)(long)skb->data_end;
	}

	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > data_end) {
		/* Not even an Ethernet header: no ethertype to call it IP. */
		stat_inc(STAT_SKIPPED_ETHERTYPE);
		return CONTINUE;
	}

	__u16 proto = bpf_ntohs(eth->h_proto);
	void *l3 = data + ETH_HLEN_;
	if (proto == ETH_P_8021Q_ || proto == ETH_P_8021AD_) {
		__be16 *inner = data + ETH_HLEN_ + 2;
		if ((void *)(inner + 1) > data_end) {
			stat_inc(STAT_SKIPPED_ETHERTYPE);
			return CONTINUE;
		}
		stat_inc(STAT_VLAN);
		proto = bpf_ntohs(*inner);
		l3 = data + ETH_HLEN_ + VLAN_HLEN_;
	}
	if (proto != ETH_P_IP_ && proto != ETH_P_IPV6_) {
		stat_inc(STAT_SKIPPED_ETHERTYPE);
		return CONTINUE;
	}

	struct flow_key key;
	__builtin_memset(&key, 0, sizeof(key));
	__builtin_memcpy(key.src_mac, eth->h_source, 6);
	__builtin_memcpy(key.dst_mac, eth->h_dest, 6);
	key.eth_proto = proto;
	key.direction = direction;

	int v6 = proto == ETH_P_IPV6_;
	__u8 *ip = l3;
	__u8 ipproto;
	if (v6) {
		if ((void *)(ip + IPV6_HLEN) > data_end)
			goto truncated;
		ipproto = ip[6];
	} else {
		if ((void *)(ip + IPV4_HLEN) > data_end)
			goto truncated;
		ipproto = ip[9];
	}
	key.l4 = l4_class(ipproto);

	/* Multicast gate: the group bit of the destination MAC. A group frame
	 * the tap delivers (rx) carries no VM MAC; key it by the receiving
	 * port's MAC so the ledger can attribute it. A tap with no port MAC
	 * known keeps the group address (attributed to no one, still counted). */
	if (eth->h_dest[0] & 1) {
		key.zone = ZONE_MULTICAST;
		if (direction == DIR_RX) {
			__u32 ifindex = skb->ifindex;
			struct tap_port *port = bpf_map_lookup_elem(&tap_ports, &ifindex);

			if (port)
				__builtin_memcpy(key.dst_mac, port->mac, 6);
		}
		goto count;
	}

	/* Both addresses, in 16-byte form: only a zone verdict reads them. */
	struct addrs a;
	__builtin_memset(&a, 0, sizeof(a));
	if (v6) {
		__builtin_memcpy(direction == DIR_TX ? a.local : a.remote, ip + 8, 16);
		__builtin_memcpy(direction == DIR_TX ? a.remote : a.local, ip + 24, 16);
	} else {
		a.local[10] = 0xff;
		a.local[11] = 0xff;
		a.remote[10] = 0xff;
		a.remote[11] = 0xff;
		__builtin_memcpy(direction == DIR_TX ? a.local + 12 : a.remote + 12, ip + 12, 4);
		__builtin_memcpy(direction == DIR_TX ? a.remote + 12 : a.local + 12, ip + 16, 4);
	}

#if VERDICT_CACHE
	__builtin_memset(&vk, 0, sizeof(vk));
	__builtin_memcpy(vk.src_mac, eth->h_source, 6);
	__builtin_memcpy(vk.dst_mac, eth->h_dest, 6);
	vk.eth_proto = proto;
	vk.direction = direction;
	__builtin_memcpy(vk.local, a.local, 16);
	__builtin_memcpy(vk.remote, a.remote, 16);
	__u32 cpu = bpf_get_smp_processor_id();
	struct verdict_gen_line *line = bpf_map_lookup_elem(&verdict_gen, &cpu);

	if (line) {
		gen = load_gen(&line->gen) + 1;
		__u32 idx = verdict_index(&vk);

		vs = bpf_map_lookup_elem(&verdicts, &idx);
		if (vs && verdict_lookup(vs, gen, &vk, &key.zone)) {
			stat_inc(STAT_VERDICT_HIT);
			goto count;
		}
	}
	stat_inc(STAT_VERDICT_MISS);
#endif

	/* Directional swap: the VM is the sender on tx, the receiver on rx. */
	__u64 vm_mac = mac_key(direction == DIR_TX ? eth->h_source : eth->h_dest);
	__u64 peer_mac = mac_key(direction == DIR_TX ? eth->h_dest : eth->h_source);

	struct endpoint_value *vmv = bpf_map_lookup_elem(&endpoints, &vm_mac);
	if (!vmv) {
		key.zone = ZONE_MISS;
		goto store;
	}
	__u32 vm_tenant = vmv->tenant_id;
	__u32 vm_flags = vmv->flags;

	struct endpoint_value *peerv = bpf_map_lookup_elem(&endpoints, &peer_mac);
	__u32 peer_tenant = 0, peer_flags = 0;
	if (peerv) {
		/* Direct L2: the peer MAC is the remote endpoint itself. */
		peer_tenant = peerv->tenant_id;
		peer_flags = peerv->flags;
		key.zone = peer_tenant == vm_tenant ? ZONE_SAME_TENANT : ZONE_OTHER_TENANT;
	} else {
		key.zone = trie_zone(v6, vm_tenant, a.remote);
	}

	/* Load-balancer segment 2 (DESIGN §4.2, §6.5); only when a flag is set. */
	if ((vm_flags & ENDPOINT_FLAG_AMPHORA) && is_amphora_addr(vm_tenant, a.local))
		key.zone = ZONE_INFRA;
	else if ((peer_flags & ENDPOINT_FLAG_AMPHORA) && is_amphora_addr(peer_tenant, a.remote))
		key.zone = ZONE_INFRA;
store:
#if VERDICT_CACHE
	if (vs)
		verdict_fill(vs, gen, &vk, key.zone);
#endif

count:
	add_bytes(&key, len);
	return CONTINUE;

truncated:
	stat_inc(STAT_TRUNCATED);
	key.zone = ZONE_MISS;
	key.l4 = L4_OTHER;
	add_bytes(&key, len);
	return CONTINUE;
}

SEC("tcx/ingress")
int lachesis_tx(struct __sk_buff *skb)
{
	return account(skb, DIR_TX);
}

SEC("tcx/egress")
int lachesis_rx(struct __sk_buff *skb)
{
	return account(skb, DIR_RX);
}

#ifdef LACHESIS_FLOWS_ITER
/* The map-element iterator's context (kernel types; CO-RE relocates the
 * offsets against the running kernel's BTF). */
struct seq_file;
struct bpf_iter_meta {
	struct seq_file *seq;
} __attribute__((preserve_access_index));
struct bpf_iter__bpf_map_elem {
	struct bpf_iter_meta *meta;
	void *key;
	void *value;
} __attribute__((preserve_access_index));

/* Set by userspace before load: the per-CPU values the iterator hands over
 * are this many slots (num_possible_cpus). The verifier reads it as a
 * constant, so every slot access has a fixed offset inside the buffer. */
const volatile __u32 possible_cpus = 1;
#define ITER_MAX_CPUS 8192

/* Slot 0: emit only entries whose folded last_seen_ns is at or after this. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 1);
} drain_since SEC(".maps");

/* Where a record is folded before it is written (one per CPU: iterator
 * programs run on any CPU); also what gives the record type its BTF. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct drain_record);
	__uint(max_entries, 1);
} drain_scratch SEC(".maps");

SEC("iter/bpf_map_elem")
int drain_active(struct bpf_iter__bpf_map_elem *ctx)
{
	const struct flow_key *key = ctx->key;
	const struct flow_counters *slot = ctx->value;
	__u32 zero = 0;
	__u64 *since = bpf_map_lookup_elem(&drain_since, &zero);
	struct drain_record *rec = bpf_map_lookup_elem(&drain_scratch, &zero);

	if (!key || !slot || !since || !rec)
		return 0;
	__builtin_memset(rec, 0, sizeof(*rec));
	__builtin_memcpy(&rec->key, key, sizeof(rec->key));
	for (__u32 cpu = 0; cpu < ITER_MAX_CPUS; cpu++) {
		if (cpu >= possible_cpus)
			break;
		rec->counters.bytes += slot[cpu].bytes;
		rec->counters.packets += slot[cpu].packets;
		if (slot[cpu].last_seen_ns > rec->counters.last_seen_ns)
			rec->counters.last_seen_ns = slot[cpu].last_seen_ns;
		if (slot[cpu].created_ns > rec->counters.created_ns)
			rec->counters.created_ns = slot[cpu].created_ns;
	}
	if (rec->counters.last_seen_ns < *since)
		return 0;
	bpf_seq_write(ctx->meta->seq, rec, sizeof(*rec));
	return 0;
}
#endif

char LICENSE[] SEC("license") = "Dual BSD/GPL";
