//! `pagewise.Db`: an open database. Every call that may do I/O or wait for
//! a lock runs with the GIL released.

use crate::batch::Batch;
use crate::errors::{self, to_py};
use crate::options;
use crate::snapshot::Snapshot;
use crate::transaction::Transaction;
use crate::tree::Tree;
use parking_lot::RwLock;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyType};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The engine Db shared by a `Db` object and the trees, batches and
/// iterators made from it; `None` once closed.
pub struct Shared {
    db: RwLock<Option<pagewise::Db>>,
    pub path: PathBuf,
}

impl Shared {
    /// A handle on the open Db, or `ClosedError`.
    pub fn db(&self) -> PyResult<pagewise::Db> {
        self.db
            .read()
            .clone()
            .ok_or_else(|| errors::closed(&self.path))
    }

    pub fn is_closed(&self) -> bool {
        self.db.read().is_none()
    }

    pub fn check_open(&self) -> PyResult<()> {
        if self.is_closed() {
            return Err(errors::closed(&self.path));
        }
        Ok(())
    }
}

/// An open pagewise database (see the stub for the keyword options).
#[pyclass(module = "pagewise", frozen)]
pub struct Db {
    pub shared: Arc<Shared>,
}

enum Mode {
    Create,
    Open,
    OpenOrCreate,
}

fn open_with(
    py: Python<'_>,
    path: PathBuf,
    kw: Option<&Bound<'_, PyDict>>,
    mode: Mode,
) -> PyResult<Db> {
    let opts = options::db_options(kw)?;
    let db = py
        .allow_threads(|| match mode {
            Mode::Create => pagewise::Db::create(&path, opts),
            Mode::Open => pagewise::Db::open(&path, opts),
            Mode::OpenOrCreate => pagewise::Db::open_or_create(&path, opts),
        })
        .map_err(to_py)?;
    Ok(Db {
        shared: Arc::new(Shared {
            db: RwLock::new(Some(db)),
            path,
        }),
    })
}

/// Engine results that are serde-serializable, as Python objects.
pub fn to_python<'py, T: serde::Serialize>(py: Python<'py>, v: &T) -> PyResult<Bound<'py, PyAny>> {
    let s = serde_json::to_string(v)
        .map_err(|e| errors::Error::new_err(format!("cannot encode the result: {e}")))?;
    py.import("json")?.call_method1("loads", (s,))
}

#[pymethods]
impl Db {
    /// Opens the database at `path`, creating it if it does not exist.
    #[new]
    #[pyo3(signature = (path, **options))]
    fn new(py: Python<'_>, path: PathBuf, options: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        open_with(py, path, options, Mode::OpenOrCreate)
    }

    /// Creates a new database at `path` (ExistsError if it exists).
    #[classmethod]
    #[pyo3(signature = (path, **options))]
    fn create(
        _cls: &Bound<'_, PyType>,
        py: Python<'_>,
        path: PathBuf,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        open_with(py, path, options, Mode::Create)
    }

    /// Opens an existing database (NotFoundError if missing), replaying its log.
    #[classmethod]
    #[pyo3(signature = (path, **options))]
    fn open(
        _cls: &Bound<'_, PyType>,
        py: Python<'_>,
        path: PathBuf,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        open_with(py, path, options, Mode::Open)
    }

    /// A handle on tree `name`. Without `kind`, the tree's existing kind (a
    /// new tree becomes a B+tree on its first write); with `kind="btree"` or
    /// `kind="bepsilon"` (plus B-epsilon options) the tree is created now if
    /// missing, and OptionsError is raised if it exists with another kind.
    #[pyo3(signature = (name, kind = None, **options))]
    fn tree(
        &self,
        py: Python<'_>,
        name: &str,
        kind: Option<&str>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<Tree>> {
        let db = self.shared.db()?;
        let t = match kind {
            None if options.is_some_and(|d| !d.is_empty()) => {
                return Err(pyo3::exceptions::PyTypeError::new_err(
                    "tree options need kind=\"bepsilon\"",
                ))
            }
            None => db.tree(name),
            Some(k) => {
                let kind = options::tree_kind(k, options)?;
                py.allow_threads(|| db.tree_with(name, kind))
            }
        }
        .map_err(to_py)?;
        Tree::create(py, t, self.shared.clone())
    }

    /// Names of the trees that exist, in name order.
    fn tree_names(&self) -> PyResult<Vec<String>> {
        Ok(self.shared.db()?.tree_names())
    }

    /// "btree" or "bepsilon" for an existing tree, None if it does not exist.
    fn tree_kind(&self, name: &str) -> PyResult<Option<&'static str>> {
        Ok(self.shared.db()?.tree_kind(name).map(|k| k.name()))
    }

    /// A new empty Batch; used as a context manager it is applied on exit
    /// (unless the block raised).
    fn batch(&self) -> PyResult<Batch> {
        self.shared.check_open()?;
        Ok(Batch::bound(self.shared.clone()))
    }

    /// A snapshot of every tree at the latest commit; used as a context
    /// manager it is closed on exit.
    fn snapshot(&self, py: Python<'_>) -> PyResult<Snapshot> {
        let db = self.shared.db()?;
        let s = py.allow_threads(|| db.snapshot()).map_err(to_py)?;
        Ok(Snapshot::new(s, self.shared.clone()))
    }

    /// Begins an optimistic write transaction; used as a context manager it
    /// commits on exit, or aborts if the block raised.
    fn transaction(&self, py: Python<'_>) -> PyResult<Transaction> {
        let db = self.shared.db()?;
        let tx = py.allow_threads(|| db.transaction()).map_err(to_py)?;
        Ok(Transaction::new(tx, self.shared.clone()))
    }

    /// Writes a consistent copy of the Db, as of a snapshot taken now, to
    /// the new database `path` while writers go on; returns the report as a
    /// dict (`elapsed` in seconds).
    fn backup<'py>(&self, py: Python<'py>, path: PathBuf) -> PyResult<Bound<'py, PyAny>> {
        let db = self.shared.db()?;
        let r = py.allow_threads(|| db.backup(&path)).map_err(to_py)?;
        let d = to_python(py, &r)?;
        d.set_item("elapsed", r.elapsed.as_secs_f64())?;
        Ok(d)
    }

    /// Applies every write of `batch` atomically and empties it.
    fn apply(&self, py: Python<'_>, batch: &Batch) -> PyResult<()> {
        batch.apply_to(py, &self.shared)
    }

    /// Makes every acknowledged write durable (for durability="buffered").
    fn sync(&self, py: Python<'_>) -> PyResult<()> {
        let db = self.shared.db()?;
        py.allow_threads(|| db.sync()).map_err(to_py)
    }

    /// Moves every message buffered in the B-epsilon trees down to their
    /// leaves and collects value runs, then checkpoints: replaced and
    /// removed values' space comes back at once.
    fn drain(&self, py: Python<'_>) -> PyResult<()> {
        let db = self.shared.db()?;
        py.allow_threads(|| db.drain()).map_err(to_py)
    }

    /// Writes every changed page and a new superblock; empties the log.
    fn checkpoint(&self, py: Python<'_>) -> PyResult<()> {
        let db = self.shared.db()?;
        py.allow_threads(|| db.checkpoint()).map_err(to_py)
    }

    /// Counters, cache and I/O figures and per-tree statistics, as a dict.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let db = self.shared.db()?;
        let s = py.allow_threads(|| db.stats());
        to_python(py, &s)
    }

    /// Checkpoints, then verifies every live page and tree invariant; a dict
    /// whose "problems" list is empty when the database is sound.
    fn check<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let db = self.shared.db()?;
        let r = py.allow_threads(|| db.check()).map_err(to_py)?;
        to_python(py, &r)
    }

    /// Checkpoints and closes the Db, its trees, batches and iterators, and
    /// releases the file lock. Closing a closed Db does nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let Some(db) = self.shared.db.write().take() else {
            return Ok(());
        };
        py.allow_threads(|| db.close()).map_err(to_py)
    }

    /// True once the Db is closed.
    #[getter]
    fn closed(&self) -> bool {
        self.shared.is_closed()
    }

    /// The database file's path.
    #[getter]
    fn path(&self) -> &Path {
        &self.shared.path
    }

    /// Page size in bytes (fixed at creation).
    #[getter]
    fn page_size(&self) -> PyResult<usize> {
        Ok(self.shared.db()?.page_size())
    }

    /// Longest key a B+tree of this Db accepts.
    #[getter]
    fn max_key_len(&self) -> PyResult<usize> {
        Ok(self.shared.db()?.max_key_len())
    }

    /// True when opened with read_only=True.
    #[getter]
    fn read_only(&self) -> PyResult<bool> {
        Ok(self.shared.db()?.is_read_only())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        let state = if self.shared.is_closed() {
            " closed"
        } else {
            ""
        };
        format!("<pagewise.Db {:?}{state}>", self.shared.path)
    }
}
