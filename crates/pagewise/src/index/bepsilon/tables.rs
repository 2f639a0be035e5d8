//! The value tables' durable copies (docs/design.md, "B-epsilon packed
//! values"): each checkpoint writes the table of every tree whose table
//! changed to a fresh extent of kind-4 pages before the catalog is encoded
//! (the descriptor names it at offset 44) and frees the previous one as it
//! frees a replaced node; an open reads them back.

use super::runs::Runs;
use crate::error::Result;
use crate::index::{Desc, Index};
use crate::store::extent::Extent;
use crate::store::page::Kind;
use std::sync::Arc;

impl Index {
    /// Writes every changed value table. Requires: the commit lock (the
    /// trees do not change meanwhile). Effect: each is written to fresh
    /// pages (an empty table to none), its previous extent freed for after
    /// the next checkpoint, and the descriptor names the new one.
    pub fn place_value_tables(&self, gen: u64) -> Result<()> {
        let work: Vec<(Arc<str>, Arc<Runs>, Option<Extent>)> = {
            let st = self.store.state.read();
            st.trees
                .0
                .iter()
                .filter_map(|(name, d)| match d {
                    Desc::BEpsilon(m) if m.values.changed => {
                        Some((name.clone(), m.values.runs.clone(), m.values.ext))
                    }
                    _ => None,
                })
                .collect()
        };
        let pager = &self.store.pager;
        let mut placed: Vec<(Arc<str>, Option<Extent>)> = Vec::with_capacity(work.len());
        for (name, runs, old) in work {
            let ext = match runs.is_empty() {
                true => None,
                false => {
                    let bytes = runs.encode();
                    let count = pager.extent_pages(bytes.len());
                    let first = self.store.alloc.lock().alloc_written(count);
                    let ext = Extent::new(first, bytes.len() as u64, pager.ps);
                    pager.write_extent(&ext, Kind::Overflow, &bytes, gen)?;
                    Some(ext)
                }
            };
            if let Some(o) = old {
                self.store
                    .alloc
                    .lock()
                    .free_later(o.first_page, o.count_pages);
            }
            placed.push((name, ext));
        }
        let mut st = self.store.state.write();
        for (name, ext) in placed {
            let Some(Desc::BEpsilon(m)) = st.trees.get_mut(&name) else {
                panic!("tree {name:?} vanished during a checkpoint");
            };
            (m.values.ext, m.values.changed) = (ext, false);
        }
        Ok(())
    }

    /// Reads every tree's durable value table into memory (at open, before
    /// recovery replays the log). A damaged table is `Error::Corrupt`.
    pub fn load_value_tables(&self) -> Result<()> {
        let exts: Vec<(Arc<str>, Extent)> = {
            let st = self.store.state.read();
            st.trees
                .0
                .iter()
                .filter_map(|(name, d)| match d {
                    Desc::BEpsilon(m) => Some((name.clone(), m.values.ext?)),
                    _ => None,
                })
                .collect()
        };
        let pager = &self.store.pager;
        for (name, ext) in exts {
            let b = pager.read_extent(&ext, Kind::Overflow)?;
            let runs = Runs::decode(&b).map_err(|w| {
                pager.corrupt(ext.first_page, format!("B-epsilon tree {name:?}: {w}"))
            })?;
            let mut st = self.store.state.write();
            if let Some(Desc::BEpsilon(m)) = st.trees.get_mut(&name) {
                m.values.runs = Arc::new(runs);
            }
        }
        Ok(())
    }
}
