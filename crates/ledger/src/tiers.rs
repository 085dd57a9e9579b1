//! Late binding (DESIGN §9, §10): turns rows and absorbers into the billing
//! tiers under an attribution. The ledger keeps the tiers of its last flush
//! as the durable view; the export only encodes them.
//!
//! Each row's binding is resolved once per distinct VM MAC and label strings
//! are interned to small ids, so the per-row work is a few integer-keyed hash
//! adds. Ids are re-ranked in string order at the end, which makes the output
//! sorted and deterministic without comparing strings per series.

use lachesis_abi::{Direction, L4Class, Mac, Zone};
use rustc_hash::FxHashMap;

use crate::attribution::{Attribution, NONE, UNKNOWN_TENANT};
use crate::book::Book;
use crate::counts::Counts;
use crate::flow::decode;

/// Label strings of one aggregation, addressed by rank (string order).
#[derive(Debug, Default)]
pub(crate) struct Strings<'a> {
    ids: FxHashMap<&'a str, u32>,
    list: Vec<&'a str>,
}

impl<'a> Strings<'a> {
    fn id(&mut self, s: &'a str) -> u32 {
        if let Some(id) = self.ids.get(s) {
            return *id;
        }
        let id = self.list.len() as u32;
        self.list.push(s);
        self.ids.insert(s, id);
        id
    }

    /// Sorts the strings and returns `rank[id]`.
    fn rank(&mut self) -> Vec<u32> {
        let mut order: Vec<u32> = (0..self.list.len() as u32).collect();
        order.sort_unstable_by_key(|i| self.list[*i as usize]);
        let mut rank = vec![0u32; order.len()];
        let sorted: Vec<&'a str> = order.iter().map(|i| self.list[*i as usize]).collect();
        for (r, id) in order.iter().enumerate() {
            rank[*id as usize] = r as u32;
        }
        self.list = sorted;
        rank
    }
}

/// Label strings of finished tiers, owned so that the tiers can outlive the
/// book and attribution they were computed from (the durable view).
#[derive(Debug, Default)]
pub(crate) struct Labels(Vec<Box<str>>);

impl Labels {
    /// The string of a rank.
    pub(crate) fn get(&self, rank: u32) -> &str {
        &self.0[rank as usize]
    }
}

/// One tier: label-id arrays with their counts, sorted after `finish`.
pub(crate) type Tier<const N: usize> = Vec<([u32; N], Counts)>;

/// All billing tiers of one aggregation.
#[derive(Debug, Default)]
pub(crate) struct Tiers {
    pub strings: Labels,
    /// `[zone, external_network, direction]`
    pub total: Tier<3>,
    /// `[tenant_id, zone, external_network, direction]`
    pub tenant: Tier<4>,
    /// `[server_id, tenant_id, zone, external_network, direction]`
    pub server: Tier<5>,
    /// `[server_id, port_id, tenant_id, zone, external_network, direction]`
    pub port: Tier<6>,
    /// `[server_id, port_id, tenant_id, proto, direction]`
    pub port_proto: Tier<5>,
}

// Positions holding string ids (the others are zone/direction/proto codes).
const TOTAL_S: [bool; 3] = [false, true, false];
const TENANT_S: [bool; 4] = [true, false, true, false];
const SERVER_S: [bool; 5] = [true, true, false, true, false];
const PORT_S: [bool; 6] = [true, true, true, false, true, false];
const PORT_PROTO_S: [bool; 5] = [true, true, true, false, false];

#[derive(Clone, Copy)]
struct Bound {
    tenant: u32,
    server: u32,
    port: u32,
    fallback: Option<u32>,
}

#[derive(Default)]
struct Acc {
    total: FxHashMap<[u32; 3], Counts>,
    tenant: FxHashMap<[u32; 4], Counts>,
    server: FxHashMap<[u32; 5], Counts>,
    port: FxHashMap<[u32; 6], Counts>,
    port_proto: FxHashMap<[u32; 5], Counts>,
}

fn add<const N: usize>(m: &mut FxHashMap<[u32; N], Counts>, k: [u32; N], c: Counts) {
    m.entry(k).or_default().add(c);
}

fn z(zone: Zone) -> u32 {
    u32::from(zone.code())
}

fn d(dir: Direction) -> u32 {
    u32::from(dir.code())
}

fn p(l4: L4Class) -> u32 {
    u32::from(l4.code())
}

impl Acc {
    fn with_capacity(n: usize) -> Acc {
        let h = || rustc_hash::FxBuildHasher;
        Acc {
            total: FxHashMap::with_capacity_and_hasher(64, h()),
            tenant: FxHashMap::with_capacity_and_hasher(n / 8 + 64, h()),
            server: FxHashMap::with_capacity_and_hasher(n / 4 + 64, h()),
            port: FxHashMap::with_capacity_and_hasher(n / 2 + 64, h()),
            port_proto: FxHashMap::with_capacity_and_hasher(n / 2 + 64, h()),
        }
    }
}

fn finish<const N: usize>(
    m: FxHashMap<[u32; N], Counts>,
    is_str: [bool; N],
    rank: &[u32],
) -> Tier<N> {
    let mut v: Tier<N> = m
        .into_iter()
        .map(|(mut k, c)| {
            for (slot, s) in k.iter_mut().zip(is_str) {
                if s {
                    *slot = rank[*slot as usize];
                }
            }
            (k, c)
        })
        .collect();
    v.sort_unstable_by_key(|(k, _)| *k);
    v
}

/// Adds the absorbers and derives each tier from the one below it.
fn build_upper_tiers<'a>(
    acc: &mut Acc,
    strings: &mut Strings<'a>,
    book: &'a Book,
    none: u32,
    unknown: u32,
) {
    // Each tier is built from the one below plus its own absorber, so a row
    // costs two hash adds and the upper tiers only as many as there are
    // series below them.
    let a = &book.absorbers;
    for (b, c) in &a.port {
        let k = [
            strings.id(&b.server_id),
            strings.id(&b.port_id),
            strings.id(&b.tenant_id),
            z(b.zone),
            strings.id(&b.external_network),
            d(b.direction),
        ];
        add(&mut acc.port, k, *c);
    }
    for (b, c) in &a.port_proto {
        let (s, po, t) = (
            strings.id(&b.server_id),
            strings.id(&b.port_id),
            strings.id(&b.tenant_id),
        );
        add(
            &mut acc.port_proto,
            [s, po, t, p(b.proto), d(b.direction)],
            *c,
        );
    }
    for (k, c) in &acc.port {
        add(&mut acc.server, [k[0], k[2], k[3], k[4], k[5]], *c);
    }
    for (b, c) in &a.server {
        let (s, t, e) = (
            strings.id(&b.server_id),
            strings.id(&b.tenant_id),
            strings.id(&b.external_network),
        );
        add(&mut acc.server, [s, t, z(b.zone), e, d(b.direction)], *c);
    }
    for (k, c) in &acc.server {
        add(&mut acc.tenant, [k[1], k[2], k[3], k[4]], *c);
    }
    for (b, c) in &a.tenant {
        let (t, e) = (strings.id(&b.tenant_id), strings.id(&b.external_network));
        add(&mut acc.tenant, [t, z(b.zone), e, d(b.direction)], *c);
    }
    for (k, c) in &a.unknown {
        if let Some(dk) = decode(k) {
            add(
                &mut acc.tenant,
                [unknown, z(dk.zone), none, d(dk.direction)],
                *c,
            );
        }
    }
    for (k, c) in &acc.tenant {
        add(&mut acc.total, [k[1], k[2], k[3]], *c);
    }
    for (b, c) in &a.total {
        let e = strings.id(&b.external_network);
        add(&mut acc.total, [z(b.zone), e, d(b.direction)], *c);
    }
}

/// Aggregates the book into the five billing tiers.
pub(crate) fn aggregate(book: &Book, attr: &dyn Attribution) -> Tiers {
    let mut strings = Strings::default();
    let none = strings.id(NONE);
    let unknown = strings.id(UNKNOWN_TENANT);
    let mut acc = Acc::with_capacity(book.rows.len());
    let mut bindings: FxHashMap<Mac, Option<Bound>> = FxHashMap::default();
    let mut routers: FxHashMap<Mac, Option<u32>> = FxHashMap::default();

    for (key, row) in &book.rows {
        let Some(dk) = decode(key) else { continue };
        let (zone, dir) = (z(dk.zone), d(dk.direction));
        let bound = *bindings.entry(dk.vm_mac).or_insert_with(|| {
            attr.binding(dk.vm_mac).map(|b| Bound {
                tenant: strings.id(b.tenant_id),
                server: strings.id(b.server_id),
                port: strings.id(b.port_id),
                fallback: b.fallback_external_network.map(|f| strings.id(f)),
            })
        });
        let c = row.total;
        let Some(b) = bound else {
            // Not bound (a caller removed a binding without settling): shown
            // under `unknown`, exactly where a settle would have put it.
            add(&mut acc.tenant, [unknown, zone, none, dir], c);
            continue;
        };
        let ext = if dk.zone == Zone::External {
            routers
                .entry(dk.peer_mac)
                .or_insert_with(|| {
                    attr.router_external_network(dk.peer_mac)
                        .map(|r| strings.id(r))
                })
                .or(b.fallback)
                .unwrap_or(none)
        } else {
            none
        };
        add(
            &mut acc.port,
            [b.server, b.port, b.tenant, zone, ext, dir],
            c,
        );
        add(
            &mut acc.port_proto,
            [b.server, b.port, b.tenant, p(dk.l4), dir],
            c,
        );
    }

    build_upper_tiers(&mut acc, &mut strings, book, none, unknown);

    let rank = strings.rank();
    Tiers {
        total: finish(acc.total, TOTAL_S, &rank),
        tenant: finish(acc.tenant, TENANT_S, &rank),
        server: finish(acc.server, SERVER_S, &rank),
        port: finish(acc.port, PORT_S, &rank),
        port_proto: finish(acc.port_proto, PORT_PROTO_S, &rank),
        strings: Labels(strings.list.iter().map(|s| Box::from(*s)).collect()),
    }
}

/// Label value of a zone code stored in a tier key.
pub(crate) fn zone_label(code: u32) -> &'static str {
    Zone::from_code(code as u8).map_or("invalid", Zone::label)
}

/// Label value of a direction code stored in a tier key.
pub(crate) fn direction_label(code: u32) -> &'static str {
    Direction::from_code(code as u8).map_or("invalid", Direction::label)
}

/// Label value of an L4 code stored in a tier key.
pub(crate) fn proto_label(code: u32) -> &'static str {
    L4Class::from_code(code as u8).map_or("invalid", L4Class::label)
}
