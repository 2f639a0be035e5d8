//! What the process and host say: write syscall bytes, CPU time, peak RSS,
//! bytes on disk, host description.

use serde::{Deserialize, Serialize};
use std::path::Path;

/// Bytes handed to write-family syscalls by this process (`wchar` in /proc/self/io).
/// Not `write_bytes`: on this kernel a small write into a large page-cache folio
/// is charged as the whole folio, so it overstates what reaches the disk.
/// Plus the bytes written through pagewise-io's io_uring queues, which
/// bypass write(2) and so are not in `wchar`.
pub fn kernel_write_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/io").ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("wchar:"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|w| w + pagewise_io::ring_write_bytes())
}

/// User and system CPU seconds of the whole process (every thread).
pub fn cpu_times() -> (f64, f64) {
    // SAFETY: getrusage fills the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (s(ru.ru_utime), s(ru.ru_stime))
}

/// Resets the peak-RSS watermark (VmHWM) so the next reading covers one phase.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Peak resident set size in bytes since the last reset (VmHWM).
pub fn peak_rss() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: u64 = s
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// Bytes allocated on disk under `dir` (st_blocks, so sparse holes do not count).
pub fn disk_usage(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => disk_usage(&e.path()),
            Ok(m) => m.blocks() * 512,
            Err(_) => 0,
        })
        .sum()
}

/// The machine a result came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Host {
    pub hostname: String,
    pub kernel: String,
    pub cpus: usize,
    pub cpu_model: String,
    pub mem_bytes: u64,
}

impl Host {
    pub fn detect() -> Self {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        let cpu_model = read("/proc/cpuinfo")
            .lines()
            .find_map(|l| {
                l.strip_prefix("model name")
                    .map(|r| r.trim_start_matches([' ', '\t', ':']).to_string())
            })
            .unwrap_or_default();
        let mem_bytes = read("/proc/meminfo")
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap_or(0)
            * 1024;
        Self {
            hostname: read("/proc/sys/kernel/hostname").trim().into(),
            kernel: read("/proc/sys/kernel/osrelease").trim().into(),
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu_model,
            mem_bytes,
        }
    }
}
