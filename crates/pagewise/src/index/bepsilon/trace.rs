//! Write-path counters of B-epsilon trees for profiling (process-wide,
//! relaxed): node bytes written by height, flushes and the message bytes
//! they moved by the child's height. Printed to stderr at each checkpoint
//! when `PAGEWISE_BEPS_TRACE` is set.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

const LEVELS: usize = 8;
static WRITTEN_BYTES: [AtomicU64; LEVELS] = [const { AtomicU64::new(0) }; LEVELS];
static WRITTEN_NODES: [AtomicU64; LEVELS] = [const { AtomicU64::new(0) }; LEVELS];
static FLUSHES: [AtomicU64; LEVELS] = [const { AtomicU64::new(0) }; LEVELS];
static MOVED_BYTES: [AtomicU64; LEVELS] = [const { AtomicU64::new(0) }; LEVELS];
static CHILD_BYTES: [AtomicU64; LEVELS] = [const { AtomicU64::new(0) }; LEVELS];

fn level(height: u32) -> usize {
    (height as usize).min(LEVELS - 1)
}

pub fn node_written(height: u32, bytes: usize) {
    WRITTEN_BYTES[level(height)].fetch_add(bytes as u64, Relaxed);
    WRITTEN_NODES[level(height)].fetch_add(1, Relaxed);
}

/// A flush moved `moved_bytes` into a child at `height` of `child_bytes` before.
pub fn flushed(height: u32, moved_bytes: usize, child_bytes: usize) {
    FLUSHES[level(height)].fetch_add(1, Relaxed);
    MOVED_BYTES[level(height)].fetch_add(moved_bytes as u64, Relaxed);
    CHILD_BYTES[level(height)].fetch_add(child_bytes as u64, Relaxed);
}

pub fn report(gen: u64) {
    if std::env::var_os("PAGEWISE_BEPS_TRACE").is_none() {
        return;
    }
    let mut line = format!("beps-trace gen {gen}:");
    for h in 0..LEVELS {
        let (nb, nn) = (
            WRITTEN_BYTES[h].load(Relaxed),
            WRITTEN_NODES[h].load(Relaxed),
        );
        let (f, mv, cb) = (
            FLUSHES[h].load(Relaxed),
            MOVED_BYTES[h].load(Relaxed),
            CHILD_BYTES[h].load(Relaxed),
        );
        if nn + f > 0 {
            line += &format!(
                " h{h}: written {nb} B in {nn} nodes, {f} flushes moved {mv} B into {cb} B;"
            );
        }
    }
    eprintln!("{line}");
}
