//! Crash simulation: the power goes out at the Nth write or sync (a sticky
//! fault, so the engine sees every later I/O fail), the simulated drive loses,
//! tears or reorders what was not synced, and the database is reopened.
//! Every acknowledged Sync commit must be there (Buffered: everything up to the
//! last successful sync), no batch half-applied, and `check` must pass. A case
//! runs 1 to 3 rounds of work + crash + verified recovery on the same image
//! (half the cases with the sparse redo log, whose padding recovery skips),
//! and a later round's failure point may fall inside recovery itself. Half
//! the cases flush B+tree nodes as delta blocks with tiny thresholds (so
//! torn delta blocks, crashes between delta writes and the superblock flip,
//! and deltas gone stale by consolidation all occur); the tally counts them.
//! PAGEWISE_CRASH_ITERS cases (default 1,020: over 2,000 crashes), split
//! between Sync and Buffered mode; 100000 for a long run. A failure prints the
//! seed; PAGEWISE_CRASH_SEED=<seed> PAGEWISE_CRASH_ITERS=2 reruns it.
//! Tree t0 is a B+tree; t1 is a B-epsilon tree with tiny nodes (so flushes,
//! splits and merges happen) in three cases of four, taking upserts too, so
//! batches span both kinds, its values packed into value runs where value
//! extents are on, and `Db::drain` (with the value collector's unlogged
//! re-puts) run now and then, so the power also fails inside those; where its cache is small its dirty leaves are
//! written back between checkpoints (about a quarter of those rounds).

mod common;
use common::Append;
use pagewise::{BEpsilonOptions, Batch, Db, DeltaFlush, Durability, Options, TreeKind};
use pagewise_io::{CrashMode, FaultInjector, FaultKinds, Faulty, Fs, SimFs};
use rand::{rngs::SmallRng, Rng, SeedableRng};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

type State = BTreeMap<(u8, Vec<u8>), Vec<u8>>;
type Writes = Vec<(u8, Vec<u8>, Option<Vec<u8>>)>;

fn iters() -> u64 {
    std::env::var("PAGEWISE_CRASH_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1020)
}

fn base_seed() -> u64 {
    std::env::var("PAGEWISE_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
}

/// Whether case `seed` makes t1 a B-epsilon tree, and its options (every
/// other one of the tiny-basement trees with leaves smaller than its
/// internal nodes; one in four with 2 KiB basements, which are stored as
/// segments: docs/design.md, "Segments"). Values of at least 64 bytes go
/// to value extents in one case in three, none in another, and those of at
/// least 2,032 bytes (the large values, the default before 512) in the third.
fn bepsilon(seed: u64) -> Option<TreeKind> {
    (seed / 2 % 4 != 3).then(|| {
        let shapes = [(512, 128), (1024, 128), (2048, 128), (4096, 2048)];
        let (node, basement) = shapes[(seed / 4 % 4) as usize];
        let extents = [
            Some(64),
            None,
            Some(2032), // the large values only (the default before 512)
        ];
        let o = BEpsilonOptions::default()
            .node_bytes(node)
            .basement_bytes(basement)
            .fanout(4)
            .value_extent_bytes(extents[(seed / 24 % 3) as usize]);
        TreeKind::BEpsilon(if seed / 12 % 2 == 1 && basement < 384 / 2 {
            o.leaf_bytes(384)
        } else {
            o
        })
    })
}

/// An upsert in a `Writes` entry: its value is `+` and the operand.
const UPSERT: u8 = b'+';

fn random_batch(rng: &mut SmallRng, id: usize, ps: usize, bepsilon: bool) -> Writes {
    (0..rng.gen_range(1..6))
        .map(|_| {
            let t = rng.gen_range(0..2u8);
            let k = format!("k{:03}", rng.gen_range(0..150)).into_bytes();
            if bepsilon && t == 1 && rng.gen_bool(0.2) {
                return (t, k, Some(vec![UPSERT, b'a' + (id % 26) as u8]));
            }
            let v = if rng.gen_bool(0.25) {
                None
            } else {
                let len = if rng.gen_bool(0.05) {
                    rng.gen_range(ps..4 * ps)
                } else if rng.gen_bool(0.05) {
                    // Packed where value runs are on, across page bounds.
                    rng.gen_range(ps / 4..ps - 48)
                } else {
                    rng.gen_range(0..90)
                };
                // Every byte names the batch, so a half-applied batch shows.
                Some(
                    format!("{id:06}")
                        .into_bytes()
                        .into_iter()
                        .cycle()
                        .take(len.max(6))
                        .collect(),
                )
            };
            (t, k, v)
        })
        .collect()
}

fn apply(state: &mut State, batch: &Writes) {
    for (t, k, v) in batch {
        match v {
            Some(v) if v[0] == UPSERT => {
                let old = state
                    .entry((*t, k.clone()))
                    .or_insert_with(|| b"^".to_vec());
                old.push(v[1]);
            }
            Some(v) => {
                state.insert((*t, k.clone()), v.clone());
            }
            None => {
                state.remove(&(*t, k.clone()));
            }
        };
    }
}

fn read_all(db: &Db) -> Result<State, String> {
    read_snapshot(&db.snapshot().map_err(|e| e.to_string())?)
}

fn read_snapshot(snap: &pagewise::Snapshot) -> Result<State, String> {
    let mut s = State::new();
    for t in 0..2u8 {
        for kv in snap.tree(&format!("t{t}")).unwrap().iter() {
            let (k, v) = kv.map_err(|e| format!("read: {e}"))?;
            s.insert((t, k), v);
        }
    }
    Ok(s)
}

/// Applies `batch` as one engine batch, or (`txn`) as a transaction that
/// reads its first key, then writes.
fn commit(db: &Db, batch: &Writes, txn: bool) -> pagewise::Result<()> {
    if !txn {
        let mut b = Batch::new();
        for (t, k, v) in batch {
            match v {
                Some(v) if v[0] == UPSERT => b.upsert(format!("t{t}"), k, &v[1..]),
                Some(v) => b.insert(format!("t{t}"), k, v),
                None => b.remove(format!("t{t}"), k),
            }
        }
        return db.apply(b);
    }
    let mut tx = db.transaction()?;
    if let Some((t, k, _)) = batch.first() {
        tx.get(format!("t{t}"), k)?;
    }
    for (t, k, v) in batch {
        match v {
            Some(v) if v[0] == UPSERT => tx.upsert(format!("t{t}"), k, &v[1..]),
            Some(v) => tx.insert(format!("t{t}"), k, v),
            None => tx.remove(format!("t{t}"), k),
        }
    }
    tx.commit()
}

#[derive(Default, Debug)]
struct Tally {
    injected: u64,
    acked: u64,
    pending: u64,
    torn: u64,
    whole: u64,
    rounds: u64,
    /// Rounds with delta flushes on, and in them: nodes given a base or
    /// carrying a delta into a new epoch, and consolidations, before the crash.
    delta_rounds: u64,
    delta_nodes: u64,
    delta_consolidations: u64,
    delta_apart: u64,
    bepsilon_rounds: u64,
    /// Rounds whose Db wrote B-epsilon leaves back between checkpoints
    /// before the crash (docs/design.md, "Checkpoints", leaf write-back).
    write_back_rounds: u64,
    /// Rounds whose recovered file held B-epsilon buffers, and basements,
    /// stored as segments (`Db::file_map`'s walk, which also checks).
    buffer_segment_rounds: u64,
    basement_segment_rounds: u64,
}

struct Run {
    db: Option<Db>,
    sim: SimFs,
    injector: Arc<FaultInjector>,
    states: Vec<State>,
    durable: usize,
    failed_batch: Option<State>,
    /// (rebases + carries, consolidations, copies placed apart from their
    /// base) of the Db before the crash.
    delta_events: (u64, u64, u64),
    /// Leaf write-backs of the Db before the crash.
    write_backs: u64,
    /// A snapshot and an uncommitted transaction, alive at the crash.
    in_flight: (Option<pagewise::Snapshot>, Option<pagewise::Transaction>),
}

fn opts(seed: u64, ps: usize, durability: Durability, fs: Arc<dyn Fs>) -> Options {
    Options::default()
        .page_size(ps)
        .cache_bytes(rng_cache(seed, ps))
        .durability(durability)
        .direct_io(true)
        .wal_limit(pagewise::WAL_LIMIT_MIN_BYTES)
        .sparse_log(seed / 5 % 2 == 1)
        .delta_flush(delta_for(seed, ps))
        .merge_operator(Arc::new(Append))
        .fs(fs)
}

/// Delta flushes for half the cases, with thresholds from a few records to
/// most of a page, in blocks of two sectors (so a delta block can tear).
fn delta_for(seed: u64, ps: usize) -> Option<DeltaFlush> {
    (seed / 2 % 2 == 1).then(|| DeltaFlush {
        threshold_bytes: [60, 250, 1000][(seed / 4 % 3) as usize],
        block_bytes: ps.min(1024),
    })
}

const PATH: &str = "/db/crash";

/// Where a round starts: a fresh drive, or the image a previous round left.
struct Start {
    image: Option<SimFs>,
    state: State,
}

/// The workload of `seed` and `round`; with `fail_at`, the power fails at
/// that write or sync. On a fresh drive the count starts after creation; on
/// an image it starts before open, so recovery itself can be cut short.
fn workload(
    seed: u64,
    round: u64,
    ps: usize,
    durability: Durability,
    fail_at: u64,
    start: Start,
) -> Result<Run, String> {
    let mut rng = SmallRng::seed_from_u64(seed.wrapping_mul(31).wrapping_add(round));
    let injector = FaultInjector::new(
        FaultKinds {
            reads: false,
            writes: true,
            syncs: true,
        },
        0,
    );
    injector.set_sticky(true);
    let fresh = start.image.is_none();
    let sim = start.image.unwrap_or_else(|| SimFs::with_alignment(512));
    let fs: Arc<dyn Fs> = Arc::new(Faulty::new(sim.clone(), injector.clone()));
    let mut states = vec![start.state];
    let mut run = Run {
        db: None,
        sim: sim.clone(),
        injector: injector.clone(),
        states: Vec::new(),
        durable: 0,
        failed_batch: None,
        delta_events: (0, 0, 0),
        write_backs: 0,
        in_flight: (None, None),
    };
    let db = if fresh {
        sim.create_dir_all(Path::new("/db"))
            .map_err(|e| e.to_string())?;
        let db =
            Db::create(PATH, opts(seed, ps, durability, fs)).map_err(|e| format!("create: {e}"))?;
        if let Some(kind) = bepsilon(seed) {
            db.tree_with("t1", kind)
                .map_err(|e| format!("create t1: {e}"))?;
        }
        if fail_at > 0 {
            injector.arm(fail_at);
        }
        db
    } else {
        if fail_at > 0 {
            injector.arm(fail_at);
        }
        match Db::open(PATH, opts(seed, ps, durability, fs)) {
            Ok(db) => db,
            // The power failed during recovery: nothing new was acknowledged.
            Err(_) if injector.injected() > 0 => {
                run.states = states;
                return Ok(run);
            }
            Err(e) => return Err(format!("round {round} open: {e}")),
        }
    };
    // States after each acknowledged batch; `durable` indexes the newest one
    // that must survive.
    let mut durable = 0;
    let mut failed_batch = None;
    // A snapshot held across batches and checkpoints (checked against its
    // moment before the crash), and a transaction never committed (none of
    // its writes may appear after recovery): both in flight at the crash.
    let mut held: Option<(pagewise::Snapshot, State)> = None;
    let mut open_tx: Option<pagewise::Transaction> = None;
    for id in 1..=40 {
        let batch = random_batch(
            &mut rng,
            id + 100 * round as usize,
            ps,
            bepsilon(seed).is_some(),
        );
        if held.is_none() && rng.gen_bool(0.1) {
            let snap = db.snapshot().map_err(|e| format!("snapshot: {e}"))?;
            held = Some((snap, states.last().unwrap().clone()));
        }
        if open_tx.is_none() && rng.gen_bool(0.05) {
            let mut tx = db.transaction().map_err(|e| format!("transaction: {e}"))?;
            tx.insert("t0", b"uncommitted", b"never");
            open_tx = Some(tx);
        }
        let mut next = states.last().unwrap().clone();
        apply(&mut next, &batch);
        match commit(&db, &batch, rng.gen_bool(0.3)) {
            Ok(()) => {
                states.push(next);
                if durability == Durability::Sync {
                    durable = states.len() - 1;
                }
            }
            Err(_) => {
                failed_batch = Some(next);
                break;
            }
        }
        if durability == Durability::Buffered && rng.gen_bool(0.1) {
            if db.sync().is_err() {
                break;
            }
            durable = states.len() - 1;
        }
        // A drain: buffers to the leaves, value runs collected (values put
        // again without a log record), a checkpoint; the power may fail
        // anywhere in it.
        // In one case of three (the others keep their dirty leaves for the
        // write-back crashes).
        if seed.is_multiple_of(3) && rng.gen_bool(0.02) {
            if db.drain().is_err() {
                break;
            }
            durable = states.len() - 1;
        }
    }
    if let Some((snap, at)) = &held {
        if injector.injected() == 0 && read_snapshot(snap)? != *at {
            return Err(format!(
                "round {round}: a held snapshot differs from its moment"
            ));
        }
    }
    run.in_flight = (held.map(|h| h.0), open_tx);
    let s = db.stats();
    run.delta_events = (
        s.delta_rebases + s.delta_carries,
        s.delta_consolidations,
        s.delta_apart,
    );
    run.write_backs = s.write_backs;
    run.db = Some(db);
    run.states = states;
    run.durable = durable;
    run.failed_batch = failed_batch;
    Ok(run)
}

/// One case: up to three rounds of work, each ended by a power failure,
/// each followed by a verified recovery. Returns what went wrong.
fn crash_case(seed: u64, durability: Durability, tally: &mut Tally) -> Result<(), String> {
    let ps = [512, 1024, 4096][(seed / 9 % 3) as usize];
    // Some delta cases on 8 KiB pages: blocks before their bases then lie
    // in page tails (docs/design.md, "Delta placement").
    let tails = ps == 4096 && delta_for(seed, ps).is_some() && seed / 81 % 2 == 1;
    let ps = if tails { 8192 } else { ps };
    let rounds = 1 + seed / 27 % 3;
    // (durable image to start from, its state); two identical copies so the
    // dry run and the real run start from the same bytes.
    let mut start: Option<(SimFs, SimFs, State)> = None;
    for round in 0..rounds {
        let mode = CrashMode::ALL[((seed + round) % 3) as usize];
        let (dry_start, real_start) = match &start {
            None => (
                Start {
                    image: None,
                    state: State::new(),
                },
                Start {
                    image: None,
                    state: State::new(),
                },
            ),
            Some((a, b, st)) => (
                Start {
                    image: Some(a.clone()),
                    state: st.clone(),
                },
                Start {
                    image: Some(b.clone()),
                    state: st.clone(),
                },
            ),
        };
        // A dry run counts the writes and syncs, so the failure point is
        // uniform over the whole round.
        let dry = workload(seed, round, ps, durability, 0, dry_start)?;
        let total = dry.injector.seen();
        drop(dry);
        let fail_at = SmallRng::seed_from_u64(seed ^ 0x5EED ^ round).gen_range(1..=total.max(1));
        let where_ = format!("{mode:?} ps={ps} round={round} fail_at={fail_at}/{total}");
        let run = workload(seed, round, ps, durability, fail_at, real_start)?;
        let crash_seed = seed.wrapping_add(round << 40);
        let (img, rep) = run.sim.crash_report(crash_seed, mode);
        tally.injected += (run.injector.injected() > 0) as u64;
        tally.acked += run.states.len() as u64 - 1;
        tally.pending += rep.pending as u64;
        tally.torn += rep.torn as u64;
        tally.whole += rep.whole as u64;
        tally.rounds += 1;
        if delta_for(seed, ps).is_some() {
            tally.delta_rounds += 1;
            tally.delta_nodes += run.delta_events.0;
            tally.delta_consolidations += run.delta_events.1;
            tally.delta_apart += run.delta_events.2;
        }
        tally.bepsilon_rounds += bepsilon(seed).is_some() as u64;
        tally.write_back_rounds += (run.write_backs > 0) as u64;
        drop((run.in_flight, run.db));
        let db = Db::open(PATH, opts(seed, ps, durability, Arc::new(img.clone())))
            .map_err(|e| format!("{where_}: reopen: {e}"))?;
        let got = read_all(&db).map_err(|e| format!("{where_}: {e}"))?;
        // Acceptable: any state from the last durable one on, or the failed
        // batch applied whole.
        let (states, durable) = (&run.states, run.durable);
        let ok = states[durable..].contains(&got) || run.failed_batch.as_ref() == Some(&got);
        if !ok {
            let want = &states[durable];
            let missing: Vec<_> = want
                .keys()
                .filter(|k| !got.contains_key(*k))
                .take(3)
                .collect();
            let extra: Vec<_> = got
                .keys()
                .filter(|k| !want.contains_key(*k))
                .take(3)
                .collect();
            return Err(format!(
                "{where_}: recovered state matches no acceptable state ({} acked, durable {durable}); \
                 vs durable: missing {missing:?}, extra {extra:?}",
                states.len() - 1
            ));
        }
        let fm = db.file_map().map_err(|e| format!("{where_}: check: {e}"))?;
        if !fm.report.is_ok() {
            return Err(format!("{where_}: check: {:?}", fm.report.problems));
        }
        let holds = |s: String| fm.regions.iter().any(|r| r.structure == s) as u64;
        use pagewise::structure::{self as st, bepsilon_part};
        tally.buffer_segment_rounds +=
            holds(bepsilon_part(st::BEPSILON_INTERNAL, st::BUFFER_SEGMENT));
        tally.basement_segment_rounds +=
            holds(bepsilon_part(st::BEPSILON_LEAF, st::BASEMENT_SEGMENT));
        db.close().map_err(|e| format!("{where_}: close: {e}"))?;
        start = Some((
            img.crash(0, CrashMode::DropUnsynced),
            img.crash(0, CrashMode::DropUnsynced),
            got,
        ));
    }
    Ok(())
}

fn rng_cache(seed: u64, ps: usize) -> usize {
    ps * [8, 32, 1024][(seed / 3 % 3) as usize]
}

fn run(durability: Durability, salt: u64) {
    let n = iters() / 2;
    let base = base_seed();
    let mut failures = Vec::new();
    let mut tally = Tally::default();
    for i in 0..n {
        let seed = base.wrapping_add(i * 2 + salt);
        if let Err(e) = crash_case(seed, durability, &mut tally) {
            eprintln!("crash case FAILED: seed={seed} {durability:?}: {e}");
            failures.push(seed);
        }
    }
    eprintln!(
        "{n} cases, {} simulated crashes ({durability:?}), {} with a B-epsilon tree, {} cases failed; {tally:?}",
        tally.rounds,
        tally.bepsilon_rounds,
        failures.len()
    );
    // The test is only worth something if most crashes cut into real work.
    assert!(
        tally.injected * 10 >= tally.rounds * 7,
        "too few crashes hit I/O: {tally:?}"
    );
    assert!(
        tally.bepsilon_rounds * 2 >= tally.rounds,
        "too few crashes with a B-epsilon tree: {tally:?}"
    );
    assert!(
        tally.write_back_rounds * 8 >= tally.rounds,
        "too few crashes after leaf write-backs: {tally:?}"
    );
    // Segments are at least a page, so only the larger shapes on 512 B
    // and 1 KiB pages store them (10-23 rounds of 1,007 each at the
    // default count); a change must not take them out altogether.
    assert!(
        tally.buffer_segment_rounds > 0 && tally.basement_segment_rounds > 0,
        "no recovered file held segmented buffers and basements: {tally:?}"
    );
    assert!(
        tally.pending > n && tally.torn > 0,
        "too few unsynced writes at the crashes: {tally:?}"
    );
    assert!(
        tally.delta_rounds * 3 >= tally.rounds
            && tally.delta_nodes > 2 * tally.delta_rounds
            && tally.delta_consolidations * 2 > tally.delta_rounds,
        "too little delta-flush work before the crashes: {tally:?}"
    );
    // Recovery must read delta blocks beside their base (one span) and apart.
    assert!(
        tally.delta_apart > 0 && tally.delta_apart * 2 < tally.delta_nodes,
        "too few delta blocks beside or apart from their base: {tally:?}"
    );
    assert!(
        failures.is_empty(),
        "{} of {n} crash cases failed; reproduce one with PAGEWISE_CRASH_SEED={} PAGEWISE_CRASH_ITERS=2",
        failures.len(),
        failures[0] - salt
    );
}

#[test]
fn crashes_sync_mode() {
    run(Durability::Sync, 0);
}

#[test]
fn crashes_buffered_mode() {
    run(Durability::Buffered, 1);
}
