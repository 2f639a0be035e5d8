//! `pagewise.ReadableTree`: the read side of a tree, the base class of
//! `pagewise.Tree` (the live tree, which adds the writes) and of
//! `pagewise.SnapshotTree` (a tree as of a snapshot). Every read method is
//! written once here, over either origin.

use crate::bytes::{self, extract};
use crate::db::Shared;
use crate::errors::to_py;
use crate::iter::{Alive, Kv, RangeIter, Source, Yield};
use crate::snapshot::SnapState;
use pagewise::TreeKind;
use pyo3::exceptions::PyKeyError;
use pyo3::prelude::*;
use std::ops::Bound as B;
use std::sync::Arc;

/// Where a tree object reads from.
pub enum Origin {
    /// The live tree: reads see the latest commit.
    Live {
        tree: pagewise::Tree,
        shared: Arc<Shared>,
    },
    /// Tree `name` of a snapshot: reads see the snapshot's commit.
    Snapshot { snap: Arc<SnapState>, name: String },
}

/// An engine handle to read with, for one call.
enum Reader<'a> {
    Live(&'a pagewise::Tree),
    Snap(pagewise::SnapshotTree),
}

impl Reader<'_> {
    fn get(&self, key: &[u8]) -> pagewise::Result<Option<Vec<u8>>> {
        match self {
            Reader::Live(t) => t.get(key),
            Reader::Snap(t) => t.get(key),
        }
    }

    fn get_many(&self, keys: &[&[u8]]) -> pagewise::Result<Vec<Option<Vec<u8>>>> {
        match self {
            Reader::Live(t) => t.get_many(keys),
            Reader::Snap(t) => t.get_many(keys),
        }
    }

    fn contains(&self, key: &[u8]) -> pagewise::Result<bool> {
        match self {
            Reader::Live(t) => t.contains(key),
            Reader::Snap(t) => t.contains(key),
        }
    }

    fn range(&self, lo: B<Vec<u8>>, hi: B<Vec<u8>>) -> pagewise::Iter {
        match self {
            Reader::Live(t) => t.range::<Vec<u8>, _>((lo, hi)),
            Reader::Snap(t) => t.range::<Vec<u8>, _>((lo, hi)),
        }
    }

    fn prefix(&self, p: &[u8]) -> pagewise::Iter {
        match self {
            Reader::Live(t) => t.prefix(p),
            Reader::Snap(t) => t.prefix(p),
        }
    }

    /// Entries; a B-epsilon tree's are counted by iterating, and a read
    /// error on the way is raised rather than cutting the count short.
    fn count(&self, bepsilon: bool) -> pagewise::Result<u64> {
        if bepsilon {
            let all = self.range(B::Unbounded, B::Unbounded);
            return all.map(|r| r.map(|_| 1)).sum();
        }
        Ok(match self {
            Reader::Live(t) => t.len(),
            Reader::Snap(t) => t.len(),
        })
    }
}

/// A lower (`included`) or upper bound from a key or None (unbounded).
pub fn bound(b: Option<&Bound<'_, PyAny>>, what: &str, included: bool) -> PyResult<B<Vec<u8>>> {
    Ok(match b {
        None => B::Unbounded,
        Some(o) if o.is_none() => B::Unbounded,
        Some(o) if included => B::Included(extract(o, what)?.to_vec()),
        Some(o) => B::Excluded(extract(o, what)?.to_vec()),
    })
}

/// A (key, value) tuple of bytes.
pub fn pair(py: Python<'_>, (k, v): &Kv) -> (PyObject, PyObject) {
    (
        bytes::to_py(py, k).into_any().unbind(),
        bytes::to_py(py, v).into_any().unbind(),
    )
}

/// The read side of a tree (base class of `Tree` and `SnapshotTree`).
#[pyclass(module = "pagewise", subclass, frozen)]
pub struct ReadableTree {
    origin: Origin,
}

impl ReadableTree {
    pub fn new(origin: Origin) -> Self {
        ReadableTree { origin }
    }

    fn name_str(&self) -> &str {
        match &self.origin {
            Origin::Live { tree, .. } => tree.name(),
            Origin::Snapshot { name, .. } => name,
        }
    }

    /// What iterators made from this tree check before each step.
    fn alive(&self) -> Arc<dyn Alive> {
        match &self.origin {
            Origin::Live { shared, .. } => shared.clone(),
            Origin::Snapshot { snap, .. } => snap.clone(),
        }
    }

    /// An engine handle, or ClosedError when the snapshot is closed (the
    /// live tree's calls fail with the engine's own ClosedError).
    fn reader(&self) -> PyResult<Reader<'_>> {
        match &self.origin {
            Origin::Live { tree, .. } => Ok(Reader::Live(tree)),
            Origin::Snapshot { snap, name } => {
                let t = snap.get()?.tree(name).map_err(to_py)?;
                Ok(Reader::Snap(t))
            }
        }
    }

    fn tree_kind(&self) -> PyResult<Option<TreeKind>> {
        Ok(match &self.origin {
            Origin::Live { tree, shared } => shared.db()?.tree_kind(tree.name()),
            Origin::Snapshot { snap, name } => snap.get()?.tree_kind(name),
        })
    }

    fn get_bytes(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Option<Vec<u8>>> {
        let k = extract(key, "key")?;
        let r = self.reader()?;
        py.allow_threads(|| r.get(&k)).map_err(to_py)
    }

    fn iter(
        &self,
        lo: B<Vec<u8>>,
        hi: B<Vec<u8>>,
        reverse: bool,
        what: Yield,
    ) -> PyResult<RangeIter> {
        self.alive().check()?;
        let it = self.reader()?.range(lo, hi);
        Ok(RangeIter::new(
            Source::Tree(it),
            self.alive(),
            reverse,
            what,
        ))
    }

    /// The first entry from the front (`last` false) or the back.
    fn end(&self, py: Python<'_>, last: bool) -> PyResult<Option<(PyObject, PyObject)>> {
        self.alive().check()?;
        let mut it = self.reader()?.range(B::Unbounded, B::Unbounded);
        let kv = py
            .allow_threads(|| match last {
                false => it.next().transpose(),
                true => it.next_back().transpose(),
            })
            .map_err(to_py)?;
        Ok(kv.map(|kv| pair(py, &kv)))
    }
}

#[pymethods]
impl ReadableTree {
    /// The tree's name.
    #[getter]
    fn name(&self) -> &str {
        self.name_str()
    }

    /// "btree" or "bepsilon"; None for a B+tree not written yet.
    #[getter]
    fn kind(&self) -> PyResult<Option<&'static str>> {
        Ok(self.tree_kind()?.map(|k| k.name()))
    }

    /// The value of `key`, or `default` when absent.
    #[pyo3(signature = (key, default = None))]
    fn get(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        default: Option<PyObject>,
    ) -> PyResult<PyObject> {
        Ok(match self.get_bytes(py, key)? {
            Some(v) => bytes::to_py(py, &v).into_any().unbind(),
            None => default.unwrap_or_else(|| py.None()),
        })
    }

    /// The values of `keys` in their order (None where a key is missing),
    /// read together: the pages the batch misses are read through one queue
    /// per tree level, with the GIL released.
    fn get_many(&self, py: Python<'_>, keys: &Bound<'_, PyAny>) -> PyResult<Vec<PyObject>> {
        let items: Vec<Bound<'_, PyAny>> = keys.try_iter()?.collect::<PyResult<_>>()?;
        let owned: Vec<_> = items
            .iter()
            .map(|k| extract(k, "key"))
            .collect::<PyResult<_>>()?;
        let slices: Vec<&[u8]> = owned.iter().map(|k| &**k).collect();
        let r = self.reader()?;
        let got = py.allow_threads(|| r.get_many(&slices)).map_err(to_py)?;
        Ok(got
            .into_iter()
            .map(|v| match v {
                Some(v) => bytes::to_py(py, &v).into_any().unbind(),
                None => py.None(),
            })
            .collect())
    }

    fn __getitem__<'py>(&self, py: Python<'py>, key: &Bound<'py, PyAny>) -> PyResult<PyObject> {
        match self.get_bytes(py, key)? {
            Some(v) => Ok(bytes::to_py(py, &v).into_any().unbind()),
            None => Err(PyKeyError::new_err(key.clone().unbind())),
        }
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let k = extract(key, "key")?;
        let r = self.reader()?;
        py.allow_threads(|| r.contains(&k)).map_err(to_py)
    }

    /// Number of entries (a B-epsilon tree counts them by iterating).
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        let bepsilon = matches!(self.tree_kind()?, Some(TreeKind::BEpsilon(_)));
        let r = self.reader()?;
        let n = py.allow_threads(|| r.count(bepsilon)).map_err(to_py)?;
        self.alive().check()?; // the engine counts 0 once closed
        Ok(n as usize)
    }

    /// (key, value) pairs with start <= key < end (None: unbounded), in key
    /// order or descending with reverse=True; a lazy iterator.
    #[pyo3(signature = (start = None, end = None, *, reverse = false))]
    fn range(
        &self,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        reverse: bool,
    ) -> PyResult<RangeIter> {
        let lo = bound(start, "start", true)?;
        let hi = bound(end, "end", false)?;
        self.iter(lo, hi, reverse, Yield::Items)
    }

    /// (key, value) pairs whose key starts with `prefix`; a lazy iterator.
    #[pyo3(signature = (prefix, *, reverse = false))]
    fn prefix(&self, prefix: &Bound<'_, PyAny>, reverse: bool) -> PyResult<RangeIter> {
        let p = extract(prefix, "prefix")?;
        self.alive().check()?;
        let it = self.reader()?.prefix(&p);
        Ok(RangeIter::new(
            Source::Tree(it),
            self.alive(),
            reverse,
            Yield::Items,
        ))
    }

    fn __iter__(&self) -> PyResult<RangeIter> {
        self.iter(B::Unbounded, B::Unbounded, false, Yield::Keys)
    }

    /// The keys in order; a lazy iterator.
    fn keys(&self) -> PyResult<RangeIter> {
        self.iter(B::Unbounded, B::Unbounded, false, Yield::Keys)
    }

    /// The values in key order; a lazy iterator.
    fn values(&self) -> PyResult<RangeIter> {
        self.iter(B::Unbounded, B::Unbounded, false, Yield::Values)
    }

    /// The (key, value) pairs in key order; a lazy iterator.
    fn items(&self) -> PyResult<RangeIter> {
        self.iter(B::Unbounded, B::Unbounded, false, Yield::Items)
    }

    /// The entry with the smallest key, or None.
    fn first(&self, py: Python<'_>) -> PyResult<Option<(PyObject, PyObject)>> {
        self.end(py, false)
    }

    /// The entry with the largest key, or None.
    fn last(&self, py: Python<'_>) -> PyResult<Option<(PyObject, PyObject)>> {
        self.end(py, true)
    }

    fn __repr__(&self) -> String {
        let class = match self.origin {
            Origin::Live { .. } => "Tree",
            Origin::Snapshot { .. } => "SnapshotTree",
        };
        format!("<pagewise.{class} {:?}>", self.name_str())
    }
}
