//! The Rust ABI types against the types libbpf-cargo generated from the
//! compiled object's BTF: the C header and `lachesis-abi` must agree on every
//! size and field offset, or a drain would misread keys.

#[allow(
    warnings,
    clippy::all,
    clippy::pedantic,
    missing_debug_implementations,
    unsafe_op_in_unsafe_fn
)]
mod skel {
    include!(concat!(env!("OUT_DIR"), "/lachesis.skel.rs"));
}

use std::mem::{offset_of, size_of};

use lachesis_abi as abi;
use skel::types as btf;

macro_rules! same_layout {
    ($rust:ty, $c:ty, [$($field:ident),+]) => {{
        assert_eq!(size_of::<$rust>(), size_of::<$c>(), "size of {}", stringify!($rust));
        $(
            assert_eq!(
                offset_of!($rust, $field),
                offset_of!($c, $field),
                "offset of {}.{}",
                stringify!($rust),
                stringify!($field)
            );
        )+
    }};
}

#[test]
fn abi_types_match_the_object_btf() {
    same_layout!(
        abi::FlowKey,
        btf::flow_key,
        [src_mac, dst_mac, eth_proto, direction, zone, l4, pad]
    );
    same_layout!(
        abi::FlowCounters,
        btf::flow_counters,
        [bytes, packets, last_seen_ns, created_ns]
    );
    same_layout!(abi::EndpointValue, btf::endpoint_value, [tenant_id, flags]);
    same_layout!(
        abi::ZoneKeyV4,
        btf::zone_key_v4,
        [prefixlen, tenant_id, addr]
    );
    same_layout!(
        abi::ZoneKeyV6,
        btf::zone_key_v6,
        [prefixlen, tenant_id, addr]
    );
    same_layout!(abi::AmphoraKey, btf::amphora_key, [tenant_id, addr]);
}
