//! `pagewise.Tree`: a named tree as an ordered mapping of bytes to bytes.

use crate::bytes::{self, extract};
use crate::db::Shared;
use crate::errors::to_py;
use crate::iter::{RangeIter, Yield};
use pyo3::exceptions::{PyKeyError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use std::ops::Bound as B;
use std::sync::Arc;

/// A named, ordered map from byte keys to byte values (see the stub).
#[pyclass(module = "pagewise", frozen)]
pub struct Tree {
    tree: pagewise::Tree,
    shared: Arc<Shared>,
}

impl Tree {
    pub fn new(tree: pagewise::Tree, shared: Arc<Shared>) -> Self {
        Self { tree, shared }
    }

    pub fn name_str(&self) -> &str {
        self.tree.name()
    }

    fn get_bytes(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Option<Vec<u8>>> {
        let k = extract(key, "key")?;
        let t = &self.tree;
        py.allow_threads(|| t.get(&k)).map_err(to_py)
    }

    fn iter(
        &self,
        lo: B<Vec<u8>>,
        hi: B<Vec<u8>>,
        reverse: bool,
        what: Yield,
    ) -> PyResult<RangeIter> {
        self.shared.check_open()?;
        let it = self.tree.range::<Vec<u8>, _>((lo, hi));
        Ok(RangeIter::new(it, self.shared.clone(), reverse, what))
    }
}

fn bound(b: Option<&Bound<'_, PyAny>>, what: &str, included: bool) -> PyResult<B<Vec<u8>>> {
    Ok(match b {
        None => B::Unbounded,
        Some(o) if o.is_none() => B::Unbounded,
        Some(o) if included => B::Included(extract(o, what)?.to_vec()),
        Some(o) => B::Excluded(extract(o, what)?.to_vec()),
    })
}

#[pymethods]
impl Tree {
    /// The tree's name.
    #[getter]
    fn name(&self) -> &str {
        self.tree.name()
    }

    /// "btree" or "bepsilon"; None for a B+tree not written yet.
    #[getter]
    fn kind(&self) -> PyResult<Option<&'static str>> {
        let db = self.shared.db()?;
        Ok(db.tree_kind(self.tree.name()).map(|k| k.name()))
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

    fn __getitem__<'py>(&self, py: Python<'py>, key: &Bound<'py, PyAny>) -> PyResult<PyObject> {
        match self.get_bytes(py, key)? {
            Some(v) => Ok(bytes::to_py(py, &v).into_any().unbind()),
            None => Err(PyKeyError::new_err(key.clone().unbind())),
        }
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let k = extract(key, "key")?;
        let t = &self.tree;
        py.allow_threads(|| t.contains(&k)).map_err(to_py)
    }

    /// Sets `key` to `value` (one atomic write).
    fn insert(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (k, v) = (extract(key, "key")?, extract(value, "value")?);
        let t = &self.tree;
        py.allow_threads(|| t.insert(&k, &v)).map_err(to_py)
    }

    fn __setitem__(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.insert(py, key, value)
    }

    /// Removes `key`; nothing happens if it is absent.
    fn remove(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let k = extract(key, "key")?;
        let t = &self.tree;
        py.allow_threads(|| t.remove(&k)).map_err(to_py)
    }

    /// Removes `key`; KeyError if it is absent (checked just before).
    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let k = extract(key, "key")?;
        let t = &self.tree;
        let found = py
            .allow_threads(|| match t.contains(&k)? {
                true => t.remove(&k).map(|_| true),
                false => Ok(false),
            })
            .map_err(to_py)?;
        if !found {
            return Err(PyKeyError::new_err(key.clone().unbind()));
        }
        Ok(())
    }

    /// Merges `operand` into `key` with the Db's merge operator (B-epsilon trees).
    fn upsert(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        operand: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (k, o) = (extract(key, "key")?, extract(operand, "operand")?);
        let t = &self.tree;
        py.allow_threads(|| t.upsert(&k, &o)).map_err(to_py)
    }

    /// Writes every (key, value) of a mapping or iterable of pairs atomically.
    fn update(&self, py: Python<'_>, items: &Bound<'_, PyAny>) -> PyResult<()> {
        let mut b = pagewise::Batch::new();
        let pairs = match items.downcast::<PyDict>() {
            Ok(d) => d.call_method0("items")?.try_iter()?,
            Err(_) => items.try_iter()?,
        };
        for pair in pairs {
            let pair = pair?;
            let tuple = pair
                .downcast::<PyTuple>()
                .ok()
                .filter(|t| t.len() == 2)
                .ok_or_else(|| {
                    PyTypeError::new_err("update takes a mapping or (key, value) pairs")
                })?;
            let (k, v) = (tuple.get_item(0)?, tuple.get_item(1)?);
            b.insert(self.tree.name(), extract(&k, "key")?, extract(&v, "value")?);
        }
        let db = self.shared.db()?;
        py.allow_threads(|| db.apply(b)).map_err(to_py)
    }

    /// Number of entries (a B-epsilon tree counts them by iterating).
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        self.shared.check_open()?;
        let t = &self.tree;
        let n = py.allow_threads(|| t.len());
        self.shared.check_open()?;
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
        self.shared.check_open()?;
        let p = extract(prefix, "prefix")?;
        let it = self.tree.prefix(&p);
        Ok(RangeIter::new(
            it,
            self.shared.clone(),
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
        self.shared.check_open()?;
        let t = &self.tree;
        let kv = py.allow_threads(|| t.first()).map_err(to_py)?;
        Ok(kv.map(|(k, v)| pair(py, &k, &v)))
    }

    /// The entry with the largest key, or None.
    fn last(&self, py: Python<'_>) -> PyResult<Option<(PyObject, PyObject)>> {
        self.shared.check_open()?;
        let t = &self.tree;
        let kv = py.allow_threads(|| t.last()).map_err(to_py)?;
        Ok(kv.map(|(k, v)| pair(py, &k, &v)))
    }

    fn __repr__(&self) -> String {
        format!("<pagewise.Tree {:?}>", self.tree.name())
    }
}

fn pair(py: Python<'_>, k: &[u8], v: &[u8]) -> (PyObject, PyObject) {
    (
        bytes::to_py(py, k).into_any().unbind(),
        bytes::to_py(py, v).into_any().unbind(),
    )
}
