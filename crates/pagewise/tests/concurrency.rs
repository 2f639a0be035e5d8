//! N reader threads put N reads in flight: counted at the backend, not timed.

use pagewise::{BEpsilonOptions, Db, Options, TreeKind};
use pagewise_io::{Backend, Fs, IoQueue, LockGuard, OpenOptions, RealFs, Result as IoResult};
use parking_lot::{Condvar, Mutex};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Default)]
struct Gate {
    armed: AtomicBool,
    state: Mutex<(usize, usize)>, // (in flight, max seen)
    cv: Condvar,
    target: usize,
}

impl Gate {
    /// Holds each read until `target` reads are in flight together (or 20 s).
    fn enter(&self) {
        if !self.armed.load(Ordering::Acquire) {
            return;
        }
        let mut s = self.state.lock();
        s.0 += 1;
        s.1 = s.1.max(s.0);
        if s.0 >= self.target {
            self.armed.store(false, Ordering::Release);
            self.cv.notify_all();
        } else {
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            while self.armed.load(Ordering::Acquire) && std::time::Instant::now() < deadline {
                self.cv.wait_for(&mut s, Duration::from_millis(50));
            }
        }
        s.0 -= 1;
    }
}

#[derive(Debug)]
struct GatedBackend(Arc<dyn Backend>, Arc<Gate>);

impl Backend for GatedBackend {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> IoResult<()> {
        self.1.enter();
        self.0.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> IoResult<()> {
        self.0.write_at(buf, offset)
    }
    fn sync(&self) -> IoResult<()> {
        self.0.sync()
    }
    fn size(&self) -> IoResult<u64> {
        self.0.size()
    }
    fn set_len(&self, len: u64) -> IoResult<()> {
        self.0.set_len(len)
    }
    fn alignment(&self) -> usize {
        self.0.alignment()
    }
    fn is_direct(&self) -> bool {
        self.0.is_direct()
    }
    fn path(&self) -> &Path {
        self.0.path()
    }
    fn queue(&self, depth: usize) -> IoResult<Box<dyn IoQueue + '_>> {
        self.0.queue(depth)
    }
}

/// Wraps an opened file (in a gate).
type Wrap = Box<dyn Fn(Arc<dyn Backend>) -> Arc<dyn Backend> + Send + Sync>;

/// The real filesystem with every opened file wrapped.
struct WrapFs(Wrap);

impl std::fmt::Debug for WrapFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WrapFs")
    }
}

impl Fs for WrapFs {
    fn open(&self, path: &Path, opts: &OpenOptions) -> IoResult<Arc<dyn Backend>> {
        Ok((self.0)(RealFs.open(path, opts)?))
    }
    fn exists(&self, path: &Path) -> bool {
        RealFs.exists(path)
    }
    fn remove(&self, path: &Path) -> IoResult<()> {
        RealFs.remove(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> IoResult<()> {
        RealFs.rename(from, to)
    }
    fn create_dir_all(&self, path: &Path) -> IoResult<()> {
        RealFs.create_dir_all(path)
    }
    fn lock(&self, path: &Path) -> IoResult<Box<dyn LockGuard>> {
        RealFs.lock(path)
    }
}

#[test]
fn n_readers_put_n_reads_in_flight() {
    const N: usize = 4;
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("db");
    let o = Options::default().page_size(4096).direct_io(false);
    let db = Db::create(&p, o.clone().cache_bytes(64 << 20)).unwrap();
    let t = db.tree("t").unwrap();
    let mut b = pagewise::Batch::new();
    for i in 0..20_000u32 {
        b.insert(&t, format!("{i:08}"), [7u8; 100]);
    }
    db.apply(b).unwrap();
    drop(t);
    db.close().unwrap();

    let gate = Arc::new(Gate {
        target: N,
        ..Default::default()
    });
    let fs: Arc<dyn Fs> = Arc::new(WrapFs({
        let gate = gate.clone();
        Box::new(move |f| Arc::new(GatedBackend(f, gate.clone())))
    }));
    // A cache far smaller than the data: every reader misses.
    let db = Db::open(&p, o.cache_bytes(64 * 1024).fs(fs)).unwrap();
    gate.armed.store(true, Ordering::Release);
    std::thread::scope(|s| {
        for r in 0..N {
            let t = db.tree("t").unwrap();
            s.spawn(move || {
                for i in 0..20 {
                    let k = format!("{:08}", (r * 4999 + i * 977) % 20_000);
                    assert_eq!(t.get(&k).unwrap().unwrap(), [7u8; 100]);
                }
            });
        }
    });
    let max = gate.state.lock().1;
    assert_eq!(
        max, N,
        "readers were serialized: at most {max} reads in flight"
    );
}

/// Readers racing a writer (tiny pages, tiny cache, frequent checkpoints that
/// release pages for reuse) always see whole batches and ordered scans.
#[test]
fn readers_see_whole_batches_while_the_writer_runs() {
    let o = Options::default()
        .page_size(512)
        .cache_bytes(8 * 1024)
        .direct_io(false)
        .durability(pagewise::Durability::Buffered)
        .wal_limit(64 * 1024);
    // Values past 114 bytes go to overflow extents at 512 B pages.
    let s = readers_race_a_writer(o, TreeKind::BTree, 700);
    assert!(s.checkpoints > 5, "checkpoints did not happen");
}

/// The same race on B-epsilon trees whose dirty leaves are written back
/// between checkpoints (docs/design.md, "Checkpoints", leaf write-back):
/// a reader descending while a write-back moves leaves out of the dirty set
/// still sees whole batches.
#[test]
fn readers_see_whole_batches_across_leaf_write_backs() {
    let o = Options::default()
        .page_size(512)
        .cache_bytes(48 * 1024)
        .direct_io(false)
        .durability(pagewise::Durability::Buffered)
        .wal_limit(64 << 20);
    let kind = TreeKind::BEpsilon(
        BEpsilonOptions::default()
            .node_bytes(1024)
            .basement_bytes(128)
            .fanout(4),
    );
    let s = readers_race_a_writer(o, kind, 200);
    assert!(
        s.write_backs > 5 && s.write_backs > s.checkpoints,
        "write-backs did not pace the run: {} write-backs, {} checkpoints",
        s.write_backs,
        s.checkpoints
    );
}

/// Three readers (a scan, point reads of one key from each of two trees
/// one batch writes together) race 59 batches; returns the Db's stats.
fn readers_race_a_writer(o: Options, kind: TreeKind, long_bytes: usize) -> pagewise::Stats {
    let d = tempfile::tempdir().unwrap();
    let db = Db::create(d.path().join("db"), o).unwrap();
    db.tree_with("a", kind).unwrap();
    db.tree_with("b", kind).unwrap();
    const KEYS: u32 = 300;
    let write = |round: u32| {
        let mut b = pagewise::Batch::new();
        for i in 0..KEYS {
            let len = if i % 50 == 0 { long_bytes } else { 20 };
            let v: Vec<u8> = format!("{round:08}")
                .into_bytes()
                .into_iter()
                .cycle()
                .take(len)
                .collect();
            b.insert(if i % 2 == 0 { "a" } else { "b" }, format!("{i:05}"), v);
        }
        db.apply(b).unwrap();
    };
    write(0);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for r in 0..3 {
            let db = &db;
            let stop = &stop;
            s.spawn(move || {
                let (a, b) = (db.tree("a").unwrap(), db.tree("b").unwrap());
                let mut n = 0u64;
                while !stop.load(Ordering::Acquire) || n < 20 {
                    n += 1;
                    if r == 0 {
                        // A scan sees each key once, in order, every value whole.
                        let all: Vec<_> = a.iter().map(Result::unwrap).collect();
                        assert_eq!(all.len() as u32, KEYS / 2);
                        assert!(all.windows(2).all(|w| w[0].0 < w[1].0));
                        for (_, v) in &all {
                            assert!(v.len() == 20 || v.len() == long_bytes);
                            assert!(v.iter().zip(v[..8].iter().cycle()).all(|(x, y)| x == y));
                        }
                    } else {
                        // Point reads of one key from each tree: one batch writes
                        // both, and a reader sees both before or both after it.
                        let i = (n as u32 * 7 + r) % (KEYS / 2) * 2;
                        let va = a.get(format!("{i:05}")).unwrap().unwrap();
                        let vb = b.get(format!("{:05}", i + 1)).unwrap().unwrap();
                        let (ra, rb) = (&va[..8], &vb[..8]);
                        assert!(
                            ra <= rb,
                            "a is newer than b although b was read later: {ra:?} {rb:?}"
                        );
                    }
                }
            });
        }
        for round in 1..60 {
            write(round);
        }
        stop.store(true, Ordering::Release);
    });
    assert!(db.check().unwrap().is_ok());
    db.stats()
}

/// Concurrent Sync committers share fsyncs: while one log fsync is held up,
/// the others queue and the next leader commits them all with one fsync.
#[test]
fn group_commit_shares_fsyncs() {
    const N: usize = 8;
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("db");
    let gate = Arc::new(Gate {
        target: 2,
        ..Default::default()
    });
    // The gate holds reads; here we only use its flag to hold syncs.
    let fs: Arc<dyn Fs> = Arc::new(WrapFs({
        let gate = gate.clone();
        Box::new(move |f| Arc::new(SyncGated(f, gate.clone())))
    }));
    let o = Options::default().page_size(4096).direct_io(false).fs(fs);
    let db = Db::create(&p, o).unwrap();
    let t = db.tree("t").unwrap();
    t.insert(b"warm", b"up").unwrap();
    let before = db.stats();
    gate.armed.store(true, Ordering::Release);
    let started = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for i in 0..N {
            let t = t.clone();
            let started = &started;
            s.spawn(move || {
                started.fetch_add(1, Ordering::AcqRel);
                t.insert(format!("k{i}"), b"v").unwrap();
            });
        }
        // Release the held fsync once every committer has started and had
        // ample time to queue (a correctness-neutral wait: grouping just
        // gets less likely if it is too short).
        while started.load(Ordering::Acquire) < N {
            std::thread::yield_now();
        }
        std::thread::sleep(Duration::from_millis(200));
        gate.armed.store(false, Ordering::Release);
        gate.cv.notify_all();
    });
    let s = db.stats();
    let commits = s.commits - before.commits;
    let groups = s.commit_groups - before.commit_groups;
    let syncs = s.wal.syncs - before.wal.syncs;
    assert_eq!(commits, N as u64);
    assert!(
        groups < commits && syncs < commits,
        "{groups} groups and {syncs} fsyncs for {commits} commits"
    );
    for i in 0..N {
        assert_eq!(t.get(format!("k{i}")).unwrap().unwrap(), b"v");
    }
}

#[derive(Debug)]
struct SyncGated(Arc<dyn Backend>, Arc<Gate>);

impl Backend for SyncGated {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> IoResult<()> {
        self.0.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> IoResult<()> {
        self.0.write_at(buf, offset)
    }
    fn sync(&self) -> IoResult<()> {
        let mut s = self.1.state.lock();
        while self.1.armed.load(Ordering::Acquire) {
            self.1.cv.wait_for(&mut s, Duration::from_millis(20));
        }
        drop(s);
        self.0.sync()
    }
    fn size(&self) -> IoResult<u64> {
        self.0.size()
    }
    fn set_len(&self, len: u64) -> IoResult<()> {
        self.0.set_len(len)
    }
    fn alignment(&self) -> usize {
        self.0.alignment()
    }
    fn is_direct(&self) -> bool {
        self.0.is_direct()
    }
    fn path(&self) -> &Path {
        self.0.path()
    }
}
