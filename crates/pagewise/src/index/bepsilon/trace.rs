//! Write-path counters of B-epsilon trees for profiling (process-wide,
//! relaxed): node bytes written by height, flushes and the message bytes
//! they moved by the child's height. Printed to stderr at each checkpoint
//! when `PAGEWISE_BEPSILON_TRACE` is set. Read-path counters per Db:
//! [`ReadCounters`].

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
    if std::env::var_os("PAGEWISE_BEPSILON_TRACE").is_none() {
        return;
    }
    let mut line = format!("bepsilon-trace gen {gen}:");
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
    filter_skips: [AtomicU64; LEVELS],
    probes: [AtomicU64; LEVELS],
}

/// One height's figures of [`ReadCounters`].
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct LevelReads {
    pub height: u32,
    pub shell_reads: u64,
    pub shell_bytes: u64,
    /// Basements (height 0) or buffers (above) read.
    pub part_reads: u64,
    pub part_bytes: u64,
    /// Gets that skipped a buffer not in memory because its filter said
    /// the key cannot be there.
    pub filter_skips: u64,
    /// Of `part_reads`, buffers a get read as a probe (scanned for its key,
    /// not cached) because the cache had no room.
    pub probes: u64,
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
                self.filter_skips[h].fetch_add(n as u64, Relaxed);
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
                filter_skips: self.filter_skips[h].load(Relaxed),
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

/// Set while a checkpoint places B-epsilon nodes (for the memory sampler).
static PLACING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub fn placing(on: bool) {
    PLACING.store(on, Relaxed);
}

/// What the engine charges, as the memory sampler reads it.
pub struct Charged {
    pub cache_bytes: u64,
    pub reserved_bytes: u64,
    pub dirty_bytes: u64,
}

/// Starts the memory sampler when `PAGEWISE_MEM_TRACE` is set to a period
/// in milliseconds: it prints to stderr the cache's charged clean bytes, the
/// dirty set's charge, the process RSS and glibc's heap figures, at every
/// new RSS maximum and every second, until `probe` returns `None` (the Db
/// closed). For measuring uncharged memory (docs/benchmarks.md, "Memory of
/// the packed fill (session 8)").
pub fn start_mem_sampler(probe: Box<dyn Fn() -> Option<Charged> + Send>) {
    let Some(period_ms) = std::env::var("PAGEWISE_MEM_TRACE")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    else {
        return;
    };
    let period_ms = period_ms.clamp(1, 10_000);
    let t0 = std::time::Instant::now();
    std::thread::spawn(move || {
        let (mut max_rss_bytes, mut last_ms) = (0u64, 0u64);
        while let Some(c) = probe() {
            let rss_bytes = rss_bytes();
            let now_ms = t0.elapsed().as_millis() as u64;
            if rss_bytes > max_rss_bytes || now_ms >= last_ms + 1000 {
                max_rss_bytes = max_rss_bytes.max(rss_bytes);
                last_ms = now_ms;
                eprintln!("{}", mem_line(now_ms, &c, rss_bytes, max_rss_bytes));
            }
            std::thread::sleep(std::time::Duration::from_millis(period_ms));
        }
    });
}

fn mem_line(now_ms: u64, c: &Charged, rss_bytes: u64, max_rss_bytes: u64) -> String {
    const MIB: f64 = (1u64 << 20) as f64;
    let mib = |b: u64| b as f64 / MIB;
    // SAFETY: mallinfo2 only reads glibc's allocator statistics.
    let m = unsafe { libc::mallinfo2() };
    format!(
        "mem-trace t_ms {now_ms} placing {} cache {:.1} reserved {:.1} dirty {:.1} charged {:.1} \
         rss {:.1} max_rss {:.1} heap_used {:.1} heap_free {:.1} mmap {:.1}",
        PLACING.load(Relaxed) as u8,
        mib(c.cache_bytes),
        mib(c.reserved_bytes),
        mib(c.dirty_bytes),
        mib(c.cache_bytes + c.dirty_bytes),
        mib(rss_bytes),
        mib(max_rss_bytes),
        mib(m.uordblks as u64 + m.hblkhd as u64),
        mib(m.fordblks as u64),
        mib(m.hblkhd as u64),
    )
}

/// The process's resident bytes (`/proc/self/statm`), 0 if unreadable.
fn rss_bytes() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages = s
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse::<u64>().ok());
    pages.unwrap_or(0) * 4096
}
