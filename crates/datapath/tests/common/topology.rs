//! The test topology shared by the classifier tests and the per-packet
//! benchmark: three tenants, a router MAC, an amphora and its member.

use std::net::IpAddr;

use lachesis_abi::{EndpointValue, Mac, Zone, ENDPOINT_FLAG_AMPHORA};
use lachesis_datapath::Datapath;

pub const T1: u32 = 1;
pub const T2: u32 = 2;
pub const T3: u32 = 3; // load-balancer owner

pub fn mac(s: &str) -> Mac {
    s.parse().unwrap()
}
pub fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

pub struct Net {
    pub a: Mac,       // T1 VM, 10.1.0.10, 2001:db8:1::10
    pub a2: Mac,      // T1 VM, 10.1.0.11
    pub b: Mac,       // T2 VM, 10.2.0.10
    pub router: Mac,  // router port: never in endpoints
    pub unknown: Mac, // not bound
    pub amp: Mac,     // T3 amphora data port, 10.3.0.5 (flagged)
    pub member: Mac,  // T3 pool member, 10.3.0.20
}

pub fn populate(dp: &Datapath) -> Net {
    let n = Net {
        a: mac("02:00:00:00:01:0a"),
        a2: mac("02:00:00:00:01:0b"),
        b: mac("02:00:00:00:02:0a"),
        router: mac("fa:16:3e:00:00:01"),
        unknown: mac("02:00:00:00:09:99"),
        amp: mac("02:00:00:00:03:05"),
        member: mac("02:00:00:00:03:20"),
    };
    let ep = |m: Mac, t: u32, flags: u32| {
        dp.upsert_endpoint(
            m,
            EndpointValue {
                tenant_id: t,
                flags,
            },
        )
        .unwrap();
    };
    ep(n.a, T1, 0);
    ep(n.a2, T1, 0);
    ep(n.b, T2, 0);
    ep(n.amp, T3, ENDPOINT_FLAG_AMPHORA);
    ep(n.member, T3, 0);
    let row = |t: u32, p: &str, z: Zone| dp.upsert_zone(t, p.parse().unwrap(), z).unwrap();
    // Global rows.
    row(0, "0.0.0.0/0", Zone::External);
    row(0, "::/0", Zone::External);
    row(0, "100.64.0.0/16", Zone::Shared);
    row(0, "10.1.0.1/32", Zone::Infra);
    row(0, "169.254.169.254/32", Zone::Infra);
    row(0, "2001:db8:ffff::/48", Zone::Shared);
    // T1: owned subnet, its gateway, a static route, a router neighbour, IPv6.
    row(T1, "10.1.0.0/24", Zone::SameTenant);
    row(T1, "10.1.0.1/32", Zone::Infra);
    row(T1, "172.16.0.0/16", Zone::OtherTenant);
    row(T1, "10.2.0.0/24", Zone::OtherTenant);
    row(T1, "2001:db8:1::/64", Zone::SameTenant);
    row(T1, "2001:db8:2::/64", Zone::OtherTenant);
    row(T3, "10.3.0.0/24", Zone::SameTenant);
    dp.upsert_amphora(T3, ip("10.3.0.5")).unwrap();
    n
}
