//! Collection of value runs (docs/design.md, "B-epsilon packed values",
//! collection; WiscKey-style): at a checkpoint's start, under the commit
//! lock, the run pages at most half live are read, and each entry starting
//! on one whose key's stored value is still this very reference is put
//! again: packed into a new run and applied as a put through the normal
//! apply path, without a log record. The durable checkpoint still names
//! the old pages, and they are freed only as the tree drops their
//! references (when the new message reaches the level holding the old one,
//! over later flushes), then after the next checkpoint: a crash before the
//! checkpoint that holds the new run loses nothing.

use super::runs::{entries_from, Runs, NO_START};
use super::value::Packed;
use crate::error::Result;
use crate::index::placed::{self, Out};
use crate::index::{Desc, Index};
use crate::log::Op;
use crate::store::extent::{page_payload_bytes, Extent};
use crate::store::page::Kind;
use std::sync::Arc;

/// A run page to collect: the run's first page and the page's index.
type RunPage = (u64, u64);

impl Index {
    /// Collects at most `value_collect_pages` run pages over all trees.
    /// Requires: the commit lock (no commit runs; the pages read are not
    /// freed meanwhile). Returns the values put again.
    pub fn collect_values(&self) -> Result<u64> {
        let mut budget = self.value_collect_pages;
        let cap = page_payload_bytes(self.store.page_size()) as u64;
        if budget == 0 {
            return Ok(0);
        }
        let trees: Vec<(Arc<str>, Arc<Runs>)> = {
            let st = self.store.state.read();
            let runs = st.trees.0.iter().filter_map(|(name, d)| match d {
                Desc::BEpsilon(m) if !m.values.runs.is_empty() => {
                    Some((name.clone(), m.values.runs.clone()))
                }
                _ => None,
            });
            runs.collect()
        };
        let mut moved = 0u64;
        for (tree, runs) in trees {
            let pages = sparse_pages(&runs, budget, self.value_collect_live_pct, cap);
            budget -= pages.len();
            let live = self.live_entries(&tree, &runs, &pages)?;
            moved += live.len() as u64;
            if !live.is_empty() {
                self.relocate(&tree, live)?;
            }
        }
        Ok(moved)
    }

    /// The entries starting on `pages` (of `tree`'s runs `runs`) whose key
    /// still names them, as (key, value). A page that does not read back
    /// (damaged: `check` says so) is skipped.
    fn live_entries(
        &self,
        tree: &str,
        runs: &Runs,
        pages: &[RunPage],
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let cap = page_payload_bytes(self.store.page_size()) as u64;
        let mut out = Vec::new();
        for &(first, k) in pages {
            let counts = &runs.runs[&first];
            let start = counts[k as usize].first_start;
            if start == NO_START {
                continue; // no entry starts here: nothing of its own to move
            }
            // An entry starting on page k may end on page k + 1, read with
            // it while it holds live values (else such an entry is dead).
            let next_live = counts.get(k as usize + 1).is_some_and(|c| c.live > 0);
            let n = 1 + next_live as u64;
            let ext = Extent {
                first_page: first,
                count_pages: k + n,
                len_bytes: (k + n) * cap,
            };
            let Ok(b) = self
                .store
                .pager
                .read_range(&ext, Kind::Overflow, k * cap, n * cap)
            else {
                continue;
            };
            for (at, key, voff, vlen) in entries_from(&b, start as usize) {
                if at as u64 >= cap {
                    break; // starts on the next page: not this page's
                }
                let r = Packed {
                    first_page: first,
                    offset: (k * cap + voff as u64) as u32,
                    len: vlen as u32,
                };
                let stored = super::read::get_stored(self, None, tree, key)?;
                if stored.is_some_and(|(s, _)| s.as_deref() == Some(&r.encode()[..])) {
                    out.push((key.to_vec(), b[voff..voff + vlen].to_vec()));
                }
            }
        }
        Ok(out)
    }

    /// Puts `live` again in `tree`, packed into new runs in key order (a
    /// scan over collected values finds neighbours on the same pages),
    /// without a log record (the values are unchanged). Each key is in
    /// `live` once (it names one reference).
    fn relocate(&self, tree: &Arc<str>, mut live: Vec<(Vec<u8>, Vec<u8>)>) -> Result<()> {
        live.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        assert!(live.windows(2).all(|w| w[0].0 < w[1].0), "one entry a key");
        let ops: Vec<Op> = live
            .into_iter()
            .map(|(key, value)| Op::Put {
                tree: tree.clone(),
                key,
                value,
            })
            .collect();
        let outs = vec![vec![Out::Packed; ops.len()]];
        let placed = placed::place(&self.store, &[&ops[..]], &outs)?;
        let placed = placed.into_iter().next().expect("one batch");
        let mut st = self.store.state.write();
        let mut al = self.store.alloc.lock();
        let r = self.apply_batch(&mut st, &mut al, &ops, placed);
        st.dirty.recharge();
        let dirty_bytes = st.dirty.bytes();
        drop((st, al));
        self.store.cache.reserve(dirty_bytes as usize);
        r
    }
}

/// The run pages whose live values fill at most `live_pct` percent of
/// their payload (`cap` bytes), emptiest first, at most `most`; none
/// unless their live values would fill at least one page fewer. Pages
/// left sparse by drops and pages a small commit group half filled are
/// alike to it.
fn sparse_pages(runs: &Runs, most: usize, live_pct: u8, cap: u64) -> Vec<RunPage> {
    let pct = live_pct.clamp(1, 99) as u64;
    let mut c: Vec<(u64, RunPage)> = Vec::new();
    for (&first, pages) in &runs.runs {
        for (k, p) in pages.iter().enumerate() {
            let bytes = p.live_bytes as u64;
            if p.live > 0 && 100 * bytes <= pct * cap {
                c.push((bytes, (first, k as u64)));
            }
        }
    }
    c.sort_unstable();
    c.truncate(most);
    let pages_after = c.iter().map(|x| x.0).sum::<u64>().div_ceil(cap);
    if pages_after + 1 > c.len() as u64 {
        return Vec::new();
    }
    c.into_iter().map(|x| x.1).collect()
}
