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

/// An engine iterator of either direction (`pagewise::Iter`, `TxIter`).
pub type Source = Box<dyn DoubleEndedIterator<Item = pagewise::Result<Kv>> + Send>;

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

pub struct State {
    /// None once the iterator let go of it (its source was closed).
    it: Option<Source>,
    buf: VecDeque<Kv>,
    /// An error met while reading ahead, raised after the buffered entries.
    error: Option<pagewise::Error>,
    done: bool,
    chunk: usize,
    max_chunk: usize,
}

impl State {
    /// Reads up to one chunk (GIL released by the caller).
    fn refill(&mut self, reverse: bool) {
        let n = self.chunk;
        self.chunk = (self.chunk * 2).min(self.max_chunk);
        let Some(it) = self.it.as_mut() else {
            self.done = true;
            return;
        };
        for _ in 0..n {
            let next = if reverse { it.next_back() } else { it.next() };
            match next {
                Some(Ok(kv)) => self.buf.push_back(kv),
                Some(Err(e)) => {
                    self.error = Some(e);
                    self.done = true;
                    return;
                }
                None => {
                    self.done = true;
                    return;
                }
            }
        }
    }

    /// Drops the engine iterator and what was read ahead.
    fn release(&mut self) {
        self.it = None;
        self.buf.clear();
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
            buf: VecDeque::new(),
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

    fn next_entry(&self, py: Python<'_>) -> PyResult<Option<Kv>> {
        if let Err(e) = self.alive.check() {
            py.allow_threads(|| self.state.lock().release());
            return Err(e);
        }
        // Fast path: an entry already read ahead is taken with the GIL held
        // (no release and reacquire per entry); if a refill or a release
        // holds the state on another thread, the slow path below waits for
        // it with the GIL released.
        if let Some(mut st) = self.state.try_lock() {
            if let Some(kv) = st.buf.pop_front() {
                return Ok(Some(kv));
            }
        }
        let reverse = self.reverse;
        let r = py.allow_threads(|| {
            let mut st = self.state.lock();
            if st.buf.is_empty() && !st.done {
                st.refill(reverse);
            }
            match st.buf.pop_front() {
                Some(kv) => Ok(Some(kv)),
                None => st.error.take().map_or(Ok(None), Err),
            }
        });
        r.map_err(to_py)
    }
}

#[pymethods]
impl RangeIter {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<PyObject>> {
        let Some((k, v)) = self.next_entry(py)? else {
            return Ok(None);
        };
        Ok(Some(match self.what {
            Yield::Keys => bytes::to_py(py, &k).into_any().unbind(),
            Yield::Values => bytes::to_py(py, &v).into_any().unbind(),
            Yield::Items => {
                let t = PyTuple::new(py, [bytes::to_py(py, &k), bytes::to_py(py, &v)])?;
                t.into_any().unbind()
            }
        }))
    }
}
