//! Corruption sweep: damage a copy of a small database (data file or log)
//! one byte range at a time — a flipped bit, or 8 to 48 bytes overwritten
//! with zeros, ones or noise — then open it, read every key by scan and by
//! get, `check` it, and write to it. For each case the engine must not panic,
//! must not hang (a watchdog gives each case 30 s), and must not give a wrong
//! answer while `check` calls the file sound: answers are compared with the
//! known contents.
//!
//! The database: three trees, overflow values, several checkpoints, and the
//! last batches only in the log (Sync durability, a large `wal_limit`).
//!
//! Outcomes: `harmless` (the damage hit unused bytes: answers are right),
//! `detected` (open, a read, or `check` reports it), `rollback` (everything
//! reads as an earlier acknowledged state and `check` is clean: acknowledged
//! batches were silently lost), `wrong` (any other answer while `check` is
//! clean), `panic`, `hang`. Rollbacks and wrong answers fail the test unless
//! they are a known, accepted outcome (`known_finding`: damage to the log's
//! last record, which reads like a torn write), which is counted and
//! printed, never silently passed.
//!
//! CI runs a seeded sample (PAGEWISE_CORRUPT_CASES, default 20,000, split
//! between 512 B and 4 KiB pages; PAGEWISE_CORRUPT_SEED, default 1).
//! PAGEWISE_CORRUPT_FULL=1 damages every byte offset of both files (one bit
//! flip each, plus a range overwrite at every 4th offset).
//! PAGEWISE_CORRUPT_PAGE=<bytes> runs one page size only.

use pagewise::{wal_path, Batch, Db, Durability, Options};
use rand::{rngs::SmallRng, Rng, SeedableRng};
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

type State = BTreeMap<(usize, Vec<u8>), Vec<u8>>;
const TREES: [&str; 3] = ["alpha", "beta", "gamma"];
const KEYS: u32 = 300;
const CASE_LIMIT: Duration = Duration::from_secs(30);
/// The data file must reach this size (the issue asks for at least 64 KiB).
const MIN_DATA_BYTES: usize = 64 * 1024;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

struct Template {
    data: Vec<u8>,
    wal: Vec<u8>,
    /// The state after every acknowledged batch; the last is the final one.
    states: Vec<State>,
    /// Index in `states` of the last checkpoint (later batches are log-only).
    checkpointed: usize,
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn opts(ps: usize) -> Options {
    Options::default()
        .page_size(ps)
        .direct_io(false)
        .durability(Durability::Sync)
        .wal_limit(1 << 30)
        .cache_bytes(4 << 20)
}

fn random_batch(rng: &mut SmallRng, ps: usize, n: u64, state: &mut State) -> Batch {
    let mut b = Batch::new();
    for j in 0..rng.gen_range(1..6) {
        let t = rng.gen_range(0..TREES.len());
        let k = key(rng.gen_range(0..KEYS));
        if rng.gen_bool(0.2) {
            b.remove(TREES[t], &k);
            state.remove(&(t, k));
            continue;
        }
        let len = if rng.gen_bool(0.04) {
            rng.gen_range(ps..3 * ps)
        } else {
            rng.gen_range(8..60)
        };
        let tag = format!("b{n}.{j}:");
        let v: Vec<u8> = tag.bytes().cycle().take(len.max(tag.len())).collect();
        b.insert(TREES[t], &k, &v);
        state.insert((t, k), v);
    }
    b
}

/// Builds the database, leaves its last batches only in the log, and
/// returns the bytes of both files with every state they went through.
fn build(dir: &Path, ps: usize) -> Template {
    let path = dir.join("template");
    let db = Db::create(&path, opts(ps)).unwrap();
    let mut rng = SmallRng::seed_from_u64(7);
    let mut state = State::new();
    let mut states = vec![state.clone()];
    let mut checkpointed = 0;
    for n in 1..=5000u64 {
        db.apply(random_batch(&mut rng, ps, n, &mut state)).unwrap();
        states.push(state.clone());
        if n % 20 == 0 {
            db.checkpoint().unwrap();
            checkpointed = states.len() - 1;
            let size = std::fs::metadata(&path).unwrap().len() as usize;
            if size >= MIN_DATA_BYTES && n >= 100 {
                break;
            }
        }
    }
    // The log-only tail, with an overflow value and a remove in it.
    let mut b = Batch::new();
    b.insert(TREES[1], key(1), vec![b'o'; 2 * ps]);
    b.remove(TREES[2], key(2));
    db.apply(b).unwrap();
    state.insert((1, key(1)), vec![b'o'; 2 * ps]);
    state.remove(&(2, key(2)));
    states.push(state.clone());
    for n in 0..12 {
        db.apply(random_batch(&mut rng, ps, 100_000 + n, &mut state))
            .unwrap();
        states.push(state.clone());
    }
    // No close: a close would checkpoint the log away. Sync commits are in the file.
    std::mem::forget(db);
    let data = std::fs::read(&path).unwrap();
    let wal = std::fs::read(wal_path(&path)).unwrap();
    assert!(
        data.len() >= MIN_DATA_BYTES,
        "data file only {} bytes",
        data.len()
    );
    assert!(wal.len() > 13 * 32, "the log holds no records");
    Template {
        data,
        wal,
        states,
        checkpointed,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Data,
    Wal,
}

#[derive(Debug, Clone, Copy)]
enum Damage {
    Flip { bit: u8 },
    Fill { len: usize, byte: u8 },
    Noise { len: usize, seed: u64 },
}

#[derive(Debug, Clone, Copy)]
struct Case {
    target: Target,
    offset: usize,
    damage: Damage,
}

fn damaged(t: &Template, c: &Case) -> (Vec<u8>, Vec<u8>) {
    let (mut data, mut wal) = (t.data.clone(), t.wal.clone());
    let b = if c.target == Target::Data {
        &mut data
    } else {
        &mut wal
    };
    let blen = b.len();
    let end = |len: usize| (c.offset + len).min(blen);
    match c.damage {
        Damage::Flip { bit } => b[c.offset] ^= 1 << bit,
        Damage::Fill { len, byte } => b[c.offset..end(len)].fill(byte),
        Damage::Noise { len, seed } => {
            let e = end(len);
            SmallRng::seed_from_u64(seed).fill(&mut b[c.offset..e]);
        }
    }
    (data, wal)
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Harmless,
    Detected(String),
    /// Reads as state `usize` (an earlier acknowledged state) and check is clean.
    Rollback(usize),
    Wrong(String),
    Panic(String),
    Hang,
}

/// Every entry by scan, then every known key by get (which must agree).
fn read_all(db: &Db, probe: &[(usize, Vec<u8>)]) -> Result<State, String> {
    let mut s = State::new();
    for (t, name) in TREES.iter().enumerate() {
        for kv in db.tree(name).map_err(|e| e.to_string())?.iter() {
            let (k, v) = kv.map_err(|e| format!("scan: {e}"))?;
            s.insert((t, k), v);
        }
    }
    for (t, k) in probe {
        let got = db
            .tree(TREES[*t])
            .unwrap()
            .get(k)
            .map_err(|e| format!("get: {e}"))?;
        if got.as_ref() != s.get(&(*t, k.clone())) {
            return Ok(State::from([(
                (usize::MAX, k.clone()),
                b"get disagrees with scan".to_vec(),
            )]));
        }
    }
    Ok(s)
}

/// Opens, reads, checks and writes the damaged copy in `dir`.
fn run_case(t: &Template, c: &Case, dir: &Path, probe: &[(usize, Vec<u8>)]) -> Outcome {
    let path = dir.join("db");
    let (data, wal) = damaged(t, c);
    std::fs::write(&path, data).unwrap();
    std::fs::write(wal_path(&path), wal).unwrap();
    let db = match Db::open(
        &path,
        Options::default().direct_io(false).wal_limit(1 << 30),
    ) {
        Ok(db) => db,
        Err(e) => return Outcome::Detected(format!("open: {e}")),
    };
    let answers = read_all(&db, probe);
    let sound = match db.check() {
        Ok(r) if r.is_ok() => true,
        Ok(r) => return Outcome::Detected(format!("check: {}", r.problems[0])),
        Err(e) => return Outcome::Detected(format!("check: {e}")),
    };
    assert!(sound);
    let tree = db.tree(TREES[0]).unwrap();
    let wrote = tree.insert(b"zz-after", b"written after the damage");
    if wrote.is_ok()
        && tree.get(b"zz-after").ok().flatten().as_deref() != Some(&b"written after the damage"[..])
    {
        return Outcome::Wrong("a put after reopening does not read back".into());
    }
    let _ = db.close();
    match answers {
        Err(e) => Outcome::Detected(e),
        Ok(s) if s == *t.states.last().unwrap() => Outcome::Harmless,
        Ok(s) => match t.states.iter().rposition(|x| *x == s) {
            Some(i) => Outcome::Rollback(i),
            None => Outcome::Wrong(describe_diff(&s, t.states.last().unwrap())),
        },
    }
}

fn describe_diff(got: &State, want: &State) -> String {
    let extra = got.iter().find(|(k, v)| want.get(*k) != Some(*v));
    let missing = want.keys().find(|k| !got.contains_key(*k));
    format!(
        "{} entries read, {} expected; first unexpected: {:?}; first missing: {:?}",
        got.len(),
        want.len(),
        extra.map(|((t, k), v)| (t, String::from_utf8_lossy(k).to_string(), v.len())),
        missing.map(|(t, k)| (t, String::from_utf8_lossy(k).to_string()))
    )
}

/// Runs one case on its own thread: a panic is caught, a hang times out
/// (the stuck thread is left behind; the sweep goes on).
fn watched(
    t: &Arc<Template>,
    c: Case,
    dir: PathBuf,
    probe: &Arc<Vec<(usize, Vec<u8>)>>,
) -> Outcome {
    let (tx, rx) = mpsc::channel();
    let (t, probe) = (t.clone(), probe.clone());
    std::thread::spawn(move || {
        std::fs::create_dir_all(&dir).unwrap();
        let r = catch_unwind(AssertUnwindSafe(|| run_case(&t, &c, &dir, &probe)));
        let out = r.unwrap_or_else(|p| {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Outcome::Panic(msg)
        });
        let _ = std::fs::remove_dir_all(&dir);
        let _ = tx.send(out);
    });
    rx.recv_timeout(CASE_LIMIT).unwrap_or(Outcome::Hang)
}

/// A known, accepted outcome (docs/reliability.md), counted and printed,
/// never silently passed.
fn known_finding(c: &Case, o: &Outcome, t: &Template) -> Option<&'static str> {
    let last = t.states.len() - 1;
    match (o, c.damage) {
        // Tail: damage to the log's last record reads like a write torn by a
        // crash, since no later record proves it durable: that batch is
        // dropped. A range can also reach back into the record before it
        // (records are longer than the 48-byte ranges), dropping two.
        (Outcome::Rollback(i), Damage::Flip { .. })
            if c.target == Target::Wal && *i + 1 == last =>
        {
            Some("tail")
        }
        (Outcome::Rollback(i), Damage::Fill { .. } | Damage::Noise { .. })
            if c.target == Target::Wal && *i + 2 >= last =>
        {
            Some("tail")
        }
        _ => None,
    }
}

fn cases(t: &Template, full: bool, n: u64, seed: u64) -> Vec<Case> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let damage = |rng: &mut SmallRng| match rng.gen_range(0..4) {
        0 | 1 => Damage::Flip {
            bit: rng.gen_range(0..8),
        },
        2 => Damage::Fill {
            len: rng.gen_range(8..=48),
            byte: [0, 0xff][rng.gen_range(0..2)],
        },
        _ => Damage::Noise {
            len: rng.gen_range(8..=48),
            seed: rng.gen(),
        },
    };
    let mut out = Vec::new();
    if full {
        for (target, len) in [(Target::Data, t.data.len()), (Target::Wal, t.wal.len())] {
            for offset in 0..len {
                out.push(Case {
                    target,
                    offset,
                    damage: Damage::Flip {
                        bit: (offset * 5 % 8) as u8,
                    },
                });
                if offset % 4 == 0 {
                    out.push(Case {
                        target,
                        offset,
                        damage: damage(&mut rng),
                    });
                }
            }
        }
        return out;
    }
    // The log is much smaller than the data file but holds the newest
    // writes: give it a third of the sample.
    for i in 0..n {
        let (target, len) = if i % 3 == 2 {
            (Target::Wal, t.wal.len())
        } else {
            (Target::Data, t.data.len())
        };
        out.push(Case {
            target,
            offset: rng.gen_range(0..len),
            damage: damage(&mut rng),
        });
    }
    out
}

#[derive(Default)]
struct Tally {
    harmless: u64,
    detected: u64,
    known: BTreeMap<&'static str, u64>,
    failures: Vec<(Case, Outcome)>,
}

impl Tally {
    fn merge(&mut self, x: Tally) {
        self.harmless += x.harmless;
        self.detected += x.detected;
        for (k, v) in x.known {
            *self.known.entry(k).or_default() += v;
        }
        self.failures.extend(x.failures);
    }
}

/// Runs every `lanes`-th case from `lane` on, one at a time, each watched.
/// Stops early after a few hangs (each leaves a stuck thread behind).
fn run_lane(
    t: &Arc<Template>,
    probe: &Arc<Vec<(usize, Vec<u8>)>>,
    cs: &[Case],
    lane: usize,
    lanes: usize,
    root: &Path,
    seed: u64,
) -> Tally {
    let mut tally = Tally::default();
    let mut hangs = 0;
    for (i, c) in cs.iter().enumerate().skip(lane).step_by(lanes) {
        let o = watched(t, *c, root.join(format!("case{i}")), probe);
        match &o {
            Outcome::Harmless => tally.harmless += 1,
            Outcome::Detected(_) => tally.detected += 1,
            _ => match known_finding(c, &o, t) {
                Some(f) => {
                    if std::env::var("PAGEWISE_CORRUPT_SHOW").is_ok() {
                        println!("known {f}: {c:?}: {o:?}");
                    }
                    *tally.known.entry(f).or_default() += 1
                }
                None => {
                    println!("FAILURE (seed {seed}): {c:?}: {o:?}");
                    tally.failures.push((*c, o.clone()));
                }
            },
        }
        hangs += matches!(o, Outcome::Hang) as u32;
        if hangs >= 3 {
            println!("stopping lane {lane} after {hangs} hangs");
            break;
        }
    }
    tally
}

#[test]
fn corruption_sweep_never_panics_hangs_or_lies() {
    let full = std::env::var("PAGEWISE_CORRUPT_FULL").is_ok_and(|v| v == "1");
    let seed = env_u64("PAGEWISE_CORRUPT_SEED", 1);
    let n = env_u64("PAGEWISE_CORRUPT_CASES", 20_000);
    let pages: Vec<usize> = match std::env::var("PAGEWISE_CORRUPT_PAGE") {
        Ok(p) => vec![p
            .parse()
            .expect("PAGEWISE_CORRUPT_PAGE is a page size in bytes")],
        Err(_) => vec![512, 4096],
    };
    for &ps in &pages {
        sweep(ps, full, seed, n / pages.len() as u64);
    }
}

fn sweep(ps: usize, full: bool, seed: u64, n: u64) {
    let shm = Path::new("/dev/shm");
    let root = if shm.is_dir() {
        tempfile::tempdir_in(shm)
    } else {
        tempfile::tempdir()
    }
    .unwrap();
    let t = Arc::new(build(root.path(), ps));
    let cs = cases(&t, full, n, seed);
    println!(
        "corruption sweep: seed {seed}, page {ps} B, data {} B, log {} B, {} batches ({} log-only), {} cases ({})",
        t.data.len(),
        t.wal.len(),
        t.states.len() - 1,
        t.states.len() - 1 - t.checkpointed,
        cs.len(),
        if full { "full" } else { "sample" }
    );
    let probe: Arc<Vec<(usize, Vec<u8>)>> = Arc::new(
        (0..TREES.len())
            .flat_map(|t| (0..KEYS + 5).map(move |i| (t, key(i))))
            .collect(),
    );
    let t0 = Instant::now();
    let lanes = 2;
    let mut all = Tally::default();
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..lanes)
            .map(|lane| {
                let (t, probe, cs, root) = (&t, &probe, &cs, root.path());
                s.spawn(move || run_lane(t, probe, cs, lane, lanes, root, seed))
            })
            .collect();
        hs.into_iter().for_each(|h| all.merge(h.join().unwrap()));
    });
    println!(
        "corruption sweep: {} cases in {:.1} s: {} harmless, {} detected, known outcomes {:?}, {} failures",
        cs.len(), t0.elapsed().as_secs_f64(), all.harmless, all.detected, all.known, all.failures.len()
    );
    for (f, count) in &all.known {
        println!(
            "note: {count} case(s) of known outcome {f:?} (docs/reliability.md), not failures"
        );
    }
    assert!(
        all.failures.is_empty(),
        "seed {seed}: {} failures, first {:?}",
        all.failures.len(),
        all.failures[0]
    );
}

/// Finding F1 (found by the sweep on a75f9f4, fixed in a6b66bd), minimal:
/// three commits, each its own log record; the first record is damaged.
/// Records 2 and 3 are intact and were acknowledged: recovery must not drop
/// them silently (an error, or the intact records).
#[test]
fn f1_damaged_log_record_must_not_drop_later_records_silently() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("db");
    let db = Db::create(&path, opts(4096)).unwrap();
    let t = db.tree("t").unwrap();
    for k in [b"k1", b"k2", b"k3"] {
        t.insert(k, b"value").unwrap();
    }
    // No close (it would checkpoint); the copy has its own lock file.
    std::mem::forget((t, db));
    let copy = d.path().join("copy");
    let mut wal = std::fs::read(wal_path(&path)).unwrap();
    wal[40] ^= 1; // inside the first record's payload
    std::fs::write(wal_path(&copy), wal).unwrap();
    std::fs::copy(&path, &copy).unwrap();
    let path = copy;
    let db = match Db::open(&path, opts(4096)) {
        Ok(db) => db,
        Err(e) => return println!("open: {e}"),
    };
    let t = db.tree("t").unwrap();
    assert_eq!(
        t.get(b"k3").unwrap().as_deref(),
        Some(&b"value"[..]),
        "acknowledged k2, k3 silently dropped"
    );
}

/// Finding F2 (found by the sweep on a75f9f4, fixed in f4d24e4), minimal:
/// k1, checkpoint, k2, checkpoint, k3 (its log record overwrites k2's at
/// the start of the log), then a bit flipped in the newest superblock.
/// Falling back to the older superblock would serve the first checkpoint
/// (k2 and k3 gone, `check` clean); open must report the damage instead.
#[test]
fn f2_damaged_newest_superblock_must_not_roll_back_silently() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("db");
    let db = Db::create(&path, opts(4096)).unwrap();
    let t = db.tree("t").unwrap();
    t.insert(b"k1", b"v").unwrap();
    db.checkpoint().unwrap();
    t.insert(b"k2", b"v").unwrap();
    db.checkpoint().unwrap();
    t.insert(b"k3", b"v").unwrap();
    std::mem::forget((t, db));
    let (data, wal) = (
        std::fs::read(&path).unwrap(),
        std::fs::read(wal_path(&path)).unwrap(),
    );
    for slot in 0..2 {
        let copy = d.path().join(format!("copy{slot}"));
        let mut damaged = data.clone();
        damaged[slot * 4096 + 700] ^= 1;
        std::fs::write(&copy, &damaged).unwrap();
        std::fs::write(wal_path(&copy), &wal).unwrap();
        let db = match Db::open(&copy, opts(4096)) {
            Ok(db) => db,
            Err(e) => {
                println!("slot {slot}: open: {e}");
                continue;
            }
        };
        let t = db.tree("t").unwrap();
        let (k2, k3) = (t.get(b"k2").unwrap(), t.get(b"k3").unwrap());
        let sound = db.check().unwrap().is_ok();
        println!("slot {slot}: check clean {sound}, k2 {k2:?}, k3 {k3:?}");
        assert!(
            !sound || (k2.is_some() && k3.is_some()),
            "slot {slot} damaged: acknowledged k2/k3 are gone and check is clean"
        );
    }
}
