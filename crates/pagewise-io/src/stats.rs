use crate::{Backend, Completion, IoOp, IoQueue, OpKind, Result};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// Number of power-of-two size buckets: bucket i counts I/Os of size in
/// [2^i, 2^(i+1)), the last bucket everything larger (>= 2 GiB).
pub const SIZE_BUCKETS: usize = 32;

/// Counters of completed I/O, safe to share between threads.
#[derive(Debug)]
pub struct IoStats {
    read_ops: AtomicU64,
    read_bytes: AtomicU64,
    write_ops: AtomicU64,
    write_bytes: AtomicU64,
    syncs: AtomicU64,
    read_sizes: [AtomicU64; SIZE_BUCKETS],
    write_sizes: [AtomicU64; SIZE_BUCKETS],
}

/// A point-in-time copy of [`IoStats`]; subtract two to get an interval.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IoStatsSnapshot {
    pub read_ops: u64,
    pub read_bytes: u64,
    pub write_ops: u64,
    pub write_bytes: u64,
    pub syncs: u64,
    /// I/O count by power-of-two size bucket (see [`SIZE_BUCKETS`]).
    pub read_sizes: Vec<u64>,
    pub write_sizes: Vec<u64>,
}

impl Default for IoStats {
    fn default() -> Self {
        Self {
            read_ops: AtomicU64::new(0),
            read_bytes: AtomicU64::new(0),
            write_ops: AtomicU64::new(0),
            write_bytes: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
            read_sizes: std::array::from_fn(|_| AtomicU64::new(0)),
            write_sizes: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

fn bucket(len: usize) -> usize {
    (usize::BITS - 1 - len.max(1).leading_zeros()).min(SIZE_BUCKETS as u32 - 1) as usize
}

impl IoStats {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub fn record(&self, kind: OpKind, len: usize) {
        let (ops, bytes, sizes) = match kind {
            OpKind::Read => (&self.read_ops, &self.read_bytes, &self.read_sizes),
            OpKind::Write => (&self.write_ops, &self.write_bytes, &self.write_sizes),
        };
        ops.fetch_add(1, Relaxed);
        bytes.fetch_add(len as u64, Relaxed);
        sizes[bucket(len)].fetch_add(1, Relaxed);
    }

    pub fn record_sync(&self) {
        self.syncs.fetch_add(1, Relaxed);
    }

    pub fn snapshot(&self) -> IoStatsSnapshot {
        let load = |a: &[AtomicU64; SIZE_BUCKETS]| a.iter().map(|x| x.load(Relaxed)).collect();
        IoStatsSnapshot {
            read_ops: self.read_ops.load(Relaxed),
            read_bytes: self.read_bytes.load(Relaxed),
            write_ops: self.write_ops.load(Relaxed),
            write_bytes: self.write_bytes.load(Relaxed),
            syncs: self.syncs.load(Relaxed),
            read_sizes: load(&self.read_sizes),
            write_sizes: load(&self.write_sizes),
        }
    }
}

impl IoStatsSnapshot {
    /// Counts in `self` that happened after `earlier`.
    pub fn since(&self, earlier: &Self) -> Self {
        let sub = |a: &[u64], b: &[u64]| {
            a.iter()
                .enumerate()
                .map(|(i, x)| x - b.get(i).copied().unwrap_or(0))
                .collect()
        };
        Self {
            read_ops: self.read_ops - earlier.read_ops,
            read_bytes: self.read_bytes - earlier.read_bytes,
            write_ops: self.write_ops - earlier.write_ops,
            write_bytes: self.write_bytes - earlier.write_bytes,
            syncs: self.syncs - earlier.syncs,
            read_sizes: sub(&self.read_sizes, &earlier.read_sizes),
            write_sizes: sub(&self.write_sizes, &earlier.write_sizes),
        }
    }
}

/// A backend wrapper that counts every successful I/O into shared [`IoStats`].
#[derive(Debug)]
pub struct Accounted<B> {
    inner: B,
    stats: Arc<IoStats>,
}

impl<B: Backend> Accounted<B> {
    pub fn new(inner: B, stats: Arc<IoStats>) -> Self {
        Self { inner, stats }
    }

    pub fn stats(&self) -> &Arc<IoStats> {
        &self.stats
    }

    pub fn inner(&self) -> &B {
        &self.inner
    }
}

impl<B: Backend> Backend for Accounted<B> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.inner.read_at(buf, offset)?;
        self.stats.record(OpKind::Read, buf.len());
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.inner.write_at(buf, offset)?;
        self.stats.record(OpKind::Write, buf.len());
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        self.inner.sync()?;
        self.stats.record_sync();
        Ok(())
    }

    crate::backend::forward_metadata!(inner);

    fn queue(&self, depth: usize) -> Result<Box<dyn IoQueue + '_>> {
        Ok(Box::new(AccountedQueue {
            inner: self.inner.queue(depth)?,
            stats: &self.stats,
        }))
    }

    fn engine(&self) -> &'static str {
        self.inner.engine()
    }
}

struct AccountedQueue<'a> {
    inner: Box<dyn IoQueue + 'a>,
    stats: &'a IoStats,
}

impl IoQueue for AccountedQueue<'_> {
    fn depth(&self) -> usize {
        self.inner.depth()
    }
    fn in_flight(&self) -> usize {
        self.inner.in_flight()
    }
    fn submit(&mut self, op: IoOp) -> Result<()> {
        self.inner.submit(op)
    }
    fn wait(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<()> {
        let start = out.len();
        self.inner.wait(min, out)?;
        for c in &out[start..] {
            if c.result.is_ok() {
                self.stats.record(c.op.kind, c.op.buf.len());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{open, AlignedBuf, DirectMode, OpenOptions};

    #[test]
    fn buckets() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(1), 0);
        assert_eq!(bucket(4096), 12);
        assert_eq!(bucket(4097), 12);
        assert_eq!(bucket(8191), 12);
        assert_eq!(bucket(usize::MAX), SIZE_BUCKETS - 1);
    }

    #[test]
    fn counts_exactly_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let opts = OpenOptions {
            write: true,
            create: true,
            direct: DirectMode::Off,
            ..Default::default()
        };
        let stats = IoStats::new();
        let b = Accounted::new(open(dir.path().join("f"), &opts).unwrap(), stats.clone());
        let before = stats.snapshot();
        for i in 0..10u64 {
            b.write_at(&AlignedBuf::new(4096, 4096), i * 4096).unwrap();
        }
        b.write_at(&[1u8; 100], 0).unwrap();
        b.sync().unwrap();
        let mut r = vec![0u8; 8192];
        b.read_at(&mut r, 0).unwrap();
        let d = stats.snapshot().since(&before);
        assert_eq!((d.write_ops, d.write_bytes), (11, 10 * 4096 + 100));
        assert_eq!((d.read_ops, d.read_bytes, d.syncs), (1, 8192, 1));
        assert_eq!(d.write_sizes[12], 10);
        assert_eq!(d.write_sizes[6], 1);
        assert_eq!(d.read_sizes[13], 1);
    }
}
