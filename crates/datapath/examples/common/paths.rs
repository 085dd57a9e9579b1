//! The classifier paths `make bench-packet` and `make bench-cores` time:
//! two frames (two flows) per path over the shared test topology.

use std::net::IpAddr;

use lachesis_abi::{Direction, Mac};
use lachesis_datapath::Datapath;
use lachesis_lab::frame::{proto, Frame};

use super::topology::{ip, mac, Net};

/// The tap ifindex a program test-run reports: the kernel runs the program
/// on its loopback device unless told otherwise.
pub const TEST_RUN_IFINDEX: u32 = 1;

pub struct Path {
    pub name: &'static str,
    pub dir: Direction,
    /// Two frames of the path belonging to different flows.
    pub frames: [Vec<u8>; 2],
    /// Needs both trie lookups (tenant row miss, then the global row).
    pub two_lookups: bool,
    /// The first frame, as built.
    pub frame0: Frame,
}

impl Path {
    /// Group frames bypass the verdict cache (DESIGN §4.2).
    pub fn bypasses_cache(&self) -> bool {
        self.name.starts_with("multicast")
    }
}

impl Path {
    /// DESIGN §16's ratio target against the one-lookup baseline.
    pub fn target(&self) -> f64 {
        if self.two_lookups {
            5.0
        } else {
            4.0
        }
    }
}

fn udp(src: Mac, dst: Mac, s: &str, d: &str) -> Frame {
    Frame::udp(src, dst, ip(s), ip(d))
}

/// Records VM A's port behind the test-run "tap", so the received
/// multicast path takes its `tap_ports` lookup as on a real tap.
pub fn map_test_run_tap(dp: &Datapath, n: &Net) {
    dp.set_tap_port(TEST_RUN_IFINDEX, n.a)
        .expect("write tap_ports");
}

pub fn paths(n: &Net) -> Vec<Path> {
    let p = |name, dir, a: Frame, b: Frame, two_lookups| Path {
        name,
        dir,
        frames: [a.bytes(), b.bytes()],
        two_lookups,
        frame0: a,
    };
    let tcp = |mut f: Frame| {
        f.proto = proto::TCP;
        f
    };
    let vlan = |mut f: Frame| {
        f.vlan = Some((0x8100, 42));
        f
    };
    let group = mac("01:00:5e:00:00:fb");
    vec![
        p(
            "l2-same",
            Direction::Tx,
            udp(n.a, n.a2, "10.1.0.10", "10.1.0.11"),
            tcp(udp(n.a, n.a2, "10.1.0.10", "10.1.0.11")),
            false,
        ),
        p(
            "l2-other",
            Direction::Rx,
            udp(n.b, n.a, "10.2.0.10", "10.1.0.10"),
            tcp(udp(n.b, n.a, "10.2.0.10", "10.1.0.10")),
            false,
        ),
        p(
            "routed-own",
            Direction::Tx,
            udp(n.a, n.router, "10.1.0.10", "10.1.0.77"),
            tcp(udp(n.a, n.router, "10.1.0.10", "10.1.0.78")),
            false,
        ),
        p(
            "routed-fallback",
            Direction::Tx,
            udp(n.a, n.router, "10.1.0.10", "100.64.3.3"),
            tcp(udp(n.a, n.router, "10.1.0.10", "100.64.3.4")),
            true,
        ),
        p(
            "catch-all",
            Direction::Rx,
            udp(n.router, n.a, "8.8.8.8", "10.1.0.10"),
            tcp(udp(n.router, n.a, "1.1.1.1", "10.1.0.10")),
            true,
        ),
        p(
            "miss",
            Direction::Tx,
            udp(n.unknown, n.router, "10.9.0.1", "8.8.8.8"),
            tcp(udp(n.unknown, n.router, "10.9.0.1", "8.8.8.8")),
            false,
        ),
        p(
            "multicast",
            Direction::Tx,
            udp(n.a, group, "10.1.0.10", "224.0.0.251"),
            tcp(udp(n.a, group, "10.1.0.10", "224.0.0.251")),
            false,
        ),
        p(
            "multicast-rx",
            Direction::Rx,
            udp(n.b, group, "10.2.0.10", "224.0.0.251"),
            tcp(udp(n.b, group, "10.2.0.10", "224.0.0.251")),
            false,
        ),
        p(
            "ipv6",
            Direction::Tx,
            udp(n.a, n.router, "2001:db8:1::10", "2001:4860::8888"),
            tcp(udp(n.a, n.router, "2001:db8:1::10", "2001:4860::8844")),
            true,
        ),
        p(
            "vlan",
            Direction::Tx,
            vlan(udp(n.a, n.router, "10.1.0.10", "10.1.0.77")),
            vlan(tcp(udp(n.a, n.router, "10.1.0.10", "10.1.0.77"))),
            false,
        ),
        p(
            "amphora",
            Direction::Tx,
            udp(n.amp, n.member, "10.3.0.5", "10.3.0.20"),
            tcp(udp(n.amp, n.member, "10.3.0.5", "10.3.0.20")),
            false,
        ),
    ]
}

/// The interleaved benchmark's flows: the path's first frame with `n`
/// remote addresses (the last byte 100, 101, …).
pub fn interleaved(path: &Path, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            with_remote(
                &path.frame0,
                path.dir,
                100 + u8::try_from(i).expect("at most 156 flows"),
            )
        })
        .collect()
}

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Frame `f` with its remote address's last byte set to `n`.
pub fn with_remote(f: &Frame, dir: Direction, n: u8) -> Vec<u8> {
    let mut f = f.clone();
    let remote = match dir {
        Direction::Tx => &mut f.dst_ip,
        Direction::Rx => &mut f.src_ip,
    };
    *remote = match *remote {
        IpAddr::V4(a) => {
            let mut o = a.octets();
            o[3] = n;
            IpAddr::from(o)
        }
        IpAddr::V6(a) => {
            let mut o = a.octets();
            o[15] = n;
            IpAddr::from(o)
        }
    };
    f.bytes()
}
