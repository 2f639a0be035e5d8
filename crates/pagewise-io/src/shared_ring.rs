//! One io_uring shared by every thread that calls `read_at`.
//!
//! Many threads each doing a blocking pread pay a full system call, a device
//! doorbell and an interrupt per read; on a VM each of those is a VM exit, and
//! CPU per read rather than the device caps how far readers scale. Here reads
//! that arrive together go to the device in one `io_uring_enter` and their
//! completions are reaped together, so those costs are shared by the batch.
//!
//! Design: leader/follower combining (no ring thread, so no extra thread hop
//! per read). A reader queues its request under a short mutex. If nobody
//! leads, it becomes the leader: it moves queued requests into the submission
//! queue, submits and waits for at least one completion, fills in every
//! completed request and unparks its owner (one futex wake per read, never a
//! broadcast), and repeats while its own read is outstanding. Readers arriving
//! meanwhile only queue and park; the leader picks them up after its next
//! completion, while the reads already in flight keep the device busy. When
//! its own read is done the leader submits what was queued meanwhile and hands
//! leadership to a thread whose read is still outstanding (or gives it up when
//! none is), so every caller returns as soon as its own read is done.
//!
//! Why not a dedicated ring thread (readers queue, one thread submits and
//! reaps)? It keeps the submitter and the waiter the same thread, which suits
//! io_uring (a read's completion runs as task work in the thread that
//! submitted it, so after a hand-off here the old leader is interrupted to
//! post the CQE). But it adds a wake-up per read (reader -> ring thread ->
//! reader) and measured worse on a 2-core VM: 6.1k vs 13.8k reads/s on one
//! thread, no better at 8 (docs/benchmarks.md).
//!
//! Only reads are batched: writes, sync and metadata go to the inner backend.

use crate::backend::{check_aligned, forward_metadata};
use crate::uring::{transfer_outcome, unsupported};
use crate::{Backend, IoError, IoQueue, OpKind, Result};
use io_uring::{opcode, types, IoUring};
use parking_lot::{Mutex, MutexGuard};
use std::collections::VecDeque;
use std::os::unix::io::RawFd;
use std::sync::atomic::{AtomicI32, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::thread::Thread;

/// Reads in flight at once; more wait in the queue for a free slot.
pub const SHARED_RING_DEPTH: usize = 64;

/// Request states. Only the leader moves a request to `DONE` or `LEAD`.
const WAITING: u8 = 0;
const DONE: u8 = 1;
/// The owner is to take over as leader (its read is still outstanding).
const LEAD: u8 = 2;

/// Counters of a [`SharedRing`], for tests and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct RingStats {
    /// `read_at` calls that went through the ring.
    pub reads: u64,
    /// `io_uring_enter` calls that handed at least one read to the kernel.
    pub submits: u64,
    /// Reads handed to the kernel (sum over `submits`).
    pub submitted: u64,
    /// Completions reaped.
    pub completions: u64,
    /// Most reads handed over by one `io_uring_enter`.
    pub max_batch: u64,
    /// Times a leader passed leadership to another thread.
    pub handoffs: u64,
    /// Short or interrupted reads redone with the inner backend's pread.
    pub redone: u64,
}

#[derive(Debug, Default)]
struct Counters {
    reads: AtomicU64,
    submits: AtomicU64,
    submitted: AtomicU64,
    completions: AtomicU64,
    max_batch: AtomicU64,
    handoffs: AtomicU64,
    redone: AtomicU64,
}

/// A [`Backend`] that serves `read_at` from many threads through one io_uring.
pub struct SharedRing {
    inner: Arc<dyn Backend>,
    fd: RawFd,
    /// Requests not yet in the ring, and whether some thread leads.
    pending: Mutex<Pending>,
    /// The ring and its in-flight requests: locked by the leader only.
    core: Mutex<Core>,
    counters: Counters,
    /// Test hook: the next leader waits until this many requests are queued
    /// before its first submit (0 = off), so batching can be asserted.
    #[cfg(test)]
    hold_for: std::sync::atomic::AtomicUsize,
}

#[derive(Default)]
struct Pending {
    queue: VecDeque<Arc<Request>>,
    leader: bool,
}

struct Core {
    ring: IoUring,
    /// `slots[i]` is the request whose SQE carries `user_data == i`; it keeps
    /// the request (and its owner's `Thread`) alive until the CQE is reaped.
    slots: Vec<Option<Arc<Request>>>,
    free: Vec<usize>,
    /// SQEs pushed but not yet consumed by the kernel.
    unsubmitted: usize,
}

/// One `read_at` call.
struct Request {
    buf: *mut u8,
    len: usize,
    offset: u64,
    owner: Thread,
    state: AtomicU8,
    /// The CQE result, written before `state` becomes `DONE`.
    res: AtomicI32,
}

// SAFETY: `buf` is never dereferenced by Rust code; it is only handed to the
// kernel in an SQE. It points into the `&mut [u8]` that the owning thread
// borrowed for `read_at`, and that call does not return (not even by panic,
// see `Call::drop`) until the request is `DONE`, i.e. its CQE was reaped and
// the kernel no longer writes into it.
unsafe impl Send for Request {}
unsafe impl Sync for Request {}

impl Request {
    fn is_done(&self) -> bool {
        self.state.load(Ordering::Acquire) == DONE
    }

    /// Publishes the result and wakes the owner (the leader holds an `Arc`,
    /// so the `Thread` stays valid even if the owner returns at once).
    fn complete(&self, res: i32) {
        self.res.store(res, Ordering::Relaxed);
        self.state.store(DONE, Ordering::Release);
        self.owner.unpark();
    }
}

impl std::fmt::Debug for SharedRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedRing")
            .field("inner", &self.inner)
            .field("stats", &self.stats())
            .finish()
    }
}

impl SharedRing {
    /// Wraps `inner`, which must be a plain file ([`Backend::raw_fd`] is
    /// `Some`): reads bypass it and go to its descriptor. Fails with
    /// [`IoError::Unsupported`] when io_uring cannot be set up here, and with
    /// [`IoError::Invalid`] when the backend is not a plain file (simulated,
    /// fault-injecting, compressing); callers can then use `inner` directly.
    pub fn new(inner: Arc<dyn Backend>) -> Result<Self> {
        Self::with_depth(inner, SHARED_RING_DEPTH)
    }

    /// Like [`SharedRing::new`] with `depth` reads in flight at most.
    pub fn with_depth(inner: Arc<dyn Backend>, depth: usize) -> Result<Self> {
        let fd = inner.raw_fd().ok_or_else(|| IoError::Invalid {
            path: inner.path().to_path_buf(),
            what: "is not a plain file (simulated or wrapped), so a shared ring cannot read it directly; use it without one".into(),
        })?;
        let depth = depth.clamp(1, 4096);
        let ring = IoUring::new(depth as u32).map_err(unsupported)?;
        Ok(Self {
            inner,
            fd,
            pending: Mutex::new(Pending::default()),
            core: Mutex::new(Core {
                ring,
                slots: (0..depth).map(|_| None).collect(),
                free: (0..depth).rev().collect(),
                unsubmitted: 0,
            }),
            counters: Counters::default(),
            #[cfg(test)]
            hold_for: std::sync::atomic::AtomicUsize::new(0),
        })
    }

    pub fn inner(&self) -> &Arc<dyn Backend> {
        &self.inner
    }

    pub fn stats(&self) -> RingStats {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        RingStats {
            reads: get(&c.reads),
            submits: get(&c.submits),
            submitted: get(&c.submitted),
            completions: get(&c.completions),
            max_batch: get(&c.max_batch),
            handoffs: get(&c.handoffs),
            redone: get(&c.redone),
        }
    }

    /// Queues `req`; true when the caller must lead.
    fn enqueue(&self, req: &Arc<Request>) -> bool {
        self.counters.reads.fetch_add(1, Ordering::Relaxed);
        let mut p = self.pending.lock();
        p.queue.push_back(req.clone());
        !std::mem::replace(&mut p.leader, true)
    }

    /// Drives the ring until `me` is done, then passes leadership on.
    fn lead(&self, me: &Request) {
        let mut core = self.core.lock();
        #[cfg(test)]
        self.hold_until_queued();
        loop {
            self.fill(&mut core);
            if me.is_done() {
                break;
            }
            // `me` is in a slot or, with every slot taken, still queued:
            // either way a read is in flight, so waiting for one terminates.
            self.enter(&mut core, 1);
            self.reap(&mut core);
        }
        if core.unsubmitted > 0 {
            self.enter(&mut core, 0);
        }
        self.hand_off(core);
    }

    /// Moves queued requests into free slots and the submission queue.
    fn fill(&self, core: &mut Core) {
        let mut p = self.pending.lock();
        while !core.free.is_empty() && !core.ring.submission().is_full() {
            let Some(req) = p.queue.pop_front() else {
                break;
            };
            let slot = core.free.pop().expect("checked non-empty");
            let entry = opcode::Read::new(types::Fd(self.fd), req.buf, req.len as u32)
                .offset(req.offset)
                .build()
                .user_data(slot as u64);
            // SAFETY: the buffer outlives the read (see `Request`), and the
            // descriptor lives as long as `inner`, which outlives the ring.
            unsafe { core.ring.submission().push(&entry) }.expect("checked not full");
            core.slots[slot] = Some(req);
            core.unsubmitted += 1;
        }
    }

    /// Hands unsubmitted SQEs to the kernel and waits for `want` completions.
    fn enter(&self, core: &mut Core, want: usize) {
        loop {
            match core.ring.submit_and_wait(want) {
                Ok(n) => {
                    self.count_submit(n);
                    core.unsubmitted -= n.min(core.unsubmitted);
                    return;
                }
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                // Out of kernel resources or a full completion queue: reap
                // what is there (the caller does) or let time pass, retry.
                Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EBUSY)) => {
                    if !core.ring.completion().is_empty() {
                        return;
                    }
                    std::thread::yield_now();
                }
                // Any other failure leaves it unknown whether the kernel still
                // writes into callers' buffers; returning would let them be
                // freed under it. Only a broken ring setup gets here.
                Err(e) => {
                    eprintln!("pagewise-io: io_uring_enter failed ({e}); aborting to protect in-flight buffers");
                    std::process::abort();
                }
            }
        }
    }

    fn count_submit(&self, n: usize) {
        if n == 0 {
            return;
        }
        let c = &self.counters;
        c.submits.fetch_add(1, Ordering::Relaxed);
        c.submitted.fetch_add(n as u64, Ordering::Relaxed);
        c.max_batch.fetch_max(n as u64, Ordering::Relaxed);
    }

    /// Completes every request whose CQE is available.
    fn reap(&self, core: &mut Core) {
        let Core {
            ring, slots, free, ..
        } = core;
        let mut n = 0;
        for cqe in ring.completion() {
            let slot = cqe.user_data() as usize;
            let req = slots[slot]
                .take()
                .expect("a CQE belongs to an occupied slot");
            free.push(slot);
            req.complete(cqe.result());
            n += 1;
        }
        self.counters.completions.fetch_add(n, Ordering::Relaxed);
    }

    /// Gives leadership to the owner of an outstanding read, in the ring or
    /// queued, or gives it up when there is none.
    fn hand_off(&self, core: MutexGuard<'_, Core>) {
        let mut p = self.pending.lock();
        let next = core
            .slots
            .iter()
            .flatten()
            .next()
            .or_else(|| p.queue.front())
            .cloned();
        match next {
            Some(req) => {
                req.state.store(LEAD, Ordering::Release);
                self.counters.handoffs.fetch_add(1, Ordering::Relaxed);
                drop(p);
                drop(core);
                req.owner.unpark();
            }
            None => p.leader = false,
        }
    }

    #[cfg(test)]
    fn hold_until_queued(&self) {
        let want = self.hold_for.swap(0, Ordering::AcqRel);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while self.pending.lock().queue.len() < want && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Turns the CQE result of a whole-buffer read into `read_at`'s result.
    /// Short and interrupted reads are redone with the inner backend's pread,
    /// which loops over partial reads and reports `Short` exactly as
    /// [`crate::FileBackend`] does (they are rare: past the end of the file).
    fn finish(&self, buf: &mut [u8], offset: u64, res: i32) -> Result<()> {
        let transient = res == -libc::EINTR || res == -libc::EAGAIN;
        if transient || (0..buf.len() as i64).contains(&(res as i64)) {
            self.counters.redone.fetch_add(1, Ordering::Relaxed);
            return self.inner.read_at(buf, offset);
        }
        transfer_outcome(self.inner.path(), OpKind::Read, offset, buf.len(), res)
    }
}

/// One caller's read while it is outstanding. Dropping it (also while
/// unwinding from a panic in the leader code) blocks until the kernel is done
/// with the buffer, leading again if this thread was the leader; a second
/// panic there aborts, which is the safe outcome.
struct Call<'a> {
    ring: &'a SharedRing,
    req: &'a Arc<Request>,
    leading: bool,
}

impl Call<'_> {
    fn run(&mut self) {
        if self.ring.enqueue(self.req) {
            self.lead();
        }
        self.wait();
    }

    fn lead(&mut self) {
        self.leading = true;
        self.ring.lead(self.req);
        self.leading = false;
    }

    /// Parks until the read is done or this thread is made the leader.
    fn wait(&mut self) {
        loop {
            match self.req.state.load(Ordering::Acquire) {
                DONE => return,
                LEAD => {
                    self.req.state.store(WAITING, Ordering::Relaxed);
                    self.lead();
                }
                _ => std::thread::park(),
            }
        }
    }
}

impl Drop for Call<'_> {
    fn drop(&mut self) {
        if self.req.is_done() {
            return;
        }
        if self.leading {
            self.lead();
        }
        self.wait();
    }
}

impl Backend for SharedRing {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let path = self.inner.path();
        check_aligned(
            path,
            self.inner.alignment(),
            buf.as_ptr(),
            buf.len(),
            offset,
        )?;
        if buf.len() > u32::MAX as usize {
            return Err(IoError::Invalid {
                path: path.to_path_buf(),
                what: format!(
                    "one read of {} bytes exceeds io_uring's 4 GiB limit; split it",
                    buf.len()
                ),
            });
        }
        if buf.is_empty() {
            return Ok(());
        }
        let req = Arc::new(Request {
            buf: buf.as_mut_ptr(),
            len: buf.len(),
            offset,
            owner: std::thread::current(),
            state: AtomicU8::new(WAITING),
            res: AtomicI32::new(0),
        });
        Call {
            ring: self,
            req: &req,
            leading: false,
        }
        .run();
        self.finish(buf, offset, req.res.load(Ordering::Relaxed))
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.inner.write_at(buf, offset)
    }

    fn sync(&self) -> Result<()> {
        self.inner.sync()
    }

    forward_metadata!(inner);

    fn queue(&self, depth: usize) -> Result<Box<dyn IoQueue + '_>> {
        self.inner.queue(depth)
    }

    fn engine(&self) -> &'static str {
        self.inner.engine()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{open, DirectMode, FaultInjector, FaultKinds, Faulty, OpenOptions};
    use crate::{AlignedBuf, Fs, SimFs};
    use rand::{rngs::SmallRng, Rng, SeedableRng};
    use std::path::Path;

    const BLOCK: usize = 4096;

    fn opts(direct: DirectMode) -> OpenOptions {
        OpenOptions {
            write: true,
            create: true,
            create_new: false,
            direct,
        }
    }

    /// Every 8-byte word of block `b` holds `b * BLOCK` (the block's offset).
    fn block_pattern(block: u64) -> Vec<u8> {
        (0..BLOCK / 8)
            .flat_map(|_| (block * BLOCK as u64).to_le_bytes())
            .collect()
    }

    /// A file of `blocks` self-describing blocks, written through the ring.
    fn ring_over_pattern(path: &Path, blocks: u64, depth: usize) -> SharedRing {
        let file: Arc<dyn Backend> = Arc::new(open(path, &opts(DirectMode::Try)).unwrap());
        let ring = SharedRing::with_depth(file, depth).unwrap();
        let mut w = AlignedBuf::new(BLOCK, BLOCK);
        for b in 0..blocks {
            w.copy_from_slice(&block_pattern(b));
            ring.write_at(&w, b * BLOCK as u64).unwrap();
        }
        ring
    }

    #[test]
    fn many_threads_read_their_own_blocks() {
        let dir = tempfile::tempdir().unwrap();
        const BLOCKS: u64 = 512;
        let ring = ring_over_pattern(&dir.path().join("f"), BLOCKS, SHARED_RING_DEPTH);
        let seed: u64 = rand::random();
        const THREADS: u64 = 16;
        const READS: u64 = 300;
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let ring = &ring;
                s.spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(seed + t);
                    for _ in 0..READS {
                        // One or two blocks, so lengths differ within a batch.
                        let n = rng.gen_range(1..=2u64);
                        let first = rng.gen_range(0..BLOCKS - 1);
                        let mut buf = AlignedBuf::new(n as usize * BLOCK, BLOCK);
                        ring.read_at(&mut buf, first * BLOCK as u64).unwrap();
                        for (i, got) in buf.chunks(BLOCK).enumerate() {
                            let want = block_pattern(first + i as u64);
                            assert!(got == &want[..], "seed {seed}: block {first}+{i} wrong");
                        }
                    }
                });
            }
        });
        let st = ring.stats();
        let total = THREADS * READS;
        assert_eq!(st.reads, total, "seed {seed}: {st:?}");
        assert_eq!(st.submitted, total, "seed {seed}: {st:?}");
        assert_eq!(st.completions, total, "seed {seed}: {st:?}");
        assert_eq!(st.redone, 0, "seed {seed}: {st:?}");
        assert!(st.submits >= 1 && st.submits <= total, "{st:?}");
        assert!(ring.pending.lock().queue.is_empty() && !ring.pending.lock().leader);
    }

    /// Runs `threads` concurrent one-block reads while the leader waits for
    /// all of them to be queued before its first submit.
    fn held_batch(ring: &SharedRing, threads: u64) {
        ring.hold_for.store(threads as usize, Ordering::Release);
        std::thread::scope(|s| {
            for t in 0..threads {
                s.spawn(move || {
                    let mut buf = AlignedBuf::new(BLOCK, BLOCK);
                    ring.read_at(&mut buf, t * BLOCK as u64).unwrap();
                    assert!(buf[..] == block_pattern(t)[..], "block {t} wrong");
                });
            }
        });
    }

    #[test]
    fn queued_reads_go_to_the_kernel_in_one_submit() {
        let dir = tempfile::tempdir().unwrap();
        let ring = ring_over_pattern(&dir.path().join("f"), 16, SHARED_RING_DEPTH);
        held_batch(&ring, 8);
        let st = ring.stats();
        assert_eq!((st.reads, st.submits, st.submitted), (8, 1, 8), "{st:?}");
        assert_eq!((st.max_batch, st.completions), (8, 8), "{st:?}");
    }

    #[test]
    fn more_readers_than_slots_wait_their_turn() {
        let dir = tempfile::tempdir().unwrap();
        let ring = ring_over_pattern(&dir.path().join("f"), 16, 4);
        held_batch(&ring, 12);
        let st = ring.stats();
        assert_eq!(st.max_batch, 4, "a batch is bounded by the ring: {st:?}");
        assert!(st.submits >= 3, "{st:?}");
        assert_eq!((st.submitted, st.completions), (12, 12), "{st:?}");
    }

    /// The ring's error for a read equals the one pread gives, field by field
    /// (compared through the message, which names all of them).
    fn same_error(ring: &SharedRing, len: usize, offset: u64) -> IoError {
        let mut a = AlignedBuf::new(len, BLOCK);
        let mut b = AlignedBuf::new(len, BLOCK);
        let via_ring = ring.read_at(&mut a, offset).unwrap_err();
        let via_pread = ring.inner().read_at(&mut b, offset).unwrap_err();
        assert_eq!(via_ring.to_string(), via_pread.to_string());
        via_ring
    }

    #[test]
    fn short_and_past_the_end_reads_are_typed() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let ring = ring_over_pattern(&p, 2, 8);
        let e = same_error(&ring, 2 * BLOCK, BLOCK as u64);
        assert!(
            matches!(
                e,
                IoError::Short {
                    done: BLOCK,
                    offset: 4096,
                    len: 8192,
                    ..
                }
            ),
            "{e:?}"
        );
        let e = same_error(&ring, BLOCK, 8 * BLOCK as u64);
        assert!(matches!(e, IoError::Short { done: 0, .. }), "{e:?}");
        assert_eq!(ring.stats().redone, 2);

        // An unaligned file end under buffered I/O.
        std::fs::write(&p, [5u8; 10]).unwrap();
        let file: Arc<dyn Backend> = Arc::new(open(&p, &opts(DirectMode::Off)).unwrap());
        let ring = SharedRing::new(file).unwrap();
        let e = same_error(&ring, 20, 0);
        assert!(
            matches!(
                e,
                IoError::Short {
                    done: 10,
                    len: 20,
                    ..
                }
            ),
            "{e:?}"
        );
    }

    #[test]
    fn a_failed_read_is_the_same_io_error() {
        let dir = tempfile::tempdir().unwrap();
        // Reading a directory's descriptor fails with EISDIR in the CQE.
        let ro = OpenOptions {
            direct: DirectMode::Off,
            ..Default::default()
        };
        let file: Arc<dyn Backend> = Arc::new(open(dir.path(), &ro).unwrap());
        let ring = SharedRing::new(file).unwrap();
        match same_error(&ring, BLOCK, 0) {
            IoError::Io {
                op: "read",
                offset: 0,
                len: BLOCK,
                ref source,
                ..
            } => assert_eq!(source.raw_os_error(), Some(libc::EISDIR)),
            other => panic!("expected EISDIR, got {other:?}"),
        }
        assert_eq!(ring.stats().redone, 0, "errors are not redone");
    }

    #[test]
    fn misaligned_read_is_refused_before_the_ring() {
        let dir = tempfile::tempdir().unwrap();
        let ring = ring_over_pattern(&dir.path().join("f"), 2, 8);
        if !ring.is_direct() {
            return; // buffered fallback (tmpfs) has no alignment rules
        }
        let mut buf = AlignedBuf::new(BLOCK, BLOCK);
        let e = ring.read_at(&mut buf, 100).unwrap_err();
        assert!(
            matches!(e, IoError::Misaligned { what: "offset", .. }),
            "{e}"
        );
        assert_eq!(ring.stats().reads, 0);
    }

    #[test]
    fn idle_ring_drops_and_wrappers_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        drop(ring_over_pattern(&p, 1, 8));
        let ring = ring_over_pattern(&p, 1, 8);
        let mut buf = AlignedBuf::new(BLOCK, BLOCK);
        ring.read_at(&mut buf, 0).unwrap();
        drop(ring);

        let sim = SimFs::new().open(Path::new("/db"), &opts(DirectMode::Off));
        let e = SharedRing::new(sim.unwrap()).unwrap_err();
        assert!(matches!(e, IoError::Invalid { .. }), "{e}");
        let file = open(&p, &opts(DirectMode::Off)).unwrap();
        let faulty = Faulty::new(file, FaultInjector::new(FaultKinds::READS, 0));
        let e = SharedRing::new(Arc::new(faulty)).unwrap_err();
        assert!(e.to_string().contains("not a plain file"), "{e}");
    }
}
