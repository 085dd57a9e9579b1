//! Map keys and values, byte for byte as `bpf/lachesis.h` declares them.
//!
//! Every struct derives `bytemuck::Pod`, which refuses to compile if the
//! layout has implicit padding, and the `const` block below pins each size
//! and offset to the numbers the C header asserts.

use bytemuck::{Pod, Zeroable};
use std::mem::{offset_of, size_of};

use crate::codes::{Direction, L4Class, UnknownCode, Zone};
use crate::mac::Mac;

/// Key of the `flows` map. The MACs are the frame's own (not swapped), so the
/// key reads like the wire; `eth_proto` is the inner ethertype in host order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Pod, Zeroable, Default)]
#[repr(C)]
pub struct FlowKey {
    /// Source MAC as on the wire.
    pub src_mac: [u8; 6],
    /// Destination MAC as on the wire.
    pub dst_mac: [u8; 6],
    /// Inner ethertype (after at most one VLAN tag), host byte order.
    pub eth_proto: u16,
    /// [`Direction`] code.
    pub direction: u8,
    /// [`Zone`] code.
    pub zone: u8,
    /// [`L4Class`] code.
    pub l4: u8,
    /// Always zero.
    pub pad: u8,
}

/// Size of [`FlowKey`] in bytes.
pub const FLOW_KEY_SIZE: usize = 18;

impl FlowKey {
    /// The VM's own MAC: the source when it sends, the destination when it receives.
    pub fn vm_mac(&self) -> Result<Mac, UnknownCode> {
        Ok(match self.direction()? {
            Direction::Tx => Mac(self.src_mac),
            Direction::Rx => Mac(self.dst_mac),
        })
    }

    /// The other MAC in the frame.
    pub fn peer_mac(&self) -> Result<Mac, UnknownCode> {
        Ok(match self.direction()? {
            Direction::Tx => Mac(self.dst_mac),
            Direction::Rx => Mac(self.src_mac),
        })
    }

    /// Decoded direction.
    pub fn direction(&self) -> Result<Direction, UnknownCode> {
        Direction::from_code(self.direction)
    }

    /// Decoded zone.
    pub fn zone(&self) -> Result<Zone, UnknownCode> {
        Zone::from_code(self.zone)
    }

    /// Decoded L4 class.
    pub fn l4(&self) -> Result<L4Class, UnknownCode> {
        L4Class::from_code(self.l4)
    }
}

/// Value of the `flows` map, one per possible CPU in the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable, Default)]
#[repr(C)]
pub struct FlowCounters {
    /// Sum of `skb->len` at the hook.
    pub bytes: u64,
    /// Number of skbs.
    pub packets: u64,
    /// Coarse monotonic time of the last packet.
    pub last_seen_ns: u64,
    /// Monotonic time the entry was created; stamped once (DESIGN §4.3).
    pub created_ns: u64,
}

/// Size of [`FlowCounters`] in bytes.
pub const FLOW_COUNTERS_SIZE: usize = 32;

impl FlowCounters {
    /// Folds another CPU's slot into this one: counters add, stamps take the
    /// maximum (only the creating CPU's slot carries `created_ns`).
    pub fn fold(&mut self, other: &FlowCounters) {
        self.bytes = self.bytes.wrapping_add(other.bytes);
        self.packets = self.packets.wrapping_add(other.packets);
        self.last_seen_ns = self.last_seen_ns.max(other.last_seen_ns);
        self.created_ns = self.created_ns.max(other.created_ns);
    }
}

/// Key of the `flows` map (DESIGN §4.7): a flow key and the CPU whose
/// sub-entry it is. Each CPU that counts a flow creates and writes only its
/// own sub-entry, so the kernel's adds need no atomics and an entry's
/// identity (§4.3) is per sub-entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Pod, Zeroable, Default)]
#[repr(C)]
pub struct EntryKey {
    /// The flow.
    pub key: FlowKey,
    /// The CPU that counted it (`bpf_get_smp_processor_id`), or
    /// [`FOLDED_CPU`].
    pub cpu: u16,
}

/// Size of [`EntryKey`] in bytes.
pub const ENTRY_KEY_SIZE: usize = 20;

/// The `cpu` of a reading that is not one CPU's sub-entry but a whole
/// per-CPU hash entry of the previous layout, its slots folded: what a
/// retired map of that layout, and a state file of schema 3 or older, hold.
/// No kernel numbers a CPU this high (`NR_CPUS` stops at 8 192).
pub const FOLDED_CPU: u16 = u16::MAX;

impl EntryKey {
    /// CPU `cpu`'s sub-entry of `key`.
    #[must_use]
    pub fn new(key: FlowKey, cpu: u16) -> EntryKey {
        EntryKey { key, cpu }
    }

    /// The folded entry of `key` in a per-CPU map of the previous layout.
    #[must_use]
    pub fn folded(key: FlowKey) -> EntryKey {
        EntryKey {
            key,
            cpu: FOLDED_CPU,
        }
    }

    /// Whether this is a folded per-CPU entry rather than one CPU's.
    #[must_use]
    pub fn is_folded(&self) -> bool {
        self.cpu == FOLDED_CPU
    }
}

impl From<FlowKey> for EntryKey {
    /// A bare flow key names the folded entry of a per-CPU map.
    fn from(key: FlowKey) -> EntryKey {
        EntryKey::folded(key)
    }
}

/// Value of the `flows` map (DESIGN §4.7): the counters and three reserved
/// words, always zero, so that a preallocated element (48-byte header,
/// 24-byte key slot, this) is exactly 128 bytes, two cache lines that no
/// other CPU's element shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable, Default)]
#[repr(C)]
pub struct FlowValue {
    /// This sub-entry's counters.
    pub counters: FlowCounters,
    /// Always zero.
    pub reserved: [u64; 3],
}

/// Size of [`FlowValue`] in bytes.
pub const FLOW_VALUE_SIZE: usize = 56;

/// What a zone verdict depends on (DESIGN §4.2): the key of one slot of
/// the classifier's per-CPU verdict cache. Both addresses are 16 bytes,
/// IPv4 as `::ffff:a.b.c.d`; `local` is the VM's, `remote` the other end's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable, Default)]
#[repr(C, align(8))]
pub struct VerdictKey {
    /// Source MAC as on the wire.
    pub src_mac: [u8; 6],
    /// Destination MAC as on the wire.
    pub dst_mac: [u8; 6],
    /// Inner ethertype, host byte order.
    pub eth_proto: u16,
    /// [`Direction`] code.
    pub direction: u8,
    /// Always zero.
    pub pad: u8,
    /// The VM's own address.
    pub local: [u8; 16],
    /// The remote address.
    pub remote: [u8; 16],
}

/// One slot of the `verdicts` per-CPU array (64 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable, Default)]
#[repr(C)]
pub struct VerdictSlot {
    /// The CPU's generation + 1 when the slot was filled (0: never).
    pub gen: u64,
    /// What the verdict was computed for.
    pub key: VerdictKey,
    /// [`Zone`] code.
    pub zone: u8,
    /// Always zero.
    pub pad: [u8; 3],
    /// `PREEMPT_RT` build only: odd while a fill is in progress.
    pub seq: u32,
}

/// One element of `verdict_gen` (index: CPU id), one cache line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable, Default)]
#[repr(C)]
pub struct VerdictGenLine {
    /// This CPU's generation.
    pub gen: u64,
    /// Always zero.
    pub pad: [u64; 7],
}

/// Value of the `tap_ports` map (key: the tap's ifindex, a u32): the MAC of
/// the Neutron port behind the tap. The classifier keys a group frame the
/// tap delivers (rx) by this MAC instead of the group destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable, Default)]
#[repr(C)]
pub struct TapPort {
    /// The port's MAC, wire order.
    pub mac: [u8; 6],
    /// Always zero.
    pub pad: [u8; 2],
}

impl TapPort {
    /// The value for `mac`.
    #[must_use]
    pub fn new(mac: Mac) -> TapPort {
        TapPort {
            mac: mac.0,
            pad: [0; 2],
        }
    }
}

/// One record of the map-element iterator drain (the `bench-cores`
/// variant built with `LACHESIS_FLOWS_ITER`): an entry's key and its
/// per-CPU slots folded in the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable, Default)]
#[repr(C)]
pub struct DrainRecord {
    /// The entry's key.
    pub key: FlowKey,
    /// Always zero.
    pub pad: [u8; 6],
    /// Its counters, folded like [`FlowCounters::fold`].
    pub counters: FlowCounters,
}

/// Bit 0 of [`EndpointValue::flags`]: the port is an amphora data port.
pub const ENDPOINT_FLAG_AMPHORA: u32 = 1;

/// Value of the `endpoints` map (key: the MAC as a u64, see [`Mac::to_u64`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable, Default)]
#[repr(C)]
pub struct EndpointValue {
    /// Interned tenant id (never 0 for a binding).
    pub tenant_id: u32,
    /// Flag bits, see [`ENDPOINT_FLAG_AMPHORA`].
    pub flags: u32,
}

/// Key of the `zones_v4` LPM trie. `prefixlen` counts the 32 tenant bits plus
/// the address bits; the address is in network byte order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable, Default)]
#[repr(C)]
pub struct ZoneKeyV4 {
    /// 32 + address prefix length.
    pub prefixlen: u32,
    /// Interned tenant id, 0 for global rows.
    pub tenant_id: u32,
    /// Address bytes, most significant first.
    pub addr: [u8; 4],
}

/// Key of the `zones_v6` LPM trie.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable, Default)]
#[repr(C)]
pub struct ZoneKeyV6 {
    /// 32 + address prefix length.
    pub prefixlen: u32,
    /// Interned tenant id, 0 for global rows.
    pub tenant_id: u32,
    /// Address bytes, most significant first.
    pub addr: [u8; 16],
}

/// Key of the `amphora_ips` hash; IPv4 addresses are stored as `::ffff:a.b.c.d`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable, Default)]
#[repr(C)]
pub struct AmphoraKey {
    /// Interned tenant id of the load balancer's owner.
    pub tenant_id: u32,
    /// Address bytes, most significant first.
    pub addr: [u8; 16],
}

// The numbers below are the ones `bpf/lachesis.h` asserts with _Static_assert.
const _: () = {
    assert!(size_of::<FlowKey>() == FLOW_KEY_SIZE);
    assert!(offset_of!(FlowKey, src_mac) == 0);
    assert!(offset_of!(FlowKey, dst_mac) == 6);
    assert!(offset_of!(FlowKey, eth_proto) == 12);
    assert!(offset_of!(FlowKey, direction) == 14);
    assert!(offset_of!(FlowKey, zone) == 15);
    assert!(offset_of!(FlowKey, l4) == 16);
    assert!(offset_of!(FlowKey, pad) == 17);

    assert!(size_of::<FlowCounters>() == FLOW_COUNTERS_SIZE);
    assert!(offset_of!(FlowCounters, bytes) == 0);
    assert!(offset_of!(FlowCounters, packets) == 8);
    assert!(offset_of!(FlowCounters, last_seen_ns) == 16);
    assert!(offset_of!(FlowCounters, created_ns) == 24);

    assert!(size_of::<EntryKey>() == ENTRY_KEY_SIZE);
    assert!(offset_of!(EntryKey, key) == 0);
    assert!(offset_of!(EntryKey, cpu) == 18);

    assert!(size_of::<FlowValue>() == FLOW_VALUE_SIZE);
    assert!(offset_of!(FlowValue, counters) == 0);
    assert!(offset_of!(FlowValue, reserved) == 32);

    assert!(size_of::<VerdictKey>() == 48);
    assert!(offset_of!(VerdictKey, src_mac) == 0);
    assert!(offset_of!(VerdictKey, dst_mac) == 6);
    assert!(offset_of!(VerdictKey, eth_proto) == 12);
    assert!(offset_of!(VerdictKey, direction) == 14);
    assert!(offset_of!(VerdictKey, pad) == 15);
    assert!(offset_of!(VerdictKey, local) == 16);
    assert!(offset_of!(VerdictKey, remote) == 32);

    assert!(size_of::<VerdictSlot>() == 64);
    assert!(offset_of!(VerdictSlot, gen) == 0);
    assert!(offset_of!(VerdictSlot, key) == 8);
    assert!(offset_of!(VerdictSlot, zone) == 56);
    assert!(offset_of!(VerdictSlot, pad) == 57);
    assert!(offset_of!(VerdictSlot, seq) == 60);

    assert!(size_of::<VerdictGenLine>() == 64);
    assert!(offset_of!(VerdictGenLine, gen) == 0);
    assert!(offset_of!(VerdictGenLine, pad) == 8);

    assert!(size_of::<TapPort>() == 8);
    assert!(offset_of!(TapPort, mac) == 0);
    assert!(offset_of!(TapPort, pad) == 6);

    assert!(size_of::<DrainRecord>() == 56);
    assert!(offset_of!(DrainRecord, key) == 0);
    assert!(offset_of!(DrainRecord, pad) == 18);
    assert!(offset_of!(DrainRecord, counters) == 24);

    assert!(size_of::<EndpointValue>() == 8);
    assert!(offset_of!(EndpointValue, tenant_id) == 0);
    assert!(offset_of!(EndpointValue, flags) == 4);

    assert!(size_of::<ZoneKeyV4>() == 12);
    assert!(offset_of!(ZoneKeyV4, prefixlen) == 0);
    assert!(offset_of!(ZoneKeyV4, tenant_id) == 4);
    assert!(offset_of!(ZoneKeyV4, addr) == 8);

    assert!(size_of::<ZoneKeyV6>() == 24);
    assert!(offset_of!(ZoneKeyV6, prefixlen) == 0);
    assert!(offset_of!(ZoneKeyV6, tenant_id) == 4);
    assert!(offset_of!(ZoneKeyV6, addr) == 8);

    assert!(size_of::<AmphoraKey>() == 20);
    assert!(offset_of!(AmphoraKey, tenant_id) == 0);
    assert!(offset_of!(AmphoraKey, addr) == 4);
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_key_bytes_read_like_the_wire() {
        let key = FlowKey {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            eth_proto: 0x0800,
            direction: Direction::Rx.code(),
            zone: Zone::Infra.code(),
            l4: L4Class::Udp.code(),
            pad: 0,
        };
        let bytes = bytemuck::bytes_of(&key);
        assert_eq!(&bytes[0..6], &[2, 0, 0, 0, 0, 1]);
        assert_eq!(&bytes[6..12], &[2, 0, 0, 0, 0, 2]);
        assert_eq!(&bytes[12..14], &0x0800u16.to_ne_bytes());
        assert_eq!(&bytes[14..18], &[1, 3, 2, 0]);
        assert_eq!(key.vm_mac().unwrap(), Mac([2, 0, 0, 0, 0, 2]));
        assert_eq!(key.peer_mac().unwrap(), Mac([2, 0, 0, 0, 0, 1]));
    }

    #[test]
    fn fold_sums_counters_and_keeps_latest_stamps() {
        let mut a = FlowCounters {
            bytes: 100,
            packets: 2,
            last_seen_ns: 50,
            created_ns: 10,
        };
        a.fold(&FlowCounters {
            bytes: 40,
            packets: 1,
            last_seen_ns: 70,
            created_ns: 0,
        });
        assert_eq!(
            a,
            FlowCounters {
                bytes: 140,
                packets: 3,
                last_seen_ns: 70,
                created_ns: 10
            }
        );
    }
}
