//! N reader threads put N reads in flight: counted at the backend, not timed.

use pagewise::{Db, Options};
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

#[derive(Debug)]
struct GatedFs(Arc<Gate>);

impl Fs for GatedFs {
    fn open(&self, path: &Path, opts: &OpenOptions) -> IoResult<Arc<dyn Backend>> {
        Ok(Arc::new(GatedBackend(
            RealFs.open(path, opts)?,
            self.0.clone(),
        )))
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
    let fs: Arc<dyn Fs> = Arc::new(GatedFs(gate.clone()));
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
