//! `pagewise.Tree`: a named tree as an ordered mapping of bytes to bytes.
//! The reads are its base class's (`ReadableTree`, src/read.rs); the
//! writes are here.

use crate::bytes::{extract, Bytes};
use crate::db::Shared;
use crate::errors::to_py;
use crate::read::{Origin, ReadableTree};
use pyo3::exceptions::{PyKeyError, PyTypeError};
use pyo3::prelude::*;
use pyo3::pyclass_init::PyClassInitializer;
use pyo3::types::{PyDict, PyTuple};
use std::sync::Arc;

/// A named, ordered map from byte keys to byte values (see the stub).
#[pyclass(module = "pagewise", extends = ReadableTree, frozen)]
pub struct Tree {
    tree: pagewise::Tree,
    shared: Arc<Shared>,
}

impl Tree {
    /// A new `Tree` object for engine tree `tree` of the Db `shared`.
    pub fn create(py: Python<'_>, tree: pagewise::Tree, shared: Arc<Shared>) -> PyResult<Py<Tree>> {
        let base = ReadableTree::new(Origin::Live {
            tree: tree.clone(),
            shared: shared.clone(),
        });
        Py::new(
            py,
            PyClassInitializer::from(base).add_subclass(Tree { tree, shared }),
        )
    }

    pub fn name_str(&self) -> &str {
        self.tree.name()
    }
}

/// A tree argument: a `Tree` or its name.
pub fn tree_name(tree: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(t) = tree.downcast::<Tree>() {
        return Ok(t.get().name_str().to_string());
    }
    tree.extract::<String>()
        .map_err(|_| PyTypeError::new_err("tree must be a pagewise.Tree or a tree name (str)"))
}

/// The arguments of a write of a Batch or Transaction: the tree's name,
/// the key, and the value or operand (`what` names it in a TypeError).
pub fn write_args<'a>(
    tree: &Bound<'_, PyAny>,
    key: &'a Bound<'_, PyAny>,
    value: &'a Bound<'_, PyAny>,
    what: &str,
) -> PyResult<(String, Bytes<'a>, Bytes<'a>)> {
    Ok((
        tree_name(tree)?,
        extract(key, "key")?,
        extract(value, what)?,
    ))
}

#[pymethods]
impl Tree {
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
}
