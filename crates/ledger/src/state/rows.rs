//! The `rows` array of the state file, written by hand: rows are most of
//! the file and every string in them (hex MACs, decimal digits, stable code
//! labels) needs no escaping, which serde would still scan for. The output
//! is exactly what [`super::schema`]'s row type reads back.

use lachesis_abi::{FlowKey, FOLDED_CPU};

use super::schema::KeyDto;
use crate::book::{Book, Row};
use crate::counts::Counts;

const HEX: &[u8; 16] = b"0123456789abcdef";

fn push_mac(out: &mut Vec<u8>, mac: [u8; 6]) {
    for (i, b) in mac.iter().enumerate() {
        if i > 0 {
            out.push(b':');
        }
        out.push(HEX[usize::from(b >> 4)]);
        out.push(HEX[usize::from(b & 0xf)]);
    }
}

fn push_u64_str(out: &mut Vec<u8>, v: u64) {
    out.push(b'"');
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
    out.push(b'"');
}

fn push_counts(out: &mut Vec<u8>, c: Counts) {
    out.extend_from_slice(b"{\"bytes\":");
    push_u64_str(out, c.bytes);
    out.extend_from_slice(b",\"packets\":");
    push_u64_str(out, c.packets);
    out.push(b'}');
}

/// Appends the rows as a JSON array, sorted by key.
pub(crate) fn write_rows(out: &mut Vec<u8>, book: &Book) {
    let mut rows: Vec<(&FlowKey, &Row)> = book.rows.iter().collect();
    rows.sort_unstable_by_key(|(k, _)| **k);
    out.push(b'[');
    for (i, (k, r)) in rows.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let d = KeyDto::from(k);
        out.extend_from_slice(b"{\"key\":{\"src_mac\":\"");
        push_mac(out, k.src_mac);
        out.extend_from_slice(b"\",\"dst_mac\":\"");
        push_mac(out, k.dst_mac);
        out.extend_from_slice(b"\",\"eth_proto\":");
        out.extend_from_slice(itoa::Buffer::new().format(k.eth_proto).as_bytes());
        out.extend_from_slice(b",\"direction\":\"");
        out.extend_from_slice(d.direction.0.label().as_bytes());
        out.extend_from_slice(b"\",\"zone\":\"");
        out.extend_from_slice(d.zone.0.label().as_bytes());
        out.extend_from_slice(b"\",\"l4\":\"");
        out.extend_from_slice(d.l4.0.label().as_bytes());
        out.extend_from_slice(b"\"},\"total\":");
        push_counts(out, r.total);
        out.extend_from_slice(b",\"subs\":[");
        for (j, sub) in r.subs.iter().enumerate() {
            if j > 0 {
                out.push(b',');
            }
            out.push(b'{');
            if sub.cpu != FOLDED_CPU {
                out.extend_from_slice(b"\"cpu\":");
                out.extend_from_slice(itoa::Buffer::new().format(sub.cpu).as_bytes());
                out.push(b',');
            }
            out.extend_from_slice(b"\"last\":");
            push_counts(out, sub.base.last);
            out.extend_from_slice(b",\"stamp\":");
            push_u64_str(out, sub.base.stamp);
            if sub.base.gone {
                out.extend_from_slice(b",\"gone\":true");
            }
            out.push(b'}');
        }
        out.extend_from_slice(b"]}");
    }
    out.push(b']');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delta::Baseline;
    use crate::state::schema::{restore_subs, RowDto};
    use crate::subs::Subs;
    use lachesis_abi::{Direction, L4Class, Zone};

    #[test]
    fn hand_written_rows_read_back_through_serde() {
        let mut book = Book::default();
        let key = FlowKey {
            src_mac: [0xfa, 0x16, 0x3e, 0, 0x0a, 0xff],
            dst_mac: [2, 0, 0, 0, 0, 1],
            eth_proto: 0x86dd,
            direction: Direction::Rx.code(),
            zone: Zone::Shared.code(),
            l4: L4Class::Icmp.code(),
            pad: 0,
        };
        let gone = Baseline {
            last: Counts::new(7, 0),
            stamp: 123_456_789_012,
            gone: true,
        };
        let live = Baseline {
            last: Counts::new(u64::MAX - 1, 3),
            stamp: 5,
            gone: false,
        };
        let mut subs = Subs::one(FOLDED_CPU, gone);
        subs.push_restored(255, live);
        let row = Row {
            total: Counts::new(u64::MAX, 1 << 63),
            subs,
        };
        book.rows.insert(key, row.clone());
        let mut out = Vec::new();
        write_rows(&mut out, &book);
        let text = String::from_utf8(out.clone()).unwrap();
        assert!(text.contains(r#""src_mac":"fa:16:3e:00:0a:ff""#), "{text}");
        // The folded entry has no `cpu`; CPU 255's has.
        assert!(text.contains(r#""subs":[{"cpu":255,"last""#), "{text}");
        assert!(text.contains(r#"},{"last":{"bytes":"7""#), "{text}");
        let rows: Vec<RowDto> = serde_json::from_slice(&out).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(FlowKey::from(&rows[0].key), key);
        let r = rows.into_iter().next().unwrap();
        assert_eq!(r.total, row.total);
        assert_eq!(restore_subs(r.subs, r.last, r.stamp, r.gone), row.subs);
    }
}
