//! `Db::check`: verify every live page on disk and the tree invariants.

use crate::db::Db;
use crate::error::Result;
use crate::meta::TreeMeta;
use crate::node::Val;
use crate::page::Kind;

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

struct Walk<'a> {
    db: &'a Db,
    owner: Vec<u8>,
    rep: CheckReport,
    tree: String,
    counted: TreeMeta,
}

const FREE: u8 = 1;
const USED: u8 = 2;

impl Walk<'_> {
    fn problem(&mut self, pid: u64, what: String) {
        let ps = self.db.inner.pager.ps as u64;
        self.rep.problems.push(format!(
            "tree {:?}: page {pid} (offset {}): {what}",
            self.tree,
            pid * ps
        ));
    }

    /// Claims `n` pages from `start`; false if any is out of range or taken.
    fn claim(&mut self, start: u64, n: u64, how: u8, what: &str) -> bool {
        for p in start..start + n {
            let Some(o) = self.owner.get_mut(p as usize) else {
                let hwm = self.owner.len();
                self.problem(
                    p,
                    format!("{what} beyond the end of the file ({hwm} pages)"),
                );
                return false;
            };
            if *o != 0 {
                let prev = if *o == FREE {
                    "on the free list"
                } else {
                    "already in use"
                };
                self.problem(p, format!("{what} is {prev}"));
                return false;
            }
            *o = how;
        }
        true
    }

    fn node(&mut self, pid: u64, depth: u32, height: u32, lo: Option<&[u8]>, hi: Option<&[u8]>) {
        if !self.claim(pid, 1, USED, "node page") {
            return;
        }
        let n = match self.db.inner.pager.read_node(pid) {
            Ok(n) => n,
            Err(e) => {
                self.problem(pid, e.to_string());
                return;
            }
        };
        self.rep.pages_checked += 1;
        if depth > 1 && n.is_empty() {
            self.problem(pid, "empty non-root node".into());
        }
        let mut prev: Option<Vec<u8>> = lo.map(<[u8]>::to_vec);
        let first = if n.is_leaf() { 0 } else { 1 };
        for i in first..n.len() {
            let k = n.key(i);
            let ordered = match &prev {
                None => true,
                Some(p) if i == first && n.is_leaf() => k >= &p[..],
                Some(p) if i == first => k >= &p[..],
                Some(p) => k > &p[..],
            };
            if !ordered || hi.is_some_and(|h| k >= h) {
                self.problem(
                    pid,
                    format!("key {i} ({k:02x?}) out of order or outside its parent's range"),
                );
            }
            prev = Some(k.to_vec());
        }
        if n.is_leaf() {
            if depth != height {
                self.problem(pid, format!("leaf at depth {depth}, tree height {height}"));
            }
            self.counted.leaf_pages += 1;
            for i in 0..n.len() {
                self.counted.entries += 1;
                self.counted.leaf_bytes += n.entry_bytes(i) as u64;
                if let Val::Overflow { pid: start, len } = n.val(i) {
                    self.overflow(pid, start, len);
                }
            }
            return;
        }
        if depth >= height {
            self.problem(
                pid,
                format!("branch at depth {depth}, tree height {height}"),
            );
            return;
        }
        self.counted.branch_pages += 1;
        for i in 0..n.len() {
            let clo = if i == 0 {
                lo.map(<[u8]>::to_vec)
            } else {
                Some(n.key(i).to_vec())
            };
            let chi = if i + 1 < n.len() {
                Some(n.key(i + 1).to_vec())
            } else {
                hi.map(<[u8]>::to_vec)
            };
            self.node(
                n.child(i),
                depth + 1,
                height,
                clo.as_deref(),
                chi.as_deref(),
            );
        }
    }

    fn overflow(&mut self, leaf: u64, start: u64, len: u64) {
        let pager = &self.db.inner.pager;
        let n = pager.extent_pages(len as usize);
        if !self.claim(start, n, USED, &format!("overflow extent of leaf {leaf}")) {
            return;
        }
        self.counted.overflow_pages += n;
        match pager.read_extent(start, Kind::Overflow, len as usize) {
            Ok(_) => self.rep.overflow_pages_checked += n,
            Err(e) => self.problem(start, format!("overflow value of leaf {leaf}: {e}")),
        }
    }
}

impl Db {
    /// Checkpoints, then reads every live page back from disk, verifying
    /// checksums, key order and ranges, leaf depth, the per-tree counters, and
    /// that every page is exactly one of: superblock, catalog, node,
    /// overflow, free.
    pub fn check(&self) -> Result<CheckReport> {
        let inner = &self.inner;
        let (_guard, snap) = inner.check_begin()?;
        let (trees, blob, hwm, free) = (snap.trees, snap.blob, snap.hwm, snap.free);
        let mut w = Walk {
            db: self,
            owner: vec![0; hwm as usize],
            rep: CheckReport {
                file_pages: hwm,
                ..Default::default()
            },
            tree: String::new(),
            counted: TreeMeta::default(),
        };
        w.claim(0, 2.min(hwm), USED, "superblock");
        if blob.1 > 0 {
            w.claim(blob.0, blob.1, USED, "catalog");
        }
        for &(s, n) in &free {
            w.claim(s, n, FREE, "free extent");
            w.rep.free_pages += n;
        }
        for (name, tm) in &trees {
            w.tree = name.clone();
            w.counted = TreeMeta {
                root: tm.root,
                height: tm.height,
                ..Default::default()
            };
            let problems_before = w.rep.problems.len();
            if tm.root != 0 {
                w.node(tm.root, 1, tm.height, None, None);
            }
            let unreadable = w.rep.problems.len() > problems_before;
            if w.counted != *tm && !unreadable {
                let (c, t) = (w.counted, *tm);
                w.problem(
                    tm.root,
                    format!("catalog counters {t:?} do not match the tree {c:?}"),
                );
            }
            w.rep.entries += w.counted.entries;
            w.rep.trees += 1;
        }
        w.tree = String::new();
        let leaked: Vec<u64> = (0..hwm).filter(|&p| w.owner[p as usize] == 0).collect();
        if !leaked.is_empty() {
            w.problem(
                leaked[0],
                format!(
                    "{} pages are neither in use nor free (first: {:?})",
                    leaked.len(),
                    &leaked[..leaked.len().min(8)]
                ),
            );
        }
        Ok(w.rep)
    }
}
