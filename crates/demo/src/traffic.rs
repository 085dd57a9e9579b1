//! Traffic of every zone between the demo's hosts: long-lived client
//! threads (each inside its host's namespace) that open a TCP connection,
//! send a burst, read a smaller answer and close, over and over; sinks
//! that answer a quarter of what they read; the load balancer's amphora
//! relaying to its members; one multicast sender.
//!
//! Flows can be paused (by host or by name) so a scenario step can change
//! the cloud while the taps are quiet: the counters then split exactly
//! into "before" and "after".

use std::collections::BTreeSet;
use std::io::{Read as _, Write as _};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use socket2::{Domain, Socket, Type};

/// How a flow talks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Connect, send `size` bytes, read the answer, close.
    Tcp,
    /// One UDP datagram of `size` bytes to a group address.
    Multicast,
}

/// One stream of exchanges.
#[derive(Debug, Clone, Copy)]
pub struct Flow {
    /// Shown in the view and in errors.
    pub name: &'static str,
    /// The host it starts from.
    pub from: &'static str,
    /// Source address to bind (the internet's own hosts), else the kernel's choice.
    pub source: Option<&'static str>,
    /// Destination.
    pub to: &'static str,
    /// Other hosts whose taps it crosses (pausing any of them pauses it).
    pub touches: &'static [&'static str],
    /// How it talks.
    pub kind: Kind,
    /// Bytes sent per exchange.
    pub size: usize,
    /// Pause between exchanges.
    pub period_ms: u64,
    /// The zone the sender's tap sees (documentation; the view shows the truth).
    #[cfg_attr(
        not(test),
        expect(
            dead_code,
            reason = "documents each flow; a test holds every zone exercised"
        )
    )]
    pub zone: &'static str,
}

const fn tcp(
    name: &'static str,
    from: &'static str,
    to: &'static str,
    touches: &'static [&'static str],
    size: usize,
    period_ms: u64,
    zone: &'static str,
) -> Flow {
    Flow {
        name,
        from,
        source: None,
        to,
        touches,
        kind: Kind::Tcp,
        size,
        period_ms,
        zone,
    }
}

/// Every flow of the bundled topology (docs/demo.md explains each).
pub const FLOWS: &[Flow] = &[
    tcp(
        "web→db",
        "a-web",
        "10.1.0.6:9000",
        &["a-db"],
        24_000,
        300,
        "same_tenant",
    ),
    tcp(
        "web→db v6",
        "a-web",
        "[2001:db8:a::6]:9006",
        &["a-db"],
        16_000,
        500,
        "same_tenant",
    ),
    tcp(
        "db→mirror",
        "a-db",
        "10.50.0.40:9000",
        &["mirror"],
        40_000,
        700,
        "shared",
    ),
    tcp(
        "app2→mirror",
        "b-app2",
        "10.50.0.40:9000",
        &["mirror"],
        30_000,
        900,
        "shared",
    ),
    tcp(
        "web→b-app",
        "a-web",
        "10.2.0.5:9000",
        &["b-app"],
        20_000,
        400,
        "other_tenant",
    ),
    tcp(
        "web→internet",
        "a-web",
        "198.51.100.7:9000",
        &[],
        32_000,
        350,
        "external",
    ),
    tcp(
        "db→internet v6",
        "a-db",
        "[2001:db8:ffff::7]:9006",
        &[],
        12_000,
        600,
        "external",
    ),
    Flow {
        source: Some("198.51.100.8"),
        ..tcp(
            "internet→web fip",
            "internet",
            "203.0.113.21:9000",
            &["a-web"],
            8_000,
            450,
            "external",
        )
    },
    Flow {
        source: Some("198.51.100.8"),
        ..tcp(
            "internet→lb",
            "internet",
            "203.0.113.22:80",
            &["amphora-lb-acme", "a-web", "a-db"],
            12_000,
            500,
            "external",
        )
    },
    tcp(
        "batch→branch",
        "a-batch",
        "172.16.77.10:9000",
        &["a-vpn"],
        28_000,
        500,
        "same_tenant",
    ),
    tcp(
        "batch→db",
        "a-batch",
        "10.1.0.6:9000",
        &["a-db"],
        10_000,
        400,
        "same_tenant",
    ),
    tcp(
        "app2→vrrp",
        "b-app2",
        "10.2.0.100:9000",
        &["b-app"],
        18_000,
        400,
        "same_tenant",
    ),
    tcp(
        "app→internet",
        "b-app",
        "198.51.100.7:9000",
        &[],
        26_000,
        350,
        "external",
    ),
    tcp(
        "worker→app",
        "b-worker",
        "10.2.0.5:9000",
        &["b-app"],
        22_000,
        400,
        "same_tenant",
    ),
    tcp(
        "db→metadata",
        "a-db",
        "169.254.169.254:80",
        &[],
        2_000,
        800,
        "infra",
    ),
    tcp(
        "app2→metadata",
        "b-app2",
        "169.254.169.254:80",
        &[],
        2_000,
        800,
        "infra",
    ),
    Flow {
        kind: Kind::Multicast,
        ..tcp(
            "web multicast",
            "a-web",
            "239.255.0.1:5000",
            &[],
            900,
            300,
            "multicast",
        )
    },
    tcp(
        "rogue→app",
        "rogue",
        "10.2.0.5:9000",
        &["b-app"],
        6_000,
        500,
        "miss",
    ),
];

/// What a listener does with a connection.
#[derive(Debug, Clone, Copy)]
pub enum Serve {
    /// Read to the end, answer a quarter of it.
    Sink,
    /// The amphora: read the request, send it to the next member from
    /// `source`, relay the member's answer back.
    Proxy {
        /// The amphora's own address (segment 2 leaves from it).
        source: &'static str,
        /// Pool members.
        members: &'static [&'static str],
    },
}

/// A listener in a host.
#[derive(Debug, Clone, Copy)]
pub struct Service {
    /// The host.
    pub host: &'static str,
    /// Address and port.
    pub bind: &'static str,
    /// What it does.
    pub serve: Serve,
}

const fn sink(host: &'static str, bind: &'static str) -> Service {
    Service {
        host,
        bind,
        serve: Serve::Sink,
    }
}

/// Every listener the flows need.
pub const SERVICES: &[Service] = &[
    sink("a-web", "0.0.0.0:9000"),
    sink("a-db", "0.0.0.0:9000"),
    sink("a-db", "[2001:db8:a::6]:9006"),
    sink("a-vpn", "0.0.0.0:9000"),
    sink("b-app", "0.0.0.0:9000"),
    sink("mirror", "0.0.0.0:9000"),
    sink("internet", "0.0.0.0:9000"),
    sink("internet", "[2001:db8:ffff::7]:9006"),
    sink("acme-router", "169.254.169.254:80"),
    sink("globex-router", "169.254.169.254:80"),
    Service {
        host: "amphora-lb-acme",
        bind: "10.1.0.50:80",
        serve: Serve::Proxy {
            source: "10.1.0.51",
            members: &["10.1.0.5:9000", "10.1.0.6:9000"],
        },
    },
];

/// How long any socket operation may take before the exchange fails.
const IO_TIMEOUT: Duration = Duration::from_secs(3);

/// Live counters of one flow.
#[derive(Debug, Default)]
pub struct FlowStat {
    /// Exchanges that completed.
    pub ok: AtomicU64,
    /// Exchanges that failed.
    pub failed: AtomicU64,
    /// The last failure.
    pub last_error: Mutex<Option<String>>,
    /// An exchange is in progress.
    pub busy: AtomicBool,
}

/// The traffic of a run: pauses, counters, the stop switch.
#[derive(Debug)]
pub struct Traffic {
    /// Per flow, in [`FLOWS`] order.
    pub stats: Vec<FlowStat>,
    paused_hosts: Mutex<BTreeSet<String>>,
    paused_flows: Mutex<BTreeSet<&'static str>>,
    stop: AtomicBool,
}

impl Default for Traffic {
    fn default() -> Self {
        Traffic {
            stats: FLOWS.iter().map(|_| FlowStat::default()).collect(),
            paused_hosts: Mutex::default(),
            paused_flows: Mutex::default(),
            stop: AtomicBool::new(false),
        }
    }
}

impl Traffic {
    fn held(&self, f: &Flow) -> bool {
        let hosts = crate::session::lock(&self.paused_hosts);
        hosts.contains(f.from)
            || f.touches.iter().any(|h| hosts.contains(*h))
            || crate::session::lock(&self.paused_flows).contains(f.name)
    }

    /// Holds every flow from or through `host` (until [`Traffic::resume_host`]).
    pub fn pause_host(&self, host: &str) {
        crate::session::lock(&self.paused_hosts).insert(host.to_owned());
    }

    /// Lets `host`'s flows go again.
    pub fn resume_host(&self, host: &str) {
        crate::session::lock(&self.paused_hosts).remove(host);
    }

    /// Holds the flow named `name`.
    pub fn pause_flow(&self, name: &'static str) {
        crate::session::lock(&self.paused_flows).insert(name);
    }

    /// Lets it go again.
    pub fn resume_flow(&self, name: &'static str) {
        crate::session::lock(&self.paused_flows).remove(name);
    }

    /// Holds everything (the final count of `--check`).
    pub fn pause_all(&self) {
        let mut flows = crate::session::lock(&self.paused_flows);
        flows.extend(FLOWS.iter().map(|f| f.name));
    }

    /// Waits until no held flow is in the middle of an exchange.
    pub fn wait_idle(&self, limit: Duration) -> bool {
        let until = Instant::now() + limit;
        loop {
            let busy = FLOWS
                .iter()
                .zip(&self.stats)
                .any(|(f, s)| self.held(f) && s.busy.load(Ordering::SeqCst));
            if !busy {
                return true;
            }
            if Instant::now() > until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Ends every flow after its current exchange.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// Flows whose host still exists that never completed an exchange or
    /// that failed, with their last error.
    #[must_use]
    pub fn problems(&self, gone: &BTreeSet<String>) -> Vec<String> {
        FLOWS
            .iter()
            .zip(&self.stats)
            .filter(|(f, _)| !gone.contains(f.from))
            .filter_map(|(f, s)| {
                let (ok, failed) = (s.ok.load(Ordering::SeqCst), s.failed.load(Ordering::SeqCst));
                (ok == 0 || failed > 0).then(|| {
                    let why = crate::session::lock(&s.last_error)
                        .clone()
                        .unwrap_or_default();
                    format!("flow {}: {ok} exchanges, {failed} failed {why}", f.name)
                })
            })
            .collect()
    }
}

/// Starts every listener, then every flow, each in its host's namespace
/// (`ns(host)` names it). Listeners are bound before this returns.
pub fn start(traffic: &Arc<Traffic>, ns: &dyn Fn(&str) -> String) -> anyhow::Result<()> {
    for s in SERVICES {
        let (tx, rx) = std::sync::mpsc::channel();
        let bind: SocketAddr = s.bind.parse()?;
        let serve = s.serve;
        lachesis_lab::netns::spawn_in(&ns(s.host), move || {
            let listener = match TcpListener::bind(bind) {
                Ok(l) => {
                    let _ = tx.send(Ok(()));
                    l
                }
                Err(e) => {
                    let _ = tx.send(Err(format!("{bind}: {e}")));
                    return;
                }
            };
            for conn in listener.incoming().flatten() {
                std::thread::spawn(move || {
                    let _ = handle(conn, serve);
                });
            }
        });
        rx.recv()?
            .map_err(|e| anyhow::anyhow!("listener in {}: {e}", s.host))?;
    }
    for (i, f) in FLOWS.iter().enumerate() {
        let traffic = traffic.clone();
        lachesis_lab::netns::spawn_in(&ns(f.from), move || run_flow(&traffic, i));
    }
    Ok(())
}

fn run_flow(traffic: &Traffic, i: usize) {
    let f = &FLOWS[i];
    let stat = &traffic.stats[i];
    // Spread the first exchanges so the flows do not beat in step.
    std::thread::sleep(Duration::from_millis(37 * i as u64));
    while !traffic.stop.load(Ordering::SeqCst) {
        stat.busy.store(true, Ordering::SeqCst);
        // A pause that began before `busy` was raised must win.
        if traffic.held(f) {
            stat.busy.store(false, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        let result = match f.kind {
            Kind::Tcp => exchange(f),
            Kind::Multicast => multicast(f),
        };
        stat.busy.store(false, Ordering::SeqCst);
        match result {
            Ok(()) => {
                stat.ok.fetch_add(1, Ordering::SeqCst);
            }
            Err(e) => {
                stat.failed.fetch_add(1, Ordering::SeqCst);
                *crate::session::lock(&stat.last_error) = Some(e.to_string());
            }
        }
        std::thread::sleep(Duration::from_millis(f.period_ms));
    }
}

/// A TCP connection from `source` (or the kernel's choice) to `to`.
fn connect(source: Option<IpAddr>, to: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = Socket::new(Domain::for_address(to), Type::STREAM, None)?;
    if let Some(ip) = source {
        socket.bind(&SocketAddr::new(ip, 0).into())?;
    }
    socket.connect_timeout(&to.into(), IO_TIMEOUT)?;
    let s: TcpStream = socket.into();
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    s.set_write_timeout(Some(IO_TIMEOUT))?;
    Ok(s)
}

/// Sends `data`, half-closes, reads the answer to its end.
fn request(s: &mut TcpStream, data: &[u8]) -> std::io::Result<Vec<u8>> {
    s.write_all(data)?;
    s.shutdown(std::net::Shutdown::Write)?;
    let mut back = Vec::new();
    s.read_to_end(&mut back)?;
    Ok(back)
}

fn exchange(f: &Flow) -> std::io::Result<()> {
    let to: SocketAddr = f.to.parse().map_err(std::io::Error::other)?;
    let source = f
        .source
        .map(str::parse)
        .transpose()
        .map_err(std::io::Error::other)?;
    let mut s = connect(source, to)?;
    let back = request(&mut s, &vec![0x5a; f.size])?;
    if back.len() != f.size / 4 {
        return Err(std::io::Error::other(format!(
            "answer of {} bytes, expected {}",
            back.len(),
            f.size / 4
        )));
    }
    Ok(())
}

fn multicast(f: &Flow) -> std::io::Result<()> {
    let to: SocketAddr = f.to.parse().map_err(std::io::Error::other)?;
    let s = UdpSocket::bind("0.0.0.0:0")?;
    s.set_multicast_ttl_v4(1)?;
    s.send_to(&vec![0x6d; f.size], to)?;
    Ok(())
}

fn handle(mut conn: TcpStream, serve: Serve) -> std::io::Result<()> {
    conn.set_read_timeout(Some(IO_TIMEOUT))?;
    conn.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut data = Vec::new();
    conn.read_to_end(&mut data)?;
    let answer = match serve {
        Serve::Sink => vec![0xa5; data.len() / 4],
        Serve::Proxy { source, members } => {
            static NEXT: AtomicU64 = AtomicU64::new(0);
            let n = NEXT.fetch_add(1, Ordering::Relaxed) as usize;
            let member: SocketAddr = members[n % members.len()]
                .parse()
                .map_err(std::io::Error::other)?;
            let source: IpAddr = source.parse().map_err(std::io::Error::other)?;
            let mut up = connect(Some(source), member)?;
            request(&mut up, &data)?
        }
    };
    conn.write_all(&answer)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_flow_and_service_parses_and_every_zone_is_exercised() {
        for f in FLOWS {
            f.to.parse::<SocketAddr>().unwrap();
            if let Some(s) = f.source {
                s.parse::<IpAddr>().unwrap();
            }
        }
        for s in SERVICES {
            s.bind.parse::<SocketAddr>().unwrap();
        }
        let zones: BTreeSet<&str> = FLOWS.iter().map(|f| f.zone).collect();
        for zone in crate::metrics::ZONES {
            assert!(zones.contains(zone), "no flow shows {zone}");
        }
    }

    #[test]
    fn a_paused_host_holds_every_flow_from_or_through_it() {
        let t = Traffic::default();
        t.pause_host("b-app");
        let held: Vec<&str> = FLOWS.iter().filter(|f| t.held(f)).map(|f| f.name).collect();
        assert_eq!(
            held,
            [
                "web→b-app",
                "app2→vrrp",
                "app→internet",
                "worker→app",
                "rogue→app"
            ]
        );
        t.resume_host("b-app");
        assert!(FLOWS.iter().all(|f| !t.held(f)));
        t.pause_flow("app→internet");
        assert_eq!(FLOWS.iter().filter(|f| t.held(f)).count(), 1);
    }

    #[test]
    fn a_sink_answers_a_quarter_and_the_proxy_relays_a_members_answer() {
        let member = TcpListener::bind("127.0.0.1:0").unwrap();
        let member_addr = member.local_addr().unwrap();
        std::thread::spawn(move || {
            for c in member.incoming().flatten() {
                handle(c, Serve::Sink).unwrap();
            }
        });
        let front = TcpListener::bind("127.0.0.1:0").unwrap();
        let front_addr = front.local_addr().unwrap();
        let members: &'static [&'static str] = Box::leak(
            vec![&*Box::leak(member_addr.to_string().into_boxed_str())].into_boxed_slice(),
        );
        std::thread::spawn(move || {
            for c in front.incoming().flatten() {
                handle(
                    c,
                    Serve::Proxy {
                        source: "127.0.0.1",
                        members,
                    },
                )
                .unwrap();
            }
        });
        let mut s = connect(None, front_addr).unwrap();
        assert_eq!(request(&mut s, &[1; 4000]).unwrap().len(), 1000);
    }
}
