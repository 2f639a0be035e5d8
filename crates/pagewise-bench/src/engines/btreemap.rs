//! In-memory reference engine (a `BTreeMap` per table behind a lock). Not a
//! peer: it is the model the other adapters are tested against and the fastest
//! possible "engine" for checking the harness itself. `close` writes a dump so
//! multi-phase runs can reopen it.
//!
//! The tables are copy-on-write: a read view shares them, and a write while
//! a view lives copies every table first (exact snapshots, slow: a model,
//! not a peer). A transaction holds the write lock, so it never conflicts.

use crate::engine::{Engine, ReadView, TxnDone, TxnWrites, Visit, WriteOp};
use crate::{BenchError, Result};
use parking_lot::RwLock;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

type Table = BTreeMap<Vec<u8>, Vec<u8>>;

pub struct BTreeEngine {
    tables: RwLock<Arc<Vec<Table>>>,
    dump: Option<PathBuf>,
}

/// Every table as it was when the view was taken.
struct BTreeView(Arc<Vec<Table>>);

impl ReadView for BTreeView {
    fn get(&self, table: usize, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.0[table].get(key).cloned())
    }
}

impl BTreeEngine {
    pub fn new(tables: usize) -> Self {
        Self {
            tables: RwLock::new(Arc::new(vec![Table::new(); tables])),
            dump: None,
        }
    }

    /// Opens the dump in `dir` if there is one; `close` writes it back.
    pub fn open(dir: &Path, tables: usize) -> Result<Self> {
        let path = dir.join("btreemap.dump");
        let mut eng = Self::new(tables);
        if path.exists() {
            let mut bytes = Vec::new();
            std::fs::File::open(&path)
                .and_then(|mut f| f.read_to_end(&mut bytes))
                .map_err(|e| BenchError::os("read btreemap dump", &path, e))?;
            eng.load(&bytes);
        }
        eng.dump = Some(path);
        Ok(eng)
    }

    fn load(&mut self, mut b: &[u8]) {
        let take = |n: usize, b: &mut &[u8]| {
            let (h, t) = b.split_at(n);
            *b = t;
            h.to_vec()
        };
        let tables = Arc::make_mut(self.tables.get_mut());
        while b.len() >= 12 {
            let t = u32::from_le_bytes(take(4, &mut b).try_into().unwrap()) as usize;
            let kl = u32::from_le_bytes(take(4, &mut b).try_into().unwrap()) as usize;
            let vl = u32::from_le_bytes(take(4, &mut b).try_into().unwrap()) as usize;
            let k = take(kl, &mut b);
            let v = take(vl, &mut b);
            if t < tables.len() {
                tables[t].insert(k, v);
            }
        }
    }
}

impl Engine for BTreeEngine {
    fn name(&self) -> &'static str {
        "btreemap"
    }

    fn version(&self) -> String {
        "std BTreeMap".into()
    }

    fn write_batch(&self, ops: Vec<WriteOp>) -> Result<()> {
        let mut guard = self.tables.write();
        let t = Arc::make_mut(&mut guard);
        for op in ops {
            match op {
                WriteOp::Put { table, key, value } => {
                    t[table].insert(key, value);
                }
                WriteOp::Delete { table, key } => {
                    t[table].remove(&key);
                }
            }
        }
        Ok(())
    }

    fn get(&self, table: usize, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.tables.read()[table].get(key).cloned())
    }

    fn read_view(&self) -> Result<Box<dyn ReadView + '_>> {
        Ok(Box::new(BTreeView(self.tables.read().clone())))
    }

    fn transact(&self, table: usize, reads: &[Vec<u8>], writes: &TxnWrites) -> Result<TxnDone> {
        let mut guard = self.tables.write();
        let t = &mut Arc::make_mut(&mut guard)[table];
        let found = reads.iter().filter(|k| t.contains_key(*k)).count() as u64;
        for (k, v) in writes {
            t.insert(k.clone(), v.clone());
        }
        Ok(TxnDone {
            found,
            conflicts: 0,
        })
    }

    fn scan(&self, table: usize, start: &[u8], limit: usize, visit: Visit) -> Result<usize> {
        let t = self.tables.read();
        let mut n = 0;
        for (k, v) in t[table].range(start.to_vec()..).take(limit) {
            n += 1;
            if !visit(k, v) {
                break;
            }
        }
        Ok(n)
    }

    fn sync(&self) -> Result<()> {
        Ok(())
    }

    fn close(self: Box<Self>) -> Result<Option<serde_json::Value>> {
        let Some(path) = &self.dump else {
            return Ok(None);
        };
        let mut out = Vec::new();
        for (i, t) in self.tables.read().iter().enumerate() {
            for (k, v) in t {
                out.extend_from_slice(&(i as u32).to_le_bytes());
                out.extend_from_slice(&(k.len() as u32).to_le_bytes());
                out.extend_from_slice(&(v.len() as u32).to_le_bytes());
                out.extend_from_slice(k);
                out.extend_from_slice(v);
            }
        }
        std::fs::File::create(path)
            .and_then(|mut f| f.write_all(&out).and_then(|_| f.sync_all()))
            .map_err(|e| BenchError::os("write btreemap dump", path, e))?;
        Ok(None)
    }
}
