use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// A zero-initialised heap buffer whose address is a multiple of `align`,
/// as O_DIRECT requires. Owned, so it can travel into an io_uring submission
/// and come back with the completion.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    layout: Layout,
}

// SAFETY: AlignedBuf owns its allocation exclusively, like Vec<u8>.
unsafe impl Send for AlignedBuf {}
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// Allocates `len` zero bytes aligned to `align` (a power of two).
    /// A zero `len` still allocates one aligned block so the pointer is valid.
    pub fn new(len: usize, align: usize) -> Self {
        assert!(
            align.is_power_of_two(),
            "alignment {align} is not a power of two"
        );
        let layout = Layout::from_size_align(len.max(align), align)
            .expect("buffer size overflows the address space");
        // SAFETY: layout has non-zero size.
        let raw = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        Self { ptr, len, layout }
    }

    /// A buffer holding a copy of `data`, aligned to `align`.
    pub fn from_slice(data: &[u8], align: usize) -> Self {
        let mut b = Self::new(data.len(), align);
        b.copy_from_slice(data);
        b
    }

    pub fn align(&self) -> usize {
        self.layout.align()
    }

    /// Usable capacity: the allocation may be larger than `len`.
    pub fn capacity(&self) -> usize {
        self.layout.size()
    }

    /// Changes the visible length within the allocation (no reallocation).
    pub fn set_len(&mut self, len: usize) {
        assert!(
            len <= self.capacity(),
            "set_len {len} beyond capacity {}",
            self.capacity()
        );
        self.len = len;
    }

    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with exactly this layout.
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr is valid for capacity() >= len initialised bytes.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in deref, and we hold &mut self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Clone for AlignedBuf {
    fn clone(&self) -> Self {
        Self::from_slice(self, self.align())
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlignedBuf")
            .field("len", &self.len)
            .field("align", &self.align())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_zeroed() {
        for align in [512, 4096, 65536] {
            let b = AlignedBuf::new(3 * align + 7, align);
            assert_eq!(b.as_ptr() as usize % align, 0);
            assert_eq!(b.len(), 3 * align + 7);
            assert!(b.iter().all(|&x| x == 0));
        }
    }

    #[test]
    fn clone_copies_contents() {
        let mut a = AlignedBuf::new(4096, 4096);
        a[100] = 42;
        let b = a.clone();
        assert_eq!(b[100], 42);
        assert_ne!(a.as_ptr(), b.as_ptr());
    }
}
