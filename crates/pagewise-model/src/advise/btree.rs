//! B+tree shape for a page size: fanout, height, and which levels a cache holds.

use super::dataset::Dataset;
use serde::{Deserialize, Serialize};

/// The shape of a B+tree of `rows` records in pages of one size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Shape {
    /// Children per internal node: floor(page x fill / entry bytes).
    pub fanout: u64,
    /// Records per leaf: floor(page x fill / leaf entry bytes).
    pub leaf_capacity: u64,
    /// Nodes per level, root first; the last level is the leaves.
    pub levels: Vec<u64>,
    /// log_fanout(rows): the back-of-envelope hop count.
    pub continuous_hops: f64,
}

impl Shape {
    /// `Err` says why a page this small cannot hold the tree.
    pub fn new(page: u64, d: &Dataset) -> Result<Self, String> {
        let usable = page as f64 * d.fill;
        let fanout = (usable / d.internal_entry() as f64).floor() as u64;
        let leaf_capacity = (usable / d.leaf_entry() as f64).floor() as u64;
        if fanout < 2 {
            return Err(format!(
                "fanout {fanout}: a {page} B page at fill {:.2} holds fewer than two {} B entries",
                d.fill,
                d.internal_entry()
            ));
        }
        if leaf_capacity < 1 {
            return Err(format!(
                "a {page} B page at fill {:.2} cannot hold one {} B record",
                d.fill,
                d.leaf_entry()
            ));
        }
        Ok(Self {
            fanout,
            leaf_capacity,
            levels: levels(d.rows, leaf_capacity, fanout),
            continuous_hops: (d.rows as f64).ln() / (fanout as f64).ln(),
        })
    }

    /// Levels from root to leaf: the I/Os of an uncached point query.
    pub fn height(&self) -> u32 {
        self.levels.len() as u32
    }
}

/// Siblings the engine's iterator reads with the second leaf it visits, and
/// the most it reads with one leaf (crates/pagewise/src/index/btree/readahead.rs:
/// nothing ahead on the first leaf, then 2, doubling per batch up to 32).
pub const READ_AHEAD_FIRST_PAGES: u64 = 2;
pub const READ_AHEAD_MAX_PAGES: u64 = 32;

/// What iterator read-ahead costs for the further leaves of a range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReadAhead {
    /// Expected device round trips, each one QD1 read time: a batch of n
    /// pages on a drive with P parallel slots takes ceil(n / P) of them.
    pub rounds: f64,
    /// Expected pages read, those past the range's end included.
    pub pages: f64,
}

/// Read-ahead for a range that needs `extra_leaves` leaves beyond its first
/// (an expectation: a range of R records starting anywhere in a leaf of L
/// needs floor or ceil of (R - 1) / L more, so batch k is needed with
/// probability clamp(extra - leaves covered before it, 0, 1)), on a drive
/// with `parallel` slots (PDAM's P, at least 1). Each batch reads the missed
/// leaf and its window of siblings through one queue.
pub fn read_ahead(extra_leaves: f64, parallel: f64) -> ReadAhead {
    assert!(extra_leaves >= 0.0 && extra_leaves.is_finite());
    assert!(parallel >= 1.0 && parallel.is_finite());
    let (mut rounds, mut pages, mut covered) = (0.0, 0.0, 0.0);
    let mut window = READ_AHEAD_FIRST_PAGES;
    // Bounded: windows grow to 32 pages, so 2^20 batches cover any range
    // the advisor is asked about (and the loop stops once covered).
    for _ in 0..(1u32 << 20) {
        let need = (extra_leaves - covered).clamp(0.0, 1.0);
        if need <= 0.0 {
            break;
        }
        let n = (1 + window) as f64;
        rounds += need * (n / parallel).ceil();
        pages += need * n;
        covered += n;
        window = (window * 2).min(READ_AHEAD_MAX_PAGES);
    }
    assert!(rounds <= pages);
    ReadAhead { rounds, pages }
}

/// Nodes per level, root first: ceil(rows / leaf capacity) leaves, then each
/// level above holds ceil(below / fanout) nodes until one (possibly partly
/// full) root remains.
pub fn levels(rows: u64, leaf_capacity: u64, fanout: u64) -> Vec<u64> {
    let mut v = vec![rows.div_ceil(leaf_capacity).max(1)];
    while *v.last().unwrap_or(&1) > 1 {
        let above = v.last().copied().unwrap_or(1).div_ceil(fanout);
        v.push(above);
    }
    v.reverse();
    v
}

/// What a cache of `cache` bytes holds under optimal caching for uniform
/// point queries: whole levels from the root down (each cached node is on
/// every query's path, so higher levels save the most per byte), then a
/// fraction of the next level, which saves that fraction of its I/Os.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Caching {
    pub whole_levels: u32,
    /// Fraction of the first level not wholly cached that fits.
    pub partial: f64,
    /// I/Os per point query: height - cached levels, never below 1 (the leaf
    /// is always read: its record may have changed, and the model keeps one
    /// I/O per query as the floor).
    pub uncached_hops: f64,
    /// Fraction of leaf reads that miss the cache (range scans).
    pub leaf_miss: f64,
}

pub fn caching(levels: &[u64], page: u64, cache: u64) -> Caching {
    let mut left = cache as f64;
    let mut whole = 0u32;
    let mut partial = 0.0;
    for &n in levels {
        let bytes = n as f64 * page as f64;
        if bytes <= left {
            left -= bytes;
            whole += 1;
        } else {
            partial = left / bytes;
            break;
        }
    }
    let h = levels.len() as u32;
    let leaf_miss = if whole >= h {
        0.0
    } else if whole + 1 == h {
        1.0 - partial
    } else {
        1.0
    };
    Caching {
        whole_levels: whole,
        partial,
        uncached_hops: (h as f64 - whole as f64 - partial).max(1.0),
        leaf_miss,
    }
}
