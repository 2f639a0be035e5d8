//! The process heap's free pages go back to the OS: the cache and the dirty
//! budget charge what the engine holds, but glibc keeps the chunks that
//! evicted and replaced images freed, beside the budget (docs/benchmarks.md,
//! "Memory").

/// Returns the heap's free pages to the OS (glibc's `malloc_trim`, which
/// also releases whole free pages inside its arenas). Called at each
/// checkpoint's start and end, and by [`release_at_dirty_step`]: the charge
/// counts the bytes the engine holds, but glibc keeps what the cache evicted
/// and the dirty set replaced, 65 MiB beside a 256 MiB cache at the peak of
/// a 5M fill, over the budget's slack. Dbs whose dirty budget `limit_bytes` is under [`TRIM_MIN_DIRTY_BYTES`] are not trimmed.
/// Returns whether it trimmed.
pub fn release_free_heap(limit_bytes: u64) -> bool {
    if limit_bytes < TRIM_MIN_DIRTY_BYTES {
        return false;
    }
    trim()
}

/// Dirty budgets below this are not trimmed: the free heap they leave is a
/// few MiB at most, while a trim walks the whole heap (the crash
/// simulation's tiny Dbs, checkpointing every few commits, ran 4.4x slower
/// with a trim at each: 50.0 s against 11.3 s for 3,000 cases).
pub const TRIM_MIN_DIRTY_BYTES: u64 = 16 << 20;

/// Trims when the dirty set's charge `dirty_bytes` enters a new eighth of
/// `limit_bytes` (the images the cache evicted for it are freed by then):
/// the free heap a fill leaves between checkpoints, 3 MiB at 5M and 4 MiB
/// at 1M of the peaks, for 0.2-0.7 us more system time per insert.
/// Returns whether it trimmed.
pub fn release_at_dirty_step(dirty_bytes: u64, limit_bytes: u64) -> bool {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    static LAST_STEP: AtomicU64 = AtomicU64::new(0);
    assert!(limit_bytes > 0);
    if limit_bytes < TRIM_MIN_DIRTY_BYTES {
        return false;
    }
    let step = dirty_bytes.saturating_mul(8) / limit_bytes;
    if LAST_STEP.swap(step, Relaxed) == step || step == 0 {
        return false;
    }
    trim()
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() -> bool {
    // SAFETY: malloc_trim only walks and releases glibc's free chunks.
    unsafe { libc::malloc_trim(0) };
    true
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() -> bool {
    false
}
