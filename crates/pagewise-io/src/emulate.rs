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
//! submitted and goes to the inner backend's queue (a real io_uring ring
//! when the inner file has one, so real I/Os overlap as they would without
//! the emulation); it completes when both its real I/O is done and its
//! emulated completion time has come. Throughput thus scales with queue
//! depth up to P, provided the real device keeps up with the profile.

mod channels;
mod profile;

pub use channels::{sleep_until, ChannelModel, DriveClock, EmulationStats, SPIN_US};
pub use profile::{
    parse_micros, parse_rate, DriveProfile, Preset, ProfileError, DEFAULT_FSYNC_US, MAX_CHANNELS,
    PRESETS,
};

use crate::{Backend, Completion, Fs, IoOp, IoQueue};
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

    /// The inner queue (a real ring for io_uring), whose ops complete at
    /// their emulated completion times or when their real I/O does, whichever
    /// is later.
    fn queue(&self, depth: usize) -> Result<Box<dyn IoQueue + '_>> {
        let inner = self.inner.queue(depth)?;
        let slots = vec![None; inner.depth()];
        Ok(Box::new(EmulatedQueue {
            clock: &self.clock,
            path: self.inner.path(),
            inner,
            slots,
            landed: Vec::new(),
            scratch: Vec::new(),
        }))
    }

    /// The inner engine's name: the emulated drive sits under the same engine
    /// (a "uring" queue keeps several I/Os at the drive, a "sync" one does not).
    fn engine(&self) -> &'static str {
        self.inner.engine()
    }
}

/// Blocking waits on the inner queue allowed to return nothing in a row.
const MAX_EMPTY_WAITS: u32 = 1_000_000;

/// Ops go to the inner queue tagged with their slot; the slot remembers the
/// caller's tag and the emulated completion time.
struct EmulatedQueue<'a> {
    clock: &'a DriveClock,
    path: &'a Path,
    inner: Box<dyn IoQueue + 'a>,
    /// Per inner tag: (emulated completion, caller's tag) while at the inner queue.
    slots: Vec<Option<(Instant, u64)>>,
    /// Ops whose real I/O is done, with their emulated completion time.
    landed: Vec<(Instant, Completion)>,
    scratch: Vec<Completion>,
}

impl EmulatedQueue<'_> {
    /// Moves real completions to `landed`; blocks for one when `block`.
    fn collect(&mut self, block: bool) -> Result<()> {
        let min = usize::from(block && self.inner.in_flight() > 0);
        self.inner.wait(min, &mut self.scratch)?;
        for mut c in self.scratch.drain(..) {
            let slot = c.op.tag as usize;
            let (done, tag) = self.slots[slot]
                .take()
                .expect("a completion for a used slot");
            self.clock.note_real_end(done);
            c.op.tag = tag;
            self.landed.push((done, c));
        }
        Ok(())
    }
}

impl IoQueue for EmulatedQueue<'_> {
    fn depth(&self) -> usize {
        self.inner.depth()
    }

    fn in_flight(&self) -> usize {
        self.inner.in_flight() + self.landed.len()
    }

    fn submit(&mut self, mut op: IoOp) -> Result<()> {
        let free = self.slots.iter().position(Option::is_none);
        let Some(slot) = free.filter(|_| self.in_flight() < self.depth()) else {
            // Let the inner queue phrase the "queue full" error.
            return self.inner.submit(op);
        };
        let done = self.clock.reserve_io(op.buf.len() as u64);
        self.slots[slot] = Some((done, op.tag));
        op.tag = slot as u64;
        if let Err(e) = self.inner.submit(op) {
            self.slots[slot] = None;
            return Err(e);
        }
        debug_assert!(self.in_flight() <= self.depth());
        Ok(())
    }

    /// Waits until `min` ops (bounded by `in_flight()`) have both finished
    /// their real I/O and reached their emulated completion time, then
    /// returns every op that has, earliest emulated completion first.
    fn wait(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<()> {
        let min = min.min(self.in_flight());
        self.collect(false)?;
        // Bounded: each pass normally gains a real completion, and at most
        // in_flight() are outstanding; an inner queue that keeps returning
        // nothing from a blocking wait is an error, not a hang.
        let mut passes = 0u32;
        while self.landed.len() < min {
            passes += 1;
            if passes > MAX_EMPTY_WAITS {
                return Err(crate::IoError::Invalid {
                    path: self.path.to_path_buf(),
                    what: format!(
                        "the inner queue returned no completion in {MAX_EMPTY_WAITS} blocking waits with {} in flight",
                        self.inner.in_flight()
                    ),
                });
            }
            self.collect(true)?;
        }
        self.landed.sort_by_key(|l| l.0);
        if min > 0 {
            sleep_until(self.landed[min - 1].0);
            self.collect(false)?;
            self.landed.sort_by_key(|l| l.0);
        }
        let now = Instant::now();
        let due = self.landed.partition_point(|l| l.0 <= now);
        debug_assert!(due >= min);
        out.extend(self.landed.drain(..due).map(|(_, c)| c));
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
    crate::fs::forward_namespace!(inner);
}

#[cfg(test)]
mod tests;
