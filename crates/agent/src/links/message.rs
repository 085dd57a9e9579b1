//! rtnetlink link messages read from raw datagrams (pure, no socket).
//!
//! Only the stable part of the format is read: the netlink header, the
//! `ifinfomsg` header (family, index) and the `IFLA_IFNAME` attribute. Every
//! length is checked before it is used, so a malformed datagram yields
//! [`Message::Malformed`] entries and never a panic; attributes this module
//! does not need are skipped unread, so a kernel that adds or changes one
//! cannot make a link event undecodable.

/// What the watcher learns from one link message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkEvent {
    /// The link with this index exists under this name now: it appeared,
    /// was renamed, or changed state (up/down, carrier, master) — the kernel
    /// sends the same `RTM_NEWLINK` for all of them, and a dump entry reads
    /// the same way.
    Present {
        /// Interface index.
        index: u32,
        /// Interface name.
        name: String,
    },
    /// `RTM_DELLINK`: the link is gone (deleted, or moved to another
    /// network namespace).
    Gone {
        /// Interface index.
        index: u32,
    },
}

/// One netlink message of a datagram, classified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// `RTM_NEWLINK` ([`LinkEvent::Present`]) or `RTM_DELLINK`
    /// ([`LinkEvent::Gone`]) of the generic family.
    Link(LinkEvent),
    /// End of a dump.
    Done,
    /// `NLMSG_ERROR` with this (positive) errno; 0 is an acknowledgement.
    Error(i32),
    /// `NLMSG_OVERRUN`: the kernel dropped messages.
    Overrun,
    /// A well-formed message the watcher has no use for: another type, or a
    /// link message of another family (a bridge reports its ports with
    /// `AF_BRIDGE` `RTM_NEWLINK`/`RTM_DELLINK` while the link itself stays —
    /// reading those as link events would forget a live tap).
    Ignored,
    /// A message that could not be read; what was wrong.
    Malformed(&'static str),
}

/// A classified message and whether the kernel flagged the dump it belongs
/// to as interrupted (the link set changed while it was being read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The message.
    pub message: Message,
    /// `NLM_F_DUMP_INTR` was set.
    pub dump_interrupted: bool,
}

const NLMSG_HDRLEN: usize = 16;
const IFINFOMSG_LEN: usize = 16;
const NLA_HDRLEN: usize = 4;

const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLMSG_OVERRUN: u16 = 4;
const RTM_NEWLINK: u16 = 16;
const RTM_DELLINK: u16 = 17;
const RTM_GETLINK: u16 = 18;

const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP_INTR: u16 = 0x10;
const NLM_F_DUMP: u16 = 0x300;

const AF_UNSPEC: u8 = 0;
const IFLA_IFNAME: u16 = 3;
const NLA_TYPE_MASK: u16 = 0x3fff;

/// Netlink aligns messages and attributes to 4 bytes.
fn align4(n: usize) -> usize {
    (n + 3) & !3
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Every message of one datagram, in order. A message whose own length
/// field is unusable ends the walk (the next one cannot be found); any
/// other defect spoils only that message.
#[must_use]
pub fn parse_datagram(datagram: &[u8]) -> Vec<Frame> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < datagram.len() {
        let rest = &datagram[at..];
        let len = u32_at(rest, 0).map_or(0, |l| l as usize);
        if rest.len() < NLMSG_HDRLEN || len < NLMSG_HDRLEN || len > rest.len() {
            out.push(Frame {
                message: Message::Malformed("netlink header length"),
                dump_interrupted: false,
            });
            break;
        }
        let kind = u16_at(rest, 4).unwrap_or_default();
        let flags = u16_at(rest, 6).unwrap_or_default();
        out.push(Frame {
            message: classify(kind, &rest[NLMSG_HDRLEN..len]),
            dump_interrupted: flags & NLM_F_DUMP_INTR != 0,
        });
        at += align4(len);
    }
    out
}

fn classify(kind: u16, payload: &[u8]) -> Message {
    match kind {
        RTM_NEWLINK | RTM_DELLINK => match link(payload) {
            Err(why) => Message::Malformed(why),
            Ok(None) => Message::Ignored,
            Ok(Some((index, name))) if kind == RTM_NEWLINK => match name {
                Some(name) => Message::Link(LinkEvent::Present { index, name }),
                None => Message::Malformed("RTM_NEWLINK without IFLA_IFNAME"),
            },
            Ok(Some((index, _))) => Message::Link(LinkEvent::Gone { index }),
        },
        NLMSG_DONE => Message::Done,
        NLMSG_ERROR => match u32_at(payload, 0) {
            // nlmsgerr.error is a negative errno (0 acknowledges).
            Some(e) => Message::Error(e.cast_signed().saturating_neg()),
            None => Message::Malformed("NLMSG_ERROR shorter than its errno"),
        },
        NLMSG_OVERRUN => Message::Overrun,
        // NLMSG_NOOP, and any other type a link subscription may carry.
        _ => Message::Ignored,
    }
}

/// (index, name) of a link message of the generic family; `None` for
/// another family.
fn link(payload: &[u8]) -> Result<Option<(u32, Option<String>)>, &'static str> {
    if payload.len() < IFINFOMSG_LEN {
        return Err("link message shorter than ifinfomsg");
    }
    if payload[0] != AF_UNSPEC {
        return Ok(None);
    }
    let index = u32_at(payload, 4).unwrap_or_default();
    if index.cast_signed() <= 0 {
        return Err("link message with a non-positive index");
    }
    let mut name = None;
    let mut attrs = &payload[align4(IFINFOMSG_LEN).min(payload.len())..];
    while !attrs.is_empty() {
        let (Some(len), Some(kind)) = (u16_at(attrs, 0), u16_at(attrs, 2)) else {
            return Err("truncated attribute header");
        };
        let len = usize::from(len);
        if len < NLA_HDRLEN || len > attrs.len() {
            return Err("attribute length");
        }
        if kind & NLA_TYPE_MASK == IFLA_IFNAME {
            let raw = &attrs[NLA_HDRLEN..len];
            let raw = raw.split(|&b| b == 0).next().unwrap_or_default();
            if raw.is_empty() {
                return Err("empty IFLA_IFNAME");
            }
            // Same reading as the datapath's interface listing, so a name
            // compares equal on both paths.
            name = Some(String::from_utf8_lossy(raw).into_owned());
        }
        attrs = &attrs[align4(len).min(attrs.len())..];
    }
    Ok(Some((index, name)))
}

/// An `RTM_GETLINK` dump request of every link (`ip link show`).
#[must_use]
pub fn getlink_dump_request(sequence: u32) -> [u8; NLMSG_HDRLEN + IFINFOMSG_LEN] {
    let mut req = [0u8; NLMSG_HDRLEN + IFINFOMSG_LEN];
    let len = u32::try_from(req.len()).expect("32 bytes");
    req[0..4].copy_from_slice(&len.to_ne_bytes());
    req[4..6].copy_from_slice(&RTM_GETLINK.to_ne_bytes());
    req[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    req[8..12].copy_from_slice(&sequence.to_ne_bytes());
    // Port 0: the kernel fills in the socket's own; the ifinfomsg stays
    // zero (AF_UNSPEC, no index: every link).
    req
}

#[cfg(test)]
mod tests {
    use super::*;
    use netlink_packet_core::{
        DoneMessage, ErrorMessage, NetlinkHeader, NetlinkMessage, NetlinkPayload,
    };
    use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
    use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
    use proptest::prelude::*;

    /// Serializes with netlink-packet-route: an encoder independent of the
    /// parser under test.
    fn encode(payload: NetlinkPayload<RouteNetlinkMessage>, flags: u16) -> Vec<u8> {
        let mut header = NetlinkHeader::default();
        header.flags = flags;
        let mut msg = NetlinkMessage::new(header, payload);
        msg.finalize();
        let mut buf = vec![0u8; msg.buffer_len()];
        msg.serialize(&mut buf);
        buf
    }

    fn link_msg(family: AddressFamily, index: u32, name: Option<&str>) -> LinkMessage {
        let mut m = LinkMessage::default();
        m.header.interface_family = family;
        m.header.index = index;
        m.header.flags = LinkFlags::Up | LinkFlags::Broadcast;
        m.attributes.push(LinkAttribute::Mtu(1500));
        if let Some(n) = name {
            m.attributes.push(LinkAttribute::IfName(n.to_owned()));
        }
        m.attributes.push(LinkAttribute::TxQueueLen(1000));
        m
    }

    /// A link message of the generic family.
    fn link(
        kind: fn(LinkMessage) -> RouteNetlinkMessage,
        index: u32,
        name: Option<&str>,
        flags: u16,
    ) -> Vec<u8> {
        let m = link_msg(AddressFamily::Unspec, index, name);
        encode(NetlinkPayload::InnerMessage(kind(m)), flags)
    }

    fn new_link(index: u32, name: &str) -> Vec<u8> {
        link(RouteNetlinkMessage::NewLink, index, Some(name), 0)
    }

    fn del_link(index: u32, name: &str) -> Vec<u8> {
        link(RouteNetlinkMessage::DelLink, index, Some(name), 0)
    }

    fn messages(datagram: &[u8]) -> Vec<Message> {
        parse_datagram(datagram)
            .into_iter()
            .map(|f| f.message)
            .collect()
    }

    fn present(index: u32, name: &str) -> LinkEvent {
        LinkEvent::Present {
            index,
            name: name.to_owned(),
        }
    }

    #[test]
    fn new_and_del_link() {
        assert_eq!(
            messages(&new_link(7, "tap0")),
            [Message::Link(present(7, "tap0"))]
        );
        assert_eq!(
            messages(&del_link(7, "tap0")),
            [Message::Link(LinkEvent::Gone { index: 7 })]
        );
    }

    #[test]
    fn a_dump_datagram_holds_several_messages_and_ends_with_done() {
        let mut d = new_link(1, "lo");
        d.extend(new_link(42, "tapa1b2c3d4-e5"));
        d.extend(encode(NetlinkPayload::Done(DoneMessage::default()), 0));
        assert_eq!(
            messages(&d),
            [
                Message::Link(present(1, "lo")),
                Message::Link(present(42, "tapa1b2c3d4-e5")),
                Message::Done,
            ]
        );
    }

    #[test]
    fn bridge_port_messages_are_not_link_events() {
        // Enslaving a tap to a bridge (or releasing it) sends AF_BRIDGE
        // NEWLINK/DELLINK for a link that keeps existing.
        for inner in [
            RouteNetlinkMessage::NewLink(link_msg(AddressFamily::Bridge, 9, Some("tap9"))),
            RouteNetlinkMessage::DelLink(link_msg(AddressFamily::Bridge, 9, Some("tap9"))),
        ] {
            assert_eq!(
                messages(&encode(NetlinkPayload::InnerMessage(inner), 0)),
                [Message::Ignored]
            );
        }
    }

    #[test]
    fn errors_acks_and_interrupted_dumps() {
        let mut err = ErrorMessage::default();
        err.code = std::num::NonZeroI32::new(-libc::EBUSY);
        assert_eq!(
            messages(&encode(NetlinkPayload::Error(err), 0)),
            [Message::Error(libc::EBUSY)]
        );
        assert_eq!(
            messages(&encode(NetlinkPayload::Error(ErrorMessage::default()), 0)),
            [Message::Error(0)]
        );
        let frames = parse_datagram(&link(
            RouteNetlinkMessage::NewLink,
            3,
            Some("tap3"),
            NLM_F_DUMP_INTR,
        ));
        assert!(frames[0].dump_interrupted);
        assert!(!parse_datagram(&new_link(3, "tap3"))[0].dump_interrupted);
    }

    #[test]
    fn a_new_link_without_a_name_is_malformed_and_the_next_message_still_reads() {
        let mut d = link(RouteNetlinkMessage::NewLink, 5, None, 0);
        d.extend(new_link(6, "tap6"));
        assert_eq!(
            messages(&d),
            [
                Message::Malformed("RTM_NEWLINK without IFLA_IFNAME"),
                Message::Link(present(6, "tap6")),
            ]
        );
    }

    #[test]
    fn a_broken_attribute_spoils_only_its_message() {
        let mut bad = new_link(5, "tap5");
        // The first attribute (IFLA_MTU, right after the ifinfomsg) claims
        // more bytes than the message holds.
        bad[NLMSG_HDRLEN + IFINFOMSG_LEN..][..2].copy_from_slice(&0xfff0u16.to_ne_bytes());
        bad.extend(new_link(6, "tap6"));
        assert_eq!(
            messages(&bad),
            [
                Message::Malformed("attribute length"),
                Message::Link(present(6, "tap6")),
            ]
        );
    }

    #[test]
    fn a_truncated_datagram_keeps_the_messages_before_the_cut() {
        let mut d = new_link(6, "tap6");
        let second = new_link(7, "tap7");
        d.extend(&second[..second.len() - 5]);
        assert_eq!(
            messages(&d),
            [
                Message::Link(present(6, "tap6")),
                Message::Malformed("netlink header length"),
            ]
        );
        assert_eq!(
            messages(&[0u8; 7]),
            [Message::Malformed("netlink header length")]
        );
        assert!(messages(&[]).is_empty());
    }

    #[test]
    fn a_short_link_header_or_a_bad_index_is_malformed() {
        let mut short = new_link(5, "tap5");
        short.truncate(NLMSG_HDRLEN + 8);
        let len = u32::try_from(short.len()).unwrap();
        short[0..4].copy_from_slice(&len.to_ne_bytes());
        assert_eq!(
            messages(&short),
            [Message::Malformed("link message shorter than ifinfomsg")]
        );
        assert_eq!(
            messages(&new_link(0, "tap0")),
            [Message::Malformed("link message with a non-positive index")]
        );
    }

    #[test]
    fn the_dump_request_is_an_rtm_getlink_dump() {
        let req = getlink_dump_request(77);
        let msg = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&req).unwrap();
        assert_eq!(msg.header.sequence_number, 77);
        assert_eq!(msg.header.flags, NLM_F_REQUEST | NLM_F_DUMP);
        let NetlinkPayload::InnerMessage(RouteNetlinkMessage::GetLink(link)) = msg.payload else {
            panic!("not RTM_GETLINK: {msg:?}");
        };
        assert_eq!(link.header.index, 0);
        assert_eq!(link.header.interface_family, AddressFamily::Unspec);
    }

    proptest! {
        /// Whatever the socket hands over, parsing returns (never panics)
        /// and each message is classified.
        #[test]
        fn random_datagrams_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = parse_datagram(&bytes);
        }

        /// A valid message with random bytes written over part of it.
        #[test]
        fn corrupted_messages_never_panic(at in 0usize..64, junk in proptest::collection::vec(any::<u8>(), 1..16)) {
            let mut d = new_link(12, "tap-prop");
            for (i, b) in junk.into_iter().enumerate() {
                if let Some(slot) = d.get_mut(at + i) {
                    *slot = b;
                }
            }
            let frames = parse_datagram(&d);
            prop_assert!(!frames.is_empty());
        }
    }
}
