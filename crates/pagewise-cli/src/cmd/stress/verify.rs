//! Checking a database against the expected state: deciding in-doubt
//! batches, comparing every key, and `Db::check`.

use super::expected::Model;
use super::value::{decode, key, key_index, Layout, Op, Write};
use pagewise::{Db, Tree};
use std::collections::BTreeSet;

/// A broken promise: what, and where (tree, key, batch).
pub type Violation = String;

/// Handles on every tree of the layout, without writing: a tree that
/// exists must have its layout kind.
pub fn trees(db: &Db, lay: &Layout) -> Result<Vec<Tree>, Violation> {
    let mut out = Vec::with_capacity(lay.trees.len());
    for (name, kind) in &lay.trees {
        match db.tree_kind(name) {
            Some(k) if k != kind.engine => {
                return Err(format!(
                    "tree {name} has kind {}, expected {}",
                    k.name(),
                    kind.name
                ))
            }
            _ => out.push(db.tree(name).map_err(|e| format!("tree {name}: {e}"))?),
        }
    }
    Ok(out)
}

/// Creates every tree of the layout with its kind (a commit each, for the
/// ones that do not exist yet); returns handles on them.
pub fn create_trees(db: &Db, lay: &Layout) -> Result<Vec<Tree>, String> {
    lay.trees
        .iter()
        .map(|(name, kind)| {
            db.tree_with(name, kind.engine)
                .map_err(|e| format!("creating tree {name}: {e}"))
        })
        .collect()
}

/// The batch and length of the genuine value under (`tree`, `idx`), or None
/// when the key is absent.
fn read(trees: &[Tree], lay: &Layout, tree: u8, idx: u32) -> Result<Option<(u64, u32)>, Violation> {
    let name = &lay.trees[tree as usize].0;
    let got = trees[tree as usize]
        .get(key(idx))
        .map_err(|e| format!("get {name}/k{idx}: {e}"))?;
    got.map(|v| decode(&v, tree, idx).map_err(|e| format!("{name}/k{idx}: {e}")))
        .transpose()
}

/// Decides whether in-doubt `batch` was applied, from the keys it wrote.
/// requires: no later batch touched its keys (its writer stopped with it).
/// effect: Ok(true) when every put and upsert holds the batch's value and
/// every removed key is absent; Ok(false) when none holds it (for a batch of
/// removes only: when some removed key is present); Err when some hold it
/// and others do not — half-applied. Removes, and the length of an upserted
/// value (which depends on what the key held before), are judged fully by
/// the caller's full comparison, which knows the history.
pub fn resolve(trees: &[Tree], lay: &Layout, batch: u64, ops: &[Op]) -> Result<bool, Violation> {
    assert!(!ops.is_empty(), "batch {batch} has no writes");
    let (mut present, mut missing) = (Vec::new(), Vec::new());
    for o in ops.iter().filter(|o| o.write != Write::Remove) {
        match read(trees, lay, o.tree, o.idx)? {
            Some((b, len)) if b == batch => {
                if matches!(o.write, Write::Put(want) if want != len) {
                    return Err(format!(
                        "batch {batch}: {}/k{} has length {len}, the intent says {:?}",
                        lay.trees[o.tree as usize].0, o.idx, o.write
                    ));
                }
                present.push((o.tree, o.idx));
            }
            _ => missing.push((o.tree, o.idx)),
        }
    }
    if !present.is_empty() && !missing.is_empty() {
        return Err(format!(
            "batch {batch} is half-applied: its values are present for (tree, key) {present:?} but not for {missing:?}"
        ));
    }
    if !present.is_empty() {
        return Ok(true);
    }
    let puts = ops.iter().any(|o| o.write != Write::Remove);
    if puts {
        return Ok(false);
    }
    for o in ops {
        if read(trees, lay, o.tree, o.idx)?.is_some() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Compares every tree with the model, by scan and by point reads.
/// effect: Ok(entries compared), or the first mismatch.
pub fn compare(db: &Db, trees: &[Tree], lay: &Layout, m: &Model) -> Result<u64, Violation> {
    for name in db.tree_names() {
        if !lay.trees.iter().any(|(n, _)| *n == name) {
            return Err(format!("tree {name:?} exists but was never written"));
        }
    }
    let mut entries = 0u64;
    for (t, tree) in trees.iter().enumerate() {
        let name = &lay.trees[t].0;
        let want = &m.trees[t];
        let mut seen = 0usize;
        let mut last: Option<Vec<u8>> = None;
        for kv in tree.iter() {
            let (k, v) = kv.map_err(|e| format!("scanning {name}: {e}"))?;
            if last.as_ref().is_some_and(|l| *l >= k) {
                return Err(format!(
                    "scan of {name} is out of order at {:?}",
                    String::from_utf8_lossy(&k)
                ));
            }
            let Some(idx) = key_index(&k) else {
                return Err(format!(
                    "{name} holds key {:?} that was never written",
                    String::from_utf8_lossy(&k)
                ));
            };
            let got = decode(&v, t as u8, idx).map_err(|e| format!("{name}/k{idx}: {e}"))?;
            match want.get(&idx) {
                None => return Err(format!(
                    "{name}/k{idx} holds batch {} ({} bytes) but acknowledged history says it is absent",
                    got.0, got.1
                )),
                Some(w) if *w != got => return Err(format!(
                    "{name}/k{idx} holds batch {} ({} bytes); expected batch {} ({} bytes)",
                    got.0, got.1, w.0, w.1
                )),
                Some(_) => seen += 1,
            }
            last = Some(k);
        }
        if seen != want.len() {
            let lost = want
                .iter()
                .find(|(i, _)| !matches!(read(trees, lay, t as u8, **i), Ok(Some(_))));
            let first = lost.map_or("none found by get".into(), |(i, w)| {
                format!("k{i}, written by acknowledged batch {}", w.0)
            });
            return Err(format!(
                "{name}: {} acknowledged keys missing (first: {first})",
                want.len() - seen
            ));
        }
        for (idx, w) in want {
            if read(trees, lay, t as u8, *idx)? != Some(*w) {
                return Err(format!(
                    "get {name}/k{idx} disagrees with the scan (expected batch {})",
                    w.0
                ));
            }
        }
        entries += seen as u64;
    }
    Ok(entries)
}

/// `Db::check` must find nothing wrong. Returns the structures the file
/// holds (`Db::file_map`, one walk doing both), so a run can tell which
/// on-disk forms its kills met (segmented buffers and basements among them).
pub fn check(db: &Db) -> Result<BTreeSet<String>, Violation> {
    let fm = db
        .file_map()
        .map_err(|e| format!("check failed to run: {e}"))?;
    let rep = &fm.report;
    if !rep.is_ok() {
        return Err(format!(
            "check found {} problem(s); first: {}",
            rep.problems.len(),
            rep.problems[0]
        ));
    }
    Ok(fm.regions.into_iter().map(|r| r.structure).collect())
}
