//! Lazy iterators over a key range, of a tree, a snapshot's tree or a
//! transaction. Entries are read in chunks with the GIL released (a chunk
//! grows from 16 to 512 entries; a transaction's iterator reads exactly one
//! entry a step, since what it reads is what its commit validates); an
//! entry already read is handed out with the GIL held, so the GIL is
//! released once per chunk, not once per entry. Each
//! `next` first checks that what the iterator reads from is still usable
//! (the Db open, the snapshot not closed, the transaction not ended), so an
//! iterator raises ClosedError from then on, also for entries it had read
//! ahead, and lets go of the engine iterator (and the snapshot it holds).

use crate::bytes;
use crate::db::Shared;
use crate::errors::to_py;
use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::collections::VecDeque;
use std::sync::{Arc, Weak};

const FIRST_CHUNK: usize = 16;
const MAX_CHUNK: usize = 512;

/// A key and its value.
pub type Kv = (Vec<u8>, Vec<u8>);

/// An engine iterator of either direction: a tree's or a snapshot's tree's,
/// whose entries are lent (`Iter::next_ref`), or a transaction's.
pub enum Source {
    Tree(pagewise::Iter),
    Tx(pagewise::TxIter),
}

impl Source {
    /// Appends the next entry to `ahead`; false at the end.
    fn step(&mut self, reverse: bool, ahead: &mut Ahead) -> pagewise::Result<bool> {
        match self {
            Source::Tree(it) => {
                let next = if reverse {
                    it.next_back_ref()
                } else {
                    it.next_ref()
                };
                next.map(|e| e.map(|(k, v)| ahead.push(k, v)))
            }
            Source::Tx(it) => {
                let next = if reverse { it.next_back() } else { it.next() };
                next.map(|e| e.map(|(k, v)| ahead.push(&k, &v)))
            }
        }
        .transpose()
        .map(|pushed| pushed.is_some())
    }
}

/// Entries read ahead and not handed out: keys and values back to back in
/// one buffer, so an entry costs a copy, not two allocations.
#[derive(Default)]
struct Ahead {
    bytes: Vec<u8>,
    /// Per entry: where its key starts, the key's and the value's lengths.
    entries: VecDeque<(usize, usize, usize)>,
}

impl Ahead {
    fn push(&mut self, key: &[u8], value: &[u8]) {
        self.entries
            .push_back((self.bytes.len(), key.len(), value.len()));
        self.bytes.extend_from_slice(key);
        self.bytes.extend_from_slice(value);
    }

    fn pop(&mut self) -> Option<(&[u8], &[u8])> {
        let (at, k, v) = self.entries.pop_front()?;
        Some((&self.bytes[at..at + k], &self.bytes[at + k..at + k + v]))
    }

    fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.entries.clear();
    }
}

/// What an iterator reads from: `check` fails (ClosedError) once it is
/// closed, released or ended.
pub trait Alive: Send + Sync {
    fn check(&self) -> PyResult<()>;

    /// Told of each iterator made, for a source that releases its
    /// iterators when it ends (a snapshot).
    fn track(&self, _it: Handle) {}
}

/// A weak handle on an iterator's state: `release` drops its engine
/// iterator (and the snapshot that holds), if the iterator still lives.
pub struct Handle(Weak<Mutex<State>>);

impl Handle {
    pub fn is_live(&self) -> bool {
        self.0.strong_count() > 0
    }

    /// Call with the GIL released (it may wait for a read in progress).
    pub fn release(&self) {
        if let Some(st) = self.0.upgrade() {
            st.lock().release();
        }
    }
}

impl Alive for Shared {
    fn check(&self) -> PyResult<()> {
        self.check_open()
    }
}

#[derive(Clone, Copy)]
pub enum Yield {
    Keys,
    Values,
    Items,
}

impl Yield {
    fn object(self, py: Python<'_>, k: &[u8], v: &[u8]) -> PyResult<PyObject> {
        Ok(match self {
            Yield::Keys => bytes::to_py(py, k).into_any().unbind(),
            Yield::Values => bytes::to_py(py, v).into_any().unbind(),
            Yield::Items => PyTuple::new(py, [bytes::to_py(py, k), bytes::to_py(py, v)])?
                .into_any()
                .unbind(),
        })
    }
}

pub struct State {
    /// None once the iterator let go of it (its source was closed).
    it: Option<Source>,
    ahead: Ahead,
    /// An error met while reading ahead, raised after the buffered entries.
    error: Option<pagewise::Error>,
    done: bool,
    chunk: usize,
    max_chunk: usize,
}

impl State {
    /// Reads up to one chunk (GIL released by the caller) into `ahead`,
    /// which every entry read before has left.
    fn refill(&mut self, reverse: bool) {
        debug_assert!(self.ahead.is_empty());
        let n = self.chunk;
        self.chunk = (self.chunk * 2).min(self.max_chunk);
        self.ahead.clear();
        let Some(it) = self.it.as_mut() else {
            self.done = true;
            return;
        };
        for _ in 0..n {
            match it.step(reverse, &mut self.ahead) {
                Ok(true) => {}
                Ok(false) => {
                    self.done = true;
                    return;
                }
                Err(e) => {
                    self.error = Some(e);
                    self.done = true;
                    return;
                }
            }
        }
    }

    /// Drops the engine iterator and what was read ahead.
    fn release(&mut self) {
        self.it = None;
        self.ahead.clear();
        self.done = true;
    }
}

/// A lazy iterator over a range of a tree (keys, values or (key, value)).
#[pyclass(module = "pagewise", name = "Iterator", frozen)]
pub struct RangeIter {
    state: Arc<Mutex<State>>,
    alive: Arc<dyn Alive>,
    reverse: bool,
    what: Yield,
}

impl RangeIter {
    /// An iterator reading ahead in growing chunks.
    pub fn new(it: Source, alive: Arc<dyn Alive>, reverse: bool, what: Yield) -> Self {
        let state = Arc::new(Mutex::new(State {
            it: Some(it),
            ahead: Ahead::default(),
            error: None,
            done: false,
            chunk: FIRST_CHUNK,
            max_chunk: MAX_CHUNK,
        }));
        alive.track(Handle(Arc::downgrade(&state)));
        RangeIter {
            state,
            alive,
            reverse,
            what,
        }
    }

    /// The same, reading one entry a step (no read-ahead).
    pub fn exact(it: Source, alive: Arc<dyn Alive>, reverse: bool, what: Yield) -> Self {
        let r = Self::new(it, alive, reverse, what);
        {
            let mut st = r.state.lock();
            st.chunk = 1;
            st.max_chunk = 1;
        }
        r
    }

    /// The next entry as the Python object this iterator yields.
    fn next_object(&self, py: Python<'_>) -> PyResult<Option<PyObject>> {
        if let Err(e) = self.alive.check() {
            py.allow_threads(|| self.state.lock().release());
            return Err(e);
        }
        // An entry already read ahead is handed out with the GIL held (no
        // release and reacquire per entry); if a refill or a release holds
        // the state on another thread, or nothing is read ahead, the state
        // is waited for and refilled with the GIL released, and looked at
        // again (more than once only if another thread took the entries).
        for _ in 0..u32::MAX {
            if let Some(mut st) = self.state.try_lock() {
                if let Some((k, v)) = st.ahead.pop() {
                    return self.what.object(py, k, v).map(Some);
                }
                if st.done {
                    return st.error.take().map_or(Ok(None), |e| Err(to_py(e)));
                }
            }
            let reverse = self.reverse;
            py.allow_threads(|| {
                let mut st = self.state.lock();
                if st.ahead.is_empty() && !st.done {
                    st.refill(reverse);
                }
            });
        }
        Err(pyo3::exceptions::PyRuntimeError::new_err(
            "an iterator's entries were taken by other threads 2^32 times in a row",
        ))
    }
}

#[pymethods]
impl RangeIter {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<PyObject>> {
        self.next_object(py)
    }
}
