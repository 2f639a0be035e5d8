//! What a node's parts cost in heap bytes, kept up to date where they
//! change, so the cache and the dirty budget charge what the process holds
//! rather than the serialized bytes (docs/design.md, "B-epsilon nodes",
//! memory charge). Partitions are packed (buffer.rs, packed.rs): a few
//! vectors each, charged at their capacities as malloc rounds them.

use std::mem::size_of;

/// Bytes the allocator takes for a request of `n` bytes: glibc malloc's
/// chunk (an 8-byte header, 16-byte granules, 32 bytes at least); 0 bytes
/// allocate nothing.
#[inline]
pub fn alloc_bytes(n: usize) -> usize {
    if n == 0 {
        0
    } else {
        (n + 8).next_multiple_of(16).max(32)
    }
}

/// Bytes an `Arc` allocation of a `T` takes.
pub const fn arc_bytes<T>() -> usize {
    // Two reference counts before the value.
    let n = 16 + size_of::<T>();
    let chunk = (n + 8).next_multiple_of(16);
    if chunk < 32 {
        32
    } else {
        chunk
    }
}

/// `count` (elements or bytes) rounded up to a size class: a power of two
/// or one of the three quarter steps above it (at least 16). Vectors that
/// are rebuilt or grown over and over (a buffer's arena and index runs, a
/// basement's) take capacities of these classes: sized exactly, each would
/// ask for a little more than the chunk it frees, which glibc's malloc
/// cannot reuse, and the freed chunks pile up as fragments beside the dirty
/// set (docs/benchmarks.md, "Memory"). With
/// classes a rebuild mostly frees the size the next one asks for. Each
/// class is at least an eighth above the one below.
pub fn size_class(count: usize) -> usize {
    if count <= 16 {
        return 16;
    }
    let high = usize::BITS - 1 - (count - 1).leading_zeros(); // 2^high < count
    let step = 1usize << (high - 2);
    let class = (count.div_ceil(step)) * step;
    debug_assert!(class >= count && class - count < step && class <= 2 * count);
    class
}

#[cfg(test)]
pub mod counting {
    //! Live heap bytes of the current thread, counted the way
    //! [`super::alloc_bytes`] models them, for unit tests that check an
    //! estimate against what was really allocated.
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    pub struct Counting;

    thread_local! {
        static LIVE: Cell<isize> = const { Cell::new(0) };
        static PEAK: Cell<isize> = const { Cell::new(0) };
    }

    fn note(delta: isize) {
        // try_with: a thread's allocations after its locals are gone are
        // not counted (none of them is measured).
        let _ = LIVE.try_with(|c| {
            c.set(c.get() + delta);
            let _ = PEAK.try_with(|p| p.set(p.get().max(c.get())));
        });
    }

    // SAFETY: every call forwards to the system allocator unchanged.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, l: Layout) -> *mut u8 {
            note(super::alloc_bytes(l.size()) as isize);
            System.alloc(l)
        }
        unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
            note(-(super::alloc_bytes(l.size()) as isize));
            System.dealloc(p, l)
        }
        unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
            note(super::alloc_bytes(n) as isize - super::alloc_bytes(l.size()) as isize);
            System.realloc(p, l, n)
        }
    }

    #[global_allocator]
    static GLOBAL: Counting = Counting;

    /// Live bytes this thread allocated and has not freed.
    pub fn live() -> isize {
        LIVE.with(Cell::get)
    }

    /// The most [`live`] was since the last [`reset_peak`].
    pub fn peak() -> isize {
        PEAK.with(Cell::get)
    }

    /// Starts a new [`peak`] from the bytes live now.
    pub fn reset_peak() {
        PEAK.with(|p| p.set(live()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_classes_cover_counts_within_a_quarter() {
        let mut classes = std::collections::BTreeSet::new();
        for count in 0..100_000usize {
            let c = size_class(count);
            assert!(c >= count && c >= 16, "{count} -> {c}");
            assert!(
                count <= 16 || 4 * c < 5 * count + 4,
                "{count} -> {c}: over a quarter"
            );
            classes.insert(c);
        }
        // 16, four classes per doubling up to 65,536, then the three of
        // the next doubling that counts under 100,000 reach.
        assert_eq!(classes.len(), 1 + 4 * 12 + 3, "{classes:?}");
        assert_eq!(size_class(17), 20);
        assert_eq!(size_class(1000), 1024);
        assert_eq!(size_class(1025), 1280);
    }

    #[test]
    fn alloc_bytes_follows_the_chunk_sizes() {
        assert_eq!(alloc_bytes(0), 0);
        assert_eq!(alloc_bytes(1), 32);
        assert_eq!(alloc_bytes(24), 32);
        assert_eq!(alloc_bytes(25), 48);
        assert_eq!(alloc_bytes(100), 112);
        assert_eq!(alloc_bytes(4096), 4112);
    }
}
