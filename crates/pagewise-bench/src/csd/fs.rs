//! The pass-through FUSE filesystem of the emulated compressing drive: every
//! file and directory lives in a backing directory on the real drive; writes
//! are applied there and then metered (see `meter`).
//!
//! Where bytes are counted (docs/benchmarks.md, "Compressing drives"): the
//! mount is made with FUSE writeback caching, so the kernel keeps written
//! pages in its page cache above the mount and writes them back later, coalescing rewrites exactly as it does above a block device
//! (ext4 on the loop device). What reaches `write` is then what a drive would
//! receive, and the backing file is written with O_DIRECT, so the loop device
//! under the backing filesystem sees the same bytes again, with no second
//! page cache in between (unaligned writes, at most the tail of a file, are
//! written through the backing page cache and pushed out at once with
//! `sync_file_range`).
//!
//! Behaviour an engine may notice:
//! - O_DIRECT opens work: the kernel sends their I/O straight to `write` /
//!   `read` (no FUSE page cache). Aligned requests (offset and length 4 KiB
//!   multiples) use the O_DIRECT backing handle (copied into an aligned
//!   buffer, since FUSE request buffers carry no alignment); anything
//!   unaligned uses the buffered one (the kernel keeps the two coherent). A
//!   backing filesystem refusing O_DIRECT (tmpfs) gets buffered I/O only.
//! - Shared writable mmap works (no `direct_io` reply flag): dirty mapped
//!   pages reach `write` when the kernel writes them back (msync, fsync,
//!   close, unmount), flagged as page-cache writes.
//! - O_WRONLY opens are served by a read-write backing handle, so partial
//!   blocks can be read back for metering.
//! - Locks (flock, fcntl) are not implemented here: the kernel then keeps
//!   them locally, which is exact for one process on the mount.
//! - fallocate is passed through and not metered (it writes no data).
//! - Symlinks and extended attributes are not supported (ENOSYS).

use super::meter::{CsdMeter, BLOCK_BYTES};
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow,
    WriteFlags,
};
use pagewise_io::AlignedBuf;
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::ffi::{CString, OsStr};
use std::fs::{File, Metadata, OpenOptions};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long the kernel may cache names and attributes. Every change goes
/// through this mount, so the kernel's caches stay right.
const TTL: Duration = Duration::from_secs(1);

/// Inode numbers of this mount (our own, 1 = root) and their backing paths.
struct Inodes {
    paths: HashMap<u64, PathBuf>,
    ids: HashMap<PathBuf, u64>,
    next: u64,
}

impl Inodes {
    fn new(root: &Path) -> Self {
        Self {
            paths: HashMap::from([(1, root.to_path_buf())]),
            ids: HashMap::from([(root.to_path_buf(), 1)]),
            next: 2,
        }
    }

    fn id_for(&mut self, path: &Path) -> u64 {
        if let Some(id) = self.ids.get(path) {
            return *id;
        }
        let id = self.next;
        self.next += 1;
        self.paths.insert(id, path.to_path_buf());
        self.ids.insert(path.to_path_buf(), id);
        id
    }

    /// After unlink/rmdir: the name is free (open handles keep working by fh).
    fn forget_path(&mut self, path: &Path) {
        self.ids.remove(path);
    }

    /// After a rename: `from` and everything below it now live under `to`.
    fn renamed(&mut self, from: &Path, to: &Path) {
        self.ids.remove(to);
        let moved: Vec<(PathBuf, u64)> = self
            .ids
            .iter()
            .filter(|(p, _)| p.starts_with(from))
            .map(|(p, id)| (p.clone(), *id))
            .collect();
        for (old, id) in moved {
            let rest = old.strip_prefix(from).expect("filtered by prefix");
            let new = if rest.as_os_str().is_empty() {
                to.to_path_buf()
            } else {
                to.join(rest)
            };
            self.ids.remove(&old);
            self.ids.insert(new.clone(), id);
            self.paths.insert(id, new);
        }
    }
}

/// An open file: the buffered backing handle, and an O_DIRECT one for
/// aligned I/O (every open in writeback mode, else O_DIRECT opens only).
struct Handle {
    file: File,
    direct: Option<File>,
}

/// Whether a request can go to an O_DIRECT handle as it is.
fn aligned(offset: u64, len: usize) -> bool {
    let bs = BLOCK_BYTES as u64;
    len > 0 && offset.is_multiple_of(bs) && (len as u64).is_multiple_of(bs)
}

/// Reads into `buf` from `offset` until full or end of file; returns the bytes read.
fn read_full(f: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut got = 0;
    // Bounded: each pass reads at least one byte or stops.
    while got < buf.len() {
        match f.read_at(&mut buf[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// The pass-through filesystem; `meter` is shared with whoever reads the figures.
pub struct PassFs {
    inodes: Mutex<Inodes>,
    handles: RwLock<HashMap<u64, Arc<Handle>>>,
    next_fh: AtomicU64,
    root: PathBuf,
    meter: Arc<CsdMeter>,
    /// Ask the kernel for writeback caching (see the module comment); the
    /// meter records whether it was granted.
    writeback: bool,
}

fn errno(e: std::io::Error) -> Errno {
    Errno::from(e)
}

fn kind_of(m: &Metadata) -> FileType {
    FileType::from_std(m.file_type()).unwrap_or(FileType::RegularFile)
}

fn time(secs: i64, nsecs: i64) -> SystemTime {
    if secs >= 0 {
        UNIX_EPOCH + Duration::new(secs as u64, nsecs as u32)
    } else {
        UNIX_EPOCH
    }
}

fn attr(ino: u64, m: &Metadata) -> FileAttr {
    FileAttr {
        ino: INodeNo(ino),
        size: m.size(),
        blocks: m.blocks(),
        atime: time(m.atime(), m.atime_nsec()),
        mtime: time(m.mtime(), m.mtime_nsec()),
        ctime: time(m.ctime(), m.ctime_nsec()),
        crtime: time(m.ctime(), m.ctime_nsec()),
        kind: kind_of(m),
        perm: (m.mode() & 0o7777) as u16,
        nlink: m.nlink() as u32,
        uid: m.uid(),
        gid: m.gid(),
        rdev: m.rdev() as u32,
        blksize: BLOCK_BYTES as u32,
        flags: 0,
    }
}

fn cpath(p: &Path) -> Result<CString, Errno> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| Errno::EINVAL)
}

/// Reads the 4 KiB block at `start` as the file now holds it, zeros past
/// EOF; through the O_DIRECT handle when there is one (no backing page cache).
fn read_block(h: &Handle, start: u64, buf: &mut [u8]) -> std::io::Result<()> {
    debug_assert_eq!(buf.len(), BLOCK_BYTES);
    buf.fill(0);
    match &h.direct {
        Some(d) => {
            let mut a = AlignedBuf::new(BLOCK_BYTES, BLOCK_BYTES);
            let got = read_full(d, &mut a, start)?;
            buf[..got].copy_from_slice(&a[..got]);
            Ok(())
        }
        None => read_full(&h.file, buf, start).map(|_| ()),
    }
}

/// Writes `data` at `offset` through the buffered handle and makes the
/// backing filesystem write those blocks now, as a drive receiving the
/// write would (no second page cache to coalesce them later).
fn write_through(f: &File, data: &[u8], offset: u64) -> std::io::Result<()> {
    f.write_all_at(data, offset)?;
    let bs = BLOCK_BYTES as u64;
    let start = offset / bs * bs;
    let end = (offset + data.len() as u64).div_ceil(bs) * bs;
    debug_assert!(start <= offset && end >= offset + data.len() as u64);
    let flags = libc::SYNC_FILE_RANGE_WAIT_BEFORE
        | libc::SYNC_FILE_RANGE_WRITE
        | libc::SYNC_FILE_RANGE_WAIT_AFTER;
    // SAFETY: a valid open fd; the range is within i64 for any real file.
    let rc = unsafe {
        libc::sync_file_range(
            f.as_raw_fd(),
            start as libc::off64_t,
            (end - start) as libc::off64_t,
            flags,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Flags for the backing open: no O_DIRECT (see the module comment), no
/// O_APPEND (the kernel sends the offset of each append), no creation flags.
fn backing_flags(flags: i32) -> i32 {
    flags
        & !(libc::O_ACCMODE
            | libc::O_DIRECT
            | libc::O_APPEND
            | libc::O_CREAT
            | libc::O_EXCL
            | libc::O_NOCTTY
            | libc::O_TRUNC)
}

/// [`backing_flags`], and in writeback mode no O_SYNC / O_DSYNC either: the
/// kernel then writes an O_DSYNC file's pages back through whichever open
/// file it picks and sends an explicit fsync for each synchronous write, as
/// it does above a block device; a backing handle opened O_DSYNC would add a
/// journal commit to every writeback that happened to use it.
fn backing_flags_in(flags: i32, writeback: bool) -> i32 {
    let sync = if writeback {
        libc::O_SYNC | libc::O_DSYNC
    } else {
        0
    };
    backing_flags(flags) & !sync
}

impl PassFs {
    /// Requires: `root` is an existing directory. `writeback`: mount with
    /// FUSE writeback caching and write the backing files with O_DIRECT.
    pub fn new(root: &Path, meter: Arc<CsdMeter>, writeback: bool) -> Self {
        assert!(
            root.is_dir(),
            "backing root {} is a directory",
            root.display()
        );
        Self {
            inodes: Mutex::new(Inodes::new(root)),
            handles: RwLock::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            root: root.to_path_buf(),
            meter,
            writeback,
        }
    }

    /// Open reply flags: in writeback mode the kernel keeps a file's cached
    /// pages across opens, as it does for a local filesystem (every change
    /// goes through this mount, so they stay right).
    fn fopen_flags(&self) -> FopenFlags {
        if self.writeback {
            FopenFlags::FOPEN_KEEP_CACHE
        } else {
            FopenFlags::empty()
        }
    }

    fn path(&self, ino: INodeNo) -> Result<PathBuf, Errno> {
        self.inodes
            .lock()
            .paths
            .get(&ino.0)
            .cloned()
            .ok_or(Errno::ENOENT)
    }

    fn child(&self, parent: INodeNo, name: &OsStr) -> Result<PathBuf, Errno> {
        Ok(self.path(parent)?.join(name))
    }

    fn handle(&self, fh: FileHandle) -> Result<Arc<Handle>, Errno> {
        self.handles.read().get(&fh.0).cloned().ok_or(Errno::EBADF)
    }

    /// Registers an open backing file; in writeback mode or with O_DIRECT in
    /// `flags` also opens `path` with O_DIRECT for aligned requests (if the
    /// backing fs allows).
    fn add_handle(&self, file: File, path: &Path, flags: i32) -> u64 {
        let direct = (self.writeback || flags & libc::O_DIRECT != 0)
            .then(|| {
                OpenOptions::new()
                    .read(true)
                    .write(flags & libc::O_ACCMODE != libc::O_RDONLY)
                    .custom_flags(backing_flags_in(flags, self.writeback) | libc::O_DIRECT)
                    .open(path)
                    .ok()
            })
            .flatten();
        let fh = self.next_fh.fetch_add(1, Relaxed);
        self.handles
            .write()
            .insert(fh, Arc::new(Handle { file, direct }));
        fh
    }

    /// Attributes of `path`, registering its inode number.
    fn entry(&self, path: &Path) -> Result<FileAttr, Errno> {
        let m = std::fs::symlink_metadata(path).map_err(errno)?;
        let id = self.inodes.lock().id_for(path);
        Ok(attr(id, &m))
    }

    fn count_direct(&self, flags: i32) {
        if flags & libc::O_DIRECT != 0 {
            self.meter.direct_opens.fetch_add(1, Relaxed);
        }
    }

    fn open_backing(&self, path: &Path, flags: i32) -> Result<File, Errno> {
        let writable = flags & libc::O_ACCMODE != libc::O_RDONLY;
        OpenOptions::new()
            .read(true)
            .write(writable)
            .custom_flags(backing_flags_in(flags, self.writeback))
            .open(path)
            .map_err(errno)
    }

    fn set_times(
        &self,
        path: &Path,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
    ) -> Result<(), Errno> {
        let ts = |t: Option<TimeOrNow>| match t {
            None => libc::timespec {
                tv_sec: 0,
                tv_nsec: libc::UTIME_OMIT,
            },
            Some(TimeOrNow::Now) => libc::timespec {
                tv_sec: 0,
                tv_nsec: libc::UTIME_NOW,
            },
            Some(TimeOrNow::SpecificTime(s)) => {
                let d = s.duration_since(UNIX_EPOCH).unwrap_or_default();
                libc::timespec {
                    tv_sec: d.as_secs() as libc::time_t,
                    tv_nsec: d.subsec_nanos() as libc::c_long,
                }
            }
        };
        let times = [ts(atime), ts(mtime)];
        let c = cpath(path)?;
        // SAFETY: c is a valid C string; times points to two timespecs.
        let r = unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), times.as_ptr(), 0) };
        if r != 0 {
            return Err(errno(std::io::Error::last_os_error()));
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn apply_setattr(
        &self,
        path: &Path,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        fh: Option<FileHandle>,
    ) -> Result<(), Errno> {
        if let Some(m) = mode {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(m)).map_err(errno)?;
        }
        if uid.is_some() || gid.is_some() {
            std::os::unix::fs::lchown(path, uid, gid).map_err(errno)?;
        }
        if let Some(len) = size {
            match fh.map(|h| self.handle(h)) {
                Some(Ok(h)) => h.file.set_len(len).map_err(errno)?,
                _ => OpenOptions::new()
                    .write(true)
                    .open(path)
                    .and_then(|f| f.set_len(len))
                    .map_err(errno)?,
            }
        }
        if atime.is_some() || mtime.is_some() {
            self.set_times(path, atime, mtime)?;
        }
        Ok(())
    }
}

impl Filesystem for PassFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // Large writes arrive whole (up to 1 MiB) where the kernel allows it.
        let _ = config.set_max_write(1 << 20);
        if self.writeback
            && config
                .add_capabilities(fuser::InitFlags::FUSE_WRITEBACK_CACHE)
                .is_ok()
        {
            self.meter.writeback_cache.store(true, Relaxed);
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match self.child(parent, name).and_then(|p| self.entry(&p)) {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        let by_handle = fh
            .and_then(|h| self.handle(h).ok())
            .map(|h| h.file.metadata().map_err(errno));
        let m = match by_handle {
            Some(m) => m,
            None => self
                .path(ino)
                .and_then(|p| std::fs::symlink_metadata(p).map_err(errno)),
        };
        match m {
            Ok(m) => reply.attr(&TTL, &attr(ino.0, &m)),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let r = self.path(ino).and_then(|p| {
            self.apply_setattr(&p, mode, uid, gid, size, atime, mtime, fh)?;
            std::fs::symlink_metadata(&p).map_err(errno)
        });
        match r {
            Ok(m) => reply.attr(&TTL, &attr(ino.0, &m)),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let r = self.child(parent, name).and_then(|p| {
            std::fs::create_dir(&p).map_err(errno)?;
            let perm = std::fs::Permissions::from_mode(mode & !umask & 0o7777);
            std::fs::set_permissions(&p, perm).map_err(errno)?;
            self.entry(&p)
        });
        match r {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let r = self.child(parent, name).and_then(|p| {
            std::fs::remove_file(&p).map_err(errno)?;
            self.inodes.lock().forget_path(&p);
            Ok(())
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let r = self.child(parent, name).and_then(|p| {
            std::fs::remove_dir(&p).map_err(errno)?;
            self.inodes.lock().forget_path(&p);
            Ok(())
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let r = (|| {
            let from = self.child(parent, name)?;
            let to = self.child(newparent, newname)?;
            let (cf, ct) = (cpath(&from)?, cpath(&to)?);
            // SAFETY: valid C strings; renameat2 with the kernel's own flags.
            let rc = unsafe {
                libc::renameat2(
                    libc::AT_FDCWD,
                    cf.as_ptr(),
                    libc::AT_FDCWD,
                    ct.as_ptr(),
                    flags.bits(),
                )
            };
            if rc != 0 {
                return Err(errno(std::io::Error::last_os_error()));
            }
            self.inodes.lock().renamed(&from, &to);
            Ok(())
        })();
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let r = (|| {
            let from = self.path(ino)?;
            let to = self.child(newparent, newname)?;
            std::fs::hard_link(&from, &to).map_err(errno)?;
            self.inodes.lock().ids.insert(to.clone(), ino.0);
            let m = std::fs::symlink_metadata(&to).map_err(errno)?;
            Ok(attr(ino.0, &m))
        })();
        match r {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        self.count_direct(flags.0);
        let r = self.path(ino).and_then(|p| {
            let f = self.open_backing(&p, flags.0)?;
            Ok(self.add_handle(f, &p, flags.0))
        });
        match r {
            Ok(fh) => reply.opened(FileHandle(fh), self.fopen_flags()),
            Err(e) => reply.error(e),
        }
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        self.count_direct(flags);
        let r = self.child(parent, name).and_then(|p| {
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .create_new(flags & libc::O_EXCL != 0)
                .truncate(flags & libc::O_TRUNC != 0)
                .mode(mode & !umask & 0o7777)
                .custom_flags(backing_flags_in(flags, self.writeback))
                .open(&p)
                .map_err(errno)?;
            let a = self.entry(&p)?;
            Ok((a, self.add_handle(f, &p, flags)))
        });
        match r {
            Ok((a, fh)) => {
                reply.created(&TTL, &a, Generation(0), FileHandle(fh), self.fopen_flags())
            }
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let r = self.handle(fh).and_then(|h| {
            let mut buf = AlignedBuf::new(size as usize, BLOCK_BYTES);
            let f = match &h.direct {
                Some(d) if aligned(offset, size as usize) => d,
                _ => &h.file,
            };
            let got = read_full(f, &mut buf, offset).map_err(errno)?;
            buf.set_len(got);
            Ok(buf)
        });
        match r {
            Ok(b) => reply.data(&b),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let r = self.handle(fh).and_then(|h| {
            match &h.direct {
                Some(d) if aligned(offset, data.len()) => d
                    .write_all_at(&AlignedBuf::from_slice(data, BLOCK_BYTES), offset)
                    .map_err(errno)?,
                _ if self.writeback => write_through(&h.file, data, offset).map_err(errno)?,
                _ => h.file.write_all_at(data, offset).map_err(errno)?,
            }
            let cached = write_flags.contains(WriteFlags::FUSE_WRITE_CACHE);
            self.meter
                .record(offset, data, cached, &mut |s, b| read_block(&h, s, b))
                .map_err(errno)
        });
        match r {
            Ok(()) => reply.written(data.len() as u32),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.handles.write().remove(&fh.0);
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        let r = self.handle(fh).and_then(|h| {
            if datasync {
                h.file.sync_data().map_err(errno)
            } else {
                h.file.sync_all().map_err(errno)
            }
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn opendir(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        reply.opened(FileHandle(0), FopenFlags::empty());
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let r = self.path(ino).and_then(|dir| {
            let mut names: Vec<(PathBuf, FileType)> = std::fs::read_dir(&dir)
                .map_err(errno)?
                .flatten()
                .map(|e| {
                    let kind = e
                        .file_type()
                        .ok()
                        .and_then(FileType::from_std)
                        .unwrap_or(FileType::RegularFile);
                    (e.path(), kind)
                })
                .collect();
            // A stable order, so the kernel's offsets resume where they left off.
            names.sort_by(|a, b| a.0.cmp(&b.0));
            Ok(names)
        });
        let names = match r {
            Ok(n) => n,
            Err(e) => return reply.error(e),
        };
        let mut all: Vec<(u64, FileType, std::ffi::OsString)> = vec![
            (ino.0, FileType::Directory, ".".into()),
            (1, FileType::Directory, "..".into()),
        ];
        {
            let mut inodes = self.inodes.lock();
            for (p, kind) in &names {
                let name = p.file_name().unwrap_or_default().to_os_string();
                all.push((inodes.id_for(p), *kind, name));
            }
        }
        for (i, (id, kind, name)) in all.iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(*id), (i + 1) as u64, *kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let r = self
            .path(ino)
            .and_then(|p| File::open(p).and_then(|d| d.sync_all()).map_err(errno));
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let c = match cpath(&self.root) {
            Ok(c) => c,
            Err(e) => return reply.error(e),
        };
        // SAFETY: statvfs fills the zeroed struct; c is a valid C string.
        let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
        if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
            return reply.error(errno(std::io::Error::last_os_error()));
        }
        reply.statfs(
            s.f_blocks,
            s.f_bfree,
            s.f_bavail,
            s.f_files,
            s.f_ffree,
            s.f_bsize as u32,
            s.f_namemax as u32,
            s.f_frsize as u32,
        );
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: fuser::AccessFlags, reply: ReplyEmpty) {
        reply.ok();
    }

    fn fallocate(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        self.meter.fallocates.fetch_add(1, Relaxed);
        let r = self.handle(fh).and_then(|h| {
            // SAFETY: a valid open fd; the kernel checked the arguments' ranges.
            let rc = unsafe {
                libc::fallocate(
                    h.file.as_raw_fd(),
                    mode,
                    offset as libc::off_t,
                    length as libc::off_t,
                )
            };
            if rc != 0 {
                return Err(errno(std::io::Error::last_os_error()));
            }
            Ok(())
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renames_move_whole_subtrees() {
        let mut i = Inodes::new(Path::new("/r"));
        let a = i.id_for(Path::new("/r/a"));
        let b = i.id_for(Path::new("/r/a/b"));
        let c = i.id_for(Path::new("/r/c"));
        i.renamed(Path::new("/r/a"), Path::new("/r/c"));
        assert_eq!(i.paths[&a], Path::new("/r/c"));
        assert_eq!(i.paths[&b], Path::new("/r/c/b"));
        assert_eq!(i.ids.get(Path::new("/r/c")), Some(&a));
        assert_eq!(i.ids.get(Path::new("/r/a")), None);
        assert_ne!(a, c);
        // "/r/ab" is not under "/r/a".
        let ab = i.id_for(Path::new("/r/ab"));
        i.renamed(Path::new("/r/c"), Path::new("/r/d"));
        assert_eq!(i.paths[&ab], Path::new("/r/ab"));
    }

    #[test]
    fn backing_opens_drop_direct_and_append() {
        let f = backing_flags(libc::O_WRONLY | libc::O_DIRECT | libc::O_APPEND | libc::O_DSYNC);
        assert_eq!(f, libc::O_DSYNC);
        let flags = libc::O_RDWR | libc::O_SYNC | libc::O_NOATIME;
        assert_eq!(backing_flags_in(flags, true), libc::O_NOATIME);
        assert_eq!(
            backing_flags_in(flags, false),
            libc::O_SYNC | libc::O_NOATIME
        );
    }
}
