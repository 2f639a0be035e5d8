//! Emulation of a drive with in-storage transparent compression (ScaleFlux,
//! seed 003). Such a drive compresses every 4 KiB block it receives on its own
//! and stores only the compressed bytes, so the NAND wear of a write is its
//! compressed size: a half-empty page or a zero-padded delta costs little.
//! [`CompressingDrive`] measures that cost for any backend without the drive.
//!
//! Rule for writes that cover only part of a 4 KiB block: the drive rewrites
//! the whole block, so the block is read back after the write (old bytes
//! merged with new) and its compressed size counted in full. That is exact for
//! writers whose I/Os do not race on the same block; aligned 4 KiB-multiple
//! writers never trigger the read-back. Read-backs go to the inner backend, so
//! wrap [`crate::Accounted`] outside the drive if they must not be counted.

use crate::{AlignedBuf, Backend, Completion, Fs, IoError, IoOp, IoQueue};
use crate::{OpKind, OpenOptions, Result};
use std::cell::RefCell;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// The unit the emulated drive compresses independently.
pub const DEVICE_BLOCK: usize = 4096;

thread_local! {
    static LZ4_OUT: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Bytes the drive stores for one block (normally 4 KiB): 0 for an all-zero
/// block (drives keep it as metadata only), else the lz4 block-format size,
/// capped at the input length because an incompressible block is stored raw.
pub fn compressed_size_4k(block: &[u8]) -> u64 {
    if block.iter().all(|&b| b == 0) {
        return 0;
    }
    let n = LZ4_OUT.with(|out| {
        let mut out = out.borrow_mut();
        out.resize(lz4_flex::block::get_maximum_output_size(block.len()), 0);
        lz4_flex::block::compress_into(block, &mut out).expect("output sized for the worst case")
    });
    n.min(block.len()) as u64
}

/// What the emulated drive saw, summed over every file sharing the meter.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CompressionStats {
    /// Bytes handed to write calls.
    pub logical_bytes_written: u64,
    /// Compressed bytes stored, each block rounded up to `granularity`. With
    /// `sample_one_in > 1` an estimate: the mean stored size of the measured
    /// non-zero blocks times the number of non-zero blocks.
    pub physical_bytes_written: u64,
    /// 4 KiB blocks (re)written, partial ones included.
    pub blocks_written: u64,
    /// Of those, all-zero blocks (cost 0; always counted exactly).
    pub zero_blocks: u64,
    pub write_ops: u64,
    pub granularity: u64,
    /// 1: every block was lz4-compressed (exact). N: about 1 in N non-zero blocks was.
    #[serde(default = "one")]
    pub sample_one_in: u64,
    /// Non-zero blocks actually compressed.
    #[serde(default)]
    pub measured_blocks: u64,
}

fn one() -> u64 {
    1
}

impl CompressionStats {
    /// physical / logical: below 1 when the drive's compression helps.
    pub fn ratio(&self) -> f64 {
        if self.logical_bytes_written == 0 {
            return 0.0;
        }
        self.physical_bytes_written as f64 / self.logical_bytes_written as f64
    }
}

/// Blocks always measured before sampling starts, so small runs are exact
/// and the estimate never divides by an empty sample.
const SAMPLE_WARMUP: u64 = 64;

/// Shared counters of one emulated drive.
#[derive(Debug)]
pub struct CompressionMeter {
    granularity: u64,
    sample_one_in: u64,
    logical: AtomicU64,
    /// Stored bytes of the measured blocks.
    measured_bytes: AtomicU64,
    measured: AtomicU64,
    blocks: AtomicU64,
    zero_blocks: AtomicU64,
    writes: AtomicU64,
}

impl CompressionMeter {
    /// `granularity`: the drive's storage unit for compressed data (1 = exact
    /// bytes; real drives pack at some small unit, e.g. 16 or 512 bytes).
    /// Every block is compressed: exact, at one lz4 pass per block written.
    pub fn new(granularity: u64) -> Arc<Self> {
        Self::sampled(granularity, 1)
    }

    /// Like [`Self::new`] but lz4-compresses only about one in `one_in`
    /// non-zero blocks, chosen by a hash of the block's offset and the write's
    /// sequence number (so neither a page's kind nor its place in the file
    /// decides), and scales the measured bytes to all non-zero blocks. For
    /// benchmarks where the meter's CPU would be charged to the engine.
    pub fn sampled(granularity: u64, one_in: u64) -> Arc<Self> {
        Arc::new(Self {
            granularity: granularity.max(1),
            sample_one_in: one_in.max(1),
            logical: AtomicU64::new(0),
            measured_bytes: AtomicU64::new(0),
            measured: AtomicU64::new(0),
            blocks: AtomicU64::new(0),
            zero_blocks: AtomicU64::new(0),
            writes: AtomicU64::new(0),
        })
    }

    pub fn stats(&self) -> CompressionStats {
        let blocks = self.blocks.load(Relaxed);
        let zero_blocks = self.zero_blocks.load(Relaxed);
        let measured = self.measured.load(Relaxed);
        let measured_bytes = self.measured_bytes.load(Relaxed);
        let nonzero = blocks.saturating_sub(zero_blocks);
        let physical = if measured == 0 || measured >= nonzero {
            measured_bytes
        } else {
            (measured_bytes as u128 * nonzero as u128 / measured as u128) as u64
        };
        CompressionStats {
            logical_bytes_written: self.logical.load(Relaxed),
            physical_bytes_written: physical,
            blocks_written: blocks,
            zero_blocks,
            write_ops: self.writes.load(Relaxed),
            granularity: self.granularity,
            sample_one_in: self.sample_one_in,
            measured_blocks: measured,
        }
    }

    /// Counts one write op; returns its sequence number for [`Self::pick`].
    fn count_write(&self, len: usize) -> u64 {
        self.logical.fetch_add(len as u64, Relaxed);
        self.writes.fetch_add(1, Relaxed)
    }

    /// Whether the block at `offset`, written by write number `seq`, is measured.
    fn pick(&self, offset: u64, seq: u64) -> bool {
        if self.sample_one_in == 1 || self.measured.load(Relaxed) < SAMPLE_WARMUP {
            return true;
        }
        mix64(offset ^ seq.rotate_left(32)).is_multiple_of(self.sample_one_in)
    }

    /// Meters one whole block of a write: zero blocks always, others when picked.
    fn add_whole(&self, block: &[u8], offset: u64, seq: u64) {
        self.blocks.fetch_add(1, Relaxed);
        if block.iter().all(|&b| b == 0) {
            self.zero_blocks.fetch_add(1, Relaxed);
        } else if self.pick(offset, seq) {
            self.add_measured(compressed_size_4k(block));
        }
    }

    /// Meters a block whose compressed size is already known (partial writes).
    fn add_block(&self, compressed: u64) {
        self.blocks.fetch_add(1, Relaxed);
        if compressed == 0 {
            self.zero_blocks.fetch_add(1, Relaxed);
        } else {
            self.add_measured(compressed);
        }
    }

    fn add_measured(&self, compressed: u64) {
        let stored = compressed.div_ceil(self.granularity) * self.granularity;
        self.measured_bytes.fetch_add(stored, Relaxed);
        self.measured.fetch_add(1, Relaxed);
    }
}

/// splitmix64's finaliser: every input bit affects every output bit.
fn mix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A backend seen through a compressing drive: I/O passes through unchanged,
/// every successful write is metered.
#[derive(Debug)]
pub struct CompressingDrive<B> {
    inner: B,
    meter: Arc<CompressionMeter>,
}

impl<B: Backend> CompressingDrive<B> {
    /// A drive of its own, storing compressed bytes exactly (granularity 1).
    pub fn new(inner: B) -> Self {
        Self::with_meter(inner, CompressionMeter::new(1))
    }

    /// Several files on one drive share a meter.
    pub fn with_meter(inner: B, meter: Arc<CompressionMeter>) -> Self {
        Self { inner, meter }
    }

    pub fn stats(&self) -> CompressionStats {
        self.meter.stats()
    }

    pub fn meter(&self) -> &Arc<CompressionMeter> {
        &self.meter
    }

    pub fn inner(&self) -> &B {
        &self.inner
    }

    /// Meters a write that has landed: `buf` at `offset`.
    fn account(&self, buf: &[u8], offset: u64) {
        let seq = self.meter.count_write(buf.len());
        let block = DEVICE_BLOCK as u64;
        let end = offset + buf.len() as u64;
        let mut at = offset;
        while at < end {
            let start = at / block * block;
            let stop = (start + block).min(end);
            if at == start && stop == start + block {
                let i = (at - offset) as usize;
                self.meter.add_whole(&buf[i..i + DEVICE_BLOCK], start, seq);
            } else {
                // Partial blocks are always measured (rare for aligned writers).
                // A failed read-back must not turn a landed write into an
                // error: count the block as stored uncompressed.
                let size = self
                    .read_block(start)
                    .map_or(DEVICE_BLOCK as u64, |b| compressed_size_4k(&b));
                self.meter.add_block(size);
            }
            at = stop;
        }
    }

    /// The current 4 KiB block at `start` (zeros past the end of the file).
    fn read_block(&self, start: u64) -> Result<AlignedBuf> {
        let align = self.inner.alignment().clamp(1, DEVICE_BLOCK);
        let avail = self
            .inner
            .size()?
            .saturating_sub(start)
            .min(DEVICE_BLOCK as u64) as usize;
        let mut buf = AlignedBuf::new(DEVICE_BLOCK, align);
        if avail == 0 {
            return Ok(buf);
        }
        buf.set_len(avail.div_ceil(align) * align);
        match self.inner.read_at(&mut buf, start) {
            Ok(()) | Err(IoError::Short { .. }) => {}
            Err(e) => return Err(e),
        }
        buf[avail..].fill(0);
        buf.set_len(DEVICE_BLOCK);
        Ok(buf)
    }
}

impl<B: Backend> Backend for CompressingDrive<B> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.inner.read_at(buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.inner.write_at(buf, offset)?;
        self.account(buf, offset);
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        self.inner.sync()
    }

    crate::backend::forward_metadata!(inner);

    /// The inner queue (a real ring for io_uring); writes are metered as they complete.
    fn queue(&self, depth: usize) -> Result<Box<dyn IoQueue + '_>> {
        Ok(Box::new(MeteredQueue {
            inner: self.inner.queue(depth)?,
            drive: self,
        }))
    }

    fn engine(&self) -> &'static str {
        self.inner.engine()
    }
}

struct MeteredQueue<'a, B> {
    inner: Box<dyn IoQueue + 'a>,
    drive: &'a CompressingDrive<B>,
}

impl<B: Backend> IoQueue for MeteredQueue<'_, B> {
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
            if c.op.kind == OpKind::Write && c.result.is_ok() {
                self.drive.account(&c.op.buf, c.op.offset);
            }
        }
        Ok(())
    }
}

/// Every file of an [`Fs`] on one emulated compressing drive. Put
/// [`crate::Faulty`] outside it, so partial-block read-backs do not shift
/// which I/O is "the Nth".
#[derive(Debug)]
pub struct CompressingFs<F> {
    inner: F,
    meter: Arc<CompressionMeter>,
}

impl<F: Fs> CompressingFs<F> {
    /// `granularity` as in [`CompressionMeter::new`].
    pub fn new(inner: F, granularity: u64) -> Self {
        Self::with_meter(inner, CompressionMeter::new(granularity))
    }

    /// Every file metered by `meter` (e.g. [`CompressionMeter::sampled`]).
    pub fn with_meter(inner: F, meter: Arc<CompressionMeter>) -> Self {
        Self { inner, meter }
    }

    pub fn stats(&self) -> CompressionStats {
        self.meter.stats()
    }

    pub fn meter(&self) -> &Arc<CompressionMeter> {
        &self.meter
    }

    pub fn inner(&self) -> &F {
        &self.inner
    }
}

impl<F: Fs> Fs for CompressingFs<F> {
    fn open(&self, path: &Path, opts: &OpenOptions) -> Result<Arc<dyn Backend>> {
        let file = self.inner.open(path, opts)?;
        Ok(Arc::new(CompressingDrive::with_meter(
            file,
            self.meter.clone(),
        )))
    }
    crate::fs::forward_namespace!(inner);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DirectMode, SimFs};
    use rand::{rngs::StdRng, RngCore, SeedableRng};

    fn lz4_len(data: &[u8]) -> u64 {
        lz4_flex::block::compress(data).len() as u64
    }

    fn random(seed: u64, n: usize) -> Vec<u8> {
        let mut v = vec![0u8; n];
        StdRng::seed_from_u64(seed).fill_bytes(&mut v);
        v
    }

    fn drive(sim: &SimFs, name: &str) -> CompressingDrive<Arc<dyn Backend>> {
        let opts = OpenOptions {
            write: true,
            create: true,
            direct: DirectMode::Off,
            ..Default::default()
        };
        CompressingDrive::new(sim.open(Path::new(name), &opts).unwrap())
    }

    #[test]
    fn zeros_cost_nothing_random_costs_a_block() {
        assert_eq!(compressed_size_4k(&[0; 4096]), 0);
        let r = random(1, 4096);
        assert!(lz4_len(&r) >= 4096, "lz4 cannot shrink random data");
        assert_eq!(compressed_size_4k(&r), 4096, "stored raw");
        let d = drive(&SimFs::new(), "/f");
        d.write_at(&[0; 4096], 0).unwrap();
        d.write_at(&r, 4096).unwrap();
        let s = d.stats();
        assert_eq!(
            (s.logical_bytes_written, s.physical_bytes_written),
            (8192, 4096)
        );
        assert_eq!((s.blocks_written, s.zero_blocks, s.write_ops), (2, 1, 2));
    }

    #[test]
    fn half_zero_page_costs_about_half() {
        let mut page = random(2, 2048);
        page.resize(4096, 0);
        let want = lz4_len(&page);
        // Bounds from lz4 itself: the random half costs what it costs alone;
        // the zero run is one match plus lz4's end-of-block literal rule (the
        // last 12 bytes cannot start a match), i.e. tens of bytes.
        let random_half = lz4_len(&page[..2048]);
        assert!(want >= random_half, "{want} < {random_half}");
        assert!(want <= random_half + 64, "{want} vs {random_half}");
        assert!(
            want * 2 < lz4_len(&random(2, 4096)) + 128,
            "about half a random page"
        );
        assert_eq!(compressed_size_4k(&page), want);
        let sim = SimFs::new();
        let meter = CompressionMeter::new(512);
        let d = CompressingDrive::with_meter(drive(&sim, "/f").inner, meter);
        d.write_at(&page, 0).unwrap();
        assert_eq!(d.stats().physical_bytes_written, want.div_ceil(512) * 512);
    }

    #[test]
    fn multi_block_unaligned_write_counts_every_touched_block() {
        let sim = SimFs::new();
        let d = drive(&sim, "/f");
        let data = random(3, 10_000);
        d.write_at(&data, 1000).unwrap(); // touches blocks 0, 1, 2
        let img = sim.contents(Path::new("/f")).unwrap();
        let mut padded = img.clone();
        padded.resize(3 * 4096, 0);
        let want: u64 = padded.chunks(4096).map(|b| lz4_len(b).min(4096)).sum();
        let s = d.stats();
        assert_eq!((s.blocks_written, s.logical_bytes_written), (3, 10_000));
        assert_eq!(s.physical_bytes_written, want);
    }

    #[test]
    fn partial_write_merges_with_the_old_block() {
        let sim = SimFs::new();
        let d = drive(&sim, "/f");
        let mut page = random(4, 1024);
        page.resize(4096, 0);
        d.write_at(&page, 0).unwrap();
        let before = d.stats().physical_bytes_written;
        // Zeroing 512 bytes inside the random part shrinks the whole block.
        d.write_at(&[0; 512], 512).unwrap();
        page[512..1024].fill(0);
        let s = d.stats();
        assert_eq!(s.physical_bytes_written - before, lz4_len(&page));
        assert_eq!(s.blocks_written, 2);
    }

    #[test]
    fn fs_shares_one_meter_and_queues_are_metered() {
        let fs = CompressingFs::new(SimFs::new(), 1);
        let opts = OpenOptions {
            write: true,
            create: true,
            direct: DirectMode::Off,
            ..Default::default()
        };
        let a = fs.open(Path::new("/a"), &opts).unwrap();
        let b = fs.open(Path::new("/b"), &opts).unwrap();
        let r = random(5, 4096);
        a.write_at(&r, 0).unwrap();
        let mut q = b.queue(2).unwrap();
        let buf = AlignedBuf::from_slice(&[0; 4096], 4096);
        q.submit(IoOp {
            kind: OpKind::Write,
            offset: 0,
            buf,
            tag: 0,
        })
        .unwrap();
        let mut out = Vec::new();
        q.wait(1, &mut out).unwrap();
        let s = fs.stats();
        assert_eq!(
            (
                s.logical_bytes_written,
                s.physical_bytes_written,
                s.write_ops
            ),
            (8192, 4096, 2)
        );
        assert!((s.ratio() - 0.5).abs() < 1e-9);
    }

    #[test]
    fn direct_file_with_uring_queue_and_sector_writes() {
        let dir = tempfile::tempdir().unwrap();
        let opts = OpenOptions {
            write: true,
            create: true,
            ..Default::default()
        };
        let d =
            CompressingDrive::new(crate::UringBackend::open(&dir.path().join("f"), &opts).unwrap());
        let a = d.alignment().max(512);
        let mut q = d.queue(4).unwrap();
        let data = random(6, a);
        for tag in 0..2u64 {
            let buf = AlignedBuf::from_slice(&data, a);
            q.submit(IoOp {
                kind: OpKind::Write,
                offset: tag * a as u64,
                buf,
                tag,
            })
            .unwrap();
        }
        let mut out = Vec::new();
        while out.len() < 2 {
            q.wait(1, &mut out).unwrap();
        }
        out.iter()
            .for_each(|c| assert!(c.result.is_ok(), "{:?}", c.result));
        drop(q);
        let s = d.stats();
        assert_eq!(s.logical_bytes_written, 2 * a as u64);
        // Every write re-counts the block it touches, as read back at that moment.
        assert!(
            s.physical_bytes_written >= lz4_len(&data).min(4096),
            "{s:?}"
        );
        assert_eq!(s.blocks_written, 2 * (a as u64).div_ceil(4096));
    }

    /// Accepts and forgets every write: the meter's tests need no storage.
    #[derive(Debug)]
    struct Sink(std::path::PathBuf);

    impl Backend for Sink {
        fn read_at(&self, buf: &mut [u8], _offset: u64) -> Result<()> {
            buf.fill(0);
            Ok(())
        }
        fn write_at(&self, _buf: &[u8], _offset: u64) -> Result<()> {
            Ok(())
        }
        fn sync(&self) -> Result<()> {
            Ok(())
        }
        fn size(&self) -> Result<u64> {
            Ok(u64::MAX / 2)
        }
        fn set_len(&self, _len: u64) -> Result<()> {
            Ok(())
        }
        fn alignment(&self) -> usize {
            1
        }
        fn is_direct(&self) -> bool {
            false
        }
        fn path(&self) -> &Path {
            &self.0
        }
    }

    /// Block `i` of a workload whose compressibility varies per block and
    /// with period 8 (as page kinds would), so a stride sampler would be biased.
    fn varied_block(i: u64, rng: &mut StdRng) -> Vec<u8> {
        let mut b = vec![0u8; DEVICE_BLOCK];
        let filled = match i % 8 {
            0 => DEVICE_BLOCK,
            1 | 2 => 0,
            _ => (rng.next_u32() as usize) % DEVICE_BLOCK,
        };
        rng.fill_bytes(&mut b[..filled]);
        b
    }

    #[test]
    fn sampled_meter_is_within_3_percent_and_exact_mode_is_exact() {
        let seed = 0x5eed_u64;
        let exact = CompressingDrive::new(Sink("/x".into()));
        let sampled =
            CompressingDrive::with_meter(Sink("/s".into()), CompressionMeter::sampled(1, 8));
        let mut rng = StdRng::seed_from_u64(seed);
        let mut hand = 0u64;
        // Two overwrites of 25,000 blocks: the same offsets again, other contents.
        for i in 0..50_000u64 {
            let b = varied_block(i, &mut rng);
            hand += compressed_size_4k(&b);
            let off = (i % 25_000) * DEVICE_BLOCK as u64;
            exact.write_at(&b, off).unwrap();
            sampled.write_at(&b, off).unwrap();
        }
        let (e, s) = (exact.stats(), sampled.stats());
        assert_eq!(e.physical_bytes_written, hand, "seed {seed}");
        assert_eq!(
            (e.sample_one_in, e.measured_blocks),
            (1, 50_000 - e.zero_blocks)
        );
        assert_eq!(
            (s.blocks_written, s.zero_blocks, s.logical_bytes_written),
            (e.blocks_written, e.zero_blocks, e.logical_bytes_written)
        );
        let nonzero = s.blocks_written - s.zero_blocks;
        let frac = s.measured_blocks as f64 / nonzero as f64;
        assert!(
            (0.11..0.14).contains(&frac),
            "measured {frac} of blocks, seed {seed}"
        );
        let err = s.physical_bytes_written as f64 / hand as f64 - 1.0;
        assert!(
            err.abs() < 0.03,
            "sampled estimate off by {err}, seed {seed}"
        );
    }

    #[test]
    fn failed_read_back_counts_a_raw_block_and_the_write_still_succeeds() {
        use crate::{FaultInjector, FaultKinds, Faulty};
        let sim = SimFs::new();
        let inj = FaultInjector::new(FaultKinds::READS, 1);
        let d = CompressingDrive::new(Faulty::new(drive(&sim, "/f").inner, inj.clone()));
        d.write_at(&[0; 100], 0).unwrap();
        assert_eq!(inj.injected(), 1, "the read-back was attempted and failed");
        assert_eq!(d.stats().physical_bytes_written, 4096);
        assert_eq!(sim.contents(Path::new("/f")).unwrap(), vec![0; 100]);
    }
}
