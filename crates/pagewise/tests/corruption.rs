//! Corruption sweep: damage a copy of a small database (data file or log)
//! one byte range at a time — a flipped bit, or 8 to 48 bytes overwritten
//! with zeros, ones or noise — then open it, read every key by scan and by
//! get, `check` it, and write to it. For each case the engine must not panic,
//! must not hang (a watchdog gives each case 30 s), and must not give a wrong
//! answer while `check` calls the file sound: answers are compared with the
//! known contents.
//!
//! Three template databases (`Shape`), each with three trees, several
//! checkpoints, and the last batches only in the log (Sync durability, a
//! large `wal_limit`):
//! * `btree`: B+trees with overflow values;
//! * `bepsilon`: B-epsilon trees small enough that internal nodes, buffers
//!   stored as segments, leaves with basement segments, upserts (a merge
//!   operator) and leaf write-backs between checkpoints all occur;
//! * `delta`: B+trees with `Options::delta_flush`, so delta blocks, their
//!   base pages and consolidations occur;
//! * `first`: B+trees after their first checkpoint plus a large value
//!   written and removed, so the file ends in one long free run and the
//!   catalog stores its free list as extents (the others, with free pages
//!   scattered over small files, store it as a bitmap).
//!
//! Each damaged offset is mapped to the structure it hits (`Db::file_map`
//! on the undamaged template; the log's records are walked here), and the
//! outcomes are tallied per structure. Every detection's message (open, a
//! read, `check`) must name the kind of structure it is about (B+tree
//! leaf, B-epsilon leaf extent, catalog, superblock, log record, ...).
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
//! between the shapes and 512 B and 4 KiB pages; PAGEWISE_CORRUPT_SEED,
//! default 1). PAGEWISE_CORRUPT_FULL=1 damages every byte offset of both
//! files (one bit flip each, plus a range overwrite at every 4th offset);
//! PAGEWISE_CORRUPT_FULL=used does so except on free pages and the log
//! past its records, where it takes every 64th offset.
//! PAGEWISE_CORRUPT_PAGE=<bytes> runs one page size only,
//! PAGEWISE_CORRUPT_SHAPE=btree|bepsilon|delta|first one template only
//! (`first` runs at 512 B pages unless a page size is given).
//! PAGEWISE_CORRUPT_MESSAGES=1 prints every detection's message.

use pagewise::{
    wal_path, BEpsilonOptions, Batch, Compression, Db, DeltaFlush, Durability, MergeOperator,
    Options, TreeKind,
};
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

/// The kind of template database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    BTree,
    BEpsilon,
    Delta,
    /// B+trees after their first checkpoint: nothing freed yet, so the
    /// catalog stores its free list as extents (a file with free pages
    /// scattered over fewer than 128 pages per extent stores a bitmap).
    First,
}

impl Shape {
    const ALL: [Shape; 4] = [Shape::BTree, Shape::BEpsilon, Shape::Delta, Shape::First];

    fn name(self) -> &'static str {
        match self {
            Shape::BTree => "btree",
            Shape::BEpsilon => "bepsilon",
            Shape::Delta => "delta",
            Shape::First => "first",
        }
    }

    /// The free list form the template's catalog must have (asserted, so a
    /// change cannot silently drop the other form's coverage).
    fn free_form(self) -> &'static str {
        match self {
            Shape::First => "extents",
            Shape::BTree | Shape::BEpsilon | Shape::Delta => "bitmap",
        }
    }

    /// The kind of tree `t` (B-epsilon shapes small enough that nodes split,
    /// buffers and basements are cut into segments at `ps`-byte pages).
    fn kind(self, t: usize, ps: u32) -> TreeKind {
        if self != Shape::BEpsilon {
            return TreeKind::default();
        }
        let o = BEpsilonOptions::default().fanout(4);
        TreeKind::BEpsilon(match t {
            // Basements of up to 4 pages, cut into page-sized segments;
            // every value in the tree (as before value extents): its large
            // values fill leaves, which are written back early.
            0 => o
                .node_bytes(8 * ps)
                .basement_bytes(4 * ps)
                .value_extent_bytes(None),
            // Tiny basements; nodes of 8 pages, whose buffers of two pages
            // and more are segmented (a segment is at least a page); every
            // value in the tree.
            1 => o
                .node_bytes(8 * ps)
                .basement_bytes(128)
                .value_extent_bytes(None),
            // Leaves smaller than the internal nodes, stored uncompressed;
            // values of 64 bytes and more in value extents.
            _ => o
                .node_bytes(1024)
                .leaf_bytes(384)
                .basement_bytes(128)
                .compression(Compression::None)
                .value_extent_bytes(Some(64)),
        })
    }

    /// Batches before the template may stop growing: enough at `ps`-byte
    /// pages for B+trees with branches, whose leaves (not roots) get
    /// delta blocks.
    fn min_batches(self, ps: usize) -> u64 {
        match self {
            Shape::Delta if ps > 512 => 600,
            _ => 100,
        }
    }

    /// Structures the template must hold at `ps`-byte pages (asserted, so a
    /// change to the engine or the workload cannot silently drop the
    /// sweep's coverage). A buffer is cut into segments of at least a page
    /// once it holds two pages: at 4 KiB pages the template's buffers stay
    /// under that, and the 512-byte template covers buffer segments.
    fn required(self, ps: usize) -> Vec<String> {
        use pagewise::structure::{self as st, bepsilon_part};
        let (leaf, internal) = (st::BEPSILON_LEAF, st::BEPSILON_INTERNAL);
        let buffer_segments = [
            bepsilon_part(internal, st::SEGMENT_LIST),
            bepsilon_part(internal, st::BUFFER_SEGMENT),
        ];
        let all: Vec<String> = match self {
            Shape::BTree => vec![
                st::btree_page(st::BTREE_LEAF),
                st::BTREE_OVERFLOW.to_string(),
            ],
            Shape::BEpsilon => [
                st::HEADER,
                st::DIRECTORY,
                st::PIVOTS,
                st::FILTERS,
                st::SEGMENT_LIST,
                st::BUFFER,
                st::BUFFER_SEGMENT,
            ]
            .iter()
            .map(|part| bepsilon_part(internal, part))
            .chain([st::BASEMENT, st::BASEMENT_SEGMENT].map(|part| bepsilon_part(leaf, part)))
            .collect(),
            Shape::Delta => vec![
                st::btree_delta_block(st::BTREE_LEAF),
                st::btree_delta_base(st::BTREE_LEAF),
            ],
            Shape::First => vec![st::btree_page(st::BTREE_LEAF), st::FREE_PAGE.to_string()],
        };
        let kept = |s: &String| ps <= 512 || !buffer_segments.contains(s);
        all.into_iter().filter(kept).collect()
    }
}

/// Upserts append their operand to the value.
struct Append;

impl MergeOperator for Append {
    fn name(&self) -> &str {
        "append"
    }
    fn full_merge(&self, _key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Vec<u8> {
        let mut v = existing.unwrap_or_default().to_vec();
        operands.iter().for_each(|o| v.extend_from_slice(o));
        v
    }
}

struct Template {
    shape: Shape,
    ps: usize,
    data: Vec<u8>,
    wal: Vec<u8>,
    /// The state after every acknowledged batch; the last is the final one.
    states: Vec<State>,
    /// Index in `states` of the last checkpoint (later batches are log-only).
    checkpointed: usize,
    /// The structure each byte of the data file and of the log belongs to.
    data_map: ByteMap,
    wal_map: ByteMap,
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// Options the template is written and reopened with.
fn opts(ps: usize, shape: Shape) -> Options {
    let o = Options::default()
        .page_size(ps)
        .direct_io(false)
        .durability(Durability::Sync)
        .wal_limit(1 << 30)
        .merge_operator(Arc::new(Append));
    match shape {
        Shape::BTree | Shape::First => o.cache_bytes(4 << 20),
        // A small cache: the dirty budget fills between checkpoints, so
        // dirty leaves are written back.
        Shape::BEpsilon => o.cache_bytes((32 << 10).max(16 * ps)),
        Shape::Delta => o.cache_bytes(4 << 20).delta_flush(Some(DeltaFlush {
            threshold_bytes: ps / 2,
            block_bytes: 512,
        })),
    }
}

fn random_batch(rng: &mut SmallRng, ps: usize, n: u64, t: &mut (Shape, State)) -> Batch {
    let (shape, state) = (t.0, &mut t.1);
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
        if shape == Shape::BEpsilon && rng.gen_bool(0.2) {
            b.upsert(TREES[t], &k, tag.as_bytes());
            state
                .entry((t, k))
                .or_default()
                .extend_from_slice(tag.as_bytes());
            continue;
        }
        let v: Vec<u8> = tag.bytes().cycle().take(len.max(tag.len())).collect();
        b.insert(TREES[t], &k, &v);
        state.insert((t, k), v);
    }
    b
}

/// The acknowledged states while a template is written.
struct History {
    /// The template's shape and its current contents.
    now: (Shape, State),
    /// The state after every acknowledged batch.
    states: Vec<State>,
    /// Index in `states` of the last checkpoint.
    checkpointed: usize,
}

impl History {
    fn push(&mut self) {
        self.states.push(self.now.1.clone());
    }
}

/// Builds the database, leaves its last batches only in the log, and
/// returns the bytes of both files with every state they went through.
fn build(dir: &Path, ps: usize, shape: Shape) -> Template {
    let path = dir.join("template");
    let db = Db::create(&path, opts(ps, shape)).unwrap();
    for (t, name) in TREES.iter().enumerate() {
        db.tree_with(name, shape.kind(t, ps as u32)).unwrap();
    }
    let mut rng = SmallRng::seed_from_u64(7);
    let mut h = History {
        now: (shape, State::new()),
        states: vec![State::new()],
        checkpointed: 0,
    };
    checkpointed_batches(&db, &path, ps, &mut rng, &mut h);
    let late_write_backs = log_only_batches(&db, ps, &mut rng, &mut h);
    let stats = db.stats();
    println!(
        "template {} at {ps} B pages: {} checkpoints, {} leaf write-backs ({late_write_backs} after the last checkpoint), {} delta consolidations",
        shape.name(),
        stats.checkpoints,
        stats.write_backs,
        stats.delta_consolidations
    );
    if shape == Shape::BEpsilon {
        assert!(stats.write_backs > 0, "no leaf write-back in the template");
    }
    if shape == Shape::Delta {
        assert!(
            stats.delta_consolidations > 0,
            "no consolidation in the template"
        );
    }
    // No close: a close would checkpoint the log away. Sync commits are in the file.
    std::mem::forget(db);
    let data = std::fs::read(&path).unwrap();
    let wal = std::fs::read(wal_path(&path)).unwrap();
    assert!(
        data.len() >= MIN_DATA_BYTES || shape == Shape::First,
        "data file only {} bytes",
        data.len()
    );
    assert!(wal.len() > 13 * 32, "the log holds no records");
    Template {
        shape,
        ps,
        data_map: map_data(dir, &data, shape),
        wal_map: map_wal(&wal),
        data,
        wal,
        states: h.states,
        checkpointed: h.checkpointed,
    }
}

/// Random batches with a checkpoint every 20, until the file is large
/// enough (`first`: until the first checkpoint, then [`free_at_end`]).
fn checkpointed_batches(db: &Db, path: &Path, ps: usize, rng: &mut SmallRng, h: &mut History) {
    let shape = h.now.0;
    for n in 1..=5000u64 {
        db.apply(random_batch(rng, ps, n, &mut h.now)).unwrap();
        h.push();
        if n % 20 != 0 {
            continue;
        }
        db.checkpoint().unwrap();
        h.checkpointed = h.states.len() - 1;
        if shape == Shape::First {
            free_at_end(db, ps, &mut h.now.1, &mut h.states);
            h.checkpointed = h.states.len() - 1;
            return;
        }
        let size = std::fs::metadata(path).unwrap().len() as usize;
        if size >= MIN_DATA_BYTES && n >= shape.min_batches(ps) {
            return;
        }
    }
}

/// The log-only tail: a batch with an overflow value and a remove, then at
/// least 12 more; a small cache's dirty budget may checkpoint on its own,
/// so it goes on until 12 batches follow the last checkpoint. Returns the
/// leaf write-backs after the last checkpoint.
fn log_only_batches(db: &Db, ps: usize, rng: &mut SmallRng, h: &mut History) -> u64 {
    let mut b = Batch::new();
    b.insert(TREES[1], key(1), vec![b'o'; 2 * ps]);
    b.remove(TREES[2], key(2));
    db.apply(b).unwrap();
    h.now.1.insert((1, key(1)), vec![b'o'; 2 * ps]);
    h.now.1.remove(&(2, key(2)));
    h.push();
    let before = db.stats();
    let (mut checkpoints, mut write_backs) = (before.checkpoints, before.write_backs);
    let mut log_only = 1;
    for n in 0..400 {
        db.apply(random_batch(rng, ps, 100_000 + n, &mut h.now))
            .unwrap();
        h.push();
        log_only += 1;
        let now = db.stats();
        if now.checkpoints != checkpoints {
            (checkpoints, log_only) = (now.checkpoints, 0);
            (h.checkpointed, write_backs) = (h.states.len() - 1, now.write_backs);
        }
        if log_only > 12 {
            break;
        }
    }
    db.stats().write_backs - write_backs
}

/// Pages of the value [`free_at_end`] writes and removes: a free extent this
/// long at the end of the file makes the bitmap longer than a few extents.
const FREED_VALUE_PAGES: usize = 384;

/// Writes a large value at the end of the file and removes it, each with a
/// checkpoint: the file ends in one long free extent, and the few pages the
/// removal frees besides it keep the free list short, so the catalog stores
/// it as extents.
fn free_at_end(db: &Db, ps: usize, state: &mut State, states: &mut Vec<State>) {
    let big = vec![b'z'; FREED_VALUE_PAGES * ps];
    db.tree(TREES[0])
        .unwrap()
        .insert(key(KEYS + 1), &big)
        .unwrap();
    state.insert((0, key(KEYS + 1)), big);
    states.push(state.clone());
    db.checkpoint().unwrap();
    db.tree(TREES[0]).unwrap().remove(key(KEYS + 1)).unwrap();
    state.remove(&(0, key(KEYS + 1)));
    states.push(state.clone());
    db.checkpoint().unwrap();
}

/// Structure names by byte: `at[i]` indexes `names`.
struct ByteMap {
    names: Vec<String>,
    at: Vec<u16>,
}

impl ByteMap {
    fn new(len: usize, fill: &str) -> Self {
        Self {
            names: vec![fill.to_string()],
            at: vec![0; len],
        }
    }

    fn paint(&mut self, start: usize, len: usize, name: &str) {
        let id = match self.names.iter().position(|n| n == name) {
            Some(i) => i,
            None => {
                self.names.push(name.to_string());
                self.names.len() - 1
            }
        };
        let end = (start + len).min(self.at.len());
        self.at[start.min(end)..end].fill(id as u16);
    }

    fn name(&self, offset: usize) -> &str {
        &self.names[self.at[offset] as usize]
    }

    /// Bytes per structure.
    fn bytes(&self) -> BTreeMap<&str, usize> {
        let mut out = BTreeMap::new();
        for &id in &self.at {
            *out.entry(self.names[id as usize].as_str()).or_default() += 1;
        }
        out
    }
}

/// Maps the data file as its last checkpoint left it: a copy with an empty
/// log, opened read-only (nothing replayed, nothing written), walked by
/// `Db::file_map`. Asserts the catalog's free list form and that the
/// template is sound.
fn map_data(dir: &Path, data: &[u8], shape: Shape) -> ByteMap {
    let path = dir.join("mapped");
    std::fs::write(&path, data).unwrap();
    std::fs::write(wal_path(&path), vec![0u8; 4096]).unwrap();
    let ps = u32::from_le_bytes(data[44..48].try_into().unwrap()) as usize;
    let db = Db::open(&path, opts(ps, shape).read_only(true)).unwrap();
    let fm = db.file_map().unwrap();
    assert!(fm.report.is_ok(), "template: {:?}", fm.report.problems);
    let free = fm
        .regions
        .iter()
        .filter(|r| r.structure == pagewise::structure::FREE_PAGE);
    println!(
        "template {}: {} pages, {} free in {} extents, catalog free list as {:?}",
        shape.name(),
        data.len() / ps,
        fm.report.free_pages,
        free.count(),
        fm.free_form
    );
    assert_eq!(
        fm.free_form,
        Some(shape.free_form()),
        "the {} template's catalog stores its free list in another form: \
         the sweep would not cover the {} form",
        shape.name(),
        shape.free_form()
    );
    let mut m = ByteMap::new(data.len(), "beyond the page count");
    for r in &fm.regions {
        m.paint(r.start_bytes as usize, r.len_bytes as usize, &r.structure);
    }
    let bytes = m.bytes();
    println!("template {}: bytes by structure {bytes:?}", shape.name());
    for s in shape.required(ps) {
        assert!(
            bytes.contains_key(s.as_str()),
            "the {} template holds no {s}",
            shape.name()
        );
    }
    drop(db);
    std::fs::remove_file(&path).unwrap();
    m
}

/// Maps the log: the run of records from offset 0 (magic `PWL2`, 40-byte
/// headers, the payload length at 24, one epoch; docs/design.md,
/// "Write-ahead log"), then what an older run left.
fn map_wal(wal: &[u8]) -> ByteMap {
    const HEADER_BYTES: usize = 40;
    let field = |at: usize, n: usize| wal.get(at..at + n).map(|b| b.to_vec());
    let mut m = ByteMap::new(wal.len(), LOG_TAIL);
    let (mut at, epoch) = (0, field(8, 8));
    while at + HEADER_BYTES <= wal.len()
        && field(at, 4).as_deref() == Some(b"PWL2")
        && field(at + 8, 8) == epoch
    {
        let len = u32::from_le_bytes(wal[at + 24..at + 28].try_into().unwrap()) as usize;
        m.paint(at, HEADER_BYTES, "log record header");
        m.paint(at + HEADER_BYTES, len, "log record payload");
        at += HEADER_BYTES + len;
    }
    assert!(at > 13 * HEADER_BYTES, "the log's records were not found");
    m
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
    let db = match Db::open(&path, opts(t.ps, t.shape)) {
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

/// Which offsets a sweep damages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Coverage {
    /// `n` seeded random offsets.
    Sample,
    /// Every byte of both files.
    Every,
    /// Every byte of both files except unused ones (free pages, the log
    /// past its records), of which every 64th.
    Used,
}

fn cases(t: &Template, cover: Coverage, n: u64, seed: u64) -> Vec<Case> {
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
    if cover != Coverage::Sample {
        for (target, map) in [(Target::Data, &t.data_map), (Target::Wal, &t.wal_map)] {
            for offset in 0..map.at.len() {
                if cover == Coverage::Used && offset % 64 != 0 && UNUSED.contains(&map.name(offset))
                {
                    continue;
                }
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
        let (target, map) = if i % 3 == 2 {
            (Target::Wal, &t.wal_map)
        } else {
            (Target::Data, &t.data_map)
        };
        out.push(Case {
            target,
            offset: sample_offset(&mut rng, map),
            damage: damage(&mut rng),
        });
    }
    out
}

/// What this test calls the log's bytes after its last record.
const LOG_TAIL: &str = "log past the last record";

/// Structures nothing reads.
const UNUSED: [&str; 2] = [pagewise::structure::FREE_PAGE, LOG_TAIL];

/// A random offset of the file `map` describes; 49 in 50 that land on
/// bytes nothing reads (free pages, the log past its records) are drawn
/// again, so a file with a long free run is still sampled where it is used.
fn sample_offset(rng: &mut SmallRng, map: &ByteMap) -> usize {
    let mut offset = rng.gen_range(0..map.at.len());
    for _ in 0..32 {
        if !UNUSED.contains(&map.name(offset)) || !rng.gen_bool(0.98) {
            break;
        }
        offset = rng.gen_range(0..map.at.len());
    }
    offset
}

/// Outcome counts of the cases that hit one structure.
#[derive(Default, Clone)]
struct Counts {
    harmless: u64,
    detected: u64,
    known: u64,
    failed: u64,
}

#[derive(Default)]
struct Tally {
    harmless: u64,
    detected: u64,
    known: BTreeMap<&'static str, u64>,
    failures: Vec<(Case, Outcome)>,
    /// By structure hit (`file: structure`).
    by_structure: BTreeMap<String, Counts>,
    /// Detection messages (open, reads, `check`) that name no structure.
    unnamed: Vec<String>,
}

impl Tally {
    fn merge(&mut self, x: Tally) {
        self.harmless += x.harmless;
        self.detected += x.detected;
        for (k, v) in x.known {
            *self.known.entry(k).or_default() += v;
        }
        self.failures.extend(x.failures);
        for (k, v) in x.by_structure {
            let c = self.by_structure.entry(k).or_default();
            c.harmless += v.harmless;
            c.detected += v.detected;
            c.known += v.known;
            c.failed += v.failed;
        }
        self.unnamed.extend(x.unnamed);
    }

    /// Counts outcome `o` of case `c` (on template `t`).
    fn add(&mut self, t: &Template, c: &Case, o: &Outcome, seed: u64) {
        let hit = match c.target {
            Target::Data => format!("data: {}", t.data_map.name(c.offset)),
            Target::Wal => format!("log: {}", t.wal_map.name(c.offset)),
        };
        let counts = self.by_structure.entry(hit).or_default();
        match o {
            Outcome::Harmless => {
                self.harmless += 1;
                counts.harmless += 1;
            }
            Outcome::Detected(msg) => {
                self.detected += 1;
                counts.detected += 1;
                if std::env::var("PAGEWISE_CORRUPT_MESSAGES").is_ok() {
                    println!("message: {msg}");
                }
                if !names_structure(msg) {
                    self.unnamed.push(format!("{c:?}: {msg}"));
                }
            }
            _ => match known_finding(c, o, t) {
                Some(f) => {
                    if std::env::var("PAGEWISE_CORRUPT_SHOW").is_ok() {
                        println!("known {f}: {c:?}: {o:?}");
                    }
                    *self.known.entry(f).or_default() += 1;
                    counts.known += 1;
                }
                None => {
                    println!("FAILURE (seed {seed}): {c:?}: {o:?}");
                    self.failures.push((*c, o.clone()));
                    counts.failed += 1;
                }
            },
        }
    }
}

/// Whether a problem names the kind of structure it is about.
fn names_structure(msg: &str) -> bool {
    const KINDS: [&str; 7] = [
        "log record",
        "superblock",
        "catalog",
        "B+tree",
        "B-epsilon",
        "overflow",
        "free list",
    ];
    KINDS.iter().any(|k| msg.contains(k))
}

/// Runs every `lanes`-th case from `lane` on, one at a time, each watched.
/// Stops early after a few hangs (each leaves a stuck thread behind).
fn run_lane(
    t: &Arc<Template>,
    probe: &Arc<Vec<(usize, Vec<u8>)>>,
    cs: &[Case],
    (lane, lanes): (usize, usize),
    root: &Path,
    seed: u64,
) -> Tally {
    let mut tally = Tally::default();
    let mut hangs = 0;
    for (i, c) in cs.iter().enumerate().skip(lane).step_by(lanes) {
        let o = watched(t, *c, root.join(format!("case{i}")), probe);
        tally.add(t, c, &o, seed);
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
    let cover = match std::env::var("PAGEWISE_CORRUPT_FULL").as_deref() {
        Ok("1") => Coverage::Every,
        Ok("used") => Coverage::Used,
        _ => Coverage::Sample,
    };
    let seed = env_u64("PAGEWISE_CORRUPT_SEED", 1);
    let n = env_u64("PAGEWISE_CORRUPT_CASES", 20_000);
    let pages: Vec<usize> = match std::env::var("PAGEWISE_CORRUPT_PAGE") {
        Ok(p) => vec![p
            .parse()
            .expect("PAGEWISE_CORRUPT_PAGE is a page size in bytes")],
        Err(_) => vec![512, 4096],
    };
    let shapes: Vec<Shape> = match std::env::var("PAGEWISE_CORRUPT_SHAPE") {
        Ok(s) => vec![*Shape::ALL
            .iter()
            .find(|x| x.name() == s)
            .expect("PAGEWISE_CORRUPT_SHAPE is btree, bepsilon or delta")],
        Err(_) => Shape::ALL.to_vec(),
    };
    // The first-checkpoint file's free run is FREED_VALUE_PAGES pages
    // whatever the page size: 512 B pages keep it small.
    let runs: Vec<(Shape, usize)> = shapes
        .iter()
        .flat_map(|&s| pages.iter().map(move |&p| (s, p)))
        .filter(|&(s, p)| s != Shape::First || p == 512 || pages.len() == 1)
        .collect();
    for &(shape, ps) in &runs {
        sweep(ps, shape, cover, seed, n / runs.len() as u64);
    }
}

fn sweep(ps: usize, shape: Shape, cover: Coverage, seed: u64, n: u64) {
    let shm = Path::new("/dev/shm");
    let root = if shm.is_dir() {
        tempfile::tempdir_in(shm)
    } else {
        tempfile::tempdir()
    }
    .unwrap();
    let t = Arc::new(build(root.path(), ps, shape));
    let cs = cases(&t, cover, n, seed);
    println!(
        "corruption sweep: {} file, seed {seed}, page {ps} B, data {} B, log {} B, {} batches ({} log-only), {} cases ({:?})",
        shape.name(),
        t.data.len(),
        t.wal.len(),
        t.states.len() - 1,
        t.states.len() - 1 - t.checkpointed,
        cs.len(),
        cover
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
                s.spawn(move || run_lane(t, probe, cs, (lane, lanes), root, seed))
            })
            .collect();
        hs.into_iter().for_each(|h| all.merge(h.join().unwrap()));
    });
    report(&all, &t, cs.len(), t0.elapsed());
    assert!(
        all.failures.is_empty(),
        "seed {seed}: {} failures, first {:?}",
        all.failures.len(),
        all.failures[0]
    );
    assert!(
        all.unnamed.is_empty(),
        "seed {seed}: {} detection message(s) name no structure, first {}",
        all.unnamed.len(),
        all.unnamed[0]
    );
}

/// Prints the tally: totals, then one line per structure hit.
fn report(all: &Tally, t: &Template, cases: usize, took: Duration) {
    println!(
        "corruption sweep: {} file: {cases} cases in {:.1} s: {} harmless, {} detected, known outcomes {:?}, {} failures",
        t.shape.name(), took.as_secs_f64(), all.harmless, all.detected, all.known, all.failures.len()
    );
    println!("  structure hit | cases | harmless | detected | known | failed");
    for (k, c) in &all.by_structure {
        let n = c.harmless + c.detected + c.known + c.failed;
        println!(
            "  {k} | {n} | {} | {} | {} | {}",
            c.harmless, c.detected, c.known, c.failed
        );
    }
    for u in all.unnamed.iter().take(20) {
        println!("names no structure: {u}");
    }
    for (f, count) in &all.known {
        println!(
            "note: {count} case(s) of known outcome {f:?} (docs/reliability.md), not failures"
        );
    }
}

/// Finding F1 (found by the sweep on a75f9f4, fixed in a6b66bd), minimal:
/// three commits, each its own log record; the first record is damaged.
/// Records 2 and 3 are intact and were acknowledged: recovery must not drop
/// them silently (an error, or the intact records).
#[test]
fn f1_damaged_log_record_must_not_drop_later_records_silently() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("db");
    let db = Db::create(&path, opts(4096, Shape::BTree)).unwrap();
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
    let db = match Db::open(&path, opts(4096, Shape::BTree)) {
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
    let db = Db::create(&path, opts(4096, Shape::BTree)).unwrap();
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
        let db = match Db::open(&copy, opts(4096, Shape::BTree)) {
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
