//! `Db::check`: verify every live page on disk and every tree's invariants
//! (docs/design.md, "Invariants"). The store claims its own pages, each tree
//! kind walks its own. `Db::file_map` is the same walk, recording which
//! structure every verified byte range belongs to.

use crate::db::Db;
use crate::error::Result;
pub use crate::store::claims::Region;
use crate::store::claims::{Claims, Owner};
use crate::store::page::Kind;
use crate::structure;

/// What `check` found. `problems` is empty when the database is sound.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct CheckReport {
    pub pages_checked: u64,
    pub overflow_pages_checked: u64,
    pub trees: usize,
    pub entries: u64,
    pub file_pages: u64,
    pub free_pages: u64,
    pub problems: Vec<String>,
}

impl CheckReport {
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// The structure of every byte range of the data file that `check`
/// verifies ([`Db::file_map`]; for corruption tests).
#[derive(Debug, Clone, Default)]
pub struct FileMap {
    /// In walk order; a later region inside an earlier one is finer and
    /// overrides it (a B-epsilon node's pages, then its header, directory,
    /// partitions).
    pub regions: Vec<Region>,
    /// How the catalog stores the free list: `"extents"` or `"bitmap"`
    /// (None without a catalog).
    pub free_form: Option<&'static str>,
    /// What `check` found while walking.
    pub report: CheckReport,
}

impl Db {
    /// Checkpoints, then reads every live page back from disk, verifying
    /// checksums, key order and ranges, leaf depth, the per-tree counters, and
    /// that every page is exactly one of: superblock, catalog, node,
    /// overflow, free.
    pub fn check(&self) -> Result<CheckReport> {
        Ok(self.walk_file(false)?.report)
    }

    /// [`Db::check`]'s walk, also naming the structure of every byte range
    /// it verifies (superblock, catalog, free page, B+tree leaf, branch,
    /// delta block, delta base, overflow, B-epsilon node parts). Opened
    /// `read_only`, it maps the file as the last checkpoint left it; a
    /// writable Db checkpoints first, as `check` does.
    #[doc(hidden)]
    pub fn file_map(&self) -> Result<FileMap> {
        self.walk_file(true)
    }

    fn walk_file(&self, map: bool) -> Result<FileMap> {
        let inner = &self.inner;
        inner.check_open()?;
        let (_guard, snap) = inner.check_begin()?;
        let ps = inner.ix.store.page_size();
        let mut claims = Claims::new(snap.count_pages, ps);
        claims.map = map.then(Vec::new);
        let mut rep = CheckReport {
            file_pages: snap.count_pages,
            ..Default::default()
        };
        let mut free_form = None;
        claims.claim(0, 2, Owner::Used, "superblock");
        claims.map_pages(0, 2, structure::SUPERBLOCK);
        if let Some(c) = snap.catalog {
            claims.claim(c.first_page, c.count_pages, Owner::Used, "catalog");
            if map {
                let b = inner.ix.store.pager.read_extent(&c, Kind::Blob)?;
                let form = crate::store::catalog::Catalog::decode_with_form(&b)
                    .map_err(|e| inner.ix.store.pager.corrupt(c.first_page, e))?
                    .1;
                free_form = Some(form);
                let what = structure::catalog(form);
                claims.map_pages(c.first_page, c.count_pages, &what);
            }
        }
        for &(s, n) in &snap.free {
            claims.claim(s, n, Owner::Free, "free extent");
            claims.map_pages(s, n, structure::FREE_PAGE);
            rep.free_pages += n;
        }
        for (name, desc) in &snap.trees {
            claims.context = format!("tree {name:?}");
            let before = claims.problems.len();
            let (counted, pages, overflow_pages) = inner.ix.check_tree(&mut claims, desc);
            rep.pages_checked += pages;
            rep.overflow_pages_checked += overflow_pages;
            let unreadable = claims.problems.len() > before;
            if counted != *desc && !unreadable {
                let what = format!("catalog counters {desc:?} do not match the tree {counted:?}");
                claims.problem(desc.root_page(), what);
            }
            rep.entries += counted.entries();
            rep.trees += 1;
        }
        claims.context.clear();
        let leaked = claims.unclaimed();
        if !leaked.is_empty() {
            let what = format!(
                "{} pages are neither in use nor free (first: {:?})",
                leaked.len(),
                &leaked[..leaked.len().min(8)]
            );
            claims.problem(leaked[0], what);
        }
        rep.problems = claims.problems;
        Ok(FileMap {
            regions: claims.map.unwrap_or_default(),
            free_form,
            report: rep,
        })
    }
}
