//! Crafted Ethernet frames. Checksums are left zero: the classifier never
//! reads them, and test-run frames never reach a socket.

use std::net::IpAddr;

use lachesis_abi::Mac;

/// IP protocol numbers used by the tests.
pub mod proto {
    /// ICMP.
    pub const ICMP: u8 = 1;
    /// TCP.
    pub const TCP: u8 = 6;
    /// UDP.
    pub const UDP: u8 = 17;
    /// ICMPv6.
    pub const ICMPV6: u8 = 58;
    /// GRE (an "other" protocol).
    pub const GRE: u8 = 47;
    /// IPv6 hop-by-hop options extension header.
    pub const HOPOPTS: u8 = 0;
}

/// What to put in a frame.
#[derive(Debug, Clone)]
pub struct Frame {
    /// Source MAC.
    pub src: Mac,
    /// Destination MAC.
    pub dst: Mac,
    /// One 802.1Q (0x8100) or 802.1ad (0x88a8) tag: (TPID, VLAN id).
    pub vlan: Option<(u16, u16)>,
    /// Source address; the family picks IPv4 or IPv6.
    pub src_ip: IpAddr,
    /// Destination address (same family as `src_ip`).
    pub dst_ip: IpAddr,
    /// IPv4 protocol / IPv6 next header.
    pub proto: u8,
    /// Bytes after the IP header.
    pub payload: usize,
}

impl Frame {
    /// A UDP frame between two endpoints.
    #[must_use]
    pub fn udp(src: Mac, dst: Mac, src_ip: IpAddr, dst_ip: IpAddr) -> Frame {
        Frame {
            src,
            dst,
            vlan: None,
            src_ip,
            dst_ip,
            proto: proto::UDP,
            payload: 64,
        }
    }

    /// Serialises the frame.
    #[must_use]
    pub fn bytes(&self) -> Vec<u8> {
        let mut f = Vec::with_capacity(64 + self.payload);
        f.extend_from_slice(&self.dst.0);
        f.extend_from_slice(&self.src.0);
        if let Some((tpid, vid)) = self.vlan {
            f.extend_from_slice(&tpid.to_be_bytes());
            f.extend_from_slice(&(vid & 0x0fff).to_be_bytes());
        }
        match (self.src_ip, self.dst_ip) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                f.extend_from_slice(&0x0800u16.to_be_bytes());
                let total = u16::try_from(20 + self.payload).unwrap_or(u16::MAX);
                f.extend_from_slice(&[0x45, 0]);
                f.extend_from_slice(&total.to_be_bytes());
                f.extend_from_slice(&[0, 0, 0x40, 0, 64, self.proto, 0, 0]);
                f.extend_from_slice(&s.octets());
                f.extend_from_slice(&d.octets());
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                f.extend_from_slice(&0x86ddu16.to_be_bytes());
                f.extend_from_slice(&[0x60, 0, 0, 0]);
                let len = u16::try_from(self.payload).unwrap_or(u16::MAX);
                f.extend_from_slice(&len.to_be_bytes());
                f.extend_from_slice(&[self.proto, 64]);
                f.extend_from_slice(&s.octets());
                f.extend_from_slice(&d.octets());
            }
            _ => panic!(
                "frame with mixed address families: {} → {}",
                self.src_ip, self.dst_ip
            ),
        }
        f.resize(f.len() + self.payload, 0xab);
        f
    }
}

/// A frame of another ethertype (ARP-sized), for the skipped path.
#[must_use]
pub fn non_ip(src: Mac, dst: Mac, ethertype: u16, len: usize) -> Vec<u8> {
    let mut f = Vec::with_capacity(len.max(14));
    f.extend_from_slice(&dst.0);
    f.extend_from_slice(&src.0);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.resize(len.max(14), 0);
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts() {
        let a: Mac = "02:00:00:00:00:01".parse().unwrap();
        let b: Mac = "02:00:00:00:00:02".parse().unwrap();
        let f = Frame::udp(
            a,
            b,
            "10.0.0.1".parse().unwrap(),
            "10.0.0.2".parse().unwrap(),
        )
        .bytes();
        assert_eq!(f.len(), 14 + 20 + 64);
        assert_eq!(&f[12..14], &[0x08, 0x00]);
        assert_eq!(f[14 + 9], proto::UDP);
        assert_eq!(&f[14 + 16..14 + 20], &[10, 0, 0, 2]);
        let mut v = Frame::udp(
            a,
            b,
            "2001:db8::1".parse().unwrap(),
            "2001:db8::2".parse().unwrap(),
        );
        v.vlan = Some((0x8100, 5));
        let f = v.bytes();
        assert_eq!(f.len(), 18 + 40 + 64);
        assert_eq!(&f[12..18], &[0x81, 0x00, 0, 5, 0x86, 0xdd]);
        assert_eq!(non_ip(a, b, 0x0806, 42).len(), 42);
    }
}
