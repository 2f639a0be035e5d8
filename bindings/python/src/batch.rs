//! `pagewise.Batch`: writes on one or more trees applied atomically.

use crate::bytes::extract;
use crate::db::Shared;
use crate::errors::{self, to_py};
use crate::tree::{tree_name, write_args};
use parking_lot::Mutex;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::sync::Arc;

/// Writes on one or more trees that become visible and durable together.
#[pyclass(module = "pagewise", frozen)]
pub struct Batch {
    ops: Mutex<pagewise::Batch>,
    /// The Db a `with db.batch() as b:` block applies to on exit.
    db: Option<Arc<Shared>>,
}

impl Batch {
    pub fn bound(db: Arc<Shared>) -> Self {
        Batch {
            ops: Mutex::new(pagewise::Batch::new()),
            db: Some(db),
        }
    }

    /// Applies the batch's writes to `shared` and empties it.
    pub fn apply_to(&self, py: Python<'_>, shared: &Shared) -> PyResult<()> {
        let db = shared.db()?;
        let ops = std::mem::take(&mut *self.ops.lock());
        py.allow_threads(|| db.apply(ops)).map_err(to_py)
    }
}

#[pymethods]
impl Batch {
    #[new]
    fn new() -> Self {
        Batch {
            ops: Mutex::new(pagewise::Batch::new()),
            db: None,
        }
    }

    /// Sets `key` to `value` in `tree` (a Tree or a name).
    fn insert(
        &self,
        tree: &Bound<'_, PyAny>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (name, k, v) = write_args(tree, key, value, "value")?;
        self.ops.lock().insert(name, k, v);
        Ok(())
    }

    /// Removes `key` from `tree` (no effect if absent).
    fn remove(&self, tree: &Bound<'_, PyAny>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let (name, k) = (tree_name(tree)?, extract(key, "key")?);
        self.ops.lock().remove(name, k);
        Ok(())
    }

    /// Merges `operand` into `key` of B-epsilon tree `tree`.
    fn upsert(
        &self,
        tree: &Bound<'_, PyAny>,
        key: &Bound<'_, PyAny>,
        operand: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (name, k, o) = write_args(tree, key, operand, "operand")?;
        self.ops.lock().upsert(name, k, o);
        Ok(())
    }

    /// Drops every write in the batch.
    fn clear(&self) {
        *self.ops.lock() = pagewise::Batch::new();
    }

    fn __len__(&self) -> usize {
        self.ops.lock().len()
    }

    /// Bytes of keys, values and operands in the batch.
    #[getter]
    fn user_bytes(&self) -> usize {
        self.ops.lock().user_bytes()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Applies the batch unless the block raised (then it is dropped).
    #[pyo3(signature = (*exc))]
    fn __exit__(&self, py: Python<'_>, exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        if errors::block_raised(exc) {
            self.clear();
            return Ok(false);
        }
        let db = self.db.as_ref().ok_or_else(|| {
            PyTypeError::new_err("only a batch from db.batch() applies itself; use db.apply(batch)")
        })?;
        self.apply_to(py, db)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!("<pagewise.Batch of {} writes>", self.ops.lock().len())
    }
}
