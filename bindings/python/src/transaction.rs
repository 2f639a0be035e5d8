//! `pagewise.Transaction`: an optimistic write transaction (the engine's
//! `Transaction`): reads of a snapshot taken when it began plus its own
//! writes, validated at commit. A context manager: commits when the block
//! ends normally, aborts when it raises. Safe to share between threads: the
//! engine transaction sits behind a mutex, always taken with the GIL
//! released.

use crate::bytes::{self, extract};
use crate::db::Shared;
use crate::errors::{self, to_py};
use crate::iter::{Alive, RangeIter, Source, Yield};
use crate::read::bound;
use crate::tree::{tree_name, write_args};
use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const ENDED: &str = "the transaction has ended (it was committed or aborted, or its `with` block ended); begin a new one with db.transaction()";

/// The engine transaction shared by a `Transaction` object and its
/// iterators; `None` once committed or aborted.
pub struct TxState {
    tx: Mutex<Option<pagewise::Transaction>>,
    active: AtomicBool,
    shared: Arc<Shared>,
}

impl TxState {
    /// Runs `f` on the transaction with the GIL released; ClosedError if
    /// the Db is closed or the transaction has ended.
    fn with<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut pagewise::Transaction) -> pagewise::Result<R> + Send,
    ) -> PyResult<R> {
        self.shared.check_open()?;
        py.allow_threads(|| {
            let mut tx = self.tx.lock();
            let tx = tx.as_mut().ok_or_else(|| errors::ended(ENDED))?;
            f(tx).map_err(to_py)
        })
    }

    /// Runs a write (infallible in the engine) as `with` does.
    fn write(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut pagewise::Transaction) + Send,
    ) -> PyResult<()> {
        self.with(py, |tx| {
            f(tx);
            Ok(())
        })
    }

    /// Ends the transaction and hands over the engine's (GIL released by
    /// the caller); None if it had ended.
    fn take(&self) -> Option<pagewise::Transaction> {
        let mut tx = self.tx.lock();
        self.active.store(false, Ordering::Release);
        tx.take()
    }
}

impl Alive for TxState {
    fn check(&self) -> PyResult<()> {
        self.shared.check_open()?;
        match self.active.load(Ordering::Acquire) {
            true => Ok(()),
            false => Err(errors::ended(ENDED)),
        }
    }
}

/// An optimistic write transaction (see the stub).
#[pyclass(module = "pagewise", frozen)]
pub struct Transaction {
    state: Arc<TxState>,
}

impl Transaction {
    pub fn new(tx: pagewise::Transaction, shared: Arc<Shared>) -> Self {
        let state = TxState {
            tx: Mutex::new(Some(tx)),
            active: AtomicBool::new(true),
            shared,
        };
        Transaction {
            state: Arc::new(state),
        }
    }

    fn get_bytes(
        &self,
        py: Python<'_>,
        tree: &Bound<'_, PyAny>,
        key: &Bound<'_, PyAny>,
    ) -> PyResult<Option<Vec<u8>>> {
        let (name, k) = (tree_name(tree)?, extract(key, "key")?);
        self.state.with(py, |tx| tx.get(&name, &k))
    }
}

#[pymethods]
impl Transaction {
    /// The value of `key` in `tree` as the transaction sees it (its
    /// snapshot with its own writes over it), or `default` when absent.
    #[pyo3(signature = (tree, key, default = None))]
    fn get(
        &self,
        py: Python<'_>,
        tree: &Bound<'_, PyAny>,
        key: &Bound<'_, PyAny>,
        default: Option<PyObject>,
    ) -> PyResult<PyObject> {
        Ok(match self.get_bytes(py, tree, key)? {
            Some(v) => bytes::to_py(py, &v).into_any().unbind(),
            None => default.unwrap_or_else(|| py.None()),
        })
    }

    /// Whether `key` is in `tree` as the transaction sees it.
    fn contains(
        &self,
        py: Python<'_>,
        tree: &Bound<'_, PyAny>,
        key: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        Ok(self.get_bytes(py, tree, key)?.is_some())
    }

    /// (key, value) pairs of `tree` with start <= key < end as the
    /// transaction sees them; a lazy iterator reading one entry a step (what
    /// it returned is what the commit validates).
    #[pyo3(signature = (tree, start = None, end = None, *, reverse = false))]
    fn range(
        &self,
        py: Python<'_>,
        tree: &Bound<'_, PyAny>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        reverse: bool,
    ) -> PyResult<RangeIter> {
        let name = tree_name(tree)?;
        let (lo, hi) = (bound(start, "start", true)?, bound(end, "end", false)?);
        let it = self.state.with(py, |tx| tx.range(&name, (lo, hi)))?;
        Ok(RangeIter::exact(
            Source::Tx(it),
            self.state.clone(),
            reverse,
            Yield::Items,
        ))
    }

    /// (key, value) pairs of `tree` whose key starts with `prefix` (as `range`).
    #[pyo3(signature = (tree, prefix, *, reverse = false))]
    fn prefix(
        &self,
        py: Python<'_>,
        tree: &Bound<'_, PyAny>,
        prefix: &Bound<'_, PyAny>,
        reverse: bool,
    ) -> PyResult<RangeIter> {
        let (name, p) = (tree_name(tree)?, extract(prefix, "prefix")?);
        let it = self.state.with(py, |tx| tx.prefix(&name, &p))?;
        Ok(RangeIter::exact(
            Source::Tx(it),
            self.state.clone(),
            reverse,
            Yield::Items,
        ))
    }

    /// Sets `key` to `value` in `tree` when the transaction commits.
    fn insert(
        &self,
        py: Python<'_>,
        tree: &Bound<'_, PyAny>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (name, k, v) = write_args(tree, key, value, "value")?;
        self.state.write(py, |tx| tx.insert(&name, &k, &v))
    }

    /// Removes `key` from `tree` when the transaction commits.
    fn remove(
        &self,
        py: Python<'_>,
        tree: &Bound<'_, PyAny>,
        key: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (name, k) = (tree_name(tree)?, extract(key, "key")?);
        self.state.write(py, |tx| tx.remove(&name, &k))
    }

    /// Merges `operand` into `key` of B-epsilon tree `tree` when the
    /// transaction commits: a blind write that never conflicts.
    fn upsert(
        &self,
        py: Python<'_>,
        tree: &Bound<'_, PyAny>,
        key: &Bound<'_, PyAny>,
        operand: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (name, k, o) = write_args(tree, key, operand, "operand")?;
        self.state.write(py, |tx| tx.upsert(&name, &k, &o))
    }

    /// Writes buffered so far.
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        self.state.with(py, |tx| Ok(tx.len()))
    }

    /// Validates what the transaction read and, if nothing changed, writes
    /// its writes atomically; ConflictError (nothing written) otherwise.
    /// Either way the transaction has ended.
    fn commit(&self, py: Python<'_>) -> PyResult<()> {
        self.state.shared.check_open()?;
        py.allow_threads(|| {
            let tx = self.state.take().ok_or_else(|| errors::ended(ENDED))?;
            tx.commit().map_err(to_py)
        })
    }

    /// Ends the transaction without writing anything; does nothing if it
    /// has ended.
    fn abort(&self, py: Python<'_>) {
        py.allow_threads(|| drop(self.state.take()));
    }

    /// True once committed or aborted (or once its Db is closed).
    #[getter]
    fn closed(&self) -> bool {
        self.state.check().is_err()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Commits if the block ended normally and the transaction is still
    /// open; aborts if the block raised (the exception propagates).
    #[pyo3(signature = (*exc))]
    fn __exit__(&self, py: Python<'_>, exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        if errors::block_raised(exc) {
            self.abort(py);
        } else if self.state.active.load(Ordering::Acquire) {
            self.commit(py)?;
        }
        Ok(false)
    }

    fn __repr__(&self) -> String {
        let state = if self.closed() { " ended" } else { "" };
        format!(
            "<pagewise.Transaction of {:?}{state}>",
            self.state.shared.path
        )
    }
}
