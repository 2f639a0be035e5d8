//! Read-path counters of one Db's B-epsilon trees, by node height,
//! reported by `Db::stats` as [`crate::stats::LevelReads`].

use crate::stats::LevelReads;
use crate::store::tally::Tally;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

const LEVELS: usize = 8;

fn level(height: u32) -> usize {
    (height as usize).min(LEVELS - 1)
}

/// Read-path counters of one Db's B-epsilon trees, by node height (the
/// last level also counts everything above it): node shells read,
/// partitions read (basements at height 0, buffers above), their bytes as
/// read from the file (whole pages), and buffer reads a key filter saved.
/// Reported by `Db::stats` (`bepsilon_reads`).
#[derive(Default)]
pub struct ReadCounters {
    shell_reads: [AtomicU64; LEVELS],
    shell_bytes: [AtomicU64; LEVELS],
    part_reads: [AtomicU64; LEVELS],
    part_bytes: [AtomicU64; LEVELS],
    /// Counted on every get that skips a buffer: striped ([`Tally`]).
    filter_skips: [Tally; LEVELS],
    probes: [AtomicU64; LEVELS],
    /// Cursor steps, and of them forward steps that went on with the last
    /// step's merge instead of descending (`iter.rs`, `Held`): striped.
    pub scan_steps: Tally,
    pub scan_resumes: Tally,
}

impl ReadCounters {
    pub fn shell_read(&self, height: u32, reads: u64, bytes: u64) {
        self.shell_reads[level(height)].fetch_add(reads, Relaxed);
        self.shell_bytes[level(height)].fetch_add(bytes, Relaxed);
    }

    pub fn part_read(&self, height: u32, bytes: u64) {
        self.part_reads[level(height)].fetch_add(1, Relaxed);
        self.part_bytes[level(height)].fetch_add(bytes, Relaxed);
    }

    pub fn probe_read(&self, height: u32, bytes: u64) {
        self.part_read(height, bytes);
        self.probes[level(height)].fetch_add(1, Relaxed);
    }

    /// Adds `skips[h]` filter skips at each height `h`.
    pub fn filter_skipped(&self, skips: &[u32; LEVELS]) {
        for (h, &n) in skips.iter().enumerate() {
            if n > 0 {
                self.filter_skips[h].add(n as u64);
            }
        }
    }

    /// The heights with any read or skip, lowest first.
    pub fn snapshot(&self) -> Vec<LevelReads> {
        let mut out = Vec::new();
        for h in 0..LEVELS {
            let l = LevelReads {
                height: h as u32,
                shell_reads: self.shell_reads[h].load(Relaxed),
                shell_bytes: self.shell_bytes[h].load(Relaxed),
                part_reads: self.part_reads[h].load(Relaxed),
                part_bytes: self.part_bytes[h].load(Relaxed),
                filter_skips: self.filter_skips[h].load(),
                probes: self.probes[h].load(Relaxed),
            };
            if l != (LevelReads {
                height: h as u32,
                ..LevelReads::default()
            }) {
                out.push(l);
            }
        }
        assert!(out.len() <= LEVELS);
        out
    }
}

/// Index of `height` in per-level arrays.
pub fn level_of(height: u32) -> usize {
    level(height)
}

/// Levels of the per-height counters.
pub const READ_LEVELS: usize = LEVELS;
