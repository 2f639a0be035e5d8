//! `Db::check` of a tree's value table (docs/design.md, "B-epsilon packed
//! values", "Invariants"): every run page still counted (and each run's
//! first page, held while the run is in the table) is claimed once,
//! its count equals the packed references the walk found on it, a page
//! counted with no reference is a leak, and the durable copy of an
//! unchanged table reads back equal to the one in memory.

use super::runs::{held, Runs};
use super::Meta;
use crate::index::Index;
use crate::store::claims::{Claims, Owner};
use crate::store::page::Kind;
use crate::structure;
use std::collections::BTreeMap;

/// Checks `m`'s value table against `refs` (per run page, the packed
/// references the walk counted on it).
pub fn check_table(ix: &Index, claims: &mut Claims, m: &Meta, refs: &BTreeMap<(u64, u64), u64>) {
    let t = &m.values;
    if let Some(ext) = t.ext {
        if claims.claim(ext.first_page, ext.count_pages, Owner::Used, "value table") {
            claims.map_pages(
                ext.first_page,
                ext.count_pages,
                structure::BEPSILON_VALUE_TABLE,
            );
            let read = ix.store.pager.read_extent(&ext, Kind::Overflow);
            match read
                .map_err(|e| e.to_string())
                .and_then(|b| Runs::decode(&b))
            {
                Ok(d) if t.changed || d == *t.runs => {}
                Ok(_) => claims.problem(ext.first_page, "value table differs on disk".into()),
                Err(e) => claims.problem(ext.first_page, format!("value table: {e}")),
            }
        }
    }
    let mut held_pages = 0u64;
    for (&first, pages) in &t.runs.runs {
        for (k, p) in pages.iter().enumerate() {
            let pid = first + k as u64;
            let found = refs.get(&(first, k as u64)).copied().unwrap_or(0);
            if p.live as u64 != found {
                let what = format!(
                    "value run page counts {} live values, the tree names {found} (a leak or a lost count)",
                    p.live
                );
                claims.problem(pid, what);
            }
            if held(k, p) && claims.claim(pid, 1, Owner::Used, "value run page") {
                claims.map_pages(pid, 1, structure::BEPSILON_VALUE_RUN_PAGE);
                held_pages += 1;
            }
        }
    }
    let stray = refs.keys().filter(|r| !counted(&t.runs, **r)).count();
    if stray > 0 {
        claims.problem(
            0,
            format!("{stray} pages hold packed values the value table does not count"),
        );
    }
    assert!(held_pages <= t.runs.held_pages());
}

/// Whether page `k` of the run at `first` is in `runs`.
fn counted(runs: &Runs, (first, k): (u64, u64)) -> bool {
    runs.runs
        .get(&first)
        .is_some_and(|pages| k < pages.len() as u64)
}
