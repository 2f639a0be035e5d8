//! Group prefetch: before a commit group takes the write lock, bring every
//! page its ops will descend through into the cache, one tree level per round,
//! all missing pages of a round read through one queue (docs/design.md,
//! "Concurrency"). Best effort: the apply path reads any page that is still
//! (or again) missing, so eviction between here and the apply costs a read,
//! never correctness.

use super::Meta;
use crate::error::Result;
use crate::index::{Index, Trees};
use crate::store::cache::PidHasher;
use crate::store::read::NodeRef;
use crate::store::Epoch;
use std::collections::HashSet;
use std::hash::BuildHasherDefault;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Rounds are one per tree level; more only when a capped round left misses
/// behind or pages were evicted meanwhile. Bounded so a cache too small for
/// the group cannot keep the prefetch going forever.
const MAX_ROUNDS: usize = 16;

/// Keys of a group probed, evenly spread, before its every key is: when
/// all their paths are in memory, the group is taken as cached and not
/// descended twice (a few pages it still misses are read by the apply).
const SAMPLE_KEYS: usize = 16;

type PidSet = HashSet<u64, BuildHasherDefault<PidHasher>>;

/// Loads the root-to-leaf paths of `(tree, key)` into the cache. Requires
/// the commit lock held (no checkpoint can run) and the state lock free.
pub fn prefetch_group(ix: &Index, mut todo: Vec<(&Arc<str>, &[u8])>) -> Result<()> {
    let store = &ix.store;
    // A quarter of the cache per round, so a huge group cannot evict the
    // pages it just read before the apply uses them.
    let cap = (store.cache.capacity() / store.page_size() / 4).max(1);
    if todo.len() > 2 * SAMPLE_KEYS && sample_cached(ix, &todo) {
        return Ok(());
    }
    for _ in 0..MAX_ROUNDS {
        let gen = store.reuse_gen.load(Ordering::Acquire);
        let missing = first_misses(ix, &mut todo);
        if missing.is_empty() {
            return Ok(());
        }
        load_round(ix, missing, cap, gen)?;
    }
    Ok(())
}

/// One prefetch round: reads the first `cap` of `missing` (by page id)
/// through one queue under reuse generation `gen`, counts it, and returns
/// the pages loaded.
fn load_round(ix: &Index, mut missing: Vec<NodeRef>, cap: usize, gen: u64) -> Result<u64> {
    let store = &ix.store;
    missing.sort_unstable_by_key(|r| r.pid);
    missing.truncate(cap);
    let loaded = store.load_pages(&missing, gen, |_| false)?;
    store
        .cache
        .misses
        .fetch_add(missing.len() as u64, Ordering::Relaxed);
    ix.counters.prefetch_rounds.fetch_add(1, Ordering::Relaxed);
    ix.counters
        .prefetched_pages
        .fetch_add(loaded, Ordering::Relaxed);
    Ok(loaded)
}

/// Descends every key; keeps in `todo` only those that hit a missing node
/// and returns those nodes (with the bases their parents name), each once.
fn first_misses(ix: &Index, todo: &mut Vec<(&Arc<str>, &[u8])>) -> Vec<NodeRef> {
    let st = ix.store.state.read();
    let mut seen = PidSet::default();
    let mut missing = Vec::new();
    todo.retain(|(tree, key)| match first_miss(ix, &st, tree, key) {
        Some(r) => {
            if seen.insert(r.pid) {
                missing.push(r);
            }
            true
        }
        None => false,
    });
    missing
}

/// Whether the paths of [`SAMPLE_KEYS`] keys spread evenly over `todo`
/// are all in memory.
fn sample_cached(ix: &Index, todo: &[(&Arc<str>, &[u8])]) -> bool {
    let st = ix.store.state.read();
    let stride = todo.len() / SAMPLE_KEYS;
    assert!(stride >= 1);
    todo.iter()
        .step_by(stride)
        .take(SAMPLE_KEYS)
        .all(|(tree, key)| first_miss(ix, &st, tree, key).is_none())
}

/// The first node on `key`'s path that is neither dirty nor cached.
fn first_miss(ix: &Index, st: &Epoch<Trees>, tree: &str, key: &[u8]) -> Option<NodeRef> {
    let tm: &Meta = st.trees.btree(tree).filter(|t| t.root != 0)?;
    let mut at = NodeRef::unnamed(tm.root);
    for _ in 0..tm.height {
        let img = match st.dirty.get(at.pid) {
            Some(n) => n.clone(),
            None => match ix.store.cache.lookup(at.pid) {
                Some(n) => n,
                None => return Some(at),
            },
        };
        let n = super::node_ref(&img);
        if n.is_leaf() {
            return None;
        }
        at = n.child_ref(n.child_index(key));
    }
    // A corrupt tree deeper than its height: the apply path reports it.
    None
}

/// Warms the cache for a batch of gets on B+tree `tree` (live, or the
/// snapshot `at`): one round per tree level, each round descending every
/// key still blocked through one consistent view and reading all the
/// distinct pages they miss through one queue ([`crate::store::Store::load_pages`]).
/// At most `cap_pages` pages per round (a quarter of the cache, so the batch
/// cannot evict what it just read). Best effort, like [`prefetch_group`]:
/// the gets that follow read any page still (or again) missing, so an
/// eviction or a page reuse in between costs a read, never correctness.
pub fn warm_gets(
    ix: &Index,
    at: Option<&crate::index::bepsilon::read::Frozen>,
    tree: &str,
    keys: &[&[u8]],
) -> Result<()> {
    let store = &ix.store;
    let cap = (store.cache.capacity() / store.page_size() / 4).max(1);
    let mut todo: Vec<&[u8]> = keys.to_vec();
    todo.sort_unstable();
    todo.dedup();
    for _ in 0..MAX_ROUNDS {
        let gen = store.reuse_gen.load(Ordering::Acquire);
        let missing = store.read_at(at, |v| {
            crate::store::read::Step::Done(view_misses(v, tree, &mut todo))
        })?;
        if missing.is_empty() {
            return Ok(());
        }
        let n = missing.len().min(cap) as u64;
        let loaded = load_round(ix, missing, cap, gen)?;
        assert!(loaded <= n);
    }
    Ok(())
}

/// Keeps in `todo` the keys whose path meets a node not in memory in view
/// `v`, and returns those nodes (with the bases their parents name), each
/// once. An empty or missing tree needs nothing.
fn view_misses(
    v: &crate::store::read::View<Trees>,
    tree: &str,
    todo: &mut Vec<&[u8]>,
) -> Vec<NodeRef> {
    use crate::store::read::Step;
    let Some(tm) = v.trees().btree(tree).filter(|t| t.root != 0) else {
        todo.clear();
        return Vec::new();
    };
    let mut seen = PidSet::default();
    let mut missing = Vec::new();
    todo.retain(|key| match super::read::find_leaf(v, tm, key) {
        Step::Done(_) => false,
        Step::Miss(r) => {
            if seen.insert(r.pid) {
                missing.push(r);
            }
            true
        }
    });
    missing
}
