/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Kernel ABI of the Lachesis classifier (DESIGN §3, §4.1).
 *
 * crates/abi mirrors every struct here and asserts the same sizes and
 * offsets; the datapath crate's tests compare both against the BTF of the
 * compiled object. Codes are persisted: never renumber.
 */
#ifndef LACHESIS_H
#define LACHESIS_H

#include <linux/types.h>

/* Zones (DESIGN §3). */
#define ZONE_EXTERNAL 0
#define ZONE_SAME_TENANT 1
#define ZONE_OTHER_TENANT 2
#define ZONE_INFRA 3
#define ZONE_MISS 4
#define ZONE_SHARED 5
#define ZONE_MULTICAST 6

/* Directions, from the VM's point of view. */
#define DIR_TX 0 /* the VM sends: tap ingress hook */
#define DIR_RX 1 /* the VM receives: tap egress hook */

/* L4 classes. 0 is reserved for rows restored from an older format. */
#define L4_TCP 1
#define L4_UDP 2
#define L4_ICMP 3
#define L4_OTHER 4

/* Slots of the stats array. */
#define STAT_UPDATE_FAILURE 0
#define STAT_SKIPPED_ETHERTYPE 1
#define STAT_VLAN 2
#define STAT_TRUNCATED 3
#define STAT_VERDICT_HIT 4  /* the zone came from the verdict cache */
#define STAT_VERDICT_MISS 5 /* the cache was asked and the zone computed */
#define STAT_COUNT 6

/* endpoint_value.flags */
#define ENDPOINT_FLAG_AMPHORA 1u

/* Verdict cache slots per CPU (DESIGN §4.2; a power of two, 0: no cache). */
#ifndef LACHESIS_VERDICT_SLOTS
#define LACHESIS_VERDICT_SLOTS 256
#endif

/* Compile-time default; userspace sizes the map from a memory budget. */
#define FLOWS_DEFAULT_ENTRIES 65536
#define TAP_PORTS_ENTRIES 16384

struct flow_key {
	__u8 src_mac[6];  /* frame's own source MAC (not swapped) */
	__u8 dst_mac[6];  /* frame's own destination MAC */
	__u16 eth_proto;  /* inner ethertype, host order */
	__u8 direction;   /* DIR_* */
	__u8 zone;        /* ZONE_* */
	__u8 l4;          /* L4_* */
	__u8 pad;         /* always 0 */
};

struct flow_counters {
	__u64 bytes;
	__u64 packets;
	__u64 last_seen_ns; /* coarse clock */
	__u64 created_ns;   /* stamped once, at creation (DESIGN §4.3) */
};

/* Key of `flows` (DESIGN §4.7): one sub-entry per CPU that counts a flow,
 * created and written only by that CPU. */
struct flow_entry_key {
	struct flow_key key;
	__u16 cpu; /* bpf_get_smp_processor_id() */
};

/* Value of `flows`: the counters and three reserved words (always 0), so a
 * preallocated element (48-byte header + 24-byte key slot + this) is
 * exactly 128 bytes and never shares a cache line with another CPU's. */
struct flow_value {
	struct flow_counters counters;
	__u64 reserved[3];
};

/* What a zone verdict depends on (DESIGN §4.2): the frame's MACs, inner
 * ethertype and direction, and both addresses in 16-byte form (IPv4 as
 * ::ffff:a.b.c.d); the local one because the amphora rule reads it. */
struct verdict_key {
	__u8 src_mac[6];
	__u8 dst_mac[6];
	__u16 eth_proto;
	__u8 direction;
	__u8 pad; /* always 0 */
	__u8 local[16];
	__u8 remote[16];
} __attribute__((aligned(8)));

/* One slot of `verdicts` (per CPU, 64 bytes). Valid only while `gen` is
 * this CPU's generation + 1 (0: never filled). `seq` is used by the
 * PREEMPT_RT build only: odd while a writer is filling the slot. */
struct verdict_slot {
	__u64 gen;
	struct verdict_key key;
	__u8 zone;
	__u8 pad[3];
	__u32 seq;
};

/* One element of `verdict_gen` (index: CPU id), a cache line each: the
 * generation userspace bumps after every write to a map a verdict reads. */
struct verdict_gen_line {
	__u64 gen;
	__u64 pad[7];
};

/* Value of `tap_ports` (key: the tap's ifindex, u32). */
struct tap_port {
	__u8 mac[6]; /* the Neutron port's MAC, wire order */
	__u8 pad[2]; /* always 0 */
};

/* One record of the iterator drain (benchmark variant): an entry's key and
 * its per-CPU slots folded like userspace folds them. */
struct drain_record {
	struct flow_key key;
	__u8 pad[6];
	struct flow_counters counters;
};

struct endpoint_value {
	__u32 tenant_id;
	__u32 flags;
};

struct zone_key_v4 {
	__u32 prefixlen; /* 32 tenant bits + address bits */
	__u32 tenant_id; /* host order, matched exactly; 0 = global */
	__u8 addr[4];    /* network order */
};

struct zone_key_v6 {
	__u32 prefixlen;
	__u32 tenant_id;
	__u8 addr[16];
};

struct amphora_key {
	__u32 tenant_id;
	__u8 addr[16]; /* IPv4 as ::ffff:a.b.c.d */
};

#define LACHESIS_ASSERT_LAYOUT(type, field, off) \
	_Static_assert(__builtin_offsetof(struct type, field) == (off), #type "." #field)

_Static_assert(sizeof(struct flow_key) == 18, "flow_key size");
LACHESIS_ASSERT_LAYOUT(flow_key, src_mac, 0);
LACHESIS_ASSERT_LAYOUT(flow_key, dst_mac, 6);
LACHESIS_ASSERT_LAYOUT(flow_key, eth_proto, 12);
LACHESIS_ASSERT_LAYOUT(flow_key, direction, 14);
LACHESIS_ASSERT_LAYOUT(flow_key, zone, 15);
LACHESIS_ASSERT_LAYOUT(flow_key, l4, 16);
LACHESIS_ASSERT_LAYOUT(flow_key, pad, 17);
_Static_assert(sizeof(struct flow_counters) == 32, "flow_counters size");
LACHESIS_ASSERT_LAYOUT(flow_counters, bytes, 0);
LACHESIS_ASSERT_LAYOUT(flow_counters, packets, 8);
LACHESIS_ASSERT_LAYOUT(flow_counters, last_seen_ns, 16);
LACHESIS_ASSERT_LAYOUT(flow_counters, created_ns, 24);
_Static_assert(sizeof(struct flow_entry_key) == 20, "flow_entry_key size");
LACHESIS_ASSERT_LAYOUT(flow_entry_key, key, 0);
LACHESIS_ASSERT_LAYOUT(flow_entry_key, cpu, 18);
_Static_assert(sizeof(struct flow_value) == 56, "flow_value size");
LACHESIS_ASSERT_LAYOUT(flow_value, counters, 0);
LACHESIS_ASSERT_LAYOUT(flow_value, reserved, 32);
_Static_assert(sizeof(struct verdict_key) == 48, "verdict_key size");
LACHESIS_ASSERT_LAYOUT(verdict_key, src_mac, 0);
LACHESIS_ASSERT_LAYOUT(verdict_key, dst_mac, 6);
LACHESIS_ASSERT_LAYOUT(verdict_key, eth_proto, 12);
LACHESIS_ASSERT_LAYOUT(verdict_key, direction, 14);
LACHESIS_ASSERT_LAYOUT(verdict_key, pad, 15);
LACHESIS_ASSERT_LAYOUT(verdict_key, local, 16);
LACHESIS_ASSERT_LAYOUT(verdict_key, remote, 32);
_Static_assert(sizeof(struct verdict_slot) == 64, "verdict_slot size");
LACHESIS_ASSERT_LAYOUT(verdict_slot, gen, 0);
LACHESIS_ASSERT_LAYOUT(verdict_slot, key, 8);
LACHESIS_ASSERT_LAYOUT(verdict_slot, zone, 56);
LACHESIS_ASSERT_LAYOUT(verdict_slot, pad, 57);
LACHESIS_ASSERT_LAYOUT(verdict_slot, seq, 60);
_Static_assert(sizeof(struct verdict_gen_line) == 64, "verdict_gen_line size");
LACHESIS_ASSERT_LAYOUT(verdict_gen_line, gen, 0);
LACHESIS_ASSERT_LAYOUT(verdict_gen_line, pad, 8);
_Static_assert(sizeof(struct tap_port) == 8, "tap_port size");
LACHESIS_ASSERT_LAYOUT(tap_port, mac, 0);
LACHESIS_ASSERT_LAYOUT(tap_port, pad, 6);
_Static_assert(sizeof(struct drain_record) == 56, "drain_record size");
LACHESIS_ASSERT_LAYOUT(drain_record, key, 0);
LACHESIS_ASSERT_LAYOUT(drain_record, pad, 18);
LACHESIS_ASSERT_LAYOUT(drain_record, counters, 24);
_Static_assert(sizeof(struct endpoint_value) == 8, "endpoint_value size");
LACHESIS_ASSERT_LAYOUT(endpoint_value, tenant_id, 0);
LACHESIS_ASSERT_LAYOUT(endpoint_value, flags, 4);
_Static_assert(sizeof(struct zone_key_v4) == 12, "zone_key_v4 size");
LACHESIS_ASSERT_LAYOUT(zone_key_v4, prefixlen, 0);
LACHESIS_ASSERT_LAYOUT(zone_key_v4, tenant_id, 4);
LACHESIS_ASSERT_LAYOUT(zone_key_v4, addr, 8);
_Static_assert(sizeof(struct zone_key_v6) == 24, "zone_key_v6 size");
LACHESIS_ASSERT_LAYOUT(zone_key_v6, prefixlen, 0);
LACHESIS_ASSERT_LAYOUT(zone_key_v6, tenant_id, 4);
LACHESIS_ASSERT_LAYOUT(zone_key_v6, addr, 8);
_Static_assert(sizeof(struct amphora_key) == 20, "amphora_key size");
LACHESIS_ASSERT_LAYOUT(amphora_key, tenant_id, 0);
LACHESIS_ASSERT_LAYOUT(amphora_key, addr, 4);

#endif /* LACHESIS_H */
