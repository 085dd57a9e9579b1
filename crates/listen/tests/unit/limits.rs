//! The accept loop against abusive clients on loopback, with limits small
//! enough to hit in milliseconds: each test names the limit it proves.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response};
use lachesis_listen::{serve, Endpoint, Limits};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{timeout, Instant};
use tokio_util::sync::CancellationToken;

const SMALL: Limits = Limits {
    max_connections: 3,
    header_timeout: Duration::from_millis(300),
    response_timeout: Duration::from_millis(300),
    max_header_bytes: 8192,
    shutdown_grace: Duration::from_millis(200),
};

/// Answers `/big` with 16 MiB, `/slow` after 800 ms, anything else "ok".
async fn page(req: Request<Incoming>) -> Response<Full<Bytes>> {
    let body = match req.uri().path() {
        "/big" => Bytes::from(vec![b'x'; 16 << 20]),
        "/slow" => {
            tokio::time::sleep(Duration::from_millis(800)).await;
            Bytes::from_static(b"slow")
        }
        _ => Bytes::from_static(b"ok"),
    };
    Response::new(Full::new(body))
}

async fn start(limits: Limits) -> (SocketAddr, CancellationToken) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let cancel = CancellationToken::new();
    let endpoint = Endpoint {
        limits,
        ..Endpoint::plain("test")
    };
    tokio::spawn(serve(listener, endpoint, page, cancel.clone()));
    (addr, cancel)
}

/// Sends one GET and reads the whole answer (the server closes after it).
async fn get(addr: SocketAddr, path: &str) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = Vec::new();
    timeout(Duration::from_secs(5), s.read_to_end(&mut out))
        .await
        .expect("an answer in time")
        .unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

/// Waits until the server closes `s` (EOF or reset); how long it took.
async fn closed(s: &mut TcpStream) -> Duration {
    let t = Instant::now();
    let mut buf = [0u8; 4096];
    loop {
        match timeout(Duration::from_secs(5), s.read(&mut buf))
            .await
            .expect("closed within 5 s")
        {
            Ok(0) | Err(_) => return t.elapsed(),
            Ok(_) => {}
        }
    }
}

/// Hands-free bound: true if `s` has been closed by the server already.
async fn is_closed(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 1];
    matches!(
        timeout(Duration::from_millis(200), s.read(&mut buf)).await,
        Ok(Ok(0) | Err(_))
    )
}

#[tokio::test]
async fn a_client_that_never_finishes_its_head_is_closed_after_the_header_timeout() {
    let (addr, _cancel) = start(SMALL).await;
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        .await
        .unwrap();
    let took = closed(&mut s).await;
    assert!(took < Duration::from_secs(2), "closed after {took:?}");
    assert!(get(addr, "/").await.ends_with("ok"));
}

#[tokio::test]
async fn a_head_beyond_the_limit_is_answered_431_and_closed() {
    let (addr, _cancel) = start(SMALL).await;
    let mut s = TcpStream::connect(addr).await.unwrap();
    let huge = "a".repeat(64 * 1024);
    let req = format!("GET /?q={huge} HTTP/1.1\r\nHost: x\r\n\r\n");
    // The server may close before taking it all: a write error is fine.
    let _ = s.write_all(req.as_bytes()).await;
    let mut out = Vec::new();
    let _ = timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await;
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.1 431"), "{text}");
    assert!(get(addr, "/").await.ends_with("ok"));
}

#[tokio::test]
async fn at_the_limit_a_new_client_takes_the_place_of_the_oldest_silent_one() {
    let (addr, _cancel) = start(Limits {
        header_timeout: Duration::from_secs(30),
        ..SMALL
    })
    .await;
    // A client that completed a request, kept alive.
    let mut served = TcpStream::connect(addr).await.unwrap();
    served
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 1024];
    let n = served.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).ends_with("ok"));
    // Two silent ones fill the limit of three.
    let mut silent1 = TcpStream::connect(addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut silent2 = TcpStream::connect(addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    // A fourth client is answered: the oldest silent one made room.
    assert!(get(addr, "/").await.ends_with("ok"));
    assert!(
        is_closed(&mut silent1).await,
        "the oldest silent client is closed"
    );
    assert!(
        !is_closed(&mut silent2).await,
        "the newer silent client is kept"
    );
    // The client that was served is still served on its connection.
    served
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let n = served.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).ends_with("ok"));
}

#[tokio::test]
async fn at_the_limit_with_every_connection_busy_a_new_one_is_closed_unanswered() {
    let (addr, _cancel) = start(Limits {
        max_connections: 2,
        ..SMALL
    })
    .await;
    let slow = || async move { get(addr, "/slow").await };
    let (a, b) = (tokio::spawn(slow()), tokio::spawn(slow()));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut third = TcpStream::connect(addr).await.unwrap();
    third
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut out = Vec::new();
    let _ = timeout(Duration::from_secs(5), third.read_to_end(&mut out)).await;
    assert!(out.is_empty(), "{}", String::from_utf8_lossy(&out));
    assert!(a.await.unwrap().ends_with("slow"));
    assert!(b.await.unwrap().ends_with("slow"));
    // Room again once they are answered.
    assert!(get(addr, "/").await.ends_with("ok"));
}

#[tokio::test]
async fn a_client_that_does_not_read_its_response_is_closed_after_the_response_timeout() {
    let (addr, _cancel) = start(SMALL).await;
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    // Read nothing for longer than the response timeout, then everything.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut got = 0usize;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match timeout(Duration::from_secs(5), s.read(&mut buf))
            .await
            .expect("closed within 5 s")
        {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    assert!(
        got < 16 << 20,
        "the 16 MiB answer was cut short, got {got} B"
    );
    assert!(get(addr, "/").await.ends_with("ok"));
}

#[tokio::test]
async fn cancellation_stops_accepting_and_closes_idle_connections() {
    let (addr, cancel) = start(SMALL).await;
    let mut idle = TcpStream::connect(addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    cancel.cancel();
    let took = closed(&mut idle).await;
    assert!(took < Duration::from_secs(2), "{took:?}");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(TcpStream::connect(addr).await.is_err(), "nothing listens");
}
