//! Which qdisc holds a device's ingress slot, asked of the kernel over
//! rtnetlink (libbpf has no call for it).
//!
//! cls_bpf needs `clsact` there. The older `ingress` qdisc — the one
//! Neutron's bandwidth-limit rules (linuxbridge's tc policing, OVS ingress
//! policing) put on a tap — has a single filter block that every parent
//! number maps to, and creating `clsact` beside it is refused as "exists",
//! which libbpf takes for success. Both our filters would then land in that
//! one block at the same handle and priority: the egress filter replaces
//! the ingress one, and the rx program runs on the tap's ingress hook,
//! counting what the VM sends as received with the MACs' roles swapped.
//! Seen on 6.18 and on Debian 12's 6.1; TCX (≥ 6.6) needs no qdisc.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::error::{Error, Result};

const NLMSG_HDR: usize = 16;
const TCMSG: usize = 20;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
/// An acknowledgement ends every answer, also the empty one: a slot that
/// holds only the built-in placeholder is answered with nothing else.
const NLM_F_ACK: u16 = 4;
/// Asks for the reply to be sent to us, not only to the TC multicast group.
const NLM_F_ECHO: u16 = 8;
/// The ingress slot (`ffff:fff1`), shared by `ingress` and `clsact`.
const TC_H_INGRESS: u32 = 0xffff_fff1;
const TCA_KIND: u16 = 1;

/// The kind of the qdisc in `ifindex`'s ingress slot (`"clsact"`,
/// `"ingress"`), or `None` when the slot is empty.
pub(crate) fn ingress_slot(ifindex: u32) -> Result<Option<String>> {
    let op = || format!("ask rtnetlink for the ingress qdisc of ifindex {ifindex}");
    // SAFETY: plain socket(2); the result is checked and owned right after.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    };
    if fd < 0 {
        return Err(Error::io(op())(std::io::Error::last_os_error()));
    }
    // SAFETY: `fd` is a fresh descriptor no one else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // A reply that never comes must not hang an attach.
    let timeout = libc::timeval {
        tv_sec: 2,
        tv_usec: 0,
    };
    // SAFETY: `timeout` is a live timeval and its size is passed with it.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&raw const timeout).cast(),
            size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(Error::io(op())(std::io::Error::last_os_error()));
    }

    let seq = 1u32;
    let mut req = Vec::with_capacity(NLMSG_HDR + TCMSG);
    req.extend_from_slice(&((NLMSG_HDR + TCMSG) as u32).to_ne_bytes());
    req.extend_from_slice(&libc::RTM_GETQDISC.to_ne_bytes());
    req.extend_from_slice(&(NLM_F_REQUEST | NLM_F_ACK | NLM_F_ECHO).to_ne_bytes());
    req.extend_from_slice(&seq.to_ne_bytes());
    req.extend_from_slice(&0u32.to_ne_bytes()); // pid: the kernel fills ours
    req.extend_from_slice(&[0u8; 4]); // family AF_UNSPEC, padding
    req.extend_from_slice(&ifindex.to_ne_bytes());
    req.extend_from_slice(&0u32.to_ne_bytes()); // handle: any
    req.extend_from_slice(&TC_H_INGRESS.to_ne_bytes()); // parent
    req.extend_from_slice(&0u32.to_ne_bytes()); // info
                                                // SAFETY: `req` is live and its length is passed with it.
    let sent = unsafe { libc::send(fd.as_raw_fd(), req.as_ptr().cast(), req.len(), 0) };
    if sent < 0 {
        return Err(Error::io(op())(std::io::Error::last_os_error()));
    }

    let mut buf = vec![0u8; 16 * 1024];
    loop {
        // SAFETY: `buf` is live and writable for its whole length.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            return Err(Error::io(op())(std::io::Error::last_os_error()));
        }
        if let Some(answer) = parse(&buf[..n.cast_unsigned()], seq, ifindex) {
            return answer.map_err(|errno| Error::errno(op(), errno));
        }
    }
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

/// Reads one datagram of replies: `Some` once it holds the answer to
/// request `seq` (the kind, none, or a negative errno), `None` to read on.
fn parse(mut b: &[u8], seq: u32, ifindex: u32) -> Option<Result<Option<String>, i32>> {
    while b.len() >= NLMSG_HDR {
        let len = (u32_at(b, 0) as usize).clamp(NLMSG_HDR, b.len());
        let (msg, rest) = b.split_at(len);
        b = &rest[rest.len().min((4 - len % 4) % 4)..];
        if u32_at(msg, 8) != seq {
            continue; // not ours (a notification)
        }
        match u16_at(msg, 4) {
            NLMSG_ERROR if msg.len() >= NLMSG_HDR + 4 => {
                let err = u32_at(msg, NLMSG_HDR).cast_signed();
                return Some(match -err {
                    // The acknowledgement, after the reply if there was one;
                    // or nothing in the slot: no ingress queue yet (ENOENT),
                    // or only the built-in placeholder left by a deleted
                    // qdisc, which the kernel declines to describe (EINVAL).
                    0 | libc::ENOENT | libc::EINVAL => Ok(None),
                    _ => Err(err),
                });
            }
            NLMSG_DONE => return Some(Ok(None)),
            libc::RTM_NEWQDISC if msg.len() >= NLMSG_HDR + TCMSG => {
                let tcm = &msg[NLMSG_HDR..];
                if u32_at(tcm, 4) != ifindex || u32_at(tcm, 12) != TC_H_INGRESS {
                    continue;
                }
                return Some(Ok(kind(&msg[NLMSG_HDR + TCMSG..])));
            }
            _ => {}
        }
    }
    None
}

/// `TCA_KIND` among a message's attributes.
fn kind(mut attrs: &[u8]) -> Option<String> {
    while attrs.len() >= 4 {
        let len = usize::from(u16_at(attrs, 0));
        if len < 4 || len > attrs.len() {
            return None;
        }
        if u16_at(attrs, 2) == TCA_KIND {
            let value = &attrs[4..len];
            let end = value.iter().position(|&c| c == 0).unwrap_or(value.len());
            return Some(String::from_utf8_lossy(&value[..end]).into_owned());
        }
        attrs = &attrs[(len + 3) & !3..];
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(kind_name: &str, ifindex: u32, parent: u32, seq: u32) -> Vec<u8> {
        let mut attr = Vec::new();
        let value = format!("{kind_name}\0");
        attr.extend_from_slice(&((4 + value.len()) as u16).to_ne_bytes());
        attr.extend_from_slice(&TCA_KIND.to_ne_bytes());
        attr.extend_from_slice(value.as_bytes());
        while attr.len() % 4 != 0 {
            attr.push(0);
        }
        let len = NLMSG_HDR + TCMSG + attr.len();
        let mut m = Vec::new();
        m.extend_from_slice(&(len as u32).to_ne_bytes());
        m.extend_from_slice(&libc::RTM_NEWQDISC.to_ne_bytes());
        m.extend_from_slice(&0u16.to_ne_bytes());
        m.extend_from_slice(&seq.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(&[0u8; 4]);
        m.extend_from_slice(&ifindex.to_ne_bytes());
        m.extend_from_slice(&0xffff_0000u32.to_ne_bytes());
        m.extend_from_slice(&parent.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(&attr);
        m
    }

    fn error(errno: i32, seq: u32) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&36u32.to_ne_bytes());
        m.extend_from_slice(&NLMSG_ERROR.to_ne_bytes());
        m.extend_from_slice(&0u16.to_ne_bytes());
        m.extend_from_slice(&seq.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(&(-errno).to_ne_bytes());
        m.extend_from_slice(&[0u8; 16]);
        m
    }

    #[test]
    fn reads_the_kind_of_our_device_and_slot_only() {
        assert_eq!(
            parse(&reply("ingress", 7, TC_H_INGRESS, 1), 1, 7),
            Some(Ok(Some("ingress".into())))
        );
        assert_eq!(
            parse(&reply("clsact", 7, TC_H_INGRESS, 1), 1, 7),
            Some(Ok(Some("clsact".into())))
        );
        // Another device, another slot, another request: read on.
        assert_eq!(parse(&reply("ingress", 8, TC_H_INGRESS, 1), 1, 7), None);
        assert_eq!(parse(&reply("htb", 7, 0xffff_ffff, 1), 1, 7), None);
        assert_eq!(parse(&reply("ingress", 7, TC_H_INGRESS, 9), 1, 7), None);
        // Two messages in one datagram: the second is the answer.
        let mut two = reply("noqueue", 7, 0xffff_ffff, 1);
        two.extend(reply("clsact", 7, TC_H_INGRESS, 1));
        assert_eq!(parse(&two, 1, 7), Some(Ok(Some("clsact".into()))));
    }

    #[test]
    fn an_empty_slot_is_none_and_other_errors_are_errors() {
        assert_eq!(parse(&error(libc::ENOENT, 1), 1, 7), Some(Ok(None)));
        assert_eq!(parse(&error(libc::EINVAL, 1), 1, 7), Some(Ok(None)));
        assert_eq!(parse(&error(libc::EPERM, 1), 1, 7), Some(Err(-libc::EPERM)));
    }
}
