//! Lazy iterators over a key range. Entries are read in chunks with the GIL
//! released (a chunk grows from 16 to 512 entries); each `next` first checks
//! that the Db is open, so an iterator raises ClosedError once the Db is
//! closed, also for entries it had read ahead.

use crate::bytes;
use crate::db::Shared;
use crate::errors::to_py;
use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::collections::VecDeque;
use std::sync::Arc;

const FIRST_CHUNK: usize = 16;
const MAX_CHUNK: usize = 512;

#[derive(Clone, Copy)]
pub enum Yield {
    Keys,
    Values,
    Items,
}

struct State {
    it: pagewise::Iter,
    buf: VecDeque<(Vec<u8>, Vec<u8>)>,
    /// An error met while reading ahead, raised after the buffered entries.
    error: Option<pagewise::Error>,
    done: bool,
    chunk: usize,
}

impl State {
    /// Reads up to one chunk (GIL released by the caller).
    fn refill(&mut self, reverse: bool) {
        let n = self.chunk;
        self.chunk = (self.chunk * 2).min(MAX_CHUNK);
        for _ in 0..n {
            let next = if reverse {
                self.it.next_back()
            } else {
                self.it.next()
            };
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
}

/// A lazy iterator over a range of a tree (keys, values or (key, value)).
#[pyclass(module = "pagewise", name = "Iterator", frozen)]
pub struct RangeIter {
    state: Mutex<State>,
    shared: Arc<Shared>,
    reverse: bool,
    what: Yield,
}

impl RangeIter {
    pub fn new(it: pagewise::Iter, shared: Arc<Shared>, reverse: bool, what: Yield) -> Self {
        RangeIter {
            state: Mutex::new(State {
                it,
                buf: VecDeque::new(),
                error: None,
                done: false,
                chunk: FIRST_CHUNK,
            }),
            shared,
            reverse,
            what,
        }
    }

    fn next_entry(&self, py: Python<'_>) -> PyResult<Option<(Vec<u8>, Vec<u8>)>> {
        self.shared.check_open()?;
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
