//! `pagewise.Snapshot`: every tree as of one commit, read-only; a context
//! manager whose exit (or `close()`) lets go of the engine snapshot, so the
//! pages it kept from reuse can be reused. Its trees (`SnapshotTree`) and
//! iterators raise ClosedError from then on.

use crate::db::Shared;
use crate::errors::{self, to_py};
use crate::iter::{Alive, Handle};
use crate::read::{Origin, ReadableTree};
use parking_lot::{Mutex, RwLock};
use pyo3::prelude::*;
use pyo3::pyclass_init::PyClassInitializer;
use pyo3::types::PyTuple;
use std::sync::Arc;

const RELEASED: &str = "the snapshot is closed (its `with` block ended or close() was called); take a new one with db.snapshot()";

/// An engine snapshot shared by a `Snapshot` object and the trees and
/// iterators made from it; `None` once closed.
pub struct SnapState {
    snap: RwLock<Option<pagewise::Snapshot>>,
    /// The iterators made from its trees, released with it.
    iters: Mutex<Vec<Handle>>,
    shared: Arc<Shared>,
}

impl SnapState {
    /// A handle on the engine snapshot, or ClosedError.
    pub fn get(&self) -> PyResult<pagewise::Snapshot> {
        self.shared.check_open()?;
        self.snap
            .read()
            .clone()
            .ok_or_else(|| errors::ended(RELEASED))
    }
}

impl Alive for SnapState {
    fn check(&self) -> PyResult<()> {
        self.get().map(drop)
    }

    fn track(&self, it: Handle) {
        let mut iters = self.iters.lock();
        if iters.len() >= 16 && iters.len().is_power_of_two() {
            iters.retain(Handle::is_live);
        }
        iters.push(it);
    }
}

impl SnapState {
    /// Drops the engine snapshot and every engine iterator reading it, so
    /// the pages it kept can be reused (GIL released by the caller).
    fn close(&self) {
        drop(self.snap.write().take());
        let iters = std::mem::take(&mut *self.iters.lock());
        iters.iter().for_each(Handle::release);
    }
}

/// Every tree as of one commit (see the stub).
#[pyclass(module = "pagewise", frozen)]
pub struct Snapshot {
    state: Arc<SnapState>,
}

impl Snapshot {
    pub fn new(snap: pagewise::Snapshot, shared: Arc<Shared>) -> Self {
        let state = SnapState {
            snap: RwLock::new(Some(snap)),
            iters: Mutex::new(Vec::new()),
            shared,
        };
        Snapshot {
            state: Arc::new(state),
        }
    }
}

/// A tree as of a snapshot: the reads of `Tree` (see `ReadableTree`).
#[pyclass(module = "pagewise", extends = ReadableTree, frozen)]
pub struct SnapshotTree {}

#[pymethods]
impl Snapshot {
    /// Tree `name` as of the snapshot (empty if it did not exist then).
    fn tree(&self, py: Python<'_>, name: &str) -> PyResult<Py<SnapshotTree>> {
        self.state.get()?.tree(name).map_err(to_py)?; // checks the name
        let base = ReadableTree::new(Origin::Snapshot {
            snap: self.state.clone(),
            name: name.to_string(),
        });
        Py::new(
            py,
            PyClassInitializer::from(base).add_subclass(SnapshotTree {}),
        )
    }

    /// Names of the trees that existed, in name order.
    fn tree_names(&self) -> PyResult<Vec<String>> {
        Ok(self.state.get()?.tree_names())
    }

    /// "btree" or "bepsilon" for a tree that existed, else None.
    fn tree_kind(&self, name: &str) -> PyResult<Option<&'static str>> {
        Ok(self.state.get()?.tree_kind(name).map(|k| k.name()))
    }

    /// Lets go of the snapshot and of its iterators' reads; its trees and
    /// iterators raise ClosedError from then on. Closing a closed snapshot
    /// does nothing.
    fn close(&self, py: Python<'_>) {
        py.allow_threads(|| self.state.close());
    }

    /// True once closed (or once its Db is closed).
    #[getter]
    fn closed(&self) -> bool {
        self.state.snap.read().is_none() || self.state.shared.is_closed()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Closes the snapshot.
    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> bool {
        self.close(py);
        false
    }

    fn __repr__(&self) -> String {
        let state = if self.closed() { " closed" } else { "" };
        format!("<pagewise.Snapshot of {:?}{state}>", self.state.shared.path)
    }
}
