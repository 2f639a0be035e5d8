//! Executes one phase's operations on an open engine with N threads, each
//! claiming work from a shared counter until the op count or the deadline is hit.

use crate::engine::{Engine, WriteOp, COUNTER_BYTES};
use crate::iibench::Row;
use crate::keys::{encode_key, encode_key_into, KeyPicker, Permutation};
use crate::metrics::Recorder;
use crate::values::ValueGen;
use crate::workload::{Kind, Params, Ycsb};
use crate::Result;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Table numbers as the harness opens them.
pub const MAIN: usize = 0;
pub const IIBENCH_TABLES: [usize; 4] = [1, 2, 3, 4];
pub const TABLES: [&str; 5] = [
    "main",
    crate::iibench::PURCHASES,
    crate::iibench::IX_PRICE_CUSTOMER,
    crate::iibench::IX_REGISTER_PRICE_CUSTOMER,
    crate::iibench::IX_PRICE_DATE_CUSTOMER,
];

/// Receives progress as ops complete (the CLI draws a bar from it).
pub trait Progress: Sync {
    fn start(&self, _label: &str, _total: u64) {}
    fn inc(&self, _n: u64) {}
    fn finish(&self) {}
}

/// Progress that goes nowhere.
pub struct NoProgress;
impl Progress for NoProgress {}

/// What the Db holds, carried from phase to phase.
#[derive(Debug, Default)]
pub struct DbState {
    /// Main-table keys are the numbers `0..main_keys`.
    pub main_keys: AtomicU64,
    /// Key and value bytes of the main table entries (kept up to date on insert).
    pub main_bytes: AtomicU64,
    /// iiBench rows inserted so far (transactionids `0..iib_rows`).
    pub iib_rows: AtomicU64,
    /// Key and value bytes of the purchases rows and index entries.
    pub iib_bytes: AtomicU64,
}

impl DbState {
    pub fn live_bytes(&self) -> u64 {
        self.main_bytes.load(Relaxed) + self.iib_bytes.load(Relaxed)
    }
}

/// Operation mix of a YCSB workload: (read, update, insert, scan, rmw) in percent.
pub fn ycsb_mix(y: Ycsb) -> [u32; 5] {
    match y {
        Ycsb::A => [50, 50, 0, 0, 0],
        Ycsb::B => [95, 5, 0, 0, 0],
        Ycsb::C => [100, 0, 0, 0, 0],
        Ycsb::D => [95, 0, 5, 0, 0],
        Ycsb::E => [0, 0, 5, 95, 0],
        Ycsb::F => [50, 0, 0, 0, 50],
    }
}

/// One YCSB operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum YcsbOp {
    Read,
    Update,
    Insert,
    Scan,
    ReadModifyWrite,
}

/// Draws the next YCSB operation from the workload's mix.
pub fn ycsb_pick(y: Ycsb, rng: &mut impl Rng) -> YcsbOp {
    let mix = ycsb_mix(y);
    let mut x = rng.gen_range(0..100u32);
    for (i, share) in mix.iter().enumerate() {
        if x < *share {
            return [
                YcsbOp::Read,
                YcsbOp::Update,
                YcsbOp::Insert,
                YcsbOp::Scan,
                YcsbOp::ReadModifyWrite,
            ][i];
        }
        x -= share;
    }
    unreachable!("mix sums to 100")
}

/// Default op count of a phase when `ops` is not given.
pub fn default_ops(kind: Kind, p: &Params) -> u64 {
    match kind {
        Kind::Scan => (p.keys / p.scan_len as u64).max(1),
        Kind::Txn => (p.keys / p.txn_writes.max(1) as u64).max(1),
        _ => p.keys,
    }
}

/// What a phase's samples are, for the latency summary.
pub fn latency_unit(kind: Kind, p: &Params) -> String {
    match kind {
        Kind::FillSeq | Kind::FillRandom | Kind::Overwrite => {
            format!("batch of {} writes", p.batch)
        }
        Kind::IncRandom => format!("batch of {} increments", p.batch),
        Kind::IiBench => format!("batch of {} rows (4 writes each)", p.batch),
        Kind::MultiReadRandom => format!("multi-get of {} keys", p.multiget),
        Kind::ReadSeq => "chunk of 1000 entries".into(),
        Kind::Scan => format!("scan of {} entries", p.scan_len),
        Kind::ReadWhileWriting => format!("view taken, {} reads through it", p.view_reads),
        Kind::Txn => format!(
            "transaction of {} reads and {} writes, retries included",
            p.txn_reads, p.txn_writes
        ),
        _ => "op".into(),
    }
}

/// Shared context of one phase.
pub struct Ctx<'a> {
    pub engine: &'a dyn Engine,
    pub kind: Kind,
    pub params: &'a Params,
    pub state: &'a DbState,
    pub progress: &'a dyn Progress,
    pub total: u64,
    claimed: AtomicU64,
    deadline: Option<Instant>,
    stop: AtomicBool,
    values: ValueGen,
    perm: Permutation,
    /// Main keys and iiBench rows present when the phase began.
    base_keys: u64,
    base_rows: u64,
    /// Next key number a YCSB insert takes; readers see it once written.
    next_insert: AtomicU64,
}

/// Runs the phase and returns the merged recorder and the elapsed time.
pub fn run_phase(
    engine: &dyn Engine,
    kind: Kind,
    params: &Params,
    state: &DbState,
    progress: &dyn Progress,
) -> Result<(Recorder, Duration)> {
    let total = params.ops.unwrap_or_else(|| default_ops(kind, params));
    let ctx = Ctx {
        engine,
        kind,
        params,
        state,
        progress,
        total,
        claimed: AtomicU64::new(0),
        deadline: params.duration.map(|d| Instant::now() + d),
        stop: AtomicBool::new(false),
        values: ValueGen::new(params.values, params.value_size, params.seed),
        perm: Permutation::new(params.keys.max(1), params.seed),
        base_keys: state.main_keys.load(Relaxed),
        base_rows: state.iib_rows.load(Relaxed),
        next_insert: AtomicU64::new(state.main_keys.load(Relaxed)),
    };
    progress.start(&kind.name(), total);
    let start = Instant::now();
    let results: Vec<Result<Recorder>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..thread_count(kind, params))
            .map(|tid| {
                let ctx = &ctx;
                s.spawn(move || {
                    let mut rec = Recorder::new(start);
                    let r = ctx.thread(tid as u64, &mut rec);
                    if r.is_err() {
                        ctx.stop.store(true, Relaxed);
                    }
                    r.map(|_| rec)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("bench thread panicked"))
            .collect()
    });
    let elapsed = start.elapsed();
    progress.finish();
    let mut merged = Recorder::new(start);
    for r in results {
        merged.merge(&r?);
    }
    ctx.finish_state();
    Ok((merged, elapsed))
}

/// Threads of a phase: `threads`, and readwhilewriting's writer beside them.
fn thread_count(kind: Kind, p: &Params) -> usize {
    match kind {
        Kind::ReadWhileWriting => p.threads.max(1) + 1,
        _ => p.threads.max(1),
    }
}

impl Ctx<'_> {
    /// True once no more ops will be claimed: all claimed, the deadline
    /// passed, a thread failed or the run was interrupted.
    fn over(&self) -> bool {
        self.stop.load(Relaxed)
            || crate::interrupted()
            || self.deadline.is_some_and(|d| Instant::now() >= d)
            || self.claimed.load(Relaxed) >= self.total
    }

    /// Claims up to `n` ops; returns the first op index and how many, or None when done.
    fn claim(&self, n: u64) -> Option<(u64, u64)> {
        if self.stop.load(Relaxed)
            || crate::interrupted()
            || self.deadline.is_some_and(|d| Instant::now() >= d)
        {
            return None;
        }
        let first = self.claimed.fetch_add(n, Relaxed);
        (first < self.total).then(|| (first, n.min(self.total - first)))
    }

    fn main_keys(&self) -> u64 {
        self.state.main_keys.load(Relaxed).max(1)
    }

    fn key_and_value(&self, k: u64, version: u64) -> WriteOp {
        WriteOp::Put {
            table: MAIN,
            key: encode_key(k, self.params.key_size),
            value: self.values.value(k, version),
        }
    }

    fn thread(&self, tid: u64, rec: &mut Recorder) -> Result<()> {
        let mut rng =
            SmallRng::seed_from_u64(self.params.seed ^ (tid + 1).wrapping_mul(0x9e37_79b9));
        let picker = KeyPicker::new(self.params.dist, self.main_keys(), self.params.seed);
        let batch = self.params.batch as u64;
        let mut key = Vec::new();
        loop {
            let t0 = Instant::now();
            let done = match self.kind {
                Kind::FillSeq | Kind::FillRandom => {
                    let Some((first, n)) = self.claim(batch) else {
                        break;
                    };
                    let ops: Vec<WriteOp> = (first..first + n)
                        .map(|i| {
                            let k = if self.kind == Kind::FillSeq {
                                i
                            } else {
                                self.perm.apply(i % self.params.keys.max(1))
                            };
                            self.key_and_value(k, 0)
                        })
                        .collect();
                    rec.user_bytes += ops.iter().map(WriteOp::user_bytes).sum::<u64>();
                    self.engine.write_batch(ops)?;
                    n
                }
                Kind::Overwrite => {
                    let Some((_, n)) = self.claim(batch) else {
                        break;
                    };
                    let ops: Vec<WriteOp> = (0..n)
                        .map(|_| {
                            let k = picker.pick(&mut rng, self.main_keys());
                            self.key_and_value(k, rng.gen::<u64>() | 1)
                        })
                        .collect();
                    rec.user_bytes += ops.iter().map(WriteOp::user_bytes).sum::<u64>();
                    self.engine.write_batch(ops)?;
                    n
                }
                Kind::IncRandom => {
                    let Some((_, n)) = self.claim(batch) else {
                        break;
                    };
                    let keys: Vec<Vec<u8>> = (0..n)
                        .map(|_| {
                            let k = picker.pick(&mut rng, self.main_keys());
                            encode_key(k, self.params.key_size)
                        })
                        .collect();
                    // User bytes: a key and an 8-byte operand per increment.
                    rec.user_bytes += n * (self.params.key_size + COUNTER_BYTES) as u64;
                    self.engine.increment(MAIN, &keys, 1)?;
                    n
                }
                Kind::ReadRandom => {
                    let Some(_) = self.claim(1) else { break };
                    encode_key_into(
                        picker.pick(&mut rng, self.main_keys()),
                        self.params.key_size,
                        &mut key,
                    );
                    self.count_found(rec, self.engine.get(MAIN, &key)?.is_some());
                    1
                }
                Kind::MultiReadRandom => {
                    let Some((_, n)) = self.claim(self.params.multiget as u64) else {
                        break;
                    };
                    let keys: Vec<Vec<u8>> = (0..n)
                        .map(|_| {
                            encode_key(
                                picker.pick(&mut rng, self.main_keys()),
                                self.params.key_size,
                            )
                        })
                        .collect();
                    for v in self.engine.multi_get(MAIN, &keys)? {
                        self.count_found(rec, v.is_some());
                    }
                    n
                }
                Kind::ReadSeq => {
                    // Each thread reads the whole table in chunks of 1000 from where it left off.
                    let Some((_, n)) = self.claim(1000) else {
                        break;
                    };
                    let mut last = None;
                    let got = self.engine.scan(MAIN, &key, n as usize, &mut |k, v| {
                        last = Some(k.to_vec());
                        read_value(v)
                    })?;
                    rec.found += got as u64;
                    match last {
                        Some(mut k) => {
                            k.push(0);
                            key = k;
                        }
                        None => key.clear(),
                    }
                    got as u64
                }
                Kind::Scan => {
                    let Some(_) = self.claim(1) else { break };
                    encode_key_into(
                        picker.pick(&mut rng, self.main_keys()),
                        self.params.key_size,
                        &mut key,
                    );
                    rec.found +=
                        self.engine
                            .scan(MAIN, &key, self.params.scan_len, &mut |_, v| read_value(v))?
                            as u64;
                    1
                }
                Kind::Ycsb(y) => {
                    let Some(_) = self.claim(1) else { break };
                    self.ycsb_op(y, &picker, &mut rng, rec)?;
                    1
                }
                Kind::ReadWhileWriting if tid == self.params.threads.max(1) as u64 => {
                    return self.writer(&picker, &mut rng, rec);
                }
                Kind::ReadWhileWriting => {
                    let Some((_, n)) = self.claim(self.params.view_reads as u64) else {
                        break;
                    };
                    self.reads_through_view(n, &picker, &mut rng, &mut key, rec)?;
                    n
                }
                Kind::Txn => {
                    let Some(_) = self.claim(1) else { break };
                    self.transaction(&picker, &mut rng, rec)?;
                    1
                }
                Kind::IiBench => {
                    let Some((first, n)) = self.claim(batch) else {
                        break;
                    };
                    let mut ops = Vec::with_capacity(4 * n as usize);
                    for id in self.base_rows + first..self.base_rows + first + n {
                        ops.extend(
                            Row::generate(id, self.params.seed).ops(IIBENCH_TABLES, &self.values),
                        );
                    }
                    rec.user_bytes += ops.iter().map(WriteOp::user_bytes).sum::<u64>();
                    self.engine.write_batch(ops)?;
                    n
                }
            };
            rec.record(t0, done);
            self.progress.inc(done);
        }
        Ok(())
    }

    /// readwhilewriting's writer: batches of `batch` overwrites of random
    /// existing keys, at full speed until the readers are done.
    fn writer(&self, picker: &KeyPicker, rng: &mut SmallRng, rec: &mut Recorder) -> Result<()> {
        while !self.over() {
            let ops: Vec<WriteOp> = (0..self.params.batch)
                .map(|_| {
                    let k = picker.pick(rng, self.main_keys());
                    self.key_and_value(k, rng.gen::<u64>() | 1)
                })
                .collect();
            rec.user_bytes += ops.iter().map(WriteOp::user_bytes).sum::<u64>();
            rec.side_writes += ops.len() as u64;
            self.engine.write_batch(ops)?;
        }
        Ok(())
    }

    /// `n` point reads of random keys through one view taken for them.
    fn reads_through_view(
        &self,
        n: u64,
        picker: &KeyPicker,
        rng: &mut SmallRng,
        key: &mut Vec<u8>,
        rec: &mut Recorder,
    ) -> Result<()> {
        let view = self.engine.read_view()?;
        for _ in 0..n {
            encode_key_into(
                picker.pick(rng, self.main_keys()),
                self.params.key_size,
                key,
            );
            self.count_found(rec, view.get(MAIN, key)?.is_some());
        }
        Ok(())
    }

    /// One transaction of `txn_reads` reads and `txn_writes` puts of random
    /// existing keys, run again by the engine until it commits.
    fn transaction(
        &self,
        picker: &KeyPicker,
        rng: &mut SmallRng,
        rec: &mut Recorder,
    ) -> Result<()> {
        let ks = self.params.key_size;
        let reads: Vec<Vec<u8>> = (0..self.params.txn_reads)
            .map(|_| encode_key(picker.pick(rng, self.main_keys()), ks))
            .collect();
        let writes: Vec<(Vec<u8>, Vec<u8>)> = (0..self.params.txn_writes)
            .map(|_| {
                let k = picker.pick(rng, self.main_keys());
                (
                    encode_key(k, ks),
                    self.values.value(k, rng.gen::<u64>() | 1),
                )
            })
            .collect();
        rec.user_bytes += writes
            .iter()
            .map(|(k, v)| (k.len() + v.len()) as u64)
            .sum::<u64>();
        let done = self.engine.transact(MAIN, &reads, &writes)?;
        rec.found += done.found;
        rec.missing += reads.len() as u64 - done.found;
        rec.conflicts += done.conflicts;
        Ok(())
    }

    fn count_found(&self, rec: &mut Recorder, found: bool) {
        if found {
            rec.found += 1;
        } else {
            rec.missing += 1;
        }
    }

    fn ycsb_op(
        &self,
        y: Ycsb,
        picker: &KeyPicker,
        rng: &mut SmallRng,
        rec: &mut Recorder,
    ) -> Result<()> {
        let ks = self.params.key_size;
        match ycsb_pick(y, rng) {
            YcsbOp::Read => {
                let k = encode_key(picker.pick(rng, self.main_keys()), ks);
                self.count_found(rec, self.engine.get(MAIN, &k)?.is_some());
            }
            YcsbOp::Update => {
                let op =
                    self.key_and_value(picker.pick(rng, self.main_keys()), rng.gen::<u64>() | 1);
                rec.user_bytes += op.user_bytes();
                self.engine.write_batch(vec![op])?;
            }
            YcsbOp::Insert => {
                let k = self.next_insert.fetch_add(1, Relaxed);
                let op = self.key_and_value(k, 0);
                rec.user_bytes += op.user_bytes();
                self.state.main_bytes.fetch_add(op.user_bytes(), Relaxed);
                self.engine.write_batch(vec![op])?;
                // Readers pick below main_keys; with several threads a key
                // allocated by a slower insert can briefly be a miss (counted).
                self.state.main_keys.fetch_max(k + 1, Relaxed);
            }
            YcsbOp::Scan => {
                let k = encode_key(picker.pick(rng, self.main_keys()), ks);
                let len = rng.gen_range(1..=self.params.scan_len);
                rec.found += self.engine.scan(MAIN, &k, len, &mut |_, v| read_value(v))? as u64;
            }
            YcsbOp::ReadModifyWrite => {
                let n = picker.pick(rng, self.main_keys());
                let k = encode_key(n, ks);
                let old = self.engine.get(MAIN, &k)?;
                self.count_found(rec, old.is_some());
                let op = self.key_and_value(n, rng.gen::<u64>() | 1);
                rec.user_bytes += op.user_bytes();
                self.engine.write_batch(vec![op])?;
            }
        }
        Ok(())
    }

    /// Records what a load added to the Db.
    fn finish_state(&self) {
        let done = self.claimed.load(Relaxed).min(self.total);
        let entry =
            (self.params.key_size.max(crate::keys::MIN_KEY_SIZE) + self.params.value_size) as u64;
        match self.kind {
            Kind::FillSeq | Kind::FillRandom => {
                // Keys are 0..keys (fillrandom visits a permutation of them).
                let keys = if self.kind == Kind::FillSeq {
                    done
                } else {
                    done.min(self.params.keys)
                };
                if keys > self.base_keys {
                    self.state.main_keys.store(keys, Relaxed);
                    self.state.main_bytes.store(keys * entry, Relaxed);
                }
            }
            Kind::IiBench => {
                let rows = self.base_rows + done;
                self.state.iib_rows.store(rows, Relaxed);
                let pad = ValueGen::new(self.params.values, self.params.value_size, 0);
                let r = Row::generate(0, 0);
                let per_row: u64 = r
                    .ops(IIBENCH_TABLES, &pad)
                    .iter()
                    .map(WriteOp::user_bytes)
                    .sum();
                self.state.iib_bytes.store(rows * per_row, Relaxed);
            }
            _ => {}
        }
    }
}

/// Reads every byte of a scanned value, as a client that uses it would
/// (an engine that maps its file is then charged for the pages it reads;
/// a visitor that ignored the value would credit it reads it never did).
/// Always true: the scan goes on.
fn read_value(v: &[u8]) -> bool {
    let sum = v.chunks(8).fold(0u64, |acc, c| {
        acc.wrapping_add(c.iter().fold(0u64, |a, &b| a << 8 | b as u64))
    });
    std::hint::black_box(sum);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Visit;
    use crate::engines::btreemap::BTreeEngine;
    use crate::iibench::Row;
    use crate::keys::decode_key;
    use std::collections::BTreeSet;

    /// A BTreeMap engine that counts what the workload asked of it.
    #[derive(Default)]
    struct Counting {
        inner: Option<BTreeEngine>,
        gets: AtomicU64,
        batches: AtomicU64,
        writes: AtomicU64,
        scans: AtomicU64,
        views: AtomicU64,
        txns: AtomicU64,
        /// Behave as an engine without views or transactions.
        plain: bool,
    }

    impl Counting {
        fn new() -> Self {
            Self {
                inner: Some(BTreeEngine::new(TABLES.len())),
                ..Default::default()
            }
        }
        fn db(&self) -> &BTreeEngine {
            self.inner.as_ref().unwrap()
        }
        fn keys(&self, table: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
            let mut out = Vec::new();
            self.db()
                .scan(table, b"", usize::MAX, &mut |k, v| {
                    out.push((k.to_vec(), v.to_vec()));
                    true
                })
                .unwrap();
            out
        }
    }

    impl Engine for Counting {
        fn name(&self) -> &'static str {
            "counting"
        }
        fn version(&self) -> String {
            String::new()
        }
        fn write_batch(&self, ops: Vec<WriteOp>) -> Result<()> {
            self.batches.fetch_add(1, Relaxed);
            self.writes.fetch_add(ops.len() as u64, Relaxed);
            self.db().write_batch(ops)
        }
        fn get(&self, table: usize, key: &[u8]) -> Result<Option<Vec<u8>>> {
            self.gets.fetch_add(1, Relaxed);
            self.db().get(table, key)
        }
        fn scan(&self, table: usize, start: &[u8], limit: usize, visit: Visit) -> Result<usize> {
            self.scans.fetch_add(1, Relaxed);
            self.db().scan(table, start, limit, visit)
        }
        fn read_view(&self) -> Result<Box<dyn crate::engine::ReadView + '_>> {
            if self.plain {
                return Err(crate::BenchError::Unsupported {
                    engine: "counting",
                    what: "views",
                });
            }
            self.views.fetch_add(1, Relaxed);
            self.db().read_view()
        }
        fn transact(
            &self,
            table: usize,
            reads: &[Vec<u8>],
            writes: &crate::engine::TxnWrites,
        ) -> Result<crate::engine::TxnDone> {
            self.txns.fetch_add(1, Relaxed);
            self.gets.fetch_add(reads.len() as u64, Relaxed);
            self.writes.fetch_add(writes.len() as u64, Relaxed);
            self.db().transact(table, reads, writes)
        }
        fn sync(&self) -> Result<()> {
            Ok(())
        }
        fn close(self: Box<Self>) -> Result<Option<serde_json::Value>> {
            Ok(None)
        }
    }

    fn params(keys: u64, threads: usize) -> Params {
        Params {
            keys,
            threads,
            batch: 100,
            ..Params::default()
        }
    }

    fn load(e: &Counting, state: &DbState, p: &Params) {
        run_phase(e, Kind::FillRandom, p, state, &NoProgress).unwrap();
        e.writes.store(0, Relaxed);
        e.batches.store(0, Relaxed);
    }

    #[test]
    fn fills_write_each_key_exactly_once() {
        for (kind, threads) in [(Kind::FillSeq, 1), (Kind::FillRandom, 3)] {
            let e = Counting::new();
            let state = DbState::default();
            let p = params(5_000, threads);
            let (rec, _) = run_phase(&e, kind, &p, &state, &NoProgress).unwrap();
            assert_eq!(rec.ops, 5_000);
            assert_eq!(e.writes.load(Relaxed), 5_000, "{kind:?}: one write per key");
            let nums: BTreeSet<u64> = e
                .keys(MAIN)
                .iter()
                .map(|(k, _)| decode_key(k).unwrap())
                .collect();
            assert_eq!(nums, (0..5_000).collect(), "{kind:?}: key set");
            assert_eq!(rec.user_bytes, 5_000 * 116);
            assert_eq!(state.live_bytes(), 5_000 * 116);
            let vg = ValueGen::new(p.values, p.value_size, p.seed);
            for (k, v) in e.keys(MAIN).iter().step_by(97) {
                assert_eq!(v, &vg.value(decode_key(k).unwrap(), 0));
            }
        }
    }

    #[test]
    fn fillrandom_order_is_not_sequential() {
        let e = Counting::new();
        let p = Params {
            batch: 1,
            ..params(1000, 1)
        };
        // Record insertion order through a batch-of-one load.
        let order = std::sync::Mutex::new(Vec::new());
        struct Spy<'a>(&'a Counting, &'a std::sync::Mutex<Vec<u64>>);
        impl Engine for Spy<'_> {
            fn name(&self) -> &'static str {
                "spy"
            }
            fn version(&self) -> String {
                String::new()
            }
            fn write_batch(&self, ops: Vec<WriteOp>) -> Result<()> {
                if let WriteOp::Put { key, .. } = &ops[0] {
                    self.1.lock().unwrap().push(decode_key(key).unwrap());
                }
                self.0.write_batch(ops)
            }
            fn get(&self, t: usize, k: &[u8]) -> Result<Option<Vec<u8>>> {
                self.0.get(t, k)
            }
            fn scan(&self, t: usize, s: &[u8], l: usize, v: Visit) -> Result<usize> {
                self.0.scan(t, s, l, v)
            }
            fn sync(&self) -> Result<()> {
                Ok(())
            }
            fn close(self: Box<Self>) -> Result<Option<serde_json::Value>> {
                Ok(None)
            }
        }
        run_phase(
            &Spy(&e, &order),
            Kind::FillRandom,
            &p,
            &DbState::default(),
            &NoProgress,
        )
        .unwrap();
        let o = order.into_inner().unwrap();
        let ascending = o.windows(2).filter(|w| w[1] == w[0] + 1).count();
        assert!(
            ascending < 20,
            "{ascending} of 999 inserts were the next key"
        );
    }

    #[test]
    fn ycsb_mixes_match_their_definitions() {
        let n = 20_000u64;
        // (workload, expected gets, writes, scans per op), tolerance 2 points.
        let cases = [
            (Ycsb::A, 0.5, 0.5, 0.0),
            (Ycsb::B, 0.95, 0.05, 0.0),
            (Ycsb::C, 1.0, 0.0, 0.0),
            (Ycsb::D, 0.95, 0.05, 0.0),
            (Ycsb::E, 0.0, 0.05, 0.95),
            (Ycsb::F, 1.0, 0.5, 0.0),
        ];
        for (y, gets, writes, scans) in cases {
            let e = Counting::new();
            let state = DbState::default();
            // One thread: with several, a read of a just-allocated key may miss.
            let p = params(2_000, 1);
            load(&e, &state, &p);
            e.gets.store(0, Relaxed);
            let p = Params {
                ops: Some(n),
                ..Spec_params(y, &p)
            };
            let (rec, _) = run_phase(&e, Kind::Ycsb(y), &p, &state, &NoProgress).unwrap();
            assert_eq!(rec.ops, n);
            let share = |c: &AtomicU64| c.load(Relaxed) as f64 / n as f64;
            for (what, got, want) in [
                ("gets", share(&e.gets), gets),
                ("writes", share(&e.writes), writes),
                ("scans", share(&e.scans), scans),
            ] {
                assert!(
                    (got - want).abs() < 0.02,
                    "{y:?}: {what} {got:.3}, expected {want}"
                );
            }
            assert_eq!(
                rec.missing, 0,
                "{y:?}: reads of loaded or inserted keys must hit"
            );
            if matches!(y, Ycsb::D | Ycsb::E) {
                let inserted = state.main_keys.load(Relaxed) - 2_000;
                assert_eq!(e.keys(MAIN).len() as u64, 2_000 + inserted);
                assert!(inserted > 0);
            }
        }
    }

    #[allow(non_snake_case)]
    fn Spec_params(y: Ycsb, base: &Params) -> Params {
        crate::workload::Spec::parse(&Kind::Ycsb(y).name(), base)
            .unwrap()
            .params
    }

    #[test]
    fn iibench_rows_and_index_entries_agree() {
        let e = Counting::new();
        let state = DbState::default();
        let p = Params {
            batch: 50,
            ..params(3_000, 2)
        };
        let (rec, _) = run_phase(&e, Kind::IiBench, &p, &state, &NoProgress).unwrap();
        assert_eq!(rec.ops, 3_000);
        assert_eq!(e.batches.load(Relaxed), 60);
        let rows = e.keys(IIBENCH_TABLES[0]);
        assert_eq!(rows.len(), 3_000);
        let by_id: std::collections::HashMap<u64, Row> = rows
            .iter()
            .map(|(k, v)| {
                let id = u64::from_be_bytes(k[..].try_into().unwrap());
                (id, Row::decode(id, v).unwrap())
            })
            .collect();
        for (i, t) in IIBENCH_TABLES[1..].iter().enumerate() {
            let entries = e.keys(*t);
            assert_eq!(entries.len(), 3_000, "index {i}");
            for (k, v) in &entries {
                assert!(v.is_empty());
                let id = u64::from_be_bytes(k[k.len() - 8..].try_into().unwrap());
                let row = by_id[&id];
                let want = [
                    row.ix_price_customer(),
                    row.ix_register_price_customer(),
                    row.ix_price_date_customer(),
                ][i]
                    .clone();
                assert_eq!(k, &want, "index {i} entry of row {id}");
            }
        }
        let bytes: u64 = IIBENCH_TABLES
            .iter()
            .flat_map(|t| e.keys(*t))
            .map(|(k, v)| (k.len() + v.len()) as u64)
            .sum();
        assert_eq!(rec.user_bytes, bytes);
        assert_eq!(state.live_bytes(), bytes);
        // A second phase continues the transactionid sequence.
        run_phase(
            &e,
            Kind::IiBench,
            &Params {
                ops: Some(500),
                ..p
            },
            &state,
            &NoProgress,
        )
        .unwrap();
        assert_eq!(e.keys(IIBENCH_TABLES[0]).len(), 3_500);
    }

    #[test]
    fn reads_and_scans_find_loaded_keys() {
        let e = Counting::new();
        let state = DbState::default();
        let p = params(3_000, 2);
        load(&e, &state, &p);
        let (rec, _) = run_phase(
            &e,
            Kind::ReadRandom,
            &Params {
                ops: Some(2000),
                ..p.clone()
            },
            &state,
            &NoProgress,
        )
        .unwrap();
        assert_eq!((rec.found, rec.missing), (2000, 0));
        let (rec, _) = run_phase(
            &e,
            Kind::MultiReadRandom,
            &Params {
                ops: Some(160),
                ..p.clone()
            },
            &state,
            &NoProgress,
        )
        .unwrap();
        assert_eq!((rec.ops, rec.found), (160, 160));
        let (rec, _) = run_phase(
            &e,
            Kind::ReadSeq,
            &Params {
                threads: 1,
                ..p.clone()
            },
            &state,
            &NoProgress,
        )
        .unwrap();
        assert_eq!(rec.found, 3_000);
        let (rec, _) = run_phase(
            &e,
            Kind::Scan,
            &Params {
                ops: Some(50),
                scan_len: 10,
                ..p.clone()
            },
            &state,
            &NoProgress,
        )
        .unwrap();
        assert_eq!(rec.ops, 50);
        assert!(
            rec.found > 50 * 9,
            "scans of 10 returned {} entries in all",
            rec.found
        );
        let (rec, _) = run_phase(
            &e,
            Kind::Overwrite,
            &Params {
                ops: Some(1000),
                ..p
            },
            &state,
            &NoProgress,
        )
        .unwrap();
        assert_eq!(e.writes.load(Relaxed), 1000);
        assert_eq!(e.keys(MAIN).len(), 3_000, "overwrite adds no keys");
        assert_eq!(rec.user_bytes, 1000 * 116);
    }

    #[test]
    fn readwhilewriting_reads_through_views_beside_one_writer() {
        let e = Counting::new();
        let state = DbState::default();
        let p = params(2_000, 2);
        load(&e, &state, &p);
        let p = Params {
            ops: Some(4_000),
            view_reads: 16,
            batch: 10,
            ..p
        };
        let (rec, _) = run_phase(&e, Kind::ReadWhileWriting, &p, &state, &NoProgress).unwrap();
        assert_eq!((rec.ops, rec.found, rec.missing), (4_000, 4_000, 0));
        assert_eq!(e.views.load(Relaxed), 4_000 / 16, "one view per 16 reads");
        assert_eq!(e.gets.load(Relaxed), 0, "no read bypassed the views");
        let w = e.writes.load(Relaxed);
        assert_eq!(rec.side_writes, w);
        assert_eq!(w % 10, 0, "whole batches of 10");
        assert_eq!(rec.user_bytes, w * 116);
        assert_eq!(e.keys(MAIN).len(), 2_000, "overwrites add no keys");
        assert_eq!(
            rec.latency("x".into()).count,
            4_000 / 16,
            "samples are views"
        );
    }

    #[test]
    fn readwhilewriting_on_an_engine_without_views_is_a_typed_error() {
        let e = Counting {
            plain: true,
            ..Counting::new()
        };
        let state = DbState::default();
        load(&e, &state, &params(100, 1));
        let e = run_phase(
            &e,
            Kind::ReadWhileWriting,
            &params(100, 2),
            &state,
            &NoProgress,
        )
        .err()
        .expect("no views: the phase fails");
        assert!(matches!(e, crate::BenchError::Unsupported { .. }), "{e}");
    }

    #[test]
    fn txn_runs_transactions_of_reads_and_writes() {
        let e = Counting::new();
        let state = DbState::default();
        let p = params(2_000, 2);
        load(&e, &state, &p);
        let p = Params {
            ops: Some(300),
            txn_reads: 3,
            txn_writes: 5,
            ..p
        };
        let (rec, _) = run_phase(&e, Kind::Txn, &p, &state, &NoProgress).unwrap();
        assert_eq!(rec.ops, 300);
        assert_eq!(e.txns.load(Relaxed), 300);
        assert_eq!((rec.found, rec.missing), (900, 0));
        assert_eq!(e.writes.load(Relaxed), 1_500);
        assert_eq!(
            e.batches.load(Relaxed),
            0,
            "writes went through transactions"
        );
        assert_eq!((rec.conflicts, rec.user_bytes), (0, 1_500 * 116));
        assert_eq!(e.keys(MAIN).len(), 2_000);
        assert_eq!(default_ops(Kind::Txn, &p), 400, "keys / writes");
    }
}
