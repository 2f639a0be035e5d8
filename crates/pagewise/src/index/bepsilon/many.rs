//! Batched gets (`Index::get_many`) on a B-epsilon tree. Every distinct key
//! of the batch descends ([`read::get_step`]) through one consistent view
//! per round, under the store's read protocol (docs/design.md,
//! "Concurrency"); the node shells, partitions and probed segments that
//! the blocked keys miss are read through one queue
//! ([`crate::store::pager::Pager::read_ranges`]) with no lock held, and the
//! next round resumes each blocked key where it stopped. The value extents
//! of the values found are read through one queue at the end. Each key's
//! answer is the one [`read::get`] gives: the same descent, the same
//! messages on the path resolved, the same reuse rules.

use super::format;
use super::node::{Node, Part};
use super::read::{self, Frozen, Miss, Resume, Step, Value, View};
use super::value::Form;
use crate::error::Result;
use crate::index::Index;
use crate::store::cache::PidMap;
use crate::store::extent::Extent;
use crate::store::image::Image;
use crate::store::page::Kind;
use crate::store::read::MAX_RESTARTS;
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Buffers one key probed: (node's first page, partition, its messages).
type Probes = Vec<(u64, usize, Arc<Part>)>;

/// One distinct key of a batch: where its descent stopped, what it probed,
/// and its stored value once found.
struct Slot<'k> {
    key: &'k [u8],
    resume: Option<Resume>,
    probed: Probes,
    found: Option<Result<(Option<Vec<u8>>, Form)>>,
}

/// A read one round queues.
enum Want {
    Shell(Extent),
    Part(Extent, usize, Arc<Node>),
    /// For slot `.0`: the segment `.4` (offset, length, index) of
    /// partition `.2` of the node at `.1`; `None` when no segment can hold
    /// the key (nothing to read).
    Probe(
        usize,
        Extent,
        usize,
        Arc<Node>,
        Option<(u64, u64, Option<usize>)>,
    ),
}

/// The values of `keys` in B-epsilon tree `tree` (live, or in the snapshot
/// `at`), in the caller's order; for every key what [`read::get`] answers.
/// Requires a batch small enough that the nodes it reads fit beside the
/// cache (`Index::get_many` chunks it).
pub fn get_many(
    ix: &Index,
    at: Option<&Frozen>,
    tree: &str,
    keys: &[&[u8]],
) -> Result<Vec<Option<Vec<u8>>>> {
    let mut uniq: Vec<&[u8]> = keys.to_vec();
    uniq.sort_unstable();
    uniq.dedup();
    let gen = ix.store.reuse_gen.load(Ordering::Acquire);
    let stored = stored_many(ix, at, tree, &uniq)?;
    let values = values_many(ix, at, tree, &uniq, stored, gen)?;
    assert_eq!(values.len(), uniq.len());
    let out: Vec<Option<Vec<u8>>> = keys
        .iter()
        .map(|k| values[uniq.binary_search(k).expect("a key of the batch")].clone())
        .collect();
    assert_eq!(out.len(), keys.len());
    Ok(out)
}

/// The stored value of each of `keys` (sorted, distinct) and the tree's
/// value form: rounds of [`round`] until every key is found, reading each
/// round's misses through one queue. A page reuse during a round's reads
/// drops everything read (as `read::read_at` does).
fn stored_many(
    ix: &Index,
    at: Option<&Frozen>,
    tree: &str,
    keys: &[&[u8]],
) -> Result<Vec<(Option<Vec<u8>>, Form)>> {
    let store = &ix.store;
    let mut slots: Vec<Slot> = keys
        .iter()
        .map(|&key| Slot {
            key,
            resume: None,
            probed: Vec::new(),
            found: None,
        })
        .collect();
    let mut pinned: PidMap<Arc<Node>> = PidMap::default();
    let mut resets = 0u32;
    for _ in 0..MAX_RESTARTS {
        if let Some(fz) = at {
            fz.check_age()?;
        }
        let gen = store.reuse_gen.load(Ordering::Acquire);
        let (wants, done_now) = round(ix, at, tree, &mut slots, &pinned, resets);
        let now_gen = store.reuse_gen.load(Ordering::Acquire);
        let pinned_at = at.is_some_and(|fz| fz.pinned());
        let still = || pinned_at || store.reuse_gen.load(Ordering::Acquire) == gen;
        let got = match at.is_none_or(|fz| fz.trusts(gen, now_gen)) {
            true if wants.is_empty() => return finished(slots),
            true => fetch(ix, &wants)?,
            false => {
                done_now.iter().for_each(|&k| slots[k].found = None);
                Vec::new()
            }
        };
        if got.is_empty() || !still() {
            pinned.clear();
            slots.iter_mut().for_each(|s| s.probed.clear());
            resets += 1;
            continue;
        }
        install(ix, wants, got, &mut pinned, &mut slots, still)?;
    }
    panic!("a batched get restarted {MAX_RESTARTS} times: page reuse never settles");
}

/// Every slot's stored value, or the first (in key order) read error.
fn finished(slots: Vec<Slot>) -> Result<Vec<(Option<Vec<u8>>, Form)>> {
    slots
        .into_iter()
        .map(|s| s.found.expect("every key found"))
        .collect()
}

/// One descent of every key not yet found, under one consistent view;
/// returns the reads the blocked keys need (shells and partitions each
/// once) and the slots found in this round.
fn round(
    ix: &Index,
    at: Option<&Frozen>,
    tree: &str,
    slots: &mut [Slot],
    pinned: &PidMap<Arc<Node>>,
    resets: u32,
) -> (Vec<Want>, Vec<usize>) {
    let guard;
    let epoch = match at {
        Some(fz) => &fz.epoch,
        None => {
            guard = ix.store.state.read();
            &*guard
        }
    };
    let (mut wants, mut seen, mut done) = (Vec::new(), HashSet::new(), Vec::new());
    let mut hits = 0;
    for (k, s) in slots.iter_mut().enumerate() {
        if s.found.is_some() {
            continue;
        }
        let v = View::of(epoch, ix, pinned, &s.probed, resets);
        let step = read::get_step(&v, tree, s.key, &mut s.resume);
        let (h, skips) = v.tallies();
        hits += h;
        match step {
            Step::Done(r) => {
                ix.counters.bepsilon_reads.filter_skipped(&skips);
                s.found = Some(r);
                done.push(k);
            }
            Step::Miss(m) => {
                ix.store.cache.count_miss();
                if let Some(w) = want_of(k, m, &mut seen) {
                    wants.push(w);
                }
            }
        }
    }
    ix.store.cache.hits.fetch_add(hits, Ordering::Relaxed);
    (wants, done)
}

/// The read a miss of slot `k` needs, unless another key of the round
/// already asked for the same shell or partition (`seen`).
fn want_of(k: usize, m: Miss, seen: &mut HashSet<(u64, usize)>) -> Option<Want> {
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
            Some(Want::Probe(k, ext, i, n, seg))
        }
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
        Want::Probe(_, ext, i, n, seg) => {
            let (off, len, _) = (*seg)?;
            Some((*ext, n.dir[*i].offset as u64 + off, len))
        }
    }
}

/// Reads every want's range through one queue: per want its bytes (empty
/// when it reads nothing), or its read's failure. Never empty for wants.
fn fetch(ix: &Index, wants: &[Want]) -> Result<Vec<Result<Vec<u8>>>> {
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

/// Caches and pins the shells and partitions read (a node's partitions
/// read in one round joined into one image), and gives each probing slot
/// its probed messages. Requires: no page reuse since the round began.
fn install(
    ix: &Index,
    wants: Vec<Want>,
    got: Vec<Result<Vec<u8>>>,
    pinned: &mut PidMap<Arc<Node>>,
    slots: &mut [Slot],
    still: impl Fn() -> bool,
) -> Result<()> {
    assert_eq!(wants.len(), got.len());
    let (pager, counters) = (&ix.store.pager, &ix.counters.bepsilon_reads);
    let ps = pager.ps;
    let mut nodes: PidMap<Node> = PidMap::default();
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
            Want::Probe(k, ext, i, n, seg) => {
                let p = probed(ix, &ext, &n, i, seg, &b, slots[k].key)?;
                slots[k].probed.push((ext.first_page, i, Arc::new(p)));
                assert!(slots[k].probed.len() <= super::MAX_HEIGHT as usize + 1);
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
    Ok(())
}

/// The node whose shell starts with `b` (its first `extent_cap` bytes),
/// read in full when the shell is longer (counted).
fn shell_from(ix: &Index, ext: &Extent, b: &[u8]) -> Result<Node> {
    let pager = &ix.store.pager;
    let corrupt = |w: String| pager.corrupt(ext.first_page, format!("B-epsilon node: {w}"));
    let want = format::shell_len(b).map_err(corrupt)?;
    if want > b.len() {
        // Rare: a shell longer than a page; read as a get would.
        let (n, reads, bytes) = read::read_shell_counted(pager, ext)?;
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
/// read as `c` (as `read::probe` scans it; counted).
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

/// Each stored value as the user's value, the value extents among them
/// read through one queue; a key whose extent may have been reused since
/// `gen` (the batch's start) is got again on its own.
fn values_many(
    ix: &Index,
    at: Option<&Frozen>,
    tree: &str,
    keys: &[&[u8]],
    stored: Vec<(Option<Vec<u8>>, Form)>,
    gen: u64,
) -> Result<Vec<Option<Vec<u8>>>> {
    assert_eq!(keys.len(), stored.len());
    let mut out: Vec<Option<Vec<u8>>> = Vec::with_capacity(keys.len());
    let mut exts: Vec<(usize, Extent)> = Vec::new();
    for (k, (s, form)) in stored.into_iter().enumerate() {
        match read::value_of(ix, tree, s, form)? {
            Value::Ready(v) => out.push(v),
            Value::Extent(e) => {
                exts.push((k, e));
                out.push(None);
            }
        }
    }
    if exts.is_empty() {
        return Ok(out);
    }
    let list: Vec<Extent> = exts.iter().map(|e| e.1).collect();
    let read = ix.store.pager.read_extents(&list, Kind::Overflow)?;
    let pinned_at = at.is_some_and(|fz| fz.pinned());
    let still = pinned_at || ix.store.reuse_gen.load(Ordering::Acquire) == gen;
    for ((k, _), r) in exts.into_iter().zip(read) {
        out[k] = match still {
            true => Some(r?),
            false => read::get(ix, at, tree, keys[k])?,
        };
    }
    Ok(out)
}
