//! Network namespaces as VMs behind host-side veths named like taps.
//!
//! Topology: each VM is a namespace whose `eth0` is one end of a veth pair;
//! the other end (the "tap") stays in the caller's namespace, enslaved to a
//! per-lab bridge. IPv6 is disabled on every lab link and neighbours and
//! bridge forwarding entries are permanent and the bridge does no multicast
//! snooping (which would send IGMP reports), so the only frames on a tap are
//! the ones a test sends: interface counters are then exact ground truth.

use std::fs::File;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use lachesis_abi::Mac;

static SEQ: AtomicU32 = AtomicU32::new(0);

/// Runs a command to completion; `Err` names the command and carries its
/// standard error when it fails. Returns its standard output.
pub fn run(args: &[&str]) -> Result<String, String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{}: {e}", args.join(" ")))?;
    if !out.status.success() {
        return Err(format!(
            "`{}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Moves the calling thread (only it) into the named namespace
/// (`/run/netns/NAME`); threads and processes it starts afterwards are
/// born there.
pub fn enter(netns: &str) -> Result<(), String> {
    let path = format!("/run/netns/{netns}");
    let ns = File::open(&path).map_err(|e| format!("open {path}: {e}"))?;
    // SAFETY: a valid namespace fd; affects only the calling thread.
    let rc = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc != 0 {
        return Err(format!(
            "setns into {path}: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// Moves the calling thread (and the threads and processes it starts
/// afterwards) into a fresh network namespace with loopback up: a test's
/// or benchmark's own world, where its agent owns every program of ours
/// and its names and ports collide with nobody's.
///
/// # Panics
/// Not root, or the namespace cannot be made.
pub fn isolate() {
    crate::require_root_for("a network namespace of its own");
    // SAFETY: unshare(2) takes no pointers; CLONE_NEWNET moves only the
    // calling thread.
    let rc = unsafe { libc::unshare(libc::CLONE_NEWNET) };
    assert_eq!(rc, 0, "unshare: {}", std::io::Error::last_os_error());
    if let Err(e) = run(&["ip", "link", "set", "lo", "up"]) {
        panic!("{e}");
    }
}

/// Runs `f` on a new thread that has entered the named namespace.
pub fn spawn_in<T: Send + 'static>(
    netns: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    let netns = netns.to_owned();
    std::thread::spawn(move || {
        enter(&netns).unwrap_or_else(|e| panic!("{e}"));
        f()
    })
}

/// A network namespace held open by a file descriptor, so a caller in
/// another namespace can run code there (only the thread doing it moves)
/// and the namespace lives as long as the handle does, named or not.
#[derive(Debug)]
pub struct Netns(File);

impl Netns {
    /// The calling thread's namespace.
    ///
    /// # Panics
    /// `/proc/thread-self/ns/net` cannot be opened.
    #[must_use]
    pub fn current() -> Netns {
        let path = "/proc/thread-self/ns/net";
        Netns(File::open(path).unwrap_or_else(|e| panic!("open {path}: {e}")))
    }

    /// A fresh namespace with loopback up ([`isolate`]), made by a helper
    /// thread: the caller stays where it is.
    #[must_use]
    pub fn fresh() -> Netns {
        std::thread::spawn(|| {
            isolate();
            Netns::current()
        })
        .join()
        .expect("the thread making a namespace")
    }

    /// Runs `f` on a thread that entered this namespace, returning its
    /// result; processes it starts are born there.
    ///
    /// # Panics
    /// `setns` fails, or `f` panics.
    pub fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    // SAFETY: a valid namespace fd; affects only this thread.
                    let rc = unsafe { libc::setns(self.0.as_raw_fd(), libc::CLONE_NEWNET) };
                    assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
                    f()
                })
                .join()
                .unwrap_or_else(|e| std::panic::resume_unwind(e))
        })
    }
}

fn sh(args: &[&str]) {
    if let Err(e) = run(args) {
        panic!("lab setup: {e}");
    }
}

/// Bytes and packets per direction of one VM, as the VM sees them: what
/// its tap received the VM sent (`tx`), what the tap sent it received
/// (`rx`). The independent truth the kernel tests compare the agent with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VmTraffic {
    /// Bytes the VM sent.
    pub tx_bytes: u64,
    /// Packets the VM sent.
    pub tx_packets: u64,
    /// Bytes the VM received.
    pub rx_bytes: u64,
    /// Packets the VM received.
    pub rx_packets: u64,
}

impl VmTraffic {
    /// The tap's counters, turned around.
    #[must_use]
    pub fn from_tap(c: IfCounters) -> Self {
        VmTraffic {
            tx_bytes: c.rx_bytes,
            tx_packets: c.rx_packets,
            rx_bytes: c.tx_bytes,
            rx_packets: c.tx_packets,
        }
    }

    /// What was added since `earlier`.
    #[must_use]
    pub fn since(self, earlier: VmTraffic) -> Self {
        VmTraffic {
            tx_bytes: self.tx_bytes - earlier.tx_bytes,
            tx_packets: self.tx_packets - earlier.tx_packets,
            rx_bytes: self.rx_bytes - earlier.rx_bytes,
            rx_packets: self.rx_packets - earlier.rx_packets,
        }
    }
}

/// Interface counters of one link, read from sysfs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IfCounters {
    /// Bytes the interface received.
    pub rx_bytes: u64,
    /// Packets the interface received.
    pub rx_packets: u64,
    /// Bytes the interface sent.
    pub tx_bytes: u64,
    /// Packets the interface sent.
    pub tx_packets: u64,
}

impl IfCounters {
    /// Reads the counters of `name` in the calling thread's namespace from
    /// `/proc/thread-self/net/dev` (sysfs shows the namespace it was
    /// mounted in, not the thread's).
    pub fn read_here(name: &str) -> Result<IfCounters, String> {
        let text = std::fs::read_to_string("/proc/thread-self/net/dev")
            .map_err(|e| format!("read /proc/thread-self/net/dev: {e}"))?;
        let line = text
            .lines()
            .find_map(|l| l.trim().strip_prefix(&format!("{name}:")))
            .ok_or_else(|| format!("{name} is not in /proc/thread-self/net/dev"))?;
        let f: Vec<u64> = line
            .split_whitespace()
            .map(str::parse)
            .collect::<Result<_, _>>()
            .map_err(|e| format!("counters of {name}: {e}"))?;
        if f.len() < 10 {
            return Err(format!("counters of {name}: short line {line:?}"));
        }
        Ok(IfCounters {
            rx_bytes: f[0],
            rx_packets: f[1],
            tx_bytes: f[8],
            tx_packets: f[9],
        })
    }

    /// Reads `/sys/class/net/<name>/statistics` (caller's namespace).
    #[must_use]
    pub fn read(name: &str) -> IfCounters {
        let get = |f: &str| -> u64 {
            let p = format!("/sys/class/net/{name}/statistics/{f}");
            std::fs::read_to_string(&p)
                .unwrap_or_else(|e| panic!("read {p}: {e}"))
                .trim()
                .parse()
                .unwrap_or_else(|e| panic!("parse {p}: {e}"))
        };
        IfCounters {
            rx_bytes: get("rx_bytes"),
            rx_packets: get("rx_packets"),
            tx_bytes: get("tx_bytes"),
            tx_packets: get("tx_packets"),
        }
    }

    /// Counter growth since `earlier`.
    #[must_use]
    pub fn since(&self, earlier: &IfCounters) -> IfCounters {
        IfCounters {
            rx_bytes: self.rx_bytes - earlier.rx_bytes,
            rx_packets: self.rx_packets - earlier.rx_packets,
            tx_bytes: self.tx_bytes - earlier.tx_bytes,
            tx_packets: self.tx_packets - earlier.tx_packets,
        }
    }
}

/// A namespace playing a VM.
#[derive(Debug, Clone)]
pub struct Vm {
    /// Namespace name (under /run/netns).
    pub netns: String,
    /// Host-side interface name (`tap…`).
    pub tap: String,
    /// MAC of the VM's `eth0`.
    pub mac: Mac,
    /// IPv4 address of `eth0` (in a /24).
    pub ip: Ipv4Addr,
}

impl Vm {
    /// Runs `f` on a thread that has entered this VM's namespace (only that
    /// thread changes namespace), returning its result.
    pub fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> std::thread::JoinHandle<T> {
        spawn_in(&self.netns, f)
    }

    /// Runs a command inside the namespace and returns its status success.
    pub fn exec(&self, args: &[&str]) -> Result<(), String> {
        let mut full = vec!["ip", "netns", "exec", self.netns.as_str()];
        full.extend_from_slice(args);
        run(&full).map(drop)
    }

    /// Counters of the host-side tap.
    #[must_use]
    pub fn tap_counters(&self) -> IfCounters {
        IfCounters::read(&self.tap)
    }

    /// Sends `count` UDP datagrams of `len` payload bytes to the broadcast
    /// address of the VM's /24, then `count` to multicast `group` (TTL 1),
    /// 1 ms apart: group frames the bridge floods to every other tap. A
    /// route for 224.0.0.0/4 via `eth0` is put in place first (the lab's
    /// namespaces have no default route to pick an interface by).
    pub fn send_group_traffic(&self, group: Ipv4Addr, count: usize, len: usize) {
        assert!(group.is_multicast(), "{group} is not a multicast group");
        if let Err(e) = self.exec(&["ip", "route", "replace", "224.0.0.0/4", "dev", "eth0"]) {
            panic!("lab: {e}");
        }
        let [a, b, c, _] = self.ip.octets();
        let broadcast = Ipv4Addr::new(a, b, c, 255);
        let ip = self.ip;
        self.run(move || {
            let sock = std::net::UdpSocket::bind((ip, 0)).expect("bind");
            sock.set_broadcast(true).expect("SO_BROADCAST");
            sock.set_multicast_ttl_v4(1).expect("IP_MULTICAST_TTL");
            let payload = vec![0x5a; len];
            for to in [broadcast, group] {
                for _ in 0..count {
                    sock.send_to(&payload, (to, 9)).expect("send");
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
        })
        .join()
        .expect("group sender");
    }
}

/// A set of namespaces and links with unique names, removed on drop.
#[derive(Debug)]
pub struct Lab {
    id: String,
    bridge: String,
    vms: Vec<Vm>,
    /// VMs ever added: names stay unique after [`Lab::remove_vm`].
    added: usize,
}

impl Lab {
    /// Creates the lab's bridge. Names use the process id and a counter so
    /// parallel tests and runs never collide.
    #[must_use]
    pub fn new() -> Lab {
        crate::require_root();
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let id = format!("{:x}{:x}", std::process::id() & 0xfffff, n);
        let bridge = format!("lcb{id}");
        assert!(bridge.len() <= 15, "interface name too long: {bridge}");
        // Without snooping the bridge joins no group of its own (snooping
        // joins 224.0.0.106 and sends IGMP reports through every tap).
        sh(&[
            "ip",
            "link",
            "add",
            &bridge,
            "type",
            "bridge",
            "mcast_snooping",
            "0",
        ]);
        let lab = Lab {
            id,
            bridge,
            vms: Vec::new(),
            added: 0,
        };
        sh(&[
            "sysctl",
            "-q",
            "-w",
            &format!("net.ipv6.conf.{}.disable_ipv6=1", lab.bridge),
        ]);
        sh(&["ip", "link", "set", &lab.bridge, "up"]);
        lab
    }

    /// This lab's unique id (used in names).
    #[must_use]
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Adds a VM with host-side tap `tap<lab id>v<index>` on the bridge.
    pub fn add_vm(&mut self, mac: Mac, ip: Ipv4Addr) -> Vm {
        let tap = format!("tap{}v{}", self.id, self.added);
        self.add_vm_with_tap(&tap, mac, ip)
    }

    /// [`Lab::add_vm`] with the host-side tap named `tap` (e.g. the name
    /// Nova gives a port's tap). Names are per network namespace: a caller
    /// choosing its own runs in a namespace of its own, or picks unique ones.
    pub fn add_vm_with_tap(&mut self, tap: &str, mac: Mac, ip: Ipv4Addr) -> Vm {
        let idx = self.added;
        self.added += 1;
        let tap = tap.to_owned();
        assert!(tap.len() <= 15, "interface name too long: {tap}");
        let netns = format!("lachesis-{}-{idx}", self.id);
        sh(&["ip", "netns", "add", &netns]);
        let vm = Vm {
            netns: netns.clone(),
            tap: tap.clone(),
            mac,
            ip,
        };
        self.vms.push(vm.clone());
        // Before any link exists in the namespace, so eth0 never speaks IPv6.
        for key in ["all", "default"] {
            sh(&[
                "ip",
                "netns",
                "exec",
                &netns,
                "sysctl",
                "-q",
                "-w",
                &format!("net.ipv6.conf.{key}.disable_ipv6=1"),
            ]);
        }
        sh(&[
            "ip", "link", "add", &tap, "type", "veth", "peer", "name", "eth0", "netns", &netns,
        ]);
        sh(&[
            "sysctl",
            "-q",
            "-w",
            &format!("net.ipv6.conf.{tap}.disable_ipv6=1"),
        ]);
        sh(&[
            "ip",
            "-n",
            &netns,
            "link",
            "set",
            "eth0",
            "address",
            &mac.to_string(),
        ]);
        sh(&[
            "ip",
            "-n",
            &netns,
            "addr",
            "add",
            &format!("{ip}/24"),
            "dev",
            "eth0",
        ]);
        sh(&["ip", "-n", &netns, "link", "set", "lo", "up"]);
        sh(&["ip", "link", "set", &tap, "master", &self.bridge]);
        sh(&[
            "bridge",
            "fdb",
            "add",
            &mac.to_string(),
            "dev",
            &tap,
            "master",
            "static",
        ]);
        sh(&["ip", "link", "set", &tap, "up"]);
        sh(&["ip", "-n", &netns, "link", "set", "eth0", "up"]);
        vm
    }

    /// Makes every VM know every other VM's MAC permanently (no ARP).
    pub fn static_neighbours(&self) {
        for a in &self.vms {
            for b in &self.vms {
                if a.netns != b.netns {
                    sh(&[
                        "ip",
                        "-n",
                        &a.netns,
                        "neigh",
                        "replace",
                        &b.ip.to_string(),
                        "lladdr",
                        &b.mac.to_string(),
                        "dev",
                        "eth0",
                        "nud",
                        "permanent",
                    ]);
                }
            }
        }
    }

    /// Removes the VM whose host-side tap is `tap`, as a VM's deletion does:
    /// its namespace, and with it the veth pair and the tap. The caller
    /// reads the tap's counters first if it needs them; they go with it.
    ///
    /// # Panics
    /// No VM of this lab has that tap, or the namespace cannot be deleted.
    pub fn remove_vm(&mut self, tap: &str) {
        let at = self
            .vms
            .iter()
            .position(|vm| vm.tap == tap)
            .unwrap_or_else(|| panic!("lab: no VM with tap {tap}"));
        let vm = self.vms.remove(at);
        sh(&["ip", "netns", "del", &vm.netns]);
        // Gone with its peer; a leftover (never expected) is removed too.
        let _ = run(&["ip", "link", "del", &vm.tap]);
    }

    /// The VMs added so far.
    #[must_use]
    pub fn vms(&self) -> &[Vm] {
        &self.vms
    }
}

impl Default for Lab {
    fn default() -> Self {
        Lab::new()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        // Deleting a namespace deletes its veth end and so the host-side tap.
        for vm in &self.vms {
            let _ = run(&["ip", "netns", "del", &vm.netns]);
            let _ = run(&["ip", "link", "del", &vm.tap]);
        }
        let _ = run(&["ip", "link", "del", &self.bridge]);
    }
}
