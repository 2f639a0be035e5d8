//! The threads that load the database: writers (random batches, journaled
//! before and after commit), readers (checking every value they see is
//! genuine) and, in kill runs, a checkpointer that announces each checkpoint.

use super::expected::{ExpectedLog, Model, Record};
use super::value::{decode, engine_batch, key, key_index, random_batch, Layout, Op, Write};
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
    pub reads: AtomicU64,
    pub checkpoints: AtomicU64,
}

/// Shared by all worker threads of one process.
pub struct Load {
    pub db: Db,
    pub trees: Vec<Tree>,
    pub lay: Layout,
    pub journal: Arc<dyn Journal>,
    pub remove_pct: u32,
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
            let r = self.journal.intent(&ops).and_then(|batch| {
                self.db.apply(engine_batch(&self.lay, batch, &ops))?;
                self.journal.ack(batch)
            });
            if let Err(e) = r {
                return self.fail(format!("writer {w}: {e:#}"));
            }
            written += 1;
            self.counters.batches.fetch_add(1, Ordering::Relaxed);
        }
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
            let r = if rng.gen_bool(0.8) {
                self.check_get(t, idx)
            } else {
                self.check_scan(t, idx, rng.gen_range(1..64))
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
