//! Reading B-epsilon nodes from disk, with no lock held: a shell, a
//! partition, a probed segment or a slice one at a time, or the misses of
//! a batch of gets (`many.rs`) or of one scan step (`Miss::Batch`) through
//! one queue ([`crate::store::pager::Pager::read_ranges`]), then cached
//! and pinned for the read's next try.

use super::format;
use super::miss::Miss;
use super::node::{Node, Part};
use super::slice::{self, Slices};
use crate::error::{Error, Result};
use crate::index::Index;
use crate::store::cache::PidMap;
use crate::store::extent::Extent;
use crate::store::image::Image;
use crate::store::page::Kind;
use crate::store::pager::Pager;
use std::collections::HashSet;
use std::sync::Arc;

/// A corrupt B-epsilon node at `ext`, saying `what`.
pub(super) fn corrupt(pager: &Pager, ext: &Extent, what: String) -> Error {
    pager.corrupt(ext.first_page, format!("B-epsilon node: {what}"))
}

/// The shell (header, directory, pivots, child references, filters) of the
/// node at `ext`: its first page, plus the rest of the shell if it is longer.
pub fn read_shell(pager: &Pager, ext: &Extent) -> Result<Node> {
    read_shell_counted(pager, ext).map(|r| r.0)
}

/// `read_shell`, with the reads it took and their bytes (whole pages).
pub(super) fn read_shell_counted(pager: &Pager, ext: &Extent) -> Result<(Node, u64, u64)> {
    let first = (pager.extent_cap() as u64).min(ext.len_bytes);
    let mut b = pager.read_range(ext, Kind::BEpsilon, 0, first)?;
    let want = format::shell_len(&b).map_err(|w| corrupt(pager, ext, w))?;
    if want as u64 > ext.len_bytes {
        return Err(corrupt(
            pager,
            ext,
            format!("shell of {want} bytes in a node of {}", ext.len_bytes),
        ));
    }
    let (mut reads, mut bytes) = (1, pager.ps as u64);
    if want > b.len() {
        // The rest only: the first page is verified and held already.
        let rest = want as u64 - first;
        b.extend(pager.read_range(ext, Kind::BEpsilon, first, rest)?);
        reads += 1;
        bytes += ext.pages_of_range(first, rest, pager.ps).1 * pager.ps as u64;
    }
    assert!(b.len() >= want);
    let n =
        format::decode_shell(&b, ext.len_bytes, pager.ps).map_err(|w| corrupt(pager, ext, w))?;
    Ok((n, reads, bytes))
}

/// Partition `i` of `n` (the node at `ext`), read alone and verified.
pub fn read_part(pager: &Pager, ext: &Extent, n: &Node, i: usize) -> Result<Part> {
    let d = &n.dir[i];
    let c = if d.comp_bytes == 0 {
        Vec::new()
    } else {
        pager.read_range(ext, Kind::BEpsilon, d.offset as u64, d.comp_bytes as u64)?
    };
    format::decode_part(n, i, c.into())
        .map_err(|w| corrupt(pager, ext, format!("partition {i}: {w}")))
}

/// A read one round queues.
pub(super) enum Want {
    Shell(Extent),
    Part(Extent, usize, Arc<Node>),
    /// For slot `.0`: the segment `.4` (offset, length, index) of
    /// partition `.2` of the node at `.1`; `None` when no segment can hold
    /// the key `.5` (nothing to read).
    Probe(
        usize,
        Extent,
        usize,
        Arc<Node>,
        Option<(u64, u64, Option<usize>)>,
        Vec<u8>,
    ),
    /// Segment `.3` of buffer `.1` of the node at `.0` (a scan's slice).
    Slice(Extent, usize, Arc<Node>, usize),
}

/// The read a miss of slot `k` needs, unless another key of the round
/// already asked for the same shell or partition (`seen`).
pub(super) fn want_of(k: usize, m: Miss, seen: &mut HashSet<(u64, usize)>) -> Option<Want> {
    match m {
        Miss::Shell(ext) => seen
            .insert((ext.first_page, usize::MAX))
            .then_some(Want::Shell(ext)),
        Miss::Part(ext, i, n) => seen
            .insert((ext.first_page, i))
            .then_some(Want::Part(ext, i, n)),
        Miss::Probe(ext, i, n, key) => {
            let d = &n.dir[i];
            assert!(d.comp_bytes > 0, "probing an empty partition");
            let segs = super::segment::of(n.segs.as_deref(), i);
            let seg = super::segment::locate(d, segs, &key);
            Some(Want::Probe(k, ext, i, n, seg, key))
        }
        Miss::Slice(ext, i, n, seg) => seen
            .insert((ext.first_page, i))
            .then_some(Want::Slice(ext, i, n, seg)),
        Miss::Batch(_) => unreachable!("a batch within a batch"),
    }
}

/// The byte range of the node's extent a want reads, if any.
fn range_of(w: &Want, extent_cap: u64) -> Option<(Extent, u64, u64)> {
    match w {
        Want::Shell(ext) => Some((*ext, 0, extent_cap.min(ext.len_bytes))),
        Want::Part(ext, i, n) => {
            let d = &n.dir[*i];
            (d.comp_bytes > 0).then_some((*ext, d.offset as u64, d.comp_bytes as u64))
        }
        Want::Probe(_, ext, i, n, seg, _) => {
            let (off, len, _) = (*seg)?;
            Some((*ext, n.dir[*i].offset as u64 + off, len))
        }
        Want::Slice(ext, i, n, seg) => {
            let (at, len) = slice::range(n, *i, *seg);
            Some((*ext, at, len))
        }
    }
}

/// Reads every want's range through one queue: per want its bytes (empty
/// when it reads nothing), or its read's failure. Never empty for wants.
pub(super) fn fetch(ix: &Index, wants: &[Want]) -> Result<Vec<Result<Vec<u8>>>> {
    assert!(!wants.is_empty());
    let pager = &ix.store.pager;
    let ranges: Vec<Option<(Extent, u64, u64)>> = wants
        .iter()
        .map(|w| range_of(w, pager.extent_cap() as u64))
        .collect();
    let reqs: Vec<(Extent, u64, u64)> = ranges.iter().flatten().copied().collect();
    let mut read = pager.read_ranges(&reqs, Kind::BEpsilon)?.into_iter();
    let out: Vec<Result<Vec<u8>>> = ranges
        .iter()
        .map(|r| match r {
            Some(_) => read.next().expect("a read per range"),
            None => Ok(Vec::new()),
        })
        .collect();
    assert!(read.next().is_none() && out.len() == wants.len());
    Ok(out)
}

/// Reads the shells, partitions and slices one scan step misses
/// (`Miss::Batch`) through one queue; caches and pins the nodes and
/// keeps the slices in `kept` (under reuse tag `.1`). False when an extent
/// was reused meanwhile: nothing is kept, the caller starts again.
pub fn read_misses(
    ix: &Index,
    misses: Vec<Miss>,
    pinned: &mut PidMap<Arc<Node>>,
    kept: (&mut Slices, u64),
    still: impl Fn() -> bool,
) -> Result<bool> {
    // A path's misses, and the basements read ahead.
    let most = super::MAX_HEIGHT as usize + 1 + super::miss::MAX_AHEAD_BASEMENTS;
    assert!(misses.len() >= 2 && misses.len() <= most);
    let mut seen = HashSet::new();
    let wants: Vec<Want> = misses
        .into_iter()
        .filter_map(|m| want_of(usize::MAX, m, &mut seen))
        .collect();
    (1..wants.len()).for_each(|_| ix.store.cache.count_miss());
    let got = fetch(ix, &wants)?;
    if !still() {
        return Ok(false);
    }
    let probes = install(ix, wants, got, pinned, Some(kept), still)?;
    assert!(probes.is_empty(), "a scan does not probe");
    Ok(true)
}

/// What a probe read for slot `.0`: (slot, node's first page, partition,
/// the probed key's messages).
pub(super) type Probed = (usize, u64, usize, Arc<Part>);

/// Caches and pins the shells and partitions read (a node's partitions
/// read in one round joined into one image), keeps the slices read in
/// `kept` (under its reuse tag), and returns what each probe found.
/// Requires: no page reuse since the round began.
pub(super) fn install(
    ix: &Index,
    wants: Vec<Want>,
    got: Vec<Result<Vec<u8>>>,
    pinned: &mut PidMap<Arc<Node>>,
    mut kept: Option<(&mut Slices, u64)>,
    still: impl Fn() -> bool,
) -> Result<Vec<Probed>> {
    assert_eq!(wants.len(), got.len());
    let (pager, counters) = (&ix.store.pager, &ix.counters.bepsilon_reads);
    let ps = pager.ps;
    let mut nodes: PidMap<Node> = PidMap::default();
    let mut probes = Vec::new();
    for (w, bytes) in wants.into_iter().zip(got) {
        let b = bytes?;
        match w {
            Want::Shell(ext) => {
                let n = shell_from(ix, &ext, &b)?;
                nodes.insert(ext.first_page, n);
            }
            Want::Part(ext, i, n) => {
                let d = &n.dir[i];
                if d.comp_bytes > 0 {
                    let pages = ext.pages_of_range(d.offset as u64, d.comp_bytes as u64, ps);
                    counters.part_read(n.height, pages.1 * ps as u64);
                }
                let p = format::decode_part(&n, i, b.into()).map_err(|w| {
                    pager.corrupt(
                        ext.first_page,
                        format!("B-epsilon node: partition {i}: {w}"),
                    )
                })?;
                let base = nodes
                    .remove(&ext.first_page)
                    .unwrap_or_else(|| (*n).clone());
                nodes.insert(ext.first_page, base.with_part(i, p));
            }
            Want::Probe(k, ext, i, n, seg, key) => {
                let p = probed(ix, &ext, &n, i, seg, &b, &key)?;
                probes.push((k, ext.first_page, i, Arc::new(p)));
            }
            Want::Slice(ext, i, n, seg) => {
                let s = slice::decode(ix, &ext, &n, (i, seg), &b)?;
                let (kept, tag) = kept.as_mut().expect("slices are read for a cursor");
                kept.keep(s, *tag);
            }
        }
    }
    for (first_page, n) in nodes {
        let n = Arc::new(n);
        ix.store
            .cache
            .replace(first_page, n.clone() as Image, &still);
        pinned.insert(first_page, n);
    }
    Ok(probes)
}

/// The node whose shell starts with `b` (its first `extent_cap` bytes),
/// read in full when the shell is longer (counted).
fn shell_from(ix: &Index, ext: &Extent, b: &[u8]) -> Result<Node> {
    let pager = &ix.store.pager;
    let corrupt = |w: String| pager.corrupt(ext.first_page, format!("B-epsilon node: {w}"));
    let want = format::shell_len(b).map_err(corrupt)?;
    if want > b.len() {
        // Rare: a shell longer than a page; read as a get would.
        let (n, reads, bytes) = read_shell_counted(pager, ext)?;
        ix.counters
            .bepsilon_reads
            .shell_read(n.height, reads, bytes);
        return Ok(n);
    }
    let n = format::decode_shell(b, ext.len_bytes, pager.ps).map_err(corrupt)?;
    let pages = ext.pages_of_range(0, b.len() as u64, pager.ps).1;
    ix.counters
        .bepsilon_reads
        .shell_read(n.height, 1, pages * pager.ps as u64);
    Ok(n)
}

/// What partition `i` of `n` holds for `key`, out of the segment `seg`
/// read as `c` (as a get's probe scans it; counted).
fn probed(
    ix: &Index,
    ext: &Extent,
    n: &Node,
    i: usize,
    seg: Option<(u64, u64, Option<usize>)>,
    c: &[u8],
    key: &[u8],
) -> Result<Part> {
    let Some((off, len, seg)) = seg else {
        return Ok(match n.is_leaf() {
            true => Part::Packed(super::packed::Packed::default()),
            false => Part::Buf(super::buffer::Buffer::new()),
        });
    };
    let pager = &ix.store.pager;
    let (_, pages) = ext.pages_of_range(n.dir[i].offset as u64 + off, len, pager.ps);
    ix.counters
        .bepsilon_reads
        .probe_read(n.height, pages * pager.ps as u64);
    let mut raw = Vec::new();
    let part = match n.is_leaf() {
        true => format::probe_basement(n, (i, seg), c, &mut raw, key).map(Part::Packed),
        false => format::probe_buffer(n, (i, seg), c, &mut raw, key).map(Part::Buf),
    };
    part.map_err(|w| {
        let what = format!("B-epsilon node: partition {i}: {w}");
        pager.corrupt(ext.first_page, what)
    })
}
