//! The state file's JSON shape (DESIGN §11) and its conversion to and from
//! the in-memory book.
//!
//! Schema history (additive changes load through serde defaults):
//! - 1: rows without entry stamps (they restore with stamp 0, which §4.3
//!   handles), no port-level absorbers, no unresolved buffer or tombstones.
//! - 2: stamps, port and port-proto absorbers, unresolved buffer, tombstones.
//! - 3: a baseline (row, waiting row, tombstone) says whether its entry is
//!   gone, its final reading applied (`gone`, written only when true;
//!   default `false`: a schema-2 tombstone's entry may still be in the
//!   kernel, and is released for deletion again).
//!   Later additive members, loaded through serde defaults by this schema:
//!   `absorbers.retained` (the MACs whose port series are kept after their
//!   eviction, and since when; absent: none).
//! - 4: `flows` is keyed by (flow key, CPU) (DESIGN §4.7): a row and a
//!   waiting row hold one baseline per kernel sub-entry (`subs`, each with
//!   its `cpu`), a tombstone names its `cpu`. An absent `cpu` is the folded
//!   entry of a per-CPU map of the previous layout: a schema-3 row's
//!   `last`/`stamp`/`gone` restore as that one sub-entry, which the retired
//!   per-CPU map's last drain (§4.4, §12) reads against exactly.

use std::sync::Arc;

use lachesis_abi::{EntryKey, FlowKey, FOLDED_CPU};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use super::fields::{counts, opt_counts, u64_string, DirectionField, L4Field, MacField, ZoneField};
use crate::absorbers::{
    Absorbers, Label, PortBucket, PortProtoBucket, ServerBucket, TenantBucket, TotalBucket,
};
use crate::attribution::CommittedPlan;
use crate::book::{Book, Row};
use crate::counts::Counts;
use crate::delta::Baseline;
use crate::interner::{InvalidInterner, TenantInterner};
use crate::subs::{Sub, Subs};
use crate::unresolved::{Pending, Tombstone};

/// The schema this build writes, and the newest it reads.
pub const SCHEMA: u32 = 4;

/// Only the version, read first so a newer file is refused before anything
/// else about it can fail.
#[derive(Debug, Deserialize)]
pub(crate) struct Probe {
    pub schema: u32,
}

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct KeyDto {
    pub(super) src_mac: MacField,
    pub(super) dst_mac: MacField,
    pub(super) eth_proto: u16,
    pub(super) direction: DirectionField,
    pub(super) zone: ZoneField,
    pub(super) l4: L4Field,
}

impl From<&FlowKey> for KeyDto {
    fn from(k: &FlowKey) -> Self {
        // Keys in the book were decoded on entry; the fallbacks are unreachable.
        KeyDto {
            src_mac: MacField(lachesis_abi::Mac(k.src_mac)),
            dst_mac: MacField(lachesis_abi::Mac(k.dst_mac)),
            eth_proto: k.eth_proto,
            direction: DirectionField(k.direction().unwrap_or(lachesis_abi::Direction::Tx)),
            zone: ZoneField(k.zone().unwrap_or(lachesis_abi::Zone::Miss)),
            l4: L4Field(k.l4().unwrap_or(lachesis_abi::L4Class::Reserved)),
        }
    }
}

impl From<&KeyDto> for FlowKey {
    fn from(k: &KeyDto) -> Self {
        FlowKey {
            src_mac: k.src_mac.0 .0,
            dst_mac: k.dst_mac.0 .0,
            eth_proto: k.eth_proto,
            direction: k.direction.0.code(),
            zone: k.zone.0.code(),
            l4: k.l4.0.code(),
            pad: 0,
        }
    }
}

#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "the signature serde's `skip_serializing_if` requires"
)]
fn is_false(b: &bool) -> bool {
    !*b
}

#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "the signature serde's `skip_serializing_if` requires"
)]
fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// A CPU in the file: absent for [`FOLDED_CPU`].
fn cpu_field(cpu: u16) -> Option<u16> {
    (cpu != FOLDED_CPU).then_some(cpu)
}

/// One sub-entry's baseline (schema 4).
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct SubDto {
    /// Absent: the folded entry of a per-CPU map of the previous layout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) cpu: Option<u16>,
    #[serde(with = "counts")]
    pub(super) last: Counts,
    #[serde(with = "u64_string", default)]
    pub(super) stamp: u64,
    #[serde(default, skip_serializing_if = "is_false")]
    pub(super) gone: bool,
}

impl SubDto {
    fn from_sub(s: &Sub) -> SubDto {
        SubDto {
            cpu: cpu_field(s.cpu),
            last: s.base.last,
            stamp: s.base.stamp,
            gone: s.base.gone,
        }
    }
}

/// A row's or waiting row's sub-entries: schema 4's `subs`, or the one
/// folded baseline a schema-3 (or older) file held at the top level.
pub(super) fn restore_subs(
    subs: Vec<SubDto>,
    legacy: Option<Counts>,
    stamp: u64,
    gone: bool,
) -> Subs {
    let mut out = Subs::default();
    if let Some(last) = legacy {
        out.push_restored(FOLDED_CPU, Baseline { last, stamp, gone });
    }
    for s in subs {
        out.push_restored(
            s.cpu.unwrap_or(FOLDED_CPU),
            Baseline {
                last: s.last,
                stamp: s.stamp,
                gone: s.gone,
            },
        );
    }
    out
}

/// A row as read back (rows are written by [`super::rows::write_rows`]).
#[derive(Debug, Deserialize)]
pub(super) struct RowDto {
    pub(super) key: KeyDto,
    #[serde(with = "counts")]
    pub(super) total: Counts,
    #[serde(default)]
    pub(super) subs: Vec<SubDto>,
    /// Schema 3 and older: the one per-CPU entry's baseline.
    #[serde(default, with = "opt_counts")]
    pub(super) last: Option<Counts>,
    #[serde(with = "u64_string", default)]
    pub(super) stamp: u64,
    #[serde(default)]
    pub(super) gone: bool,
}

#[derive(Debug, Serialize, Deserialize)]
struct PendingDto {
    key: KeyDto,
    #[serde(with = "counts")]
    acc: Counts,
    #[serde(default)]
    subs: Vec<SubDto>,
    /// Schema 3 and older: the one per-CPU entry's baseline.
    #[serde(default, with = "opt_counts", skip_serializing_if = "Option::is_none")]
    last: Option<Counts>,
    #[serde(with = "u64_string", default, skip_serializing_if = "is_zero")]
    stamp: u64,
    #[serde(default, skip_serializing_if = "is_false")]
    gone: bool,
}

#[derive(Debug, Serialize, Deserialize)]
struct TombstoneDto {
    key: KeyDto,
    /// Absent: the folded entry of a per-CPU map (schema 3 and older).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cpu: Option<u16>,
    #[serde(with = "counts")]
    last: Counts,
    #[serde(with = "u64_string")]
    stamp: u64,
    #[serde(default, skip_serializing_if = "is_false")]
    gone: bool,
    /// Its row was folded because its peer went ([`Tombstone::peer`]);
    /// absent (older files): `false`, whose final bytes go to `unknown`.
    #[serde(default, skip_serializing_if = "is_false")]
    peer: bool,
}

#[derive(Debug, Serialize, Deserialize)]
struct PortDto {
    vm_mac: MacField,
    server_id: Label,
    port_id: Label,
    tenant_id: Label,
    zone: ZoneField,
    external_network: Label,
    direction: DirectionField,
    #[serde(with = "counts")]
    counts: Counts,
}

#[derive(Debug, Serialize, Deserialize)]
struct PortProtoDto {
    vm_mac: MacField,
    server_id: Label,
    port_id: Label,
    tenant_id: Label,
    proto: L4Field,
    direction: DirectionField,
    #[serde(with = "counts")]
    counts: Counts,
}

#[derive(Debug, Serialize, Deserialize)]
struct ServerDto {
    server_id: Label,
    tenant_id: Label,
    zone: ZoneField,
    external_network: Label,
    direction: DirectionField,
    #[serde(with = "counts")]
    counts: Counts,
}

#[derive(Debug, Serialize, Deserialize)]
struct TenantDto {
    tenant_id: Label,
    zone: ZoneField,
    external_network: Label,
    direction: DirectionField,
    #[serde(with = "counts")]
    counts: Counts,
}

#[derive(Debug, Serialize, Deserialize)]
struct TotalDto {
    zone: ZoneField,
    external_network: Label,
    direction: DirectionField,
    #[serde(with = "counts")]
    counts: Counts,
}

#[derive(Debug, Serialize, Deserialize)]
struct UnknownDto {
    eth_proto: u16,
    direction: DirectionField,
    zone: ZoneField,
    l4: L4Field,
    #[serde(with = "counts")]
    counts: Counts,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct AbsorbersDto {
    #[serde(default)]
    port: Vec<PortDto>,
    #[serde(default)]
    port_proto: Vec<PortProtoDto>,
    #[serde(default)]
    server: Vec<ServerDto>,
    #[serde(default)]
    tenant: Vec<TenantDto>,
    #[serde(default)]
    total: Vec<TotalDto>,
    #[serde(default)]
    unknown: Vec<UnknownDto>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    retained: Vec<RetainedDto>,
}

#[derive(Debug, Serialize, Deserialize)]
struct RetainedDto {
    vm_mac: MacField,
    /// Unix second the retention started; "0" while not yet stamped.
    #[serde(with = "u64_string")]
    since: u64,
}

/// One absorber tier's bucket as the file holds it: each `*Dto` beside
/// the bucket it writes and reads, so every tier goes through the same
/// [`write_tier`] and [`read_tier`].
trait BucketDto: Sized {
    /// The in-memory key.
    type Bucket: Ord + std::hash::Hash;
    fn write(bucket: &Self::Bucket, counts: Counts) -> Self;
    /// The key (its labels shared through `labels`) and its counts.
    fn read(self, labels: &mut LabelPool) -> (Self::Bucket, Counts);
}

/// A tier's buckets, sorted so two flushes of the same state are
/// byte-identical.
fn write_tier<D: BucketDto>(tier: &FxHashMap<D::Bucket, Counts>) -> Vec<D> {
    sorted(tier.iter().collect::<Vec<_>>(), |(b, _)| *b)
        .into_iter()
        .map(|(b, c)| D::write(b, *c))
        .collect()
}

/// Adds the file's buckets of a tier to `tier`.
fn read_tier<D: BucketDto>(
    dtos: Vec<D>,
    tier: &mut FxHashMap<D::Bucket, Counts>,
    labels: &mut LabelPool,
) {
    for d in dtos {
        let (bucket, counts) = d.read(labels);
        tier.entry(bucket).or_default().add(counts);
    }
}

impl BucketDto for PortDto {
    type Bucket = PortBucket;
    fn write(b: &PortBucket, counts: Counts) -> Self {
        PortDto {
            vm_mac: MacField(b.vm_mac),
            server_id: b.server_id.clone(),
            port_id: b.port_id.clone(),
            tenant_id: b.tenant_id.clone(),
            zone: ZoneField(b.zone),
            external_network: b.external_network.clone(),
            direction: DirectionField(b.direction),
            counts,
        }
    }
    fn read(self, labels: &mut LabelPool) -> (PortBucket, Counts) {
        let bucket = PortBucket {
            vm_mac: self.vm_mac.0,
            server_id: labels.get(self.server_id),
            port_id: labels.get(self.port_id),
            tenant_id: labels.get(self.tenant_id),
            zone: self.zone.0,
            external_network: labels.get(self.external_network),
            direction: self.direction.0,
        };
        (bucket, self.counts)
    }
}

impl BucketDto for PortProtoDto {
    type Bucket = PortProtoBucket;
    fn write(b: &PortProtoBucket, counts: Counts) -> Self {
        PortProtoDto {
            vm_mac: MacField(b.vm_mac),
            server_id: b.server_id.clone(),
            port_id: b.port_id.clone(),
            tenant_id: b.tenant_id.clone(),
            proto: L4Field(b.proto),
            direction: DirectionField(b.direction),
            counts,
        }
    }
    fn read(self, labels: &mut LabelPool) -> (PortProtoBucket, Counts) {
        let bucket = PortProtoBucket {
            vm_mac: self.vm_mac.0,
            server_id: labels.get(self.server_id),
            port_id: labels.get(self.port_id),
            tenant_id: labels.get(self.tenant_id),
            proto: self.proto.0,
            direction: self.direction.0,
        };
        (bucket, self.counts)
    }
}

impl BucketDto for ServerDto {
    type Bucket = ServerBucket;
    fn write(b: &ServerBucket, counts: Counts) -> Self {
        ServerDto {
            server_id: b.server_id.clone(),
            tenant_id: b.tenant_id.clone(),
            zone: ZoneField(b.zone),
            external_network: b.external_network.clone(),
            direction: DirectionField(b.direction),
            counts,
        }
    }
    fn read(self, labels: &mut LabelPool) -> (ServerBucket, Counts) {
        let bucket = ServerBucket {
            server_id: labels.get(self.server_id),
            tenant_id: labels.get(self.tenant_id),
            zone: self.zone.0,
            external_network: labels.get(self.external_network),
            direction: self.direction.0,
        };
        (bucket, self.counts)
    }
}

impl BucketDto for TenantDto {
    type Bucket = TenantBucket;
    fn write(b: &TenantBucket, counts: Counts) -> Self {
        TenantDto {
            tenant_id: b.tenant_id.clone(),
            zone: ZoneField(b.zone),
            external_network: b.external_network.clone(),
            direction: DirectionField(b.direction),
            counts,
        }
    }
    fn read(self, labels: &mut LabelPool) -> (TenantBucket, Counts) {
        let bucket = TenantBucket {
            tenant_id: labels.get(self.tenant_id),
            zone: self.zone.0,
            external_network: labels.get(self.external_network),
            direction: self.direction.0,
        };
        (bucket, self.counts)
    }
}

impl BucketDto for TotalDto {
    type Bucket = TotalBucket;
    fn write(b: &TotalBucket, counts: Counts) -> Self {
        TotalDto {
            zone: ZoneField(b.zone),
            external_network: b.external_network.clone(),
            direction: DirectionField(b.direction),
            counts,
        }
    }
    fn read(self, labels: &mut LabelPool) -> (TotalBucket, Counts) {
        let bucket = TotalBucket {
            zone: self.zone.0,
            external_network: labels.get(self.external_network),
            direction: self.direction.0,
        };
        (bucket, self.counts)
    }
}

/// The `unknown` pseudo-tenant's rows: a flow key with zero MACs.
impl BucketDto for UnknownDto {
    type Bucket = FlowKey;
    fn write(k: &FlowKey, counts: Counts) -> Self {
        let kd = KeyDto::from(k);
        UnknownDto {
            eth_proto: k.eth_proto,
            direction: kd.direction,
            zone: kd.zone,
            l4: kd.l4,
            counts,
        }
    }
    fn read(self, _: &mut LabelPool) -> (FlowKey, Counts) {
        let key = FlowKey {
            eth_proto: self.eth_proto,
            direction: self.direction.0.code(),
            zone: self.zone.0.code(),
            l4: self.l4.0.code(),
            ..FlowKey::default()
        };
        (key, self.counts)
    }
}

impl AbsorbersDto {
    fn from_absorbers(a: &Absorbers) -> AbsorbersDto {
        AbsorbersDto {
            port: write_tier(&a.port),
            port_proto: write_tier(&a.port_proto),
            server: write_tier(&a.server),
            tenant: write_tier(&a.tenant),
            total: write_tier(&a.total),
            unknown: write_tier(&a.unknown),
            retained: sorted(a.retained.iter().collect::<Vec<_>>(), |(m, _)| **m)
                .into_iter()
                .map(|(m, since)| RetainedDto {
                    vm_mac: MacField(*m),
                    since: *since,
                })
                .collect(),
        }
    }

    fn into_absorbers(self) -> Absorbers {
        let mut a = Absorbers::default();
        // Labels repeat across thousands of buckets: share one allocation each.
        let mut labels = LabelPool::default();
        read_tier(self.port, &mut a.port, &mut labels);
        read_tier(self.port_proto, &mut a.port_proto, &mut labels);
        read_tier(self.server, &mut a.server, &mut labels);
        read_tier(self.tenant, &mut a.tenant, &mut labels);
        read_tier(self.total, &mut a.total, &mut labels);
        read_tier(self.unknown, &mut a.unknown, &mut labels);
        for r in self.retained {
            a.retained.insert(r.vm_mac.0, r.since);
        }
        a
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct ProjectDto {
    project: String,
    id: u32,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct InternerDto {
    next: u32,
    projects: Vec<ProjectDto>,
}

/// The whole file.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct FileDto {
    schema: u32,
    /// Written by [`super::rows::write_rows`], not by serde (it is most of the file).
    #[serde(default, skip_serializing)]
    rows: Vec<RowDto>,
    #[serde(default)]
    unresolved: Vec<PendingDto>,
    #[serde(default)]
    tombstones: Vec<TombstoneDto>,
    #[serde(default)]
    absorbers: AbsorbersDto,
    #[serde(default)]
    tenants: InternerDto,
    /// The agent's last committed plan, opaque here.
    #[serde(default)]
    plan: CommittedPlan,
}

fn sorted<T, K: Ord>(mut v: Vec<T>, key: impl Fn(&T) -> K) -> Vec<T> {
    v.sort_by_key(key);
    v
}

impl FileDto {
    /// Builds the file from a book copy. Sorted so two flushes of the same
    /// state are byte-identical (diffable, testable).
    pub(crate) fn from_book(book: &Book, plan: CommittedPlan) -> FileDto {
        FileDto {
            schema: SCHEMA,
            rows: Vec::new(),
            unresolved: sorted(book.unresolved.iter().collect::<Vec<_>>(), |(k, _)| **k)
                .into_iter()
                .map(|(k, p)| PendingDto {
                    key: k.into(),
                    acc: p.acc,
                    subs: p.subs.iter().map(SubDto::from_sub).collect(),
                    last: None,
                    stamp: 0,
                    gone: false,
                })
                .collect(),
            tombstones: sorted(book.tombstones.iter().collect::<Vec<_>>(), |(k, _)| **k)
                .into_iter()
                .map(|(k, t)| TombstoneDto {
                    key: (&k.key).into(),
                    cpu: cpu_field(k.cpu),
                    last: t.base.last,
                    stamp: t.base.stamp,
                    gone: t.base.gone,
                    peer: t.peer,
                })
                .collect(),
            absorbers: AbsorbersDto::from_absorbers(&book.absorbers),
            tenants: InternerDto {
                next: book.interner.next_id(),
                projects: book
                    .interner
                    .iter()
                    .map(|(p, id)| ProjectDto {
                        project: p.to_owned(),
                        id,
                    })
                    .collect(),
            },
            plan,
        }
    }

    /// The schema the file declares.
    pub(crate) fn schema(&self) -> u32 {
        self.schema
    }

    /// Converts into a book and the plan section.
    pub(crate) fn into_book(self) -> Result<(Book, CommittedPlan), InvalidInterner> {
        let mut book = Book::default();
        for r in self.rows {
            book.rows.insert(
                (&r.key).into(),
                Row {
                    total: r.total,
                    subs: restore_subs(r.subs, r.last, r.stamp, r.gone),
                },
            );
        }
        for p in self.unresolved {
            book.unresolved.insert(
                (&p.key).into(),
                Pending {
                    acc: p.acc,
                    subs: restore_subs(p.subs, p.last, p.stamp, p.gone),
                    first_seen_ns: 0,
                    last_active_ns: 0,
                },
            );
        }
        for t in self.tombstones {
            book.tombstones.insert(
                EntryKey::new((&t.key).into(), t.cpu.unwrap_or(FOLDED_CPU)),
                Tombstone {
                    base: Baseline {
                        last: t.last,
                        stamp: t.stamp,
                        gone: t.gone,
                    },
                    peer: t.peer,
                },
            );
        }
        book.absorbers = self.absorbers.into_absorbers();
        book.interner = TenantInterner::from_pairs(
            self.tenants.projects.into_iter().map(|p| (p.project, p.id)),
            self.tenants.next,
        )?;
        Ok((book, self.plan))
    }
}

#[derive(Default)]
struct LabelPool(rustc_hash::FxHashSet<Arc<str>>);

impl LabelPool {
    fn get(&mut self, l: Label) -> Label {
        if let Some(k) = self.0.get(&l) {
            return k.clone();
        }
        self.0.insert(l.clone());
        l
    }
}
