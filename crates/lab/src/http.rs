//! One blocking HTTP/1.1 client for the tests, benchmarks and the demo:
//! the agent's listeners, the simulator's control API, a Prometheus' query
//! API. One request per connection (`Connection: close`), the answer read
//! to its end, a chunked body joined. Plain sockets, so a request goes out
//! from the calling thread's network namespace.

use std::fmt::Write as _;
use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::Duration;

/// One request to send with [`Request::send`].
#[derive(Debug, Clone)]
pub struct Request<'a> {
    method: &'a str,
    path: &'a str,
    headers: Vec<(&'a str, &'a str)>,
    body: &'a str,
    timeout: Duration,
}

/// A status, the headers (names lowercased) and the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// Header names (lowercased) and values, in the order received.
    pub headers: Vec<(String, String)>,
    /// The body (a chunked one joined).
    pub body: String,
}

impl Response {
    /// The first value of header `name` (any case).
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

impl<'a> Request<'a> {
    /// `method path`, no body, a 5 s read timeout.
    #[must_use]
    pub fn new(method: &'a str, path: &'a str) -> Self {
        Request {
            method,
            path,
            headers: Vec::new(),
            body: "",
            timeout: Duration::from_secs(5),
        }
    }

    /// `GET path`.
    #[must_use]
    pub fn get(path: &'a str) -> Self {
        Request::new("GET", path)
    }

    /// Adds a header.
    #[must_use]
    pub fn header(mut self, name: &'a str, value: &'a str) -> Self {
        self.headers.push((name, value));
        self
    }

    /// A JSON body (`Content-Type: application/json`).
    #[must_use]
    pub fn json(mut self, body: &'a str) -> Self {
        self.body = body;
        self.header("Content-Type", "application/json")
    }

    /// How long a read may wait for the server (5 s unless set).
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sends the request to `addr` (connecting within 2 s) and reads the
    /// whole answer.
    pub fn send(&self, addr: impl ToSocketAddrs) -> std::io::Result<Response> {
        let addr = addr.to_socket_addrs()?.next().ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "no address to connect to")
        })?;
        let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
        s.set_read_timeout(Some(self.timeout))?;
        let mut head = format!("{} {} HTTP/1.1\r\nHost: {addr}\r\n", self.method, self.path);
        for (name, value) in &self.headers {
            let _ = write!(head, "{name}: {value}\r\n");
        }
        if !self.body.is_empty() || !matches!(self.method, "GET" | "HEAD") {
            let _ = write!(head, "Content-Length: {}\r\n", self.body.len());
        }
        head.push_str("Connection: close\r\n\r\n");
        s.write_all(head.as_bytes())?;
        s.write_all(self.body.as_bytes())?;
        let mut answer = Vec::new();
        s.read_to_end(&mut answer)?;
        parse_response(&String::from_utf8_lossy(&answer)).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("not an HTTP answer: {:?}", String::from_utf8_lossy(&answer)),
            )
        })
    }
}

/// One plain GET (`Accept: text/plain`): status and body, `None` when
/// nothing answers.
#[must_use]
pub fn get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    get_as(addr, path, "text/plain")
}

/// [`get`] asking for `accept`.
#[must_use]
pub fn get_as(addr: SocketAddr, path: &str, accept: &str) -> Option<(u16, String)> {
    let r = Request::get(path)
        .header("Accept", accept)
        .send(addr)
        .ok()?;
    Some((r.status, r.body))
}

/// A whole answer: status line, headers, body.
fn parse_response(answer: &str) -> Option<Response> {
    let (head, body) = answer.split_once("\r\n\r\n")?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split_whitespace().nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    let body = if chunked {
        dechunk(body)?
    } else {
        body.to_owned()
    };
    Some(Response {
        status,
        headers,
        body,
    })
}

/// Joins a chunked body (sizes in hex, each chunk followed by CRLF).
fn dechunk(mut rest: &str) -> Option<String> {
    let mut out = String::new();
    loop {
        let (size, after) = rest.split_once("\r\n")?;
        let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
        if size == 0 {
            return Some(out);
        }
        out.push_str(after.get(..size)?);
        rest = after.get(size..)?.strip_prefix("\r\n")?;
    }
}

/// A free loopback port of the calling thread's namespace (the system
/// picks it; free when returned, not reserved).
#[must_use]
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

/// Accepts on `listener` and relays each connection to `target`,
/// connected from the thread that calls this (and so from its network
/// namespace): a port of one namespace reachable from another. A
/// connection `target` refuses is closed. Runs until the listener fails.
pub fn forward(listener: &TcpListener, target: SocketAddr) {
    for client in listener.incoming() {
        let Ok(client) = client else { continue };
        // Connected here, not on the relay threads: they may live
        // elsewhere only if started from a thread that moved.
        let Ok(server) = TcpStream::connect_timeout(&target, Duration::from_secs(2)) else {
            let _ = client.shutdown(std::net::Shutdown::Both);
            continue;
        };
        relay(&client, &server);
        relay(&server, &client);
    }
}

/// A loopback port of a test's own network namespace forwarded to the
/// same port of the namespace [`Forwarder::start`] ran in, where a service
/// of the machine listens (a broker, Keystone, Neutron). A connection made
/// while the service is down is accepted and closed.
#[derive(Debug)]
pub struct Forwarder {
    listener: std::sync::mpsc::Sender<TcpListener>,
    port: u16,
}

impl Forwarder {
    /// Call before moving into the test's namespace
    /// ([`crate::netns::isolate`]): the forwarding thread stays here.
    #[must_use]
    pub fn start(port: u16) -> Forwarder {
        let (tx, rx) = std::sync::mpsc::channel::<TcpListener>();
        std::thread::spawn(move || {
            let Ok(listener) = rx.recv() else { return };
            forward(&listener, SocketAddr::from(([127, 0, 0, 1], port)));
        });
        Forwarder { listener: tx, port }
    }

    /// Call after moving: listens on the port in the new namespace.
    ///
    /// # Panics
    /// The port is taken there.
    pub fn listen(&self) {
        let l = TcpListener::bind(("127.0.0.1", self.port)).unwrap_or_else(|e| {
            panic!(
                "forwarding port {} into the test's namespace: {e}",
                self.port
            )
        });
        self.listener.send(l).expect("the forwarding thread");
    }
}

/// Copies `from` into `to` on a thread until either side closes.
fn relay(from: &TcpStream, to: &TcpStream) {
    let (Ok(mut from), Ok(mut to)) = (from.try_clone(), to.try_clone()) else {
        return;
    };
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut from, &mut to);
        let _ = to.shutdown(std::net::Shutdown::Write);
        let _ = from.shutdown(std::net::Shutdown::Read);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server that answers one request with `answer` and hands back
    /// what it received.
    fn one_shot(answer: &'static str) -> (SocketAddr, std::thread::JoinHandle<String>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let seen = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut got = String::new();
            let mut buf = [0u8; 1024];
            // Headers, then as many body bytes as they announce.
            let complete = |got: &str| {
                got.split_once("\r\n\r\n").is_some_and(|(head, body)| {
                    let length = head
                        .lines()
                        .find_map(|l| l.strip_prefix("Content-Length: "))
                        .map_or(0, |n| n.parse().unwrap());
                    body.len() == length
                })
            };
            while !complete(&got) {
                let n = s.read(&mut buf).unwrap();
                assert!(n > 0, "the client closed early: {got:?}");
                got.push_str(std::str::from_utf8(&buf[..n]).unwrap());
            }
            s.write_all(answer.as_bytes()).unwrap();
            got
        });
        (addr, seen)
    }

    #[test]
    fn a_request_carries_its_headers_and_body_and_the_answer_is_read_whole() {
        let (addr, seen) = one_shot(
            "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
        );
        let r = Request::new("PUT", "/sim/faults")
            .json("{}")
            .send(addr)
            .unwrap();
        assert_eq!(r.status, 201);
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert_eq!(r.body, "{}");
        let seen = seen.join().unwrap();
        assert!(seen.starts_with("PUT /sim/faults HTTP/1.1\r\n"), "{seen}");
        assert!(
            seen.contains("Content-Type: application/json\r\n"),
            "{seen}"
        );
        assert!(seen.contains("Connection: close\r\n"), "{seen}");
        assert!(seen.ends_with("\r\n\r\n{}"), "{seen}");
    }

    #[test]
    fn a_chunked_body_is_joined_and_a_torn_one_refused() {
        assert_eq!(
            dechunk("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n").as_deref(),
            Some("hello world")
        );
        assert_eq!(dechunk("5\r\nhel"), None);
        let r = parse_response(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!((r.status, r.body.as_str()), (200, "ok"));
    }

    #[test]
    fn nothing_listening_is_none() {
        let port = free_port();
        assert_eq!(get(SocketAddr::from(([127, 0, 0, 1], port)), "/"), None);
    }

    #[test]
    fn a_forwarder_relays_each_connection_and_closes_a_refused_one() {
        let server = TcpListener::bind("127.0.0.1:0").unwrap();
        let target = server.local_addr().unwrap();
        let front = TcpListener::bind("127.0.0.1:0").unwrap();
        let front_addr = front.local_addr().unwrap();
        std::thread::spawn(move || forward(&front, target));
        // Two connections in turn, each answered by the server's echo.
        std::thread::spawn(move || {
            for conn in server.incoming().take(2) {
                let mut conn = conn.unwrap();
                let mut line = [0u8; 5];
                conn.read_exact(&mut line).unwrap();
                conn.write_all(&line.map(|b| b.to_ascii_uppercase()))
                    .unwrap();
            }
        });
        for word in [b"hello", b"again"] {
            let mut c = TcpStream::connect(front_addr).unwrap();
            c.write_all(word).unwrap();
            let mut back = String::new();
            c.read_to_string(&mut back).unwrap();
            assert_eq!(back.as_bytes(), word.to_ascii_uppercase());
        }
        // Nothing listens behind this one: the client reads an end.
        let dead = TcpListener::bind("127.0.0.1:0").unwrap();
        let dead_addr = dead.local_addr().unwrap();
        drop(dead);
        let front = TcpListener::bind("127.0.0.1:0").unwrap();
        let front_addr = front.local_addr().unwrap();
        std::thread::spawn(move || forward(&front, dead_addr));
        let mut c = TcpStream::connect(front_addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut rest = Vec::new();
        assert_eq!(c.read_to_end(&mut rest).unwrap(), 0);
    }
}
