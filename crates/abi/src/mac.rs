//! Ethernet MAC addresses and their `endpoints` key encoding.

use std::fmt;
use std::str::FromStr;

/// An Ethernet MAC address.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Mac(pub [u8; 6]);

/// A string that is not a MAC in `aa:bb:cc:dd:ee:ff` form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MacParseError(pub String);

impl fmt::Display for MacParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid MAC address {:?}: expected six hex octets separated by ':' or '-'",
            self.0
        )
    }
}

impl std::error::Error for MacParseError {}

impl Mac {
    /// The `endpoints` key: the MAC read as a 48-bit big-endian number, held
    /// in a u64 in host order (`02:00:00:00:00:01` → `0x020000000001`).
    #[must_use]
    pub fn to_u64(self) -> u64 {
        self.0
            .iter()
            .fold(0u64, |acc, b| (acc << 8) | u64::from(*b))
    }

    /// Inverse of [`Mac::to_u64`]; bits above 48 are ignored.
    #[must_use]
    pub fn from_u64(v: u64) -> Mac {
        let b = v.to_be_bytes();
        Mac([b[2], b[3], b[4], b[5], b[6], b[7]])
    }

    /// Group bit set (multicast or broadcast).
    #[must_use]
    pub fn is_multicast(self) -> bool {
        self.0[0] & 1 == 1
    }
}

impl FromStr for Mac {
    type Err = MacParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || MacParseError(s.to_owned());
        let mut out = [0u8; 6];
        let mut parts = s.split([':', '-']);
        for slot in &mut out {
            let part = parts.next().ok_or_else(err)?;
            // `from_str_radix` alone would also take a sign (`+1`).
            if part.len() != 2 || !part.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(err());
            }
            *slot = u8::from_str_radix(part, 16).map_err(|_| err())?;
        }
        if parts.next().is_some() {
            return Err(err());
        }
        Ok(Mac(out))
    }
}

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

impl fmt::Debug for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_key_encoding_matches_design() {
        let m: Mac = "02:00:00:00:00:01".parse().unwrap();
        assert_eq!(m.to_u64(), 0x0200_0000_0001);
        assert_eq!(Mac::from_u64(0x0200_0000_0001), m);
        let m: Mac = "FA-16-3E-AB-CD-EF".parse().unwrap();
        assert_eq!(m.to_string(), "fa:16:3e:ab:cd:ef");
        assert_eq!(m.to_u64(), 0xfa16_3eab_cdef);
    }

    #[test]
    fn rejects_malformed() {
        for bad in [
            "",
            "02:00:00:00:00",
            "02:00:00:00:00:01:02",
            "0g:00:00:00:00:01",
            "2:00:00:00:00:01",
            "+2:00:00:00:00:01",
        ] {
            assert!(bad.parse::<Mac>().is_err(), "{bad}");
        }
        assert!("01:00:5e:00:00:01".parse::<Mac>().unwrap().is_multicast());
        assert!(!"02:00:5e:00:00:01".parse::<Mac>().unwrap().is_multicast());
    }
}
