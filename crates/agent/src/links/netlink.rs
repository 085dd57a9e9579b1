//! The `NETLINK_ROUTE` sockets: a subscription to the link group and a dump
//! of every link. Sockets belong to the network namespace of the thread
//! that opens them. The bytes are read by [`super::message`].

use std::io;

use netlink_sys::protocols::NETLINK_ROUTE;
use netlink_sys::{AsyncSocket, AsyncSocketExt, SocketAddr, TokioSocket};

use super::message::{getlink_dump_request, parse_datagram, Frame, LinkEvent, Message};

/// `RTMGRP_LINK`: the legacy bitmask of the link group (`RTNLGRP_LINK` = 1).
const RTMGRP_LINK: u32 = 1;

/// Receive buffer per `recv`: a datagram holds at most one dump batch
/// (the kernel caps those at 32 KiB), so nothing arrives truncated.
const DATAGRAM_MAX: usize = 64 * 1024;

/// Socket receive buffer asked for: room for a burst of link events (a
/// host starting many VMs at once) before the kernel reports an overrun.
const SOCKET_RCVBUF: usize = 4 * 1024 * 1024;

/// How often a dump the kernel flags as interrupted is started over before
/// its (possibly inconsistent) result is used anyway: the presence check
/// corrects what an inconsistent dump got wrong.
const DUMP_ATTEMPTS: usize = 5;

/// A subscription to link events. Must be created inside a tokio runtime.
pub struct LinkEvents {
    socket: TokioSocket,
    buf: Vec<u8>,
}

impl std::fmt::Debug for LinkEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use std::os::fd::AsRawFd;
        f.debug_struct("LinkEvents")
            .field("fd", &self.socket.as_raw_fd())
            .finish_non_exhaustive()
    }
}

/// What one receive returned.
#[derive(Debug)]
pub enum Received {
    /// The messages of one datagram.
    Frames(Vec<Frame>),
    /// The socket overflowed (`ENOBUFS`): events were lost.
    Overrun,
}

impl LinkEvents {
    /// Subscribes to the link group. Subscribe before dumping, so a link
    /// that appears in between is in one or the other.
    pub fn subscribe() -> io::Result<LinkEvents> {
        let mut socket = TokioSocket::new(NETLINK_ROUTE)?;
        socket.socket_mut().bind(&SocketAddr::new(0, RTMGRP_LINK))?;
        // Best effort: the kernel caps it at net.core.rmem_max.
        let _ = socket.socket_ref().set_rx_buf_sz(SOCKET_RCVBUF);
        Ok(LinkEvents {
            socket,
            buf: Vec::with_capacity(DATAGRAM_MAX),
        })
    }

    /// Waits for the next datagram. Cancel-safe: a datagram is either
    /// returned or still queued in the socket.
    pub async fn recv(&mut self) -> io::Result<Received> {
        recv_datagram(&self.socket, &mut self.buf)
            .await
            .map(|got| match got {
                Some(frames) => Received::Frames(frames),
                None => Received::Overrun,
            })
    }
}

/// One datagram parsed, or `None` on `ENOBUFS`.
async fn recv_datagram(socket: &TokioSocket, buf: &mut Vec<u8>) -> io::Result<Option<Vec<Frame>>> {
    buf.clear();
    buf.reserve(DATAGRAM_MAX);
    match socket.recv_from(buf).await {
        Ok(_) => Ok(Some(parse_datagram(buf))),
        Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Every link of this network namespace, as (index, name), and the
/// messages of the dump that could not be read (counted by the caller).
#[derive(Debug, Default)]
pub struct Dump {
    /// The links.
    pub links: Vec<(u32, String)>,
    /// Unreadable messages, skipped.
    pub malformed: usize,
    /// Other messages, skipped.
    pub ignored: usize,
}

/// Lists every link (`RTM_GETLINK` dump) on a socket of its own.
pub async fn dump_links() -> io::Result<Dump> {
    let mut last = Dump::default();
    for attempt in 0..DUMP_ATTEMPTS {
        let (dump, interrupted) = dump_once(u32::try_from(attempt).unwrap_or(0) + 1).await?;
        last = dump;
        if !interrupted {
            break;
        }
        tracing::debug!(attempt, "link dump interrupted by a change; starting over");
    }
    Ok(last)
}

async fn dump_once(sequence: u32) -> io::Result<(Dump, bool)> {
    let mut socket = TokioSocket::new(NETLINK_ROUTE)?;
    socket.socket_mut().bind_auto()?;
    socket.socket_mut().connect(&SocketAddr::new(0, 0))?;
    socket.send(&getlink_dump_request(sequence)).await?;
    let mut buf = Vec::with_capacity(DATAGRAM_MAX);
    let mut dump = Dump::default();
    let mut interrupted = false;
    loop {
        let Some(frames) = recv_datagram(&socket, &mut buf).await? else {
            // Part of the answer was lost (its end, perhaps): start over.
            return Ok((dump, true));
        };
        for frame in frames {
            interrupted |= frame.dump_interrupted;
            match frame.message {
                Message::Link(LinkEvent::Present { index, name }) => {
                    dump.links.push((index, name));
                }
                Message::Done => return Ok((dump, interrupted)),
                Message::Error(0) | Message::Ignored | Message::Link(LinkEvent::Gone { .. }) => {
                    dump.ignored += 1;
                }
                Message::Error(errno) => return Err(io::Error::from_raw_os_error(errno)),
                Message::Malformed(why) => {
                    tracing::warn!(why, "malformed message in the link dump; skipped");
                    dump.malformed += 1;
                }
                Message::Overrun => interrupted = true,
            }
        }
    }
}
