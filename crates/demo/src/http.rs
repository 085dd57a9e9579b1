//! Plain HTTP/1.1 GET (the agent's `/metrics`, `/readyz`) and the loopback
//! forwarders that make the agent's listeners, which live in the
//! hypervisor namespace, reachable from the machine's own loopback.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

/// One GET from the calling thread's namespace: status and body.
pub fn get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
    s.set_read_timeout(Some(Duration::from_secs(3)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/plain\r\nConnection: close\r\n\r\n"
    )?;
    let mut answer = Vec::new();
    s.read_to_end(&mut answer)?;
    let answer = String::from_utf8_lossy(&answer);
    let bad = || std::io::Error::new(std::io::ErrorKind::InvalidData, "not an HTTP answer");
    let code = answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(bad)?;
    let (head, body) = answer.split_once("\r\n\r\n").ok_or_else(bad)?;
    let chunked = head
        .lines()
        .any(|l| l.eq_ignore_ascii_case("transfer-encoding: chunked"));
    let body = if chunked {
        dechunk(body).ok_or_else(bad)?
    } else {
        body.to_owned()
    };
    Ok((code, body))
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

/// Binds `127.0.0.1:preferred` in the calling thread's namespace, or any
/// free port when that one is taken.
pub fn bind_loopback(preferred: u16) -> std::io::Result<TcpListener> {
    TcpListener::bind(("127.0.0.1", preferred)).or_else(|_| TcpListener::bind(("127.0.0.1", 0)))
}

/// Accepts on `listener` (bound in the machine's namespace) and relays
/// each connection to `target`, connected from the thread that calls this
/// (and so from its namespace). Runs until the process ends.
pub fn forward(listener: &TcpListener, target: SocketAddr) {
    for client in listener.incoming() {
        let Ok(client) = client else { continue };
        // The relay threads are started from this one, so they connect
        // from its namespace.
        std::thread::spawn(move || {
            let Ok(server) = TcpStream::connect_timeout(&target, Duration::from_secs(2)) else {
                return;
            };
            let (Ok(mut c2), Ok(mut s2)) = (client.try_clone(), server.try_clone()) else {
                return;
            };
            let up = std::thread::spawn(move || {
                let _ = std::io::copy(&mut c2, &mut s2);
                let _ = s2.shutdown(std::net::Shutdown::Write);
            });
            let (mut c, mut s) = (client, server);
            let _ = std::io::copy(&mut s, &mut c);
            let _ = c.shutdown(std::net::Shutdown::Write);
            let _ = up.join();
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunked_body_is_joined_and_a_torn_one_refused() {
        assert_eq!(
            dechunk("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n").as_deref(),
            Some("hello world")
        );
        assert_eq!(dechunk("5\r\nhel"), None);
    }

    #[test]
    fn a_forwarder_relays_both_ways() {
        let server = TcpListener::bind("127.0.0.1:0").unwrap();
        let target = server.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut s, _) = server.accept().unwrap();
            let mut buf = [0u8; 4];
            s.read_exact(&mut buf).unwrap();
            s.write_all(&buf.map(|b| b + 1)).unwrap();
        });
        let front = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = front.local_addr().unwrap();
        std::thread::spawn(move || forward(&front, target));
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(&[1, 2, 3, 4]).unwrap();
        let mut back = [0u8; 4];
        c.read_exact(&mut back).unwrap();
        assert_eq!(back, [2, 3, 4, 5]);
    }
}
