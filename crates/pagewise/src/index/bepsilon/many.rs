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

use super::fetch::{fetch, install, want_of, Want};
use super::node::{Node, Part};
use super::read::{self, Frozen, Resume, Step, Value, View};
use super::value::Form;
use super::value::{read_values, ValueRef};
use crate::error::Result;
use crate::index::Index;
use crate::store::cache::PidMap;
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
        let probes = install(ix, wants, got, &mut pinned, None, still)?;
        for (k, first_page, i, p) in probes {
            slots[k].probed.push((first_page, i, p));
            assert!(slots[k].probed.len() <= super::MAX_HEIGHT as usize + 1);
        }
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
                // A tree not (or no longer) B-epsilon: nothing found.
                s.found = Some(r.map(|f| f.unwrap_or((None, Form::Plain))));
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
    ix.store.cache.hits.add(hits);
    (wants, done)
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
    let mut exts: Vec<(usize, ValueRef)> = Vec::new();
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
    let list: Vec<ValueRef> = exts.iter().map(|e| e.1).collect();
    let read = read_values(&ix.store.pager, &list)?;
    let pinned_at = at.is_some_and(|fz| fz.pinned());
    let still = pinned_at || ix.store.reuse_gen.load(Ordering::Acquire) == gen;
    for ((k, _), r) in exts.into_iter().zip(read) {
        out[k] = match still {
            true => Some(r?),
            false => read::get(ix, at, tree, keys[k])?.flatten(),
        };
    }
    Ok(out)
}
