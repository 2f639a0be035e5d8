//! The expected-state file: what the child promised, written so that its own
//! crash cannot make it lie.
//!
//! Records are framed `len u32 | crc32c u32 | payload`, appended with one
//! `write` and (in kill runs) fdatasync'd before the writer goes on:
//!
//! * `Intent(batch, ops)` before `Db::apply` is called,
//! * `Ack(batch)` after `Db::apply` returned Ok,
//! * `Resolve(batch, applied)` when a later process has looked at the
//!   database and decided an in-doubt batch's fate.
//!
//! The rule checked after every kill: a batch with an Ack must be present
//! (its puts hold its values unless a later acknowledged batch overwrote
//! them, its removed keys are absent); a batch with only an Intent is in
//! doubt: present whole or absent whole, never half; a batch with no Intent
//! was never applied, so no value of it may appear. Each writer has at most
//! one batch in doubt, and writers own disjoint keys, so in-doubt batches are
//! decided independently. A record torn by the kill fails its crc: the scan
//! stops there and the next writer truncates the tail before appending (a
//! torn Intent means `apply` was never called; a torn Ack leaves the batch in
//! doubt, which is weaker but true).

use super::value::{upsert_len, Op, Write};
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write as _};
use std::path::Path;

const INTENT: u8 = 1;
const ACK: u8 = 2;
const RESOLVE: u8 = 3;
/// Largest payload a valid record can have (an intent of MAX_OPS ops).
const MAX_PAYLOAD: usize = 16 + super::value::MAX_OPS * 10;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    Intent { batch: u64, ops: Vec<Op> },
    Ack { batch: u64 },
    Resolve { batch: u64, applied: bool },
}

fn encode(r: &Record) -> Vec<u8> {
    let mut p = Vec::with_capacity(MAX_PAYLOAD);
    match r {
        Record::Intent { batch, ops } => {
            p.push(INTENT);
            p.extend_from_slice(&batch.to_le_bytes());
            p.push(ops.len() as u8);
            for o in ops {
                p.push(o.tree);
                p.extend_from_slice(&o.idx.to_le_bytes());
                let (code, n) = match o.write {
                    Write::Remove => (0u8, 0),
                    Write::Put(len) => (1, len),
                    Write::Upsert(add) => (2, add),
                };
                p.push(code);
                p.extend_from_slice(&n.to_le_bytes());
            }
        }
        Record::Ack { batch } => {
            p.push(ACK);
            p.extend_from_slice(&batch.to_le_bytes());
        }
        Record::Resolve { batch, applied } => {
            p.push(RESOLVE);
            p.extend_from_slice(&batch.to_le_bytes());
            p.push(*applied as u8);
        }
    }
    assert!(p.len() <= MAX_PAYLOAD);
    let mut out = Vec::with_capacity(8 + p.len());
    out.extend_from_slice(&(p.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(&p).to_le_bytes());
    out.extend_from_slice(&p);
    out
}

fn decode(p: &[u8]) -> Option<Record> {
    let batch = u64::from_le_bytes(p.get(1..9)?.try_into().ok()?);
    match *p.first()? {
        INTENT => {
            let n = *p.get(9)? as usize;
            if p.len() != 10 + n * 10 {
                return None;
            }
            let ops = p[10..]
                .chunks_exact(10)
                .map(|c| {
                    let n = u32::from_le_bytes(c[6..10].try_into().unwrap());
                    let write = match c[5] {
                        0 => Write::Remove,
                        1 => Write::Put(n),
                        2 => Write::Upsert(n),
                        _ => return None,
                    };
                    let idx = u32::from_le_bytes(c[1..5].try_into().unwrap());
                    Some(Op {
                        tree: c[0],
                        idx,
                        write,
                    })
                })
                .collect::<Option<Vec<Op>>>()?;
            Some(Record::Intent { batch, ops })
        }
        ACK if p.len() == 9 => Some(Record::Ack { batch }),
        RESOLVE if p.len() == 10 => Some(Record::Resolve {
            batch,
            applied: p[9] == 1,
        }),
        _ => None,
    }
}

/// Reads the valid records from byte `from` on; returns them and the offset
/// just past the last valid one (the torn tail, if any, starts there).
pub fn scan(path: &Path, from: u64) -> Result<(Vec<Record>, u64)> {
    let mut f = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    f.seek(SeekFrom::Start(from))?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf)
        .with_context(|| format!("reading {}", path.display()))?;
    let (mut at, mut out) = (0usize, Vec::new());
    while at + 8 <= buf.len() {
        let len = u32::from_le_bytes(buf[at..at + 4].try_into().unwrap()) as usize;
        let crc = u32::from_le_bytes(buf[at + 4..at + 8].try_into().unwrap());
        if len > MAX_PAYLOAD || at + 8 + len > buf.len() {
            break;
        }
        let p = &buf[at + 8..at + 8 + len];
        match decode(p) {
            Some(r) if crc32c::crc32c(p) == crc => out.push(r),
            _ => break,
        }
        at += 8 + len;
    }
    Ok((out, from + at as u64))
}

/// The expected-state file open for appending.
pub struct ExpectedLog {
    file: File,
    sync: bool,
}

impl ExpectedLog {
    /// Opens `path` (created if missing), cutting off anything past
    /// `valid_end` (a record torn by a kill).
    pub fn open(path: &Path, valid_end: u64, sync: bool) -> Result<Self> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        if file.metadata()?.len() > valid_end {
            file.set_len(valid_end)?;
            file.sync_data()?;
        }
        Ok(Self { file, sync })
    }

    /// Appends `r`; durable on return when opened with `sync`.
    pub fn append(&mut self, r: &Record) -> Result<()> {
        self.file
            .write_all(&encode(r))
            .context("appending to the expected-state file")?;
        if self.sync {
            self.file
                .sync_data()
                .context("syncing the expected-state file")?;
        }
        Ok(())
    }
}

/// What the acknowledged history says each key holds: `(batch, len)`.
#[derive(Debug, Default)]
pub struct Model {
    pub trees: Vec<BTreeMap<u32, (u64, u32)>>,
    /// Intents with neither Ack nor Resolve yet: in doubt.
    pub pending: BTreeMap<u64, Vec<Op>>,
    /// Batch numbers below this were used (intents seen).
    pub next_batch: u64,
    pub acked: u64,
    pub resolved_applied: u64,
    pub resolved_absent: u64,
}

impl Model {
    pub fn new(trees: usize) -> Self {
        Self {
            trees: vec![BTreeMap::new(); trees],
            next_batch: 1,
            ..Default::default()
        }
    }

    pub fn apply(&mut self, batch: u64, ops: &[Op]) {
        for o in ops {
            let t = &mut self.trees[o.tree as usize];
            match o.write {
                Write::Put(len) => t.insert(o.idx, (batch, len)),
                Write::Remove => t.remove(&o.idx),
                Write::Upsert(add) => {
                    let prev = t.get(&o.idx).map_or(0, |&(_, len)| len);
                    t.insert(o.idx, (batch, upsert_len(prev, add)))
                }
            };
        }
    }

    /// Folds one record in; a record that contradicts the history is an error.
    pub fn feed(&mut self, r: Record) -> Result<()> {
        match r {
            Record::Intent { batch, ops } => {
                if batch < self.next_batch
                    || ops.iter().any(|o| o.tree as usize >= self.trees.len())
                {
                    bail!("expected-state file: intent of batch {batch} reuses a number or names an unknown tree");
                }
                self.next_batch = batch + 1;
                self.pending.insert(batch, ops);
            }
            Record::Ack { batch } => {
                let Some(ops) = self.pending.remove(&batch) else {
                    bail!("expected-state file: ack of batch {batch} without an intent");
                };
                self.apply(batch, &ops);
                self.acked += 1;
            }
            Record::Resolve { batch, applied } => {
                let Some(ops) = self.pending.remove(&batch) else {
                    bail!("expected-state file: resolve of batch {batch} that is not in doubt");
                };
                if applied {
                    self.apply(batch, &ops);
                    self.resolved_applied += 1;
                } else {
                    self.resolved_absent += 1;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_a_torn_tail_is_cut() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("expected");
        let recs = vec![
            Record::Intent {
                batch: 1,
                ops: vec![
                    Op {
                        tree: 0,
                        idx: 5,
                        write: Write::Put(30),
                    },
                    Op {
                        tree: 2,
                        idx: 9,
                        write: Write::Remove,
                    },
                    Op {
                        tree: 1,
                        idx: 4,
                        write: Write::Upsert(77),
                    },
                ],
            },
            Record::Ack { batch: 1 },
            Record::Resolve {
                batch: 2,
                applied: false,
            },
        ];
        let mut log = ExpectedLog::open(&p, 0, false).unwrap();
        for r in &recs {
            log.append(r).unwrap();
        }
        drop(log);
        let full = std::fs::metadata(&p).unwrap().len();
        let (got, end) = scan(&p, 0).unwrap();
        assert_eq!((got, end), (recs.clone(), full));
        // Tear the last record: the scan stops before it, a reopen cuts it.
        let f = OpenOptions::new().write(true).open(&p).unwrap();
        f.set_len(full - 3).unwrap();
        let (got, end) = scan(&p, 0).unwrap();
        assert_eq!(got, recs[..2].to_vec());
        ExpectedLog::open(&p, end, false).unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().len(), end);
    }

    #[test]
    fn the_model_follows_acks_and_resolutions() {
        let mut m = Model::new(1);
        let put = |idx, len| Op {
            tree: 0,
            idx,
            write: Write::Put(len),
        };
        m.feed(Record::Intent {
            batch: 1,
            ops: vec![put(1, 30)],
        })
        .unwrap();
        m.feed(Record::Ack { batch: 1 }).unwrap();
        m.feed(Record::Intent {
            batch: 2,
            ops: vec![put(1, 40)],
        })
        .unwrap();
        assert_eq!(m.trees[0][&1], (1, 30), "an intent alone changes nothing");
        m.feed(Record::Resolve {
            batch: 2,
            applied: true,
        })
        .unwrap();
        assert_eq!(m.trees[0][&1], (2, 40));
        let up = |idx, add| Op {
            tree: 0,
            idx,
            write: Write::Upsert(add),
        };
        m.feed(Record::Intent {
            batch: 3,
            ops: vec![up(1, 10), up(2, 5)],
        })
        .unwrap();
        m.feed(Record::Ack { batch: 3 }).unwrap();
        // An upsert adds to the value it finds; on an absent key it starts
        // from the 24-byte header.
        assert_eq!(m.trees[0][&1], (3, 50));
        assert_eq!(m.trees[0][&2], (3, 29));
        assert!(
            m.feed(Record::Ack { batch: 2 }).is_err(),
            "double ack accepted"
        );
        assert!(m
            .feed(Record::Intent {
                batch: 2,
                ops: vec![]
            })
            .is_err());
    }
}
