//! The cores the engine's helper threads may count on.

/// Cores the process may use, at most 4: what checkpoint placement splits
/// its encoding over, and whether a root's flushes pair (a second core).
/// Asked once per process: the standard library reads the cgroup's CPU
/// quota on each call (3% of a fill's committing thread when asked per
/// flush).
pub fn available() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get().min(4)))
}
