//! I/O error injection: make the Nth I/O fail, to prove that errors reach the
//! caller and that nothing is corrupted when they do.
//!
//! After a failed fsync Linux may already have dropped the dirty pages and
//! reports the error once; a later fsync can succeed although the data never
//! reached the disk. An engine must therefore treat a failed sync as fatal for
//! that file. [`Faulty`] enforces this: once a sync of a handle failed, every
//! later sync of that handle fails too, so an engine that retries and carries
//! on is caught. The failed sync does not reach the inner backend, so on a
//! [`crate::SimFs`] the unsynced writes stay pending and a crash may drop them.

use crate::Fs;
use crate::{Backend, Completion, IoError, IoOp, IoQueue, OpKind, OpenOptions, Result};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;

/// Which operations count towards the Nth (and can fail).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultKinds {
    pub reads: bool,
    pub writes: bool,
    pub syncs: bool,
}

impl FaultKinds {
    pub const ALL: Self = Self {
        reads: true,
        writes: true,
        syncs: true,
    };
    pub const READS: Self = Self {
        reads: true,
        writes: false,
        syncs: false,
    };
    pub const WRITES: Self = Self {
        reads: false,
        writes: true,
        syncs: false,
    };
    pub const SYNCS: Self = Self {
        reads: false,
        writes: false,
        syncs: true,
    };
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Read,
    Write,
    Sync,
}

/// The shared counter and trigger. One injector can serve every file of an
/// [`Fs`] so "the Nth I/O" counts across files in issue order.
#[derive(Debug)]
pub struct FaultInjector {
    kinds: FaultKinds,
    /// Counted ops so far.
    seen: AtomicU64,
    /// 1-based count at which to fail; 0 = disarmed.
    fail_at: AtomicU64,
    /// Fail every counted op from `fail_at` on (a dead drive), not just one.
    sticky: AtomicBool,
    injected: AtomicU64,
}

impl FaultInjector {
    /// Fails the `nth` counted op (1-based); `nth == 0` never fails.
    pub fn new(kinds: FaultKinds, nth: u64) -> Arc<Self> {
        Arc::new(Self {
            kinds,
            seen: AtomicU64::new(0),
            fail_at: AtomicU64::new(nth),
            sticky: AtomicBool::new(false),
            injected: AtomicU64::new(0),
        })
    }

    /// Only counts: run a workload once with this to learn how many ops it does.
    pub fn counting(kinds: FaultKinds) -> Arc<Self> {
        Self::new(kinds, 0)
    }

    /// Fails the `nth` counted op from now on (1-based).
    pub fn arm(&self, nth: u64) {
        self.fail_at
            .store(self.seen.load(SeqCst) + nth.max(1), SeqCst);
    }

    pub fn disarm(&self) {
        self.fail_at.store(0, SeqCst);
    }

    /// With `true`, every counted op from the Nth on fails.
    pub fn set_sticky(&self, sticky: bool) {
        self.sticky.store(sticky, SeqCst);
    }

    /// Counted ops so far (including failed ones).
    pub fn seen(&self) -> u64 {
        self.seen.load(SeqCst)
    }

    /// Faults injected so far.
    pub fn injected(&self) -> u64 {
        self.injected.load(SeqCst)
    }

    fn counts(&self, kind: Kind) -> bool {
        match kind {
            Kind::Read => self.kinds.reads,
            Kind::Write => self.kinds.writes,
            Kind::Sync => self.kinds.syncs,
        }
    }

    /// Counts one op and decides whether it fails.
    fn check(&self, kind: Kind, path: &Path, offset: u64, len: usize) -> Result<()> {
        if !self.counts(kind) {
            return Ok(());
        }
        let n = self.seen.fetch_add(1, SeqCst) + 1;
        let at = self.fail_at.load(SeqCst);
        let hit = at != 0 && (n == at || (n > at && self.sticky.load(SeqCst)));
        if !hit {
            return Ok(());
        }
        self.injected.fetch_add(1, SeqCst);
        Err(IoError::Injected(format!(
            "{kind:?} #{n} of {len} bytes at offset {offset} in {}",
            path.display()
        )))
    }
}

/// Wraps a [`Backend`] or an [`Fs`] (every file it opens) and fails I/O as
/// its [`FaultInjector`] says.
#[derive(Debug)]
pub struct Faulty<T> {
    inner: T,
    injector: Arc<FaultInjector>,
    /// Set by the first failed sync: the fsync gate.
    sync_failed: AtomicBool,
}

impl<T> Faulty<T> {
    pub fn new(inner: T, injector: Arc<FaultInjector>) -> Self {
        Self {
            inner,
            injector,
            sync_failed: AtomicBool::new(false),
        }
    }

    pub fn injector(&self) -> &Arc<FaultInjector> {
        &self.injector
    }

    pub fn inner(&self) -> &T {
        &self.inner
    }
}

impl<B: Backend> Faulty<B> {
    fn sync_gate(&self) -> Result<()> {
        if self.sync_failed.load(SeqCst) {
            return Err(IoError::Injected(format!(
                "an earlier fsync of {} failed, so unsynced data may be lost; reopen the file",
                self.inner.path().display()
            )));
        }
        Ok(())
    }
}

impl<B: Backend> Backend for Faulty<B> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.injector
            .check(Kind::Read, self.path(), offset, buf.len())?;
        self.inner.read_at(buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.injector
            .check(Kind::Write, self.path(), offset, buf.len())?;
        self.inner.write_at(buf, offset)
    }

    fn sync(&self) -> Result<()> {
        self.sync_gate()?;
        let result = self
            .injector
            .check(Kind::Sync, self.path(), 0, 0)
            .and_then(|()| self.inner.sync());
        if result.is_err() {
            self.sync_failed.store(true, SeqCst);
        }
        result
    }

    crate::backend::forward_metadata!(inner);

    /// The inner queue (a real ring for io_uring); each op is counted at
    /// submit, in issue order, and an injected failure comes back as its completion.
    fn queue(&self, depth: usize) -> Result<Box<dyn IoQueue + '_>> {
        Ok(Box::new(FaultyQueue {
            inner: self.inner.queue(depth)?,
            injector: &self.injector,
            path: self.inner.path(),
            failed: Vec::new(),
        }))
    }

    fn engine(&self) -> &'static str {
        self.inner.engine()
    }
}

struct FaultyQueue<'a> {
    inner: Box<dyn IoQueue + 'a>,
    injector: &'a FaultInjector,
    path: &'a Path,
    /// Ops failed by injection: never reached the inner queue.
    failed: Vec<Completion>,
}

impl IoQueue for FaultyQueue<'_> {
    fn depth(&self) -> usize {
        self.inner.depth()
    }
    fn in_flight(&self) -> usize {
        self.inner.in_flight() + self.failed.len()
    }
    fn submit(&mut self, op: IoOp) -> Result<()> {
        if self.in_flight() >= self.depth() {
            // Let the inner queue phrase the "queue full" error.
            return self.inner.submit(op);
        }
        let kind = match op.kind {
            OpKind::Read => Kind::Read,
            OpKind::Write => Kind::Write,
        };
        match self
            .injector
            .check(kind, self.path, op.offset, op.buf.len())
        {
            Ok(()) => self.inner.submit(op),
            Err(e) => {
                self.failed.push(Completion { op, result: Err(e) });
                Ok(())
            }
        }
    }
    fn wait(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<()> {
        let rest = min.saturating_sub(self.failed.len());
        out.append(&mut self.failed);
        self.inner.wait(rest, out)
    }
}

/// Every opened file gets its own fsync gate and the shared injector.
/// Namespace operations (rename, remove, lock) are passed through uncounted.
impl<F: Fs> Fs for Faulty<F> {
    fn open(&self, path: &Path, opts: &OpenOptions) -> Result<Arc<dyn Backend>> {
        let file = self.inner.open(path, opts)?;
        Ok(Arc::new(Faulty::new(file, self.injector.clone())))
    }
    crate::fs::forward_namespace!(inner);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CrashMode, DirectMode, IoOp, OpKind, SimFs};
    use std::path::PathBuf;

    fn rw() -> OpenOptions {
        OpenOptions {
            write: true,
            create: true,
            direct: DirectMode::Off,
            ..Default::default()
        }
    }

    #[test]
    fn nth_op_fails_once_and_only_it() {
        let inj = FaultInjector::new(FaultKinds::ALL, 3);
        let fs = Faulty::new(SimFs::new(), inj.clone());
        let f = fs.open(Path::new("/f"), &rw()).unwrap();
        f.write_at(b"a", 0).unwrap(); // 1
        f.write_at(b"b", 1).unwrap(); // 2
        let err = f.write_at(b"c", 2).unwrap_err(); // 3
        assert!(
            matches!(err, IoError::Injected(ref m) if m.contains("Write #3") && m.contains("/f")),
            "{err}"
        );
        f.write_at(b"d", 3).unwrap(); // 4
        let mut r = [0u8; 4];
        f.read_at(&mut r, 0).unwrap();
        assert_eq!(&r, b"ab\0d", "the failed write did not happen");
        assert_eq!((inj.seen(), inj.injected()), (5, 1));
    }

    #[test]
    fn kinds_filter_what_counts() {
        let inj = FaultInjector::new(FaultKinds::SYNCS, 2);
        let sim = SimFs::new();
        let fs = Faulty::new(sim.clone(), inj.clone());
        let f = fs.open(Path::new("/f"), &rw()).unwrap();
        for i in 0..5 {
            f.write_at(&[i], i as u64).unwrap();
        }
        f.sync().unwrap();
        f.write_at(b"late", 8).unwrap();
        assert!(f.sync().is_err());
        assert_eq!(inj.seen(), 2, "only syncs are counted");
        // The fsync gate: later syncs keep failing and the data is not durable.
        assert!(f.sync().unwrap_err().to_string().contains("earlier fsync"));
        let after = sim.crash(0, CrashMode::DropUnsynced);
        assert_eq!(
            after.contents(Path::new("/f")).unwrap(),
            vec![0, 1, 2, 3, 4]
        );
        // A new handle (a reopen) syncs again.
        inj.disarm();
        fs.open(Path::new("/f"), &rw()).unwrap().sync().unwrap();
    }

    #[test]
    fn sticky_fails_everything_after_n_and_arm_is_relative() {
        let inj = FaultInjector::new(FaultKinds::READS, 0);
        let sim = SimFs::new();
        let b = Faulty::new(sim.open(Path::new("/f"), &rw()).unwrap(), inj.clone());
        b.write_at(&[1; 64], 0).unwrap();
        let mut r = [0u8; 8];
        b.read_at(&mut r, 0).unwrap();
        inj.set_sticky(true);
        inj.arm(2);
        b.read_at(&mut r, 0).unwrap();
        for _ in 0..3 {
            assert!(b.read_at(&mut r, 0).is_err());
        }
        b.write_at(&[2; 8], 0).unwrap();
        assert_eq!(inj.injected(), 3);
    }

    #[test]
    fn queued_io_is_counted_and_fails_in_its_completion() {
        let inj = FaultInjector::new(FaultKinds::WRITES, 2);
        let sim = SimFs::new();
        let b = Faulty::new(sim.open(&PathBuf::from("/f"), &rw()).unwrap(), inj);
        let mut q = b.queue(4).unwrap();
        for tag in 0..3 {
            let buf = crate::AlignedBuf::from_slice(&[tag as u8; 16], 16);
            q.submit(IoOp {
                kind: OpKind::Write,
                offset: tag * 16,
                buf,
                tag,
            })
            .unwrap();
        }
        let mut out = Vec::new();
        q.wait(3, &mut out).unwrap();
        let failed: Vec<u64> = out
            .iter()
            .filter(|c| c.result.is_err())
            .map(|c| c.op.tag)
            .collect();
        assert_eq!(failed, vec![1]);
    }

    #[test]
    fn queued_faults_reach_a_real_ring_and_spare_the_others() {
        if crate::probe_uring().is_err() {
            eprintln!("io_uring unavailable here: skipped");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let opts = OpenOptions {
            write: true,
            create: true,
            ..Default::default()
        };
        let file = crate::UringBackend::open(&dir.path().join("f"), &opts).unwrap();
        let inj = FaultInjector::new(FaultKinds::WRITES, 3);
        let b = Faulty::new(file, inj.clone());
        assert_eq!(b.engine(), "uring");
        let a = b.alignment().max(512);
        let mut q = b.queue(8).unwrap();
        for tag in 0..6u64 {
            let buf = crate::AlignedBuf::from_slice(&vec![tag as u8 + 1; a], a);
            q.submit(IoOp {
                kind: OpKind::Write,
                offset: tag * a as u64,
                buf,
                tag,
            })
            .unwrap();
        }
        assert_eq!(q.in_flight(), 6);
        let mut out = Vec::new();
        while out.len() < 6 {
            q.wait(1, &mut out).unwrap();
        }
        assert_eq!(q.in_flight(), 0);
        let failed: Vec<u64> = out
            .iter()
            .filter(|c| c.result.is_err())
            .map(|c| c.op.tag)
            .collect();
        assert_eq!(failed, vec![2], "the third write, and only it");
        drop(q);
        for tag in 0..6u64 {
            let mut r = crate::AlignedBuf::new(a, a);
            b.inner().read_at(&mut r, tag * a as u64).unwrap();
            let want = if tag == 2 { 0 } else { tag as u8 + 1 };
            assert!(r.iter().all(|&x| x == want), "block {tag}");
        }
        assert_eq!((inj.seen(), inj.injected()), (6, 1));
    }
}
