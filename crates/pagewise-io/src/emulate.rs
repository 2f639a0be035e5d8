//! Drive profiles: run the probe, the advisor's sweep or the engine on a
//! drive with setup time S, bandwidth W and P channels (T = S + B/W per I/O,
//! seed 001) without owning that drive.
//!
//! [`EmulatedDrive`] wraps a [`Backend`] and [`EmulatedFs`] every file of an
//! [`Fs`]; all files of one drive share a [`DriveClock`], so at most P I/Os
//! are serviced at once across files and threads (model: [`ChannelModel`]).
//!
//! The real I/O still happens on the inner file, so data is real. It runs
//! while the emulated I/O is being serviced, and the call returns at the
//! later of the two: the emulation can only make a drive slower. Emulate
//! drives slower than the real one; [`EmulationStats::overruns`] counts the
//! I/Os for which the real device was the slower.
//!
//! Queued I/O ([`Backend::queue`]): each op reserves a channel when it is
//! submitted, does its real I/O at once (synchronously, on the inner file)
//! and completes at its emulated completion time, so throughput scales with
//! queue depth up to P. The real I/O of one queue is serial: the emulated
//! service time per op over P must exceed the real latency for the
//! emulation to hold at high queue depths.

mod channels;
mod profile;

pub use channels::{sleep_until, ChannelModel, DriveClock, EmulationStats, SPIN_US};
pub use profile::{
    parse_micros, parse_rate, DriveProfile, Preset, ProfileError, DEFAULT_FSYNC_US, MAX_CHANNELS,
    PRESETS,
};

use crate::{Backend, Completion, Fs, IoError, IoOp, IoQueue, LockGuard, OpKind};
use crate::{OpenOptions, Result};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// A backend seen through an emulated drive.
#[derive(Debug)]
pub struct EmulatedDrive<B> {
    inner: B,
    clock: Arc<DriveClock>,
}

impl<B: Backend> EmulatedDrive<B> {
    /// A drive of its own.
    pub fn new(inner: B, profile: DriveProfile) -> std::result::Result<Self, ProfileError> {
        Ok(Self::with_clock(inner, Arc::new(DriveClock::new(profile)?)))
    }

    /// Several files on one drive share its clock.
    pub fn with_clock(inner: B, clock: Arc<DriveClock>) -> Self {
        Self { inner, clock }
    }

    pub fn clock(&self) -> &Arc<DriveClock> {
        &self.clock
    }

    pub fn inner(&self) -> &B {
        &self.inner
    }
}

impl<B: Backend> Backend for EmulatedDrive<B> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let done = self.clock.reserve_io(buf.len() as u64);
        let result = self.inner.read_at(buf, offset);
        self.clock.finish(done);
        result
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let done = self.clock.reserve_io(buf.len() as u64);
        let result = self.inner.write_at(buf, offset);
        self.clock.finish(done);
        result
    }

    fn sync(&self) -> Result<()> {
        let done = self.clock.reserve_flush();
        let result = self.inner.sync();
        self.clock.finish(done);
        result
    }

    crate::backend::forward_metadata!(inner);

    /// A queue whose ops complete at their emulated completion times.
    fn queue(&self, depth: usize) -> Result<Box<dyn IoQueue + '_>> {
        Ok(Box::new(EmulatedQueue {
            drive: self,
            depth: depth.max(1),
            pending: Vec::new(),
        }))
    }

    /// The inner engine's name: the emulated drive sits under the same engine
    /// (a "uring" queue keeps several I/Os at the drive, a "sync" one does not).
    fn engine(&self) -> &'static str {
        self.inner.engine()
    }
}

struct EmulatedQueue<'a, B> {
    drive: &'a EmulatedDrive<B>,
    depth: usize,
    /// Ops whose real I/O is done, with their emulated completion time.
    pending: Vec<(Instant, Completion)>,
}

impl<B: Backend> IoQueue for EmulatedQueue<'_, B> {
    fn depth(&self) -> usize {
        self.depth
    }

    fn in_flight(&self) -> usize {
        self.pending.len()
    }

    fn submit(&mut self, mut op: IoOp) -> Result<()> {
        if self.pending.len() >= self.depth {
            return Err(IoError::Invalid {
                path: self.drive.path().to_path_buf(),
                what: format!(
                    "queue full ({} in flight): wait before submitting",
                    self.depth
                ),
            });
        }
        let clock = &self.drive.clock;
        let done = clock.reserve_io(op.buf.len() as u64);
        let inner = &self.drive.inner;
        let result = match op.kind {
            OpKind::Read => inner.read_at(&mut op.buf, op.offset),
            OpKind::Write => inner.write_at(&op.buf, op.offset),
        };
        clock.note_real_end(done);
        self.pending.push((done, Completion { op, result }));
        debug_assert!(self.pending.len() <= self.depth);
        Ok(())
    }

    /// Sleeps until the `min`-th earliest emulated completion (bounded by
    /// `in_flight()`), then returns every op whose time has come, earliest first.
    fn wait(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<()> {
        let min = min.min(self.pending.len());
        self.pending.sort_by_key(|p| p.0);
        if min > 0 {
            sleep_until(self.pending[min - 1].0);
        }
        let now = Instant::now();
        let due = self.pending.partition_point(|p| p.0 <= now);
        debug_assert!(due >= min);
        out.extend(self.pending.drain(..due).map(|(_, c)| c));
        Ok(())
    }
}

/// Every file of an [`Fs`] on one emulated drive (one shared [`DriveClock`]).
/// Namespace operations (open, rename, remove, lock) cost no emulated time.
#[derive(Debug)]
pub struct EmulatedFs<F> {
    inner: F,
    clock: Arc<DriveClock>,
}

impl<F: Fs> EmulatedFs<F> {
    /// `EmulatedFs::new(Arc::new(RealFs) as Arc<dyn Fs>, profile)`, for example.
    pub fn new(inner: F, profile: DriveProfile) -> std::result::Result<Self, ProfileError> {
        Ok(Self {
            inner,
            clock: Arc::new(DriveClock::new(profile)?),
        })
    }

    pub fn clock(&self) -> &Arc<DriveClock> {
        &self.clock
    }

    pub fn stats(&self) -> EmulationStats {
        self.clock.stats()
    }

    pub fn inner(&self) -> &F {
        &self.inner
    }
}

impl<F: Fs> Fs for EmulatedFs<F> {
    fn open(&self, path: &Path, opts: &OpenOptions) -> Result<Arc<dyn Backend>> {
        let file = self.inner.open(path, opts)?;
        Ok(Arc::new(EmulatedDrive::with_clock(
            file,
            self.clock.clone(),
        )))
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn remove(&self, path: &Path) -> Result<()> {
        self.inner.remove(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.inner.rename(from, to)
    }
    fn create_dir_all(&self, path: &Path) -> Result<()> {
        self.inner.create_dir_all(path)
    }
    fn lock(&self, path: &Path) -> Result<Box<dyn LockGuard>> {
        self.inner.lock(path)
    }
}

#[cfg(test)]
mod tests;
