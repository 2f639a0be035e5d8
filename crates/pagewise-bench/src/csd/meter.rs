//! What a drive with per-block hardware compression (seed 003: ScaleFlux
//! CSD-class) stores for the writes it receives: every 4 KiB block is
//! compressed on its own and only the compressed bytes reach the flash.
//!
//! Rules, the same as pagewise-io's `CompressingFs` so both meters agree:
//! - a block is addressed by file offset, aligned down to 4 KiB;
//! - a write covering part of a block rewrites the whole block, so the block
//!   is read back after the write (old bytes merged with new, zeros beyond the
//!   end of the file) and compressed in full;
//! - an all-zero block costs 0 bytes (drives keep it as metadata);
//! - an incompressible block is stored raw: at most 4096 bytes.
//!
//! Two compressors: raw deflate (zlib-class: the hardware engines of such
//! drives implement deflate/gzip) at [`ZLIB_LEVEL`], and lz4 (block format,
//! pagewise-io's `compressed_size_4k`) for comparison with the engine's own meter.

use flate2::{Compress, Compression, FlushCompress};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The unit the emulated drive compresses independently.
pub const BLOCK_BYTES: usize = 4096;

/// Deflate level of the zlib figure. Level 1 (zlib's fastest): hardware
/// deflate engines use short search windows and lazy-free matching, close to
/// level 1-3 ratios; level 1 also keeps the meter's CPU (charged to the
/// benchmark process) at about a third of level 6's.
pub const ZLIB_LEVEL: u32 = 1;

thread_local! {
    static DEFLATE: RefCell<(Compress, Vec<u8>)> =
        RefCell::new((Compress::new(Compression::new(ZLIB_LEVEL), false), Vec::new()));
}

/// Bytes the drive stores for `block` with raw deflate at [`ZLIB_LEVEL`]:
/// 0 for an all-zero block, else the compressed length capped at the block length.
pub fn zlib_stored_bytes(block: &[u8]) -> u64 {
    if block.iter().all(|&b| b == 0) {
        return 0;
    }
    let n = DEFLATE.with(|c| {
        let (z, out) = &mut *c.borrow_mut();
        z.reset();
        // Stored (uncompressed) deflate blocks add 5 bytes per 64 KiB: 2x is ample.
        out.clear();
        out.reserve(2 * block.len() + 64);
        let status = z
            .compress_vec(block, out, FlushCompress::Finish)
            .expect("deflate of an in-memory buffer cannot fail");
        debug_assert_eq!(status, flate2::Status::StreamEnd);
        z.total_out() as usize
    });
    n.min(block.len()) as u64
}

/// Bytes the drive stores for `block` with lz4 (same rules).
pub fn lz4_stored_bytes(block: &[u8]) -> u64 {
    pagewise_io::compressed_size_4k(block)
}

/// Counters of one emulated drive (or their difference over a phase).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CsdStats {
    /// Bytes handed to the mount's write calls.
    pub logical_bytes: u64,
    /// Write calls served.
    pub write_ops: u64,
    /// Of those, writes of the kernel's page cache (mmap'd pages written back).
    pub page_cache_writes: u64,
    /// 4 KiB blocks (re)written, partial ones included.
    pub blocks_written: u64,
    /// Of those, all-zero blocks (stored as 0 bytes).
    pub zero_blocks: u64,
    /// Stored bytes under raw deflate at `zlib_level`.
    pub zlib_bytes: u64,
    /// Stored bytes under lz4.
    pub lz4_bytes: u64,
    pub zlib_level: u32,
    /// Opens that asked for O_DIRECT (served without it: see `csd::fs`).
    pub direct_opens: u64,
    /// fallocate calls passed through (they write no data and are not metered).
    pub fallocates: u64,
    /// The kernel cached writes above the mount (FUSE writeback caching), so
    /// rewrites were coalesced as above a block device (absent in results
    /// from before it was used: writes were then metered as issued).
    #[serde(default)]
    pub writeback_cache: bool,
}

impl CsdStats {
    /// What happened between `before` and `self` (counters only grow).
    pub fn since(&self, before: &CsdStats) -> CsdStats {
        let d = |a: u64, b: u64| a.saturating_sub(b);
        CsdStats {
            logical_bytes: d(self.logical_bytes, before.logical_bytes),
            write_ops: d(self.write_ops, before.write_ops),
            page_cache_writes: d(self.page_cache_writes, before.page_cache_writes),
            blocks_written: d(self.blocks_written, before.blocks_written),
            zero_blocks: d(self.zero_blocks, before.zero_blocks),
            zlib_bytes: d(self.zlib_bytes, before.zlib_bytes),
            lz4_bytes: d(self.lz4_bytes, before.lz4_bytes),
            zlib_level: self.zlib_level,
            direct_opens: d(self.direct_opens, before.direct_opens),
            fallocates: d(self.fallocates, before.fallocates),
            writeback_cache: self.writeback_cache,
        }
    }
}

/// Shared, thread-safe counters.
#[derive(Debug, Default)]
pub struct CsdMeter {
    logical: AtomicU64,
    writes: AtomicU64,
    page_cache_writes: AtomicU64,
    blocks: AtomicU64,
    zero_blocks: AtomicU64,
    zlib: AtomicU64,
    lz4: AtomicU64,
    pub(crate) direct_opens: AtomicU64,
    pub(crate) fallocates: AtomicU64,
    pub(crate) writeback_cache: std::sync::atomic::AtomicBool,
}

impl CsdMeter {
    pub fn stats(&self) -> CsdStats {
        CsdStats {
            logical_bytes: self.logical.load(Relaxed),
            write_ops: self.writes.load(Relaxed),
            page_cache_writes: self.page_cache_writes.load(Relaxed),
            blocks_written: self.blocks.load(Relaxed),
            zero_blocks: self.zero_blocks.load(Relaxed),
            zlib_bytes: self.zlib.load(Relaxed),
            lz4_bytes: self.lz4.load(Relaxed),
            zlib_level: ZLIB_LEVEL,
            direct_opens: self.direct_opens.load(Relaxed),
            fallocates: self.fallocates.load(Relaxed),
            writeback_cache: self.writeback_cache.load(Relaxed),
        }
    }

    /// Meters one write of `data` at file `offset`, already applied to the file.
    ///
    /// Requires: `read_block(start, buf)` fills `buf` (4 KiB) with the file's
    /// bytes at `start` after the write, zeros beyond the end of file. It is
    /// called only for blocks the write covers partly.
    pub fn record(
        &self,
        offset: u64,
        data: &[u8],
        from_page_cache: bool,
        read_block: &mut dyn FnMut(u64, &mut [u8]) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        self.logical.fetch_add(data.len() as u64, Relaxed);
        self.writes.fetch_add(1, Relaxed);
        if from_page_cache {
            self.page_cache_writes.fetch_add(1, Relaxed);
        }
        if data.is_empty() {
            return Ok(());
        }
        let bs = BLOCK_BYTES as u64;
        let end = offset + data.len() as u64;
        let (first, last) = (offset / bs, (end - 1) / bs);
        debug_assert!(first <= last);
        let mut buf = [0u8; BLOCK_BYTES];
        // Bounded: one iteration per block the write touches.
        for b in first..=last {
            let start = b * bs;
            let block: &[u8] = if start >= offset && start + bs <= end {
                let at = (start - offset) as usize;
                &data[at..at + BLOCK_BYTES]
            } else {
                read_block(start, &mut buf)?;
                &buf
            };
            self.add_block(block);
        }
        Ok(())
    }

    fn add_block(&self, block: &[u8]) {
        debug_assert_eq!(block.len(), BLOCK_BYTES);
        self.blocks.fetch_add(1, Relaxed);
        if block.iter().all(|&b| b == 0) {
            self.zero_blocks.fetch_add(1, Relaxed);
            return;
        }
        self.zlib.fetch_add(zlib_stored_bytes(block), Relaxed);
        self.lz4.fetch_add(lz4_stored_bytes(block), Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::write::DeflateEncoder;
    use rand::{RngCore, SeedableRng};
    use std::io::Write;

    /// Independent expectations: the compressors called directly on the block.
    fn deflate_len(block: &[u8]) -> u64 {
        let mut e = DeflateEncoder::new(Vec::new(), Compression::new(ZLIB_LEVEL));
        e.write_all(block).unwrap();
        e.finish().unwrap().len() as u64
    }
    fn lz4_len(block: &[u8]) -> u64 {
        lz4_flex::block::compress(block).len() as u64
    }

    /// Applies `data` at `offset` to an in-memory file and meters it.
    fn write(meter: &CsdMeter, file: &mut Vec<u8>, offset: usize, data: &[u8]) {
        if file.len() < offset + data.len() {
            file.resize(offset + data.len(), 0);
        }
        file[offset..offset + data.len()].copy_from_slice(data);
        let snapshot = file.clone();
        meter
            .record(offset as u64, data, false, &mut |s, b| {
                b.fill(0);
                let s = s as usize;
                let end = (s + b.len()).min(snapshot.len());
                if s < end {
                    b[..end - s].copy_from_slice(&snapshot[s..end]);
                }
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn zero_block_costs_nothing() {
        let m = CsdMeter::default();
        write(&m, &mut Vec::new(), 0, &[0u8; 4096]);
        let s = m.stats();
        assert_eq!((s.blocks_written, s.zero_blocks), (1, 1));
        assert_eq!((s.zlib_bytes, s.lz4_bytes, s.logical_bytes), (0, 0, 4096));
    }

    #[test]
    fn repeated_byte_block_is_tiny_and_matches_the_compressors() {
        let block = [0xabu8; 4096];
        let m = CsdMeter::default();
        write(&m, &mut Vec::new(), 8192, &block);
        let s = m.stats();
        assert_eq!((s.blocks_written, s.zero_blocks), (1, 0));
        assert_eq!(s.zlib_bytes, deflate_len(&block));
        assert_eq!(s.lz4_bytes, lz4_len(&block));
        assert!(
            s.zlib_bytes < 64,
            "a run of one byte deflates to a few bytes"
        );
    }

    #[test]
    fn random_block_is_stored_raw() {
        let mut block = [0u8; 4096];
        let seed = 7;
        rand::rngs::StdRng::seed_from_u64(seed).fill_bytes(&mut block);
        assert!(
            deflate_len(&block) > 4096 && lz4_len(&block) > 4096,
            "seed {seed}"
        );
        let m = CsdMeter::default();
        write(&m, &mut Vec::new(), 0, &block);
        let s = m.stats();
        assert_eq!((s.zlib_bytes, s.lz4_bytes), (4096, 4096));
    }

    #[test]
    fn partial_write_is_the_whole_block_padded_with_zeros() {
        let m = CsdMeter::default();
        let mut file = Vec::new();
        let data: Vec<u8> = (0..100u32).map(|i| (i * 7 + 1) as u8).collect();
        write(&m, &mut file, 2 * 4096 + 50, &data);
        let mut block = [0u8; 4096];
        block[50..150].copy_from_slice(&data);
        let s = m.stats();
        assert_eq!((s.blocks_written, s.logical_bytes), (1, 100));
        assert_eq!(s.zlib_bytes, deflate_len(&block));
        assert_eq!(s.lz4_bytes, lz4_len(&block));
        // A second append to the same block is metered with the first one's bytes.
        write(&m, &mut file, 2 * 4096 + 150, &data);
        block[150..250].copy_from_slice(&data);
        let s2 = m.stats().since(&s);
        assert_eq!(s2.zlib_bytes, deflate_len(&block));
        assert_eq!(s2.blocks_written, 1);
    }

    #[test]
    fn unaligned_write_touches_each_block_once() {
        let m = CsdMeter::default();
        let mut file = vec![0x11u8; 5 * 4096];
        let data = vec![0x22u8; 2 * 4096];
        write(&m, &mut file, 4096 + 1000, &data);
        let s = m.stats();
        assert_eq!(
            (s.blocks_written, s.write_ops, s.logical_bytes),
            (3, 1, 8192)
        );
        let expect: u64 = [1usize, 2, 3]
            .iter()
            .map(|b| deflate_len(&file[b * 4096..(b + 1) * 4096]))
            .sum();
        assert_eq!(s.zlib_bytes, expect);
    }
}
