//! Scaling a described dataset down to one that can be built and measured in
//! a few seconds, while keeping what decides point-query speed.
//!
//! **Rule.** A point query costs the tree levels the cache does not hold:
//! `device_hops = height - cached whole levels - cached fraction of the next`
//! ([`super::caching`], without the model's floor of one I/O). The scaled
//! dataset keeps the record layout (key, value, fill) and the mix, takes
//! `rows' = min(rows, max_rows)` (the disk and the time budget set
//! `max_rows`), and sizes its cache `cache'` so that the scaled tree has the
//! *same device hops* at the page size being checked: whole levels from the
//! root down, then the same fraction of the next level
//! ([`cache_for_hops`]). The Db is kept at least [`MIN_DB_TO_CACHE`] times
//! the cache when the described one is, so the cache cannot hold the tree by
//! accident.
//!
//! **Limits.** A shorter scaled tree cannot miss more levels than it has: when
//! `device_hops > height'` the cache is the engine's floor and the scaled
//! tree misses `height'` levels (noted). The cached fraction of the partly
//! cached level is matched, not the cache-to-Db byte ratio itself: the two
//! agree when the leaves dominate the file (fanout >= ~50), which holds for
//! page sizes >= 2 KiB with keys of 16 B. The CPU part (levels visited) is
//! `height'`, which can be one less than the described height; the
//! correction ([`super::correct`]) is per level, so it carries over.

use super::btree::{caching, Shape};
use super::dataset::Dataset;
use serde::{Deserialize, Serialize};

/// The scaled Db is kept at least this many times its cache (when the
/// described dataset is), so measured reads hit the drive.
pub const MIN_DB_TO_CACHE: f64 = 10.0;
/// The smallest cache handed to the engine, in pages.
pub const MIN_CACHE_PAGES: u64 = 32;

/// Device reads per uniform point query: levels not cached, without the
/// advisor's floor of one (a wholly cached tree needs no reads).
pub fn device_hops(levels: &[u64], page: u64, cache: u64) -> f64 {
    let c = caching(levels, page, cache);
    (levels.len() as f64 - c.whole_levels as f64 - c.partial).max(0.0)
}

/// The cache (bytes) that leaves `hops` levels of `levels` uncached: the
/// inverse of [`device_hops`]. `hops` is clamped to 0..=height.
pub fn cache_for_hops(levels: &[u64], page: u64, hops: f64) -> u64 {
    assert!(page > 0 && !levels.is_empty());
    let h = levels.len() as f64;
    let cached = (h - hops.clamp(0.0, h)).max(0.0);
    let whole = cached.floor() as usize;
    let frac = cached - whole as f64;
    let mut bytes: f64 = levels[..whole.min(levels.len())]
        .iter()
        .map(|n| (n * page) as f64)
        .sum();
    if whole < levels.len() {
        bytes += frac * (levels[whole] * page) as f64;
    }
    bytes.ceil() as u64
}

/// A described dataset scaled down for one page size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scaled {
    pub page_size: u64,
    /// The scaled dataset: `rows'`, the cache `cache'`, the same layout.
    pub dataset: Dataset,
    pub described_height: u32,
    pub scaled_height: u32,
    /// Device hops of the described dataset (the target) and of the scaled one.
    pub target_hops: f64,
    pub scaled_hops: f64,
    /// Tree bytes / cache bytes, described and scaled.
    pub described_db_to_cache: f64,
    pub scaled_db_to_cache: f64,
    /// Where the scaled dataset departs from the rule, in words.
    pub limits: Vec<String>,
}

/// Scales `described` for `page`: `rows' = min(rows, max_rows)`, and the
/// cache chosen by the rule in the module comment. `built_fill` is the leaf
/// fill the scaled tree really has (a sorted load packs pages fuller than the
/// described random-insert fill); the described tree keeps its own fill.
///
/// Requires: a valid `described` whose entries fit `page`, `max_rows >= 1`.
pub fn scale(
    described: &Dataset,
    page: u64,
    max_rows: u64,
    built_fill: f64,
) -> Result<Scaled, String> {
    assert!(max_rows >= 1 && built_fill > 0.0 && built_fill <= 1.0);
    let full = Shape::new(page, described)?;
    let target = device_hops(&full.levels, page, described.cache_bytes);
    let described_bytes = full.levels.iter().sum::<u64>() as f64 * page as f64;
    let mut d = Dataset {
        rows: described.rows.min(max_rows),
        fill: built_fill,
        ..described.clone()
    };
    let shape = Shape::new(page, &d)?;
    let db_bytes = shape.levels.iter().sum::<u64>() * page;
    let mut limits = Vec::new();
    if target > shape.height() as f64 {
        limits.push(format!(
            "the scaled tree has {} levels, fewer than the {target:.2} the described one misses: it misses all {}",
            shape.height(),
            shape.height()
        ));
    }
    let mut cache = cache_for_hops(&shape.levels, page, target);
    let described_ratio = described_bytes / described.cache_bytes.max(1) as f64;
    if described_ratio >= MIN_DB_TO_CACHE && (db_bytes as f64) < MIN_DB_TO_CACHE * cache as f64 {
        cache = (db_bytes as f64 / MIN_DB_TO_CACHE) as u64;
        limits.push(format!(
            "cache capped at 1/{MIN_DB_TO_CACHE:.0} of the scaled Db: more levels miss than in the described dataset"
        ));
    }
    let floor = MIN_CACHE_PAGES * page;
    if cache < floor {
        cache = floor;
        limits.push(format!(
            "cache raised to the engine's floor of {MIN_CACHE_PAGES} pages"
        ));
    }
    d.cache_bytes = cache;
    let scaled_hops = device_hops(&shape.levels, page, cache);
    let out = Scaled {
        page_size: page,
        described_height: full.height(),
        scaled_height: shape.height(),
        target_hops: target,
        scaled_hops,
        described_db_to_cache: described_ratio,
        scaled_db_to_cache: db_bytes as f64 / cache as f64,
        limits,
        dataset: d,
    };
    assert!(out.scaled_hops >= 0.0 && out.scaled_hops <= out.scaled_height as f64);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn described() -> Dataset {
        Dataset {
            rows: 100_000_000,
            key_bytes: 16,
            value_bytes: 100,
            cache_bytes: 1 << 30,
            ..Dataset::default()
        }
    }

    #[test]
    fn device_hops_by_hand() {
        // Levels 1, 10, 100 pages of 4 KiB: 11 pages cached + half the leaves.
        let l = [1, 10, 100];
        let cache = (11 + 50) * 4096;
        assert!((device_hops(&l, 4096, cache) - 0.5).abs() < 1e-9);
        assert_eq!(device_hops(&l, 4096, 0), 3.0);
        assert_eq!(device_hops(&l, 4096, 1 << 30), 0.0);
    }

    #[test]
    fn cache_for_hops_inverts_device_hops() {
        let l = [1, 10, 100];
        // 0.5 hops: root + 10 + 50 leaves.
        assert_eq!(cache_for_hops(&l, 4096, 0.5), 61 * 4096);
        assert_eq!(cache_for_hops(&l, 4096, 3.0), 0);
        assert_eq!(cache_for_hops(&l, 4096, 9.0), 0);
        assert_eq!(cache_for_hops(&l, 4096, 0.0), 111 * 4096);
        // 1.5 hops: root + half of the 10.
        assert_eq!(cache_for_hops(&l, 4096, 1.5), 6 * 4096);
        for h in [0.1, 0.7, 1.2, 2.9] {
            let c = cache_for_hops(&l, 4096, h);
            assert!((device_hops(&l, 4096, c) - h).abs() < 1e-3, "{h}");
        }
    }

    #[test]
    fn default_dataset_keeps_its_hops_at_8k() {
        // 8 KiB, fill 0.69: fanout floor(5652.6/24) = 235, leaf cap
        // floor(5652.6/116) = 48; 100M rows -> 2,083,334 leaves, 8,866,
        // 38, 1. Cache 1 GiB = 131,072 pages holds 8,905 upper pages and
        // 122,167 / 2,083,334 = 5.86% of the leaves: 0.9414 hops.
        let s = scale(&described(), 8192, 2_000_000, 0.69).unwrap();
        assert_eq!(s.described_height, 4);
        assert!((s.target_hops - 0.94136).abs() < 1e-4, "{}", s.target_hops);
        // 2M rows: 41,667 leaves, 178, 1: the cache is 179 pages plus
        // 5.864% of the leaves = 2,443.4 pages.
        assert_eq!(s.scaled_height, 3);
        let pages = s.dataset.cache_bytes as f64 / 8192.0;
        assert!(
            (pages - (179.0 + 0.058640 * 41_667.0)).abs() < 1.0,
            "{pages}"
        );
        assert!((s.scaled_hops - s.target_hops).abs() < 1e-3);
        assert!(
            s.scaled_db_to_cache >= MIN_DB_TO_CACHE,
            "{}",
            s.scaled_db_to_cache
        );
        assert!(s.limits.is_empty(), "{:?}", s.limits);
    }

    #[test]
    fn caps_the_cache_at_a_tenth_of_the_db() {
        // The described tree is ~16x its cache. 1,000 rows at 8 KiB are 21
        // leaves + a root; 0.94 hops would cache 1 + 0.0586 x 21 = 2.23
        // pages, more than a tenth of the 22-page Db (capped to 2.2), and
        // both are under the floor of 32 pages, which wins.
        let s = scale(&described(), 8192, 1000, 0.69).unwrap();
        assert_eq!(s.scaled_height, 2);
        assert_eq!(s.dataset.cache_bytes, MIN_CACHE_PAGES * 8192);
        assert_eq!(s.limits.len(), 2, "{:?}", s.limits);
    }

    #[test]
    fn a_cached_dataset_stays_cached() {
        let d = Dataset {
            rows: 100_000,
            ..described()
        };
        let s = scale(&d, 4096, 1_000_000, 0.69).unwrap();
        assert_eq!(s.target_hops, 0.0);
        assert_eq!(s.dataset.rows, 100_000);
        assert_eq!(s.scaled_hops, 0.0);
    }
}
