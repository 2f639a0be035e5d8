//! The database: open/create, group commit, checkpoints, recovery.

use crate::alloc::Alloc;
use crate::batch::{self, Batch, Op};
use crate::btree::{OldVal, Writer};
use crate::cache::{Cache, PidMap};
use crate::error::{Error, Result};
use crate::meta::{self, Meta, TreeMeta, FORMAT_VERSION};
use crate::node::{self, Node, Val};
use crate::options::{Durability, Options, MAX_PAGE_SIZE, MIN_PAGE_SIZE};
use crate::page::Kind;
use crate::pager::Pager;
use crate::read_engine::{self, ReadPath};
use crate::tree::Tree;
use crate::wal::{self, Wal};
use pagewise_io::{
    Accounted, AlignedBuf, Backend, DirectMode, Fs, IoStats, LockGuard, OpenOptions,
};
use parking_lot::{Mutex, RwLock};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Largest value accepted (values above a quarter page go to overflow extents).
pub const MAX_VALUE_LEN: usize = 1 << 30;
/// Buffered mode writes the log tail once this much is pending.
const BUFFERED_FLUSH: usize = 1 << 20;

/// In-memory tree state, guarded by `Inner::state`.
#[derive(Default)]
pub struct State {
    pub trees: BTreeMap<Arc<str>, TreeMeta>,
    /// Pages allocated this epoch, not yet written by a checkpoint.
    pub dirty: PidMap<Arc<Node>>,
}

/// Owned by the commit leader.
struct CommitState {
    wal: Wal,
    gen: u64,
    lsn: u64,
    /// The LSN the durable checkpoint covers: equal to `lsn` when nothing
    /// was committed since, so closing has nothing to write.
    ckpt_lsn: u64,
    blob: (u64, u64),
}

type Slot = Arc<Mutex<Option<std::result::Result<(), String>>>>;

struct Pending {
    ops: Vec<Op>,
    slot: Slot,
}

#[derive(Default)]
pub struct Counters {
    pub commits: AtomicU64,
    pub groups: AtomicU64,
    pub checkpoints: AtomicU64,
    pub replayed: AtomicU64,
    /// Group prefetch: queued read rounds, and the pages they loaded.
    pub prefetch_rounds: AtomicU64,
    pub prefetched_pages: AtomicU64,
    /// Iterator read-ahead: batches read, and sibling pages they asked for.
    pub readahead_rounds: AtomicU64,
    pub readahead_pages: AtomicU64,
}

pub struct IoCats {
    pub wal: Arc<IoStats>,
    pub pages: Arc<IoStats>,
    pub meta: Arc<IoStats>,
}

pub struct Inner {
    pub path: PathBuf,
    pub durability: Durability,
    pub direct: bool,
    pub read_only: bool,
    wal_limit: u64,
    dirty_limit: usize,
    pub pager: Pager,
    pub cache: Cache,
    pub state: RwLock<State>,
    pub alloc: Mutex<Alloc>,
    pub reuse_gen: AtomicU64,
    /// `Options::read_ahead`: most pages of one iterator read-ahead batch.
    pub read_ahead: usize,
    commit: Mutex<CommitState>,
    queue: Mutex<Vec<Pending>>,
    poison: Mutex<Option<String>>,
    pub io: IoCats,
    pub reads: ReadPath,
    pub counters: Counters,
    closed: AtomicBool,
    _lock: Box<dyn LockGuard>,
}

/// An open database. Cheap to clone; all clones share one instance.
#[derive(Clone)]
pub struct Db {
    pub(crate) inner: Arc<Inner>,
}

fn sidecar(path: &Path, suffix: &str) -> PathBuf {
    let mut s = OsString::from(path.as_os_str());
    s.push(suffix);
    PathBuf::from(s)
}

/// The write-ahead log file of the database at `path`.
pub fn wal_path(path: &Path) -> PathBuf {
    sidecar(path, "-wal")
}

/// The lock file of the database at `path`.
pub fn lock_path(path: &Path) -> PathBuf {
    sidecar(path, "-lock")
}

struct Files {
    lock: Box<dyn LockGuard>,
    /// Through the read path in `reads` (a shared ring or the file itself).
    data: Arc<dyn Backend>,
    reads: ReadPath,
    wal: Arc<dyn Backend>,
}

fn open_files(path: &Path, opts: &Options, create: bool) -> Result<Files> {
    let fs: &dyn Fs = &*opts.fs;
    if create && fs.exists(path) {
        return Err(Error::AlreadyExists {
            path: path.to_path_buf(),
        });
    }
    if !create && !fs.exists(path) {
        return Err(Error::NotFound {
            path: path.to_path_buf(),
        });
    }
    let lp = lock_path(path);
    let lock = fs
        .lock(&lp)
        .map_err(|source| Error::Locked { path: lp, source })?;
    let direct = if opts.direct_io {
        DirectMode::Try
    } else {
        DirectMode::Off
    };
    let write = create || !opts.read_only;
    let o = OpenOptions {
        write,
        create,
        create_new: create,
        direct,
    };
    let (data, reads) = read_engine::wrap_data(fs.open(path, &o)?, opts.read_engine);
    let wo = OpenOptions {
        write,
        create: write,
        create_new: false,
        direct,
    };
    let wal = fs.open(&wal_path(path), &wo)?;
    Ok(Files {
        lock,
        data,
        reads,
        wal,
    })
}

/// Finds the page size and the newest valid superblock.
fn read_superblock(file: &Arc<dyn Backend>, path: &Path) -> Result<(usize, Meta, Option<String>)> {
    let size = file.size()?;
    let unit = file.alignment().max(512);
    let not_db = || Error::NotADatabase {
        path: path.to_path_buf(),
    };
    let sniff_at = |off: u64| -> Result<Option<(u32, u32)>> {
        if off + unit as u64 > size {
            return Ok(None);
        }
        let mut b = AlignedBuf::new(unit, unit.max(4096));
        file.read_at(&mut b, off)?;
        Ok(meta::sniff(&b))
    };
    let newer = |found: u32| Error::NewerVersion {
        path: path.to_path_buf(),
        found,
        supported: FORMAT_VERSION,
    };
    let valid_ps = |p: u32| {
        let p = p as usize;
        p.is_power_of_two() && (MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&p)
    };
    let mut ps = None;
    if let Some((ver, p)) = sniff_at(0)? {
        if ver > FORMAT_VERSION {
            return Err(newer(ver));
        }
        if valid_ps(p) {
            ps = Some(p as usize);
        }
    }
    if ps.is_none() {
        // Slot 0 is damaged: look for slot 1 at every possible page size.
        let mut p = MIN_PAGE_SIZE;
        while p <= MAX_PAGE_SIZE && ps.is_none() {
            if let Some((ver, found)) = sniff_at(p as u64)? {
                if found as usize == p {
                    if ver > FORMAT_VERSION {
                        return Err(newer(ver));
                    }
                    ps = Some(p);
                }
            }
            p *= 2;
        }
    }
    let ps = ps.ok_or_else(not_db)?;
    if file.alignment() > ps {
        return Err(Error::Options(format!(
            "{}: page size {ps} is below the device's logical block size {}; open it without direct I/O",
            path.display(),
            file.alignment()
        )));
    }
    if size < 2 * ps as u64 {
        return Err(Error::Truncated {
            path: path.to_path_buf(),
            expected: 2 * ps as u64,
            actual: size,
        });
    }
    let probe = Pager::new(file.clone(), ps, IoStats::new(), IoStats::new());
    let slots = [probe.read_meta(0), probe.read_meta(1)];
    let mut best: Option<Meta> = None;
    let mut note = None;
    for (slot, r) in slots.iter().enumerate() {
        match r {
            Ok(m) if m.gen % 2 == slot as u64 && m.page_size as usize == ps => {
                if m.version > FORMAT_VERSION {
                    return Err(newer(m.version));
                }
                if best.is_none_or(|b| m.gen > b.gen) {
                    best = Some(*m);
                }
            }
            Ok(m) => {
                note = Some(format!(
                    "superblock slot {slot} holds generation {} for page size {}",
                    m.gen, m.page_size
                ))
            }
            Err(e) => note = Some(format!("superblock slot {slot}: {e}")),
        }
    }
    let Some(m) = best else {
        return Err(Error::Corrupt {
            path: path.to_path_buf(),
            page: 0,
            offset: 0,
            what: format!("neither superblock is valid ({})", note.unwrap_or_default()),
        });
    };
    if size < m.hwm * ps as u64 {
        return Err(Error::Truncated {
            path: path.to_path_buf(),
            expected: m.hwm * ps as u64,
            actual: size,
        });
    }
    Ok((ps, m, note))
}

impl Db {
    /// Creates a new database at `path` (which must not exist), plus its
    /// sidecar files `PATH-wal` and `PATH-lock`.
    pub fn create(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        let path = path.as_ref();
        Options::validate_page_size(opts.page_size)?;
        let files = open_files(path, &opts, true)?;
        let ps = opts.page_size;
        if files.data.alignment() > ps {
            let _ = opts.fs.remove(path);
            return Err(Error::Options(format!(
                "page size {ps} is below the device's logical block size {}",
                files.data.alignment()
            )));
        }
        let m = Meta {
            version: FORMAT_VERSION,
            page_size: ps as u32,
            gen: 0,
            lsn: 0,
            hwm: 2,
            blob_start: 0,
            blob_pages: 0,
            blob_len: 0,
            db_id: new_db_id(path),
        };
        // A log left behind by an earlier database at this path is emptied
        // (and could not be replayed anyway: its records carry another id).
        files.wal.set_len(0)?;
        files.wal.sync()?;
        let probe = Pager::new(files.data.clone(), ps, IoStats::new(), IoStats::new());
        probe.write_meta(&m)?;
        probe.set_len(2 * ps as u64)?;
        probe.sync()?;
        let db = Self::start(path, &opts, files, ps, m, Vec::new(), Vec::new())?;
        db.inner.checkpoint()?;
        Ok(db)
    }

    /// Opens an existing database, replaying its write-ahead log.
    pub fn open(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        let path = path.as_ref();
        let files = open_files(path, &opts, false)?;
        let (ps, m, _) = read_superblock(&files.data, path)?;
        let probe = Pager::new(files.data.clone(), ps, IoStats::new(), IoStats::new());
        let (trees, free) = if m.blob_len == 0 {
            (Vec::new(), Vec::new())
        } else {
            let b = probe.read_extent(m.blob_start, Kind::Blob, m.blob_len as usize)?;
            meta::decode_blob(&b).map_err(|what| Error::Corrupt {
                path: path.to_path_buf(),
                page: m.blob_start,
                offset: m.blob_start * ps as u64,
                what,
            })?
        };
        let records = wal::scan(&*files.wal, m.db_id, m.gen, m.lsn + 1)?;
        if opts.read_only {
            if !records.is_empty() {
                return Err(Error::NeedsRecovery {
                    path: path.to_path_buf(),
                    records: records.len(),
                });
            }
            return Self::start(path, &opts, files, ps, m, trees, free);
        }
        let db = Self::start(path, &opts, files, ps, m, trees, free)?;
        db.inner.replay(records)?;
        // Always start a fresh log run: it also discards any unacknowledged
        // records that survived beyond the replayed prefix.
        db.inner.checkpoint()?;
        Ok(db)
    }

    /// Opens `path` if it exists, else creates it.
    pub fn open_or_create(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        if opts.fs.exists(path.as_ref()) {
            Self::open(path, opts)
        } else {
            Self::create(path, opts)
        }
    }

    fn start(
        path: &Path,
        opts: &Options,
        files: Files,
        ps: usize,
        m: Meta,
        trees: Vec<(String, TreeMeta)>,
        free: Vec<(u64, u64)>,
    ) -> Result<Db> {
        let io = IoCats {
            wal: IoStats::new(),
            pages: IoStats::new(),
            meta: IoStats::new(),
        };
        let direct = files.data.is_direct();
        let pager = Pager::new(files.data, ps, io.pages.clone(), io.meta.clone());
        let wal = Wal::new(Accounted::new(files.wal, io.wal.clone()), m.gen, m.db_id);
        let dirty_budget = (opts.cache_bytes / 4).max(16 * ps);
        let inner = Inner {
            path: path.to_path_buf(),
            durability: opts.durability,
            direct,
            read_only: opts.read_only,
            wal_limit: opts.wal_limit.max(64 * 1024),
            dirty_limit: dirty_budget / ps,
            cache: Cache::new(opts.cache_bytes.max(4 * ps), ps),
            pager,
            state: RwLock::new(State {
                trees: trees.into_iter().map(|(n, t)| (Arc::from(n), t)).collect(),
                dirty: PidMap::default(),
            }),
            alloc: Mutex::new(Alloc::new(m.hwm, &free)),
            reuse_gen: AtomicU64::new(0),
            read_ahead: opts.read_ahead,
            commit: Mutex::new(CommitState {
                wal,
                gen: m.gen,
                lsn: m.lsn,
                ckpt_lsn: m.lsn,
                blob: (m.blob_start, m.blob_pages as u64),
            }),
            queue: Mutex::new(Vec::new()),
            poison: Mutex::new(None),
            io,
            reads: files.reads,
            counters: Counters::default(),
            closed: AtomicBool::new(false),
            _lock: files.lock,
        };
        Ok(Db {
            inner: Arc::new(inner),
        })
    }

    /// A handle on the tree `name` (created by its first write).
    pub fn tree(&self, name: &str) -> Result<Tree> {
        check_tree_name(name)?;
        Ok(Tree::new(self.inner.clone(), Arc::from(name)))
    }

    /// Names of trees that have been written to.
    pub fn tree_names(&self) -> Vec<String> {
        self.inner
            .state
            .read()
            .trees
            .keys()
            .map(|k| k.to_string())
            .collect()
    }

    /// Applies every write in `batch` atomically: after a crash either all or
    /// none of them are present, and readers never see part of it.
    pub fn apply(&self, batch: Batch) -> Result<()> {
        self.inner.commit(batch.ops)
    }

    /// Makes every acknowledged write durable (Buffered mode's explicit sync).
    pub fn sync(&self) -> Result<()> {
        self.inner.sync()
    }

    /// Writes all dirty pages and a new superblock; empties the log.
    pub fn checkpoint(&self) -> Result<()> {
        self.inner.checkpoint()
    }

    pub fn page_size(&self) -> usize {
        self.inner.pager.ps
    }

    /// Longest key accepted at this page size.
    pub fn max_key_len(&self) -> usize {
        node::max_key(self.inner.pager.ps)
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Checkpoints (if anything was written since the last checkpoint) and
    /// closes. Dropping the last handle does the same but cannot report errors.
    pub fn close(self) -> Result<()> {
        let r = self.inner.close_checkpoint();
        self.inner.closed.store(true, Ordering::Release);
        r
    }

    /// True when opened with [`Options::read_only`].
    pub fn is_read_only(&self) -> bool {
        self.inner.read_only
    }
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("path", &self.inner.path)
            .field("page_size", &self.inner.pager.ps)
            .field("read_only", &self.inner.read_only)
            .finish()
    }
}

/// A database id that differs between databases created at the same path.
fn new_db_id(path: &Path) -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write(path.as_os_str().as_encoded_bytes());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    h.write_u64(now);
    h.write_u32(std::process::id());
    (h.finish() >> 32) as u32
}

fn check_tree_name(name: &str) -> Result<()> {
    let bad = |why| {
        Err(Error::TreeName {
            name: name.to_string(),
            why,
        })
    };
    if name.is_empty() {
        return bad("it is empty");
    }
    if name.len() > 255 {
        return bad("it is longer than 255 bytes");
    }
    Ok(())
}

impl Drop for Inner {
    fn drop(&mut self) {
        if !self.closed.load(Ordering::Acquire) && !std::thread::panicking() {
            let _ = self.close_checkpoint();
        }
    }
}

impl Inner {
    pub fn poison(&self, reason: String) {
        let mut p = self.poison.lock();
        if p.is_none() {
            *p = Some(reason);
        }
    }

    fn check_writable(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly {
                path: self.path.clone(),
            });
        }
        Ok(())
    }

    /// The checkpoint of a clean close: skipped when read-only or when no
    /// commit happened since the last checkpoint (nothing dirty, no log).
    fn close_checkpoint(&self) -> Result<()> {
        if self.read_only {
            return Ok(());
        }
        let mut cs = self.commit.lock();
        if self.is_clean(&cs) {
            return Ok(());
        }
        self.checkpoint_locked(&mut cs)
    }

    /// No commit since the last checkpoint and no dirty page.
    fn is_clean(&self, cs: &CommitState) -> bool {
        cs.lsn == cs.ckpt_lsn && self.state.read().dirty.is_empty()
    }

    pub fn check_poison(&self) -> Result<()> {
        match &*self.poison.lock() {
            Some(reason) => Err(Error::Poisoned {
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    pub fn poisoned(&self) -> Option<String> {
        self.poison.lock().clone()
    }

    fn validate(&self, ops: &[Op]) -> Result<()> {
        let ps = self.pager.ps;
        let mut total = 0usize;
        for op in ops {
            check_tree_name(&op.tree)?;
            if op.key.len() > node::max_key(ps) {
                return Err(Error::KeyTooLarge {
                    len: op.key.len(),
                    max: node::max_key(ps),
                    page_size: ps,
                });
            }
            let vl = op.val.as_ref().map_or(0, Vec::len);
            if vl > MAX_VALUE_LEN {
                return Err(Error::ValueTooLarge {
                    len: vl,
                    max: MAX_VALUE_LEN,
                });
            }
            total += op.key.len() + vl + op.tree.len() + 16;
        }
        if total > u32::MAX as usize / 2 {
            return Err(Error::ValueTooLarge {
                len: total,
                max: u32::MAX as usize / 2,
            });
        }
        Ok(())
    }

    /// Group commit: the first committer to take the commit lock writes and
    /// syncs the log for everyone queued, then applies all their batches.
    pub fn commit(&self, ops: Vec<Op>) -> Result<()> {
        if ops.is_empty() {
            return Ok(());
        }
        self.check_writable()?;
        self.validate(&ops)?;
        self.check_poison()?;
        let slot: Slot = Arc::new(Mutex::new(None));
        self.queue.lock().push(Pending {
            ops,
            slot: slot.clone(),
        });
        let mut cs = self.commit.lock();
        if let Some(r) = slot.lock().take() {
            return r.map_err(Error::GroupCommit);
        }
        let group = std::mem::take(&mut *self.queue.lock());
        let mut r = self.commit_group(&mut cs, &group);
        if r.is_ok() && self.needs_checkpoint(&cs) {
            r = self.checkpoint_locked(&mut cs);
        }
        let shared = r.as_ref().map(|_| ()).map_err(|e| e.to_string());
        for p in &group {
            if !Arc::ptr_eq(&p.slot, &slot) {
                *p.slot.lock() = Some(shared.clone());
            }
        }
        r
    }

    fn needs_checkpoint(&self, cs: &CommitState) -> bool {
        cs.wal.bytes >= self.wal_limit || self.state.read().dirty.len() >= self.dirty_limit
    }

    fn commit_group(&self, cs: &mut CommitState, group: &[Pending]) -> Result<()> {
        self.check_poison()?;
        // Bring the paths into the cache without holding the write lock.
        self.prefetch_group(group.iter().flat_map(|p| &p.ops))?;
        let r = self.log_and_apply(cs, group);
        if let Err(e) = &r {
            self.poison(format!("commit failed: {e}"));
        }
        r
    }

    fn log_and_apply(&self, cs: &mut CommitState, group: &[Pending]) -> Result<()> {
        let placed = group
            .iter()
            .map(|p| self.place_overflow(&p.ops))
            .collect::<Result<Vec<_>>>()?;
        let mut payload = Vec::new();
        for p in group {
            payload.clear();
            batch::encode(&p.ops, &mut payload);
            cs.lsn += 1;
            cs.wal.append(cs.lsn, &payload);
        }
        match self.durability {
            Durability::Sync => {
                cs.wal.flush()?;
                cs.wal.sync()?;
            }
            Durability::Buffered if cs.wal.unflushed() >= BUFFERED_FLUSH => cs.wal.flush()?,
            Durability::Buffered => {}
        }
        let mut st = self.state.write();
        let mut al = self.alloc.lock();
        let mut w = Writer {
            st: &mut st,
            inner: self,
            alloc: &mut al,
        };
        for (p, ovf) in group.iter().zip(&placed) {
            for (op, o) in p.ops.iter().zip(ovf) {
                self.apply_op(&mut w, op, *o)?;
            }
        }
        self.counters
            .commits
            .fetch_add(group.len() as u64, Ordering::Relaxed);
        self.counters.groups.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Writes values too large for a leaf to fresh extents (never referenced
    /// by the durable checkpoint, so writing them early is safe).
    fn place_overflow(&self, ops: &[Op]) -> Result<Vec<Option<(u64, u64)>>> {
        let ps = self.pager.ps;
        ops.iter()
            .map(|op| match &op.val {
                Some(v) if !node::fits_inline(ps, op.key.len(), v.len()) => {
                    let n = self.pager.extent_pages(v.len());
                    let start = self.alloc.lock().alloc(n);
                    self.pager.write_extent(start, Kind::Overflow, v, 0)?;
                    Ok(Some((start, v.len() as u64)))
                }
                _ => Ok(None),
            })
            .collect()
    }

    fn apply_op(&self, w: &mut Writer, op: &Op, ovf: Option<(u64, u64)>) -> Result<()> {
        let old: Option<OldVal> = match &op.val {
            Some(v) => {
                let val = match ovf {
                    Some((pid, len)) => Val::Overflow { pid, len },
                    None => Val::Inline(v),
                };
                w.insert(&op.tree, &op.key, val)?
            }
            None => w.remove(&op.tree, &op.key)?,
        };
        let added = ovf.map_or(0, |(_, len)| self.pager.extent_pages(len as usize));
        let mut freed = 0;
        if let Some((pid, len)) = old.and_then(|o| o.overflow) {
            freed = self.pager.extent_pages(len as usize);
            w.alloc.free_later(pid, freed);
        }
        if added != freed {
            if let Some(tm) = w.st.trees.get_mut(&op.tree) {
                tm.overflow_pages = tm.overflow_pages + added - freed;
            }
        }
        Ok(())
    }

    fn replay(&self, records: Vec<(u64, Vec<u8>)>) -> Result<()> {
        let mut cs = self.commit.lock();
        for (lsn, payload) in records {
            let ops = batch::decode(&payload).map_err(|what| Error::Corrupt {
                path: wal_path(&self.path),
                page: 0,
                offset: 0,
                what: format!("log record {lsn} passed its checksum but does not parse: {what}"),
            })?;
            let placed = self.place_overflow(&ops)?;
            {
                let mut st = self.state.write();
                let mut al = self.alloc.lock();
                let mut w = Writer {
                    st: &mut st,
                    inner: self,
                    alloc: &mut al,
                };
                for (op, o) in ops.iter().zip(placed) {
                    self.apply_op(&mut w, op, o)?;
                }
            }
            cs.lsn = lsn;
            self.counters.replayed.fetch_add(1, Ordering::Relaxed);
            // Keep memory bounded while replaying a long log.
            if self.state.read().dirty.len() >= self.dirty_limit {
                self.checkpoint_locked(&mut cs)?;
            }
        }
        Ok(())
    }

    pub fn sync(&self) -> Result<()> {
        if self.read_only {
            return Ok(()); // nothing was written, so everything is durable
        }
        let mut cs = self.commit.lock();
        self.check_poison()?;
        let r = cs.wal.flush().and_then(|_| cs.wal.sync());
        if let Err(e) = &r {
            self.poison(format!("log sync failed: {e}"));
        }
        r
    }

    pub fn checkpoint(&self) -> Result<()> {
        let mut cs = self.commit.lock();
        self.checkpoint_locked(&mut cs)
    }

    fn checkpoint_locked(&self, cs: &mut CommitState) -> Result<()> {
        self.check_writable()?;
        self.check_poison()?;
        let r = self.write_checkpoint(cs);
        if let Err(e) = &r {
            self.poison(format!("checkpoint failed: {e}"));
        }
        r
    }

    /// Writes the dirty pages to their (fresh) locations, then the catalog
    /// blob, syncs, writes the superblock into the older slot, syncs again.
    /// Only then are pages freed this epoch released for reuse.
    fn write_checkpoint(&self, cs: &mut CommitState) -> Result<()> {
        let ps = self.pager.ps;
        let (mut nodes, trees) = {
            let st = self.state.read();
            let nodes: Vec<(u64, Arc<Node>)> =
                st.dirty.iter().map(|(p, n)| (*p, n.clone())).collect();
            let trees: Vec<(String, TreeMeta)> =
                st.trees.iter().map(|(k, v)| (k.to_string(), *v)).collect();
            (nodes, trees)
        };
        nodes.sort_unstable_by_key(|n| n.0);
        let gen = cs.gen + 1;
        self.pager.write_nodes(&nodes, gen)?;
        let (start, npages, blob, hwm) = {
            let mut al = self.alloc.lock();
            if cs.blob.1 > 0 {
                al.free_later(cs.blob.0, cs.blob.1);
            }
            // Taking the extent can split one merged free range in two: +16 bytes.
            let est = meta::encode_blob(&trees, &al.durable_free_list()).len() + 16;
            let n = self.pager.extent_pages(est);
            let start = al.alloc(n);
            let blob = meta::encode_blob(&trees, &al.durable_free_list());
            assert!(
                self.pager.extent_pages(blob.len()) <= n,
                "catalog outgrew its extent"
            );
            (start, n, blob, al.hwm)
        };
        self.pager.write_extent(start, Kind::Blob, &blob, gen)?;
        if self.pager.size()? < hwm * ps as u64 {
            self.pager.set_len(hwm * ps as u64)?;
        }
        self.pager.sync()?;
        let m = Meta {
            version: FORMAT_VERSION,
            page_size: ps as u32,
            gen,
            lsn: cs.lsn,
            hwm,
            blob_start: start,
            blob_pages: npages as u32,
            blob_len: blob.len() as u32,
            db_id: cs.wal.db_id(),
        };
        self.pager.write_meta(&m)?;
        self.pager.sync()?;
        // Durable: publish the new epoch.
        cs.gen = gen;
        cs.ckpt_lsn = cs.lsn;
        cs.blob = (start, npages);
        cs.wal.reset(gen);
        let mut st = self.state.write();
        for (pid, node) in nodes {
            st.dirty.remove(&pid);
            self.cache.remove(pid);
            self.cache.insert(pid, node, || true);
        }
        debug_assert!(
            st.dirty.is_empty(),
            "dirty pages appeared during a checkpoint"
        );
        let released = self.alloc.lock().release_pending();
        self.reuse_gen.fetch_add(1, Ordering::AcqRel);
        for (s, n) in released {
            for p in s..s + n {
                self.cache.remove(p);
            }
        }
        drop(st);
        self.counters.checkpoints.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    pub fn wal_bytes(&self) -> u64 {
        self.commit.lock().wal.bytes
    }
}

pub(crate) struct CheckSnapshot {
    pub trees: Vec<(String, TreeMeta)>,
    pub blob: (u64, u64),
    pub hwm: u64,
    pub free: Vec<(u64, u64)>,
}

impl Inner {
    /// Checkpoints, then returns the commit guard (held: no writes and no page
    /// reuse while `check` walks) and what to walk.
    pub(crate) fn check_begin(&self) -> Result<(impl Drop + '_, CheckSnapshot)> {
        let mut cs = self.commit.lock();
        // Everything must be on disk to be verified there; a read-only Db
        // has nothing in memory that is not.
        if !self.read_only && !self.is_clean(&cs) {
            self.checkpoint_locked(&mut cs)?;
        }
        let trees = self
            .state
            .read()
            .trees
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect();
        let al = self.alloc.lock();
        let snap = CheckSnapshot {
            trees,
            blob: cs.blob,
            hwm: al.hwm,
            free: al.durable_free_list(),
        };
        drop(al);
        Ok((cs, snap))
    }
}
