//! `Db::check`: verify every live page on disk and every tree's invariants
//! (docs/design.md, "Invariants"). The store claims its own pages, each tree
//! kind walks its own.

use crate::db::Db;
use crate::error::Result;
use crate::store::claims::{Claims, Owner};

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

impl Db {
    /// Checkpoints, then reads every live page back from disk, verifying
    /// checksums, key order and ranges, leaf depth, the per-tree counters, and
    /// that every page is exactly one of: superblock, catalog, node,
    /// overflow, free.
    pub fn check(&self) -> Result<CheckReport> {
        let inner = &self.inner;
        inner.check_open()?;
        let (_guard, snap) = inner.check_begin()?;
        let ps = inner.ix.store.page_size();
        let mut claims = Claims::new(snap.count_pages, ps);
        let mut rep = CheckReport {
            file_pages: snap.count_pages,
            ..Default::default()
        };
        claims.claim(0, 2, Owner::Used, "superblock");
        if let Some(c) = snap.catalog {
            claims.claim(c.first_page, c.count_pages, Owner::Used, "catalog");
        }
        for &(s, n) in &snap.free {
            claims.claim(s, n, Owner::Free, "free extent");
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
        Ok(rep)
    }
}
