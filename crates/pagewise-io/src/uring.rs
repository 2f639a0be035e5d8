//! io_uring backend: the same file as [`FileBackend`], but `queue(depth)` hands
//! out a real submission ring so `depth` I/Os are at the device at once. That is
//! how an SSD reaches its rated IOPS (seeds 000-002): one thread, many
//! outstanding requests, no thread per I/O.

use crate::backend::check_aligned;
use crate::{
    Backend, Completion, FileBackend, IoError, IoOp, IoQueue, OpKind, OpenOptions, Result,
};
use io_uring::{opcode, types, IoUring};
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Which I/O engine serves queued I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// pread/pwrite, one I/O at a time per thread.
    Sync,
    /// io_uring with a ring per queue.
    Uring,
}

impl Engine {
    pub fn name(self) -> &'static str {
        match self {
            Engine::Sync => "sync",
            Engine::Uring => "uring",
        }
    }
}

impl std::fmt::Display for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Engine {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "sync" | "psync" => Ok(Engine::Sync),
            "uring" | "io_uring" => Ok(Engine::Uring),
            other => Err(format!(
                "unknown I/O engine '{other}': use 'uring' or 'sync'"
            )),
        }
    }
}

/// Opens `path` with the chosen engine. Shared (`Arc`) because backends are
/// used from many threads; wrap it in [`crate::Accounted`] to count I/O.
pub fn open_engine(
    path: impl AsRef<Path>,
    opts: &OpenOptions,
    engine: Engine,
) -> Result<Arc<dyn Backend>> {
    Ok(match engine {
        Engine::Sync => Arc::new(FileBackend::open(path.as_ref(), opts)?),
        Engine::Uring => Arc::new(UringBackend::open(path.as_ref(), opts)?),
    })
}

/// A [`FileBackend`] whose queues are io_uring rings. Positional
/// `read_at`/`write_at`/`sync` stay synchronous: a single blocking I/O gains
/// nothing from a ring.
pub struct UringBackend {
    file: FileBackend,
    /// Rings of finished queues, kept for the next `queue()` call: creating a
    /// ring (io_uring_setup + three mmaps) costs about as much as one 4 KiB
    /// read on our VM, which short-lived queues (a scan's read-ahead, a
    /// commit group's prefetch) would otherwise pay every time.
    idle: parking_lot::Mutex<Vec<(usize, IoUring)>>,
}

/// Idle rings kept per backend (one per concurrently used queue is enough).
const IDLE_RINGS: usize = 4;

impl std::fmt::Debug for UringBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UringBackend")
            .field("file", &self.file)
            .field("idle_rings", &self.idle.lock().len())
            .finish()
    }
}

impl UringBackend {
    /// Opens like [`FileBackend::open`] (O_DIRECT with fallback, alignment
    /// from the device), then checks that this process may create a ring:
    /// seccomp filters and `kernel.io_uring_disabled` return ENOSYS/EPERM.
    pub fn open(path: &Path, opts: &OpenOptions) -> Result<Self> {
        probe_uring()?;
        Ok(Self::from_file(FileBackend::open(path, opts)?))
    }

    /// Wraps an already opened file; the caller has checked [`probe_uring`]
    /// (a queue on a machine without io_uring fails with `Unsupported`).
    pub fn from_file(file: FileBackend) -> Self {
        Self {
            file,
            idle: parking_lot::Mutex::new(Vec::new()),
        }
    }

    /// Rings kept for reuse by the next queue.
    pub fn idle_rings(&self) -> usize {
        self.idle.lock().len()
    }

    /// An idle ring of `depth` entries, or a new one.
    fn take_ring(&self, depth: usize) -> Result<IoUring> {
        let mut idle = self.idle.lock();
        if let Some(i) = idle.iter().position(|(d, _)| *d == depth) {
            return Ok(idle.swap_remove(i).1);
        }
        drop(idle);
        IoUring::new(depth as u32).map_err(unsupported)
    }

    /// Keeps a ring whose SQ and CQ are empty for reuse.
    fn return_ring(&self, depth: usize, ring: IoUring) {
        let mut idle = self.idle.lock();
        if idle.len() < IDLE_RINGS {
            idle.push((depth, ring));
        }
    }
}

/// Creates and drops a tiny ring to learn whether io_uring works here.
pub fn probe_uring() -> Result<()> {
    IoUring::new(2).map(drop).map_err(unsupported)
}

pub(crate) fn unsupported(e: std::io::Error) -> IoError {
    let why = match e.raw_os_error() {
        Some(libc::ENOSYS) => "the kernel or a seccomp filter does not allow io_uring_setup",
        Some(libc::EPERM) => {
            "io_uring_setup is not permitted (kernel.io_uring_disabled or a sandbox)"
        }
        _ => "io_uring_setup failed",
    };
    IoError::Unsupported(format!("{why} ({e})"))
}

impl Backend for UringBackend {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.file.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.file.write_at(buf, offset)
    }
    fn sync(&self) -> Result<()> {
        self.file.sync()
    }
    crate::backend::forward_metadata!(file);
    fn queue(&self, depth: usize) -> Result<Box<dyn IoQueue + '_>> {
        Ok(Box::new(UringQueue::new(self, depth)?))
    }
    fn engine(&self) -> &'static str {
        "uring"
    }
}

/// One ring, owned by one thread. Each in-flight op sits in `slots[i]` (its
/// `user_data` is `i`) so its buffer stays alive until the kernel is done.
pub struct UringQueue<'a> {
    backend: &'a UringBackend,
    ring: Option<IoUring>,
    depth: usize,
    slots: Vec<Option<IoOp>>,
    free: Vec<usize>,
    /// Pushed to the SQ but not yet handed to the kernel.
    unsubmitted: usize,
    /// Finished (or rejected before reaching the kernel), not yet returned.
    ready: Vec<Completion>,
    /// Reused scratch space for (user_data, result) pairs of reaped CQEs.
    cqes: Vec<(u64, i32)>,
}

impl<'a> UringQueue<'a> {
    fn new(backend: &'a UringBackend, depth: usize) -> Result<Self> {
        let depth = depth.clamp(1, 32768);
        let ring = backend.take_ring(depth)?;
        Ok(Self {
            backend,
            ring: Some(ring),
            depth,
            slots: (0..depth).map(|_| None).collect(),
            free: (0..depth).rev().collect(),
            unsubmitted: 0,
            ready: Vec::new(),
            cqes: Vec::with_capacity(depth),
        })
    }

    fn path(&self) -> &Path {
        self.backend.path()
    }

    fn ring(&mut self) -> &mut IoUring {
        self.ring
            .as_mut()
            .expect("a queue has its ring until dropped")
    }

    fn entry(&self, slot: usize, op: &mut IoOp) -> io_uring::squeue::Entry {
        let fd = types::Fd(self.backend.file.file().as_raw_fd());
        let len = op.buf.len() as u32;
        let e = match op.kind {
            OpKind::Read => opcode::Read::new(fd, op.buf.as_mut_ptr(), len)
                .offset(op.offset)
                .build(),
            OpKind::Write => opcode::Write::new(fd, op.buf.as_ptr(), len)
                .offset(op.offset)
                .build(),
        };
        e.user_data(slot as u64)
    }

    /// Hands queued SQEs to the kernel and waits for `want` completions.
    fn enter(&mut self, want: usize) -> Result<()> {
        loop {
            match self.ring().submit_and_wait(want) {
                Ok(_) => {
                    self.unsubmitted = 0;
                    return Ok(());
                }
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(source) => {
                    return Err(IoError::Io {
                        op: "io_uring_enter",
                        path: self.path().to_path_buf(),
                        offset: 0,
                        len: 0,
                        source,
                    })
                }
            }
        }
    }

    /// Moves every available CQE into `ready`.
    fn reap(&mut self) {
        let mut cqes = std::mem::take(&mut self.cqes);
        cqes.extend(
            self.ring()
                .completion()
                .map(|c| (c.user_data(), c.result())),
        );
        for (slot, res) in cqes.drain(..) {
            let slot = slot as usize;
            let op = self.slots[slot].take().expect("CQE for an empty slot");
            self.free.push(slot);
            let result = outcome(self.path(), &op, res);
            if result.is_ok() && op.kind == OpKind::Write {
                RING_WRITE_BYTES.fetch_add(op.buf.len() as u64, Ordering::Relaxed);
            }
            self.ready.push(Completion { op, result });
        }
        self.cqes = cqes;
    }

    fn in_kernel(&self) -> usize {
        self.depth - self.free.len()
    }
}

/// Bytes this process wrote through io_uring queues (successful writes).
/// They bypass write(2), so /proc/self/io `wchar` does not see them; a
/// harness that reports "bytes handed to the kernel" adds this counter.
static RING_WRITE_BYTES: AtomicU64 = AtomicU64::new(0);

/// Total bytes written through io_uring queues by this process so far.
pub fn ring_write_bytes() -> u64 {
    RING_WRITE_BYTES.load(Ordering::Relaxed)
}

/// Turns a CQE result into the typed error a pread/pwrite would have given.
fn outcome(path: &Path, op: &IoOp, res: i32) -> Result<()> {
    transfer_outcome(path, op.kind, op.offset, op.buf.len(), res)
}

/// The typed result of one `len`-byte transfer at `offset` whose CQE said `res`.
pub(crate) fn transfer_outcome(
    path: &Path,
    kind: OpKind,
    offset: u64,
    len: usize,
    res: i32,
) -> Result<()> {
    let name = match kind {
        OpKind::Read => "read",
        OpKind::Write => "write",
    };
    if res < 0 {
        return Err(IoError::Io {
            op: name,
            path: path.to_path_buf(),
            offset,
            len,
            source: std::io::Error::from_raw_os_error(-res),
        });
    }
    if (res as usize) < len {
        return Err(IoError::Short {
            op: name,
            path: path.to_path_buf(),
            offset,
            len,
            done: res as usize,
        });
    }
    Ok(())
}

impl IoQueue for UringQueue<'_> {
    fn depth(&self) -> usize {
        self.depth
    }

    fn in_flight(&self) -> usize {
        self.in_kernel() + self.ready.len()
    }

    fn submit(&mut self, mut op: IoOp) -> Result<()> {
        if self.in_flight() >= self.depth {
            return Err(IoError::Invalid {
                path: self.path().to_path_buf(),
                what: format!(
                    "queue full ({} in flight): wait before submitting",
                    self.depth
                ),
            });
        }
        if op.buf.len() > u32::MAX as usize {
            let e = IoError::Invalid {
                path: self.path().to_path_buf(),
                what: format!(
                    "one I/O of {} bytes exceeds io_uring's 4 GiB limit; split it",
                    op.buf.len()
                ),
            };
            self.ready.push(Completion { op, result: Err(e) });
            return Ok(());
        }
        let align = self.backend.alignment();
        if let Err(e) = check_aligned(self.path(), align, op.buf.as_ptr(), op.buf.len(), op.offset)
        {
            // Returned through the completion so the caller gets its buffer back.
            self.ready.push(Completion { op, result: Err(e) });
            return Ok(());
        }
        let slot = self.free.pop().expect("free slot while below depth");
        let entry = self.entry(slot, &mut op);
        self.slots[slot] = Some(op);
        // SAFETY: the buffer is owned by `slots[slot]` until its CQE is reaped,
        // and the fd lives as long as `backend`, which outlives this queue.
        let pushed = unsafe { self.ring().submission().push(&entry) };
        if pushed.is_err() {
            // SQ is as large as `depth`, so it is only full with unsubmitted
            // entries: hand them to the kernel and retry.
            self.enter(0)?;
            unsafe { self.ring().submission().push(&entry) }.expect("SQ has room after submit");
        }
        self.unsubmitted += 1;
        Ok(())
    }

    fn wait(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<()> {
        self.reap();
        let want = min
            .min(self.in_flight())
            .saturating_sub(self.ready.len())
            .min(self.in_kernel());
        if want > 0 || self.unsubmitted > 0 {
            self.enter(want)?;
            self.reap();
        }
        out.append(&mut self.ready);
        Ok(())
    }
}

impl Drop for UringQueue<'_> {
    /// The kernel may still write into buffers we own: wait for every
    /// in-flight op before the slots (and their buffers) are freed.
    fn drop(&mut self) {
        while self.in_kernel() > 0 {
            if self.enter(1).is_err() {
                // Cannot wait: leak the buffers rather than free memory the
                // kernel may still DMA into (and never reuse this ring).
                self.slots.drain(..).flatten().for_each(std::mem::forget);
                return;
            }
            self.reap();
        }
        // Every submitted op was reaped, so SQ and CQ are empty: the ring
        // can serve the next queue on this backend.
        if let Some(ring) = self.ring.take() {
            self.backend.return_ring(self.depth, ring);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AlignedBuf, DirectMode};

    fn rw() -> OpenOptions {
        OpenOptions {
            write: true,
            create: true,
            create_new: false,
            direct: DirectMode::Try,
        }
    }

    fn pattern(i: u64, len: usize, align: usize) -> AlignedBuf {
        let mut b = AlignedBuf::new(len, align);
        b.iter_mut()
            .enumerate()
            .for_each(|(j, x)| *x = (i as usize * 31 + j * 7) as u8);
        b
    }

    /// An I/O of block `i` (blocks as long as `buf`).
    fn block_op(kind: OpKind, i: u64, buf: AlignedBuf) -> IoOp {
        IoOp {
            kind,
            offset: i * buf.len() as u64,
            buf,
            tag: i,
        }
    }

    fn collect(q: &mut dyn IoQueue, n: usize) -> Vec<Completion> {
        let mut out = Vec::new();
        while out.len() < n {
            q.wait(1, &mut out).unwrap();
        }
        out
    }

    #[test]
    fn ring_writes_read_back_with_pread() {
        let dir = tempfile::tempdir().unwrap();
        let b = UringBackend::open(&dir.path().join("f"), &rw()).unwrap();
        assert_eq!(b.engine(), "uring");
        let a = b.alignment().max(512);
        b.set_len(64 * a as u64).unwrap();
        let mut q = b.queue(8).unwrap();
        let written0 = ring_write_bytes();
        for i in 0..8u64 {
            q.submit(block_op(OpKind::Write, i, pattern(i, a, a)))
                .unwrap();
        }
        for c in collect(&mut *q, 8) {
            c.result.unwrap();
        }
        drop(q);
        // Other tests may write through rings meanwhile: at least ours counted.
        assert!(ring_write_bytes() - written0 >= 8 * a as u64);
        for i in 0..8u64 {
            let mut r = AlignedBuf::new(a, a);
            b.read_at(&mut r, i * a as u64).unwrap();
            assert_eq!(&r[..], &pattern(i, a, a)[..], "block {i}");
        }
    }

    #[test]
    fn rings_are_reused_with_empty_queues() {
        let dir = tempfile::tempdir().unwrap();
        let b = UringBackend::open(&dir.path().join("f"), &rw()).unwrap();
        let a = b.alignment().max(512);
        b.set_len(64 * a as u64).unwrap();
        for round in 0..3u64 {
            let mut q = b.queue(8).unwrap();
            assert_eq!(b.idle_rings(), 0, "round {round}: the idle ring was taken");
            for i in 0..8u64 {
                q.submit(block_op(OpKind::Write, i, pattern(i + round * 100, a, a)))
                    .unwrap();
            }
            // Dropped with all eight in flight: drop waits, then keeps the ring.
            drop(q);
            assert_eq!(b.idle_rings(), 1, "round {round}");
            let mut q = b.queue(8).unwrap();
            for i in 0..8u64 {
                q.submit(block_op(OpKind::Read, i, AlignedBuf::new(a, a)))
                    .unwrap();
            }
            // No stale completion from the earlier queue may show up here.
            let done = collect(&mut *q, 8);
            assert_eq!(done.len(), 8);
            for c in done {
                let i = c.op.tag;
                assert_eq!(&c.op.buf[..], &pattern(i + round * 100, a, a)[..]);
            }
            assert_eq!(q.in_flight(), 0);
        }
        // Another depth gets a ring of its own; at most IDLE_RINGS are kept.
        let qs: Vec<_> = (0..IDLE_RINGS + 2).map(|_| b.queue(4).unwrap()).collect();
        drop(qs);
        assert_eq!(b.idle_rings(), IDLE_RINGS);
    }

    #[test]
    fn pwrite_data_reads_back_through_ring() {
        let dir = tempfile::tempdir().unwrap();
        let b = UringBackend::open(&dir.path().join("f"), &rw()).unwrap();
        let a = b.alignment().max(512);
        for i in 0..4u64 {
            b.write_at(&pattern(i, a, a), i * a as u64).unwrap();
        }
        let mut q = b.queue(4).unwrap();
        for i in (0..4u64).rev() {
            q.submit(block_op(OpKind::Read, i, AlignedBuf::new(a, a)))
                .unwrap();
        }
        let done = collect(&mut *q, 4);
        assert_eq!(done.len(), 4);
        for c in done {
            c.result.unwrap();
            assert_eq!(&c.op.buf[..], &pattern(c.op.tag, a, a)[..]);
        }
    }

    #[test]
    fn depth_32_really_has_32_in_flight() {
        let dir = tempfile::tempdir().unwrap();
        let b = UringBackend::open(&dir.path().join("f"), &rw()).unwrap();
        let a = b.alignment().max(512);
        b.set_len(32 * a as u64).unwrap();
        let mut q = b.queue(32).unwrap();
        for i in 0..32u64 {
            q.submit(block_op(OpKind::Read, i, AlignedBuf::new(a, a)))
                .unwrap();
        }
        assert_eq!(q.in_flight(), 32);
        let extra = IoOp {
            kind: OpKind::Read,
            offset: 0,
            buf: AlignedBuf::new(a, a),
            tag: 99,
        };
        assert!(matches!(q.submit(extra), Err(IoError::Invalid { .. })));
        let done = collect(&mut *q, 32);
        assert_eq!(q.in_flight(), 0);
        let mut tags: Vec<u64> = done.iter().map(|c| c.op.tag).collect();
        tags.sort_unstable();
        assert_eq!(tags, (0..32).collect::<Vec<_>>());
    }

    #[test]
    fn short_read_and_misalignment_are_typed() {
        let dir = tempfile::tempdir().unwrap();
        let b = UringBackend::open(&dir.path().join("f"), &rw()).unwrap();
        let a = b.alignment().max(512);
        b.set_len(a as u64).unwrap();
        let mut q = b.queue(4).unwrap();
        let past_end = IoOp {
            kind: OpKind::Read,
            offset: 0,
            buf: AlignedBuf::new(2 * a, a),
            tag: 1,
        };
        q.submit(past_end).unwrap();
        let c = collect(&mut *q, 1).pop().unwrap();
        match c.result {
            Err(IoError::Short {
                done,
                offset: 0,
                ref path,
                ..
            }) => {
                assert_eq!(done, a);
                assert!(path.ends_with("f"));
            }
            ref other => panic!("expected a short read, got {other:?}"),
        }
        if b.is_direct() {
            let odd = IoOp {
                kind: OpKind::Read,
                offset: 100,
                buf: AlignedBuf::new(a, a),
                tag: 2,
            };
            q.submit(odd).unwrap();
            let c = collect(&mut *q, 1).pop().unwrap();
            assert!(matches!(
                c.result,
                Err(IoError::Misaligned { what: "offset", .. })
            ));
            assert_eq!(c.op.tag, 2, "the buffer comes back with the error");
        }
    }

    #[test]
    fn negative_result_is_an_io_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, vec![0u8; 8192]).unwrap();
        // Read-only open: a write through the ring fails with EBADF.
        let ro = OpenOptions {
            direct: DirectMode::Off,
            ..Default::default()
        };
        let b = UringBackend::open(&p, &ro).unwrap();
        let mut q = b.queue(2).unwrap();
        let op = IoOp {
            kind: OpKind::Write,
            offset: 4096,
            buf: AlignedBuf::new(4096, 4096),
            tag: 7,
        };
        q.submit(op).unwrap();
        let c = collect(&mut *q, 1).pop().unwrap();
        match c.result {
            Err(IoError::Io {
                op: "write",
                offset: 4096,
                ref source,
                ..
            }) => {
                assert_eq!(source.raw_os_error(), Some(libc::EBADF));
            }
            ref other => panic!("expected EBADF, got {other:?}"),
        }
    }

    #[test]
    fn engine_names_parse() {
        assert_eq!("uring".parse::<Engine>().unwrap(), Engine::Uring);
        assert_eq!("sync".parse::<Engine>().unwrap(), Engine::Sync);
        assert!("aio".parse::<Engine>().unwrap_err().contains("uring"));
        let dir = tempfile::tempdir().unwrap();
        let b = open_engine(dir.path().join("f"), &rw(), Engine::Sync).unwrap();
        assert_eq!(b.engine(), "sync");
    }

    #[test]
    fn unavailable_uring_says_what_to_do() {
        for errno in [libc::ENOSYS, libc::EPERM] {
            let e = unsupported(std::io::Error::from_raw_os_error(errno));
            assert!(matches!(e, IoError::Unsupported(_)));
            assert!(e.to_string().contains("--engine sync"), "{e}");
        }
    }
}
