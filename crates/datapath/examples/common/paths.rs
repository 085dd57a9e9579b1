//! The classifier paths `make bench-packet`, `make bench-verdict` and
//! `make bench-cores` time: two frames (two flows) per path over the shared
//! test topology, and how the first two load and time a build.

use std::net::IpAddr;
use std::path::PathBuf;

use lachesis_abi::{Direction, Mac};
use lachesis_datapath::{AttachMode, Datapath, DatapathConfig, FlowsVariant};
use lachesis_lab::frame::{proto, Frame};

use super::topology::{ip, mac, populate, Net};

/// Test-runs of one frame per round in the repeated benchmark.
pub const REPEAT: u32 = 200_000;
/// Rounds of the repeated benchmark (its median is taken).
pub const ROUNDS: usize = 7;

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

/// `variant` loaded on a bpffs directory of its own (removed by the
/// caller), `flows` at 65 536 entries, the test topology written and the
/// test-run "tap" mapped to VM A's port.
pub fn load(variant: FlowsVariant) -> (Datapath, PathBuf, Net) {
    let dir = PathBuf::from(format!(
        "/sys/fs/bpf/lachesis-bench-{}-{}",
        variant.name(),
        std::process::id()
    ));
    let cfg = DatapathConfig {
        bpffs_dir: dir.clone(),
        flows_max_entries: Some(65_536),
        attach_mode: AttachMode::Auto,
        ..DatapathConfig::default()
    };
    let (dp, _, _) = Datapath::load_variant(&cfg, variant).expect("load the classifier");
    let net = populate(&dp);
    map_test_run_tap(&dp, &net);
    (dp, dir, net)
}

/// Medians of one program's three runs on a path, in ns per packet.
pub struct Modes {
    pub repeated: f64,
    pub alternating: f64,
    pub interleaved: f64,
}

impl Modes {
    /// Each mode as a ratio to `base`'s.
    pub fn over(&self, base: &Modes) -> (f64, f64, f64) {
        (
            self.repeated / base.repeated,
            self.alternating / base.alternating,
            self.interleaved / base.interleaved,
        )
    }
}

/// `run` (a frame, a repeat count → ns per packet) on `path`: its first
/// frame repeated ([`ROUNDS`] × [`REPEAT`]), its two frames alternating and
/// the `many` interleaved (`calls` single runs each). Every flow exists
/// and every verdict is cached first, so each measured run is a
/// steady-state one.
pub fn measure(
    run: &dyn Fn(&[u8], u32) -> f64,
    path: &Path,
    many: &[Vec<u8>],
    calls: usize,
) -> Modes {
    for f in many.iter().chain(path.frames.iter()) {
        run(f, 1);
    }
    Modes {
        repeated: median((0..ROUNDS).map(|_| run(&path.frames[0], REPEAT)).collect()),
        alternating: median((0..calls).map(|i| run(&path.frames[i % 2], 1)).collect()),
        interleaved: median((0..calls).map(|i| run(&many[i % many.len()], 1)).collect()),
    }
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
