//! The threads that load the database: writers (random batches, journaled
//! before and after commit, some as transactions), readers (checking every
//! value they see is genuine, and that a snapshot shows each recent batch
//! whole or not at all) and, in kill runs, a checkpointer that announces
//! each checkpoint.

use super::expected::{ExpectedLog, Model, Record};
use super::value::{
    decode, engine_batch, key, key_index, operand, random_batch, value, Layout, Op, Write,
};
use anyhow::Result;
use pagewise::{Db, Tree};
use parking_lot::Mutex;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Where writers record their promises. `intent` numbers the batch under
/// the journal's lock, so batch numbers appear in increasing order.
pub trait Journal: Send + Sync {
    fn intent(&self, ops: &[Op]) -> Result<u64>;
    fn ack(&self, batch: u64) -> Result<()>;
}

/// The expected-state file of a kill run.
pub struct FileJournal {
    pub log: Mutex<ExpectedLog>,
    pub next_batch: AtomicU64,
}

impl Journal for FileJournal {
    fn intent(&self, ops: &[Op]) -> Result<u64> {
        let mut log = self.log.lock();
        let batch = self.next_batch.fetch_add(1, Ordering::Relaxed);
        log.append(&Record::Intent {
            batch,
            ops: ops.to_vec(),
        })?;
        Ok(batch)
    }
    fn ack(&self, batch: u64) -> Result<()> {
        self.log.lock().append(&Record::Ack { batch })
    }
}

/// The in-memory model of a soak (no crash, so nothing needs to be durable).
pub struct MemJournal(pub Mutex<Model>);

impl Journal for MemJournal {
    fn intent(&self, ops: &[Op]) -> Result<u64> {
        let mut m = self.0.lock();
        let batch = m.next_batch;
        m.feed(Record::Intent {
            batch,
            ops: ops.to_vec(),
        })?;
        Ok(batch)
    }
    fn ack(&self, batch: u64) -> Result<()> {
        self.0.lock().feed(Record::Ack { batch })
    }
}

/// Deliberate lies, so tests can show the verifier catches them: after 20
/// batches one writer breaks the contract once, then stops writing (so no
/// later batch hides the damage) until the kill.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Sabotage {
    #[default]
    None,
    /// Journal a batch as acknowledged without applying it (a lost write).
    LoseAck,
    /// Apply only the first write of a batch, leaving it in doubt (a torn batch).
    HalfBatch,
}

#[derive(Default)]
pub struct Counters {
    pub batches: AtomicU64,
    pub transactions: AtomicU64,
    pub reads: AtomicU64,
    pub snapshot_checks: AtomicU64,
    pub checkpoints: AtomicU64,
}

/// Batches kept for the snapshot check.
pub const RECENT_BATCHES: usize = 64;

/// Shared by all worker threads of one process.
pub struct Load {
    pub db: Db,
    pub trees: Vec<Tree>,
    pub lay: Layout,
    pub journal: Arc<dyn Journal>,
    pub remove_pct: u32,
    /// Percent of batches committed as transactions.
    pub txn_pct: u32,
    /// The latest batches journaled (number, writes), newest last, for the
    /// snapshot check; at most [`RECENT_BATCHES`].
    pub recent: Mutex<std::collections::VecDeque<(u64, Vec<Op>)>>,
    pub sabotage: Sabotage,
    pub stop: AtomicBool,
    pub counters: Counters,
    /// The first failure a worker saw (violation or engine error).
    pub failure: Mutex<Option<String>>,
}

impl Load {
    fn fail(&self, what: String) {
        self.failure.lock().get_or_insert(what);
        self.stop.store(true, Ordering::Release);
    }

    fn running(&self) -> bool {
        !self.stop.load(Ordering::Acquire)
    }

    /// Writer `w`: batches on its own key partition until stopped.
    pub fn writer(&self, w: u32, seed: u64) {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut written = 0u64;
        while self.running() {
            let ops = random_batch(&mut rng, &self.lay, w, self.remove_pct);
            if w == 0 && written == 20 && self.sabotage != Sabotage::None {
                let puts = ops
                    .iter()
                    .filter(|o| matches!(o.write, Write::Put(_)))
                    .count();
                if self.sabotage == Sabotage::HalfBatch && puts < 2 {
                    continue;
                }
                return self.sabotage(ops);
            }
            let txn = rng.gen_range(0..100) < self.txn_pct;
            let r = self.journal.intent(&ops).and_then(|batch| {
                self.remember(batch, &ops);
                match txn {
                    true => self.commit_txn(batch, &ops)?,
                    false => self.db.apply(engine_batch(&self.lay, batch, &ops))?,
                }
                self.journal.ack(batch)
            });
            if let Err(e) = r {
                return self.fail(format!("writer {w}: {e:#}"));
            }
            if txn {
                self.counters.transactions.fetch_add(1, Ordering::Relaxed);
            }
            written += 1;
            self.counters.batches.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn remember(&self, batch: u64, ops: &[Op]) {
        let mut r = self.recent.lock();
        if r.len() == RECENT_BATCHES {
            r.pop_front();
        }
        r.push_back((batch, ops.to_vec()));
    }

    /// Commits `ops` as batch `batch` through a transaction that reads
    /// every key first (and checks what it reads is genuine). Writers own
    /// disjoint keys, so a conflict is a violation.
    fn commit_txn(&self, batch: u64, ops: &[Op]) -> Result<()> {
        let mut tx = self.db.transaction()?;
        for o in ops {
            let name = &self.lay.trees[o.tree as usize].0;
            if let Some(v) = tx.get(name, key(o.idx))? {
                decode(&v, o.tree, o.idx).map_err(anyhow::Error::msg)?;
            }
            match o.write {
                Write::Put(len) => tx.insert(name, key(o.idx), value(batch, o.tree, o.idx, len)),
                Write::Remove => tx.remove(name, key(o.idx)),
                Write::Upsert(add) => tx.upsert(name, key(o.idx), operand(o.tree, batch, add)),
            }
        }
        Ok(tx.commit()?)
    }

    fn sabotage(&self, mut ops: Vec<Op>) {
        let r = self.journal.intent(&ops).and_then(|batch| {
            if self.sabotage == Sabotage::LoseAck {
                return self.journal.ack(batch);
            }
            // Two puts, so resolving sees one present and one missing.
            ops.retain(|o| matches!(o.write, Write::Put(_)));
            ops.truncate(1);
            self.db.apply(engine_batch(&self.lay, batch, &ops))?;
            Ok(())
        });
        if let Err(e) = r {
            return self.fail(format!("sabotage: {e:#}"));
        }
        while self.running() {
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// A reader: random gets and short scans; every value must be genuine.
    pub fn reader(&self, seed: u64) {
        let mut rng = SmallRng::seed_from_u64(seed);
        while self.running() {
            let t = rng.gen_range(0..self.trees.len()) as u8;
            let idx = rng.gen_range(0..self.lay.keys);
            let r = match rng.gen_range(0..10) {
                0..=6 => self.check_get(t, idx),
                7 | 8 => self.check_scan(t, idx, rng.gen_range(1..64)),
                _ => self.check_snapshot(&mut rng),
            };
            if let Err(e) = r {
                return self.fail(format!("reader: {e}"));
            }
            self.counters.reads.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn check_get(&self, t: u8, idx: u32) -> Result<(), String> {
        let name = &self.lay.trees[t as usize].0;
        match self.trees[t as usize].get(key(idx)) {
            Err(e) => Err(format!("get {name}/k{idx}: {e}")),
            Ok(None) => Ok(()),
            Ok(Some(v)) => decode(&v, t, idx)
                .map(|_| ())
                .map_err(|e| format!("{name}/k{idx}: {e}")),
        }
    }

    fn check_scan(&self, t: u8, from: u32, limit: usize) -> Result<(), String> {
        let name = &self.lay.trees[t as usize].0;
        let mut last: Option<Vec<u8>> = None;
        for kv in self.trees[t as usize].range(key(from)..).take(limit) {
            let (k, v) = kv.map_err(|e| format!("scan {name}: {e}"))?;
            let idx = key_index(&k).ok_or_else(|| {
                format!(
                    "{name} holds key {:?} never written",
                    String::from_utf8_lossy(&k)
                )
            })?;
            if last.as_ref().is_some_and(|l| *l >= k) {
                return Err(format!("scan of {name} out of order at k{idx}"));
            }
            decode(&v, t, idx).map_err(|e| format!("{name}/k{idx}: {e}"))?;
            last = Some(k);
        }
        Ok(())
    }

    /// Takes a snapshot while writers go on and checks that it shows the
    /// latest batch a writer journaled (committed or not) whole or not at
    /// all: if any key of it shows that batch, every put and upsert of it
    /// does and every remove is absent. The batch is picked after the
    /// snapshot is taken, so no later batch of that writer (which could
    /// overwrite or remove its keys) can be in the snapshot. Then reads the
    /// same keys again through the snapshot: unchanged.
    fn check_snapshot(&self, rng: &mut SmallRng) -> Result<(), String> {
        let snap = self.db.snapshot().map_err(|e| format!("snapshot: {e}"))?;
        let w = rng.gen_range(0..self.lay.writers);
        let picked = {
            let r = self.recent.lock();
            let of_w = r.iter().filter(|b| b.1[0].idx % self.lay.writers == w);
            of_w.max_by_key(|b| b.0).cloned()
        };
        let Some((batch, ops)) = picked else {
            return Ok(());
        };
        let seen = self.batches_in(&snap, &ops)?;
        let visible = seen.contains(&Some(batch));
        for (o, b) in ops.iter().zip(&seen) {
            let whole = match o.write {
                Write::Remove => b.is_none(),
                _ => *b == Some(batch),
            };
            if visible && !whole {
                let name = &self.lay.trees[o.tree as usize].0;
                return Err(format!(
                    "a snapshot shows batch {batch} in part: {name}/k{} shows {b:?}",
                    o.idx
                ));
            }
        }
        std::thread::sleep(Duration::from_millis(rng.gen_range(0..5)));
        if self.batches_in(&snap, &ops)? != seen {
            return Err(format!("a snapshot changed under batch {batch}'s keys"));
        }
        self.counters
            .snapshot_checks
            .fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// The batch each key of `ops` shows in `snap` (None: absent).
    fn batches_in(
        &self,
        snap: &pagewise::Snapshot,
        ops: &[Op],
    ) -> Result<Vec<Option<u64>>, String> {
        ops.iter()
            .map(|o| {
                let name = &self.lay.trees[o.tree as usize].0;
                let got = snap.tree(name).and_then(|t| t.get(key(o.idx)));
                match got.map_err(|e| format!("snapshot get {name}/k{}: {e}", o.idx))? {
                    None => Ok(None),
                    Some(v) => decode(&v, o.tree, o.idx)
                        .map(|d| Some(d.0))
                        .map_err(|e| format!("{name}/k{}: {e}", o.idx)),
                }
            })
            .collect()
    }

    /// Checkpoints at random moments (besides the engine's own, at the log
    /// and dirty limits); a child's event listener announces each.
    pub fn checkpointer(&self, seed: u64) {
        let mut rng = SmallRng::seed_from_u64(seed);
        while self.running() {
            std::thread::sleep(Duration::from_millis(rng.gen_range(10..200)));
            if let Err(e) = self.db.checkpoint() {
                return self.fail(format!("checkpoint: {e}"));
            }
            self.counters.checkpoints.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Runs `writers` writers, `readers` readers and (if `checkpointer`) a
/// checkpointer until `until` returns true or a worker fails; returns the
/// failure. `until` is polled every 50 ms.
pub fn run(
    load: &Arc<Load>,
    readers: u32,
    checkpointer: bool,
    seed: u64,
    mut until: impl FnMut() -> bool,
) -> Option<String> {
    let mut hs = Vec::new();
    for w in 0..load.lay.writers {
        let l = load.clone();
        hs.push(std::thread::spawn(move || {
            l.writer(w, seed ^ ((w as u64 + 1) * 0x1000_0001))
        }));
    }
    for r in 0..readers {
        let l = load.clone();
        hs.push(std::thread::spawn(move || {
            l.reader(seed ^ ((r as u64 + 1) * 0x2000_0003))
        }));
    }
    if checkpointer {
        let l = load.clone();
        hs.push(std::thread::spawn(move || {
            l.checkpointer(seed ^ 0x3000_0005)
        }));
    }
    while load.running() && !until() {
        std::thread::sleep(Duration::from_millis(50));
    }
    load.stop.store(true, Ordering::Release);
    for h in hs {
        if h.join().is_err() {
            load.fail("a worker thread panicked".into());
        }
    }
    load.failure.lock().clone()
}
