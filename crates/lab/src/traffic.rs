//! Traffic of known shape between two lab VMs, and the wait that makes
//! the taps' interface counters a fixed truth to compare with.
//!
//! ```no_run
//! # use lachesis_lab::{netns::Lab, traffic::Exchange};
//! # let mut lab = Lab::new();
//! # let a = lab.add_vm("02:00:00:00:00:01".parse().unwrap(), [10, 77, 0, 1].into());
//! # let b = lab.add_vm("02:00:00:00:00:02".parse().unwrap(), [10, 77, 0, 2].into());
//! Exchange::between(&a, &b)
//!     .ping(5, 1000)
//!     .ping_back(3, 56)
//!     .tcp(41_000, 512 * 1024, 128 * 1024)
//!     .run();
//! ```

use std::io::{Read as _, Write as _};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::time::Duration;

use crate::netns::{IfCounters, Vm};

/// One step of an [`Exchange`].
#[derive(Debug, Clone, Copy)]
enum Step {
    /// `count` pings of `size` payload bytes, 10 ms apart, from A to B
    /// (`back`: from B to A).
    Ping { back: bool, count: u32, size: u32 },
    /// `count` UDP datagrams of `size` bytes from A to B's `port`, paced
    /// 1 ms apart.
    Udp { port: u16, count: u32, size: usize },
    /// A TCP connection from A to B's `port`: A sends `up` bytes and
    /// closes its side, B answers `down` bytes.
    Tcp { port: u16, up: usize, down: usize },
    /// Broadcast and multicast datagrams from A (`back`: from B) to
    /// `group`, [`Vm::send_group_traffic`].
    Groups {
        back: bool,
        group: Ipv4Addr,
        count: usize,
        len: usize,
    },
}

/// A sequence of exchanges between VM A and VM B, run in order; each
/// checks that every byte arrived, and [`Exchange::run`] returns once the
/// taps' counters stopped moving.
#[derive(Debug, Clone)]
pub struct Exchange<'a> {
    a: &'a Vm,
    b: &'a Vm,
    steps: Vec<Step>,
}

impl<'a> Exchange<'a> {
    /// Nothing yet between `a` and `b`.
    #[must_use]
    pub fn between(a: &'a Vm, b: &'a Vm) -> Self {
        Exchange {
            a,
            b,
            steps: Vec::new(),
        }
    }

    /// `count` pings of `size` payload bytes from A to B.
    #[must_use]
    pub fn ping(mut self, count: u32, size: u32) -> Self {
        self.steps.push(Step::Ping {
            back: false,
            count,
            size,
        });
        self
    }

    /// `count` pings of `size` payload bytes from B to A.
    #[must_use]
    pub fn ping_back(mut self, count: u32, size: u32) -> Self {
        self.steps.push(Step::Ping {
            back: true,
            count,
            size,
        });
        self
    }

    /// `count` UDP datagrams of `size` bytes from A to B's `port`.
    #[must_use]
    pub fn udp(mut self, port: u16, count: u32, size: usize) -> Self {
        self.steps.push(Step::Udp { port, count, size });
        self
    }

    /// A TCP exchange on B's `port`: `up` bytes from A, `down` back.
    #[must_use]
    pub fn tcp(mut self, port: u16, up: usize, down: usize) -> Self {
        self.steps.push(Step::Tcp { port, up, down });
        self
    }

    /// `count` broadcast then `count` multicast datagrams of `len` bytes
    /// from A to `group`.
    #[must_use]
    pub fn groups(mut self, group: Ipv4Addr, count: usize, len: usize) -> Self {
        self.steps.push(Step::Groups {
            back: false,
            group,
            count,
            len,
        });
        self
    }

    /// [`Exchange::groups`] from B.
    #[must_use]
    pub fn groups_back(mut self, group: Ipv4Addr, count: usize, len: usize) -> Self {
        self.steps.push(Step::Groups {
            back: true,
            group,
            count,
            len,
        });
        self
    }

    /// Runs every step, then waits for the taps to fall quiet
    /// ([`wait_quiet`]): the last ACKs and FINs cross before anyone reads
    /// counters.
    ///
    /// # Panics
    /// A step fails or loses bytes, or the counters never settle.
    pub fn run(self) {
        let (a, b) = (self.a, self.b);
        for step in &self.steps {
            match *step {
                Step::Ping { back, count, size } => {
                    let (from, to) = if back { (b, a) } else { (a, b) };
                    ping(from, to, count, size);
                }
                Step::Udp { port, count, size } => udp(a, b, port, count, size),
                Step::Tcp { port, up, down } => tcp(a, b, port, up, down),
                Step::Groups {
                    back,
                    group,
                    count,
                    len,
                } => {
                    let from = if back { b } else { a };
                    from.send_group_traffic(group, count, len);
                }
            }
        }
        wait_quiet(&[a, b]);
    }
}

fn ping(from: &Vm, to: &Vm, count: u32, size: u32) {
    let (count, size, to) = (count.to_string(), size.to_string(), to.ip.to_string());
    from.exec(&["ping", "-q", "-c", &count, "-i", "0.01", "-s", &size, &to])
        .unwrap_or_else(|e| panic!("{e}"));
}

fn udp(a: &Vm, b: &Vm, port: u16, count: u32, size: usize) {
    let to = SocketAddr::from((b.ip, port));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let server = b.run(move || {
        let udp = UdpSocket::bind(to).unwrap();
        udp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        ready_tx.send(()).unwrap();
        let mut got = 0usize;
        let mut buf = vec![0u8; size.max(1) + 1];
        for _ in 0..count {
            got += udp.recv(&mut buf).unwrap();
        }
        got
    });
    ready_rx.recv().unwrap();
    a.run(move || {
        let udp = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).unwrap();
        for _ in 0..count {
            udp.send_to(&vec![1u8; size], to).unwrap();
            // Pacing, not waiting: a burst could overrun the receiver.
            std::thread::sleep(Duration::from_millis(1));
        }
    })
    .join()
    .unwrap();
    assert_eq!(
        server.join().unwrap(),
        count as usize * size,
        "UDP bytes received"
    );
}

fn tcp(a: &Vm, b: &Vm, port: u16, up: usize, down: usize) {
    let addr = SocketAddr::from((b.ip, port));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let server = b.run(move || {
        let l = TcpListener::bind(addr).unwrap();
        ready_tx.send(()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        let mut data = Vec::new();
        s.read_to_end(&mut data).unwrap();
        s.write_all(&vec![7u8; down]).unwrap();
        data.len()
    });
    ready_rx.recv().unwrap();
    let client = a.run(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(&vec![9u8; up]).unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let mut back = Vec::new();
        s.read_to_end(&mut back).unwrap();
        back.len()
    });
    assert_eq!(client.join().unwrap(), down, "TCP bytes back");
    assert_eq!(server.join().unwrap(), up, "TCP bytes up");
}

/// A tap's counters from the calling thread's namespace
/// (`/proc/thread-self`; sysfs shows the namespace it was mounted in).
///
/// # Panics
/// No such tap here.
#[must_use]
pub fn counters(vm: &Vm) -> IfCounters {
    IfCounters::read_here(&vm.tap).unwrap_or_else(|e| panic!("{e}"))
}

/// Returns once the taps' interface counters stopped moving (unchanged
/// over three polls 50 ms apart): the traffic's stragglers have crossed.
///
/// # Panics
/// They still move after 10 s.
pub fn wait_quiet(vms: &[&Vm]) {
    let mut last: Vec<IfCounters> = vms.iter().map(|v| counters(v)).collect();
    let mut still = 0;
    for _ in 0..200 {
        std::thread::sleep(Duration::from_millis(50));
        let now: Vec<IfCounters> = vms.iter().map(|v| counters(v)).collect();
        still = if now == last { still + 1 } else { 0 };
        if still == 3 {
            return;
        }
        last = now;
    }
    panic!("interface counters never stopped moving");
}
