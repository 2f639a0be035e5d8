//! An in-memory, crashable filesystem for crash tests.
//!
//! A real drive acknowledges writes into a volatile cache and only a flush
//! (fsync) makes them durable; on power loss the unflushed writes may be lost
//! entirely, partly (torn at sector granularity) or in any order. [`SimFs`]
//! models exactly that per file, and [`SimFs::crash`] produces the durable
//! image a restart would find, reproducibly from a seed.
//!
//! Semantics (the durability contract the engine may rely on, nothing more):
//! - `write_at` is visible to every reader at once and becomes durable only
//!   when a `sync` of the same file returns.
//! - Namespace operations are durable at once: file creation, `remove`,
//!   `rename` (atomic, replaces the target), `create_dir_all`. Real
//!   filesystems need a directory fsync for that; [`crate::RealFs::rename`]
//!   does it, and the engine must not depend on more than this.
//! - `set_len` is durable at once, including the zero fill when growing and
//!   the loss of pending writes beyond the new end when shrinking. Writes past
//!   the end extend the file only once they are durable.
//! - Open handles of a removed or renamed file keep working (unix inodes).

use crate::backend::check_aligned;
use crate::{Backend, IoError, LockGuard, OpenOptions, Result};
use crate::{DirectMode, Fs};
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// Sector size of the simulated drive: the unit a power loss never tears.
pub const SECTOR: usize = 512;

/// How a simulated power loss treats writes that were not yet synced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum CrashMode {
    /// Every unsynced write is lost.
    DropUnsynced,
    /// Unsynced writes (all files, in issue order) reach the media up to a
    /// random cut; the write at the cut lands as a random subset of its sectors.
    TornWrite,
    /// A random subset of unsynced writes lands in random order; each landed
    /// write is whole or a random subset of its sectors.
    Reorder,
}

impl CrashMode {
    pub const ALL: [CrashMode; 3] = [
        CrashMode::DropUnsynced,
        CrashMode::TornWrite,
        CrashMode::Reorder,
    ];
}

/// Knobs of the simulated drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimOptions {
    /// O_DIRECT alignment enforced on handles opened with direct I/O
    /// (`DirectMode::On`/`Try`); 1 disables the check. Use 512 or 4096 to
    /// catch misaligned buffers, offsets and lengths in the engine.
    pub align: usize,
}

impl Default for SimOptions {
    fn default() -> Self {
        Self { align: 1 }
    }
}

/// Per-file operation counters of a [`SimFs`].
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SimFileStats {
    pub reads: u64,
    pub read_bytes: u64,
    pub writes: u64,
    pub write_bytes: u64,
    pub syncs: u64,
}

/// What a crash did, for the message of a failing crash test.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CrashReport {
    /// Unsynced writes when the power went out (all files).
    pub pending: usize,
    /// Of those, how many reached the media whole.
    pub whole: usize,
    /// How many reached it as a strict subset of their sectors.
    pub torn: usize,
}

#[derive(Debug, Clone)]
struct Pending {
    seq: u64,
    offset: u64,
    data: Vec<u8>,
}

/// Invariant: `current` == `durable` with `pending` applied in order.
#[derive(Debug, Default)]
struct FileData {
    current: Vec<u8>,
    durable: Vec<u8>,
    pending: Vec<Pending>,
    stats: SimFileStats,
}

type FileRef = Arc<Mutex<FileData>>;

#[derive(Debug, Default)]
struct Namespace {
    files: BTreeMap<PathBuf, FileRef>,
    dirs: BTreeSet<PathBuf>,
    locks: BTreeSet<PathBuf>,
}

#[derive(Debug)]
struct Shared {
    opts: SimOptions,
    ns: Mutex<Namespace>,
    /// Global issue order of writes, so a torn crash cuts across files.
    seq: AtomicU64,
}

/// The simulated filesystem. Cloning gives another handle to the same files.
#[derive(Debug, Clone)]
pub struct SimFs {
    shared: Arc<Shared>,
}

impl Default for SimFs {
    fn default() -> Self {
        Self::new()
    }
}

/// Drops `.` and trailing slashes so one file has one key.
fn norm(path: &Path) -> PathBuf {
    path.components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect()
}

fn not_found(path: &Path) -> IoError {
    IoError::Open {
        path: path.to_path_buf(),
        source: std::io::ErrorKind::NotFound.into(),
    }
}

fn os_error(path: &Path, errno: i32) -> IoError {
    IoError::Open {
        path: path.to_path_buf(),
        source: std::io::Error::from_raw_os_error(errno),
    }
}

impl SimFs {
    /// An empty filesystem with buffered-I/O rules (no alignment checks).
    pub fn new() -> Self {
        Self::with_options(SimOptions::default())
    }

    pub fn with_options(opts: SimOptions) -> Self {
        assert!(
            opts.align.is_power_of_two(),
            "alignment must be a power of two"
        );
        Self {
            shared: Arc::new(Shared {
                opts,
                ns: Mutex::new(Namespace::default()),
                seq: AtomicU64::new(0),
            }),
        }
    }

    /// An empty filesystem enforcing O_DIRECT alignment `align` (512, 4096).
    pub fn with_alignment(align: usize) -> Self {
        Self::with_options(SimOptions { align })
    }

    pub fn options(&self) -> SimOptions {
        self.shared.opts
    }

    fn file(&self, path: &Path) -> Option<FileRef> {
        self.shared.ns.lock().files.get(&norm(path)).cloned()
    }

    /// What a reader sees now (None if there is no such file).
    pub fn contents(&self, path: &Path) -> Option<Vec<u8>> {
        self.file(path).map(|f| f.lock().current.clone())
    }

    /// What would survive if the power went out and nothing unsynced landed.
    pub fn durable_contents(&self, path: &Path) -> Option<Vec<u8>> {
        self.file(path).map(|f| f.lock().durable.clone())
    }

    /// Number of writes to `path` not yet made durable by a sync.
    pub fn pending_writes(&self, path: &Path) -> usize {
        self.file(path).map_or(0, |f| f.lock().pending.len())
    }

    /// Counters of the file now at `path` (they follow it across renames).
    pub fn file_stats(&self, path: &Path) -> Option<SimFileStats> {
        self.file(path).map(|f| f.lock().stats.clone())
    }

    /// Every file, sorted.
    pub fn files(&self) -> Vec<PathBuf> {
        self.shared.ns.lock().files.keys().cloned().collect()
    }

    /// The durable image after a power loss, as a new filesystem (no locks,
    /// fresh counters). The same `seed` and history give the same image.
    /// `self` is left untouched, so one history can be crashed at many points
    /// and with many seeds while the workload goes on.
    pub fn crash(&self, seed: u64, mode: CrashMode) -> SimFs {
        self.crash_report(seed, mode).0
    }

    /// [`SimFs::crash`] plus what happened to the unsynced writes.
    pub fn crash_report(&self, seed: u64, mode: CrashMode) -> (SimFs, CrashReport) {
        let ns = self.shared.ns.lock();
        let paths: Vec<PathBuf> = ns.files.keys().cloned().collect();
        let mut images: Vec<Vec<u8>> = Vec::with_capacity(paths.len());
        let mut pending: Vec<(usize, Pending)> = Vec::new();
        for (i, f) in ns.files.values().enumerate() {
            let data = f.lock();
            images.push(data.durable.clone());
            pending.extend(data.pending.iter().cloned().map(|p| (i, p)));
        }
        pending.sort_by_key(|(_, p)| p.seq);
        let mut rng = StdRng::seed_from_u64(seed);
        let report = match mode {
            CrashMode::DropUnsynced => CrashReport {
                pending: pending.len(),
                ..Default::default()
            },
            CrashMode::TornWrite => torn(&mut rng, &pending, &mut images),
            CrashMode::Reorder => reorder(&mut rng, &pending, &mut images),
        };
        let fs = SimFs::with_options(self.shared.opts);
        {
            let mut new = fs.shared.ns.lock();
            new.dirs = ns.dirs.clone();
            for (path, image) in paths.into_iter().zip(images) {
                new.files.insert(path, new_file(image));
            }
        }
        (fs, report)
    }

    fn parent_exists(ns: &Namespace, path: &Path) -> bool {
        match path.parent() {
            None => true,
            Some(p) if p.as_os_str().is_empty() || p == Path::new("/") => true,
            Some(p) => ns.dirs.contains(p),
        }
    }

    fn open_file(&self, path: &Path, opts: &OpenOptions) -> Result<FileRef> {
        let mut ns = self.shared.ns.lock();
        if ns.dirs.contains(path) {
            return Err(os_error(path, libc::EISDIR));
        }
        if let Some(f) = ns.files.get(path) {
            if opts.create_new {
                return Err(os_error(path, libc::EEXIST));
            }
            return Ok(f.clone());
        }
        if !(opts.create || opts.create_new) {
            return Err(not_found(path));
        }
        if !Self::parent_exists(&ns, path) {
            return Err(not_found(path));
        }
        let f = new_file(Vec::new());
        ns.files.insert(path.to_path_buf(), f.clone());
        Ok(f)
    }
}

fn new_file(image: Vec<u8>) -> FileRef {
    Arc::new(Mutex::new(FileData {
        current: image.clone(),
        durable: image,
        ..Default::default()
    }))
}

/// Copies `data` into `image` at `offset`, growing it with zeros as needed.
fn apply(image: &mut Vec<u8>, offset: u64, data: &[u8]) {
    let start = offset as usize;
    let end = start + data.len();
    if image.len() < end {
        image.resize(end, 0);
    }
    image[start..end].copy_from_slice(data);
}

/// The pieces of a write cut at absolute sector boundaries.
fn sectors(offset: u64, data: &[u8]) -> Vec<(u64, &[u8])> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < data.len() {
        let abs = offset + at as u64;
        let room = SECTOR - (abs as usize % SECTOR);
        let n = room.min(data.len() - at);
        out.push((abs, &data[at..at + n]));
        at += n;
    }
    out
}

/// Lands a random subset of the write's sectors; true if the subset is strict.
fn apply_torn(rng: &mut StdRng, image: &mut Vec<u8>, p: &Pending) -> bool {
    let pieces = sectors(p.offset, &p.data);
    let mut landed = 0;
    for (off, piece) in &pieces {
        if rng.gen_bool(0.5) {
            apply(image, *off, piece);
            landed += 1;
        }
    }
    landed < pieces.len()
}

fn torn(rng: &mut StdRng, pending: &[(usize, Pending)], images: &mut [Vec<u8>]) -> CrashReport {
    let cut = rng.gen_range(0..=pending.len());
    for (file, p) in &pending[..cut] {
        apply(&mut images[*file], p.offset, &p.data);
    }
    let mut report = CrashReport {
        pending: pending.len(),
        whole: cut,
        torn: 0,
    };
    if let Some((file, p)) = pending.get(cut) {
        if apply_torn(rng, &mut images[*file], p) {
            report.torn = 1;
        } else {
            report.whole += 1;
        }
    }
    report
}

fn reorder(rng: &mut StdRng, pending: &[(usize, Pending)], images: &mut [Vec<u8>]) -> CrashReport {
    let mut chosen: Vec<&(usize, Pending)> = pending.iter().filter(|_| rng.gen_bool(0.5)).collect();
    chosen.shuffle(rng);
    let mut report = CrashReport {
        pending: pending.len(),
        ..Default::default()
    };
    for (file, p) in chosen {
        if rng.gen_bool(0.5) {
            apply(&mut images[*file], p.offset, &p.data);
            report.whole += 1;
        } else if apply_torn(rng, &mut images[*file], p) {
            report.torn += 1;
        } else {
            report.whole += 1;
        }
    }
    report
}

impl Fs for SimFs {
    fn open(&self, path: &Path, opts: &OpenOptions) -> Result<Arc<dyn Backend>> {
        let path = norm(path);
        let file = self.open_file(&path, opts)?;
        let align = match opts.direct {
            DirectMode::Off => 1,
            DirectMode::On | DirectMode::Try => self.shared.opts.align,
        };
        Ok(Arc::new(SimFile {
            file,
            path,
            writable: opts.write,
            align,
            shared: self.shared.clone(),
        }))
    }

    fn exists(&self, path: &Path) -> bool {
        let path = norm(path);
        let ns = self.shared.ns.lock();
        ns.files.contains_key(&path) || ns.dirs.contains(&path)
    }

    fn remove(&self, path: &Path) -> Result<()> {
        let path = norm(path);
        let mut ns = self.shared.ns.lock();
        ns.files
            .remove(&path)
            .map(drop)
            .ok_or_else(|| not_found(&path))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let (from, to) = (norm(from), norm(to));
        let mut ns = self.shared.ns.lock();
        if !Self::parent_exists(&ns, &to) {
            return Err(not_found(&to));
        }
        let f = ns.files.remove(&from).ok_or_else(|| not_found(&from))?;
        ns.files.insert(to, f);
        Ok(())
    }

    fn create_dir_all(&self, path: &Path) -> Result<()> {
        let path = norm(path);
        let mut ns = self.shared.ns.lock();
        for dir in path.ancestors().filter(|d| !d.as_os_str().is_empty()) {
            if ns.files.contains_key(dir) {
                return Err(os_error(dir, libc::ENOTDIR));
            }
            ns.dirs.insert(dir.to_path_buf());
        }
        Ok(())
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn LockGuard>> {
        let path = norm(path);
        let create = OpenOptions {
            write: true,
            create: true,
            ..Default::default()
        };
        self.open_file(&path, &create)?;
        let mut ns = self.shared.ns.lock();
        if !ns.locks.insert(path.clone()) {
            return Err(IoError::Invalid {
                path,
                what: "is locked by another open handle (simulated); close it first".into(),
            });
        }
        Ok(Box::new(SimLock {
            path,
            shared: self.shared.clone(),
        }))
    }
}

#[derive(Debug)]
struct SimLock {
    path: PathBuf,
    shared: Arc<Shared>,
}

impl LockGuard for SimLock {}

impl Drop for SimLock {
    fn drop(&mut self) {
        self.shared.ns.lock().locks.remove(&self.path);
    }
}

/// An open file of a [`SimFs`].
#[derive(Debug)]
pub struct SimFile {
    file: FileRef,
    path: PathBuf,
    writable: bool,
    align: usize,
    shared: Arc<Shared>,
}

impl SimFile {
    fn check_writable(&self, op: &'static str, offset: u64, len: usize) -> Result<()> {
        if self.writable {
            return Ok(());
        }
        Err(IoError::Io {
            op,
            path: self.path.clone(),
            offset,
            len,
            source: std::io::Error::from_raw_os_error(libc::EBADF),
        })
    }
}

impl Backend for SimFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        check_aligned(&self.path, self.align, buf.as_ptr(), buf.len(), offset)?;
        let mut f = self.file.lock();
        f.stats.reads += 1;
        f.stats.read_bytes += buf.len() as u64;
        let start = (offset as usize).min(f.current.len());
        let done = (f.current.len() - start).min(buf.len());
        buf[..done].copy_from_slice(&f.current[start..start + done]);
        if done < buf.len() {
            return Err(IoError::Short {
                op: "read",
                path: self.path.clone(),
                offset,
                len: buf.len(),
                done,
            });
        }
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.check_writable("write", offset, buf.len())?;
        check_aligned(&self.path, self.align, buf.as_ptr(), buf.len(), offset)?;
        let mut f = self.file.lock();
        // Taken under the file lock so per-file order equals seq order.
        let seq = self.shared.seq.fetch_add(1, Relaxed);
        apply(&mut f.current, offset, buf);
        f.pending.push(Pending {
            seq,
            offset,
            data: buf.to_vec(),
        });
        f.stats.writes += 1;
        f.stats.write_bytes += buf.len() as u64;
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        let mut guard = self.file.lock();
        let f = &mut *guard;
        for p in f.pending.drain(..) {
            apply(&mut f.durable, p.offset, &p.data);
        }
        f.stats.syncs += 1;
        debug_assert_eq!(f.durable, f.current);
        Ok(())
    }

    fn size(&self) -> Result<u64> {
        Ok(self.file.lock().current.len() as u64)
    }

    /// A hole is zeros written past the file's end no further: like a
    /// write, it reaches the durable image only at a sync, so a crash may
    /// keep the old bytes (as a file system that had not yet committed the
    /// hole would). Not counted as a write in the stats.
    fn punch_hole(&self, offset: u64, len: u64) -> Result<()> {
        self.check_writable("punch hole", offset, len as usize)?;
        let mut f = self.file.lock();
        let start = (offset as usize).min(f.current.len());
        let end = (offset.saturating_add(len) as usize).min(f.current.len());
        if start == end {
            return Ok(());
        }
        let seq = self.shared.seq.fetch_add(1, Relaxed);
        let zeros = vec![0u8; end - start];
        apply(&mut f.current, start as u64, &zeros);
        f.pending.push(Pending {
            seq,
            offset: start as u64,
            data: zeros,
        });
        debug_assert!(f.current[start..end].iter().all(|&b| b == 0));
        Ok(())
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.check_writable("truncate", len, 0)?;
        let mut f = self.file.lock();
        let n = len as usize;
        f.current.resize(n, 0);
        f.durable.resize(n, 0);
        f.pending.retain_mut(|p| {
            let keep = n.saturating_sub(p.offset as usize).min(p.data.len());
            p.data.truncate(keep);
            keep > 0
        });
        Ok(())
    }

    fn alignment(&self) -> usize {
        self.align
    }

    fn is_direct(&self) -> bool {
        self.align > 1
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn engine(&self) -> &'static str {
        "sim"
    }
}

#[cfg(test)]
mod tests;
